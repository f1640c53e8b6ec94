/*
 * gguf.c: the GGUF v3 reader and writer (see gguf.h and
 * HACKING.md: GGUF v3).
 *
 * The reader maps the whole file and walks it once, checking every count
 * and length against the bytes that remain before it allocates or reads;
 * after gguf_open() succeeds, every pointer it hands out is in bounds.
 * gguf_open() parses under the SIGBUS guard (plio.h) and keeps a copy
 * of the header, so that a file that shrinks (overwritten, truncated)
 * fails the caller instead of killing the process: the KVs are read from
 * the copy, tensor data from the mapping, under the reader's guard.
 * The checks are those of llama.cpp's gguf_init_from_file_impl, plus two
 * it leaves to the model loader (tensor data inside the file, nothing
 * after it but padding).
 */
#include <errno.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"

#define GGUF_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ggml's type table (ggml/src/ggml.c type_traits, ggml-common.h block
 * structs): name, elements per block, bytes per block. Ids 4, 5, 31-33
 * and 36-38 were removed from the format and are refused. */
static const struct {
	const char *name;
	uint32_t blck, size;
} types[GGML_TYPE_COUNT] = {
	[0] = { "F32", 1, 4 },		[1] = { "F16", 1, 2 },
	[2] = { "Q4_0", 32, 18 },	[3] = { "Q4_1", 32, 20 },
	[6] = { "Q5_0", 32, 22 },	[7] = { "Q5_1", 32, 24 },
	[8] = { "Q8_0", 32, 34 },	[9] = { "Q8_1", 32, 36 },
	[10] = { "Q2_K", 256, 84 },	[11] = { "Q3_K", 256, 110 },
	[12] = { "Q4_K", 256, 144 },	[13] = { "Q5_K", 256, 176 },
	[14] = { "Q6_K", 256, 210 },	[15] = { "Q8_K", 256, 292 },
	[16] = { "IQ2_XXS", 256, 66 },	[17] = { "IQ2_XS", 256, 74 },
	[18] = { "IQ3_XXS", 256, 98 },	[19] = { "IQ1_S", 256, 50 },
	[20] = { "IQ4_NL", 32, 18 },	[21] = { "IQ3_S", 256, 110 },
	[22] = { "IQ2_S", 256, 82 },	[23] = { "IQ4_XS", 256, 136 },
	[24] = { "I8", 1, 1 },		[25] = { "I16", 1, 2 },
	[26] = { "I32", 1, 4 },		[27] = { "I64", 1, 8 },
	[28] = { "F64", 1, 8 },		[29] = { "IQ1_M", 256, 56 },
	[30] = { "BF16", 1, 2 },
	[34] = { "TQ1_0", 256, 54 },	[35] = { "TQ2_0", 256, 66 },
	[39] = { "MXFP4", 32, 17 },	[40] = { "NVFP4", 64, 36 },
	[41] = { "Q1_0", 128, 18 },	[42] = { "Q2_0", 64, 18 },
};

static const char *vtypes[GGUF_VTYPE_COUNT] = {
	"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr",
	"u64", "i64", "f64"
};
static const uint8_t vsizes[GGUF_VTYPE_COUNT] = {
	1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8
};

const char *
gguf_type_name(uint32_t type)
{
	if (type >= GGML_TYPE_COUNT || types[type].name == NULL)
		return NULL;
	return types[type].name;
}

int
gguf_type_info(uint32_t type, uint32_t *blck, uint32_t *size)
{
	if (type >= GGML_TYPE_COUNT || types[type].name == NULL)
		return -1;
	if (blck)
		*blck = types[type].blck;
	if (size)
		*size = types[type].size;
	return 0;
}

int
gguf_type_from_name(const char *name)
{
	for (int i = 0; i < GGML_TYPE_COUNT; i++)
		if (types[i].name && strcasecmp(types[i].name, name) == 0)
			return i;
	return -1;
}

const char *
gguf_vtype_name(uint32_t vtype)
{
	return vtype < GGUF_VTYPE_COUNT ? vtypes[vtype] : "?";
}

size_t
gguf_vtype_size(uint32_t vtype)
{
	return vtype < GGUF_VTYPE_COUNT ? vsizes[vtype] : 0;
}

/* Little-endian loads that do not care about alignment. */
static uint32_t
ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

static uint64_t
ld64(const uint8_t *p)
{
	return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

/* ---- reader ---- */

struct cursor {
	struct gguf *g;
	uint64_t pos;
};

static int GGUF_PRINTF(2, 3)
gerr(struct gguf *g, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(g->err, sizeof(g->err), "%s: %s", g->path, msg);
	return -1;
}

static uint64_t
left(const struct cursor *c)
{
	return c->g->size - c->pos;
}

static int
need(struct cursor *c, uint64_t n, const char *what)
{
	if (n > left(c))
		return gerr(c->g, "truncated at byte %" PRIu64 ": %s needs %" PRIu64
		    " bytes, %" PRIu64 " left", c->pos, what, n, left(c));
	return 0;
}

static int
rd32(struct cursor *c, uint32_t *v, const char *what)
{
	if (need(c, 4, what) == -1)
		return -1;
	*v = ld32(c->g->base + c->pos);
	c->pos += 4;
	return 0;
}

static int
rd64(struct cursor *c, uint64_t *v, const char *what)
{
	if (need(c, 8, what) == -1)
		return -1;
	*v = ld64(c->g->base + c->pos);
	c->pos += 8;
	return 0;
}

/* A string: u64 length, then the bytes. Returns a pointer into the file. */
static int
rdstr(struct cursor *c, const uint8_t **s, uint64_t *len, const char *what)
{
	uint64_t at = c->pos;
	if (rd64(c, len, what) == -1)
		return -1;
	if (*len > GGUF_STRING_MAX)
		return gerr(c->g, "byte %" PRIu64 ": %s length %" PRIu64
		    " exceeds the 1 GiB limit", at, what, *len);
	if (*len > left(c))
		return gerr(c->g, "byte %" PRIu64 ": %s length %" PRIu64
		    " runs past the end of the file (%" PRIu64 " bytes left)",
		    at, what, *len, left(c));
	*s = c->g->base + c->pos;
	c->pos += *len;
	return 0;
}

static int
cmp_kv(const void *a, const void *b)
{
	const struct gguf_kv *x = *(const struct gguf_kv *const *)a;
	const struct gguf_kv *y = *(const struct gguf_kv *const *)b;
	return strcmp(x->key, y->key);
}

static int
cmp_tensor(const void *a, const void *b)
{
	const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
	const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
	return strcmp(x->name, y->name);
}

/* Step over one value of type t (not ARRAY) at the cursor, checking
 * bounds. */
static int
skip_value(struct cursor *c, uint32_t t, const char *key)
{
	if (t == GGUF_STRING) {
		const uint8_t *s;
		uint64_t len;
		return rdstr(c, &s, &len, key);
	}
	size_t sz = gguf_vtype_size(t);
	if (need(c, sz, key) == -1)
		return -1;
	c->pos += sz;
	return 0;
}

static int
read_kv(struct cursor *c, struct gguf_kv *kv, uint64_t i)
{
	struct gguf *g = c->g;
	const uint8_t *key;
	uint64_t klen;
	char what[64];

	kv->file_off = c->pos;
	snprintf(what, sizeof(what), "key of KV %" PRIu64, i);
	if (rdstr(c, &key, &klen, what) == -1)
		return -1;
	if (klen == 0)
		return gerr(g, "byte %" PRIu64 ": KV %" PRIu64 " has an empty key",
		    kv->file_off, i);
	if (memchr(key, '\0', klen) != NULL)
		return gerr(g, "byte %" PRIu64 ": KV %" PRIu64 " key contains a NUL byte",
		    kv->file_off, i);
	kv->key = strndup((const char *)key, klen);
	if (kv->key == NULL)
		return gerr(g, "out of memory");
	if (rd32(c, &kv->type, kv->key) == -1)
		return -1;
	if (kv->type >= GGUF_VTYPE_COUNT)
		return gerr(g, "byte %" PRIu64 ": key %s has invalid value type %" PRIu32,
		    c->pos - 4, kv->key, kv->type);
	kv->n = 1;
	if (kv->type != GGUF_ARRAY) {
		kv->val = g->base + c->pos;
		if (skip_value(c, kv->type, kv->key) == -1)
			return -1;
		kv->val_len = (size_t)(g->base + c->pos - kv->val);
		return 0;
	}
	if (rd32(c, &kv->arr_type, kv->key) == -1)
		return -1;
	if (kv->arr_type == GGUF_ARRAY)
		return gerr(g, "byte %" PRIu64 ": key %s is an array of arrays, which "
		    "GGUF loaders refuse", c->pos - 4, kv->key);
	if (kv->arr_type >= GGUF_VTYPE_COUNT)
		return gerr(g, "byte %" PRIu64 ": key %s has invalid array element type %"
		    PRIu32, c->pos - 4, kv->key, kv->arr_type);
	uint64_t n;
	if (rd64(c, &n, kv->key) == -1)
		return -1;
	kv->n = n;
	kv->val = g->base + c->pos;
	if (kv->arr_type != GGUF_STRING) {
		size_t sz = gguf_vtype_size(kv->arr_type);
		/* Divide rather than multiply: n may be anything. */
		if (n > left(c) / sz)
			return gerr(g, "byte %" PRIu64 ": key %s claims %" PRIu64
			    " elements of %zu bytes, more than the %" PRIu64
			    " bytes left", c->pos - 8, kv->key, n, sz, left(c));
		c->pos += n * sz;
	} else {
		/* Each element takes at least its 8-byte length. */
		if (n > left(c) / 8)
			return gerr(g, "byte %" PRIu64 ": key %s claims %" PRIu64
			    " strings, more than the %" PRIu64 " bytes left could hold",
			    c->pos - 8, kv->key, n, left(c));
		kv->str_off = malloc((n ? n : 1) * sizeof(uint64_t));
		if (kv->str_off == NULL)
			return gerr(g, "out of memory");
		uint64_t start = c->pos;
		for (uint64_t j = 0; j < n; j++) {
			kv->str_off[j] = c->pos - start;
			char ewhat[128];
			snprintf(ewhat, sizeof(ewhat), "element %" PRIu64 " of %s", j, kv->key);
			const uint8_t *s;
			uint64_t len;
			if (rdstr(c, &s, &len, ewhat) == -1)
				return -1;
		}
	}
	kv->val_len = (size_t)(g->base + c->pos - kv->val);
	return 0;
}

static int
read_tensor(struct cursor *c, struct gguf_tensor *t, uint64_t i)
{
	struct gguf *g = c->g;
	const uint8_t *name;
	uint64_t nlen;
	char what[64];

	t->info_off = c->pos;
	snprintf(what, sizeof(what), "name of tensor %" PRIu64, i);
	if (rdstr(c, &name, &nlen, what) == -1)
		return -1;
	if (nlen == 0)
		return gerr(g, "byte %" PRIu64 ": tensor %" PRIu64 " has an empty name",
		    t->info_off, i);
	if (nlen > GGUF_NAME_MAX)
		return gerr(g, "byte %" PRIu64 ": tensor %" PRIu64 " name is %" PRIu64
		    " bytes long; GGUF allows at most %d: %.*s...", t->info_off, i,
		    nlen, GGUF_NAME_MAX, 40, (const char *)name);
	if (memchr(name, '\0', nlen) != NULL)
		return gerr(g, "byte %" PRIu64 ": tensor %" PRIu64
		    " name contains a NUL byte", t->info_off, i);
	memcpy(t->name, name, nlen);
	t->name[nlen] = '\0';
	if (rd32(c, &t->n_dims, t->name) == -1)
		return -1;
	if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
		return gerr(g, "tensor %s: %" PRIu32 " dimensions (1 to %d allowed)",
		    t->name, t->n_dims, GGUF_MAX_DIMS);
	for (int d = 0; d < GGUF_MAX_DIMS; d++)
		t->ne[d] = 1;
	for (uint32_t d = 0; d < t->n_dims; d++) {
		uint64_t v;
		if (rd64(c, &v, t->name) == -1)
			return -1;
		if (v > INT64_MAX)
			return gerr(g, "tensor %s: dimension %" PRIu32 " is negative (%" PRId64 ")",
			    t->name, d, (int64_t)v);
		t->ne[d] = (int64_t)v;
	}
	if (rd32(c, &t->type, t->name) == -1)
		return -1;
	uint32_t blck, size;
	if (gguf_type_info(t->type, &blck, &size) == -1)
		return gerr(g, "tensor %s: unknown or removed ggml type %" PRIu32,
		    t->name, t->type);
	if (t->ne[0] % blck != 0)
		return gerr(g, "tensor %s: type %s needs ne[0] to be a multiple of %"
		    PRIu32 ", it is %" PRId64, t->name, types[t->type].name, blck,
		    t->ne[0]);
	/* Total bytes, refusing overflow (the loader requires the element
	 * count and byte size to fit in int64). */
	uint64_t nb = (uint64_t)t->ne[0] / blck * size;
	uint64_t nel = (uint64_t)t->ne[0];
	for (int d = 1; d < GGUF_MAX_DIMS; d++) {
		uint64_t e = (uint64_t)t->ne[d];
		if (e != 0 && (nb > INT64_MAX / e || nel > INT64_MAX / e))
			return gerr(g, "tensor %s: size overflows (%" PRId64 " x %" PRId64
			    " x %" PRId64 " x %" PRId64 ")", t->name, t->ne[0], t->ne[1],
			    t->ne[2], t->ne[3]);
		nb *= e;
		nel *= e;
	}
	t->nbytes = nb;
	if (rd64(c, &t->offset, t->name) == -1)
		return -1;
	return 0;
}

static void
free_parts(struct gguf *g)
{
	if (g->kv) {
		for (uint64_t i = 0; i < g->n_kv; i++) {
			free(g->kv[i].key);
			free(g->kv[i].str_off);
		}
		free(g->kv);
	}
	free(g->t);
	g->kv = NULL;
	g->t = NULL;
}

static uint64_t
align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

int
gguf_parse(struct gguf *g, const void *buf, size_t len, const char *name)
{
	struct cursor c = { g, 0 };
	uint32_t magic;
	uint64_t n_t, n_kv;

	memset(g, 0, sizeof(*g));
	snprintf(g->path, sizeof(g->path), "%s", name ? name : "<buffer>");
	g->base = buf;
	g->size = len;
	g->alignment = GGUF_DEFAULT_ALIGNMENT;

	if (len < 4 || (magic = ld32(g->base)) != GGUF_MAGIC)
		return gerr(g, "not a GGUF file (bad magic%s)",
		    len < 4 ? ": shorter than 4 bytes" : "");
	c.pos = 4;
	if (rd32(&c, &g->version, "version") == -1)
		return -1;
	if ((g->version & 0xffff) == 0)
		return gerr(g, "version field 0x%08" PRIx32 " looks byte-swapped "
		    "(a big-endian file?)", g->version);
	if (g->version != GGUF_VERSION)
		return gerr(g, "GGUF version %" PRIu32 " is not supported (only %d)",
		    g->version, GGUF_VERSION);
	if (rd64(&c, &n_t, "tensor count") == -1 || rd64(&c, &n_kv, "KV count") == -1)
		return -1;
	/* Bound the counts by what the rest of the file can hold before any
	 * allocation: a KV takes at least 8 + 1 + 4 + 1 bytes, a tensor info
	 * at least 8 + 1 + 4 + 8 + 4 + 8. */
	if (n_kv > left(&c) / 14)
		return gerr(g, "KV count %" PRIu64 " is impossible in a file of %zu bytes",
		    n_kv, len);
	if (n_t > left(&c) / 33)
		return gerr(g, "tensor count %" PRIu64 " is impossible in a file of %zu bytes",
		    n_t, len);

	g->kv = calloc(n_kv ? n_kv : 1, sizeof(*g->kv));
	g->t = calloc(n_t ? n_t : 1, sizeof(*g->t));
	if (g->kv == NULL || g->t == NULL) {
		free_parts(g);
		return gerr(g, "out of memory");
	}
	g->n_kv = n_kv;
	g->n_tensors = n_t;

	for (uint64_t i = 0; i < n_kv; i++)
		if (read_kv(&c, &g->kv[i], i) == -1)
			goto bad;

	/* Duplicate keys: sort pointers, compare neighbours. */
	if (n_kv > 1) {
		const struct gguf_kv **s = malloc(n_kv * sizeof(*s));
		if (s == NULL) {
			gerr(g, "out of memory");
			goto bad;
		}
		for (uint64_t i = 0; i < n_kv; i++)
			s[i] = &g->kv[i];
		qsort(s, n_kv, sizeof(*s), cmp_kv);
		for (uint64_t i = 1; i < n_kv; i++)
			if (strcmp(s[i - 1]->key, s[i]->key) == 0) {
				gerr(g, "key %s appears twice (bytes %" PRIu64 " and %" PRIu64 ")",
				    s[i]->key, s[i - 1]->file_off, s[i]->file_off);
				free(s);
				goto bad;
			}
		free(s);
	}

	int64_t ai = gguf_find_kv(g, "general.alignment");
	if (ai >= 0) {
		struct gguf_kv *kv = &g->kv[ai];
		if (kv->type != GGUF_UINT32) {
			gerr(g, "general.alignment has type %s; it must be u32",
			    gguf_vtype_name(kv->type));
			goto bad;
		}
		uint32_t a = ld32(kv->val);
		if (a == 0 || (a & (a - 1)) != 0) {
			gerr(g, "general.alignment %" PRIu32 " is not a power of two", a);
			goto bad;
		}
		g->alignment = a;
	}

	for (uint64_t i = 0; i < n_t; i++)
		if (read_tensor(&c, &g->t[i], i) == -1)
			goto bad;

	if (n_t > 1) {
		const struct gguf_tensor **s = malloc(n_t * sizeof(*s));
		if (s == NULL) {
			gerr(g, "out of memory");
			goto bad;
		}
		for (uint64_t i = 0; i < n_t; i++)
			s[i] = &g->t[i];
		qsort(s, n_t, sizeof(*s), cmp_tensor);
		for (uint64_t i = 1; i < n_t; i++)
			if (strcmp(s[i - 1]->name, s[i]->name) == 0) {
				gerr(g, "tensor %s appears twice", s[i]->name);
				free(s);
				goto bad;
			}
		free(s);
	}

	/* The data section starts at the next multiple of the alignment. The
	 * loader demands the offsets be exactly the packed, padded layout in
	 * info order; anything else (a gap, an overlap, a reordering, a
	 * misaligned offset) is refused here with the tensor named. */
	g->data_off = n_t > 0 ? align_up(c.pos, g->alignment) : c.pos;
	if (n_t > 0 && g->data_off > len) {
		gerr(g, "the data section would start at byte %" PRIu64
		    ", past the end of the file (%zu bytes)", g->data_off, len);
		goto bad;
	}
	uint64_t expect = 0;
	for (uint64_t i = 0; i < n_t; i++) {
		struct gguf_tensor *t = &g->t[i];
		if (t->offset != expect) {
			if (t->offset % g->alignment != 0)
				gerr(g, "tensor %s: offset %" PRIu64 " is not a multiple of the "
				    "alignment %" PRIu32, t->name, t->offset, g->alignment);
			else
				gerr(g, "tensor %s: offset %" PRIu64 ", expected %" PRIu64
				    " (tensor data must be packed in info order)", t->name,
				    t->offset, expect);
			goto bad;
		}
		if (t->nbytes > len - g->data_off ||
		    t->offset > len - g->data_off - t->nbytes) {
			gerr(g, "tensor %s: data [%" PRIu64 ", +%" PRIu64 ") runs past the end "
			    "of the file (%zu bytes; data section at %" PRIu64 ")",
			    t->name, t->offset, t->nbytes, len, g->data_off);
			goto bad;
		}
		t->data = g->base + g->data_off + t->offset;
		expect = align_up(t->offset + t->nbytes, g->alignment);
	}
	g->data_size = expect;
	/* Anything beyond the padded end is not ours: a concatenation or a
	 * failed truncation. The writers pad the last tensor; accept a file
	 * that stops at the last tensor's end too. */
	if (n_t > 0 && len > g->data_off + expect) {
		gerr(g, "%" PRIu64 " unexpected bytes after the tensor data (which ends at "
		    "byte %" PRIu64 ")", len - g->data_off - expect, g->data_off + expect);
		goto bad;
	}
	if (n_t == 0 && len > align_up(c.pos, g->alignment)) {
		gerr(g, "%" PRIu64 " unexpected bytes after the header of a file "
		    "without tensors", (uint64_t)len - c.pos);
		goto bad;
	}
	return 0;
bad:
	free_parts(g);
	g->n_kv = g->n_tensors = 0;
	return -1;
}

/* gguf_parse on a mapping, then the header copied, both under the SIGBUS
 * guard; the KVs are moved to the copy. A fault leaves what the parse
 * had allocated in g, freed here (a key being copied when it struck is
 * lost). */
static int
parse_mapped(struct gguf *g, const uint8_t *p, size_t len, const char *path)
{
	sigjmp_buf jb;
	if (sigsetjmp(jb, 1)) {
		free_parts(g);
		free(g->hdr);
		g->hdr = NULL;
		return gerr(g, PLC_MAP_CHANGED);
	}
	plc_guard_begin(&jb);
	if (gguf_parse(g, p, len, path) == -1) {
		plc_guard_end();
		return -1;
	}
	size_t hl = g->data_off < len ? (size_t)g->data_off : len;
	if ((g->hdr = malloc(hl ? hl : 1)) != NULL)
		memcpy(g->hdr, p, hl);
	plc_guard_end();
	if (g->hdr == NULL) {
		free_parts(g);
		return gerr(g, "out of memory for the header");
	}
	for (uint64_t i = 0; i < g->n_kv; i++)
		g->kv[i].val = g->hdr + (g->kv[i].val - p);
	return 0;
}

int
gguf_open(struct gguf *g, const char *path)
{
	struct stat st;
	int fd = plc_open_in(path, O_RDONLY);

	memset(g, 0, sizeof(*g));
	snprintf(g->path, sizeof(g->path), "%s", path);
	if (fd == -1)
		return gerr(g, "%s", plc_open_strerror(errno));
	if (fstat(fd, &st) == -1) {
		int e = errno;
		close(fd);
		return gerr(g, "%s", strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return gerr(g, "not a regular file");
	}
	if (st.st_size == 0) {
		close(fd);
		return gerr(g, "empty file");
	}
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	int e = errno;
	close(fd);
	if (p == MAP_FAILED)
		return gerr(g, "mmap: %s", strerror(e));
	if (parse_mapped(g, p, (size_t)st.st_size, path) == -1) {
		char err[sizeof(g->err)];
		memcpy(err, g->err, sizeof(err));
		munmap(p, (size_t)st.st_size);
		memset(g, 0, sizeof(*g));
		snprintf(g->path, sizeof(g->path), "%s", path);
		memcpy(g->err, err, sizeof(err));
		return -1;
	}
	g->mapped = 1;
	return 0;
}

void
gguf_close(struct gguf *g)
{
	free_parts(g);
	if (g->mapped && g->base)
		munmap((void *)(uintptr_t)g->base, g->size);
	free(g->hdr);
	g->hdr = NULL;
	g->base = NULL;
	g->mapped = 0;
	g->n_kv = g->n_tensors = 0;
}

int64_t
gguf_find_kv(const struct gguf *g, const char *key)
{
	for (uint64_t i = 0; i < g->n_kv; i++)
		if (strcmp(g->kv[i].key, key) == 0)
			return (int64_t)i;
	return -1;
}

int64_t
gguf_find_tensor(const struct gguf *g, const char *name)
{
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (strcmp(g->t[i].name, name) == 0)
			return (int64_t)i;
	return -1;
}

double
gguf_val_num(uint32_t type, const uint8_t *p)
{
	uint32_t u;
	uint64_t q;
	float f;
	double d;

	switch (type) {
	case GGUF_UINT8: return p[0];
	case GGUF_INT8: return (int8_t)p[0];
	case GGUF_BOOL: return p[0] != 0;
	case GGUF_UINT16: return (uint16_t)(p[0] | p[1] << 8);
	case GGUF_INT16: return (int16_t)(p[0] | p[1] << 8);
	case GGUF_UINT32: return ld32(p);
	case GGUF_INT32: return (int32_t)ld32(p);
	case GGUF_FLOAT32: u = ld32(p); memcpy(&f, &u, 4); return f;
	case GGUF_UINT64: return (double)ld64(p);
	case GGUF_INT64: return (double)(int64_t)ld64(p);
	case GGUF_FLOAT64: q = ld64(p); memcpy(&d, &q, 8); return d;
	}
	return NAN;
}

static struct gguf_kv *
kv_of(struct gguf *g, const char *key)
{
	int64_t i = gguf_find_kv(g, key);
	if (i < 0) {
		gerr(g, "key %s is missing", key);
		return NULL;
	}
	return &g->kv[i];
}

/* An integer KV as signed and unsigned views; -1 when not an integer. */
static int
kv_int(struct gguf *g, struct gguf_kv *kv, int64_t *s, uint64_t *u, int *neg)
{
	const uint8_t *p = kv->val;
	*neg = 0;
	switch (kv->type) {
	case GGUF_UINT8: *u = p[0]; break;
	case GGUF_UINT16: *u = (uint16_t)(p[0] | p[1] << 8); break;
	case GGUF_UINT32: *u = ld32(p); break;
	case GGUF_UINT64: *u = ld64(p); break;
	case GGUF_INT8: *s = (int8_t)p[0]; goto sgn;
	case GGUF_INT16: *s = (int16_t)(p[0] | p[1] << 8); goto sgn;
	case GGUF_INT32: *s = (int32_t)ld32(p); goto sgn;
	case GGUF_INT64: *s = (int64_t)ld64(p); goto sgn;
	default:
		return gerr(g, "key %s has type %s, not an integer", kv->key,
		    gguf_vtype_name(kv->type));
	}
	*s = *u > INT64_MAX ? INT64_MAX : (int64_t)*u;
	return 0;
sgn:
	*neg = *s < 0;
	*u = *neg ? 0 : (uint64_t)*s;
	return 0;
}

int
gguf_get_uint(struct gguf *g, const char *key, uint64_t *v)
{
	struct gguf_kv *kv = kv_of(g, key);
	int64_t s;
	int neg;
	if (kv == NULL || kv_int(g, kv, &s, v, &neg) == -1)
		return -1;
	if (neg)
		return gerr(g, "key %s is negative (%" PRId64 ")", key, s);
	return 0;
}

int
gguf_get_int(struct gguf *g, const char *key, int64_t *v)
{
	struct gguf_kv *kv = kv_of(g, key);
	uint64_t u;
	int neg;
	if (kv == NULL || kv_int(g, kv, v, &u, &neg) == -1)
		return -1;
	if (!neg && u > INT64_MAX)
		return gerr(g, "key %s is too large (%" PRIu64 ")", key, u);
	return 0;
}

int
gguf_get_float(struct gguf *g, const char *key, double *v)
{
	struct gguf_kv *kv = kv_of(g, key);
	if (kv == NULL)
		return -1;
	if (kv->type != GGUF_FLOAT32 && kv->type != GGUF_FLOAT64)
		return gerr(g, "key %s has type %s, not a float", key,
		    gguf_vtype_name(kv->type));
	*v = gguf_val_num(kv->type, kv->val);
	return 0;
}

int
gguf_get_bool(struct gguf *g, const char *key, int *v)
{
	struct gguf_kv *kv = kv_of(g, key);
	if (kv == NULL)
		return -1;
	if (kv->type != GGUF_BOOL)
		return gerr(g, "key %s has type %s, not bool", key,
		    gguf_vtype_name(kv->type));
	*v = kv->val[0] != 0;
	return 0;
}

int
gguf_get_str(struct gguf *g, const char *key, const char **s, size_t *len)
{
	struct gguf_kv *kv = kv_of(g, key);
	if (kv == NULL)
		return -1;
	if (kv->type != GGUF_STRING)
		return gerr(g, "key %s has type %s, not str", key,
		    gguf_vtype_name(kv->type));
	*len = (size_t)ld64(kv->val);
	*s = (const char *)kv->val + 8;
	return 0;
}

int
gguf_arr_str(const struct gguf_kv *kv, uint64_t i, const char **s, size_t *len)
{
	if (kv->type != GGUF_ARRAY || kv->arr_type != GGUF_STRING || i >= kv->n)
		return -1;
	const uint8_t *p = kv->val + kv->str_off[i];
	*len = (size_t)ld64(p);
	*s = (const char *)p + 8;
	return 0;
}

double
gguf_arr_num(const struct gguf_kv *kv, uint64_t i)
{
	if (kv->type != GGUF_ARRAY || kv->arr_type == GGUF_STRING || i >= kv->n)
		return NAN;
	return gguf_val_num(kv->arr_type, kv->val + i * gguf_vtype_size(kv->arr_type));
}

int
gguf_tensor_ndims(const struct gguf_tensor *t)
{
	int n = GGUF_MAX_DIMS;
	while (n > 1 && t->ne[n - 1] == 1)
		n--;
	return n;
}

uint64_t
gguf_tensor_nelem(const struct gguf_tensor *t)
{
	return (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * (uint64_t)t->ne[2] *
	    (uint64_t)t->ne[3];
}

/* ---- writer ---- */

struct wkv {
	char *key;
	uint8_t *bytes;		/* type and payload, serialized */
	size_t len;
};

struct wtensor {
	char name[GGUF_NAME_MAX + 1];
	uint32_t n_dims;
	int64_t ne[GGUF_MAX_DIMS];
	uint32_t type;
	uint64_t nbytes, offset;
	uint64_t written;	/* updated atomically */
};

struct gguf_writer {
	struct wkv *kv;
	size_t n_kv, cap_kv;
	struct wtensor *t;
	size_t n_t, cap_t;
	struct plc_atomic out;
	int open;
	uint64_t data_off, total;
	char err[512];
};

static int GGUF_PRINTF(2, 3)
werr(struct gguf_writer *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->err, sizeof(w->err), fmt, ap);
	va_end(ap);
	return -1;
}

struct gguf_writer *
gguf_writer_new(void)
{
	struct gguf_writer *w = calloc(1, sizeof(*w));
	if (w)
		w->out.fd = -1;
	return w;
}

const char *
gguf_writer_error(const struct gguf_writer *w)
{
	return w->err;
}

void
gguf_writer_free(struct gguf_writer *w)
{
	if (w == NULL)
		return;
	gguf_writer_abort(w);
	for (size_t i = 0; i < w->n_kv; i++) {
		free(w->kv[i].key);
		free(w->kv[i].bytes);
	}
	free(w->kv);
	free(w->t);
	free(w);
}

int
gguf_remove_kv(struct gguf_writer *w, const char *key)
{
	for (size_t i = 0; i < w->n_kv; i++) {
		if (strcmp(w->kv[i].key, key) != 0)
			continue;
		free(w->kv[i].key);
		free(w->kv[i].bytes);
		memmove(&w->kv[i], &w->kv[i + 1], (w->n_kv - i - 1) * sizeof(*w->kv));
		w->n_kv--;
		return 0;
	}
	return -1;
}

/* Append a KV whose serialized type+payload is bytes (ownership taken). */
static int
add_kv(struct gguf_writer *w, const char *key, uint8_t *bytes, size_t len)
{
	if (bytes == NULL)
		return werr(w, "out of memory");
	if (w->open) {
		free(bytes);
		return werr(w, "key %s: the header is already written", key);
	}
	if (*key == '\0') {
		free(bytes);
		return werr(w, "empty key");
	}
	gguf_remove_kv(w, key);
	if (w->n_kv == w->cap_kv) {
		size_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
		struct wkv *n = realloc(w->kv, cap * sizeof(*n));
		if (n == NULL) {
			free(bytes);
			return werr(w, "out of memory");
		}
		w->kv = n;
		w->cap_kv = cap;
	}
	char *k = strdup(key);
	if (k == NULL) {
		free(bytes);
		return werr(w, "out of memory");
	}
	w->kv[w->n_kv++] = (struct wkv){ k, bytes, len };
	return 0;
}

static void
st32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void
st64(uint8_t *p, uint64_t v)
{
	st32(p, (uint32_t)v);
	st32(p + 4, (uint32_t)(v >> 32));
}

static int
set_scalar(struct gguf_writer *w, const char *key, uint32_t type, const void *v)
{
	size_t sz = gguf_vtype_size(type);
	uint8_t *b = malloc(4 + sz);
	if (b) {
		st32(b, type);
		memcpy(b + 4, v, sz);	/* x86-64 and aarch64 are little-endian */
	}
	return add_kv(w, key, b, 4 + sz);
}

int
gguf_set_u32(struct gguf_writer *w, const char *key, uint32_t v)
{
	return set_scalar(w, key, GGUF_UINT32, &v);
}

int
gguf_set_i32(struct gguf_writer *w, const char *key, int32_t v)
{
	return set_scalar(w, key, GGUF_INT32, &v);
}

int
gguf_set_u64(struct gguf_writer *w, const char *key, uint64_t v)
{
	return set_scalar(w, key, GGUF_UINT64, &v);
}

int
gguf_set_f32(struct gguf_writer *w, const char *key, float v)
{
	return set_scalar(w, key, GGUF_FLOAT32, &v);
}

int
gguf_set_bool(struct gguf_writer *w, const char *key, int v)
{
	uint8_t b = v ? 1 : 0;
	return set_scalar(w, key, GGUF_BOOL, &b);
}

int
gguf_set_strn(struct gguf_writer *w, const char *key, const char *s, size_t len)
{
	uint8_t *b = malloc(12 + len);
	if (b) {
		st32(b, GGUF_STRING);
		st64(b + 4, len);
		memcpy(b + 12, s, len);
	}
	return add_kv(w, key, b, 12 + len);
}

int
gguf_set_str(struct gguf_writer *w, const char *key, const char *s)
{
	return gguf_set_strn(w, key, s, strlen(s));
}

int
gguf_set_arr(struct gguf_writer *w, const char *key, uint32_t elem_type,
    const void *elems, uint64_t n)
{
	size_t sz = gguf_vtype_size(elem_type);
	if (sz == 0)
		return werr(w, "key %s: arrays of %s need gguf_set_arr_str", key,
		    gguf_vtype_name(elem_type));
	uint8_t *b = malloc(16 + n * sz);
	if (b) {
		st32(b, GGUF_ARRAY);
		st32(b + 4, elem_type);
		st64(b + 8, n);
		if (n)
			memcpy(b + 16, elems, n * sz);
	}
	return add_kv(w, key, b, 16 + n * sz);
}

int
gguf_set_arr_str(struct gguf_writer *w, const char *key,
    const char *const *strs, const size_t *lens, uint64_t n)
{
	size_t total = 16;
	for (uint64_t i = 0; i < n; i++)
		total += 8 + (lens ? lens[i] : strlen(strs[i]));
	uint8_t *b = malloc(total);
	if (b) {
		st32(b, GGUF_ARRAY);
		st32(b + 4, GGUF_STRING);
		st64(b + 8, n);
		uint8_t *p = b + 16;
		for (uint64_t i = 0; i < n; i++) {
			size_t l = lens ? lens[i] : strlen(strs[i]);
			st64(p, l);
			memcpy(p + 8, strs[i], l);
			p += 8 + l;
		}
	}
	return add_kv(w, key, b, total);
}

int
gguf_copy_kv(struct gguf_writer *w, const struct gguf *g, uint64_t i)
{
	const struct gguf_kv *kv = &g->kv[i];
	size_t hdr = kv->type == GGUF_ARRAY ? 16 : 4;
	uint8_t *b = malloc(hdr + kv->val_len);
	if (b) {
		st32(b, kv->type);
		if (kv->type == GGUF_ARRAY) {
			st32(b + 4, kv->arr_type);
			st64(b + 8, kv->n);
		}
		memcpy(b + hdr, kv->val, kv->val_len);
	}
	return add_kv(w, kv->key, b, hdr + kv->val_len);
}

int64_t
gguf_add_tensor(struct gguf_writer *w, const char *name, uint32_t n_dims,
    const int64_t *ne, uint32_t type)
{
	uint32_t blck, size;
	size_t nlen = strlen(name);

	if (w->open)
		return werr(w, "tensor %s: the header is already written", name);
	if (nlen == 0 || nlen > GGUF_NAME_MAX)
		return werr(w, "tensor name \"%s\" is %zu bytes; 1 to %d allowed", name,
		    nlen, GGUF_NAME_MAX);
	if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
		return werr(w, "tensor %s: %" PRIu32 " dimensions", name, n_dims);
	if (gguf_type_info(type, &blck, &size) == -1)
		return werr(w, "tensor %s: unknown type %" PRIu32, name, type);
	for (size_t i = 0; i < w->n_t; i++)
		if (strcmp(w->t[i].name, name) == 0)
			return werr(w, "tensor %s added twice", name);
	struct wtensor t = { .n_dims = n_dims, .type = type };
	memcpy(t.name, name, nlen + 1);
	uint64_t nb = 0;
	for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
		t.ne[d] = d < n_dims ? ne[d] : 1;
		if (t.ne[d] < 0)
			return werr(w, "tensor %s: negative dimension", name);
	}
	if (t.ne[0] % blck != 0)
		return werr(w, "tensor %s: ne[0] = %" PRId64 " is not a multiple of %s's "
		    "block size %" PRIu32, name, t.ne[0], types[type].name, blck);
	nb = (uint64_t)t.ne[0] / blck * size;
	for (int d = 1; d < GGUF_MAX_DIMS; d++)
		nb *= (uint64_t)t.ne[d];
	t.nbytes = nb;
	if (w->n_t == w->cap_t) {
		size_t cap = w->cap_t ? w->cap_t * 2 : 64;
		struct wtensor *n = realloc(w->t, cap * sizeof(*n));
		if (n == NULL)
			return werr(w, "out of memory");
		w->t = n;
		w->cap_t = cap;
	}
	w->t[w->n_t] = t;
	return (int64_t)w->n_t++;
}

uint64_t
gguf_writer_tensor_nbytes(const struct gguf_writer *w, int64_t idx)
{
	return w->t[idx].nbytes;
}

int
gguf_writer_begin(struct gguf_writer *w, const char *path)
{
	size_t hlen = 24;
	for (size_t i = 0; i < w->n_kv; i++)
		hlen += 8 + strlen(w->kv[i].key) + w->kv[i].len;
	for (size_t i = 0; i < w->n_t; i++)
		hlen += 8 + strlen(w->t[i].name) + 4 + 8 * w->t[i].n_dims + 4 + 8;
	w->data_off = align_up(hlen, GGUF_DEFAULT_ALIGNMENT);

	uint64_t off = 0;
	for (size_t i = 0; i < w->n_t; i++) {
		w->t[i].offset = off;
		w->t[i].written = 0;
		off = align_up(off + w->t[i].nbytes, GGUF_DEFAULT_ALIGNMENT);
	}
	w->total = w->data_off + off;

	uint8_t *h = calloc(1, w->data_off);
	if (h == NULL)
		return werr(w, "out of memory");
	uint8_t *p = h;
	st32(p, GGUF_MAGIC);
	st32(p + 4, GGUF_VERSION);
	st64(p + 8, w->n_t);
	st64(p + 16, w->n_kv);
	p += 24;
	for (size_t i = 0; i < w->n_kv; i++) {
		size_t kl = strlen(w->kv[i].key);
		st64(p, kl);
		memcpy(p + 8, w->kv[i].key, kl);
		memcpy(p + 8 + kl, w->kv[i].bytes, w->kv[i].len);
		p += 8 + kl + w->kv[i].len;
	}
	for (size_t i = 0; i < w->n_t; i++) {
		struct wtensor *t = &w->t[i];
		size_t nl = strlen(t->name);
		st64(p, nl);
		memcpy(p + 8, t->name, nl);
		p += 8 + nl;
		st32(p, t->n_dims);
		p += 4;
		for (uint32_t d = 0; d < t->n_dims; d++, p += 8)
			st64(p, (uint64_t)t->ne[d]);
		st32(p, t->type);
		st64(p + 4, t->offset);
		p += 12;
	}

	if (plc_atomic_open(&w->out, path, 0644) == -1) {
		free(h);
		return werr(w, "%s: %s", path, strerror(errno));
	}
	/* Size the file first: the padding is then the zeros a sparse
	 * extension reads as, and tensors can be written in any order. */
	if (ftruncate(w->out.fd, (off_t)w->total) == -1 ||
	    plc_pwrite_all(w->out.fd, h, w->data_off, 0) == -1) {
		int e = errno;
		free(h);
		plc_atomic_abort(&w->out);
		return werr(w, "%s: %s", w->out.tmp, strerror(e));
	}
	free(h);
	w->open = 1;
	return 0;
}

int
gguf_writer_fd(const struct gguf_writer *w)
{
	return w->out.fd;
}

uint64_t
gguf_writer_tensor_pos(const struct gguf_writer *w, int64_t idx)
{
	return w->data_off + w->t[idx].offset;
}

void
gguf_writer_account(struct gguf_writer *w, int64_t idx, uint64_t len)
{
	__atomic_add_fetch(&w->t[idx].written, len, __ATOMIC_RELAXED);
}

int
gguf_writer_pwrite(struct gguf_writer *w, int64_t idx, uint64_t off,
    const void *buf, size_t len)
{
	if (!w->open || idx < 0 || (size_t)idx >= w->n_t)
		return werr(w, "write to tensor %" PRId64 " outside the header", idx);
	struct wtensor *t = &w->t[idx];
	if (off > t->nbytes || len > t->nbytes - off)
		return werr(w, "tensor %s: write of %zu bytes at %" PRIu64 " exceeds its %"
		    PRIu64 " bytes", t->name, len, off, t->nbytes);
	if (plc_pwrite_all(w->out.fd, buf, len,
	    (off_t)(w->data_off + t->offset + off)) == -1)
		return werr(w, "%s: tensor %s: %s", w->out.tmp, t->name, strerror(errno));
	__atomic_add_fetch(&t->written, len, __ATOMIC_RELAXED);
	return 0;
}

int
gguf_writer_write(struct gguf_writer *w, int64_t idx, const void *buf, size_t len)
{
	if (!w->open || idx < 0 || (size_t)idx >= w->n_t)
		return werr(w, "write to tensor %" PRId64 " outside the header", idx);
	return gguf_writer_pwrite(w, idx, w->t[idx].written, buf, len);
}

int
gguf_writer_commit(struct gguf_writer *w)
{
	if (!w->open)
		return werr(w, "commit before begin");
	for (size_t i = 0; i < w->n_t; i++)
		if (w->t[i].written != w->t[i].nbytes) {
			werr(w, "tensor %s: %" PRIu64 " of %" PRIu64 " bytes written",
			    w->t[i].name, w->t[i].written, w->t[i].nbytes);
			gguf_writer_abort(w);
			return -1;
		}
	w->open = 0;
	if (plc_atomic_commit(&w->out) == -1)
		return werr(w, "%s: %s", w->out.path, strerror(errno));
	w->out.fd = -1;
	return 0;
}

void
gguf_writer_abort(struct gguf_writer *w)
{
	if (w->open) {
		plc_atomic_abort(&w->out);
		w->open = 0;
	}
}

/* ---- numbers ---- */

static float
f_from_bits(uint32_t w)
{
	float f;
	memcpy(&f, &w, 4);
	return f;
}

static uint32_t
f_to_bits(float f)
{
	uint32_t w;
	memcpy(&w, &f, 4);
	return w;
}

/* ggml_compute_fp32_to_fp16 (ggml-impl.h, from the FP16 library): IEEE
 * round-to-nearest-even without branches on the value; NaN becomes 0x7E00
 * with its sign. It needs the default rounding mode and no flush-to-zero. */
uint16_t
gguf_fp32_to_fp16(float f)
{
	const float scale_to_inf = 0x1.0p+112f;
	const float scale_to_zero = 0x1.0p-110f;
	float base = (fabsf(f) * scale_to_inf) * scale_to_zero;
	const uint32_t w = f_to_bits(f);
	const uint32_t shl1_w = w + w;
	const uint32_t sign = w & 0x80000000u;
	uint32_t bias = shl1_w & 0xFF000000u;
	if (bias < 0x71000000u)
		bias = 0x71000000u;
	base = f_from_bits((bias >> 1) + 0x07800000u) + base;
	const uint32_t bits = f_to_bits(base);
	const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
	const uint32_t mantissa_bits = bits & 0x00000FFFu;
	const uint32_t nonsign = exp_bits + mantissa_bits;
	return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* gguf_fp32_to_fp16 over a row; four lanes at a time with SSE2, the same
 * operations on the same bits (unsigned compares done on sign-flipped
 * values, the 32-to-16-bit narrowing done around a bias, since the packs
 * saturate as signed). */
void
gguf_fp32_to_fp16_row(const float *x, uint16_t *y, size_t n)
{
	size_t i = 0;
#ifdef __SSE2__
	const __m128 to_inf = _mm_set1_ps(0x1.0p+112f), to_zero = _mm_set1_ps(0x1.0p-110f);
	const __m128i flip = _mm_set1_epi32((int)0x80000000u);
	const __m128i min_bias = _mm_set1_epi32(0x71000000);
	const __m128i nan_lim = _mm_set1_epi32((int)(0xFF000000u ^ 0x80000000u));
	for (; i + 4 <= n; i += 4) {
		__m128 f = _mm_loadu_ps(x + i);
		__m128i w = _mm_castps_si128(f);
		__m128 base = _mm_mul_ps(_mm_mul_ps(_mm_andnot_ps(_mm_set1_ps(-0.0f), f), to_inf),
		    to_zero);
		__m128i shl1 = _mm_add_epi32(w, w);
		__m128i sign = _mm_and_si128(w, flip);
		__m128i bias = _mm_and_si128(shl1, _mm_set1_epi32((int)0xFF000000u));
		/* bias < 0x71000000 (unsigned) ? 0x71000000 : bias */
		__m128i lt = _mm_cmplt_epi32(_mm_xor_si128(bias, flip), _mm_xor_si128(min_bias, flip));
		bias = _mm_or_si128(_mm_and_si128(lt, min_bias), _mm_andnot_si128(lt, bias));
		__m128 b = _mm_castsi128_ps(_mm_add_epi32(_mm_srli_epi32(bias, 1),
		    _mm_set1_epi32(0x07800000)));
		__m128i bits = _mm_castps_si128(_mm_add_ps(b, base));
		__m128i nonsign = _mm_add_epi32(
		    _mm_and_si128(_mm_srli_epi32(bits, 13), _mm_set1_epi32(0x7C00)),
		    _mm_and_si128(bits, _mm_set1_epi32(0x0FFF)));
		/* shl1 > 0xFF000000 (unsigned): NaN */
		__m128i isnan = _mm_cmpgt_epi32(_mm_xor_si128(shl1, flip), nan_lim);
		__m128i r = _mm_or_si128(_mm_and_si128(isnan, _mm_set1_epi32(0x7E00)),
		    _mm_andnot_si128(isnan, nonsign));
		r = _mm_or_si128(r, _mm_srli_epi32(sign, 16));
		/* r is 0..0xFFFF: bias to signed 16 bits, pack, unbias. */
		r = _mm_sub_epi32(r, _mm_set1_epi32(0x8000));
		__m128i p = _mm_packs_epi32(r, r);
		p = _mm_xor_si128(p, _mm_set1_epi16((short)0x8000));
		_mm_storel_epi64((__m128i *)(void *)(y + i), p);
	}
#endif
	for (; i < n; i++)
		y[i] = gguf_fp32_to_fp16(x[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Eight at a time with F16C: BF16 widened by a shift (exact), converted
 * with IEEE round-to-nearest-even (subnormals and overflow to infinity
 * included: the bits gguf_fp32_to_fp16 computes), NaNs then made 0x7E00
 * with their sign, as gguf_fp32_to_fp16 makes them (the instruction
 * keeps the payload). Returns how many were done; *special is set when
 * one has an all-ones exponent. */
__attribute__((target("avx2,f16c"))) static size_t
bf16_to_fp16_f16c(const uint16_t *x, uint16_t *y, size_t n, int *special)
{
	const __m128i e16 = _mm_set1_epi16(0x7c00), ebf = _mm_set1_epi16(0x7f80);
	const __m128i mag = _mm_set1_epi16(0x7fff), sign = _mm_set1_epi16((short)0x8000);
	const __m128i qnan = _mm_set1_epi16(0x7e00);
	__m128i acc = _mm_setzero_si128();
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(x + i));
		__m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
		__m128i h = _mm256_cvtps_ph(_mm256_castsi256_ps(w),
		    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		/* |b| > 0x7f80: a NaN (both sides below 0x8000, so signed). */
		__m128i nan = _mm_cmpgt_epi16(_mm_and_si128(b, mag), ebf);
		h = _mm_blendv_epi8(h, _mm_or_si128(_mm_and_si128(b, sign), qnan), nan);
		acc = _mm_or_si128(acc, _mm_cmpeq_epi16(_mm_and_si128(h, e16), e16));
		_mm_storeu_si128((__m128i *)(void *)(y + i), h);
	}
	*special |= !_mm_testz_si128(acc, acc);
	return i;
}
#endif

int
gguf_bf16_to_fp16_row(const uint16_t *x, uint16_t *y, size_t n)
{
	int special = 0;
	size_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
	static int have = -1;
	int f16c = __atomic_load_n(&have, __ATOMIC_RELAXED);
	if (f16c == -1) {
		/* F16C by cpuid: clang 14 knows no "f16c" for
		 * __builtin_cpu_supports (the fuzz build uses clang). */
		unsigned int a, b, c, d;
		f16c = __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) &&
		    (c & bit_F16C) != 0;
		__atomic_store_n(&have, f16c, __ATOMIC_RELAXED);
	}
	if (f16c)
		i = bf16_to_fp16_f16c(x, y, n, &special);
#endif
	float f[256];
	while (i < n) {
		size_t k = n - i < 256 ? n - i : 256;
		for (size_t j = 0; j < k; j++)
			f[j] = gguf_bf16_to_fp32(x[i + j]);
		gguf_fp32_to_fp16_row(f, y + i, k);
		for (size_t j = 0; j < k; j++)
			special |= (~y[i + j] & 0x7c00u) == 0;
		i += k;
	}
	return special;
}

/* ggml_compute_fp16_to_fp32: exact. */
float
gguf_fp16_to_fp32(uint16_t h)
{
	const uint32_t w = (uint32_t)h << 16;
	const uint32_t sign = w & 0x80000000u;
	const uint32_t two_w = w + w;
	const uint32_t exp_offset = 0xE0u << 23;
	const float normalized = f_from_bits((two_w >> 4) + exp_offset) * 0x1.0p-112f;
	const float denormalized = f_from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
	const uint32_t r = sign | (two_w < (1u << 27) ? f_to_bits(denormalized) :
	    f_to_bits(normalized));
	return f_from_bits(r);
}

/* ggml_compute_fp32_to_bf16: round to nearest even; NaN stays a quiet NaN. */
uint16_t
gguf_fp32_to_bf16(float f)
{
	uint32_t u = f_to_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 64);
	return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

float
gguf_bf16_to_fp32(uint16_t h)
{
	return f_from_bits((uint32_t)h << 16);
}

/*
 * quantize_row_q8_0_ref (ggml-quants.c), step for step (HACKING.md: Q8_0):
 * float32 amax with ggml's MAX (so a NaN is replaced by the next value,
 * not skipped), d = amax/127, the reciprocal of the float32 d (not of the
 * rounded fp16), and roundf's ties-away-from-zero. roundf is emulated
 * exactly with a truncation: for |v| < 2^23 both the truncation and the
 * subtraction are exact, so the comparison with 0.5 decides as roundf
 * does.
 */
static void
q8_0_block(const float *x, uint8_t *y)
{
	float amax = 0.0f;
	for (int j = 0; j < QK8_0; j++) {
		float a = fabsf(x[j]);
		amax = amax > a ? amax : a;
	}
	const float d = amax / 127.0f;
	const float id = d != 0.0f ? 1.0f / d : 0.0f;
	uint16_t h = gguf_fp32_to_fp16(d);
	y[0] = (uint8_t)h;
	y[1] = (uint8_t)(h >> 8);
	int8_t *qs = (int8_t *)(y + 2);
	for (int j = 0; j < QK8_0; j++) {
		const float v = x[j] * id;
		int32_t q = (int32_t)v;
		float frac = v - (float)q;
		/* The bounds on frac keep an infinite v (a d so small that
		 * 1/d overflowed) at the truncation, as the float-to-int8
		 * conversion of roundf's inf is. */
		q += (frac >= 0.5f && frac < 1.0f) - (frac <= -0.5f && frac > -1.0f);
		qs[j] = (int8_t)q;
	}
}

#ifdef __SSE2__
/*
 * The same block with SSE2 (baseline on x86-64), for blocks without NaN:
 * maxps(a, b) is a > b ? a : b, ggml's MAX, and without NaN the order of a
 * max reduction does not matter. The rounding is the truncation method
 * above, lane by lane; the narrowing packs saturate, which is exact
 * because |q| <= 127 whenever 1/d is finite. A block whose 1/d overflowed
 * (all values below about 1e-37) or that holds a NaN goes to the scalar
 * code, which reproduces the reference there too.
 */
static int
q8_0_block_sse2(const float *x, uint8_t *y)
{
	const __m128 sign = _mm_set1_ps(-0.0f);
	__m128 v[8], m = _mm_setzero_ps(), nan = _mm_setzero_ps();
	for (int i = 0; i < 8; i++) {
		v[i] = _mm_loadu_ps(x + 4 * i);
		nan = _mm_or_ps(nan, _mm_cmpunord_ps(v[i], v[i]));
		m = _mm_max_ps(m, _mm_andnot_ps(sign, v[i]));
	}
	if (_mm_movemask_ps(nan))
		return -1;
	m = _mm_max_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(1, 0, 3, 2)));
	m = _mm_max_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
	const float amax = _mm_cvtss_f32(m);
	const float d = amax / 127.0f;
	const float id = d != 0.0f ? 1.0f / d : 0.0f;
	if (isinf(id))
		return -1;
	uint16_t h = gguf_fp32_to_fp16(d);
	y[0] = (uint8_t)h;
	y[1] = (uint8_t)(h >> 8);
	const __m128 idv = _mm_set1_ps(id), half = _mm_set1_ps(0.5f), mhalf = _mm_set1_ps(-0.5f);
	const __m128i one = _mm_set1_epi32(1);
	__m128i q[8];
	for (int i = 0; i < 8; i++) {
		__m128 s = _mm_mul_ps(v[i], idv);
		__m128i t = _mm_cvttps_epi32(s);
		__m128 frac = _mm_sub_ps(s, _mm_cvtepi32_ps(t));
		__m128i up = _mm_and_si128(_mm_castps_si128(_mm_cmpge_ps(frac, half)), one);
		__m128i dn = _mm_and_si128(_mm_castps_si128(_mm_cmple_ps(frac, mhalf)), one);
		q[i] = _mm_sub_epi32(_mm_add_epi32(t, up), dn);
	}
	for (int i = 0; i < 2; i++) {
		__m128i a = _mm_packs_epi32(q[4 * i], q[4 * i + 1]);
		__m128i b = _mm_packs_epi32(q[4 * i + 2], q[4 * i + 3]);
		_mm_storeu_si128((__m128i *)(y + 2 + 16 * i), _mm_packs_epi16(a, b));
	}
	return 0;
}
#endif

/* Q8_0 reference quantizer: k floats (k % 32 == 0) to k/32 blocks. */
void
gguf_quantize_q8_0(const float *restrict x, uint8_t *restrict y, int64_t k)
{
	const int64_t nb = k / QK8_0;

	for (int64_t i = 0; i < nb; i++, x += QK8_0, y += Q8_0_BLOCK) {
#ifdef __SSE2__
		if (q8_0_block_sse2(x, y) == 0)
			continue;
#endif
		q8_0_block(x, y);
	}
}

int
gguf_copy_without(const char *in, const char *out, const char *const *drop,
    int *dropped, char *err, size_t errlen)
{
	struct gguf g;
	struct gguf_writer *w = NULL;
	uint64_t align = GGUF_DEFAULT_ALIGNMENT;
	int fd = -1, rc = -1;

	*dropped = 0;
	if (gguf_open(&g, in) == -1) {
		snprintf(err, errlen, "%s", g.err);
		return -1;
	}
	/* The writer lays tensors out at the default alignment: a file with
	 * another would have its tensors moved under a KV that says otherwise. */
	if (gguf_get_uint(&g, "general.alignment", &align) == 0 &&
	    align != GGUF_DEFAULT_ALIGNMENT) {
		snprintf(err, errlen, "%s: general.alignment %" PRIu64 ", only %d is copied",
		    in, align, GGUF_DEFAULT_ALIGNMENT);
		goto out;
	}
	if ((fd = open(in, O_RDONLY | O_CLOEXEC)) == -1) {
		snprintf(err, errlen, "%s: %s", in, strerror(errno));
		goto out;
	}
	if ((w = gguf_writer_new()) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (uint64_t i = 0; i < g.n_kv; i++) {
		int skip = 0;
		for (size_t d = 0; drop[d] != NULL; d++)
			skip |= strncmp(g.kv[i].key, drop[d], strlen(drop[d])) == 0;
		if (skip) {
			(*dropped)++;
			continue;
		}
		if (gguf_copy_kv(w, &g, i) == -1)
			goto werr;
	}
	for (uint64_t i = 0; i < g.n_tensors; i++)
		if (gguf_add_tensor(w, g.t[i].name, g.t[i].n_dims, g.t[i].ne, g.t[i].type) == -1)
			goto werr;
	if (gguf_writer_begin(w, out) == -1)
		goto werr;
	for (uint64_t i = 0; i < g.n_tensors; i++) {
		if (plc_copy_range(fd, (off_t)(g.data_off + g.t[i].offset), gguf_writer_fd(w),
		    (off_t)gguf_writer_tensor_pos(w, (int64_t)i), g.t[i].nbytes) == -1) {
			snprintf(err, errlen, "%s: copying tensor %s: %s", out, g.t[i].name,
			    strerror(errno));
			gguf_writer_abort(w);
			goto out;
		}
		gguf_writer_account(w, (int64_t)i, g.t[i].nbytes);
	}
	if (gguf_writer_commit(w) == -1)
		goto werr;
	rc = 0;
	goto out;
werr:
	snprintf(err, errlen, "%s: %s", out, gguf_writer_error(w));
	gguf_writer_abort(w);
out:
	if (w != NULL)
		gguf_writer_free(w);
	if (fd != -1)
		close(fd);
	gguf_close(&g);
	return rc;
}
