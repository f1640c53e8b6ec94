/*
 * npz.c: read one one-dimensional array of a NumPy .npz archive, as
 * np.savez writes it (tokenize's tokens.npz): a zip of .npy files, stored
 * without compression, with zip64 extra fields (numpy forces them). Only
 * what the register stage needs: int32 arrays and fixed-width unicode
 * string arrays ('<i4', '<U<n>'), C order.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plio.h"

static uint16_t
le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t
le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

static uint64_t
le64(const unsigned char *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int
pread_all(FILE *f, uint64_t off, void *buf, size_t n)
{
	return fseeko(f, (off_t)off, SEEK_SET) == 0 && fread(buf, 1, n, f) == n ? 0 : -1;
}

/* The local header offset and size of member NAME, from the central
 * directory. */
static int
find_member(FILE *f, const char *path, const char *name, uint64_t *off, uint64_t *size,
    char *err, size_t errlen)
{
	unsigned char tail[65536 + 22], *eocd = NULL;
	off_t end;
	size_t n;

	if (fseeko(f, 0, SEEK_END) != 0 || (end = ftello(f)) < 22) {
		snprintf(err, errlen, "%s: not a zip archive (too short)", path);
		return -1;
	}
	n = (size_t)(end < (off_t)sizeof(tail) ? end : (off_t)sizeof(tail));
	if (pread_all(f, (uint64_t)end - n, tail, n) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	for (size_t i = n - 22 + 1; i-- > 0; )
		if (le32(tail + i) == 0x06054b50) {
			eocd = tail + i;
			break;
		}
	if (eocd == NULL) {
		snprintf(err, errlen, "%s: not a zip archive (no end of central directory)", path);
		return -1;
	}
	uint64_t cd_off = le32(eocd + 16), cd_size = le32(eocd + 12);
	unsigned entries = le16(eocd + 10);
	if (cd_off == 0xffffffffu || entries == 0xffff) {
		/* The zip64 end record, through its locator just before. */
		unsigned char loc[20], rec[56];
		if (eocd - tail < 20 || le32(eocd - 20) != 0x07064b50) {
			snprintf(err, errlen, "%s: zip64 archive without a locator", path);
			return -1;
		}
		memcpy(loc, eocd - 20, 20);
		if (pread_all(f, le64(loc + 8), rec, sizeof(rec)) == -1 ||
		    le32(rec) != 0x06064b50) {
			snprintf(err, errlen, "%s: bad zip64 end of central directory", path);
			return -1;
		}
		entries = (unsigned)le64(rec + 32);
		cd_size = le64(rec + 40);
		cd_off = le64(rec + 48);
	}
	if (cd_size > (64u << 20)) {
		snprintf(err, errlen, "%s: central directory of %llu bytes", path,
		    (unsigned long long)cd_size);
		return -1;
	}
	unsigned char *cd = malloc(cd_size ? cd_size : 1);
	if (cd == NULL || pread_all(f, cd_off, cd, cd_size) == -1) {
		snprintf(err, errlen, "%s: reading the central directory: %s", path,
		    strerror(errno));
		free(cd);
		return -1;
	}
	size_t want = strlen(name);
	for (size_t p = 0, i = 0; i < entries && p + 46 <= cd_size; i++) {
		const unsigned char *e = cd + p;
		unsigned nl = le16(e + 28), xl = le16(e + 30), cl = le16(e + 32);
		if (le32(e) != 0x02014b50 || p + 46 + nl + xl > cd_size)
			break;
		if (nl == want && memcmp(e + 46, name, nl) == 0) {
			uint64_t csz = le32(e + 20), usz = le32(e + 24), lo = le32(e + 42);
			const unsigned char *x = e + 46 + nl, *xe = x + xl;
			while (x + 4 <= xe) {
				unsigned id = le16(x), len = le16(x + 2);
				const unsigned char *v = x + 4;
				if (id == 0x0001) {
					if (usz == 0xffffffffu && v + 8 <= x + 4 + len)
						usz = le64(v), v += 8;
					if (csz == 0xffffffffu && v + 8 <= x + 4 + len)
						csz = le64(v), v += 8;
					if (lo == 0xffffffffu && v + 8 <= x + 4 + len)
						lo = le64(v);
				}
				x += 4 + len;
			}
			if (le16(e + 10) != 0 || csz != usz) {
				snprintf(err, errlen, "%s: %s is compressed (np.savez_compressed?); "
				    "only np.savez archives are read", path, name);
				free(cd);
				return -1;
			}
			unsigned char lh[30];
			if (pread_all(f, lo, lh, sizeof(lh)) == -1 || le32(lh) != 0x04034b50) {
				snprintf(err, errlen, "%s: %s: bad local header", path, name);
				free(cd);
				return -1;
			}
			*off = lo + 30 + le16(lh + 26) + le16(lh + 28);
			*size = usz;
			free(cd);
			return 0;
		}
		p += 46 + nl + xl + cl;
	}
	free(cd);
	snprintf(err, errlen, "%s: no array %.*s", path, (int)(want > 4 ? want - 4 : want), name);
	errno = ENOENT;
	return -1;
}

int
npz_read(const char *path, const char *array, struct npz_array *a, char *err, size_t errlen)
{
	char member[256], hdr[4096];
	unsigned char pre[12];
	uint64_t off, size, hlen;
	FILE *f;
	int rc = -1;

	memset(a, 0, sizeof(*a));
	snprintf(member, sizeof(member), "%s.npy", array);
	if ((f = plc_fopen_in(path)) == NULL) {
		snprintf(err, errlen, "%s: %s", path, plc_open_strerror(errno));
		return -1;
	}
	if (find_member(f, path, member, &off, &size, err, errlen) == -1)
		goto out;
	if (size < 10 || pread_all(f, off, pre, 10) == -1 ||
	    memcmp(pre, "\x93NUMPY", 6) != 0) {
		snprintf(err, errlen, "%s: %s is not a .npy array", path, array);
		goto out;
	}
	if (pre[6] == 1) {
		hlen = le16(pre + 8);
		off += 10;
	} else {
		if (pread_all(f, off, pre, 12) == -1)
			goto bad;
		hlen = le32(pre + 8);
		off += 12;
	}
	if (hlen >= sizeof(hdr) || pread_all(f, off, hdr, hlen) == -1)
		goto bad;
	hdr[hlen] = '\0';
	off += hlen;
	size -= (pre[6] == 1 ? 10 : 12) + hlen;
	/* {'descr': '<i4', 'fortran_order': False, 'shape': (40,), } */
	const char *d = strstr(hdr, "'descr':"), *s = strstr(hdr, "'shape':");
	if (d == NULL || s == NULL || strstr(hdr, "'fortran_order': True") != NULL)
		goto bad;
	if (sscanf(d + 8, " '%15[^']'", a->descr) != 1)
		goto bad;
	unsigned long long n;
	if (sscanf(s + 8, " (%llu,)", &n) != 1) {
		snprintf(err, errlen, "%s: %s: only one-dimensional arrays are read (%s)", path,
		    array, s + 8);
		goto out;
	}
	if (strcmp(a->descr, "<i4") == 0)
		a->itemsize = 4;
	else if (strncmp(a->descr, "<U", 2) == 0 && atoi(a->descr + 2) > 0)
		a->itemsize = 4 * (size_t)atoi(a->descr + 2);
	else {
		snprintf(err, errlen, "%s: %s has dtype %s; int32 or unicode expected", path,
		    array, a->descr);
		goto out;
	}
	if (n * a->itemsize != size) {
		snprintf(err, errlen, "%s: %s: %llu items of %zu bytes in %llu bytes", path,
		    array, n, a->itemsize, (unsigned long long)size);
		goto out;
	}
	a->n = (size_t)n;
	if ((a->data = malloc(size ? size : 1)) == NULL || pread_all(f, off, a->data, size) == -1) {
		snprintf(err, errlen, "%s: %s: %s", path, array, strerror(errno));
		goto out;
	}
	rc = 0;
	goto out;
bad:
	snprintf(err, errlen, "%s: %s: bad .npy header", path, array);
out:
	if (rc == -1)
		npz_free(a);
	fclose(f);
	return rc;
}

int32_t
npz_int(const struct npz_array *a, size_t i)
{
	return (int32_t)le32((const unsigned char *)a->data + 4 * i);
}

/* Item I of a unicode array as UTF-8 (the code points, trailing NULs
 * dropped); returns the length, or -1 when it does not fit. */
int
npz_str(const struct npz_array *a, size_t i, char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)a->data + a->itemsize * i;
	size_t o = 0;

	for (size_t k = 0; k < a->itemsize / 4; k++) {
		uint32_t c = le32(p + 4 * k);
		unsigned char u[4];
		size_t m;
		if (c == 0)
			break;
		if (c < 0x80)
			u[0] = (unsigned char)c, m = 1;
		else if (c < 0x800)
			u[0] = 0xc0 | c >> 6, u[1] = 0x80 | (c & 0x3f), m = 2;
		else if (c < 0x10000)
			u[0] = 0xe0 | c >> 12, u[1] = 0x80 | (c >> 6 & 0x3f),
			    u[2] = 0x80 | (c & 0x3f), m = 3;
		else
			u[0] = 0xf0 | c >> 18, u[1] = 0x80 | (c >> 12 & 0x3f),
			    u[2] = 0x80 | (c >> 6 & 0x3f), u[3] = 0x80 | (c & 0x3f), m = 4;
		if (o + m + 1 > len)
			return -1;
		memcpy(buf + o, u, m);
		o += m;
	}
	buf[o] = '\0';
	return (int)o;
}

void
npz_free(struct npz_array *a)
{
	free(a->data);
	a->data = NULL;
	a->n = 0;
}
