/*
 * test_tensor_fix.c: the tensor_fix stage (plugins/tensor_fix.so) run
 * in-process through a small host: the Gemma 3 defaults on the tiny
 * conditional fixture (single file and sharded, counts from config.json),
 * the real gemma-3-4b name layout (439 dropped, 444 kept, G23), a pure
 * copy of the causal layout; every kept tensor byte-identical under its
 * new name and its manifest digest right, and the output directory's
 * digest that the stage hands the host (artifact_digest) equal to the one
 * the host computes by reading it;
 * then a wrong count, a rename collision, a rule that
 * matches nothing, a corrupt input, cancellation, each leaving no output
 * and no manifest.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "minihost.h"
#include "plio.h"
#include "safetensors.h"
#include "runner.h"

static char tmp[PATH_MAX], top[PATH_MAX];
static const struct pl_stage *fix;

static int
run_fix(pl_job *j, const char *input, const char *output, int cancel_after,
    const char *e1, const char *e2, const char *e3)
{
	char i[PATH_MAX + 8], o[PATH_MAX + 8];
	snprintf(i, sizeof(i), "input=%s", input);
	snprintf(o, sizeof(o), "output=%s", output);
	const char *kv[] = { i, o, e1, e2, e3, NULL };
	/* Stop the list at the first NULL extra. */
	fprintf(stderr, "tensor_fix %s -> %s %s %s %s\n", input, output, e1 ? e1 : "",
	    e2 ? e2 : "", e3 ? e3 : "");
	return mh_run(fix, j, kv, tmp, cancel_after);
}

/* Every kept tensor of out is byte-identical to its input tensor, under
 * the name the manifest gives, with the manifest's sha256. */
static void
check_output(const char *in, const char *out, size_t want_kept, size_t want_dropped,
    const char *must_prefix)
{
	char err[ST_ERRLEN], mp[PATH_MAX + 32];
	struct st_set a, b;
	snprintf(mp, sizeof(mp), "%s.manifest.json", out);
	char *txt = plc_read_file(mp, NULL, 64 << 20);
	cJSON *m = txt ? cJSON_Parse(txt) : NULL;
	free(txt);
	CHECK(m != NULL);
	if (m == NULL)
		return;
	CHECK(st_set_open(&a, in, err, sizeof(err)) == 0);
	if (st_set_open(&b, out, err, sizeof(err)) == -1) {
		fprintf(stderr, "FAIL output %s: %s\n", out, err);
		check_failures++;
		st_set_close(&a);
		cJSON_Delete(m);
		return;
	}
	CHECK(b.ntensors == want_kept);
	CHECK(cJSON_GetObjectItem(m, "kept")->valueint == (int)want_kept);
	CHECK(cJSON_GetObjectItem(m, "dropped")->valueint == (int)want_dropped);
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(m, "dropped_tensors")) == (int)want_dropped);
	const cJSON *ts = cJSON_GetObjectItem(m, "tensors");
	CHECK(cJSON_GetArraySize(ts) == (int)want_kept);
	int bad = 0;
	for (const cJSON *t = ts ? ts->child : NULL; t; t = t->next) {
		const char *old = cJSON_GetObjectItem(t, "old")->valuestring;
		const char *nw = cJSON_GetObjectItem(t, "new")->valuestring;
		const char *sha = cJSON_GetObjectItem(t, "sha256")->valuestring;
		const struct st_tensor *x = st_set_find(&a, old), *y = st_set_find(&b, nw);
		if (x == NULL || y == NULL || x->nbytes != y->nbytes || x->dtype != y->dtype) {
			if (bad++ < 3)
				fprintf(stderr, "FAIL %s -> %s missing or different\n", old, nw);
			continue;
		}
		if (must_prefix && strncmp(nw, must_prefix, strlen(must_prefix)) != 0 &&
		    bad++ < 3)
			fprintf(stderr, "FAIL %s: new name does not start with %s\n", nw, must_prefix);
		if (strstr(nw, "vision_tower") || strstr(nw, "multi_modal_projector"))
			bad++;
		char *p = malloc(x->nbytes + 1), *q = malloc(y->nbytes + 1), hex[65];
		st_read(st_set_file(&a, x), x, p, 0, x->nbytes);
		st_read(st_set_file(&b, y), y, q, 0, y->nbytes);
		plc_sha256_buf(q, y->nbytes, hex);
		if (memcmp(p, q, x->nbytes) != 0 || strcmp(hex, sha) != 0) {
			if (bad++ < 3)
				fprintf(stderr, "FAIL %s -> %s: bytes or digest differ\n", old, nw);
		}
		free(p);
		free(q);
	}
	CHECK(bad == 0);
	/* config.json and the tokenizer came along. */
	CHECK(sh("cmp -s %s/config.json %s/config.json && { ! test -e %s/tokenizer.model || "
	    "cmp -s %s/tokenizer.model %s/tokenizer.model; }", in, out, in, in, out) == 0);
	st_set_close(&a);
	st_set_close(&b);
	cJSON_Delete(m);
}

static void
good(const char *what, const char *in, const char *outname, size_t kept, size_t dropped,
    const char *prefix, const char *e1, const char *e2, const char *e3)
{
	static pl_job j;
	char out[PATH_MAX + 64];
	snprintf(out, sizeof(out), "%s/out/%s", tmp, outname);
	int rc = run_fix(&j, in, out, -1, e1, e2, e3);
	if (rc != PL_OK) {
		fprintf(stderr, "FAIL %s: %s\n", what, j.fail);
		check_failures++;
		return;
	}
	CHECK(j.nartifacts == 2 && strcmp(j.artifacts[0][0], "fixed") == 0 &&
	    strcmp(j.artifacts[1][0], "manifest") == 0);
	CHECK(j.last_done == (double)kept && j.last_total == (double)kept);
	check_output(in, out, kept, dropped, prefix);
	/* The output's digest, computed while copying, is the one the host
	 * computes by reading the directory. */
	char hex[65] = "";
	CHECK(plc_sha256_dir(out, hex, NULL) == 0);
	if (strcmp(j.digests[0], hex) != 0) {
		fprintf(stderr, "FAIL %s: stage's digest %s, the directory's %s\n", what,
		    j.digests[0], hex);
		check_failures++;
	}
	CHECK(j.digests[1][0] == '\0');
	fprintf(stderr, "ok   %s\n", what);
}

static void
bad(const char *what, const char *in, const char *want1, const char *want2,
    const char *e1, const char *e2, const char *e3)
{
	static pl_job j;
	char outdir[PATH_MAX + 32], out[PATH_MAX + 64];
	snprintf(outdir, sizeof(outdir), "%s/bad", tmp);
	snprintf(out, sizeof(out), "%s/fixed", outdir);
	sh("rm -rf %s", outdir);
	int rc = run_fix(&j, in, out, -1, e1, e2, e3);
	if (rc == PL_OK) {
		fprintf(stderr, "FAIL %s: succeeded\n", what);
		check_failures++;
		return;
	}
	if (strstr(j.fail, want1) == NULL || (want2 && strstr(j.fail, want2) == NULL)) {
		fprintf(stderr, "FAIL %s: want \"%s\" / \"%s\" in: %s\n", what, want1,
		    want2 ? want2 : "", j.fail);
		check_failures++;
	}
	if (entries(outdir) != 0) {
		fprintf(stderr, "FAIL %s: files left in %s\n", what, outdir);
		check_failures++;
	}
	CHECK(j.nartifacts == 0);
	fprintf(stderr, "ok   %s\n", what);
}

/* A checkpoint with gemma-3-4b's tensor names (34 text layers, 27 SigLIP
 * layers) and tiny shapes, and its config.json. */
static void
make_4b_names(const char *dir)
{
	static const char *text[] = { "input_layernorm", "mlp.down_proj", "mlp.gate_proj",
	    "mlp.up_proj", "post_attention_layernorm", "post_feedforward_layernorm",
	    "pre_feedforward_layernorm", "self_attn.k_norm", "self_attn.k_proj",
	    "self_attn.o_proj", "self_attn.q_norm", "self_attn.q_proj", "self_attn.v_proj" };
	static const char *vis[] = { "layer_norm1.bias", "layer_norm1.weight",
	    "layer_norm2.bias", "layer_norm2.weight", "mlp.fc1.bias", "mlp.fc1.weight",
	    "mlp.fc2.bias", "mlp.fc2.weight", "self_attn.k_proj.bias", "self_attn.k_proj.weight",
	    "self_attn.out_proj.bias", "self_attn.out_proj.weight", "self_attn.q_proj.bias",
	    "self_attn.q_proj.weight", "self_attn.v_proj.bias", "self_attn.v_proj.weight" };
	char p[PATH_MAX + 64], err[ST_ERRLEN], name[256];
	struct st_writer w;
	uint64_t sh1[1] = { 2 };
	sh("mkdir -p %s && printf '%%s' '{\"architectures\":[\"Gemma3ForConditionalGeneration\"],"
	    "\"model_type\":\"gemma3\",\"text_config\":{\"model_type\":\"gemma3_text\","
	    "\"num_hidden_layers\":34},\"vision_config\":{\"model_type\":\"siglip_vision_model\","
	    "\"num_hidden_layers\":27}}' > %s/config.json", dir, dir);
	snprintf(p, sizeof(p), "%s/model.safetensors", dir);
	st_writer_init(&w, p);
	st_writer_meta(&w, "format", "pt");
	st_writer_add(&w, "model.language_model.embed_tokens.weight", ST_BF16, 1, sh1, err, sizeof(err));
	for (int l = 0; l < 34; l++)
		for (int k = 0; k < 13; k++) {
			snprintf(name, sizeof(name), "model.language_model.layers.%d.%s.weight", l, text[k]);
			st_writer_add(&w, name, ST_BF16, 1, sh1, err, sizeof(err));
		}
	st_writer_add(&w, "model.language_model.norm.weight", ST_BF16, 1, sh1, err, sizeof(err));
	static const char *vtop[] = { "embeddings.patch_embedding.bias",
	    "embeddings.patch_embedding.weight", "embeddings.position_embedding.weight",
	    "post_layernorm.bias", "post_layernorm.weight" };
	for (int k = 0; k < 5; k++) {
		snprintf(name, sizeof(name), "model.vision_tower.vision_model.%s", vtop[k]);
		st_writer_add(&w, name, ST_BF16, 1, sh1, err, sizeof(err));
	}
	for (int l = 0; l < 27; l++)
		for (int k = 0; k < 16; k++) {
			snprintf(name, sizeof(name),
			    "model.vision_tower.vision_model.encoder.layers.%d.%s", l, vis[k]);
			st_writer_add(&w, name, ST_BF16, 1, sh1, err, sizeof(err));
		}
	st_writer_add(&w, "model.multi_modal_projector.mm_input_projection_weight", ST_BF16, 1,
	    sh1, err, sizeof(err));
	st_writer_add(&w, "model.multi_modal_projector.mm_soft_emb_norm.weight", ST_BF16, 1,
	    sh1, err, sizeof(err));
	CHECK(w.n == 883);
	CHECK(st_writer_start(&w, err, sizeof(err)) == 0);
	for (size_t i = 0; i < w.n; i++) {
		uint16_t v[2] = { (uint16_t)i, (uint16_t)(i * 7) };
		st_writer_write(&w, i, 0, v, 4, err, sizeof(err));
	}
	CHECK(st_writer_commit(&w, err, sizeof(err)) == 0);
	st_writer_free(&w);
}

/* The fixtures (made in main, before the cases). */
static char cond[PATH_MAX + 16], cond4[PATH_MAX + 16], causal[PATH_MAX + 16], b4[PATH_MAX + 16];

static void
case_good(void)
{
	good("tiny conditional, Gemma 3 defaults", cond, "cond", 54, 39, "model.", NULL, NULL, NULL);
	good("tiny conditional, 4 shards", cond4, "cond4", 54, 39, "model.", NULL, NULL, NULL);
	char ip[PATH_MAX + 64];
	snprintf(ip, sizeof(ip), "%s/out/cond4/model.safetensors.index.json", tmp);
	CHECK(access(ip, F_OK) == 0);
	good("gemma-3-4b names, counts from config.json", b4, "b4", 444, 439, "model.",
	    NULL, NULL, NULL);
	good("gemma-3-4b names, counts in the spec", b4, "b4spec", 444, 439, "language_model.model.",
	    "expect_dropped=439", "expect_kept=444", "rename=model.language_model.=language_model.model.");
	good("causal sharded, no rules", causal, "causal", 54, 0, "model.", "drop=", "rename=",
	    NULL);
	/* The tiny conditional output is what llama.cpp's converter maps:
	 * model.embed_tokens, model.norm, model.layers.N.* and nothing else. */
	CHECK(sh("/usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); "
	    "names=[t[\"new\"] for t in m[\"tensors\"]]; "
	    "assert \"model.embed_tokens.weight\" in names and \"model.norm.weight\" in names; "
	    "assert all(n.startswith((\"model.layers.\",\"model.embed_tokens\",\"model.norm\")) "
	    "for n in names), names' %s/out/cond.manifest.json", tmp) == 0);
	/* Running again over the same output replaces it. */
	good("again over the same output", cond, "cond", 54, 39, "model.", NULL, NULL, NULL);
}

static void
case_bad(void)
{
	bad("wrong expected count", b4, "439 of 883 tensors dropped and 444 kept",
	    "expected 439 dropped and 443 kept (from the spec)", "expect_kept=443",
	    "expect_dropped=439", NULL);
	bad("wrong count from config.json", cond, "39 of 93 tensors dropped and 54 kept",
	    "expected 39 dropped and 55 kept", "expect_kept=55", NULL, NULL);
	bad("rename collision", cond, "rename collision",
	    "\"model.language_model.layers.0.input_layernorm.weight\" and "
	    "\"model.language_model.layers.1.input_layernorm.weight\"",
	    "rename=model.language_model.layers.0.=L. model.language_model.layers.1.=L.", NULL, NULL);
	bad("collision with an unrenamed tensor", cond, "rename collision",
	    "\"model.language_model.embed_tokens.weight\" and \"model.language_model.norm.weight\"",
	    "rename=model.language_model.norm.=model.language_model.embed_tokens.", NULL, NULL);
	bad("drop rule that matches nothing", cond, "drop rule \"*audio_tower.*\" matched none",
	    "93 tensors", "drop=*vision_tower.* *multi_modal_projector.* *audio_tower.*", NULL, NULL);
	bad("rename rule that matches nothing", causal, "rename rule \"model.language_model.=model.\" "
	    "matched none", NULL, "drop=", NULL, NULL);
	bad("defaults on a causal checkpoint", causal, "drop rule", "matched none", NULL, NULL, NULL);
	char nc[PATH_MAX + 32];
	snprintf(nc, sizeof(nc), "%s/nogemma", tmp);
	sh("cp -r %s %s && echo '{\"model_type\":\"llama\"}' > %s/config.json", cond, nc, nc);
	bad("no counts for a non-Gemma config", nc, "not a Gemma 3 config",
	    "set expect_dropped and expect_kept", NULL, NULL, NULL);
	bad("counts for a non-Gemma config given", nc, "expected 39 dropped and 50 kept",
	    NULL, "expect_dropped=39", "expect_kept=50", NULL);
	char tr[PATH_MAX + 32];
	snprintf(tr, sizeof(tr), "%s/trunc", tmp);
	sh("cp -r %s %s && truncate -s -2 %s/model-00002-of-00004.safetensors", cond4, tr, tr);
	bad("truncated shard", tr, "trunc/model-00002-of-00004.safetensors", "truncated", NULL,
	    NULL, NULL);
	sh("cp %s/model-00002-of-00004.safetensors %s/ && "
	    "/usr/bin/python3 -c 'import sys; f=open(sys.argv[1],\"r+b\"); f.seek(8); "
	    "f.write(b\"[\")' %s/model-00002-of-00004.safetensors", cond4, tr, tr);
	bad("corrupt header", tr, "model-00002-of-00004.safetensors", "not valid JSON", NULL, NULL, NULL);
	bad("bad rename rule", cond, "not FROM=TO", NULL, "rename=model.language_model.", NULL, NULL);
}

/* Corrupt headers through the stage: each its own message, nothing left. */
static void
case_corrupt_headers(void)
{
	static const struct { const char *what, *py, *want1, *want2; } corrupt[] = {
		{ "overlapping offsets",
		  "t = [k for k in h if k != \"__metadata__\"]; t.sort(key=lambda k: h[k][\"data_offsets\"][0]); "
		  "h[t[1]][\"data_offsets\"] = [h[t[1]][\"data_offsets\"][0] - 2, h[t[1]][\"data_offsets\"][1] - 2]",
		  "overlap tensor", "data_offsets" },
		{ "non-string metadata", "h[\"__metadata__\"][\"step\"] = 5",
		  "__metadata__ value of \"step\" is not a string", NULL },
		{ "100 MB header", "L = 100000001", "header length 100000001 exceeds the limit", NULL },
		{ "lying header length", "L = 10**7", "header length 10000000 runs past the end of the file", NULL },
		{ NULL, NULL, NULL, NULL }
	};
	for (int i = 0; corrupt[i].what; i++) {
		char cd[PATH_MAX + 32];
		snprintf(cd, sizeof(cd), "%s/corrupt%d", tmp, i);
		CHECK(sh("cp -r %s %s && /usr/bin/python3 -c '\n"
		    "import json, struct, sys\n"
		    "p = sys.argv[1]; b = open(p, \"rb\").read(); n = struct.unpack(\"<Q\", b[:8])[0]\n"
		    "h = json.loads(b[8:8 + n]); L = None\n"
		    "%s\n"
		    "js = json.dumps(h).encode()\n"
		    "if L is None: L = len(js)\n"
		    "open(p, \"wb\").write(struct.pack(\"<Q\", L) + js + b[8 + n:])\n"
		    "' %s/model.safetensors", cond, cd, corrupt[i].py, cd) == 0);
		char what[128];
		snprintf(what, sizeof(what), "corrupt header: %s", corrupt[i].what);
		bad(what, cd, corrupt[i].want1, corrupt[i].want2 ? corrupt[i].want2 : "model.safetensors",
		    NULL, NULL, NULL);
	}
}

/* Cancellation between tensors. */
static void
case_cancel(void)
{
	static pl_job j;
	char cdir[PATH_MAX + 32], cout[PATH_MAX + 64];
	snprintf(cdir, sizeof(cdir), "%s/cancel", tmp);
	snprintf(cout, sizeof(cout), "%s/fixed", cdir);
	CHECK(run_fix(&j, cond4, cout, 1, NULL, NULL, NULL) == PL_ECANCELED);
	CHECK(entries(cdir) == 0);
	/* ... and a quarter and half of the way through a whole run's
	 * checks, with the hashing under way on both threads. */
	/* How many checks a run makes depends on how far the file hasher
	 * got meanwhile (the job thread hashes from the back until they
	 * meet): take the fewest of five runs, then cancel at a quarter and
	 * at a half of that, which every run reaches. */
	int checks = 0;
	for (int k = 0; k < 5; k++) {
		CHECK(run_fix(&j, cond4, cout, -1, NULL, NULL, NULL) == PL_OK);
		if (k == 0 || j.ncancelled < checks)
			checks = j.ncancelled;
		sh("rm -rf %s", cdir);
	}
	CHECK(checks >= 4);
	/* A run on a loaded machine may still make fewer checks than that
	 * (the hasher got further): one that ended before the cancel came is
	 * run again, up to five times; the cancel must come in one of them
	 * and leave nothing behind. */
	for (int after = checks / 4; checks >= 4 && after <= checks / 2; after += checks / 4) {
		int rc = PL_OK;
		for (int k = 0; k < 5 && rc == PL_OK && (k == 0 || j.ncancelled <= after); k++) {
			sh("rm -rf %s", cdir);
			rc = run_fix(&j, cond4, cout, after, NULL, NULL, NULL);
		}
		CHECK(rc == PL_ECANCELED);
		CHECK(j.ncancelled == after + 1 && entries(cdir) == 0 && j.nartifacts == 0);
	}
}

static const struct unit_case cases[] = {
	UNIT_CASE(good),
	UNIT_CASE(bad),
	UNIT_CASE(corrupt_headers),
	UNIT_CASE(cancel),
	UNIT_END
};

int
main(int argc, char **argv)
{
	const char *t = getenv("TEST_TMP"), *tp = getenv("TOP");
	snprintf(top, sizeof(top), "%s", tp ? tp : ".");
	snprintf(tmp, sizeof(tmp), "%s/fix.XXXXXX", t ? t : "/tmp");
	if (mkdtemp(tmp) == NULL) {
		perror(tmp);
		return 1;
	}
	if ((fix = mh_load("tensor_fix")) == NULL) {
		fprintf(stderr, "cannot load the tensor_fix stage\n");
		return 1;
	}
	if (sh("cd %s && G=tests/fixtures/gen_gemma3.py && /usr/bin/python3 $G %s/cond && "
	    "/usr/bin/python3 $G %s/cond4 --shards 4 && "
	    "/usr/bin/python3 $G %s/causal --layout causal --shards 3", top, tmp, tmp, tmp) != 0) {
		fprintf(stderr, "fixture generation failed\n");
		return 1;
	}
	snprintf(cond, sizeof(cond), "%s/cond", tmp);
	snprintf(cond4, sizeof(cond4), "%s/cond4", tmp);
	snprintf(causal, sizeof(causal), "%s/causal", tmp);
	snprintf(b4, sizeof(b4), "%s/names4b", tmp);
	make_4b_names(b4);
	int rc = unit_main(argc, argv, cases);

	if (!getenv("KEEP"))
		st_rmtree(tmp);
	return rc;
}
