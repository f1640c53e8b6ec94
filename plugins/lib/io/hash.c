/*
 * hash.c: sha256. Files, buffers and directories are streamed through
 * OpenSSL's EVP interface. The plc_sha256 contexts, for the model-file
 * stages, use the CPU's SHA extensions (SHA-NI) directly where it has
 * them: with a software prefetch (data that comes from memory rather than
 * cache hashes at ~1.75 GB/s instead of ~1.07 GB/s on the machines we
 * measured), and two independent streams interleaved in one pass
 * (plc_sha256_update2: ~1.4x the throughput of one stream, since one
 * stream waits on the latency of SHA256RNDS2). Elsewhere they fall back to
 * EVP.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "plio.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SHANI 1
#include <cpuid.h>
#include <immintrin.h>
#endif

static void
hexify(const unsigned char *md, unsigned n, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	for (unsigned i = 0; i < n; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[2 * n] = '\0';
}

/* ---- streaming contexts ------------------------------------------------ */

static const uint32_t sha256_iv[8] = {
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19
};

#ifdef HAVE_SHANI
static const uint32_t sha256_k[64] __attribute__((aligned(16))) = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
};

/* Prefetch this far ahead of the block being hashed (measured best). */
#define SHA_PREFETCH 512

#define SHANI __attribute__((target("sha,sse4.1,ssse3")))

/* h[] (A..H) to and from the ABEF/CDGH register layout SHA256RNDS2 uses. */
SHANI static inline void
shani_load(const uint32_t h[8], __m128i *abef, __m128i *cdgh)
{
	__m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1);
	__m128i u = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B);
	*abef = _mm_alignr_epi8(t, u, 8);
	*cdgh = _mm_blend_epi16(u, t, 0xF0);
}

SHANI static inline void
shani_store(uint32_t h[8], __m128i abef, __m128i cdgh)
{
	__m128i t = _mm_shuffle_epi32(abef, 0x1B);
	__m128i u = _mm_shuffle_epi32(cdgh, 0xB1);
	_mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(t, u, 0xF0));
	_mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(u, t, 8));
}

/* Four rounds with message words M (W[4q..4q+3]) of stream (S0, S1). */
#define QROUND(S0, S1, M, q) do {                                          \
	__m128i k_ = _mm_add_epi32((M),                                     \
	    _mm_load_si128((const __m128i *)&sha256_k[4 * (q)]));           \
	(S1) = _mm_sha256rnds2_epu32((S1), (S0), k_);                       \
	(S0) = _mm_sha256rnds2_epu32((S0), (S1), _mm_shuffle_epi32(k_, 0x0E)); \
} while (0)
/* The message schedule: W[4q+16..4q+19] into M0's register. */
#define SCHED(M0, M1, M2, M3)                                               \
	((M0) = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32((M0), (M1)), \
	    _mm_alignr_epi8((M3), (M2), 4)), (M3)))
#define LOADW(p, i, mask) \
	_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)((p) + 16 * (i))), (mask))

/* One quad of rounds for each of the streams listed in X. */
#define STEPS(X)                                                            \
	X(0, 0, 1, 2, 3) X(1, 1, 2, 3, 0) X(2, 2, 3, 0, 1) X(3, 3, 0, 1, 2)     \
	X(4, 0, 1, 2, 3) X(5, 1, 2, 3, 0) X(6, 2, 3, 0, 1) X(7, 3, 0, 1, 2)     \
	X(8, 0, 1, 2, 3) X(9, 1, 2, 3, 0) X(10, 2, 3, 0, 1) X(11, 3, 0, 1, 2)   \
	X(12, 0, 1, 2, 3) X(13, 1, 2, 3, 0) X(14, 2, 3, 0, 1) X(15, 3, 0, 1, 2)
#define STEP_A(q, a, b, c, d) QROUND(s0, s1, m[a], q);                     \
	if ((q) < 12) SCHED(m[a], m[b], m[c], m[d]);
#define STEP_AB(q, a, b, c, d) QROUND(s0, s1, m[a], q);                    \
	QROUND(r0, r1, n[a], q);                                            \
	if ((q) < 12) { SCHED(m[a], m[b], m[c], m[d]); SCHED(n[a], n[b], n[c], n[d]); }

/* A block's 16 message words, as four vectors. */
SHANI static inline void
shani_msg(__m128i m[4], const unsigned char *p, __m128i mask)
{
	m[0] = LOADW(p, 0, mask);
	m[1] = LOADW(p, 1, mask);
	m[2] = LOADW(p, 2, mask);
	m[3] = LOADW(p, 3, mask);
}

SHANI static void
shani_blocks(uint32_t h[8], const unsigned char *p, size_t nblocks)
{
	const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
	__m128i s0, s1, m[4];
	shani_load(h, &s0, &s1);
	for (; nblocks > 0; nblocks--, p += 64) {
		__m128i a0 = s0, a1 = s1;
		_mm_prefetch((const char *)p + SHA_PREFETCH, _MM_HINT_T0);
		shani_msg(m, p, mask);
		STEPS(STEP_A)
		s0 = _mm_add_epi32(s0, a0);
		s1 = _mm_add_epi32(s1, a1);
	}
	shani_store(h, s0, s1);
}

/* Two streams, nblocks each, interleaved: their rounds overlap. */
SHANI static void
shani_blocks2(uint32_t ha[8], const unsigned char *pa, uint32_t hb[8],
    const unsigned char *pb, size_t nblocks)
{
	const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
	__m128i s0, s1, r0, r1, m[4], n[4];
	shani_load(ha, &s0, &s1);
	shani_load(hb, &r0, &r1);
	for (; nblocks > 0; nblocks--, pa += 64, pb += 64) {
		__m128i a0 = s0, a1 = s1, b0 = r0, b1 = r1;
		_mm_prefetch((const char *)pa + SHA_PREFETCH, _MM_HINT_T0);
		_mm_prefetch((const char *)pb + SHA_PREFETCH, _MM_HINT_T0);
		shani_msg(m, pa, mask);
		shani_msg(n, pb, mask);
		STEPS(STEP_AB)
		s0 = _mm_add_epi32(s0, a0);
		s1 = _mm_add_epi32(s1, a1);
		r0 = _mm_add_epi32(r0, b0);
		r1 = _mm_add_epi32(r1, b1);
	}
	shani_store(ha, s0, s1);
	shani_store(hb, r0, r1);
}

static int shani_ok;       /* the CPU has SHA-NI, SSSE3 and SSE4.1 */
static int shani_off;      /* plc_sha256_use_shani(0) */
static pthread_once_t shani_once = PTHREAD_ONCE_INIT;

static void
shani_detect(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1))
		return;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA))
		shani_ok = 1;
}
#endif /* HAVE_SHANI */

int
plc_sha256_use_shani(int on)
{
#ifdef HAVE_SHANI
	pthread_once(&shani_once, shani_detect);
	shani_off = !on;
	return shani_ok && !shani_off;
#else
	(void)on;
	return 0;
#endif
}

int
plc_sha256_init(struct plc_sha256 *c)
{
	memset(c, 0, sizeof(*c));
#ifdef HAVE_SHANI
	pthread_once(&shani_once, shani_detect);
	if (shani_ok && !shani_off) {
		memcpy(c->h, sha256_iv, sizeof(c->h));
		return 0;
	}
#endif
	EVP_MD_CTX *e = EVP_MD_CTX_new();
	if (e == NULL || !EVP_DigestInit_ex(e, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(e);
		errno = ENOMEM;
		return -1;
	}
	c->evp = e;
	return 0;
}

/* Whole blocks of one stream (SHA-NI contexts only). */
static void
blocks(struct plc_sha256 *c, const unsigned char *p, size_t nblocks)
{
#ifdef HAVE_SHANI
	shani_blocks(c->h, p, nblocks);
#else
	(void)c; (void)p; (void)nblocks;
	abort();
#endif
}

void
plc_sha256_update(struct plc_sha256 *c, const void *data, size_t n)
{
	const unsigned char *p = data;
	if (c->evp) {
		EVP_DigestUpdate(c->evp, p, n);
		return;
	}
	if (n == 0)
		return;
	c->len += n;
	if (c->nbuf) {
		size_t k = 64 - c->nbuf < n ? 64 - c->nbuf : n;
		memcpy(c->buf + c->nbuf, p, k);
		c->nbuf += k;
		p += k;
		n -= k;
		if (c->nbuf < 64)
			return;
		blocks(c, c->buf, 1);
		c->nbuf = 0;
	}
	if (n >= 64) {
		blocks(c, p, n / 64);
		p += n & ~(size_t)63;
		n &= 63;
	}
	memcpy(c->buf, p, n);
	c->nbuf = n;
}

void
plc_sha256_update2(struct plc_sha256 *a, const void *pa, size_t na,
    struct plc_sha256 *b, const void *pb, size_t nb)
{
	const unsigned char *p = pa, *q = pb;
#ifdef HAVE_SHANI
	if (a->evp == NULL && b->evp == NULL) {
		/* Fill partial blocks first, so both streams are on a block
		 * boundary, then interleave whole blocks. */
		size_t k = a->nbuf ? (64 - a->nbuf < na ? 64 - a->nbuf : na) : 0;
		plc_sha256_update(a, p, k);
		p += k, na -= k;
		k = b->nbuf ? (64 - b->nbuf < nb ? 64 - b->nbuf : nb) : 0;
		plc_sha256_update(b, q, k);
		q += k, nb -= k;
		if (a->nbuf == 0 && b->nbuf == 0) {
			size_t m = (na < nb ? na : nb) / 64;
			shani_blocks2(a->h, p, b->h, q, m);
			a->len += 64 * m, b->len += 64 * m;
			p += 64 * m, na -= 64 * m;
			q += 64 * m, nb -= 64 * m;
		}
	}
#endif
	plc_sha256_update(a, p, na);
	plc_sha256_update(b, q, nb);
}

void
plc_sha256_final(struct plc_sha256 *c, char hex[65])
{
	unsigned char md[32];
	if (c->evp) {
		unsigned n = 0;
		EVP_DigestFinal_ex(c->evp, md, &n);
		plc_sha256_discard(c);
		hexify(md, n, hex);
		return;
	}
	uint64_t bits = c->len * 8;
	c->buf[c->nbuf++] = 0x80;
	if (c->nbuf > 56) {
		memset(c->buf + c->nbuf, 0, 64 - c->nbuf);
		blocks(c, c->buf, 1);
		c->nbuf = 0;
	}
	memset(c->buf + c->nbuf, 0, 56 - c->nbuf);
	for (int i = 0; i < 8; i++)
		c->buf[63 - i] = (unsigned char)(bits >> (8 * i));
	blocks(c, c->buf, 1);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 4; j++)
			md[4 * i + j] = (unsigned char)(c->h[i] >> (24 - 8 * j));
	hexify(md, 32, hex);
}

void
plc_sha256_discard(struct plc_sha256 *c)
{
	EVP_MD_CTX_free(c->evp);
	c->evp = NULL;
}

/* ---- one-shot ----------------------------------------------------------- */

void
plc_sha256_buf(const void *buf, size_t len, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	EVP_Digest(buf, len, md, &n, EVP_sha256(), NULL);
	hexify(md, n, hex);
}

/* 1 MiB reads with posix_fadvise(SEQUENTIAL): as fast as sha256sum. */
int
plc_sha256_file(const char *path, char hex[65])
{
	int fd = plc_open_in(path, O_RDONLY);
	if (fd == -1)
		return -1;
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t bufsz = 1 << 20;
	unsigned char *buf = malloc(bufsz);
	int rc = -1;
	if (ctx == NULL || buf == NULL || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		errno = ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf, bufsz);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			goto out;
		}
		if (n == 0)
			break;
		EVP_DigestUpdate(ctx, buf, (size_t)n);
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	hexify(md, mdlen, hex);
	rc = 0;
out:
	{
		int save = errno;
		free(buf);
		EVP_MD_CTX_free(ctx);
		close(fd);
		errno = save;
	}
	return rc;
}

struct dlist {
	char **names;
	size_t n, cap;
};

static int
dlist_add(struct dlist *l, const char *name)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		char **nn = realloc(l->names, cap * sizeof(*nn));
		if (nn == NULL)
			return -1;
		l->names = nn;
		l->cap = cap;
	}
	if ((l->names[l->n] = strdup(name)) == NULL)
		return -1;
	l->n++;
	return 0;
}

static int
walk(const char *root, const char *rel, struct dlist *l)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s%s%s", root, *rel ? "/" : "", rel);
	DIR *d = opendir(path);
	if (d == NULL)
		return -1;
	struct dirent *de;
	int rc = 0;
	while ((de = readdir(d)) != NULL && rc == 0) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char sub[4096], full[4096];
		snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", de->d_name);
		snprintf(full, sizeof(full), "%s/%s", root, sub);
		struct stat st;
		if (lstat(full, &st) == -1) {
			rc = -1;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			rc = walk(root, sub, l);
		} else if (S_ISREG(st.st_mode)) {
			rc = dlist_add(l, sub);
		}
	}
	closedir(d);
	return rc;
}

static void
dlist_free(struct dlist *l)
{
	int save = errno;
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	errno = save;
}

static int
cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
plc_sha256_dir_known(const char *path, char hex[65], uint64_t *bytes,
    int (*known)(void *arg, const char *rel, uint64_t size, char hex[65]), void *arg)
{
	struct dlist l = { 0 };
	int rc = -1;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (ctx == NULL || walk(path, "", &l) == -1)
		goto out;
	qsort(l.names, l.n, sizeof(*l.names), cmpstr);
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	uint64_t total = 0;
	for (size_t i = 0; i < l.n; i++) {
		char full[4096], fh[65], line[4300];
		struct stat st;
		snprintf(full, sizeof(full), "%s/%s", path, l.names[i]);
		if (stat(full, &st) == -1)
			goto out;
		int k = known ? known(arg, l.names[i], (uint64_t)st.st_size, fh) : 0;
		if (k == -1 || (k == 0 && plc_sha256_file(full, fh) == -1))
			goto out;
		total += (uint64_t)st.st_size;
		int n = snprintf(line, sizeof(line), "%s  %s\n", fh, l.names[i]);
		EVP_DigestUpdate(ctx, line, (size_t)n);
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	hexify(md, mdlen, hex);
	if (bytes)
		*bytes = total;
	rc = 0;
out:
	dlist_free(&l);
	EVP_MD_CTX_free(ctx);
	return rc;
}

int
plc_sha256_dir(const char *path, char hex[65], uint64_t *bytes)
{
	return plc_sha256_dir_known(path, hex, bytes, NULL, NULL);
}

int
plc_tree_bytes(const char *path, uint64_t *bytes)
{
	struct dlist l = { 0 };
	int rc = walk(path, "", &l);
	uint64_t total = 0;
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		char full[4096];
		struct stat st;
		snprintf(full, sizeof(full), "%s/%s", path, l.names[i]);
		if (stat(full, &st) == -1)
			rc = -1;
		total += (uint64_t)st.st_size;
	}
	dlist_free(&l);
	if (rc == 0)
		*bytes = total;
	return rc;
}

/* ---- a path someone else names ----------------------------------------- */

static const char *
kind_name(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISLNK(m))
		return "a symbolic link";
	return "of an unknown kind";
}

/* An entry's kind, by lstat, before anything opens it: a device is not
 * even opened. 0 for a regular file or a directory (*st filled), else -1
 * with errno (ELOOP for a link, EINVAL for the rest) and why. */
static int
safe_kind(int dfd, const char *name, const char *shown, struct stat *st,
    struct plc_hash_ctl *ctl)
{
	if ((ctl->fs != NULL ? ctl->fs->statat(ctl->fs->arg, dfd, name, st) :
	    fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW)) == -1) {
		int e = errno;
		snprintf(ctl->why, sizeof(ctl->why), "%s: %s", shown, strerror(e));
		errno = e;
		return -1;
	}
	if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode))
		return 0;
	snprintf(ctl->why, sizeof(ctl->why), "%s: %s, not a regular file or a directory: "
	    "refused", shown, kind_name(st->st_mode));
	errno = S_ISLNK(st->st_mode) ? ELOOP : EINVAL;
	return -1;
}

/* Open an entry that lstat found regular or a directory, and check with
 * fstat that it still is: it may have been swapped in between. */
static int
safe_open(int dfd, const char *name, const char *shown, int dir, struct stat *st,
    struct plc_hash_ctl *ctl)
{
	int fd = ctl->fs != NULL ? ctl->fs->openat(ctl->fs->arg, dfd, name, dir, 0) :
	    openat(dfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC |
	    (dir ? O_DIRECTORY : 0));
	if (fd == -1) {
		int e = errno;
		snprintf(ctl->why, sizeof(ctl->why), "%s: %s", shown, e == ELOOP ?
		    "a symbolic link, not a regular file or a directory: refused" : strerror(e));
		errno = e;
		return -1;
	}
	int e = 0;
	if (fstat(fd, st) == -1) {
		e = errno;
		snprintf(ctl->why, sizeof(ctl->why), "%s: %s", shown, strerror(e));
	} else if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) {
		snprintf(ctl->why, sizeof(ctl->why), "%s: %s, not a regular file or a "
		    "directory: refused", shown, kind_name(st->st_mode));
		e = EINVAL;
	} else if (!dir != !S_ISDIR(st->st_mode)) {
		snprintf(ctl->why, sizeof(ctl->why), "%s: changed while it was read", shown);
		e = EAGAIN;
	}
	if (e != 0) {
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int
ctl_stopped(struct plc_hash_ctl *ctl, const char *shown)
{
	if (ctl->stop == NULL || !ctl->stop(ctl->arg))
		return 0;
	snprintf(ctl->why, sizeof(ctl->why), "%s: not hashed to its end: the job was "
	    "cancelled or timed out", shown);
	errno = ECANCELED;
	return 1;
}

/* Hash fd's bytes into ctx, 1 MiB at a time, *total counted against the
 * cap and stop() asked before each read. */
static int
hash_fd_ctl(int fd, EVP_MD_CTX *ctx, uint64_t *total, const char *shown,
    struct plc_hash_ctl *ctl)
{
	size_t bufsz = 1 << 20;
	unsigned char *buf = malloc(bufsz);
	int rc = -1;
	if (buf == NULL) {
		snprintf(ctl->why, sizeof(ctl->why), "%s: %s", shown, strerror(ENOMEM));
		errno = ENOMEM;
		return -1;
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (;;) {
		if (ctl_stopped(ctl, shown))
			break;
		ssize_t n = read(fd, buf, bufsz);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			snprintf(ctl->why, sizeof(ctl->why), "%s: %s", shown, strerror(e));
			errno = e;
			break;
		}
		if (n == 0) {
			rc = 0;
			break;
		}
		*total += (uint64_t)n;
		if (ctl->max > 0 && *total > ctl->max) {
			snprintf(ctl->why, sizeof(ctl->why), "%s: over the cap of %llu bytes an "
			    "artifact may have (artifact_max_size): refused", shown,
			    (unsigned long long)ctl->max);
			errno = EFBIG;
			break;
		}
		EVP_DigestUpdate(ctx, buf, (size_t)n);
	}
	free(buf);
	return rc;
}

/* Below dfd, every regular file's name relative to the top (rel), by
 * descriptors that follow no link; any other kind refuses the tree. */
static int
walk_ctl(int dfd, const char *top, const char *rel, struct dlist *l, struct plc_hash_ctl *ctl)
{
	int dup_fd = dup(dfd);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (d == NULL) {
		int e = errno;
		if (dup_fd >= 0)
			close(dup_fd);
		snprintf(ctl->why, sizeof(ctl->why), "%s/%s: %s", top, rel, strerror(e));
		errno = e;
		return -1;
	}
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char sub[4096], shown[4200];
		if ((size_t)snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "",
		    de->d_name) >= sizeof(sub)) {
			snprintf(ctl->why, sizeof(ctl->why), "%s/%s...: %s", top, rel,
			    strerror(ENAMETOOLONG));
			errno = ENAMETOOLONG;
			rc = -1;
			break;
		}
		snprintf(shown, sizeof(shown), "%s/%s", top, sub);
		struct stat st;
		if (ctl_stopped(ctl, shown) || safe_kind(dfd, de->d_name, shown, &st, ctl) == -1) {
			rc = -1;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			int sfd = safe_open(dfd, de->d_name, shown, 1, &st, ctl);
			if (sfd == -1) {
				rc = -1;
				break;
			}
			rc = walk_ctl(sfd, top, sub, l, ctl);
			close(sfd);
			continue;
		}
		rc = dlist_add(l, sub);
	}
	int e = errno;
	closedir(d);
	errno = e;
	return rc;
}

/* A file below the top directory, opened beneath it with no link on the
 * way (openat2's RESOLVE_NO_SYMLINKS; plain openat where the kernel has no
 * openat2, whose last component still follows none). */
static int
open_beneath(int top, const char *rel, const struct plc_fs *fs)
{
	if (fs != NULL)
		return fs->openat(fs->arg, top, rel, 0, 1);
#ifdef SYS_openat2
	struct {
		uint64_t flags, mode, resolve;
	} how = { O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0,
		0x04 /* RESOLVE_NO_SYMLINKS */ | 0x08 /* RESOLVE_BENEATH */ };
	int fd = (int)syscall(SYS_openat2, top, rel, &how, sizeof(how));
	if (fd >= 0 || errno != ENOSYS)
		return fd;
#endif
	return openat(top, rel, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
}

int
plc_sha256_path_ctl(const char *path, char hex[65], uint64_t *bytes, struct plc_hash_ctl *ctl)
{
	struct stat st;
	uint64_t total = 0;
	int fd, rc = -1, e;
	EVP_MD_CTX *ctx = NULL;
	struct dlist l = { 0 };

	ctl->why[0] = '\0';
	if (safe_kind(AT_FDCWD, path, path, &st, ctl) == -1 ||
	    (fd = safe_open(AT_FDCWD, path, path, S_ISDIR(st.st_mode), &st, ctl)) == -1)
		return -1;
	if ((ctx = EVP_MD_CTX_new()) == NULL || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		snprintf(ctl->why, sizeof(ctl->why), "%s: %s", path, strerror(ENOMEM));
		errno = ENOMEM;
		goto out;
	}
	if (S_ISREG(st.st_mode)) {
		if (ctl->max > 0 && (uint64_t)st.st_size > ctl->max) {
			snprintf(ctl->why, sizeof(ctl->why), "%s: %llu bytes, over the cap of %llu "
			    "bytes an artifact may have (artifact_max_size): refused", path,
			    (unsigned long long)st.st_size, (unsigned long long)ctl->max);
			errno = EFBIG;
			goto out;
		}
		rc = hash_fd_ctl(fd, ctx, &total, path, ctl);
	} else if (walk_ctl(fd, path, "", &l, ctl) == 0) {
		/* plc_sha256_dir's definition: "HEX  REL\n" per file, by name. */
		qsort(l.names, l.n, sizeof(*l.names), cmpstr);
		rc = 0;
		for (size_t i = 0; i < l.n && rc == 0; i++) {
			char shown[4200], line[4300], fh[65];
			unsigned char md[EVP_MAX_MD_SIZE];
			unsigned mdlen = 0;
			snprintf(shown, sizeof(shown), "%s/%s", path, l.names[i]);
			int k = 0;
			uint64_t ks = 0;
			if (ctl->known != NULL &&
			    (k = ctl->known(ctl->known_arg, shown, &ks, fh)) == -1) {
				e = errno;
				snprintf(ctl->why, sizeof(ctl->why), "%s: %s", shown, strerror(e));
				errno = e;
				rc = -1;
				break;
			}
			if (k == 1) {
				total += ks;
				int n = snprintf(line, sizeof(line), "%s  %s\n", fh, l.names[i]);
				EVP_DigestUpdate(ctx, line, (size_t)n);
				continue;
			}
			EVP_MD_CTX *fctx = EVP_MD_CTX_new();
			int ffd = fctx ? open_beneath(fd, l.names[i], ctl->fs) : -1;
			struct stat fst;
			rc = -1;
			if (fctx == NULL)
				snprintf(ctl->why, sizeof(ctl->why), "%s: %s", shown, strerror(ENOMEM));
			else if (ffd == -1)
				snprintf(ctl->why, sizeof(ctl->why), "%s: %s", shown, errno == ELOOP ||
				    errno == EXDEV ? "a symbolic link on the way: refused" :
				    strerror(errno));
			else if (fstat(ffd, &fst) == -1)
				snprintf(ctl->why, sizeof(ctl->why), "%s: %s", shown, strerror(errno));
			else if (!S_ISREG(fst.st_mode)) {
				snprintf(ctl->why, sizeof(ctl->why), "%s: %s, not a regular file: "
				    "refused", shown, kind_name(fst.st_mode));
				errno = EINVAL;
			} else if (EVP_DigestInit_ex(fctx, EVP_sha256(), NULL) &&
			    hash_fd_ctl(ffd, fctx, &total, shown, ctl) == 0) {
				EVP_DigestFinal_ex(fctx, md, &mdlen);
				hexify(md, mdlen, fh);
				int n = snprintf(line, sizeof(line), "%s  %s\n", fh, l.names[i]);
				EVP_DigestUpdate(ctx, line, (size_t)n);
				struct stat after;
				if (ctl->hashed != NULL && fstat(ffd, &after) == 0)
					ctl->hashed(ctl->hashed_arg, shown, &fst, &after, fh);
				rc = 0;
			}
			e = errno;
			if (ffd >= 0)
				close(ffd);
			EVP_MD_CTX_free(fctx);
			errno = e;
		}
	}
	if (rc == 0) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned mdlen = 0;
		EVP_DigestFinal_ex(ctx, md, &mdlen);
		hexify(md, mdlen, hex);
		*bytes = total;
		struct stat after;
		if (S_ISREG(st.st_mode) && ctl->hashed != NULL && fstat(fd, &after) == 0)
			ctl->hashed(ctl->hashed_arg, path, &st, &after, hex);
	}
out:
	e = errno;
	if (rc == -1 && ctl->why[0] == '\0')
		snprintf(ctl->why, sizeof(ctl->why), "%s: %s", path, strerror(e));
	dlist_free(&l);
	EVP_MD_CTX_free(ctx);
	close(fd);
	errno = e;
	return rc;
}

int
plc_tree_bytes_ctl(const char *path, uint64_t *bytes, struct plc_hash_ctl *ctl)
{
	struct stat st;
	struct dlist l = { 0 };
	int fd, rc = -1;
	uint64_t total = 0;

	ctl->why[0] = '\0';
	if (safe_kind(AT_FDCWD, path, path, &st, ctl) == -1)
		return -1;
	if (S_ISREG(st.st_mode)) {
		*bytes = (uint64_t)st.st_size;
		return 0;
	}
	if ((fd = safe_open(AT_FDCWD, path, path, 1, &st, ctl)) == -1)
		return -1;
	if (walk_ctl(fd, path, "", &l, ctl) == 0) {
		rc = 0;
		for (size_t i = 0; i < l.n && rc == 0; i++) {
			char shown[4200];
			snprintf(shown, sizeof(shown), "%s/%s", path, l.names[i]);
			if ((rc = safe_kind(fd, l.names[i], shown, &st, ctl)) == 0)
				total += S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
		}
	}
	int e = errno;
	dlist_free(&l);
	close(fd);
	if (rc == 0)
		*bytes = total;
	errno = e;
	return rc;
}
