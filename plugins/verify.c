/*
 * verify.c: the verify stage. Before a release is baked and served, check
 * that the quantized GGUF is what it should be and is not the previous
 * version's weights (G24: a tag was once built from the previous version's
 * GGUF by a template substitution; nothing caught it).
 *
 *   - digests: the GGUF's sha256 (OpenSSL, streamed) must differ from the
 *     previous version's: the run spec's `previous` (its verify value, else
 *     its newest "gguf" artifact, read from the store) or previous_gguf = a
 *     path. The adapter's and the merged weights' digests likewise, when
 *     this run and the previous one have them. An identical digest fails
 *     with both paths and versions named;
 *   - structure: the file parses (every count, length and offset checked),
 *     general.architecture is the expected one, the tensor count is what
 *     block_count implies, every tensor llama.cpp's gemma3 needs is there,
 *     every 2-D weight is Q8_0 (F16 only where ne[0] rules Q8_0 out), every
 *     norm is F32, the vocabulary has as many tokens as the embedding has
 *     rows, and the special ids are present and in range.
 *
 * The result, all digests, counts, and pass or fail with the reasons, is
 * stored as the job value "verify" and published as the event
 * "job.verify". By hand it is printed.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "plio.h"
#include "gguf.h"

static const struct pl_host *host;

static const struct pl_key verify_keys[] = {
	PL_KEY_INPUT(.name = "input", .artifact = "gguf",
	    .help = "the quantized GGUF to verify"),
	PL_KEY_PATH(.name = "previous_gguf",
	    .help = "the previous version's GGUF (instead of the run spec's previous run)"),
	PL_KEY_PATH(.name = "adapter",
	    .help = "this version's adapter (default: this run's \"adapter\" artifact)"),
	PL_KEY_PATH(.name = "previous_adapter",
	    .help = "the previous version's adapter (default: the previous run's)"),
	PL_KEY_PATH(.name = "merged",
	    .help = "this version's merged weights (default: this run's \"merged\" artifact)"),
	PL_KEY_PATH(.name = "previous_merged",
	    .help = "the previous version's merged weights (default: the previous run's)"),
	PL_KEY_STRING(.name = "architecture", .def = "gemma3",
	    .help = "the general.architecture the file must declare"),
	PL_KEY_STRING(.name = "type", .def = "Q8_0",
	    .help = "the type every 2-D weight must have (Q8_0, F16, BF16 or F32)"),
	PL_KEY_END
};

/* Per-layer tensors of llama.cpp's gemma3 (all required). */
static const char *const gemma3_layer[] = {
	"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm",
	"attn_k_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm",
	"ffn_gate", "ffn_up", "ffn_down", NULL
};

struct result {
	pl_job *job;
	cJSON *v;		/* the stored object */
	cJSON *reasons;		/* array of strings */
	cJSON *checked;		/* array of strings: what was checked */
};

static void __attribute__((format(printf, 2, 3)))
reason(struct result *r, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	host->log(r->job, PL_LOG_ERROR, "%s", msg);
	cJSON_AddItemToArray(r->reasons, cJSON_CreateString(msg));
}

static void __attribute__((format(printf, 2, 3)))
checked(struct result *r, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	host->log(r->job, PL_LOG_INFO, "ok: %s", msg);
	cJSON_AddItemToArray(r->checked, cJSON_CreateString(msg));
}

/* sha256 of a file or directory (directories as the host digests them). */
static int
digest(const char *path, char hex[65])
{
	struct stat st;
	uint64_t bytes;
	if (stat(path, &st) == -1)
		return -1;
	if (S_ISDIR(st.st_mode))
		return plc_sha256_dir(path, hex, &bytes);
	return plc_sha256_file(path, hex);
}

/* A resolved path key, or NULL when unset (without the host's "not set"). */
static const char *
opt_path(pl_job *job, const char *key)
{
	const char *v = host->get(job, key);
	if (v == NULL || *v == '\0')
		return NULL;
	return host->input(job, key);
}

/*
 * The previous version's digest of artifact `name`: the path key when set,
 * else the previous run's, from the store. For "gguf" the previous run's
 * verify value names exactly the file it verified (the run also has
 * convert's F16 "gguf"); without one, its newest "gguf" artifact.
 * Returns 1 found, 0 none to compare with, -1 error (reason given).
 */
static int
previous_digest(struct result *r, const char *name, const char *key,
    const char *prev_run, char path[PATH_MAX], char hex[65])
{
	const char *p = opt_path(r->job, key);
	if (p) {
		if (digest(p, hex) == -1) {
			reason(r, "%s %s: %s", key, p, strerror(errno));
			return -1;
		}
		snprintf(path, PATH_MAX, "%s", p);
		return 1;
	}
	if (prev_run == NULL)
		return 0;
	if (strcmp(name, "gguf") == 0 && host->value_get) {
		char *val = host->value_get(r->job, prev_run, NULL, "verify");
		cJSON *j = val ? cJSON_Parse(val) : NULL;
		free(val);
		cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "gguf");
		cJSON *gs = cJSON_GetObjectItemCaseSensitive(g, "sha256");
		cJSON *gp = cJSON_GetObjectItemCaseSensitive(g, "path");
		if (cJSON_IsString(gs) && strlen(gs->valuestring) == 64) {
			snprintf(hex, 65, "%s", gs->valuestring);
			snprintf(path, PATH_MAX, "%s", cJSON_IsString(gp) ? gp->valuestring : "?");
			cJSON_Delete(j);
			return 1;
		}
		cJSON_Delete(j);
	}
	int rc = host->artifact_find(r->job, prev_run, NULL, name, path, PATH_MAX, hex);
	if (rc == PL_OK)
		return 1;
	if (strcmp(name, "gguf") == 0) {
		reason(r, "previous run %s has no verified or registered GGUF in the store; "
		    "set previous_gguf = PATH to compare with", prev_run);
		return -1;
	}
	return 0;
}

/* This version's digest of artifact `name`: the path key, else this run's. */
static int
current_digest(struct result *r, const char *name, const char *key,
    char path[PATH_MAX], char hex[65])
{
	const char *p = opt_path(r->job, key);
	if (p) {
		if (digest(p, hex) == -1) {
			reason(r, "%s %s: %s", key, p, strerror(errno));
			return -1;
		}
		snprintf(path, PATH_MAX, "%s", p);
		return 1;
	}
	return host->artifact_find(r->job, NULL, NULL, name, path, PATH_MAX, hex) == PL_OK;
}

static void
add_digest(cJSON *o, const char *name, const char *path, const char *hex,
    const char *run)
{
	cJSON *d = cJSON_AddObjectToObject(o, name);
	cJSON_AddStringToObject(d, "path", path);
	cJSON_AddStringToObject(d, "sha256", hex);
	if (run)
		cJSON_AddStringToObject(d, "run", run);
}

/* Compare one artifact kind with the previous version (G24). */
static void
compare(struct result *r, const char *name, const char *key, const char *prevkey,
    const char *cur_path, const char *cur_hex, const char *run, const char *prev_run)
{
	char ppath[PATH_MAX], phex[65];
	int have = previous_digest(r, name, prevkey, prev_run, ppath, phex);
	if (have <= 0) {
		if (have == 0)
			host->log(r->job, PL_LOG_INFO, "%s: no previous version to compare with",
			    name);
		return;
	}
	char pname[64];
	snprintf(pname, sizeof(pname), "previous_%s", name);
	add_digest(r->v, pname, ppath, phex, prev_run);
	if (strcmp(cur_hex, phex) == 0)
		reason(r, "%s %s (%s) has the same sha256 %s as %s (%s): this release would "
		    "ship the previous version's %s (G24)", name, cur_path, run ? run : "this version",
		    cur_hex, ppath, prev_run ? prev_run : "previous version", name);
	else
		checked(r, "%s sha256 %.16s... differs from the previous version's %.16s... (%s)",
		    name, cur_hex, phex, ppath);
	(void)key;
}

static void
check_structure(struct result *r, struct gguf *g, const char *want_arch,
    uint32_t want_type)
{
	const char *s;
	size_t len;
	uint64_t nl = 0;
	char arch[64] = "";

	cJSON_AddNumberToObject(r->v, "tensors", (double)g->n_tensors);
	cJSON_AddNumberToObject(r->v, "kv", (double)g->n_kv);
	if (gguf_get_str(g, "general.architecture", &s, &len) == -1)
		reason(r, "%s", g->err);
	else {
		snprintf(arch, sizeof(arch), "%.*s", (int)(len < 63 ? len : 63), s);
		cJSON_AddStringToObject(r->v, "architecture", arch);
		if (strcmp(arch, want_arch) != 0)
			reason(r, "general.architecture is %s, expected %s", arch, want_arch);
		else
			checked(r, "architecture %s", arch);
	}

	/* Tensor count and names from block_count. */
	char key[128];
	snprintf(key, sizeof(key), "%s.block_count", arch);
	if (*arch && gguf_get_uint(g, key, &nl) == -1)
		reason(r, "%s", g->err);
	else if (strcmp(arch, "gemma3") == 0) {
		int has_output = gguf_find_tensor(g, "output.weight") >= 0;
		uint64_t want = 2 + 13 * nl + (uint64_t)has_output;
		int missing = 0;
		if (gguf_find_tensor(g, "token_embd.weight") < 0) {
			reason(r, "tensor token_embd.weight is missing");
			missing++;
		}
		if (gguf_find_tensor(g, "output_norm.weight") < 0) {
			reason(r, "tensor output_norm.weight is missing");
			missing++;
		}
		for (uint64_t l = 0; l < nl && missing < 8; l++)
			for (int k = 0; gemma3_layer[k]; k++) {
				char tn[GGUF_NAME_MAX + 1];
				snprintf(tn, sizeof(tn), "blk.%" PRIu64 ".%s.weight", l, gemma3_layer[k]);
				if (gguf_find_tensor(g, tn) < 0 && missing++ < 8)
					reason(r, "tensor %s is missing", tn);
			}
		if (g->n_tensors != want)
			reason(r, "%" PRIu64 " tensors, expected %" PRIu64 " for %" PRIu64
			    " layers", g->n_tensors, want, nl);
		else if (!missing)
			checked(r, "%" PRIu64 " tensors, all that %" PRIu64 " gemma3 layers need",
			    g->n_tensors, nl);
	}

	/* Types: 2-D weights in the target type, norms F32. */
	uint64_t n_q = 0, n_norm = 0, bad = 0;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->t[i];
		int nd = gguf_tensor_ndims(t);
		if (strstr(t->name, "_norm.weight")) {
			n_norm++;
			if (t->type != GGML_F32 && bad++ < 8)
				reason(r, "norm %s is %s, expected F32", t->name,
				    gguf_type_name(t->type));
			continue;
		}
		if (!gguf_q8_0_allows(t->name, nd))
			continue;
		uint32_t want = want_type;
		if (want_type == GGML_Q8_0 && t->ne[0] % QK8_0 != 0)
			want = GGML_F16;	/* llama-quantize's fallback */
		n_q++;
		if (t->type != want && bad++ < 8)
			reason(r, "tensor %s is %s, expected %s", t->name,
			    gguf_type_name(t->type), gguf_type_name(want));
	}
	cJSON_AddNumberToObject(r->v, "weights", (double)n_q);
	cJSON_AddNumberToObject(r->v, "norms", (double)n_norm);
	if (!bad)
		checked(r, "%" PRIu64 " 2-D weights are %s, %" PRIu64 " norms are F32", n_q,
		    gguf_type_name(want_type), n_norm);
	uint64_t ft;
	if (want_type == GGML_Q8_0 && gguf_get_uint(g, "general.file_type", &ft) == 0 &&
	    ft != LLAMA_FTYPE_MOSTLY_Q8_0)
		reason(r, "general.file_type is %" PRIu64 ", expected 7 (MOSTLY_Q8_0)", ft);

	/* Vocabulary against the embedding; special ids. */
	int64_t ti = gguf_find_kv(g, "tokenizer.ggml.tokens");
	int64_t ei = gguf_find_tensor(g, "token_embd.weight");
	uint64_t nv = 0;
	if (ti < 0 || g->kv[ti].type != GGUF_ARRAY || g->kv[ti].arr_type != GGUF_STRING)
		reason(r, "tokenizer.ggml.tokens is missing or not a string array");
	else {
		nv = g->kv[ti].n;
		cJSON_AddNumberToObject(r->v, "vocab", (double)nv);
		if (ei >= 0 && (uint64_t)g->t[ei].ne[1] != nv)
			reason(r, "%" PRIu64 " tokens but token_embd.weight has %" PRId64 " rows",
			    nv, g->t[ei].ne[1]);
		else if (ei >= 0)
			checked(r, "vocabulary of %" PRIu64 " tokens = token_embd rows", nv);
		static const char *const arrs[] = { "tokenizer.ggml.scores",
			"tokenizer.ggml.token_type", NULL };
		for (int k = 0; arrs[k]; k++) {
			int64_t ai = gguf_find_kv(g, arrs[k]);
			if (ai >= 0 && g->kv[ai].n != nv)
				reason(r, "%s has %" PRIu64 " entries for %" PRIu64 " tokens", arrs[k],
				    g->kv[ai].n, nv);
		}
	}
	static const struct {
		const char *key;
		int required;
	} ids[] = {
		{ "tokenizer.ggml.bos_token_id", 1 }, { "tokenizer.ggml.eos_token_id", 1 },
		{ "tokenizer.ggml.unknown_token_id", 0 }, { "tokenizer.ggml.padding_token_id", 0 },
	};
	int ids_ok = 1;
	for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
		uint64_t id;
		if (gguf_find_kv(g, ids[k].key) < 0) {
			if (ids[k].required) {
				reason(r, "%s is missing (llama.cpp would fall back to Llama's ids)",
				    ids[k].key);
				ids_ok = 0;
			}
			continue;
		}
		if (gguf_get_uint(g, ids[k].key, &id) == -1) {
			reason(r, "%s", g->err);
			ids_ok = 0;
		} else if (nv && id >= nv) {
			reason(r, "%s = %" PRIu64 " is outside the %" PRIu64 "-token vocabulary",
			    ids[k].key, id, nv);
			ids_ok = 0;
		}
	}
	if (ids_ok)
		checked(r, "special ids present and in range");
}

static int
verify_check(pl_job *job)
{
	const char *t = host->get(job, "type");
	int ty = t ? gguf_type_from_name(t) : GGML_Q8_0;
	if (ty != GGML_Q8_0 && ty != GGML_F16 && ty != GGML_BF16 && ty != GGML_F32)
		host->check_error(job, "type", "\"%s\": use Q8_0, F16, BF16 or F32", t);
	return PL_OK;
}

static int
verify_run(pl_job *job)
{
	const char *in = host->input(job, "input");
	const char *want_arch = host->get(job, "architecture");
	const char *ts = host->get(job, "type");
	const char *run = host->run_name(job);
	const char *prev_run = host->run_get(job, "previous");
	struct result r = { job, cJSON_CreateObject(), NULL, NULL };
	struct gguf g;
	char hex[65];
	struct stat st;

	if (in == NULL) {
		cJSON_Delete(r.v);
		return host->fail(job, "input: no GGUF to verify");
	}
	if (prev_run && *prev_run == '\0')
		prev_run = NULL;
	r.reasons = cJSON_AddArrayToObject(r.v, "reasons");
	r.checked = cJSON_AddArrayToObject(r.v, "checked");
	if (run)
		cJSON_AddStringToObject(r.v, "run", run);
	if (prev_run)
		cJSON_AddStringToObject(r.v, "previous", prev_run);

	/* The digest first: it is what the release rule turns on. */
	if (plc_sha256_file(in, hex) == -1 || stat(in, &st) == -1) {
		cJSON_Delete(r.v);
		return host->fail(job, "%s: %s", in, strerror(errno));
	}
	add_digest(r.v, "gguf", in, hex, run);
	cJSON_AddNumberToObject(cJSON_GetObjectItemCaseSensitive(r.v, "gguf"), "size",
	    (double)st.st_size);
	host->log(job, PL_LOG_INFO, "%s: sha256 %s", in, hex);
	compare(&r, "gguf", "input", "previous_gguf", in, hex, run, prev_run);

	static const char *const extra[] = { "adapter", "merged", NULL };
	for (int k = 0; extra[k]; k++) {
		char path[PATH_MAX], h[65], pk[64];
		int have = current_digest(&r, extra[k], extra[k], path, h);
		if (have <= 0) {
			if (have == 0)
				host->log(job, PL_LOG_INFO, "%s: none in this run; not compared",
				    extra[k]);
			continue;
		}
		add_digest(r.v, extra[k], path, h, run);
		snprintf(pk, sizeof(pk), "previous_%s", extra[k]);
		compare(&r, extra[k], extra[k], pk, path, h, run, prev_run);
	}

	if (gguf_open(&g, in) == -1)
		reason(&r, "%s", g.err);
	else {
		checked(&r, "GGUF v3 structure: %" PRIu64 " KVs, %" PRIu64 " tensors, offsets "
		    "and alignment", g.n_kv, g.n_tensors);
		check_structure(&r, &g, want_arch ? want_arch : "gemma3",
		    ts ? (uint32_t)gguf_type_from_name(ts) : GGML_Q8_0);
		gguf_close(&g);
	}

	int ok = cJSON_GetArraySize(r.reasons) == 0;
	cJSON_AddBoolToObject(r.v, "ok", ok);
	char *txt = cJSON_PrintUnformatted(r.v);
	if (txt) {
		host->value_set(job, "verify", txt);
		host->event(job, "verify", txt);
		free(txt);
	}
	int rc = PL_OK;
	if (!ok) {
		cJSON *first = cJSON_GetArrayItem(r.reasons, 0);
		int n = cJSON_GetArraySize(r.reasons);
		host->fail(job, "%s%s", first->valuestring,
		    n > 1 ? " (and more: see the verify value)" : "");
		rc = PL_EVERIFY;
	}
	cJSON_Delete(r.v);
	return rc;
}

static const struct pl_stage verify_stage = PL_STAGE(
	.name = "verify",
	.summary = "GGUF structure and digests against the previous version (G24)",
	.flags = PL_STAGE_REUSE,
	.keys = verify_keys,
	.check = verify_check,
	.run = verify_run);

PL_PLUGIN(&host, &verify_stage)
