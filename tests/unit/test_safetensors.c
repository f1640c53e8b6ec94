/*
 * test_safetensors.c: the safetensors reader, writer, sharded sets, output
 * directories and the float conversions (plugins/lib/format/safetensors.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "runner.h"

static char tmpdir[4096];

static void
path_in(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* Write a raw file: 8-byte length (lenval, which may lie), header text,
 * then ndata bytes of data. */
static void
write_raw(const char *path, uint64_t lenval, const char *hdr, size_t ndata)
{
	FILE *f = fopen(path, "wb");
	unsigned char l[8];
	for (int i = 0; i < 8; i++)
		l[i] = (unsigned char)(lenval >> (8 * i));
	fwrite(l, 1, 8, f);
	fwrite(hdr, 1, strlen(hdr), f);
	for (size_t i = 0; i < ndata; i++)
		fputc((int)(i & 0xff), f);
	fclose(f);
}

static int
count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *de;
	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* One corrupt-header case: the open must fail, and the message must name
 * the file and contain every expected fragment. */
static void
bad_case(const char *name, uint64_t lenval, int lie, const char *hdr, size_t ndata,
    const char *want1, const char *want2)
{
	char p[4096], err[ST_ERRLEN] = "";
	struct st_file f;
	path_in(p, sizeof(p), name);
	write_raw(p, lie ? lenval : strlen(hdr), hdr, ndata);
	int rc = st_open(&f, p, err, sizeof(err));
	CHECK(rc == -1, "%s: accepted", name);
	if (rc == 0) {
		st_close(&f);
		return;
	}
	CHECK(strstr(err, p) != NULL, "%s: message does not name the file: %s", name, err);
	CHECK(want1 == NULL || strstr(err, want1) != NULL, "%s: want \"%s\" in: %s", name,
	    want1, err);
	CHECK(want2 == NULL || strstr(err, want2) != NULL, "%s: want \"%s\" in: %s", name,
	    want2, err);
	printf("ok   %-22s %s\n", name, err);
	unlink(p);
}

static void
case_corrupt(void)
{
	const char *good = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	    "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[8,16]}}";
	char p[4096], err[ST_ERRLEN];
	struct st_file f;
	path_in(p, sizeof(p), "good.safetensors");
	write_raw(p, strlen(good), good, 16);
	CHECK(st_open(&f, p, err, sizeof(err)) == 0, "good file refused: %s", err);
	if (f.fd != -1) {
		CHECK(f.ntensors == 2);
		CHECK(strcmp(f.tensors[0].name, "a") == 0);
		CHECK(f.tensors[1].offset == 8 + strlen(good) + 8);
		st_close(&f);
	}

	/* truncated: the data ends before the last tensor does */
	bad_case("truncated", 0, 0, good, 12, "\"b\"", "truncated");
	/* trailing bytes after the last tensor */
	bad_case("trailing", 0, 0, good, 20, "4 trailing bytes", "\"b\"");
	/* overlapping offsets */
	bad_case("overlap", 0, 0,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
	    "overlap", "\"b\"");
	/* a gap between tensors */
	bad_case("gap", 0, 0,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12,
	    "gap", "\"b\"");
	/* not starting at 0 */
	bad_case("start", 0, 0,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
	    "not 0", "\"a\"");
	/* a header length that lies: longer than the file */
	bad_case("lying-length", 5000, 1, good, 16, "past the end", "5000");
	/* a 100 MB header: over the limit before anything is read */
	bad_case("huge-header", 100000001ULL, 1, good, 16, "exceeds the limit", "100000001");
	/* non-string metadata */
	bad_case("meta-number", 0, 0,
	    "{\"__metadata__\":{\"format\":\"pt\",\"step\":5},"
	    "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
	    "\"step\"", "not a string");
	bad_case("meta-object", 0, 0,
	    "{\"__metadata__\":{\"x\":{\"y\":\"z\"}},"
	    "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
	    "\"x\"", "not a string");
	/* size that does not match shape x dtype */
	bad_case("size", 0, 0,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
	    "need 12", "\"a\"");
	bad_case("dtype", 0, 0,
	    "{\"a\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
	    "unknown dtype", "\"F31\"");
	bad_case("field", 0, 0,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8,
	    "unknown field", "\"a\"");
	bad_case("missing", 0, 0, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8,
	    "missing field", "data_offsets");
	bad_case("duplicate", 0, 0,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	    "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
	    "appears twice", "\"a\"");
	bad_case("negative", 0, 0,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
	    "shape[0]", "\"a\"");
	bad_case("fraction", 0, 0,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}}", 4,
	    "data_offsets", "\"a\"");
	bad_case("backwards", 0, 0,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4,
	    "end before", "\"a\"");
	bad_case("not-json", 0, 0, "{\"a\":{\"dtype\":", 4, "not valid JSON", NULL);
	bad_case("after-json", 0, 0,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}xx", 4,
	    "after its JSON", NULL);
	bad_case("not-object", 0, 0, "[1,2]      ", 0, "not a JSON object", NULL);
	bad_case("utf8", 0, 0,
	    "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
	    "UTF-8", NULL);
	bad_case("subbyte", 0, 0,
	    "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2,
	    "whole number of bytes", "\"a\"");
	/* a file shorter than the length field */
	path_in(p, sizeof(p), "short");
	FILE *s = fopen(p, "wb");
	fwrite("abc", 1, 3, s);
	fclose(s);
	CHECK(st_open(&f, p, err, sizeof(err)) == -1 && strstr(err, "too short"));

	/* Legal oddities: padding spaces, zero-size tensors, scalars, an empty
	 * header object, no padding at all. */
	path_in(p, sizeof(p), "odd.safetensors");
	write_raw(p, 0, "", 0);
	const char *odd = "{\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
	    "\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]}}   ";
	write_raw(p, strlen(odd), odd, 8);
	CHECK(st_open(&f, p, err, sizeof(err)) == 0, "legal oddities refused: %s", err);
	if (f.fd != -1) {
		CHECK(f.ntensors == 2);
		const struct st_tensor *z = st_find(&f, "z"), *sc = st_find(&f, "s");
		CHECK(z && z->nbytes == 0 && z->ndim == 2);
		CHECK(sc && sc->nelem == 1 && sc->ndim == 0);
		st_close(&f);
	}
	write_raw(p, 2, "{}", 0);
	CHECK(st_open(&f, p, err, sizeof(err)) == 0, "empty header refused: %s", err);
	if (f.fd != -1)
		st_close(&f);
}

static void
case_write_read(void)
{
	char p[4096], err[ST_ERRLEN];
	struct st_writer w;
	uint64_t sh1[2] = { 3, 5 }, sh2[1] = { 7 }, sh3[1] = { 0 };
	float a[15];
	uint16_t b[7];
	for (int i = 0; i < 15; i++)
		a[i] = (float)i * 0.5f;
	for (int i = 0; i < 7; i++)
		b[i] = st_f32_to_bf16((float)i - 3.0f);

	path_in(p, sizeof(p), "w.safetensors");
	st_writer_init(&w, p);
	CHECK(st_writer_meta(&w, "format", "pt") == 0);
	CHECK(st_writer_add(&w, "layer.a", ST_F32, 2, sh1, err, sizeof(err)) == 0);
	CHECK(st_writer_add(&w, "layer.b", ST_BF16, 1, sh2, err, sizeof(err)) == 1);
	CHECK(st_writer_add(&w, "empty", ST_F16, 1, sh3, err, sizeof(err)) == 2);
	CHECK(st_writer_start(&w, err, sizeof(err)) == 0, "start: %s", err);
	CHECK(access(p, F_OK) == -1);   /* nothing under the final name yet */
	CHECK(st_writer_write(&w, 1, 0, b, sizeof(b), err, sizeof(err)) == 0);
	CHECK(st_writer_write(&w, 0, 0, a, 32, err, sizeof(err)) == 0);
	/* an incomplete tensor is refused at commit, and nothing is left */
	CHECK(st_writer_commit(&w, err, sizeof(err)) == -1 && strstr(err, "layer.a"));
	CHECK(access(p, F_OK) == -1);
	CHECK(count_entries(tmpdir) >= 0);
	st_writer_free(&w);

	st_writer_init(&w, p);
	CHECK(st_writer_meta(&w, "format", "pt") == 0);
	st_writer_add(&w, "layer.a", ST_F32, 2, sh1, err, sizeof(err));
	st_writer_add(&w, "layer.b", ST_BF16, 1, sh2, err, sizeof(err));
	st_writer_add(&w, "empty", ST_F16, 1, sh3, err, sizeof(err));
	CHECK(st_writer_start(&w, err, sizeof(err)) == 0);
	CHECK(st_writer_write(&w, 0, 0, a, 32, err, sizeof(err)) == 0);
	CHECK(st_writer_write(&w, 0, 32, (char *)a + 32, 28, err, sizeof(err)) == 0);
	CHECK(st_writer_write(&w, 0, 32, a, 29, err, sizeof(err)) == -1);  /* past the end */
	CHECK(st_writer_write(&w, 1, 0, b, sizeof(b), err, sizeof(err)) == 0);
	CHECK(st_writer_commit(&w, err, sizeof(err)) == 0, "commit: %s", err);
	st_writer_free(&w);

	struct st_file f;
	CHECK(st_open(&f, p, err, sizeof(err)) == 0, "reopen: %s", err);
	if (f.fd == -1)
		return;
	CHECK(f.header_len % 8 == 0);
	CHECK(f.ntensors == 3);
	CHECK(st_meta_get(&f, "format") && strcmp(st_meta_get(&f, "format"), "pt") == 0);
	const struct st_tensor *ta = st_find(&f, "layer.a"), *tb = st_find(&f, "layer.b");
	CHECK(ta && ta->dtype == ST_F32 && ta->shape[0] == 3 && ta->shape[1] == 5);
	CHECK(tb && tb->dtype == ST_BF16 && tb->nbytes == 14);
	float ra[15];
	uint16_t rb[7];
	CHECK(ta && st_read(&f, ta, ra, 0, sizeof(ra)) == 0 && memcmp(ra, a, sizeof(a)) == 0);
	CHECK(tb && st_read(&f, tb, rb, 0, sizeof(rb)) == 0 && memcmp(rb, b, sizeof(b)) == 0);
	CHECK(ta && st_read(&f, ta, ra, 8, 60) == -1);
	/* The header text is what the reference writer would produce. */
	char hdr[512] = "";
	size_t hn = f.header_len < sizeof(hdr) - 1 ? f.header_len : sizeof(hdr) - 1;
	CHECK(pread(f.fd, hdr, hn, 8) == (ssize_t)hn);
	CHECK(strncmp(hdr, "{\"__metadata__\":{\"format\":\"pt\"},\"layer.a\":{\"dtype\":"
	    "\"F32\",\"shape\":[3,5],\"data_offsets\":[0,60]}", 92) == 0, "header: %s", hdr);

	/* Copy it through the kernel into a second file, as a run. */
	char p2[4096];
	path_in(p2, sizeof(p2), "w2.safetensors");
	st_writer_init(&w, p2);
	for (size_t i = 0; i < f.ntensors; i++)
		st_writer_add(&w, f.tensors[i].name, f.tensors[i].dtype, f.tensors[i].ndim,
		    f.tensors[i].shape, err, sizeof(err));
	CHECK(st_writer_start(&w, err, sizeof(err)) == 0);
	CHECK(st_writer_copy_run(&w, 0, f.ntensors - 1, f.fd, f.tensors[0].offset, err,
	    sizeof(err)) == 0, "copy_run: %s", err);
	CHECK(st_writer_commit(&w, err, sizeof(err)) == 0);
	st_writer_free(&w);
	struct st_file g;
	CHECK(st_open(&g, p2, err, sizeof(err)) == 0);
	if (g.fd != -1) {
		CHECK(st_read(&g, st_find(&g, "layer.a"), ra, 0, 60) == 0 &&
		    memcmp(ra, a, 60) == 0);
		st_close(&g);
	}
	st_close(&f);
}

static void
write_shard(const char *name, const char *const *names, int n)
{
	char p[4096], err[ST_ERRLEN];
	struct st_writer w;
	uint64_t sh[1] = { 4 };
	path_in(p, sizeof(p), name);
	st_writer_init(&w, p);
	for (int i = 0; i < n; i++)
		st_writer_add(&w, names[i], ST_F32, 1, sh, err, sizeof(err));
	CHECK(st_writer_start(&w, err, sizeof(err)) == 0);
	for (int i = 0; i < n; i++) {
		float v[4] = { (float)i, 1, 2, 3 };
		st_writer_write(&w, (size_t)i, 0, v, 16, err, sizeof(err));
	}
	CHECK(st_writer_commit(&w, err, sizeof(err)) == 0);
	st_writer_free(&w);
}

static void
case_sharded(void)
{
	char p[4096], err[ST_ERRLEN];
	const char *s1[] = { "x.0", "x.1" }, *s2[] = { "y.0" };
	write_shard("model-00001-of-00002.safetensors", s1, 2);
	write_shard("model-00002-of-00002.safetensors", s2, 1);
	const char *names[] = { "y.0", "x.0", "x.1" };
	const char *files[] = { "model-00002-of-00002.safetensors",
	    "model-00001-of-00002.safetensors", "model-00001-of-00002.safetensors" };
	path_in(p, sizeof(p), "model.safetensors.index.json");
	CHECK(st_write_index(p, 3, names, files, 48, err, sizeof(err)) == 0);

	struct st_set s;
	CHECK(st_set_open(&s, tmpdir, err, sizeof(err)) == 0, "sharded: %s", err);
	if (s.nfiles) {
		CHECK(s.sharded == 1 && s.nfiles == 2 && s.ntensors == 3);
		const struct st_tensor *t = st_set_find(&s, "y.0");
		CHECK(t && strcmp(s.fnames[t->file], "model-00002-of-00002.safetensors") == 0);
		CHECK(st_set_find(&s, "nope") == NULL);
		CHECK(s.data_bytes == 48);
		CHECK(strcmp(s.tensors[0]->name, "x.0") == 0);
		st_set_close(&s);
	}
	/* The index names a tensor no shard has. */
	const char *names2[] = { "y.0", "x.0", "x.1", "ghost" };
	const char *files2[] = { files[0], files[1], files[2], files[1] };
	CHECK(st_write_index(p, 4, names2, files2, 64, err, sizeof(err)) == 0);
	CHECK(st_set_open(&s, tmpdir, err, sizeof(err)) == -1);
	CHECK(strstr(err, "\"ghost\"") != NULL, "ghost: %s", err);
	/* A shard has a tensor the index does not map. */
	CHECK(st_write_index(p, 2, names, files, 32, err, sizeof(err)) == 0);
	CHECK(st_set_open(&s, tmpdir, err, sizeof(err)) == -1);
	CHECK(strstr(err, "\"x.1\"") != NULL && strstr(err, "not in the index"), "extra: %s", err);
	/* A shard name that leaves the directory. */
	const char *files3[] = { "../evil.safetensors", files[1], files[2] };
	CHECK(st_write_index(p, 3, names, files3, 48, err, sizeof(err)) == 0);
	CHECK(st_set_open(&s, tmpdir, err, sizeof(err)) == -1 && strstr(err, "\"y.0\""));
	/* A corrupt shard is named with its path. */
	CHECK(st_write_index(p, 3, names, files, 48, err, sizeof(err)) == 0);
	char sp[4096];
	path_in(sp, sizeof(sp), "model-00002-of-00002.safetensors");
	CHECK(truncate(sp, 30) == 0);
	CHECK(st_set_open(&s, tmpdir, err, sizeof(err)) == -1);
	CHECK(strstr(err, "model-00002-of-00002.safetensors") != NULL, "corrupt shard: %s", err);
	unlink(sp);
	path_in(sp, sizeof(sp), "model-00001-of-00002.safetensors");
	unlink(sp);
	unlink(p);
}

static void
case_outdir(void)
{
	char final[4096], err[ST_ERRLEN], f[4200];
	struct st_outdir o;
	path_in(final, sizeof(final), "out/merged");
	CHECK(st_outdir_begin(&o, final, err, sizeof(err)) == 0, "begin: %s", err);
	snprintf(f, sizeof(f), "%s/a", o.tmp);
	CHECK(plc_write_file_atomic(f, "1", 1, 0644) == 0);
	CHECK(access(final, F_OK) == -1);
	CHECK(st_outdir_commit(&o, err, sizeof(err)) == 0);
	snprintf(f, sizeof(f), "%s/a", final);
	CHECK(access(f, F_OK) == 0);
	/* Replacing an existing output. */
	CHECK(st_outdir_begin(&o, final, err, sizeof(err)) == 0);
	snprintf(f, sizeof(f), "%s/b", o.tmp);
	CHECK(plc_write_file_atomic(f, "2", 1, 0644) == 0);
	CHECK(st_outdir_commit(&o, err, sizeof(err)) == 0);
	snprintf(f, sizeof(f), "%s/a", final);
	CHECK(access(f, F_OK) == -1);
	snprintf(f, sizeof(f), "%s/b", final);
	CHECK(access(f, F_OK) == 0);
	/* An aborted one leaves the old output and nothing else. */
	CHECK(st_outdir_begin(&o, final, err, sizeof(err)) == 0);
	snprintf(f, sizeof(f), "%s/c", o.tmp);
	CHECK(plc_write_file_atomic(f, "3", 1, 0644) == 0);
	st_outdir_abort(&o);
	char outdir[4096];
	path_in(outdir, sizeof(outdir), "out");
	CHECK(count_entries(outdir) == 1);
	/* A stale temporary of a killed attempt is cleaned up by begin. */
	char stale[4200];
	snprintf(stale, sizeof(stale), "%s/.merged.tmp.999999", outdir);
	CHECK(mkdir(stale, 0755) == 0);
	CHECK(st_outdir_begin(&o, final, err, sizeof(err)) == 0);
	CHECK(access(stale, F_OK) == -1);
	st_outdir_abort(&o);
	CHECK(count_entries(outdir) == 1);
}

/* bf16 rounding checked against a double-precision choice between the two
 * neighbours; f16 against the compiler's _Float16 conversion. */
static void
case_convert(void)
{
	uint32_t x = 12345;
	int bad_bf = 0, bad_f16 = 0;
	for (int i = 0; i < 2000000; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		uint32_t u = x;
		if (i % 4 == 0)   /* many exact ties */
			u = (u & 0xffff0000u) | 0x8000u;
		if (i % 4 == 1)   /* values near the f16 range */
			u = (u & 0x807fffffu) | ((uint32_t)(100 + (x >> 24) % 60) << 23);
		float f;
		memcpy(&f, &u, 4);
		if (!isfinite(f))
			continue;
		uint16_t h = st_f32_to_bf16(f);
		uint16_t lo = (uint16_t)(u >> 16);
		double dlo = st_bf16_to_f32(lo), dhi = st_bf16_to_f32((uint16_t)(lo + 1));
		double d = f;
		if ((lo & 0x7fff) == 0x7f7f)   /* the next step up is 2^128 (infinity) */
			dhi = copysign(ldexp(1.0, 128), d);
		uint16_t want;
		if (fabs(d - dlo) < fabs(dhi - d))
			want = lo;
		else if (fabs(d - dlo) > fabs(dhi - d))
			want = (uint16_t)(lo + 1);
		else
			want = (lo & 1) ? (uint16_t)(lo + 1) : lo;
		if (h != want && bad_bf++ < 5)
			fprintf(stderr, "bf16(%a) = %04x, want %04x\n", f, h, want);
#ifdef __FLT16_MAX__
		_Float16 c = (_Float16)f;
		uint16_t hc;
		memcpy(&hc, &c, 2);
		if (st_f32_to_f16(f) != hc && bad_f16++ < 5)
			fprintf(stderr, "f16(%a) = %04x, want %04x\n", f, st_f32_to_f16(f), hc);
#endif
	}
	CHECK(bad_bf == 0);
	CHECK(bad_f16 == 0);
	/* every f16 round-trips exactly through f32 */
	int bad_rt = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = st_f16_to_f32((uint16_t)h);
		if (isnan(f))
			continue;
		if (st_f32_to_f16(f) != h)
			bad_rt++;
#ifdef __FLT16_MAX__
		_Float16 c;
		uint16_t hh = (uint16_t)h;
		memcpy(&c, &hh, 2);
		if ((float)c != f)
			bad_rt++;
#endif
	}
	CHECK(bad_rt == 0);
	CHECK(st_f32_to_f16(65504.0f) == 0x7bff);
	CHECK(st_f32_to_f16(65520.0f) == 0x7c00);
	CHECK(st_f32_to_f16(65519.99f) == 0x7bff);
	CHECK(st_f32_to_f16(-1e9f) == 0xfc00);
	CHECK(isnan(st_f16_to_f32(st_f32_to_f16(NAN))));
	CHECK(isnan(st_bf16_to_f32(st_f32_to_bf16(NAN))));
	CHECK(st_f32_to_bf16(1.0f) == 0x3f80);
	CHECK(st_f32_to_bf16(3.4e38f) == 0x7f80);   /* rounds up to infinity */
	float in[3] = { 1.5f, -2.25f, 0.1f }, out[3];
	uint16_t buf[3];
	CHECK(st_from_f32(ST_BF16, in, buf, 3) == 0 && st_to_f32(ST_BF16, buf, out, 3) == 0);
	CHECK(out[0] == 1.5f && out[1] == -2.25f && fabsf(out[2] - 0.1f) < 0.001f);
	CHECK(st_from_f32(ST_I32, in, buf, 3) == -1);
}

static const struct unit_case cases[] = {
	UNIT_CASE(corrupt),
	UNIT_CASE(write_read),
	UNIT_CASE(sharded),
	UNIT_CASE(outdir),
	UNIT_CASE(convert),
	UNIT_END
};

int
main(int argc, char **argv)
{
	const char *t = getenv("TEST_TMP");
	snprintf(tmpdir, sizeof(tmpdir), "%s/st.XXXXXX", t ? t : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror(tmpdir);
		return 1;
	}
	int rc = unit_main(argc, argv, cases);

	st_rmtree(tmpdir);
	return rc;
}
