/*
 * register.c: the `register` stage. Creates the model in Ollama from the
 * Q8_0 GGUF: uploads the blob (HEAD first), creates the tag with the
 * template, stop tokens and parameters of a Modelfile template
 * (etc/Modelfile.tmpl) and num_ctx, after unloading the tag if it is
 * loaded (a loaded tag keeps serving the old weights, HACKING.md:
 * Ollama). Then it reads back what the server serves and fails if the
 * weights are the previous version's (a sed once built v3's tag from v2's
 * GGUF: G24) or if the server chose another template than the one given
 * (HACKING.md: Ollama). It records the uploaded sha256, the weights layer
 * digest and the manifest digest.
 */
#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "plcommon.h"
#include "ollama.h"
#include "ollama_admin.h"

static const struct pl_host *host;

static const struct pl_key register_keys[] = {
	{ "gguf", PL_KEY_INPUT, NULL, 0, "gguf", "the Q8_0 GGUF to register" },
	{ "tag", PL_KEY_STRING, NULL, PL_KEY_REQUIRED, NULL,
	  "the Ollama tag to create, e.g. router:v18" },
	{ "modelfile", PL_KEY_PATH, NULL, PL_KEY_REQUIRED | PL_KEY_FILE, NULL,
	  "the Modelfile template (TEMPLATE, PARAMETER, SYSTEM; FROM is replaced)" },
	{ "num_ctx", PL_KEY_INT, "9216", 0, NULL, "PARAMETER num_ctx of the tag" },
	{ "previous_tag", PL_KEY_STRING, NULL, 0, NULL,
	  "the previous version's tag: its weights must differ from these" },
	{ "url", PL_KEY_STRING, NULL, 0, NULL, "Ollama base URL" },
	{ "upload_timeout", PL_KEY_DURATION, "1h", 0, NULL, "limit of the blob upload" },
	{ NULL, 0, NULL, 0, NULL, NULL }
};

/* What a Modelfile template gives the create request. */
struct modelfile {
	char *template;
	char *system;
	cJSON *params;		/* object; "stop" is an array */
};

static void
modelfile_free(struct modelfile *m)
{
	free(m->template);
	free(m->system);
	cJSON_Delete(m->params);
}

/* The value of TEMPLATE/SYSTEM: """multi-line""" or the rest of the line. */
static char *
mf_value(const char **pp, const char *path, int *lineno, char *err, size_t errlen)
{
	const char *p = *pp, *end;
	char *v;

	while (*p == ' ' || *p == '\t')
		p++;
	if (strncmp(p, "\"\"\"", 3) == 0) {
		p += 3;
		if ((end = strstr(p, "\"\"\"")) == NULL) {
			snprintf(err, errlen, "%s:%d: unterminated \"\"\"", path, *lineno);
			return NULL;
		}
		for (const char *q = p; q < end; q++)
			if (*q == '\n')
				(*lineno)++;
		v = strndup(p, end - p);
		*pp = end + 3;
	} else {
		end = strchr(p, '\n');
		if (end == NULL)
			end = p + strlen(p);
		v = strndup(p, end - p);
		*pp = end;
	}
	return v;
}

/*
 * Parameter values are typed as Ollama types them: a wrong type is
 * not refused at create time, only at the first request (HTTP 500), so it
 * is refused here.
 */
static int
mf_param(cJSON *params, const char *key, const char *val, const char *path, int lineno,
    char *err, size_t errlen)
{
	static const char *const ints[] = { "num_ctx", "top_k", "seed", "num_predict",
	    "repeat_last_n", "num_keep", "num_batch", "num_gpu", "num_thread", NULL };
	static const char *const floats[] = { "temperature", "top_p", "min_p", "typical_p",
	    "repeat_penalty", "presence_penalty", "frequency_penalty", NULL };
	char *end;

	if (strcmp(key, "stop") == 0) {
		cJSON *a = cJSON_GetObjectItemCaseSensitive(params, "stop");
		size_t n = strlen(val);
		if (a == NULL)
			a = cJSON_AddArrayToObject(params, "stop");
		/* PARAMETER stop "<end_of_turn>" or unquoted. */
		if (n >= 2 && val[0] == '"' && val[n - 1] == '"') {
			char *s = strndup(val + 1, n - 2);
			cJSON_AddItemToArray(a, cJSON_CreateString(s));
			free(s);
		} else
			cJSON_AddItemToArray(a, cJSON_CreateString(val));
		return 0;
	}
	for (int i = 0; ints[i]; i++)
		if (strcmp(key, ints[i]) == 0) {
			long long x = strtoll(val, &end, 10);
			if (*val == '\0' || *end != '\0') {
				snprintf(err, errlen, "%s:%d: PARAMETER %s: \"%s\" is not an integer",
				    path, lineno, key, val);
				return -1;
			}
			cJSON_DeleteItemFromObjectCaseSensitive(params, key);
			cJSON_AddNumberToObject(params, key, (double)x);
			return 0;
		}
	for (int i = 0; floats[i]; i++)
		if (strcmp(key, floats[i]) == 0) {
			double x = strtod(val, &end);
			if (*val == '\0' || *end != '\0') {
				snprintf(err, errlen, "%s:%d: PARAMETER %s: \"%s\" is not a number",
				    path, lineno, key, val);
				return -1;
			}
			cJSON_DeleteItemFromObjectCaseSensitive(params, key);
			cJSON_AddNumberToObject(params, key, x);
			return 0;
		}
	/* An unknown option is dropped by Ollama with only a log line:
	 * a typo such as num_context would silently do nothing. */
	snprintf(err, errlen, "%s:%d: PARAMETER %s: not an option this stage knows", path,
	    lineno, key);
	return -1;
}

static int
modelfile_load(const char *path, struct modelfile *m, char *err, size_t errlen)
{
	char *text = plc_read_file(path, NULL, 1 << 20);
	const char *p;
	int lineno = 1;

	memset(m, 0, sizeof(*m));
	if (text == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	m->params = cJSON_CreateObject();
	for (p = text; *p; ) {
		const char *eol;
		while (*p == ' ' || *p == '\t' || *p == '\r')
			p++;
		if (*p == '\n') {
			p++;
			lineno++;
			continue;
		}
		if (*p == '#' || strncasecmp(p, "FROM", 4) == 0) {
			/* FROM is the uploaded GGUF, whatever the template says. */
			eol = strchr(p, '\n');
			p = eol ? eol : p + strlen(p);
			continue;
		}
		if (strncasecmp(p, "TEMPLATE", 8) == 0 && isspace((unsigned char)p[8])) {
			p += 8;
			free(m->template);
			if ((m->template = mf_value(&p, path, &lineno, err, errlen)) == NULL)
				goto fail;
			continue;
		}
		if (strncasecmp(p, "SYSTEM", 6) == 0 && isspace((unsigned char)p[6])) {
			p += 6;
			free(m->system);
			if ((m->system = mf_value(&p, path, &lineno, err, errlen)) == NULL)
				goto fail;
			continue;
		}
		if (strncasecmp(p, "PARAMETER", 9) == 0 && isspace((unsigned char)p[9])) {
			char key[64], *val;
			int n = 0;
			p += 9;
			while (*p == ' ' || *p == '\t')
				p++;
			while (*p && !isspace((unsigned char)*p) && n < (int)sizeof(key) - 1)
				key[n++] = *p++;
			key[n] = '\0';
			eol = strchr(p, '\n');
			if (eol == NULL)
				eol = p + strlen(p);
			while (p < eol && (*p == ' ' || *p == '\t'))
				p++;
			size_t vl = eol - p;
			while (vl > 0 && isspace((unsigned char)p[vl - 1]))
				vl--;
			val = strndup(p, vl);
			int rc = mf_param(m->params, key, val, path, lineno, err, errlen);
			free(val);
			if (rc == -1)
				goto fail;
			p = eol;
			continue;
		}
		snprintf(err, errlen, "%s:%d: unknown instruction (FROM, TEMPLATE, SYSTEM, "
		    "PARAMETER)", path, lineno);
		goto fail;
	}
	free(text);
	if (m->template == NULL) {
		snprintf(err, errlen, "%s: no TEMPLATE: the server would choose one", path);
		modelfile_free(m);
		return -1;
	}
	return 0;
fail:
	free(text);
	modelfile_free(m);
	return -1;
}

/* Templates compare without trailing whitespace, which servers trim. */
static int
same_text(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	while (la > 0 && isspace((unsigned char)a[la - 1]))
		la--;
	while (lb > 0 && isspace((unsigned char)b[lb - 1]))
		lb--;
	return la == lb && memcmp(a, b, la) == 0;
}

/* Ollama >= 0.30 rewrites a text GGUF at create time, so its weights layer
 * digest may differ from the upload; older servers store it as is. */
static int
version_before_030(const char *v)
{
	int maj = 0, min = 0;

	if (sscanf(v, "%d.%d", &maj, &min) != 2)
		return 0;
	if (maj == 0 && min == 0)
		return 0;	/* a dev build: unknown */
	return maj == 0 && min < 30;
}

static int
register_run(pl_job *job)
{
	struct modelfile mf;
	struct ollama o;
	struct ollama_show sh;
	char err[1024], sha[65], version[64] = "", prev_w[80] = "", old_w[80] = "";
	char manifest[80], *reqtext;
	const char *gguf, *tag = host->get(job, "tag"), *prev = host->get(job, "previous_tag");
	const char *mfpath = host->input(job, "modelfile");
	int64_t num_ctx = host->get_int(job, "num_ctx", 9216);
	int uploaded, rc = PL_EFAIL;
	cJSON *req;

	memset(&sh, 0, sizeof(sh));
	if ((gguf = host->input(job, "gguf")) == NULL)
		return host->fail(job, "gguf: no GGUF to register");
	if (mfpath == NULL || modelfile_load(mfpath, &mf, err, sizeof(err)) == -1)
		return host->fail(job, "modelfile: %s", mfpath ? err : "cannot resolve the path");
	cJSON_DeleteItemFromObjectCaseSensitive(mf.params, "num_ctx");
	cJSON_AddNumberToObject(mf.params, "num_ctx", (double)num_ctx);

	host->log(job, PL_LOG_INFO, "hashing %s", gguf);
	if (plc_sha256_file(gguf, sha) == -1) {
		rc = host->fail(job, "gguf: %s: %s", gguf, strerror(errno));
		goto out;
	}
	if (ollama_init(&o, host->get(job, "url"), 300) == -1 ||
	    ollama_version(&o, version, sizeof(version)) == -1) {
		rc = host->fail(job, "ollama: %s", o.error);
		goto out;
	}

	/* The previous version's weights: named, or recorded by the previous
	 * run's register job. */
	if (prev != NULL && *prev) {
		if (ollama_show(&o, prev, &sh) == -1) {
			rc = host->fail(job, "previous_tag %s: %s", prev, o.error);
			goto out;
		}
		snprintf(prev_w, sizeof(prev_w), "%s", sh.weights);
		ollama_show_free(&sh);
	} else {
		const char *prun = host->run_get(job, "previous");
		char *v = prun ? host->value_get(job, prun, NULL, "register.weights") : NULL;
		if (v) {
			snprintf(prev_w, sizeof(prev_w), "%s", v);
			free(v);
		}
	}
	/* What the tag served before, if anything; then unload it, or its
	 * runner keeps serving the old weights after the create (G24). */
	if (ollama_show(&o, tag, &sh) == 0) {
		snprintf(old_w, sizeof(old_w), "%s", sh.weights);
		ollama_show_free(&sh);
		host->log(job, PL_LOG_INFO, "%s exists (weights %.12s); unloading it first", tag,
		    old_w);
		if (ollama_unload_wait(&o, tag, 60, 0.25) == -1) {
			rc = host->fail(job, "unloading %s: %s", tag, o.error);
			goto out;
		}
	}

	o.timeout = host->get_duration(job, "upload_timeout", 3600);
	if (ollama_blob_push(&o, gguf, sha, &uploaded) == -1) {
		rc = host->fail(job, "upload: %s", o.error);
		goto out;
	}
	o.timeout = 300;
	host->log(job, PL_LOG_INFO, "blob sha256:%.12s %s", sha,
	    uploaded ? "uploaded" : "already on the server");

	req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "model", tag);
	char fname[512], gcopy[4096];
	snprintf(gcopy, sizeof(gcopy), "%s", gguf);
	snprintf(fname, sizeof(fname), "%s", basename(gcopy));
	char dig[80];
	snprintf(dig, sizeof(dig), "sha256:%s", sha);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(req, "files"), fname, dig);
	cJSON_AddStringToObject(req, "template", mf.template);
	if (mf.system)
		cJSON_AddStringToObject(req, "system", mf.system);
	cJSON_AddItemToObject(req, "parameters", cJSON_Duplicate(mf.params, 1));
	cJSON_AddBoolToObject(req, "stream", 0);
	reqtext = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	o.timeout = host->get_duration(job, "upload_timeout", 3600);
	int crc = ollama_create(&o, reqtext);
	o.timeout = 300;
	free(reqtext);
	if (crc == -1) {
		rc = host->fail(job, "create %s: %s", tag, o.error);
		goto out;
	}

	/* Read back what the server serves under the tag. */
	if (ollama_show(&o, tag, &sh) == -1) {
		rc = host->fail(job, "reading back %s: %s", tag, o.error);
		goto out;
	}
	if (ollama_manifest_digest(&o, tag, manifest, sizeof(manifest)) == -1) {
		rc = host->fail(job, "reading back %s: %s", tag, o.error);
		goto out;
	}
	host->value_set(job, "register.tag", tag);
	host->value_set(job, "register.uploaded", sha);
	host->value_set(job, "register.weights", sh.weights);
	host->value_set(job, "register.manifest", manifest);
	host->value_set(job, "register.server_version", version);
	if (prev_w[0] && strcmp(prev_w, sh.weights) == 0) {
		rc = host->fail(job, "%s serves weights sha256:%.12s, the previous version's "
		    "(%s): nothing identical is released", tag, sh.weights,
		    prev && *prev ? prev : "previous run");
		goto out;
	}
	if (version_before_030(version) && strcmp(sh.weights, sha) != 0) {
		rc = host->fail(job, "%s serves weights sha256:%.12s, not the uploaded "
		    "sha256:%.12s (Ollama %s stores GGUFs as uploaded)", tag, sh.weights, sha,
		    version);
		goto out;
	}
	if (!same_text(sh.template, mf.template)) {
		rc = host->fail(job, "%s: the server chose a template other than the one in %s "
		    "(Ollama >= 0.30 may prefer the GGUF's own; set OLLAMA_GO_TEMPLATE on the "
		    "server)", tag, mfpath);
		goto out;
	}
	if (sh.context_length > 0 && sh.context_length < num_ctx)
		host->log(job, PL_LOG_WARN, "num_ctx %lld exceeds the model's trained context "
		    "%ld: the server caps it", (long long)num_ctx, sh.context_length);
	host->log(job, PL_LOG_INFO, "registered %s: uploaded sha256:%.12s, weights "
	    "sha256:%.12s, manifest %.12s%s", tag, sha, sh.weights, manifest,
	    old_w[0] && strcmp(old_w, sh.weights) != 0 ? " (replaced older weights)" : "");
	rc = PL_OK;
out:
	ollama_show_free(&sh);
	modelfile_free(&mf);
	return rc;
}

static const struct pl_stage register_stage = {
	.abi = PL_ABI_VERSION,
	.size = sizeof(struct pl_stage),
	.key_size = sizeof(struct pl_key),
	.name = "register",
	.summary = "create the Ollama tag from the GGUF and prove what it serves",
	.keys = register_keys,
	.check = NULL,
	.run = register_run,
};

PL_EXPORT int pl_plugin_init(const struct pl_host *h, void *plugin);

PL_EXPORT int
pl_plugin_init(const struct pl_host *h, void *plugin)
{
	if (h->abi != PL_ABI_VERSION)
		return PL_EABI;
	host = h;
	return h->register_stage(plugin, &register_stage);
}
