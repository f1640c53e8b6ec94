/*
 * gguf_quant.c: F32/F16/BF16 GGUF to Q8_0, byte for byte what
 * `llama-quantize IN OUT Q8_0` writes from the same input
 * (HACKING.md: Q8_0; llama.cpp src/llama-quant.cpp):
 *
 *   - KVs: the input's, in order, minus split.*; then
 *     general.quantization_version = 2 and general.file_type = 7, each
 *     removed and appended (gguf_set_val_u32), so they end the list;
 *   - tensors in the loader's weights_map order: by the layer number of
 *     "blk.%d." (others count as -1, first), then by name;
 *   - which tensors are quantized: tensor_allows_quantization (2-D or more,
 *     name ends in "weight", no "_norm.weight", ...); a quantized tensor
 *     whose ne[0] is not a multiple of 32 falls back to F16;
 *   - the reference rounding (gguf_quantize_q8_0), from the exact f32
 *     widening of F16/BF16.
 *
 * The work is cut into chunks of whole rows, spread over threads; each
 * chunk is written with pwrite at its final offset, so the order in which
 * chunks finish does not matter and the output does not depend on the
 * thread count. The input is read from its mapping under the SIGBUS guard
 * (plio.h): an input that shrinks while it is quantized fails the job
 * with the file named, and the process goes on.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"

/* The substrings tensor_allows_quantization excludes (llama-quant.cpp),
 * besides "_norm.weight". */
static const char *const noquant_substr[] = {
	"ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
	"per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight",
	"indexer.k_proj.weight", "indexer.q_proj.weight",
	"time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
	"time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
	"time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
	"time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
	"time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
	"time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
	"sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
	".patch_merger", "a.rvq.codebook", "mm.a.code_embd", NULL
};

int
gguf_q8_0_allows(const char *name, int ndims)
{
	size_t n = strlen(name);
	if (ndims < 2)
		return 0;
	if (n < 6 || strcmp(name + n - 6, "weight") != 0)
		return 0;
	if (strstr(name, "_norm.weight") != NULL)
		return 0;
	/* LLM_TENSOR_POS_EMBD and LLM_TENSOR_TOKEN_TYPES. */
	if (strcmp(name, "position_embd.weight") == 0 ||
	    strcmp(name, "token_types.weight") == 0)
		return 0;
	for (int i = 0; noquant_substr[i]; i++)
		if (strstr(name, noquant_substr[i]) != NULL)
			return 0;
	return 1;
}

uint32_t
gguf_q8_0_target(const struct gguf_tensor *t)
{
	if (!gguf_q8_0_allows(t->name, gguf_tensor_ndims(t)))
		return t->type;
	return t->ne[0] % QK8_0 == 0 ? GGML_Q8_0 : GGML_F16;
}

/* weight_name_comparer of llama-model-loader.h, sscanf included. */
static int
layer_of(const char *name)
{
	int l = -1;
	if (sscanf(name, "blk.%d.", &l) != 1)
		l = -1;
	return l;
}

static int
cmp_weights(const void *a, const void *b)
{
	const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
	const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
	int lx = layer_of(x->name), ly = layer_of(y->name);
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* One unit of work: rows [r0, r1) of output tensor i. */
struct chunk {
	int64_t tensor;
	int64_t r0, r1;
};

struct qjob {
	struct gguf *in;
	struct gguf_writer *w;
	const struct gguf_tensor **src;	/* output order */
	uint32_t *dst_type;
	struct chunk *chunks;
	size_t n_chunks;
	size_t next;			/* atomic */
	uint64_t done_bytes;		/* atomic: input bytes processed */
	int failed;			/* atomic */
	pthread_mutex_t lock;
	char err[512];
};

static void
job_fail(struct qjob *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
job_fail(struct qjob *q, const char *fmt, ...)
{
	pthread_mutex_lock(&q->lock);
	if (!q->failed) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(q->err, sizeof(q->err), fmt, ap);
		va_end(ap);
		__atomic_store_n(&q->failed, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&q->lock);
}

static uint64_t
row_bytes(uint32_t type, int64_t ne0)
{
	uint32_t blck, size;
	gguf_type_info(type, &blck, &size);
	return (uint64_t)ne0 / blck * size;
}

/* fp16 to f32 by table (256 KiB, built once): the exact conversion of
 * gguf_fp16_to_fp32 for every half. */
static float f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void
f16_table_init(void)
{
	for (uint32_t i = 0; i < 65536; i++)
		f16_table[i] = gguf_fp16_to_fp32((uint16_t)i);
}

/* Widen n elements of a F32/F16/BF16 source to f32; the index of the first
 * non-finite value, or -1. Non-finite is an all-ones exponent, tested on
 * the bits (OR-ed together, so the loop has no branch). */
static int64_t
widen(uint32_t type, const uint8_t *src, float *dst, int64_t n)
{
	uint32_t acc = 0;
	switch (type) {
	case GGML_F32: {
		const uint32_t *u = (const uint32_t *)(const void *)src;
		memcpy(dst, src, (size_t)n * 4);
		for (int64_t i = 0; i < n; i++)
			acc |= (~u[i] & 0x7f800000u) == 0;
		break;
	}
	case GGML_F16: {
		const uint16_t *h = (const uint16_t *)(const void *)src;
		pthread_once(&f16_once, f16_table_init);
		for (int64_t i = 0; i < n; i++) {
			dst[i] = f16_table[h[i]];
			acc |= (~h[i] & 0x7c00u) == 0;
		}
		break;
	}
	case GGML_BF16: {
		const uint16_t *h = (const uint16_t *)(const void *)src;
		for (int64_t i = 0; i < n; i++) {
			uint32_t u = (uint32_t)h[i] << 16;
			memcpy(&dst[i], &u, 4);
			acc |= (~h[i] & 0x7f80u) == 0;
		}
		break;
	}
	}
	if (acc)
		for (int64_t i = 0; i < n; i++)
			if (!isfinite(dst[i]))
				return i;
	return -1;
}

static void
do_chunk(struct qjob *q, const struct chunk *c, float *fbuf, uint8_t *obuf)
{
	const struct gguf_tensor *t = q->src[c->tensor];
	uint32_t dt = q->dst_type[c->tensor];
	uint64_t srow = row_bytes(t->type, t->ne[0]);
	uint64_t drow = row_bytes(dt, t->ne[0]);
	int64_t nrows = c->r1 - c->r0;
	const uint8_t *src = t->data + (uint64_t)c->r0 * srow;

	if (dt == t->type) {
		/* Copied unchanged, as llama-quantize does. */
		if (gguf_writer_pwrite(q->w, c->tensor, (uint64_t)c->r0 * srow, src,
		    (size_t)(nrows * srow)) == -1) {
			/* From a page of the mapping that cannot be read, the
			 * write fails with EFAULT rather than raise SIGBUS. */
			if (errno == EFAULT)
				job_fail(q, "%s: " PLC_MAP_CHANGED, q->in->path);
			else
				job_fail(q, "%s", gguf_writer_error(q->w));
		}
		__atomic_add_fetch(&q->done_bytes, nrows * srow, __ATOMIC_RELAXED);
		return;
	}
	int64_t n = nrows * t->ne[0];
	int64_t bad = widen(t->type, src, fbuf, n);
	if (bad >= 0) {
		/* llama-quantize's row validation refuses these too; say where. */
		int64_t e = (int64_t)c->r0 * t->ne[0] + bad;
		job_fail(q, "tensor %s: element %" PRId64 " (row %" PRId64 ", column %"
		    PRId64 ") is %s; refusing to quantize", t->name, e, e / t->ne[0],
		    e % t->ne[0], isnan(fbuf[bad]) ? "NaN" : "infinite");
		return;
	}
	if (dt == GGML_Q8_0) {
		gguf_quantize_q8_0(fbuf, obuf, n);
		/* A scale beyond fp16's range would be stored as infinity. */
		for (int64_t b = 0; b < n / QK8_0; b++)
			if ((obuf[b * Q8_0_BLOCK + 1] & 0x7c) == 0x7c) {
				int64_t e = (int64_t)c->r0 * t->ne[0] + b * QK8_0;
				job_fail(q, "tensor %s: block at element %" PRId64 " has a scale "
				    "beyond fp16's range", t->name, e);
				return;
			}
	} else {	/* F16 fallback */
		for (int64_t i = 0; i < n; i++) {
			uint16_t h = gguf_fp32_to_fp16(fbuf[i]);
			memcpy(obuf + 2 * i, &h, 2);
		}
	}
	if (gguf_writer_pwrite(q->w, c->tensor, (uint64_t)c->r0 * drow, obuf,
	    (size_t)(nrows * drow)) == -1)
		job_fail(q, "%s", gguf_writer_error(q->w));
	__atomic_add_fetch(&q->done_bytes, nrows * srow, __ATOMIC_RELAXED);
}

/* do_chunk under the SIGBUS guard: its reads of the mapping are widen()'s
 * (pure computation) and the write's, which fails instead (EFAULT);
 * job_fail, the only lock, formats no mapped bytes. */
static void
do_chunk_guarded(struct qjob *q, const struct chunk *c, float *fbuf, uint8_t *obuf)
{
	sigjmp_buf jb;
	if (sigsetjmp(jb, 1)) {
		job_fail(q, "%s: " PLC_MAP_CHANGED, q->in->path);
		return;
	}
	plc_guard_begin(&jb);
	do_chunk(q, c, fbuf, obuf);
	plc_guard_end();
}

/* Rows per chunk: about CHUNK_BYTES of input, at least one row. */
#define CHUNK_BYTES (4u << 20)

static int64_t
chunk_rows(const struct gguf_tensor *t)
{
	uint64_t srow = row_bytes(t->type, t->ne[0]);
	int64_t r = srow ? (int64_t)(CHUNK_BYTES / srow) : 1;
	return r < 1 ? 1 : r;
}

struct worker {
	struct qjob *q;
	float *fbuf;
	uint8_t *obuf;
	size_t cap;		/* elements */
};

static int
worker_bufs(struct worker *wk, size_t elems)
{
	if (elems <= wk->cap)
		return 0;
	free(wk->fbuf);
	free(wk->obuf);
	wk->fbuf = malloc(elems * sizeof(float));
	wk->obuf = malloc(elems * 2);	/* F16 is the widest output */
	wk->cap = elems;
	return wk->fbuf && wk->obuf ? 0 : -1;
}

/* Take one chunk and do it; 0 when there was none left. */
static int
work_one(struct worker *wk)
{
	struct qjob *q = wk->q;
	if (__atomic_load_n(&q->failed, __ATOMIC_ACQUIRE))
		return 0;
	size_t i = __atomic_fetch_add(&q->next, 1, __ATOMIC_RELAXED);
	if (i >= q->n_chunks)
		return 0;
	const struct chunk *c = &q->chunks[i];
	const struct gguf_tensor *t = q->src[c->tensor];
	size_t elems = (size_t)((c->r1 - c->r0) * t->ne[0]);
	if (q->dst_type[c->tensor] != t->type && worker_bufs(wk, elems) == -1) {
		job_fail(q, "out of memory for %zu elements of tensor %s", elems, t->name);
		return 0;
	}
	do_chunk_guarded(q, c, wk->fbuf, wk->obuf);
	return 1;
}

static void *
worker_main(void *arg)
{
	struct worker *wk = arg;
	while (work_one(wk))
		;
	return NULL;
}

int
gguf_quantize_q8_0_file(const char *in_path, const char *out_path,
    const struct gguf_qopts *o, struct gguf_qstats *st, char *err, size_t errlen)
{
	struct gguf g;
	struct qjob q;
	struct gguf_writer *w = NULL;
	pthread_t *tids = NULL;
	struct worker *wks = NULL;
	int nthreads = o && o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	int started = 0, rc = -1;

	memset(&q, 0, sizeof(q));
	pthread_mutex_init(&q.lock, NULL);
	if (st)
		memset(st, 0, sizeof(*st));
	if (nthreads < 1)
		nthreads = 1;
	if (gguf_open(&g, in_path) == -1) {
		snprintf(err, errlen, "%s", g.err);
		pthread_mutex_destroy(&q.lock);
		return -1;
	}
	q.in = &g;

	int64_t ai = gguf_find_kv(&g, "general.alignment");
	if (ai >= 0 && g.alignment != GGUF_DEFAULT_ALIGNMENT) {
		snprintf(err, errlen, "%s: general.alignment is %" PRIu32 "; only %d is "
		    "supported", in_path, g.alignment, GGUF_DEFAULT_ALIGNMENT);
		goto out;
	}
	q.src = calloc(g.n_tensors + 1, sizeof(*q.src));
	q.dst_type = calloc(g.n_tensors + 1, sizeof(*q.dst_type));
	if (q.src == NULL || q.dst_type == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (uint64_t i = 0; i < g.n_tensors; i++)
		q.src[i] = &g.t[i];
	qsort(q.src, g.n_tensors, sizeof(*q.src), cmp_weights);

	w = gguf_writer_new();
	if (w == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (uint64_t i = 0; i < g.n_kv; i++) {
		const char *k = g.kv[i].key;
		if (strcmp(k, "split.no") == 0 || strcmp(k, "split.count") == 0 ||
		    strcmp(k, "split.tensors.count") == 0)
			continue;
		if (gguf_copy_kv(w, &g, i) == -1)
			goto werr;
	}
	if (gguf_set_u32(w, "general.quantization_version", 2) == -1 ||
	    gguf_set_u32(w, "general.file_type", LLAMA_FTYPE_MOSTLY_Q8_0) == -1)
		goto werr;

	size_t n_chunks = 0;
	for (uint64_t i = 0; i < g.n_tensors; i++) {
		const struct gguf_tensor *t = q.src[i];
		uint32_t dt = gguf_q8_0_target(t);
		if (dt != t->type && t->type != GGML_F32 && t->type != GGML_F16 &&
		    t->type != GGML_BF16) {
			snprintf(err, errlen, "%s: tensor %s is already %s; requantizing is "
			    "not supported (llama-quantize needs --allow-requantize for it)",
			    in_path, t->name, gguf_type_name(t->type));
			goto out;
		}
		q.dst_type[i] = dt;
		if (st) {
			if (dt == GGML_Q8_0)
				st->n_quantized++;
			else if (dt != t->type)
				st->n_fallback++;
			else
				st->n_copied++;
		}
		int64_t ne[GGUF_MAX_DIMS];
		memcpy(ne, t->ne, sizeof(ne));
		if (gguf_add_tensor(w, t->name, (uint32_t)gguf_tensor_ndims(t), ne, dt) == -1)
			goto werr;
		int64_t rows = (int64_t)(gguf_tensor_nelem(t) / (t->ne[0] ? (uint64_t)t->ne[0] : 1));
		if (t->ne[0] == 0 || rows == 0)
			continue;
		n_chunks += (size_t)((rows + chunk_rows(t) - 1) / chunk_rows(t));
	}
	q.chunks = calloc(n_chunks + 1, sizeof(*q.chunks));
	if (q.chunks == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* Big tensors first would balance better, but file order keeps the
	 * writes nearly sequential, which matters more on a disk. */
	for (uint64_t i = 0; i < g.n_tensors; i++) {
		const struct gguf_tensor *t = q.src[i];
		if (t->ne[0] == 0)
			continue;
		int64_t rows = (int64_t)(gguf_tensor_nelem(t) / (uint64_t)t->ne[0]);
		int64_t per = chunk_rows(t);
		for (int64_t r = 0; r < rows; r += per)
			q.chunks[q.n_chunks++] = (struct chunk){ (int64_t)i, r,
			    r + per < rows ? r + per : rows };
	}

	if (gguf_writer_begin(w, out_path) == -1)
		goto werr;
	q.w = w;

	tids = calloc((size_t)nthreads, sizeof(*tids));
	wks = calloc((size_t)nthreads, sizeof(*wks));
	if (tids == NULL || wks == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int i = 0; i < nthreads; i++)
		wks[i].q = &q;
	/* The caller's thread is worker 0: it alone reports progress and
	 * looks at cancellation, between its own chunks. */
	for (int i = 1; i < nthreads; i++) {
		if (pthread_create(&tids[i], NULL, worker_main, &wks[i]) != 0)
			break;
		started = i;
	}
	uint64_t total = 0;
	for (uint64_t i = 0; i < g.n_tensors; i++)
		total += q.src[i]->nbytes;
	while (work_one(&wks[0])) {
		if (o && o->progress)
			o->progress(o->arg, __atomic_load_n(&q.done_bytes, __ATOMIC_RELAXED), total);
		if (o && o->cancelled && o->cancelled(o->arg)) {
			job_fail(&q, "cancelled");
			break;
		}
	}
	for (int i = 1; i <= started; i++)
		pthread_join(tids[i], NULL);
	started = 0;
	if (q.failed) {
		snprintf(err, errlen, "%s", q.err);
		goto out;
	}
	if (o && o->progress)
		o->progress(o->arg, total, total);
	if (gguf_writer_commit(w) == -1)
		goto werr;
	if (st) {
		st->n_tensors = g.n_tensors;
		st->in_bytes = g.size;
		st->threads = nthreads;
	}
	rc = 0;
	goto out;
werr:
	snprintf(err, errlen, "%s", gguf_writer_error(w));
out:
	if (started) {
		__atomic_store_n(&q.failed, 1, __ATOMIC_RELEASE);
		for (int i = 1; i <= started; i++)
			pthread_join(tids[i], NULL);
	}
	if (wks)
		for (int i = 0; i < nthreads; i++) {
			free(wks[i].fbuf);
			free(wks[i].obuf);
		}
	free(wks);
	free(tids);
	gguf_writer_free(w);	/* aborts an uncommitted output */
	free(q.chunks);
	free(q.src);
	free(q.dst_type);
	pthread_mutex_destroy(&q.lock);
	gguf_close(&g);
	return rc;
}
