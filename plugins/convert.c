/*
 * convert.c: the convert stage. A Gemma 3 text checkpoint (tensor_fix's
 * "fixed", or any Gemma3ForCausalLM / Gemma3ForConditionalGeneration
 * directory) to a F16, BF16 or F32 GGUF, natively (gguf_convert.c), or
 * with a llama.cpp checkout's convert_hf_to_gguf.py (tool = llama.cpp),
 * whose log the host captures. The Python converter breaks on dependency
 * drift (G03, G08) and on unknown pre-tokenizers; the native one needs
 * nothing but this library, and refuses an architecture it does not know
 * by name.
 *
 * The output is checked before it is registered: it must parse as GGUF,
 * declare general.architecture, and hold as many tokens as the embedding
 * has rows. Artifact: "gguf". Value: "convert", a JSON summary.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "plio.h"
#include "rate.h"
#include "gguf.h"

static const struct pl_host *host;

static const struct pl_key convert_keys[] = {
	PL_KEY_INPUT(.name = "input", .artifact = "fixed",
	    .help = "the checkpoint directory (config.json, *.safetensors, tokenizer.model)"),
	PL_KEY_PATH(.name = "output",
	    .help = "the GGUF to write (default: model-OUTTYPE.gguf in the work directory)"),
	PL_KEY_STRING(.name = "outtype", .def = "f16",
	    .help = "f16, bf16 or f32: the type of the matrices (norms are always F32)"),
	PL_KEY_STRING(.name = "tool", .def = "native",
	    .help = "native, or llama.cpp to run llama_cpp's convert_hf_to_gguf.py"),
	PL_KEY_PATH(.name = "llama_cpp", .help = "a llama.cpp checkout (tool = llama.cpp)"),
	PL_KEY_STRING(.name = "python",
	    .help = "the Python for tool = llama.cpp (default: daemon.python, else python3)"),
	PL_KEY_END
};


static uint32_t
outtype_of(const char *s)
{
	if (s == NULL || strcasecmp(s, "f16") == 0)
		return GGML_F16;
	if (strcasecmp(s, "bf16") == 0)
		return GGML_BF16;
	if (strcasecmp(s, "f32") == 0)
		return GGML_F32;
	return UINT32_MAX;
}

static int
convert_check(pl_job *job)
{
	const char *tool = host->get(job, "tool");
	const char *ot = host->get(job, "outtype");
	if (outtype_of(ot) == UINT32_MAX)
		host->check_error(job, "outtype", "\"%s\": use f16, bf16 or f32", ot);
	if (tool && strcmp(tool, "native") != 0 && strcmp(tool, "llama.cpp") != 0)
		host->check_error(job, "tool", "\"%s\": use native or llama.cpp", tool);
	if (tool && strcmp(tool, "llama.cpp") == 0 && host->get(job, "llama_cpp") == NULL)
		host->check_error(job, "llama_cpp", "tool = llama.cpp needs the path of a "
		    "llama.cpp checkout");
	return PL_OK;
}

/* Whatever wrote it, the file must parse, name its architecture, and
 * have one token per embedding row. */
static int
check_output(pl_job *job, const char *out, cJSON *v)
{
	struct gguf g;
	const char *arch;
	size_t alen;
	int rc = PL_OK;

	if (gguf_open(&g, out) == -1)
		return host->fail(job, "the converted file does not parse: %s", g.err);
	if (gguf_get_str(&g, "general.architecture", &arch, &alen) == -1) {
		rc = host->fail(job, "%s", g.err);
		goto out;
	}
	int64_t ti = gguf_find_kv(&g, "tokenizer.ggml.tokens");
	int64_t ei = gguf_find_tensor(&g, "token_embd.weight");
	if (ti < 0 || ei < 0) {
		rc = host->fail(job, "%s: no %s", out, ti < 0 ? "tokenizer.ggml.tokens" :
		    "token_embd.weight");
		goto out;
	}
	if (g.kv[ti].n != (uint64_t)g.t[ei].ne[1]) {
		rc = host->fail(job, "%s: %" PRIu64 " tokens but token_embd.weight has %" PRId64
		    " rows", out, g.kv[ti].n, g.t[ei].ne[1]);
		goto out;
	}
	char a[64];
	snprintf(a, sizeof(a), "%.*s", (int)(alen < 63 ? alen : 63), arch);
	cJSON_AddStringToObject(v, "architecture", a);
	cJSON_AddNumberToObject(v, "tensors", (double)g.n_tensors);
	cJSON_AddNumberToObject(v, "vocab", (double)g.kv[ti].n);
	cJSON_AddNumberToObject(v, "bytes", (double)g.size);
out:
	gguf_close(&g);
	return rc;
}

static int
run_llama_cpp(pl_job *job, const char *in, const char *out, const char *outtype)
{
	const char *tree = host->input(job, "llama_cpp");
	const char *py = host->get(job, "python");
	char script[PATH_MAX], tmp[PATH_MAX + 64];
	if (tree == NULL)
		return host->fail(job, "llama_cpp: not set");
	if (py == NULL)
		py = host->conf_get(job, "daemon.python");
	if (py == NULL)
		py = "python3";
	snprintf(script, sizeof(script), "%s/convert_hf_to_gguf.py", tree);
	if (access(script, R_OK) == -1)
		return host->fail(job, "%s: %s", script, strerror(errno));
	snprintf(tmp, sizeof(tmp), "%s.llama-cpp.tmp", out);
	unlink(tmp);
	const char *argv[] = { py, "-B", script, in, "--outfile", tmp, "--outtype", outtype,
		NULL };
	const char *env[] = { "PYTHONDONTWRITEBYTECODE=1", NULL };
	struct pl_spawn sp = { .abi = PL_ABI_VERSION, .size = sizeof(sp),
		.name = "convert_hf_to_gguf", .argv = argv, .env = env };
	struct pl_exit ex = PL_EXIT_INIT;
	host->log(job, PL_LOG_INFO, "running %s %s %s --outfile %s --outtype %s", py,
	    script, in, tmp, outtype);
	int rc = host->spawn(job, &sp, &ex);
	if (rc != PL_OK) {
		unlink(tmp);
		return host->fail(job, "convert_hf_to_gguf.py could not be run: %s",
		    host->strerror(rc));
	}
	if (!ex.exited || ex.status != 0) {
		unlink(tmp);
		if (ex.exited)
			return host->fail(job, "convert_hf_to_gguf.py exited with status %d "
			    "(its log is in the job log)%s%s", ex.status, ex.error[0] ? ": " : "",
			    ex.error);
		return host->fail(job, "convert_hf_to_gguf.py was killed by signal %d",
		    ex.signal);
	}
	if (rename(tmp, out) == -1) {
		int e = errno;
		unlink(tmp);
		return host->fail(job, "rename %s to %s: %s", tmp, out, strerror(e));
	}
	return PL_OK;
}

static int
convert_run(pl_job *job)
{
	const char *in = host->input(job, "input");
	const char *outk = host->get(job, "output");
	const char *tool = host->get(job, "tool");
	const char *ots = host->get(job, "outtype");
	uint32_t outtype = outtype_of(ots);
	char out[PATH_MAX], digest[65] = "";
	double t0 = plc_mono_secs();

	if (in == NULL)
		return host->fail(job, "input: no checkpoint to convert");
	if (outtype == UINT32_MAX)
		return host->fail(job, "outtype \"%s\": use f16, bf16 or f32", ots);
	if (ots == NULL)
		ots = "f16";
	if (outk && *outk) {
		const char *o = host->input(job, "output");
		if (o == NULL)
			return host->fail(job, "output %s cannot be used", outk);
		snprintf(out, sizeof(out), "%s", o);
	} else
		snprintf(out, sizeof(out), "%s/model-%s.gguf", host->workdir(job),
		    outtype == GGML_F16 ? "f16" : outtype == GGML_BF16 ? "bf16" : "f32");

	cJSON *v = cJSON_CreateObject();
	cJSON_AddStringToObject(v, "input", in);
	cJSON_AddStringToObject(v, "output", out);
	cJSON_AddStringToObject(v, "outtype", outtype == GGML_F16 ? "f16" :
	    outtype == GGML_BF16 ? "bf16" : "f32");
	if (tool && strcmp(tool, "llama.cpp") == 0) {
		int rc = run_llama_cpp(job, in, out, ots);
		if (rc != PL_OK) {
			cJSON_Delete(v);
			return rc;
		}
		cJSON_AddStringToObject(v, "tool", "llama.cpp");
	} else {
		struct plc_jobcb c = { .host = host, .job = job };
		struct gguf_copts o = { .outtype = outtype, .log = plc_jobcb_log,
			.progress = plc_jobcb_progress, .cancelled = plc_jobcb_cancelled, .arg = &c };
		struct gguf_cstats st;
		char err[1024];
		host->log(job, PL_LOG_INFO, "converting %s to %s", in, out);
		if (gguf_convert_gemma3(in, out, &o, &st, err, sizeof(err)) == -1) {
			cJSON_Delete(v);
			if (host->cancelled(job))
				return PL_ECANCELED;
			return host->fail(job, "%s", err);
		}
		host->log(job, PL_LOG_INFO, "%s: %" PRIu64 " tensors written (%" PRIu64
		    " multimodal skipped), %" PRIu64 " layers, %" PRIu64 " tokens, bos %" PRId64
		    " eos %" PRId64, st.arch, st.n_tensors, st.n_skipped, st.n_layer,
		    st.n_vocab, st.bos, st.eos);
		cJSON_AddStringToObject(v, "tool", "native");
		cJSON_AddStringToObject(v, "source_architecture", st.arch);
		cJSON_AddNumberToObject(v, "skipped", (double)st.n_skipped);
		snprintf(digest, sizeof(digest), "%s", st.sha256);
	}
	int rc = check_output(job, out, v);
	if (rc != PL_OK) {
		unlink(out);
		cJSON_Delete(v);
		return rc;
	}
	double secs = plc_mono_secs() - t0;
	cJSON_AddNumberToObject(v, "seconds", secs);
	host->log(job, PL_LOG_INFO, "wrote %s in %.2fs", out, secs);
	char *txt = cJSON_PrintUnformatted(v);
	cJSON_Delete(v);
	if (txt) {
		host->value_set(job, "convert", txt);
		free(txt);
	}
	/* The native converter hashed the file as it wrote it. */
	if (digest[0])
		rc = host->artifact_digest(job, "gguf", out, digest);
	else
		rc = host->artifact(job, "gguf", out);
	if (rc != PL_OK)
		return host->fail(job, "registering %s: %s", out, host->strerror(rc));
	return PL_OK;
}

static const struct pl_stage convert_stage = PL_STAGE(
	.name = "convert",
	.summary = "Gemma 3 checkpoint to GGUF (f16, bf16, f32), natively",
	.flags = PL_STAGE_REUSE,
	.keys = convert_keys,
	.check = convert_check,
	.run = convert_run);

PL_PLUGIN(&host, &convert_stage)
