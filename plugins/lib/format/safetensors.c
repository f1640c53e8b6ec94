/*
 * safetensors.c: a validating reader and an atomic writer for safetensors
 * files and sharded checkpoints. The rules are those of the reference
 * reader (the Rust crate, see HACKING.md: safetensors); the
 * writer lays headers out as the reference writer does (compact JSON,
 * __metadata__ first, padded with spaces to a multiple of 8).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "plio.h"
#include "safetensors.h"

static const struct {
	const char *name;
	int bits;
} dtypes[] = {
#define ST_X_TAB(e, s, b) { s, b },
	ST_DTYPES(ST_X_TAB)
#undef ST_X_TAB
};

const char *
st_dtype_name(int dtype)
{
	if (dtype < 0 || dtype >= ST_NDTYPES)
		return "?";
	return dtypes[dtype].name;
}

int
st_dtype_parse(const char *s)
{
	for (int i = 0; i < ST_NDTYPES; i++)
		if (strcmp(s, dtypes[i].name) == 0)
			return i;
	return -1;
}

int
st_dtype_bits(int dtype)
{
	if (dtype < 0 || dtype >= ST_NDTYPES)
		return 0;
	return dtypes[dtype].bits;
}

int
st_is_float(int dtype)
{
	return dtype == ST_F16 || dtype == ST_BF16 || dtype == ST_F32 || dtype == ST_F64;
}

/* ------------------------------------------------------------ reading */

/* Strict UTF-8 check (no overlongs, no surrogates, at most U+10FFFF), as
 * Rust's str::from_utf8 applies it. */
static int
utf8_valid(const unsigned char *s, size_t n, size_t *bad)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		size_t k;
		unsigned min, cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xE0) == 0xC0) {
			k = 1; min = 0x80; cp = c & 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			k = 2; min = 0x800; cp = c & 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			k = 3; min = 0x10000; cp = c & 0x07;
		} else {
			*bad = i;
			return 0;
		}
		for (size_t j = 1; j <= k; j++) {
			if (i + j >= n || (s[i + j] & 0xC0) != 0x80) {
				*bad = i;
				return 0;
			}
			cp = (cp << 6) | (s[i + j] & 0x3F);
		}
		if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
			*bad = i;
			return 0;
		}
		i += k + 1;
	}
	return 1;
}

/* A JSON number that is a non-negative integer exactly representable in a
 * double (every offset and dimension a real file can have). */
static int
json_u64(const cJSON *v, uint64_t *out)
{
	if (!cJSON_IsNumber(v))
		return -1;
	double d = v->valuedouble;
	if (!(d >= 0) || d > 9007199254740992.0 || d != floor(d))
		return -1;
	*out = (uint64_t)d;
	return 0;
}

static int
cmp_offset(const void *a, const void *b)
{
	const struct st_tensor *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int
cmp_tensor_name(const void *a, const void *b)
{
	const struct st_tensor *const *x = a, *const *y = b;
	return strcmp((*x)->name, (*y)->name);
}

static void
free_tensors(struct st_tensor *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(t[i].name);
	free(t);
}

int
st_parse_header(struct st_file *f, const char *label, const char *hdr, size_t len,
    uint64_t data_size, char *err, size_t errlen)
{
	size_t bad = 0;
	cJSON *root = NULL;
	struct st_tensor *t = NULL;
	struct st_meta *meta = NULL;
	size_t n = 0, nmeta = 0;

	f->tensors = NULL;
	f->ntensors = 0;
	f->meta = NULL;
	f->nmeta = 0;
	if (!utf8_valid((const unsigned char *)hdr, len, &bad)) {
		plc_seterr(err, errlen, "%s: header is not valid UTF-8 (byte %zu of the header)",
		    label, bad);
		return -1;
	}
	if (memchr(hdr, '\0', len) != NULL) {
		plc_seterr(err, errlen, "%s: header contains a NUL byte", label);
		return -1;
	}
	const char *end = NULL;
	root = cJSON_ParseWithLengthOpts(hdr, len, &end, 0);
	if (root == NULL) {
		const char *at = cJSON_GetErrorPtr();
		size_t pos = (at && at >= hdr && at <= hdr + len) ? (size_t)(at - hdr) : 0;
		plc_seterr(err, errlen, "%s: header is not valid JSON (near byte %zu of the header)",
		    label, pos);
		return -1;
	}
	/* After the JSON only whitespace may follow (writers pad with spaces). */
	for (const char *p = end; p < hdr + len; p++) {
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
			plc_seterr(err, errlen, "%s: header has bytes after its JSON object "
			    "(byte %zu of the header)", label, (size_t)(p - hdr));
			goto fail;
		}
	}
	if (!cJSON_IsObject(root)) {
		plc_seterr(err, errlen, "%s: header is not a JSON object", label);
		goto fail;
	}
	size_t count = 0;
	for (cJSON *e = root->child; e; e = e->next)
		count++;
	t = calloc(count ? count : 1, sizeof(*t));
	if (t == NULL) {
		plc_seterr(err, errlen, "%s: out of memory for %zu tensors", label, count);
		goto fail;
	}
	int seen_meta = 0;
	for (cJSON *e = root->child; e; e = e->next) {
		const char *name = e->string;
		if (strcmp(name, "__metadata__") == 0) {
			if (seen_meta++) {
				plc_seterr(err, errlen, "%s: __metadata__ appears twice", label);
				goto fail;
			}
			if (!cJSON_IsObject(e)) {
				plc_seterr(err, errlen, "%s: __metadata__ is not an object", label);
				goto fail;
			}
			size_t m = 0;
			for (cJSON *k = e->child; k; k = k->next)
				m++;
			meta = calloc(m ? m : 1, sizeof(*meta));
			if (meta == NULL) {
				plc_seterr(err, errlen, "%s: out of memory", label);
				goto fail;
			}
			for (cJSON *k = e->child; k; k = k->next) {
				if (!cJSON_IsString(k)) {
					plc_seterr(err, errlen, "%s: __metadata__ value of \"%s\" is not "
					    "a string (the reference reader accepts only "
					    "string values)", label, k->string);
					goto fail;
				}
				meta[nmeta].key = strdup(k->string);
				meta[nmeta].value = strdup(k->valuestring);
				nmeta++;
				if (!meta[nmeta - 1].key || !meta[nmeta - 1].value) {
					plc_seterr(err, errlen, "%s: out of memory", label);
					goto fail;
				}
			}
			continue;
		}
		struct st_tensor *x = &t[n];
		if (!cJSON_IsObject(e)) {
			plc_seterr(err, errlen, "%s: tensor \"%s\": entry is not an object", label, name);
			goto fail;
		}
		const cJSON *dt = NULL, *sh = NULL, *off = NULL;
		for (cJSON *k = e->child; k; k = k->next) {
			const cJSON **slot;
			if (strcmp(k->string, "dtype") == 0)
				slot = &dt;
			else if (strcmp(k->string, "shape") == 0)
				slot = &sh;
			else if (strcmp(k->string, "data_offsets") == 0)
				slot = &off;
			else {
				plc_seterr(err, errlen, "%s: tensor \"%s\": unknown field \"%s\"",
				    label, name, k->string);
				goto fail;
			}
			if (*slot != NULL) {
				plc_seterr(err, errlen, "%s: tensor \"%s\": field \"%s\" appears twice",
				    label, name, k->string);
				goto fail;
			}
			*slot = k;
		}
		if (dt == NULL || sh == NULL || off == NULL) {
			plc_seterr(err, errlen, "%s: tensor \"%s\": missing field \"%s\"", label, name,
			    dt == NULL ? "dtype" : sh == NULL ? "shape" : "data_offsets");
			goto fail;
		}
		if (!cJSON_IsString(dt) || (x->dtype = st_dtype_parse(dt->valuestring)) < 0) {
			plc_seterr(err, errlen, "%s: tensor \"%s\": unknown dtype %s%s%s", label, name,
			    cJSON_IsString(dt) ? "\"" : "",
			    cJSON_IsString(dt) ? dt->valuestring : "(not a string)",
			    cJSON_IsString(dt) ? "\"" : "");
			goto fail;
		}
		if (!cJSON_IsArray(sh)) {
			plc_seterr(err, errlen, "%s: tensor \"%s\": shape is not an array", label, name);
			goto fail;
		}
		int nd = cJSON_GetArraySize(sh);
		if (nd > ST_MAX_DIMS) {
			plc_seterr(err, errlen, "%s: tensor \"%s\": %d dimensions (at most %d supported)",
			    label, name, nd, ST_MAX_DIMS);
			goto fail;
		}
		x->ndim = nd;
		x->nelem = 1;
		int i = 0;
		for (cJSON *d = sh->child; d; d = d->next, i++) {
			if (json_u64(d, &x->shape[i]) == -1) {
				plc_seterr(err, errlen, "%s: tensor \"%s\": shape[%d] is not a "
				    "non-negative integer", label, name, i);
				goto fail;
			}
			if (__builtin_mul_overflow(x->nelem, x->shape[i], &x->nelem)) {
				plc_seterr(err, errlen, "%s: tensor \"%s\": element count overflows",
				    label, name);
				goto fail;
			}
		}
		if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
		    json_u64(off->child, &x->begin) == -1 ||
		    json_u64(off->child->next, &x->end) == -1) {
			plc_seterr(err, errlen, "%s: tensor \"%s\": data_offsets is not a pair of "
			    "non-negative integers", label, name);
			goto fail;
		}
		if (x->end < x->begin) {
			plc_seterr(err, errlen, "%s: tensor \"%s\": data_offsets [%llu, %llu] end "
			    "before they begin", label, name, (unsigned long long)x->begin,
			    (unsigned long long)x->end);
			goto fail;
		}
		uint64_t bits;
		if (__builtin_mul_overflow(x->nelem, (uint64_t)st_dtype_bits(x->dtype), &bits)) {
			plc_seterr(err, errlen, "%s: tensor \"%s\": byte size overflows", label, name);
			goto fail;
		}
		if (bits % 8 != 0) {
			plc_seterr(err, errlen, "%s: tensor \"%s\": %llu elements of %s are not a "
			    "whole number of bytes", label, name, (unsigned long long)x->nelem,
			    st_dtype_name(x->dtype));
			goto fail;
		}
		x->nbytes = bits / 8;
		if (x->end - x->begin != x->nbytes) {
			plc_seterr(err, errlen, "%s: tensor \"%s\": data_offsets [%llu, %llu] hold "
			    "%llu bytes but shape and dtype %s need %llu", label, name,
			    (unsigned long long)x->begin, (unsigned long long)x->end,
			    (unsigned long long)(x->end - x->begin), st_dtype_name(x->dtype),
			    (unsigned long long)x->nbytes);
			goto fail;
		}
		if ((x->name = strdup(name)) == NULL) {
			plc_seterr(err, errlen, "%s: out of memory", label);
			goto fail;
		}
		n++;
	}
	/* Duplicate names: cJSON keeps both, the reference reader refuses. */
	if (n > 1) {
		struct st_tensor **by = malloc(n * sizeof(*by));
		if (by == NULL) {
			plc_seterr(err, errlen, "%s: out of memory", label);
			goto fail;
		}
		for (size_t i = 0; i < n; i++)
			by[i] = &t[i];
		qsort(by, n, sizeof(*by), cmp_tensor_name);
		for (size_t i = 1; i < n; i++) {
			if (strcmp(by[i]->name, by[i - 1]->name) == 0) {
				plc_seterr(err, errlen, "%s: tensor \"%s\" appears twice in the header",
				    label, by[i]->name);
				free(by);
				goto fail;
			}
		}
		free(by);
	}
	qsort(t, n, sizeof(*t), cmp_offset);
	uint64_t at = 0;
	for (size_t i = 0; i < n; i++) {
		if (t[i].begin != at) {
			if (i == 0)
				plc_seterr(err, errlen, "%s: tensor \"%s\": data starts at %llu, not 0 "
				    "(a gap at the start of the data buffer)", label, t[i].name,
				    (unsigned long long)t[i].begin);
			else if (t[i].begin < at)
				plc_seterr(err, errlen, "%s: tensor \"%s\": data_offsets [%llu, %llu] "
				    "overlap tensor \"%s\" [%llu, %llu]", label, t[i].name,
				    (unsigned long long)t[i].begin, (unsigned long long)t[i].end,
				    t[i - 1].name, (unsigned long long)t[i - 1].begin,
				    (unsigned long long)t[i - 1].end);
			else
				plc_seterr(err, errlen, "%s: tensor \"%s\": data starts at %llu, leaving a "
				    "gap of %llu bytes after tensor \"%s\"", label, t[i].name,
				    (unsigned long long)t[i].begin,
				    (unsigned long long)(t[i].begin - at), t[i - 1].name);
			goto fail;
		}
		t[i].order = i;
		at = t[i].end;
	}
	if (at != data_size) {
		if (at > data_size)
			plc_seterr(err, errlen, "%s: tensor \"%s\" ends at byte %llu of the data but "
			    "the file holds only %llu data bytes (truncated file?)", label,
			    n ? t[n - 1].name : "", (unsigned long long)at,
			    (unsigned long long)data_size);
		else
			plc_seterr(err, errlen, "%s: %llu trailing bytes after the last tensor%s%s%s",
			    label, (unsigned long long)(data_size - at), n ? " \"" : "",
			    n ? t[n - 1].name : "", n ? "\"" : "");
		goto fail;
	}
	cJSON_Delete(root);
	f->tensors = t;
	f->ntensors = n;
	f->meta = meta;
	f->nmeta = nmeta;
	return 0;
fail:
	cJSON_Delete(root);
	free_tensors(t, n);
	for (size_t i = 0; i < nmeta; i++) {
		free(meta[i].key);
		free(meta[i].value);
	}
	free(meta);
	return -1;
}

int
st_open(struct st_file *f, const char *path, char *err, size_t errlen)
{
	memset(f, 0, sizeof(*f));
	f->fd = -1;
	unsigned char lenbuf[8];
	char *hdr = NULL;
	struct stat st;

	if ((f->path = strdup(path)) == NULL) {
		plc_seterr(err, errlen, "%s: out of memory", path);
		return -1;
	}
	if ((f->fd = plc_open_in(path, O_RDONLY)) == -1) {
		plc_seterr(err, errlen, "%s: %s", path, plc_open_strerror(errno));
		goto fail;
	}
	if (fstat(f->fd, &st) == -1) {
		plc_seterr(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		plc_seterr(err, errlen, "%s: not a regular file", path);
		goto fail;
	}
	f->size = (uint64_t)st.st_size;
	if (f->size < 8) {
		plc_seterr(err, errlen, "%s: file is %llu bytes, too short for the 8-byte "
		    "header length", path, (unsigned long long)f->size);
		goto fail;
	}
	if (plc_read_all(f->fd, lenbuf, 8, 0) == -1) {
		plc_seterr(err, errlen, "%s: read: %s", path, strerror(errno));
		goto fail;
	}
	uint64_t n = 0;
	for (int i = 7; i >= 0; i--)
		n = (n << 8) | lenbuf[i];
	if (n > ST_MAX_HEADER) {
		plc_seterr(err, errlen, "%s: header length %llu exceeds the limit of %llu bytes",
		    path, (unsigned long long)n, (unsigned long long)ST_MAX_HEADER);
		goto fail;
	}
	if (n > f->size - 8) {
		plc_seterr(err, errlen, "%s: header length %llu runs past the end of the file "
		    "(%llu bytes)", path, (unsigned long long)n, (unsigned long long)f->size);
		goto fail;
	}
	f->header_len = n;
	f->data_start = 8 + n;
	if ((hdr = malloc(n ? n : 1)) == NULL) {
		plc_seterr(err, errlen, "%s: out of memory for a %llu-byte header", path,
		    (unsigned long long)n);
		goto fail;
	}
	if (plc_read_all(f->fd, hdr, n, 8) == -1) {
		plc_seterr(err, errlen, "%s: read: %s", path, strerror(errno));
		goto fail;
	}
	if (st_parse_header(f, path, hdr, n, f->size - f->data_start, err, errlen) == -1)
		goto fail;
	free(hdr);
	for (size_t i = 0; i < f->ntensors; i++)
		f->tensors[i].offset = f->data_start + f->tensors[i].begin;
	return 0;
fail:
	free(hdr);
	st_close(f);
	return -1;
}

void
st_close(struct st_file *f)
{
	if (f->fd != -1)
		close(f->fd);
	f->fd = -1;
	free_tensors(f->tensors, f->ntensors);
	f->tensors = NULL;
	f->ntensors = 0;
	for (size_t i = 0; i < f->nmeta; i++) {
		free(f->meta[i].key);
		free(f->meta[i].value);
	}
	free(f->meta);
	f->meta = NULL;
	f->nmeta = 0;
	free(f->path);
	f->path = NULL;
}

const struct st_tensor *
st_find(const struct st_file *f, const char *name)
{
	for (size_t i = 0; i < f->ntensors; i++)
		if (strcmp(f->tensors[i].name, name) == 0)
			return &f->tensors[i];
	return NULL;
}

const char *
st_meta_get(const struct st_file *f, const char *key)
{
	for (size_t i = 0; i < f->nmeta; i++)
		if (strcmp(f->meta[i].key, key) == 0)
			return f->meta[i].value;
	return NULL;
}

int
st_read(const struct st_file *f, const struct st_tensor *t, void *buf, uint64_t off,
    uint64_t len)
{
	if (off > t->nbytes || len > t->nbytes - off) {
		errno = EINVAL;
		return -1;
	}
	return plc_read_all(f->fd, buf, len, (off_t)(t->offset + off));
}

/* ------------------------------------------------------------ sets */

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
set_add_file(struct st_set *s, const char *fname, char *err, size_t errlen)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s", s->dir, fname) >= (int)sizeof(path)) {
		plc_seterr(err, errlen, "%s/%s: path too long", s->dir, fname);
		return -1;
	}
	struct st_file *nf = realloc(s->files, (s->nfiles + 1) * sizeof(*nf));
	char **nn = realloc(s->fnames, (s->nfiles + 1) * sizeof(*nn));
	if (nf)
		s->files = nf;
	if (nn)
		s->fnames = nn;
	if (nf == NULL || nn == NULL) {
		plc_seterr(err, errlen, "%s: out of memory", path);
		return -1;
	}
	if ((s->fnames[s->nfiles] = strdup(fname)) == NULL) {
		plc_seterr(err, errlen, "%s: out of memory", path);
		return -1;
	}
	if (st_open(&s->files[s->nfiles], path, err, errlen) == -1) {
		free(s->fnames[s->nfiles]);
		return -1;
	}
	s->nfiles++;
	return 0;
}

static int
set_index(struct st_set *s, char *err, size_t errlen)
{
	size_t n = 0;
	for (size_t i = 0; i < s->nfiles; i++)
		n += s->files[i].ntensors;
	s->ntensors = n;
	s->tensors = calloc(n ? n : 1, sizeof(*s->tensors));
	s->byname = calloc(n ? n : 1, sizeof(*s->byname));
	if (s->tensors == NULL || s->byname == NULL) {
		plc_seterr(err, errlen, "%s: out of memory", s->dir);
		return -1;
	}
	size_t k = 0;
	s->data_bytes = 0;
	for (size_t i = 0; i < s->nfiles; i++) {
		for (size_t j = 0; j < s->files[i].ntensors; j++) {
			s->files[i].tensors[j].file = (int)i;
			s->tensors[k] = s->byname[k] = &s->files[i].tensors[j];
			s->data_bytes += s->files[i].tensors[j].nbytes;
			k++;
		}
	}
	qsort(s->byname, n, sizeof(*s->byname), cmp_tensor_name);
	for (size_t i = 1; i < n; i++) {
		if (strcmp(s->byname[i]->name, s->byname[i - 1]->name) == 0) {
			plc_seterr(err, errlen, "%s: tensor \"%s\" is in both %s and %s", s->dir,
			    s->byname[i]->name, s->fnames[s->byname[i - 1]->file],
			    s->fnames[s->byname[i]->file]);
			return -1;
		}
	}
	return 0;
}

/* A shard name from an index must stay inside the checkpoint directory. */
static int
plain_name(const char *s)
{
	return *s && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int
set_open_index(struct st_set *s, const char *ipath, char *err, size_t errlen)
{
	size_t len;
	char *txt = plc_read_file(ipath, &len, 64 << 20);
	cJSON *root = NULL;
	char **names = NULL;
	size_t nnames = 0;
	int rc = -1;

	if (txt == NULL) {
		plc_seterr(err, errlen, "%s: %s", ipath, strerror(errno));
		return -1;
	}
	root = cJSON_ParseWithLength(txt, len);
	if (root == NULL || !cJSON_IsObject(root)) {
		plc_seterr(err, errlen, "%s: not a JSON object", ipath);
		goto out;
	}
	const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(wm)) {
		plc_seterr(err, errlen, "%s: no \"weight_map\" object", ipath);
		goto out;
	}
	size_t nmap = 0;
	for (cJSON *e = wm->child; e; e = e->next) {
		if (!cJSON_IsString(e) || !plain_name(e->valuestring)) {
			plc_seterr(err, errlen, "%s: weight_map entry for tensor \"%s\" is not a "
			    "file name in the checkpoint directory", ipath, e->string);
			goto out;
		}
		nmap++;
	}
	names = calloc(nmap ? nmap : 1, sizeof(*names));
	if (names == NULL) {
		plc_seterr(err, errlen, "%s: out of memory", ipath);
		goto out;
	}
	for (cJSON *e = wm->child; e; e = e->next) {
		size_t i;
		for (i = 0; i < nnames; i++)
			if (strcmp(names[i], e->valuestring) == 0)
				break;
		if (i == nnames)
			names[nnames++] = e->valuestring;
	}
	qsort(names, nnames, sizeof(*names), cmp_str);
	for (size_t i = 0; i < nnames; i++)
		if (set_add_file(s, names[i], err, errlen) == -1)
			goto out;
	if (set_index(s, err, errlen) == -1)
		goto out;
	/* The index and the shards must agree exactly, as llama.cpp's
	 * converter insists: every mapped tensor in its file, no extras. */
	for (cJSON *e = wm->child; e; e = e->next) {
		const struct st_tensor *t = st_set_find(s, e->string);
		if (t == NULL) {
			plc_seterr(err, errlen, "%s: tensor \"%s\" is mapped to %s but that file does "
			    "not contain it", ipath, e->string, e->valuestring);
			goto out;
		}
		if (strcmp(s->fnames[t->file], e->valuestring) != 0) {
			plc_seterr(err, errlen, "%s: tensor \"%s\" is mapped to %s but is in %s",
			    ipath, e->string, e->valuestring, s->fnames[t->file]);
			goto out;
		}
	}
	if (s->ntensors != nmap) {
		for (size_t i = 0; i < s->ntensors; i++) {
			if (cJSON_GetObjectItemCaseSensitive(wm, s->tensors[i]->name) == NULL) {
				plc_seterr(err, errlen, "%s: tensor \"%s\" in %s is not in the index "
				    "%s", s->dir, s->tensors[i]->name,
				    s->fnames[s->tensors[i]->file], ipath);
				goto out;
			}
		}
		plc_seterr(err, errlen, "%s: the index maps %zu tensors, the shards hold %zu",
		    ipath, nmap, s->ntensors);
		goto out;
	}
	rc = 0;
out:
	free(names);
	cJSON_Delete(root);
	free(txt);
	return rc;
}

int
st_set_open(struct st_set *s, const char *path, char *err, size_t errlen)
{
	struct stat st;
	char p[PATH_MAX];

	memset(s, 0, sizeof(*s));
	int fd = plc_open_in(path, O_RDONLY | O_NONBLOCK);
	if (fd == -1 || fstat(fd, &st) == -1) {
		plc_seterr(err, errlen, "%s: %s", path, plc_open_strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	close(fd);
	if (S_ISREG(st.st_mode)) {
		/* A single file named directly. */
		char d[PATH_MAX];
		snprintf(d, sizeof(d), "%s", path);
		char *slash = strrchr(d, '/');
		const char *base = path;
		if (slash) {
			*slash = '\0';
			base = slash + 1;
			if (d[0] == '\0')
				strcpy(d, "/");
		} else
			strcpy(d, ".");
		if ((s->dir = strdup(d)) == NULL)
			goto nomem;
		if (set_add_file(s, base, err, errlen) == -1)
			goto fail;
		if (set_index(s, err, errlen) == -1)
			goto fail;
		return 0;
	}
	if ((s->dir = strdup(path)) == NULL)
		goto nomem;
	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", path);
	if (access(p, F_OK) == 0) {
		s->sharded = 1;
		if (set_open_index(s, p, err, errlen) == -1)
			goto fail;
		return 0;
	}
	snprintf(p, sizeof(p), "%s/model.safetensors", path);
	if (access(p, F_OK) == 0) {
		if (set_add_file(s, "model.safetensors", err, errlen) == -1)
			goto fail;
		if (set_index(s, err, errlen) == -1)
			goto fail;
		return 0;
	}
	plc_seterr(err, errlen, "%s: neither model.safetensors nor model.safetensors.index.json "
	    "is there", path);
	goto fail;
nomem:
	plc_seterr(err, errlen, "%s: out of memory", path);
fail:
	st_set_close(s);
	return -1;
}

void
st_set_close(struct st_set *s)
{
	for (size_t i = 0; i < s->nfiles; i++) {
		st_close(&s->files[i]);
		free(s->fnames[i]);
	}
	free(s->files);
	free(s->fnames);
	free(s->tensors);
	free(s->byname);
	free(s->dir);
	memset(s, 0, sizeof(*s));
}

/*
 * A checkpoint's identity as the train stage records it beside an adapter
 * (pipeline-base.json) and the merge stage checks it: the sha256 of
 * config.json's bytes, and the sha256 of its tensor index, one line
 * "NAME DTYPE D0,D1,...\n" per tensor in name order, so a sharded and an
 * unsharded copy of one checkpoint have the same index digest.
 */
int
st_set_identity(const struct st_set *s, char config_hex[65], char tensors_hex[65],
    char *err, size_t errlen)
{
	struct plc_sha256 c;
	char path[PATH_MAX], line[ST_MAX_DIMS * 24 + 64];

	snprintf(path, sizeof(path), "%s/config.json", s->dir);
	if (plc_sha256_file(path, config_hex) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (plc_sha256_init(&c) == -1) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < s->ntensors; i++) {
		const struct st_tensor *t = s->byname[i];
		size_t o = (size_t)snprintf(line, sizeof(line), " %s", st_dtype_name(t->dtype));
		for (int d = 0; d < t->ndim && o < sizeof(line); d++)
			o += (size_t)snprintf(line + o, sizeof(line) - o, "%s%llu", d ? "," : " ",
			    (unsigned long long)t->shape[d]);
		plc_sha256_update(&c, t->name, strlen(t->name));
		plc_sha256_update(&c, line, o < sizeof(line) ? o : sizeof(line) - 1);
		plc_sha256_update(&c, "\n", 1);
	}
	plc_sha256_final(&c, tensors_hex);
	return 0;
}

const struct st_tensor *
st_set_find(const struct st_set *s, const char *name)
{
	size_t lo = 0, hi = s->ntensors;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->byname[mid]->name, name);
		if (c == 0)
			return s->byname[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

struct st_file *
st_set_file(const struct st_set *s, const struct st_tensor *t)
{
	return &s->files[t->file];
}

/* ------------------------------------------------------------ writing */

void
st_writer_init(struct st_writer *w, const char *path)
{
	memset(w, 0, sizeof(*w));
	w->a.fd = -1;
	snprintf(w->path, sizeof(w->path), "%s", path);
}

int
st_writer_meta(struct st_writer *w, const char *key, const char *value)
{
	struct st_meta *m = realloc(w->meta, (w->nmeta + 1) * sizeof(*m));
	if (m == NULL)
		return -1;
	w->meta = m;
	m[w->nmeta].key = strdup(key);
	m[w->nmeta].value = strdup(value);
	if (!m[w->nmeta].key || !m[w->nmeta].value) {
		free(m[w->nmeta].key);
		free(m[w->nmeta].value);
		return -1;
	}
	w->nmeta++;
	return 0;
}

int
st_writer_add(struct st_writer *w, const char *name, int dtype, int ndim,
    const uint64_t *shape, char *err, size_t errlen)
{
	if (w->started || ndim < 0 || ndim > ST_MAX_DIMS || dtype < 0 || dtype >= ST_NDTYPES) {
		plc_seterr(err, errlen, "%s: tensor \"%s\": bad declaration", w->path, name);
		return -1;
	}
	if (strcmp(name, "__metadata__") == 0 || *name == '\0') {
		plc_seterr(err, errlen, "%s: \"%s\" is not a valid tensor name", w->path, name);
		return -1;
	}
	if (w->n == w->cap) {
		size_t nc = w->cap ? w->cap * 2 : 64;
		struct st_wtensor *nt = realloc(w->t, nc * sizeof(*nt));
		if (nt == NULL) {
			plc_seterr(err, errlen, "%s: out of memory", w->path);
			return -1;
		}
		w->t = nt;
		w->cap = nc;
	}
	struct st_wtensor *t = &w->t[w->n];
	memset(t, 0, sizeof(*t));
	uint64_t nelem = 1;
	for (int i = 0; i < ndim; i++) {
		t->shape[i] = shape[i];
		if (__builtin_mul_overflow(nelem, shape[i], &nelem)) {
			plc_seterr(err, errlen, "%s: tensor \"%s\": size overflows", w->path, name);
			return -1;
		}
	}
	uint64_t bits;
	if (__builtin_mul_overflow(nelem, (uint64_t)st_dtype_bits(dtype), &bits) || bits % 8) {
		plc_seterr(err, errlen, "%s: tensor \"%s\": not a whole number of bytes", w->path, name);
		return -1;
	}
	if ((t->name = strdup(name)) == NULL) {
		plc_seterr(err, errlen, "%s: out of memory", w->path);
		return -1;
	}
	t->dtype = dtype;
	t->ndim = ndim;
	t->nbytes = bits / 8;
	t->begin = w->data_bytes;
	w->data_bytes += t->nbytes;
	return (int)w->n++;
}

int
st_writer_start(struct st_writer *w, char *err, size_t errlen)
{
	cJSON *root = cJSON_CreateObject();
	char *js = NULL;
	int rc = -1;

	if (root == NULL)
		goto nomem;
	/* Names must be unique: a duplicate would make an unreadable file. */
	for (size_t i = 0; i < w->n; i++) {
		if (cJSON_GetObjectItemCaseSensitive(root, w->t[i].name) != NULL) {
			plc_seterr(err, errlen, "%s: tensor \"%s\" declared twice", w->path, w->t[i].name);
			goto out;
		}
		if (i == 0 && w->nmeta > 0) {
			cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
			if (m == NULL)
				goto nomem;
			for (size_t k = 0; k < w->nmeta; k++)
				if (cJSON_AddStringToObject(m, w->meta[k].key, w->meta[k].value) == NULL)
					goto nomem;
		}
		cJSON *e = cJSON_AddObjectToObject(root, w->t[i].name);
		if (e == NULL || cJSON_AddStringToObject(e, "dtype", st_dtype_name(w->t[i].dtype)) == NULL)
			goto nomem;
		cJSON *sh = cJSON_AddArrayToObject(e, "shape");
		if (sh == NULL)
			goto nomem;
		for (int d = 0; d < w->t[i].ndim; d++)
			if (!cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)w->t[i].shape[d])))
				goto nomem;
		cJSON *off = cJSON_AddArrayToObject(e, "data_offsets");
		if (off == NULL ||
		    !cJSON_AddItemToArray(off, cJSON_CreateNumber((double)w->t[i].begin)) ||
		    !cJSON_AddItemToArray(off, cJSON_CreateNumber((double)(w->t[i].begin + w->t[i].nbytes))))
			goto nomem;
	}
	if (w->n == 0 && w->nmeta > 0) {
		cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
		if (m == NULL)
			goto nomem;
		for (size_t k = 0; k < w->nmeta; k++)
			if (cJSON_AddStringToObject(m, w->meta[k].key, w->meta[k].value) == NULL)
				goto nomem;
	}
	/* cJSON prints integers up to 2^53 exactly ("%d" style for integral
	 * values within int range, "%1.15g"/"%1.17g" otherwise). */
	if ((js = cJSON_PrintUnformatted(root)) == NULL)
		goto nomem;
	size_t jl = strlen(js);
	size_t padded = (jl + 7) & ~(size_t)7;
	char *buf = malloc(8 + padded);
	if (buf == NULL)
		goto nomem;
	for (int i = 0; i < 8; i++)
		buf[i] = (char)((uint64_t)padded >> (8 * i));
	memcpy(buf + 8, js, jl);
	memset(buf + 8 + jl, ' ', padded - jl);
	if (plc_atomic_open(&w->a, w->path, 0644) == -1) {
		plc_seterr(err, errlen, "%s: %s", w->path, strerror(errno));
		free(buf);
		goto out;
	}
	w->data_start = 8 + padded;
	if (plc_write_all(w->a.fd, buf, 8 + padded) == -1 ||
	    ftruncate(w->a.fd, (off_t)(w->data_start + w->data_bytes)) == -1) {
		plc_seterr(err, errlen, "%s: write: %s", w->a.tmp, strerror(errno));
		free(buf);
		plc_atomic_abort(&w->a);
		goto out;
	}
	free(buf);
	w->started = 1;
	rc = 0;
	goto out;
nomem:
	plc_seterr(err, errlen, "%s: out of memory building the header", w->path);
out:
	free(js);
	cJSON_Delete(root);
	return rc;
}

uint64_t
st_writer_offset(const struct st_writer *w, size_t i)
{
	return w->data_start + w->t[i].begin;
}

static int
wcheck(struct st_writer *w, size_t i, uint64_t off, uint64_t len, char *err, size_t errlen)
{
	if (!w->started || i >= w->n) {
		plc_seterr(err, errlen, "%s: write to tensor %zu before start or out of range",
		    w->path, i);
		return -1;
	}
	if (off > w->t[i].nbytes || len > w->t[i].nbytes - off) {
		plc_seterr(err, errlen, "%s: tensor \"%s\": write of %llu bytes at %llu runs past "
		    "its %llu bytes", w->path, w->t[i].name, (unsigned long long)len,
		    (unsigned long long)off, (unsigned long long)w->t[i].nbytes);
		return -1;
	}
	return 0;
}

int
st_writer_write(struct st_writer *w, size_t i, uint64_t off, const void *buf, uint64_t len,
    char *err, size_t errlen)
{
	if (wcheck(w, i, off, len, err, errlen) == -1)
		return -1;
	if (plc_pwrite_all(w->a.fd, buf, len, (off_t)(st_writer_offset(w, i) + off)) == -1) {
		plc_seterr(err, errlen, "%s: tensor \"%s\": write: %s", w->a.tmp, w->t[i].name,
		    strerror(errno));
		return -1;
	}
	w->t[i].written += len;
	return 0;
}

int
st_writer_copy(struct st_writer *w, size_t i, uint64_t off, int in_fd, uint64_t in_off,
    uint64_t len, char *err, size_t errlen)
{
	if (wcheck(w, i, off, len, err, errlen) == -1)
		return -1;
	if (plc_copy_range(in_fd, (off_t)in_off, w->a.fd, (off_t)(st_writer_offset(w, i) + off),
	    len) == -1) {
		plc_seterr(err, errlen, "%s: tensor \"%s\": copy: %s", w->a.tmp, w->t[i].name,
		    strerror(errno));
		return -1;
	}
	w->t[i].written += len;
	return 0;
}

int
st_writer_copy_run(struct st_writer *w, size_t i, size_t j, int in_fd, uint64_t in_off,
    char *err, size_t errlen)
{
	if (j < i || j >= w->n) {
		plc_seterr(err, errlen, "%s: bad tensor run %zu..%zu", w->path, i, j);
		return -1;
	}
	uint64_t len = w->t[j].begin + w->t[j].nbytes - w->t[i].begin;
	if (wcheck(w, i, 0, 0, err, errlen) == -1)
		return -1;
	if (len && plc_copy_range(in_fd, (off_t)in_off, w->a.fd,
	    (off_t)st_writer_offset(w, i), len) == -1) {
		plc_seterr(err, errlen, "%s: tensors \"%s\"..\"%s\": copy: %s", w->a.tmp,
		    w->t[i].name, w->t[j].name, strerror(errno));
		return -1;
	}
	for (size_t k = i; k <= j; k++)
		w->t[k].written += w->t[k].nbytes;
	return 0;
}

int
st_writer_commit(struct st_writer *w, char *err, size_t errlen)
{
	if (!w->started) {
		plc_seterr(err, errlen, "%s: commit before start", w->path);
		return -1;
	}
	for (size_t i = 0; i < w->n; i++) {
		if (w->t[i].written != w->t[i].nbytes) {
			plc_seterr(err, errlen, "%s: tensor \"%s\": %llu of %llu bytes written",
			    w->path, w->t[i].name, (unsigned long long)w->t[i].written,
			    (unsigned long long)w->t[i].nbytes);
			st_writer_abort(w);
			return -1;
		}
	}
	w->started = 0;
	if (plc_atomic_commit(&w->a) == -1) {
		plc_seterr(err, errlen, "%s: commit: %s", w->path, strerror(errno));
		return -1;
	}
	return 0;
}

void
st_writer_abort(struct st_writer *w)
{
	if (w->started)
		plc_atomic_abort(&w->a);
	w->started = 0;
}

void
st_writer_free(struct st_writer *w)
{
	st_writer_abort(w);
	for (size_t i = 0; i < w->n; i++)
		free(w->t[i].name);
	free(w->t);
	for (size_t i = 0; i < w->nmeta; i++) {
		free(w->meta[i].key);
		free(w->meta[i].value);
	}
	free(w->meta);
	w->t = NULL;
	w->meta = NULL;
	w->n = w->cap = w->nmeta = 0;
}

/* ------------------------------------------------------------ directories */

/* An output directory is a checkpoint: a few levels deep at most. */
int
st_rmtree(const char *path)
{
	return plc_rmtree_at(AT_FDCWD, path, 64);
}

static int
split_path(const char *path, char *dir, size_t dl, char *base, size_t bl)
{
	char p[PATH_MAX];
	size_t n = strlen(path);
	if (n == 0 || n >= sizeof(p))
		return -1;
	memcpy(p, path, n + 1);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	char *slash = strrchr(p, '/');
	if (slash == NULL) {
		snprintf(dir, dl, ".");
		snprintf(base, bl, "%s", p);
	} else {
		*slash = '\0';
		snprintf(dir, dl, "%s", p[0] ? p : "/");
		snprintf(base, bl, "%s", slash + 1);
	}
	return base[0] && strcmp(base, ".") && strcmp(base, "..") ? 0 : -1;
}

int
st_outdir_begin(struct st_outdir *o, const char *final, char *err, size_t errlen)
{
	char dir[PATH_MAX], base[NAME_MAX + 1];
	if (split_path(final, dir, sizeof(dir), base, sizeof(base)) == -1) {
		plc_seterr(err, errlen, "%s: not a usable output directory name", final);
		return -1;
	}
	if (plc_mkdirs(dir, 0755) == -1) {
		plc_seterr(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	/* A link where the output goes is refused, not replaced: it may
	 * have been planted to point the stage elsewhere. */
	struct stat ls;
	if (lstat(final, &ls) == 0 && S_ISLNK(ls.st_mode)) {
		plc_seterr(err, errlen, "%s: the output is a symbolic link; not replaced "
		    "(name the directory itself)", final);
		errno = ELOOP;
		return -1;
	}
	/* Temporaries of earlier attempts (a killed daemon, a crash) go first. */
	char prefix[NAME_MAX + 16];
	snprintf(prefix, sizeof(prefix), ".%s.tmp.", base);
	DIR *d = opendir(dir);
	if (d != NULL) {
		struct dirent *de;
		while ((de = readdir(d)) != NULL) {
			if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
				char p[PATH_MAX];
				snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
				st_rmtree(p);
			}
		}
		closedir(d);
	}
	snprintf(o->final, sizeof(o->final), "%s/%s", dir, base);
	snprintf(o->tmp, sizeof(o->tmp), "%s/.%s.tmp.%ld", dir, base, (long)getpid());
	if (mkdir(o->tmp, 0755) == -1) {
		plc_seterr(err, errlen, "%s: %s", o->tmp, strerror(errno));
		return -1;
	}
	return 0;
}

int
st_outdir_commit(struct st_outdir *o, char *err, size_t errlen)
{
	char dir[PATH_MAX], base[NAME_MAX + 1], old[PATH_MAX + 64];
	split_path(o->final, dir, sizeof(dir), base, sizeof(base));
	if (plc_fsync_dir(o->tmp) == -1) {
		plc_seterr(err, errlen, "%s: fsync: %s", o->tmp, strerror(errno));
		return -1;
	}
	if (rename(o->tmp, o->final) == -1) {
		if (errno != ENOTEMPTY && errno != EEXIST && errno != EISDIR &&
		    errno != ENOTDIR) {
			plc_seterr(err, errlen, "rename %s to %s: %s", o->tmp, o->final,
			    strerror(errno));
			return -1;
		}
		/* An older output is there: move it aside, move the new one
		 * in, then remove the old one. */
		snprintf(old, sizeof(old), "%s/.%s.old.%ld", dir, base, (long)getpid());
		st_rmtree(old);
		if (rename(o->final, old) == -1 || rename(o->tmp, o->final) == -1) {
			plc_seterr(err, errlen, "replace %s: %s", o->final, strerror(errno));
			return -1;
		}
		st_rmtree(old);
	}
	o->tmp[0] = '\0';
	if (plc_fsync_dir(dir) == -1) {
		plc_seterr(err, errlen, "%s: fsync: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

void
st_outdir_abort(struct st_outdir *o)
{
	if (o->tmp[0]) {
		int save = errno;
		st_rmtree(o->tmp);
		errno = save;
	}
	o->tmp[0] = '\0';
}

static int
is_weight_file(const char *n)
{
	size_t l = strlen(n);
	static const char s1[] = ".safetensors", s2[] = ".safetensors.index.json";
	if (l >= sizeof(s1) - 1 && strcmp(n + l - (sizeof(s1) - 1), s1) == 0)
		return 1;
	if (l >= sizeof(s2) - 1 && strcmp(n + l - (sizeof(s2) - 1), s2) == 0)
		return 1;
	return 0;
}

int
st_copy_aux_files(const char *src, const char *dst, int *ncopied, char *err, size_t errlen)
{
	DIR *d = opendir(src);
	if (d == NULL) {
		plc_seterr(err, errlen, "%s: %s", src, strerror(errno));
		return -1;
	}
	struct dirent *de;
	int n = 0, rc = 0;
	while ((de = readdir(d)) != NULL && rc == 0) {
		if (de->d_name[0] == '.' || is_weight_file(de->d_name))
			continue;
		char sp[PATH_MAX], dp[PATH_MAX];
		struct stat st;
		snprintf(sp, sizeof(sp), "%s/%s", src, de->d_name);
		snprintf(dp, sizeof(dp), "%s/%s", dst, de->d_name);
		/* Opened first (without waiting on a FIFO, a link followed
		 * only as plc_open_in() allows), then looked at: what is
		 * copied is what was checked. */
		int in = plc_open_in(sp, O_RDONLY | O_NONBLOCK);
		if (in == -1 && errno == ENOENT)
			continue;
		if (in == -1) {
			plc_seterr(err, errlen, "%s: %s", sp, plc_open_strerror(errno));
			rc = -1;
			break;
		}
		if (fstat(in, &st) == -1 || !S_ISREG(st.st_mode)) {
			close(in);
			continue;
		}
		struct plc_atomic a;
		if (plc_atomic_open(&a, dp, 0644) == -1) {
			plc_seterr(err, errlen, "%s: %s", dp, strerror(errno));
			close(in);
			rc = -1;
			break;
		}
		if (plc_copy_range(in, 0, a.fd, 0, (uint64_t)st.st_size) == -1) {
			plc_seterr(err, errlen, "copy %s: %s", sp, strerror(errno));
			plc_atomic_abort(&a);
			rc = -1;
		} else if (plc_atomic_commit(&a) == -1) {
			plc_seterr(err, errlen, "%s: %s", dp, strerror(errno));
			rc = -1;
		} else
			n++;
		close(in);
	}
	closedir(d);
	if (ncopied)
		*ncopied = n;
	return rc;
}

int
st_write_index(const char *path, size_t n, const char *const *names,
    const char *const *files, uint64_t total_size, char *err, size_t errlen)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *md = root ? cJSON_AddObjectToObject(root, "metadata") : NULL;
	cJSON *wm = NULL;
	char *js = NULL;
	int rc = -1;
	if (md == NULL || cJSON_AddNumberToObject(md, "total_size", (double)total_size) == NULL)
		goto nomem;
	if ((wm = cJSON_AddObjectToObject(root, "weight_map")) == NULL)
		goto nomem;
	/* Sorted by tensor name, as transformers writes it. */
	size_t *ord = malloc((n ? n : 1) * sizeof(*ord));
	if (ord == NULL)
		goto nomem;
	for (size_t i = 0; i < n; i++)
		ord[i] = i;
	for (size_t i = 1; i < n; i++) {
		size_t v = ord[i], j = i;
		while (j > 0 && strcmp(names[ord[j - 1]], names[v]) > 0) {
			ord[j] = ord[j - 1];
			j--;
		}
		ord[j] = v;
	}
	for (size_t i = 0; i < n; i++) {
		if (cJSON_AddStringToObject(wm, names[ord[i]], files[ord[i]]) == NULL) {
			free(ord);
			goto nomem;
		}
	}
	free(ord);
	if ((js = cJSON_Print(root)) == NULL)
		goto nomem;
	size_t jl = strlen(js);
	js[jl] = '\n';
	if (plc_write_file_atomic(path, js, jl + 1, 0644) == -1) {
		plc_seterr(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
	goto out;
nomem:
	plc_seterr(err, errlen, "%s: out of memory", path);
out:
	cJSON_free(js);
	cJSON_Delete(root);
	return rc;
}

/* ------------------------------------------------------------ conversion */

float
st_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

uint16_t
st_f32_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);  /* NaN: keep it a quiet NaN */
	u += 0x7fffu + ((u >> 16) & 1u);              /* round to nearest, ties to even */
	return (uint16_t)(u >> 16);
}

float
st_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
	if (exp == 0) {
		if (man == 0) {
			u = sign;
		} else {
			/* Subnormal: normalise. */
			int e = -1;
			do {
				e++;
				man <<= 1;
			} while ((man & 0x400) == 0);
			u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
		}
	} else if (exp == 0x1f) {
		u = sign | 0x7f800000u | (man << 13);
	} else {
		u = sign | ((exp + 127 - 15) << 23) | (man << 13);
	}
	float f;
	memcpy(&f, &u, 4);
	return f;
}

uint16_t
st_f32_to_f16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t a = u & 0x7fffffffu;
	if (a > 0x7f800000u)                       /* NaN */
		return sign | 0x7e00 | (uint16_t)((a >> 13) & 0x3ff);
	if (a >= 0x477ff000u)                      /* rounds to >= 65520: infinity */
		return sign | 0x7c00;
	if (a < 0x38800000u) {                     /* below 2^-14: subnormal or zero */
		if (a < 0x33000000u)               /* below 2^-25: rounds to zero */
			return sign;
		uint32_t e = a >> 23;
		uint32_t m = (a & 0x7fffff) | 0x800000;
		/* value = m * 2^(e-150); in units of 2^-24 (the subnormal
		 * step) that is m * 2^(e-126), so 126 - e bits (14..24) go. */
		int shift = 126 - (int)e;
		uint32_t q = m >> shift;
		uint32_t rem = m & ((1u << shift) - 1);
		uint32_t half = 1u << (shift - 1);
		if (rem > half || (rem == half && (q & 1)))
			q++;
		return sign | (uint16_t)q;
	}
	/* Normal: rebias, round the 13 dropped bits to nearest even. */
	uint32_t r = a - 0x38000000u;              /* exponent 127 -> 15 */
	r += 0xfffu + ((r >> 13) & 1u);
	return sign | (uint16_t)(r >> 13);
}

int
st_to_f32(int dtype, const void *src, float *dst, size_t n)
{
	const uint16_t *h = src;
	switch (dtype) {
	case ST_F32:
		memcpy(dst, src, n * 4);
		return 0;
	case ST_BF16:
		for (size_t i = 0; i < n; i++) {
			uint32_t u = (uint32_t)h[i] << 16;
			memcpy(&dst[i], &u, 4);
		}
		return 0;
	case ST_F16:
		for (size_t i = 0; i < n; i++)
			dst[i] = st_f16_to_f32(h[i]);
		return 0;
	case ST_F64: {
		const double *d = src;
		for (size_t i = 0; i < n; i++)
			dst[i] = (float)d[i];
		return 0;
	}
	default:
		errno = ENOTSUP;
		return -1;
	}
}

int
st_from_f32(int dtype, const float *src, void *dst, size_t n)
{
	uint16_t *h = dst;
	switch (dtype) {
	case ST_F32:
		memcpy(dst, src, n * 4);
		return 0;
	case ST_BF16:
		for (size_t i = 0; i < n; i++)
			h[i] = st_f32_to_bf16(src[i]);
		return 0;
	case ST_F16:
		for (size_t i = 0; i < n; i++)
			h[i] = st_f32_to_f16(src[i]);
		return 0;
	case ST_F64: {
		double *d = dst;
		for (size_t i = 0; i < n; i++)
			d[i] = src[i];
		return 0;
	}
	default:
		errno = ENOTSUP;
		return -1;
	}
}
