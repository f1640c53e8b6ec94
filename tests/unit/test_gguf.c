/*
 * test_gguf.c: the GGUF library: number conversions against the compiler's
 * IEEE _Float16 and a literal roundf Q8_0, a writer/reader round trip, and
 * refusal of corrupt files (every truncation, lying counts and lengths,
 * misaligned or reordered offsets, bad types), each with a message that
 * names what is wrong; an input that shrinks after it was opened: its KVs
 * still read (the header is copied), and the quantizer fails with the
 * file named instead of dying of SIGBUS, whether the next chunk is copied
 * (EFAULT) or quantized (the guard), leaving no output.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "check.h"

static char tmpdir[4096];

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static float
fbits(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static void
test_fp16(void)
{
	/* Every half converts to float exactly (compare with the compiler's
	 * conversion) and back to the same bits. */
	for (uint32_t h = 0; h < 65536; h++) {
		_Float16 hf;
		uint16_t hb = (uint16_t)h;
		memcpy(&hf, &hb, 2);
		float ref = (float)hf;
		float got = gguf_fp16_to_fp32(hb);
		if (isnan(ref)) {
			CHECK(isnan(got));
			continue;
		}
		if (memcmp(&ref, &got, 4) != 0) {
			fprintf(stderr, "fp16 0x%04x: %a != %a\n", h, got, ref);
			check_failures++;
			break;
		}
		CHECK(gguf_fp32_to_fp16(got) == hb);
	}
	/* Random floats of every exponent, and ties: RNE as _Float16 does. */
	for (int i = 0; i < 2000000; i++) {
		uint32_t u = rnd() << 16 ^ rnd();
		if (i % 3 == 0)	/* halfway cases: low 13 bits 0x1000 */
			u = (u & ~0x1fffu) | 0x1000u;
		float f = fbits(u);
		if (isnan(f))
			continue;
		_Float16 r = (_Float16)f;
		uint16_t rb;
		memcpy(&rb, &r, 2);
		uint16_t got = gguf_fp32_to_fp16(f);
		if (got != rb) {
			fprintf(stderr, "fp32 %a (0x%08x) -> fp16 0x%04x, want 0x%04x\n", f, u,
			    got, rb);
			check_failures++;
			break;
		}
	}
	/* The row version gives the same bits, specials and tails included. */
	{
		enum { N = 1 << 16 };
		float *x = malloc(N * sizeof(float));
		uint16_t *y = malloc(N * 2);
		for (int i = 0; i < N; i++)
			x[i] = fbits(rnd() << 16 ^ rnd());
		x[0] = NAN; x[1] = -NAN; x[2] = INFINITY; x[3] = -INFINITY;
		x[4] = 65520.0f; x[5] = -65519.0f; x[6] = 0x1p-25f; x[7] = -0x1.8p-24f;
		x[8] = 0.0f; x[9] = -0.0f; x[10] = 0x1p-149f; x[11] = 1.0f;
		for (size_t off = 0; off < 4; off++) {
			gguf_fp32_to_fp16_row(x + off, y, N - off - 1);
			for (size_t i = 0; i < N - off - 1; i++)
				if (y[i] != gguf_fp32_to_fp16(x[off + i])) {
					fprintf(stderr, "row fp16 of %a: 0x%04x, want 0x%04x\n", x[off + i],
					    y[i], gguf_fp32_to_fp16(x[off + i]));
					check_failures++;
					break;
				}
		}
		free(x);
		free(y);
	}
	/* BF16 to F16 in one step: every BF16 value, at every alignment,
	 * gives what widening and gguf_fp32_to_fp16 give; the flag says
	 * whether a NaN or an infinity came out. */
	{
		enum { N = 1 << 16 };
		uint16_t *x = malloc((N + 16) * 2), *y = malloc((N + 16) * 2);
		for (int i = 0; i < N + 16; i++)
			x[i] = (uint16_t)(i * 40503u);	/* odd: a permutation of all 2^16 */
		for (size_t off = 0; off < 9; off++) {
			int special = gguf_bf16_to_fp16_row(x + off, y, N);
			int want_special = 0;
			for (size_t i = 0; i < N; i++) {
				uint16_t want = gguf_fp32_to_fp16(gguf_bf16_to_fp32(x[off + i]));
				want_special |= (want & 0x7c00) == 0x7c00;
				if (y[i] != want) {
					fprintf(stderr, "bf16 0x%04x -> fp16 0x%04x, want 0x%04x\n",
					    x[off + i], y[i], want);
					check_failures++;
					break;
				}
			}
			CHECK(special == want_special && special);
		}
		/* Finite values that fit: no flag; one that overflows: flagged. */
		for (int i = 0; i < 40; i++)
			x[i] = (uint16_t)(0x3f80 + i);	/* 1.0 and up */
		CHECK(gguf_bf16_to_fp16_row(x, y, 40) == 0);
		x[37] = 0x4780;			/* 65536: rounds to infinity */
		CHECK(gguf_bf16_to_fp16_row(x, y, 40) != 0 && y[37] == 0x7c00);
		x[37] = 0x0001;			/* a BF16 subnormal: F16 zero */
		CHECK(gguf_bf16_to_fp16_row(x, y, 40) == 0 && y[37] == 0);
		x[37] = 0x3380;			/* 2^-24: the smallest F16 subnormal */
		CHECK(gguf_bf16_to_fp16_row(x, y, 40) == 0 && y[37] == 0x0001);
		free(x);
		free(y);
	}
	CHECK(gguf_fp32_to_fp16(NAN) == 0x7e00);
	CHECK(gguf_fp32_to_fp16(65520.0f) == 0x7c00);	/* rounds to inf */
	CHECK(gguf_fp32_to_fp16(65519.0f) == 0x7bff);
	/* bf16: RNE, NaN quiet. */
	CHECK(gguf_fp32_to_bf16(fbits(0x3f808000)) == 0x3f80);	/* tie to even */
	CHECK(gguf_fp32_to_bf16(fbits(0x3f818000)) == 0x3f82);
	CHECK(gguf_fp32_to_bf16(fbits(0x7f800001)) == 0x7fc0);
	CHECK(gguf_bf16_to_fp32(0x3f80) == 1.0f);
}

/* Q8_0 exactly as quantize_row_q8_0_ref is written. */
static void
ref_q8_0(const float *x, uint8_t *y, int64_t k)
{
	for (int64_t i = 0; i < k / 32; i++) {
		float amax = 0.0f;
		for (int j = 0; j < 32; j++) {
			float v = fabsf(x[i * 32 + j]);
			amax = amax > v ? amax : v;
		}
		const float d = amax / 127;
		const float id = d ? 1.0f / d : 0.0f;
		_Float16 dh = (_Float16)d;
		memcpy(y + i * 34, &dh, 2);
		for (int j = 0; j < 32; j++)
			((int8_t *)y)[i * 34 + 2 + j] = (int8_t)roundf(x[i * 32 + j] * id);
	}
}

static void
test_q8_0(void)
{
	enum { K = 32 * 4096 };
	float *x = malloc(K * sizeof(float));
	uint8_t *a = malloc(K / 32 * 34), *b = malloc(K / 32 * 34);
	for (int64_t i = 0; i < K; i++) {
		int blk = (int)(i / 32);
		float v = ((float)(rnd() % 2000001) - 1000000.0f) / 1000000.0f;
		switch (blk % 8) {
		case 0: x[i] = v; break;
		case 1: x[i] = v * 1e-3f; break;
		case 2: x[i] = 0.0f; break;
		case 3: x[i] = (i % 32 == 0) ? 127.0f : (float)((int)(rnd() % 255) - 127) + 0.5f;
			break;	/* exact ties: d = 1, x*id = n + 0.5 */
		case 4: x[i] = v * 1e-30f; break;	/* tiny: fp16 scale underflows */
		case 5: x[i] = (i % 32 == 5) ? -0.0f : v * 60000.0f; break;
		case 6: x[i] = fbits(rnd() & 0x807fffffu); break;	/* float subnormals */
		default: x[i] = gguf_bf16_to_fp32((uint16_t)(rnd() & 0xbfff)); break;
		}
		/* Now and then a NaN: ggml's MAX lets the next value replace it. */
		if (blk % 16 == 15 && i % 32 == 9)
			x[i] = NAN;
	}
	ref_q8_0(x, a, K);
	gguf_quantize_q8_0(x, b, K);
	int64_t bad = -1;
	for (int64_t i = 0; i < K / 32 * 34; i++)
		if (a[i] != b[i]) {
			bad = i;
			break;
		}
	if (bad >= 0) {
		fprintf(stderr, "q8_0 differs at byte %" PRId64 " (block %" PRId64 ")\n",
		    bad, bad / 34);
		check_failures++;
	}
	free(x);
	free(a);
	free(b);
}

/* A small but complete file: every KV type, a string array, tensors of
 * several types, one with a name of exactly 63 bytes. */
static int
write_sample(const char *path, char *err, size_t errlen)
{
	struct gguf_writer *w = gguf_writer_new();
	int rc = -1;
	const char *toks[] = { "<pad>", "<eos>", "\xe2\x96\x81hello", "" };
	int32_t types[] = { 3, 3, 1, 5 };
	float scores[] = { 0.0f, -1.5f, 2.25f, -10000.0f };
	uint8_t u8s[] = { 1, 2, 3 };
	char longname[64];
	memset(longname, 'x', 63);
	longname[63] = '\0';

	if (gguf_set_str(w, "general.architecture", "gemma3") ||
	    gguf_set_u32(w, "gemma3.block_count", 2) ||
	    gguf_set_f32(w, "gemma3.rope.freq_base", 1e6f) ||
	    gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 1) ||
	    gguf_set_i32(w, "t.i32", -7) ||
	    gguf_set_u64(w, "t.u64", 1ull << 40) ||
	    gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 4) ||
	    gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, types, 4) ||
	    gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_FLOAT32, scores, 4) ||
	    gguf_set_arr(w, "t.u8s", GGUF_UINT8, u8s, 3) ||
	    gguf_set_u32(w, "general.file_type", 1) ||
	    gguf_set_u32(w, "gemma3.block_count", 3))	/* moves to the end */
		goto out;
	int64_t ne1[1] = { 64 }, ne2[2] = { 64, 3 }, ne3[3] = { 32, 2, 2 };
	if (gguf_add_tensor(w, "output_norm.weight", 1, ne1, GGML_F32) != 0 ||
	    gguf_add_tensor(w, "token_embd.weight", 2, ne2, GGML_F16) != 1 ||
	    gguf_add_tensor(w, "q", 2, ne2, GGML_Q8_0) != 2 ||
	    gguf_add_tensor(w, longname, 3, ne3, GGML_BF16) != 3)
		goto out;
	CHECK(gguf_add_tensor(w, "q", 1, ne1, GGML_F32) == -1);	/* duplicate */
	CHECK(gguf_add_tensor(w, "bad", 1, (int64_t[]){ 33 }, GGML_Q8_0) == -1);
	char toolong[65];
	memset(toolong, 'y', 64);
	toolong[64] = '\0';
	CHECK(gguf_add_tensor(w, toolong, 1, ne1, GGML_F32) == -1);
	if (gguf_writer_begin(w, path))
		goto out;
	float f32[64];
	for (int i = 0; i < 64; i++)
		f32[i] = (float)i + 0.5f;
	uint16_t f16[64 * 3];
	for (int i = 0; i < 64 * 3; i++)
		f16[i] = gguf_fp32_to_fp16((float)i);
	uint8_t q[2 * 3 * 34];
	for (size_t i = 0; i < sizeof(q); i++)
		q[i] = (uint8_t)i;
	uint16_t bf[128];
	for (int i = 0; i < 128; i++)
		bf[i] = gguf_fp32_to_bf16((float)-i);
	/* Written out of order and in pieces. */
	if (gguf_writer_write(w, 3, bf, sizeof(bf)) ||
	    gguf_writer_write(w, 1, f16, 100) ||
	    gguf_writer_write(w, 1, (char *)f16 + 100, sizeof(f16) - 100) ||
	    gguf_writer_pwrite(w, 2, 34, q + 34, sizeof(q) - 34) ||
	    gguf_writer_pwrite(w, 2, 0, q, 34) ||
	    gguf_writer_write(w, 0, f32, sizeof(f32)))
		goto out;
	CHECK(gguf_writer_write(w, 0, f32, 4) == -1);	/* past its end */
	rc = gguf_writer_commit(w);
out:
	if (rc)
		snprintf(err, errlen, "%s", gguf_writer_error(w));
	gguf_writer_free(w);
	return rc;
}

static void
test_roundtrip(const char *path)
{
	char err[512];
	struct gguf g;

	if (write_sample(path, err, sizeof(err)) != 0) {
		fprintf(stderr, "write_sample: %s\n", err);
		check_failures++;
		return;
	}
	if (gguf_open(&g, path) != 0) {
		fprintf(stderr, "open: %s\n", g.err);
		check_failures++;
		return;
	}
	CHECK(g.version == 3);
	CHECK(g.n_kv == 11);
	CHECK(g.n_tensors == 4);
	CHECK(g.data_off % 32 == 0);
	CHECK(strcmp(g.kv[g.n_kv - 1].key, "gemma3.block_count") == 0);
	uint64_t u;
	int64_t s;
	double d;
	int b;
	const char *str;
	size_t len;
	CHECK(gguf_get_uint(&g, "gemma3.block_count", &u) == 0 && u == 3);
	CHECK(gguf_get_int(&g, "t.i32", &s) == 0 && s == -7);
	CHECK(gguf_get_uint(&g, "t.i32", &u) == -1 && strstr(g.err, "negative"));
	CHECK(gguf_get_uint(&g, "t.u64", &u) == 0 && u == 1ull << 40);
	CHECK(gguf_get_float(&g, "gemma3.rope.freq_base", &d) == 0 && d == 1e6);
	CHECK(gguf_get_bool(&g, "tokenizer.ggml.add_bos_token", &b) == 0 && b == 1);
	CHECK(gguf_get_str(&g, "general.architecture", &str, &len) == 0 && len == 6 &&
	    memcmp(str, "gemma3", 6) == 0);
	CHECK(gguf_get_str(&g, "nope", &str, &len) == -1 && strstr(g.err, "nope"));
	CHECK(gguf_get_str(&g, "gemma3.block_count", &str, &len) == -1);
	const struct gguf_kv *kv = &g.kv[gguf_find_kv(&g, "tokenizer.ggml.tokens")];
	CHECK(kv->type == GGUF_ARRAY && kv->arr_type == GGUF_STRING && kv->n == 4);
	CHECK(gguf_arr_str(kv, 2, &str, &len) == 0 && len == 8 &&
	    memcmp(str, "\xe2\x96\x81hello", 8) == 0);
	CHECK(gguf_arr_str(kv, 3, &str, &len) == 0 && len == 0);
	CHECK(gguf_arr_str(kv, 4, &str, &len) == -1);
	kv = &g.kv[gguf_find_kv(&g, "tokenizer.ggml.scores")];
	CHECK(gguf_arr_num(kv, 1) == -1.5 && gguf_arr_num(kv, 3) == -10000.0);
	kv = &g.kv[gguf_find_kv(&g, "tokenizer.ggml.token_type")];
	CHECK(gguf_arr_num(kv, 3) == 5);

	const struct gguf_tensor *t = &g.t[0];
	CHECK(strcmp(t->name, "output_norm.weight") == 0 && t->nbytes == 256 &&
	    t->offset == 0 && gguf_tensor_ndims(t) == 1);
	float f;
	memcpy(&f, t->data + 4 * 10, 4);
	CHECK(f == 10.5f);
	t = &g.t[1];
	CHECK(t->type == GGML_F16 && t->ne[0] == 64 && t->ne[1] == 3 && t->offset == 256 &&
	    t->nbytes == 384);
	uint16_t h;
	memcpy(&h, t->data + 2 * 191, 2);
	CHECK(gguf_fp16_to_fp32(h) == 191.0f);
	t = &g.t[2];
	CHECK(t->type == GGML_Q8_0 && t->nbytes == 204 && t->offset == 640);
	CHECK(t->data[0] == 0 && t->data[203] == 203);
	t = &g.t[3];
	CHECK(strlen(t->name) == 63 && t->type == GGML_BF16 && t->ne[2] == 2 &&
	    gguf_tensor_ndims(t) == 3 && gguf_tensor_nelem(t) == 128);
	CHECK(g.size == g.data_off + 640 + 224 + 256);
	/* Padding is zeros. */
	CHECK(g.t[2].data[204] == 0 && g.t[2].data[219] == 0);
	gguf_close(&g);
}

/* gguf_copy_without (register's template fix): the sample without its
 * tokenizer.* KVs, every other KV and every tensor's bytes as they were. */
static void
test_copy_without(const char *path)
{
	static const char *const drop[] = { "tokenizer.", NULL };
	char out[4300], err[512];
	struct gguf a, b;
	int dropped = -1;

	snprintf(out, sizeof(out), "%s.copy", path);
	CHECK(gguf_copy_without(path, out, drop, &dropped, err, sizeof(err)) == 0);
	if (gguf_open(&a, path) != 0 || gguf_open(&b, out) != 0) {
		fprintf(stderr, "open: %s %s\n", a.err, b.err);
		check_failures++;
		return;
	}
	uint64_t kept = 0;
	for (uint64_t i = 0; i < a.n_kv; i++)
		if (strncmp(a.kv[i].key, "tokenizer.", 10) != 0) {
			int64_t j = gguf_find_kv(&b, a.kv[i].key);
			CHECK(j == (int64_t)kept && b.kv[j].val_len == a.kv[i].val_len &&
			    memcmp(b.kv[j].val, a.kv[i].val, a.kv[i].val_len) == 0, "%s", a.kv[i].key);
			kept++;
		}
	CHECK(dropped == 4 && b.n_kv == kept && kept + 4 == a.n_kv, "%d %llu", dropped,
	    (unsigned long long)b.n_kv);
	CHECK(gguf_find_kv(&b, "tokenizer.ggml.tokens") == -1);
	CHECK(b.n_tensors == a.n_tensors);
	for (uint64_t i = 0; i < a.n_tensors && i < b.n_tensors; i++)
		CHECK(strcmp(a.t[i].name, b.t[i].name) == 0 && a.t[i].type == b.t[i].type &&
		    a.t[i].nbytes == b.t[i].nbytes &&
		    memcmp(a.t[i].data, b.t[i].data, a.t[i].nbytes) == 0, "%s", a.t[i].name);
	gguf_close(&a);
	gguf_close(&b);
	unlink(out);
	/* A missing input names the file and leaves nothing behind. */
	snprintf(out, sizeof(out), "%s/none.copy", tmpdir);
	CHECK(gguf_copy_without("/nonexistent.gguf", out, drop, &dropped, err, sizeof(err)) == -1 &&
	    strstr(err, "/nonexistent.gguf") != NULL && access(out, F_OK) == -1, "%s", err);
}

/* Parse a mutated copy; it must fail and its message contain want. */
static void
expect_bad(const uint8_t *buf, size_t len, const char *want, int line)
{
	struct gguf g;
	/* A fresh heap copy of exactly len bytes, so ASan sees overreads. */
	uint8_t *copy = malloc(len ? len : 1);
	memcpy(copy, buf, len);
	int rc = gguf_parse(&g, copy, len, "bad.gguf");
	if (rc == 0) {
		fprintf(stderr, "line %d: corrupt file accepted (want \"%s\")\n", line, want);
		check_failures++;
		gguf_close(&g);
	} else if (want && strstr(g.err, want) == NULL) {
		fprintf(stderr, "line %d: message \"%s\" lacks \"%s\"\n", line, g.err, want);
		check_failures++;
	} else if (strncmp(g.err, "bad.gguf: ", 10) != 0) {
		fprintf(stderr, "line %d: message \"%s\" does not name the file\n", line, g.err);
		check_failures++;
	}
	gguf_close(&g);
	free(copy);
}

static void
put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static void
put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void
test_corrupt(const char *path)
{
	size_t len;
	uint8_t *buf = (uint8_t *)plc_read_file(path, &len, 0);
	struct gguf g;
	CHECK(buf != NULL);
	if (buf == NULL)
		return;
	CHECK(gguf_parse(&g, buf, len, "ok") == 0);
	/* Offsets of interesting fields, found from the parse. */
	uint64_t first_kv = g.kv[0].file_off;	/* 24 */
	uint64_t tok_off = g.kv[gguf_find_kv(&g, "tokenizer.ggml.tokens")].file_off;
	uint64_t t1 = g.t[1].info_off, t2 = g.t[2].info_off;
	uint64_t data_off = g.data_off;
	gguf_close(&g);
	uint8_t *m = malloc(len + 64);

	/* Every truncation is refused, and none reads out of bounds (the
	 * sample's last tensor ends on the alignment, so there is no
	 * optional padding to cut). */
	CHECK(len == data_off + 1120);
	for (size_t n = 0; n < len; n++)
		expect_bad(buf, n, NULL, __LINE__);

	memcpy(m, buf, len);
	m[0] = 'X';
	expect_bad(m, len, "bad magic", __LINE__);
	memcpy(m, buf, len);
	put32(m + 4, 2);
	expect_bad(m, len, "version 2", __LINE__);
	put32(m + 4, 3u << 16);
	expect_bad(m, len, "byte-swapped", __LINE__);
	memcpy(m, buf, len);
	put64(m + 8, 1ull << 60);
	expect_bad(m, len, "tensor count", __LINE__);
	memcpy(m, buf, len);
	put64(m + 16, UINT64_MAX);
	expect_bad(m, len, "KV count", __LINE__);
	memcpy(m, buf, len);
	put64(m + 16, 12);	/* one KV more than there are: eats the tensor infos */
	expect_bad(m, len, NULL, __LINE__);

	/* A key length that lies. */
	memcpy(m, buf, len);
	put64(m + first_kv, 1ull << 40);
	expect_bad(m, len, "1 GiB", __LINE__);
	put64(m + first_kv, len);
	expect_bad(m, len, "past the end", __LINE__);
	put64(m + first_kv, 0);
	expect_bad(m, len, "empty key", __LINE__);
	/* Value type out of range; array of arrays; lying array count. */
	memcpy(m, buf, len);
	put32(m + first_kv + 8 + 20, 13);	/* "general.architecture" is 20 bytes */
	expect_bad(m, len, "invalid value type 13", __LINE__);
	uint64_t tok_type = tok_off + 8 + strlen("tokenizer.ggml.tokens");
	memcpy(m, buf, len);
	put32(m + tok_type + 4, GGUF_ARRAY);
	expect_bad(m, len, "array of arrays", __LINE__);
	memcpy(m, buf, len);
	put64(m + tok_type + 8, 1ull << 62);
	expect_bad(m, len, "strings", __LINE__);
	memcpy(m, buf, len);
	put64(m + tok_type + 16, 1ull << 33);	/* first token's length */
	expect_bad(m, len, "tokenizer.ggml.tokens", __LINE__);
	/* A duplicate key: rename t.i32 to t.u64 (same length). */
	memcpy(m, buf, len);
	{
		uint8_t *p = memmem(m, data_off, "t.i32", 5);
		CHECK(p != NULL);
		if (p)
			memcpy(p, "t.u8s", 5);
		expect_bad(m, len, "appears twice", __LINE__);
	}
	/* Tensor infos: name too long, bad dims, bad type, offsets. */
	memcpy(m, buf, len);
	put64(m + t1, 64);
	expect_bad(m, len, NULL, __LINE__);
	memcpy(m, buf, len);
	uint64_t t1_dims = t1 + 8 + strlen("token_embd.weight");
	put32(m + t1_dims, 5);
	expect_bad(m, len, "5 dimensions", __LINE__);
	put32(m + t1_dims, 0);
	expect_bad(m, len, "0 dimensions", __LINE__);
	memcpy(m, buf, len);
	put64(m + t1_dims + 4, UINT64_MAX);
	expect_bad(m, len, "negative", __LINE__);
	memcpy(m, buf, len);
	put64(m + t1_dims + 4, 1ull << 40);
	put64(m + t1_dims + 12, 1ull << 40);
	expect_bad(m, len, "overflows", __LINE__);
	memcpy(m, buf, len);
	put32(m + t1_dims + 20, 4);	/* removed Q4_2 */
	expect_bad(m, len, "unknown or removed ggml type 4", __LINE__);
	put32(m + t1_dims + 20, 999);
	expect_bad(m, len, "type 999", __LINE__);
	put32(m + t1_dims + 20, GGML_Q8_0);	/* ne[0] 64 fine, but size changes */
	expect_bad(m, len, "offset", __LINE__);
	memcpy(m, buf, len);
	put64(m + t1_dims + 24, 260);	/* misaligned */
	expect_bad(m, len, "not a multiple of the alignment", __LINE__);
	put64(m + t1_dims + 24, 0);	/* overlaps tensor 0 */
	expect_bad(m, len, "expected 256", __LINE__);
	/* Tensor 2's ne[0] not a multiple of the Q8_0 block. */
	memcpy(m, buf, len);
	put64(m + t2 + 8 + 1 + 4, 48);
	expect_bad(m, len, "multiple of 32", __LINE__);
	/* Data runs past the end: grow the last tensor. */
	memcpy(m, buf, len);
	{
		uint64_t t3 = t2 + 8 + 1 + 4 + 16 + 4 + 8;
		put64(m + t3 + 8 + 63 + 4 + 16, 3);
		expect_bad(m, len, "runs past the end", __LINE__);
	}
	/* Trailing garbage. */
	memcpy(m, buf, len);
	memset(m + len, 0xab, 64);
	expect_bad(m, len + 64, "unexpected bytes", __LINE__);
	memcpy(m, buf, len);
	m[t2 + 8] = 'x';	/* "q" -> "x": fine */
	CHECK(gguf_parse(&g, m, len, "ok") == 0);
	gguf_close(&g);

	/* general.alignment: a u32 KV whose value is not a power of two. */
	{
		struct gguf_writer *w = gguf_writer_new();
		char p2[4200];
		snprintf(p2, sizeof(p2), "%s/align.gguf", tmpdir);
		gguf_set_u32(w, "general.alignment", 32);
		int64_t ne[1] = { 8 };
		gguf_add_tensor(w, "a", 1, ne, GGML_F32);
		gguf_add_tensor(w, "b", 1, ne, GGML_F32);
		CHECK(gguf_writer_begin(w, p2) == 0);
		float z[8] = { 0 };
		CHECK(gguf_writer_write(w, 0, z, sizeof(z)) == 0);
		CHECK(gguf_writer_write(w, 1, z, sizeof(z)) == 0);
		CHECK(gguf_writer_commit(w) == 0);
		gguf_writer_free(w);
		size_t l2;
		uint8_t *b2 = (uint8_t *)plc_read_file(p2, &l2, 0);
		CHECK(gguf_parse(&g, b2, l2, "ok") == 0);
		gguf_close(&g);
		uint8_t *v = (uint8_t *)memmem(b2, l2, "general.alignment", 17) + 17;
		put32(v + 4, 48);
		expect_bad(b2, l2, "not a power of two", __LINE__);
		put32(v + 4, 0);
		expect_bad(b2, l2, "not a power of two", __LINE__);
		put32(v + 4, 32);
		put32(v, GGUF_INT32);
		expect_bad(b2, l2, "must be u32", __LINE__);
		put32(v, GGUF_UINT32);
		uint8_t *nb = memmem(b2, l2, "\x01\0\0\0\0\0\0\0b", 9);
		CHECK(nb != NULL);
		if (nb)
			nb[8] = 'a';
		expect_bad(b2, l2, "tensor a appears twice", __LINE__);
		free(b2);
	}

	/* Random byte flips in the header: refused or accepted, never a
	 * crash or an out-of-bounds read (ASan builds check the latter). */
	for (int i = 0; i < 20000; i++) {
		memcpy(m, buf, len);
		int flips = 1 + (int)(rnd() % 4);
		for (int f = 0; f < flips; f++)
			m[rnd() % data_off] ^= (uint8_t)(1u << (rnd() % 8));
		uint8_t *copy = malloc(len);
		memcpy(copy, m, len);
		if (gguf_parse(&g, copy, len, "fuzz") == 0) {
			/* Whatever was accepted must be self-consistent. */
			for (uint64_t t = 0; t < g.n_tensors; t++)
				CHECK(g.t[t].data + g.t[t].nbytes <= copy + len);
			gguf_close(&g);
		}
		free(copy);
	}
	free(m);
	free(buf);
}

static void
test_open_errors(void)
{
	struct gguf g;
	char p[4200];
	CHECK(gguf_open(&g, "/nonexistent/x.gguf") == -1 && strstr(g.err, "No such file"));
	gguf_close(&g);
	CHECK(gguf_open(&g, tmpdir) == -1 && strstr(g.err, "not a regular file"));
	snprintf(p, sizeof(p), "%s/empty.gguf", tmpdir);
	CHECK(plc_write_file_atomic(p, "", 0, 0644) == 0);
	CHECK(gguf_open(&g, p) == -1 && strstr(g.err, "empty"));
	/* A writer that is not completed leaves no file behind. */
	struct gguf_writer *w = gguf_writer_new();
	int64_t ne[1] = { 8 };
	gguf_add_tensor(w, "a", 1, ne, GGML_F32);
	snprintf(p, sizeof(p), "%s/partial.gguf", tmpdir);
	CHECK(gguf_writer_begin(w, p) == 0);
	CHECK(gguf_writer_write(w, 0, "abcd", 4) == 0);
	CHECK(gguf_writer_commit(w) == -1 && strstr(gguf_writer_error(w), "4 of 32"));
	gguf_writer_free(w);
	CHECK(access(p, F_OK) == -1 && errno == ENOENT);
}

/* An F32 input of four chunks in the quantizer's order: a.weight
 * (quantized, one chunk), b (1-D: copied, one chunk), c.weight (two). */
static int
write_big(const char *path)
{
	struct gguf_writer *w = gguf_writer_new();
	int64_t na[2] = { 4096, 256 }, nb[1] = { 1 << 20 }, nc[2] = { 4096, 512 };
	float *x = malloc(sizeof(float) << 21);
	int rc = -1;
	if (w == NULL || x == NULL)
		goto out;
	for (size_t i = 0; i < (size_t)1 << 21; i++)
		x[i] = (float)(int)(rnd() % 2001 - 1000) / 1000.0f;
	if (gguf_set_str(w, "general.architecture", "gemma3") ||
	    gguf_add_tensor(w, "a.weight", 2, na, GGML_F32) != 0 ||
	    gguf_add_tensor(w, "b", 1, nb, GGML_F32) != 1 ||
	    gguf_add_tensor(w, "c.weight", 2, nc, GGML_F32) != 2 ||
	    gguf_writer_begin(w, path) ||
	    gguf_writer_write(w, 0, x, 4u << 20) || gguf_writer_write(w, 1, x, 4u << 20) ||
	    gguf_writer_write(w, 2, x, 8u << 20) || gguf_writer_commit(w))
		goto out;
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "write_big: %s\n", w ? gguf_writer_error(w) : "out of memory");
	gguf_writer_free(w);
	free(x);
	return rc;
}

struct shrink {
	const char *path;
	int calls, at;      /* truncate at progress call number at */
};

static void
shrink_progress(void *arg, uint64_t done, uint64_t total)
{
	struct shrink *s = arg;
	if (++s->calls == s->at)
		CHECK(truncate(s->path, 4096) == 0);
}

static void
test_shrinking(void)
{
	char in[4200], out[4200], err[512];
	struct gguf g;
	snprintf(in, sizeof(in), "%s/big.gguf", tmpdir);
	snprintf(out, sizeof(out), "%s/big-q8_0.gguf", tmpdir);
	if (write_big(in) == -1) {
		check_failures++;
		return;
	}
	/* Opened, then cut to nothing: the KVs are read from the copy. */
	CHECK(gguf_open(&g, in) == 0);
	CHECK(g.data_off <= 4096);
	CHECK(truncate(in, 0) == 0);
	const char *str;
	size_t len;
	CHECK(gguf_get_str(&g, "general.architecture", &str, &len) == 0 && len == 6 &&
	    memcmp(str, "gemma3", 6) == 0);
	gguf_close(&g);

	/* Cut to its header after the first chunk (the next is copied) and
	 * after the second (the next is quantized). One thread: the caller's,
	 * which reports progress after each chunk. */
	for (int at = 1; at <= 2; at++) {
		if (write_big(in) == -1) {
			check_failures++;
			return;
		}
		struct shrink sh = { in, 0, at };
		struct gguf_qopts o = { 1, shrink_progress, NULL, &sh };
		CHECK(gguf_quantize_q8_0_file(in, out, &o, NULL, err, sizeof(err)) == -1);
		CHECK(strstr(err, in) != NULL && strstr(err, PLC_MAP_CHANGED) != NULL);
		fprintf(stderr, "shrinking after chunk %d: %s\n", at, err);
		CHECK(sh.calls == at + 1);   /* the chunk that failed, then none */
		CHECK(access(out, F_OK) == -1 && errno == ENOENT);
	}
	/* Whole, it quantizes. */
	CHECK(write_big(in) == 0);
	struct gguf_qopts o = { 1, NULL, NULL, NULL };
	CHECK(gguf_quantize_q8_0_file(in, out, &o, NULL, err, sizeof(err)) == 0);
	unlink(in);
	unlink(out);
}

int
main(void)
{
	const char *t = getenv("TEST_TMP");
	snprintf(tmpdir, sizeof(tmpdir), "%s", t ? t : "/tmp");
	char path[4200];
	snprintf(path, sizeof(path), "%s/sample.gguf", tmpdir);

	test_fp16();
	test_q8_0();
	test_roundtrip(path);
	test_copy_without(path);
	test_corrupt(path);
	test_open_errors();
	test_shrinking();
	if (check_failures) {
		fprintf(stderr, "test_gguf: %d failure(s)\n", check_failures);
		return 1;
	}
	printf("test_gguf: ok\n");
	return 0;
}
