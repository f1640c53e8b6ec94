/*
 * quantize.c: the quantize stage. A F16/BF16/F32 GGUF (convert's "gguf")
 * to Q8_0, natively (gguf_quant.c: byte for byte what llama-quantize
 * writes from the same input, threaded over row chunks of every tensor),
 * or by running llama-quantize itself (tool = llama-quantize).
 *
 * Either way the output is checked before it is registered: it must parse
 * as GGUF, hold every tensor of the input, and have the type the Q8_0 rules
 * give each one (a quantize can succeed and still write a file that will
 * not load). Artifact: "gguf". Value: "quantize", a JSON summary.
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

static const struct pl_key quantize_keys[] = {
	PL_KEY_INPUT(.name = "input", .artifact = "gguf",
	    .help = "the F16, BF16 or F32 GGUF to quantize"),
	PL_KEY_PATH(.name = "output",
	    .help = "the Q8_0 GGUF to write (default: model-q8_0.gguf in the work directory)"),
	PL_KEY_STRING(.name = "type", .def = "Q8_0",
	    .help = "the target type; natively only Q8_0"),
	PL_KEY_INT(.name = "threads", .def = "0", .flags = PL_KEY_MIN | PL_KEY_VOLATILE, .min = 0,
	    .help = "worker threads (0: one per CPU)"),
	PL_KEY_STRING(.name = "tool", .def = "native",
	    .help = "native, or llama-quantize to run llama.cpp's quantizer"),
	PL_KEY_STRING(.name = "llama_quantize", .def = "llama-quantize",
	    .help = "the llama-quantize program (tool = llama-quantize), a path or a name in "
	    "PATH"),
	PL_KEY_END
};


static int
quantize_check(pl_job *job)
{
	const char *tool = host->get(job, "tool");
	const char *type = host->get(job, "type");
	int native = tool == NULL || strcmp(tool, "native") == 0;
	if (tool && !native && strcmp(tool, "llama-quantize") != 0)
		host->check_error(job, "tool", "\"%s\": use native or llama-quantize", tool);
	if (native && type && strcasecmp(type, "Q8_0") != 0)
		host->check_error(job, "type", "\"%s\": the native quantizer writes Q8_0 only "
		    "(tool = llama-quantize for other types)", type);
	return PL_OK;
}

/* The output must parse and have, tensor for tensor, the type the Q8_0
 * rules give the input's (for llama-quantize too: it is how a
 * half-written or mis-typed file is caught before anyone serves it). */
static int
check_output(pl_job *job, const char *in, const char *out, int q8)
{
	struct gguf gi, go;
	int rc = PL_OK;
	if (gguf_open(&gi, in) == -1)
		return host->fail(job, "%s", gi.err);
	if (gguf_open(&go, out) == -1) {
		gguf_close(&gi);
		return host->fail(job, "the quantized file does not parse: %s", go.err);
	}
	if (go.n_tensors != gi.n_tensors) {
		rc = host->fail(job, "%s has %" PRIu64 " tensors, %s has %" PRIu64, out,
		    go.n_tensors, in, gi.n_tensors);
		goto out;
	}
	for (uint64_t i = 0; i < gi.n_tensors && q8; i++) {
		const struct gguf_tensor *t = &gi.t[i];
		int64_t j = gguf_find_tensor(&go, t->name);
		if (j < 0) {
			rc = host->fail(job, "%s: tensor %s is missing", out, t->name);
			goto out;
		}
		uint32_t want = gguf_q8_0_target(t);
		if (go.t[j].type != want) {
			rc = host->fail(job, "%s: tensor %s is %s, expected %s", out, t->name,
			    gguf_type_name(go.t[j].type), gguf_type_name(want));
			goto out;
		}
		for (int d = 0; d < GGUF_MAX_DIMS; d++)
			if (go.t[j].ne[d] != t->ne[d]) {
				rc = host->fail(job, "%s: tensor %s changed shape", out, t->name);
				goto out;
			}
	}
	uint64_t ft;
	if (q8 && (gguf_get_uint(&go, "general.file_type", &ft) == -1 ||
	    ft != LLAMA_FTYPE_MOSTLY_Q8_0))
		rc = host->fail(job, "%s: general.file_type is not 7 (MOSTLY_Q8_0)", out);
out:
	gguf_close(&gi);
	gguf_close(&go);
	return rc;
}

static int
run_llama_quantize(pl_job *job, const char *in, const char *out, const char *type,
    int64_t threads)
{
	const char *bin = host->get(job, "llama_quantize");
	char tmp[PATH_MAX + 64], nth[32];
	snprintf(tmp, sizeof(tmp), "%s.llama-quantize.tmp", out);
	snprintf(nth, sizeof(nth), "%" PRId64, threads);
	const char *argv[] = { bin ? bin : "llama-quantize", in, tmp, type,
		threads > 0 ? nth : NULL, NULL };
	struct pl_spawn sp = { .abi = PL_ABI_VERSION, .size = sizeof(sp),
		.name = "llama-quantize", .argv = argv };
	struct pl_exit ex = PL_EXIT_INIT;
	unlink(tmp);
	host->log(job, PL_LOG_INFO, "running %s %s %s %s", argv[0], in, tmp, type);
	int rc = host->spawn(job, &sp, &ex);
	if (rc != PL_OK) {
		unlink(tmp);
		return host->fail(job, "llama-quantize could not be run: %s", host->strerror(rc));
	}
	if (!ex.exited || ex.status != 0) {
		unlink(tmp);
		if (ex.exited)
			return host->fail(job, "llama-quantize exited with status %d%s%s",
			    ex.status, ex.error[0] ? ": " : "", ex.error);
		return host->fail(job, "llama-quantize was killed by signal %d", ex.signal);
	}
	/* llama-quantize writes in place; ours appears only when checked. */
	rc = check_output(job, in, tmp, strcasecmp(type, "Q8_0") == 0);
	if (rc != PL_OK) {
		unlink(tmp);
		return rc;
	}
	if (rename(tmp, out) == -1) {
		int e = errno;
		unlink(tmp);
		return host->fail(job, "rename %s to %s: %s", tmp, out, strerror(e));
	}
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", out);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	plc_fsync_dir(slash ? dir : ".");
	return PL_OK;
}

static int
quantize_run(pl_job *job)
{
	const char *in = host->input(job, "input");
	const char *outk = host->get(job, "output");
	const char *tool = host->get(job, "tool");
	const char *type = host->get(job, "type");
	int64_t threads = host->get_int(job, "threads", 0);
	char out[PATH_MAX];
	double t0 = plc_mono_secs();

	if (in == NULL)
		return host->fail(job, "input: no GGUF to quantize");
	if (outk && *outk) {
		const char *o = host->input(job, "output");
		if (o == NULL)
			return host->fail(job, "output %s cannot be used", outk);
		snprintf(out, sizeof(out), "%s", o);
	} else
		snprintf(out, sizeof(out), "%s/model-q8_0.gguf", host->workdir(job));
	if (strcmp(in, out) == 0)
		return host->fail(job, "output %s is the input", out);

	cJSON *v = cJSON_CreateObject();
	cJSON_AddStringToObject(v, "input", in);
	cJSON_AddStringToObject(v, "output", out);
	cJSON_AddStringToObject(v, "type", type ? type : "Q8_0");
	if (tool && strcmp(tool, "llama-quantize") == 0) {
		int rc = run_llama_quantize(job, in, out, type ? type : "Q8_0", threads);
		if (rc != PL_OK) {
			cJSON_Delete(v);
			return rc;
		}
		cJSON_AddStringToObject(v, "tool", "llama-quantize");
	} else {
		struct plc_jobcb c = { .host = host, .job = job };
		struct gguf_qopts o = { .threads = (int)threads, .progress = plc_jobcb_progress,
			.cancelled = plc_jobcb_cancelled, .arg = &c };
		struct gguf_qstats st;
		char err[1024];
		host->log(job, PL_LOG_INFO, "quantizing %s to Q8_0", in);
		if (gguf_quantize_q8_0_file(in, out, &o, &st, err, sizeof(err)) == -1) {
			cJSON_Delete(v);
			if (host->cancelled(job))
				return PL_ECANCELED;
			return host->fail(job, "%s", err);
		}
		int rc = check_output(job, in, out, 1);
		if (rc != PL_OK) {
			unlink(out);
			cJSON_Delete(v);
			return rc;
		}
		host->log(job, PL_LOG_INFO, "%" PRIu64 " tensors: %" PRIu64 " to Q8_0, %" PRIu64
		    " copied unchanged (norms and other 1-D tensors), %" PRIu64 " to F16 "
		    "(ne[0] not a multiple of 32); %d threads", st.n_tensors, st.n_quantized,
		    st.n_copied, st.n_fallback, st.threads);
		cJSON_AddStringToObject(v, "tool", "native");
		cJSON_AddNumberToObject(v, "tensors", (double)st.n_tensors);
		cJSON_AddNumberToObject(v, "quantized", (double)st.n_quantized);
		cJSON_AddNumberToObject(v, "copied", (double)st.n_copied);
		cJSON_AddNumberToObject(v, "fallback_f16", (double)st.n_fallback);
		cJSON_AddNumberToObject(v, "threads", st.threads);
	}
	double secs = plc_mono_secs() - t0;
	cJSON_AddNumberToObject(v, "seconds", secs);
	host->log(job, PL_LOG_INFO, "wrote %s in %.2fs", out, secs);
	char *txt = cJSON_PrintUnformatted(v);
	cJSON_Delete(v);
	if (txt) {
		host->value_set(job, "quantize", txt);
		free(txt);
	}
	int rc = host->artifact(job, "gguf", out);
	if (rc != PL_OK)
		return host->fail(job, "registering %s: %s", out, host->strerror(rc));
	return PL_OK;
}

static const struct pl_stage quantize_stage = PL_STAGE(
	.name = "quantize",
	.summary = "GGUF F16/BF16/F32 to Q8_0, identical to llama-quantize",
	.flags = PL_STAGE_REUSE,
	.keys = quantize_keys,
	.check = quantize_check,
	.run = quantize_run);

PL_PLUGIN(&host, &quantize_stage)
