/*
 * test_merge.c: the merge stage (plugins/merge.so), run in-process through
 * a small host on fixtures from tests/fixtures/gen_gemma3.py, checked
 * against the float64 numpy reference tests/fixtures/ref_merge.py (every
 * merged element within one bf16 ulp, every other tensor byte-identical),
 * for every adapter kind on both layouts (the causal one sharded), lora_bias,
 * and an F16 base (within one f16 ulp); then the
 * error cases, each with its own message and no output left behind.
 * Needs /usr/bin/python3 with numpy and sentencepiece (etc/deps.sh).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "minihost.h"
#include "plio.h"
#include "safetensors.h"
#include "runner.h"

static char tmp[PATH_MAX], top[PATH_MAX];
static const struct pl_stage *merge;

static int
run_merge(pl_job *j, const char *base, const char *adapter, const char *out, int cancel_after,
    const char *extra)
{
	char b[PATH_MAX + 8], a[PATH_MAX + 8], o[PATH_MAX + 8];
	snprintf(b, sizeof(b), "base=%s", base);
	snprintf(a, sizeof(a), "adapter=%s", adapter);
	snprintf(o, sizeof(o), "output=%s", out);
	const char *kv[] = { b, a, o, extra, NULL };
	fprintf(stderr, "merge %s + %s -> %s\n", base, adapter, out);
	return mh_run(merge, j, kv, tmp, cancel_after);
}

static void
good_kind(const char *layout, const char *kind)
{
	static pl_job j;
	char base[PATH_MAX], ad[PATH_MAX + 64], out[PATH_MAX + 64];
	snprintf(base, sizeof(base), "%s/%s", tmp, layout);
	snprintf(ad, sizeof(ad), "%s/adapters/%s", base, kind);
	snprintf(out, sizeof(out), "%s/out/%s-%s", tmp, layout, kind);
	int rc = run_merge(&j, base, ad, out, -1, NULL);
	if (rc != PL_OK) {
		fprintf(stderr, "FAIL merge %s/%s: %s\n", layout, kind, j.fail);
		check_failures++;
		return;
	}
	CHECK(j.nartifacts == 1 && strcmp(j.artifacts[0][0], "merged") == 0 &&
	    strcmp(j.artifacts[0][1], out) == 0);
	CHECK(j.nprogress > 0 && j.last_done == j.last_total && j.last_total > 50);
	if (strcmp(kind, "vision") == 0) {
		if (strcmp(layout, "conditional") != 0)
			CHECK(strstr(j.events, "merge.vision") && strstr(j.log, "were skipped"));
		else
			CHECK(strstr(j.log, "merged into the base's vision tower") != NULL);
	}
	int r = sh("/usr/bin/python3 %s/tests/fixtures/ref_merge.py %s %s %s >%s/ref-%s-%s.log 2>&1",
	    top, base, ad, out, tmp, layout, kind);
	if (r != 0) {
		fprintf(stderr, "FAIL reference comparison %s/%s:\n", layout, kind);
		sh("tail -n 15 %s/ref-%s-%s.log >&2", tmp, layout, kind);
		check_failures++;
	} else {
		sh("tail -n 1 %s/ref-%s-%s.log | sed 's/^/  %s\\/%s: /' >&2", tmp, layout, kind,
		    layout, kind);
	}
}

/* A failing merge: message fragments, and nothing left in out/. */
static void
bad(const char *what, const char *base, const char *adapter, const char *extra,
    const char *want1, const char *want2)
{
	static pl_job j;
	char out[PATH_MAX + 32], outdir[PATH_MAX + 32];
	snprintf(outdir, sizeof(outdir), "%s/bad", tmp);
	snprintf(out, sizeof(out), "%s/merged", outdir);
	sh("rm -rf %s", outdir);
	int rc = run_merge(&j, base, adapter, out, -1, extra);
	if (rc == PL_OK) {
		fprintf(stderr, "FAIL %s: merged\n", what);
		check_failures++;
		return;
	}
	if (strstr(j.fail, want1) == NULL || (want2 && strstr(j.fail, want2) == NULL)) {
		fprintf(stderr, "FAIL %s: want \"%s\"%s%s%s in: %s\n", what, want1,
		    want2 ? " and \"" : "", want2 ? want2 : "", want2 ? "\"" : "", j.fail);
		check_failures++;
	}
	if (entries(outdir) != 0) {
		fprintf(stderr, "FAIL %s: files left in %s\n", what, outdir);
		sh("ls -la %s >&2", outdir);
		check_failures++;
	}
	CHECK(j.nartifacts == 0);
	fprintf(stderr, "ok   %s\n", what);
}

/* Write an adapter dir: a copy of src with tensor key renamed (or, with
 * rename_to NULL, every key holding rename_from dropped; or scaled: values
 * multiplied by mul), and adapter_config.json from src with sed expression
 * sedexpr applied. */
static void
make_adapter(const char *src, const char *dst, const char *rename_from, const char *rename_to,
    float mul, const char *sedexpr)
{
	char p[PATH_MAX + 64], err[ST_ERRLEN];
	struct st_file f;
	struct st_writer w;
	sh("mkdir -p %s && sed -e '%s' %s/adapter_config.json > %s/adapter_config.json", dst,
	    sedexpr ? sedexpr : "", src, dst);
	snprintf(p, sizeof(p), "%s/adapter_model.safetensors", src);
	if (st_open(&f, p, err, sizeof(err)) == -1) {
		fprintf(stderr, "%s\n", err);
		check_failures++;
		return;
	}
	snprintf(p, sizeof(p), "%s/adapter_model.safetensors", dst);
	st_writer_init(&w, p);
	st_writer_meta(&w, "format", "pt");
	for (size_t i = 0; i < f.ntensors; i++) {
		const char *n = f.tensors[i].name;
		char nn[1024];
		if (rename_from && rename_to == NULL && strstr(n, rename_from))
			continue;
		if (rename_from && strstr(n, rename_from)) {
			const char *at = strstr(n, rename_from);
			snprintf(nn, sizeof(nn), "%.*s%s%s", (int)(at - n), n, rename_to,
			    at + strlen(rename_from));
			n = nn;
		}
		st_writer_add(&w, n, f.tensors[i].dtype, f.tensors[i].ndim, f.tensors[i].shape,
		    err, sizeof(err));
	}
	CHECK(st_writer_start(&w, err, sizeof(err)) == 0);
	for (size_t i = 0, wi = 0; i < f.ntensors; i++) {
		const struct st_tensor *t = &f.tensors[i];
		if (rename_from && rename_to == NULL && strstr(t->name, rename_from))
			continue;
		char *raw = malloc(t->nbytes);
		float *v = malloc(t->nelem * sizeof(float));
		st_read(&f, t, raw, 0, t->nbytes);
		st_to_f32(t->dtype, raw, v, t->nelem);
		for (size_t k = 0; k < t->nelem; k++)
			v[k] *= mul;
		st_from_f32(t->dtype, v, raw, t->nelem);
		st_writer_write(&w, wi++, 0, raw, t->nbytes, err, sizeof(err));
		free(raw);
		free(v);
	}
	CHECK(st_writer_commit(&w, err, sizeof(err)) == 0);
	st_writer_free(&w);
	st_close(&f);
}

/*
 * The base's identity beside the adapter (pipeline-base.json, as the
 * train stage writes it): this base's merges, another base's is refused
 * with both digests. The config digest is sha256sum(1)'s of config.json.
 */
static void
identity_cases(const char *base, const char *other, const char *src)
{
	static pl_job j;
	struct st_set s;
	char c[65], t[65], oc[65], ot[65], err[ST_ERRLEN], x[PATH_MAX + 64], out[PATH_MAX + 64];

	CHECK(st_set_open(&s, base, err, sizeof(err)) == 0);
	CHECK(st_set_identity(&s, c, t, err, sizeof(err)) == 0);
	st_set_close(&s);
	CHECK(st_set_open(&s, other, err, sizeof(err)) == 0);
	CHECK(st_set_identity(&s, oc, ot, err, sizeof(err)) == 0);
	st_set_close(&s);
	CHECK(strcmp(t, ot) != 0 && strcmp(c, oc) != 0);
	CHECK(sh("cd %s && sha256sum config.json | grep -q '^%s '", base, c) == 0);
	snprintf(x, sizeof(x), "%s/ad-ident", tmp);
	snprintf(out, sizeof(out), "%s/out/ident", tmp);
	sh("rm -rf %s && cp -r %s %s && printf '{\"base\": \"%s\", \"config_sha256\": "
	    "\"%s\", \"tensors_sha256\": \"%s\"}\n' >%s/pipeline-base.json", x, src, x, base,
	    c, t, x);
	CHECK(run_merge(&j, base, x, out, -1, NULL) == PL_OK);
	sh("printf '{\"base\": \"%s\", \"config_sha256\": \"%s\", \"tensors_sha256\": "
	    "\"%s\"}\n' >%s/pipeline-base.json", other, oc, ot, x);
	bad("adapter trained on another base (identity)", base, x, NULL, oc, c);
	bad("adapter trained on another base (identity, index)", base, x, NULL, ot, t);
	sh("echo '{\"config_sha256\": 5}' >%s/pipeline-base.json", x);
	bad("corrupt pipeline-base.json", base, x, NULL, "pipeline-base.json: config_sha256",
	    NULL);
}

/* Every kind of adapter on both layouts; lora_bias only on the
 * conditional base (only the vision tower has biases); an F16 base merged
 * in f32, rounded to F16 (one f16 ulp). */
static void
case_kinds(void)
{
	static const char *kinds[] = { "plain", "rslora", "patterns", "modules_to_save",
	    "vision", "dora", "fifo", NULL };
	for (int i = 0; kinds[i]; i++) {
		good_kind("conditional", kinds[i]);
		good_kind("causal", kinds[i]);
	}
	good_kind("conditional", "lora-bias");
	good_kind("f16", "plain");
	good_kind("f16", "dora");
}

/* The same inputs give byte-identical outputs. */
static void
case_identical(void)
{
	char a[PATH_MAX + 64], b[PATH_MAX + 64], base[PATH_MAX + 64], ad[PATH_MAX + 64];
	static pl_job j;
	snprintf(base, sizeof(base), "%s/conditional", tmp);
	snprintf(ad, sizeof(ad), "%s/conditional/adapters/plain", tmp);
	snprintf(a, sizeof(a), "%s/out/conditional-plain", tmp);
	snprintf(b, sizeof(b), "%s/out/again", tmp);
	/* The first output, as case_kinds makes it, so that this case runs alone. */
	good_kind("conditional", "plain");
	CHECK(run_merge(&j, base, ad, b, -1, "threads=1") == PL_OK);
	CHECK(sh("cmp %s/model.safetensors %s/model.safetensors", a, b) == 0);
	/* Merging over an existing output replaces it whole. */
	CHECK(run_merge(&j, base, ad, b, -1, NULL) == PL_OK);
	CHECK(sh("cmp %s/model.safetensors %s/model.safetensors", a, b) == 0);
	/* Cancellation between tensors: PL_ECANCELED and nothing left. */
	char cdir[PATH_MAX + 64], cout[PATH_MAX + 80];
	snprintf(cdir, sizeof(cdir), "%s/cancel", tmp);
	snprintf(cout, sizeof(cout), "%s/merged", cdir);
	CHECK(run_merge(&j, base, ad, cout, 5, NULL) == PL_ECANCELED);
	CHECK(entries(cdir) == 0);
}

static void
case_errors(void)
{
	char base[PATH_MAX + 64], b[PATH_MAX + 64];
	static pl_job j;

	snprintf(base, sizeof(base), "%s/conditional", tmp);
	snprintf(b, sizeof(b), "%s/out/again", tmp);
	char x[PATH_MAX + 64], causal[PATH_MAX + 64];
	snprintf(causal, sizeof(causal), "%s/causal", tmp);
	snprintf(x, sizeof(x), "%s/conditional/adapters/other-base", tmp);
	/* A name is not an identity: another base_model_name_or_path merges,
	 * by structure, with a warning in the job log. */
	CHECK(run_merge(&j, base, x, b, -1, NULL) == PL_OK);
	CHECK(strstr(j.log, "names its base \"google/gemma-3-4b-it\"") != NULL &&
	    strstr(j.log, "merging by structure") != NULL);
	snprintf(x, sizeof(x), "%s/conditional/adapters/other-vocab", tmp);
	bad("adapter for another base (vocab)", base, x, NULL, "vocabulary of 792 rows",
	    "embed_tokens");
	snprintf(x, sizeof(x), "%s/conditional/adapters/modules_to_save", tmp);
	bad("conditional adapter on the causal base", causal, x, NULL,
	    "vocabulary of 776 rows, the base has 768", NULL);
	char src[PATH_MAX + 64];
	snprintf(src, sizeof(src), "%s/conditional/adapters/plain", tmp);
	snprintf(x, sizeof(x), "%s/ad-nomatch", tmp);
	make_adapter(src, x, "layers.3.mlp.up_proj", "layers.3.mlp.upp_proj", 1, NULL);
	bad("adapter key matching no tensor", base, x, NULL,
	    "\"base_model.model.model.language_model.layers.3.mlp.upp_proj.lora_", "matches no tensor");
	snprintf(x, sizeof(x), "%s/ad-rank", tmp);
	make_adapter(src, x, NULL, NULL, 1, "s/\"r\": 8/\"r\": 4/");
	bad("rank that disagrees with the config", base, x, NULL, "do not have rank 4", "(r)");
	snprintf(x, sizeof(x), "%s/ad-shape", tmp);
	make_adapter(src, x, "layers.0.self_attn.q_proj.lora_A", "layers.0.self_attn.q_proj.lora_C",
	    1, NULL);
	bad("unknown adapter key", base, x, NULL, "q_proj.lora_C.weight\" is neither", NULL);
	char fifo[PATH_MAX + 64];
	snprintf(fifo, sizeof(fifo), "%s/conditional/adapters/fifo", tmp);
	snprintf(x, sizeof(x), "%s/ad-shape", tmp);
	make_adapter(fifo, x, NULL, NULL, 1, "s/\"fan_in_fan_out\": true/\"fan_in_fan_out\": false/");
	bad("shape mismatch", base, x, NULL, "gives [", "but base tensor");
	snprintf(x, sizeof(x), "%s/ad-inf", tmp);
	make_adapter(src, x, NULL, NULL, 1e21f, NULL);
	bad("non-finite result", base, x, NULL, "is not finite", "layers.0");
	snprintf(x, sizeof(x), "%s/ad-dora", tmp);
	make_adapter(src, x, NULL, NULL, 1, "s/\"use_dora\": false/\"use_dora\": true/");
	bad("DoRA without magnitudes", base, x, NULL, "use_dora is set", "lora_magnitude_vector");
	snprintf(x, sizeof(x), "%s/ad-peft", tmp);
	make_adapter(src, x, NULL, NULL, 1, "s/\"peft_type\": \"LORA\"/\"peft_type\": \"IA3\"/");
	bad("not LoRA", base, x, NULL, "only LORA", "IA3");
	snprintf(x, sizeof(x), "%s/ad-pissa", tmp);
	make_adapter(src, x, NULL, NULL, 1,
	    "s/\"init_lora_weights\": true/\"init_lora_weights\": \"pissa\"/");
	bad("PiSSA init", base, x, NULL, "pissa", "residual");
	/* The layer count: an adapter of every layer of a 3-layer model on the
	 * 4-layer base names the first base tensor it leaves alone. */
	snprintf(x, sizeof(x), "%s/ad-layers", tmp);
	make_adapter(src, x, "layers.3.", NULL, 1, NULL);
	bad("adapter of a shallower model", base, x, NULL, "stop at layer 2 (3 layers) but "
	    "the base has 4", "base tensor \"model.language_model.layers.3.");
	identity_cases(base, causal, src);
	snprintf(x, sizeof(x), "%s/ad-missing", tmp);
	bad("no adapter directory", base, x, NULL, "ad-missing/adapter_config.json", NULL);
}

/* Corrupt bases: each names the file and what is wrong with it. */
static void
case_corrupt_bases(void)
{
	char x[PATH_MAX + 64], src[PATH_MAX + 64];

	snprintf(src, sizeof(src), "%s/conditional/adapters/plain", tmp);
	snprintf(x, sizeof(x), "%s/badbase", tmp);
	sh("cp -r %s/conditional %s && truncate -s -100 %s/model.safetensors", tmp, x, x);
	bad("truncated base", x, src, NULL, "badbase/model.safetensors", "truncated");
	sh("cp -r %s/causal/. %s/ && rm -f %s/model.safetensors && "
	    "/usr/bin/python3 -c 'import sys,struct; f=open(sys.argv[1],\"r+b\"); "
	    "f.write(struct.pack(\"<Q\", 5*10**6))' %s/model-00002-of-00003.safetensors", tmp, x, x, x);
	bad("lying header length in a shard", x, src, NULL,
	    "model-00002-of-00003.safetensors", "past the end");
}

static const struct unit_case cases[] = {
	UNIT_CASE(kinds),
	UNIT_CASE(identical),
	UNIT_CASE(errors),
	UNIT_CASE(corrupt_bases),
	UNIT_END
};

/* The fixtures are made once, before the cases. */
int
main(int argc, char **argv)
{
	const char *t = getenv("TEST_TMP"), *tp = getenv("TOP");
	snprintf(top, sizeof(top), "%s", tp ? tp : ".");
	snprintf(tmp, sizeof(tmp), "%s/merge.XXXXXX", t ? t : "/tmp");
	if (mkdtemp(tmp) == NULL || access("/usr/bin/python3", X_OK) != 0) {
		perror(tmp);
		return 1;
	}
	if ((merge = mh_load("merge")) == NULL) {
		fprintf(stderr, "cannot load the merge stage\n");
		return 1;
	}
	if (sh("cd %s && /usr/bin/python3 tests/fixtures/gen_gemma3.py %s/conditional "
	    "--adapter all && /usr/bin/python3 tests/fixtures/gen_gemma3.py %s/causal --layout "
	    "causal --shards 3 --adapter all && /usr/bin/python3 tests/fixtures/gen_gemma3.py "
	    "%s/f16 --layout causal --dtype f16 --adapter plain --adapter dora", top, tmp, tmp, tmp) != 0) {
		fprintf(stderr, "fixture generation failed\n");
		return 1;
	}
	int rc = unit_main(argc, argv, cases);

	if (!getenv("KEEP"))
		st_rmtree(tmp);
	return rc;
}
