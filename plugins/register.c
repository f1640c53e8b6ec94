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
 * digest and the manifest digest. Last it checks that the template that
 * serves is the template that trained (template_check()).
 */
#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
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
	PL_KEY_INPUT(.name = "gguf", .artifact = "gguf", .help = "the Q8_0 GGUF to register"),
	PL_KEY_STRING(.name = "tag", .flags = PL_KEY_REQUIRED,
	    .help = "the Ollama tag to create, e.g. router:v18"),
	PL_KEY_PATH(.name = "modelfile", .flags = PL_KEY_REQUIRED | PL_KEY_FILE,
	    .help = "the Modelfile template (TEMPLATE, PARAMETER, SYSTEM; FROM is replaced)"),
	PL_KEY_INT(.name = "num_ctx", .def = "9216", .help = "PARAMETER num_ctx of the tag"),
	PL_KEY_STRING(.name = "previous_tag",
	    .help = "the previous version's tag: its weights must differ from these"),
	PL_KEY_STRING(.name = "url", .help = "Ollama base URL"),
	PL_KEY_DURATION(.name = "upload_timeout", .def = "1h",
	    .help = "limit of the blob upload"),
	PL_KEY_INPUT(.name = "tokens", .artifact = "tokens",
	    .help = "tokenize's tokens.npz, whose prompt lengths the served template must "
	    "reproduce; none: no check"),
	PL_KEY_INPUT(.name = "corpus", .artifact = "corpus",
	    .help = "the corpus those tokens were made from (default: the tokenize job's)"),
	PL_KEY_INT(.name = "template_examples", .def = "4",
	    .help = "training examples rendered through the tag: the longest prompt and "
	    "evenly spaced others"),
	PL_KEY_END
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
			errno = 0;
			long long x = strtoll(val, &end, 10);
			if (*val == '\0' || *end != '\0') {
				snprintf(err, errlen, "%s:%d: PARAMETER %s: \"%s\" is not an integer",
				    path, lineno, key, val);
				return -1;
			}
			/* JSON numbers travel as doubles: past 2^53 the value
			 * sent would not be the value written. */
			if (errno == ERANGE || x > (1LL << 53) || x < -(1LL << 53)) {
				snprintf(err, errlen, "%s:%d: PARAMETER %s: %s is out of range",
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
			/* strtod takes "nan" and "inf", which JSON cannot carry. */
			if (*val == '\0' || *end != '\0' || !isfinite(x)) {
				snprintf(err, errlen, "%s:%d: PARAMETER %s: \"%s\" is not a finite number",
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

/* The messages of the corpus example KEY without its last (the answer),
 * as a JSON array; NULL with err set when it is not there. */
static cJSON *
corpus_prompt(const char *path, const char *key, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0;
	cJSON *out = NULL;

	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	while (out == NULL && getline(&line, &cap, f) != -1) {
		lineno++;
		if (strstr(line, key) == NULL)
			continue;
		cJSON *j = cJSON_Parse(line);
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "key");
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "messages");
		if (cJSON_IsString(k) && strcmp(k->valuestring, key) == 0) {
			if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) < 2)
				snprintf(err, errlen, "%s:%d: example %s has no messages to "
				    "render", path, lineno, key);
			else {
				out = cJSON_Duplicate(m, 1);
				cJSON_DeleteItemFromArray(out, cJSON_GetArraySize(out) - 1);
			}
			cJSON_Delete(j);
			break;
		}
		cJSON_Delete(j);
	}
	free(line);
	fclose(f);
	if (out == NULL && err[0] == '\0')
		snprintf(err, errlen, "%s: no example with key %s (is it the corpus the "
		    "tokens were made from?)", path, key);
	return out;
}

/*
 * The template that trained must be the template that serves: a training
 * example's prompt (its messages but the answer) sent to the tag's
 * /api/chat must be counted as the tokens tokenize counted for it
 * (prompt_len of tokens.npz, rendered with the base's chat template and
 * add_generation_prompt), BOS included on both sides. The longest prompt
 * and evenly spaced others are checked. A TEMPLATE that renders the system
 * prompt as a user turn of its own where training folded it into the
 * first user turn counts more tokens: the skew that took a release from
 * 19/20 to 7/20. The model is unloaded again afterwards.
 */
/* tokens = no (or off, false, 0) would be read as a path named "no": the
 * word that skips the served template's check is none. */
static int
register_check(pl_job *job)
{
	static const char *const words[] = { "no", "off", "false", "0", "skip", NULL };
	const char *tv = host->get(job, "tokens");
	for (int i = 0; tv != NULL && words[i]; i++)
		if (strcmp(tv, words[i]) == 0)
			host->check_error(job, "tokens", "\"%s\" would be read as a path; to skip "
			    "the served template's check write tokens = none", tv);
	return PL_OK;
}

/* The tokens and corpus of the template check, resolved before anything is
 * uploaded; *tpath NULL with tokens = none. */
static int
template_inputs(pl_job *job, const char **tpath, const char **cpath)
{
	const char *tv = host->get(job, "tokens");

	*tpath = *cpath = NULL;
	if (tv != NULL && strcmp(tv, "none") == 0) {
		host->log(job, PL_LOG_INFO, "tokens = none: the served template is not "
		    "checked against training");
		return PL_OK;
	}
	if ((*tpath = host->input(job, "tokens")) == NULL)
		return host->fail(job, "tokens: no tokenize tokens.npz to check the served "
		    "template against; set tokens = PATH (and corpus = PATH), or tokens = none");
	if ((*cpath = host->input(job, "corpus")) == NULL)
		return host->fail(job, "corpus: the corpus of %s is unknown; set corpus = PATH",
		    *tpath);
	return PL_OK;
}

static int
template_check(pl_job *job, struct ollama *o, const char *tag, const char *mfpath,
    int64_t num_ctx, const char *tpath, const char *cpath)
{
	struct npz_array keys, plen;
	char err[1024] = "", key[256];
	int64_t want = host->get_int(job, "template_examples", 0);
	size_t pick[64], npick = 0, longest = 0;
	int rc = PL_EFAIL, loaded = 0;

	if (tpath == NULL)
		return PL_OK;
	if (npz_read(tpath, "keys", &keys, err, sizeof(err)) == -1)
		return host->fail(job, "tokens: %s", err);
	if (npz_read(tpath, "prompt_len", &plen, err, sizeof(err)) == -1) {
		npz_free(&keys);
		return host->fail(job, "tokens: %s", err);
	}
	if (keys.n == 0 || keys.n != plen.n || strcmp(plen.descr, "<i4") != 0 ||
	    strncmp(keys.descr, "<U", 2) != 0) {
		rc = host->fail(job, "tokens: %s: keys (%zu, %s) and prompt_len (%zu, %s) do "
		    "not match", tpath, keys.n, keys.descr, plen.n, plen.descr);
		goto out;
	}
	if (want < 1)
		want = 1;
	if (want > (int64_t)(sizeof(pick) / sizeof(pick[0])))
		want = sizeof(pick) / sizeof(pick[0]);
	for (size_t i = 1; i < plen.n; i++)
		if (npz_int(&plen, i) > npz_int(&plen, longest))
			longest = i;
	pick[npick++] = longest;
	for (int64_t k = 0; k < want - 1 && (size_t)npick < plen.n; k++) {
		size_t i = (size_t)(k * (int64_t)plen.n / (want - 1 > 0 ? want - 1 : 1));
		int dup = 0;
		for (size_t q = 0; q < npick; q++)
			dup |= pick[q] == i;
		if (!dup && i < plen.n)
			pick[npick++] = i;
	}
	for (size_t q = 0; q < npick; q++) {
		size_t i = pick[q];
		int32_t trained = npz_int(&plen, i);
		if (npz_str(&keys, i, key, sizeof(key)) == -1) {
			rc = host->fail(job, "tokens: %s: key %zu is too long", tpath, i);
			goto out;
		}
		err[0] = '\0';
		cJSON *msgs = corpus_prompt(cpath, key, err, sizeof(err));
		if (msgs == NULL) {
			rc = host->fail(job, "corpus: %s", err);
			goto out;
		}
		cJSON *req = cJSON_CreateObject(), *opt;
		cJSON_AddStringToObject(req, "model", tag);
		cJSON_AddItemToObject(req, "messages", msgs);
		cJSON_AddBoolToObject(req, "stream", 0);
		cJSON_AddBoolToObject(req, "truncate", 0);
		opt = cJSON_AddObjectToObject(req, "options");
		cJSON_AddNumberToObject(opt, "num_ctx", (double)num_ctx);
		cJSON_AddNumberToObject(opt, "num_predict", 1);
		cJSON_AddNumberToObject(opt, "temperature", 0);
		char *body = cJSON_PrintUnformatted(req);
		cJSON_Delete(req);
		cJSON *ans = ollama_request(o, "POST", "/api/chat", body);
		free(body);
		loaded = 1;
		if (ans == NULL) {
			rc = host->fail(job, "template check: example %s through %s: %s", key, tag,
			    o->error);
			goto out;
		}
		const cJSON *pe = cJSON_GetObjectItemCaseSensitive(ans, "prompt_eval_count");
		long served = cJSON_IsNumber(pe) ? (long)pe->valuedouble : -1;
		cJSON_Delete(ans);
		if (served != trained) {
			rc = host->fail(job, "%s renders training example %s as %ld prompt tokens, "
			    "tokenize counted %d (%s): the template that serves (TEMPLATE of %s) "
			    "is not the template that trained", tag, key, served, trained, tpath,
			    mfpath);
			goto out;
		}
		host->log(job, PL_LOG_INFO, "template check: example %s%s: %d prompt tokens "
		    "served and trained", key, i == longest ? " (the longest)" : "", trained);
	}
	host->value_set(job, "register.template_checked", "yes");
	rc = PL_OK;
out:
	/* Unloaded whatever the outcome: a runner left loaded serves every tag
	 * of the same weights blob under this tag's name in /api/ps. */
	if (loaded && ollama_unload_wait(o, tag, 60, 0.25) == -1)
		host->log(job, PL_LOG_WARN, "unloading %s after the template check: %s", tag,
		    o->error);
	npz_free(&keys);
	npz_free(&plen);
	return rc;
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
	int64_t num_ctx = host->get_int(job, "num_ctx", 0);
	const char *tpath, *cpath;
	int uploaded, rc = PL_EFAIL;
	cJSON *req;

	memset(&sh, 0, sizeof(sh));
	if ((gguf = host->input(job, "gguf")) == NULL)
		return host->fail(job, "gguf: no GGUF to register");
	if (mfpath == NULL || modelfile_load(mfpath, &mf, err, sizeof(err)) == -1)
		return host->fail(job, "modelfile: %s", mfpath ? err : "cannot resolve the path");
	if ((rc = template_inputs(job, &tpath, &cpath)) != PL_OK) {
		modelfile_free(&mf);
		return rc;
	}
	rc = PL_EFAIL;
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

	o.timeout = host->get_duration(job, "upload_timeout", 0);
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
	o.timeout = host->get_duration(job, "upload_timeout", 0);
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
	if ((rc = template_check(job, &o, tag, mfpath, num_ctx, tpath, cpath)) != PL_OK)
		goto out;
	rc = PL_EFAIL;
	host->log(job, PL_LOG_INFO, "registered %s: uploaded sha256:%.12s, weights "
	    "sha256:%.12s, manifest %.12s%s", tag, sha, sh.weights, manifest,
	    old_w[0] && strcmp(old_w, sh.weights) != 0 ? " (replaced older weights)" : "");
	rc = PL_OK;
out:
	ollama_show_free(&sh);
	modelfile_free(&mf);
	return rc;
}

static const struct pl_stage register_stage = PL_STAGE(
	.name = "register",
	.summary = "create the Ollama tag from the GGUF and prove what it serves",
	.keys = register_keys,
	.check = register_check,
	.run = register_run);

PL_PLUGIN(&host, &register_stage)
