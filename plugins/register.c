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
 * digest and the manifest digest. It reads the server's version and names
 * the profile it matched (ollama.h: ollama_profile). On Ollama 0.30 and
 * later it finds out which template the server applies to the tag, the
 * Modelfile TEMPLATE or the GGUF's own tokenizer.chat_template
 * (template_served()), and when it is the GGUF's, mends it (template_fix:
 * the chat template taken out of a copy of the GGUF, which is registered
 * instead) or fails. Last it checks that the template that serves is the
 * template that trained (template_check()).
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
#include "plio.h"
#include "gguf.h"
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
	PL_KEY_STRING(.name = "url", .flags = PL_KEY_VOLATILE, .help = "Ollama base URL"),
	PL_KEY_DURATION(.name = "upload_timeout", .def = "1h", .flags = PL_KEY_VOLATILE,
	    .help = "limit of the blob upload"),
	PL_KEY_INPUT(.name = "tokens", .artifact = "tokens",
	    .help = "tokenize's tokens.npz, whose prompt lengths the served template must "
	    "reproduce; none: no check"),
	PL_KEY_INPUT(.name = "corpus", .artifact = "corpus",
	    .help = "the corpus those tokens were made from (default: the tokenize job's)"),
	PL_KEY_INT(.name = "template_examples", .def = "4",
	    .help = "training examples rendered through the tag: the longest prompt and "
	    "evenly spaced others"),
	PL_KEY_STRING(.name = "template_fix", .def = "gguf",
	    .help = "when Ollama >= 0.30 serves the GGUF's own chat template instead of the "
	    "Modelfile TEMPLATE: gguf (register a copy of the GGUF without it) or "
	    "none (fail)"),
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

/* The messages of the corpus example KEY without its last (the answer),
 * as a JSON array; NULL with err set when it is not there. */
static cJSON *
corpus_prompt(const char *path, const char *key, char *err, size_t errlen)
{
	FILE *f = plc_fopen_in(path);
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0;
	cJSON *out = NULL;

	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, plc_open_strerror(errno));
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

/* The create request of tag: the blob digest under the GGUF's file name,
 * the template given, the Modelfile's SYSTEM and parameters. */
static char *
create_request(const char *tag, const char *gguf, const char *sha, const char *tmpl,
    const struct modelfile *mf)
{
	char fname[512], gcopy[4096], dig[80];
	cJSON *req = cJSON_CreateObject();
	char *text;

	cJSON_AddStringToObject(req, "model", tag);
	snprintf(gcopy, sizeof(gcopy), "%s", gguf);
	snprintf(fname, sizeof(fname), "%s", basename(gcopy));
	snprintf(dig, sizeof(dig), "sha256:%s", sha);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(req, "files"), fname, dig);
	cJSON_AddStringToObject(req, "template", tmpl);
	if (mf->system)
		cJSON_AddStringToObject(req, "system", mf->system);
	cJSON_AddItemToObject(req, "parameters", cJSON_Duplicate(mf->params, 1));
	cJSON_AddBoolToObject(req, "stream", 0);
	text = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	return text;
}

/* Which template the server applies to a tag. */
enum served_template { SERVED_MODELFILE, SERVED_GGUF, SERVED_OTHER };

/*
 * Ollama 0.30 and later serve the GGUF's own tokenizer.chat_template
 * (rendered by llama-server's Jinja) instead of the Modelfile TEMPLATE
 * when the Jinja one has more capabilities (tools, thinking) and
 * OLLAMA_GO_TEMPLATE is not set on the server (server/images.go:
 * shouldPreferChatTemplate). /api/show's template is the one the chat
 * path selected (server/routes.go: selectedModelTemplate, the same
 * choice), so the shown template is compared with both: the Modelfile's,
 * and the GGUF's own, read from the file.
 */
static int
template_served(pl_job *job, const char *gguf, const char *shown, const char *mftmpl,
    enum served_template *out)
{
	struct gguf g;
	const char *ct;
	size_t len;

	if (same_text(shown, mftmpl)) {
		*out = SERVED_MODELFILE;
		return PL_OK;
	}
	*out = SERVED_OTHER;
	if (gguf_open(&g, gguf) == -1)
		return host->fail(job, "gguf: %s", g.err);
	if (gguf_get_str(&g, "tokenizer.chat_template", &ct, &len) == 0) {
		char *t = strndup(ct, len);
		if (t != NULL && same_text(shown, t))
			*out = SERVED_GGUF;
		free(t);
	}
	gguf_close(&g);
	return PL_OK;
}

/*
 * The fix of a tag that serves the GGUF's chat template: a copy of the GGUF
 * without tokenizer.chat_template (and its named variants) in the job's
 * directory, so that the server has only the Modelfile TEMPLATE to serve.
 * *path receives the copy; its sha256 goes to sha.
 */
static int
template_mend(pl_job *job, const char *gguf, char *path, size_t pathlen, char *sha)
{
	static const char *const drop[] = { "tokenizer.chat_template", NULL };
	char err[1024], gcopy[4096];
	int dropped;

	snprintf(gcopy, sizeof(gcopy), "%s", gguf);
	snprintf(path, pathlen, "%s/%s", host->workdir(job), basename(gcopy));
	if (strcmp(path, gguf) == 0)
		return host->fail(job, "template fix: %s is in the job's own directory", gguf);
	if (gguf_copy_without(gguf, path, drop, &dropped, err, sizeof(err)) == -1)
		return host->fail(job, "template fix: %s", err);
	if (plc_sha256_file(path, sha) == -1)
		return host->fail(job, "template fix: %s: %s", path, strerror(errno));
	host->log(job, PL_LOG_INFO, "template fix: %s written without its %d "
	    "tokenizer.chat_template key%s (sha256:%.12s): the server then has only the "
	    "Modelfile TEMPLATE to serve", path, dropped, dropped == 1 ? "" : "s", sha);
	return PL_OK;
}

/* Upload the GGUF (unless the server has it), create the tag, and read back
 * what it serves and its manifest digest. */
static int
upload_create(pl_job *job, struct ollama *o, const char *tag, const char *gguf,
    const char *sha, const struct modelfile *mf, struct ollama_show *sh, char *manifest,
    size_t mlen)
{
	int uploaded, crc;
	char *reqtext;

	o->timeout = host->get_duration(job, "upload_timeout", 0);
	if (ollama_blob_push(o, gguf, sha, &uploaded) == -1) {
		o->timeout = 300;
		return host->fail(job, "upload: %s", o->error);
	}
	host->log(job, PL_LOG_INFO, "blob sha256:%.12s %s", sha,
	    uploaded ? "uploaded" : "already on the server");
	reqtext = create_request(tag, gguf, sha, mf->template, mf);
	crc = ollama_create(o, reqtext);
	o->timeout = 300;
	free(reqtext);
	if (crc == -1)
		return host->fail(job, "create %s: %s", tag, o->error);
	if (ollama_show(o, tag, sh) == -1 ||
	    ollama_manifest_digest(o, tag, manifest, mlen) == -1)
		return host->fail(job, "reading back %s: %s", tag, o->error);
	return PL_OK;
}

static int
register_run(pl_job *job)
{
	struct modelfile mf;
	struct ollama o;
	struct ollama_show sh;
	char err[1024], sha[65], version[64] = "", prev_w[80] = "", old_w[80] = "";
	char manifest[80];
	const char *gguf, *tag = host->get(job, "tag"), *prev = host->get(job, "previous_tag");
	const char *mfpath = host->input(job, "modelfile");
	int64_t num_ctx = host->get_int(job, "num_ctx", 0);
	const char *tpath, *cpath;
	enum ollama_profile profile;
	int tested, rc = PL_EFAIL;

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
	profile = ollama_profile(version, &tested);
	if (tested)
		host->log(job, PL_LOG_INFO, "Ollama %s at %s: profile %s, a tested version",
		    version, o.url, ollama_profile_name(profile));
	else
		host->log(job, PL_LOG_WARN, "Ollama %s at %s has not been tested with this "
		    "pipeline (tested: %s); using the profile %s", version, o.url, OLLAMA_TESTED,
		    ollama_profile_name(profile));

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

	if ((rc = upload_create(job, &o, tag, gguf, sha, &mf, &sh, manifest,
	    sizeof(manifest))) != PL_OK)
		goto out;
	rc = PL_EFAIL;
	if (prev_w[0] && strcmp(prev_w, sh.weights) == 0) {
		rc = host->fail(job, "%s serves weights sha256:%.12s, the previous version's "
		    "(%s): nothing identical is released", tag, sh.weights,
		    prev && *prev ? prev : "previous run");
		goto out;
	}
	if (profile == OLLAMA_PROFILE_CGO && strcmp(sh.weights, sha) != 0) {
		rc = host->fail(job, "%s serves weights sha256:%.12s, not the uploaded "
		    "sha256:%.12s (Ollama %s stores GGUFs as uploaded)", tag, sh.weights, sha,
		    version);
		goto out;
	}
	/* Which template serves: the Modelfile's, or (0.30 and later) the
	 * GGUF's own, which is then taken out of the GGUF or refused. */
	enum served_template served;
	if ((rc = template_served(job, gguf, sh.template, mf.template, &served)) != PL_OK)
		goto out;
	rc = PL_EFAIL;
	if (served == SERVED_OTHER) {
		rc = host->fail(job, "%s: the server chose a template other than the TEMPLATE "
		    "of %s and other than the GGUF's own", tag, mfpath);
		goto out;
	}
	if (served == SERVED_GGUF) {
		const char *fix = host->get(job, "template_fix");
		char mended[4200], msha[65];
		if (fix == NULL)
			fix = "gguf";
		host->log(job, PL_LOG_WARN, "%s: Ollama %s serves the GGUF's own "
		    "tokenizer.chat_template (%s), not the TEMPLATE of %s: it prefers the "
		    "Jinja template when that one has more capabilities", tag, version, gguf,
		    mfpath);
		if (strcmp(fix, "gguf") != 0) {
			rc = host->fail(job, "%s: the GGUF's own chat template serves, not the "
			    "Modelfile's; set template_fix = gguf (register takes it out of a copy "
			    "of the GGUF), or OLLAMA_GO_TEMPLATE=1 in the server's environment", tag);
			goto out;
		}
		host->log(job, PL_LOG_INFO, "template_fix = gguf: registering a copy of %s "
		    "without its chat template", gguf);
		if ((rc = template_mend(job, gguf, mended, sizeof(mended), msha)) != PL_OK)
			goto out;
		ollama_show_free(&sh);
		if ((rc = upload_create(job, &o, tag, mended, msha, &mf, &sh, manifest,
		    sizeof(manifest))) != PL_OK)
			goto out;
		if ((rc = template_served(job, mended, sh.template, mf.template,
		    &served)) != PL_OK)
			goto out;
		rc = PL_EFAIL;
		if (served != SERVED_MODELFILE) {
			rc = host->fail(job, "%s: still not the TEMPLATE of %s after the GGUF's "
			    "chat template was taken out; set OLLAMA_GO_TEMPLATE=1 in the "
			    "server's environment", tag, mfpath);
			goto out;
		}
		host->log(job, PL_LOG_INFO, "%s now serves the TEMPLATE of %s", tag, mfpath);
		snprintf(sha, sizeof(sha), "%s", msha);
		host->value_set(job, "register.template_fix", "the GGUF's tokenizer.chat_template "
		    "taken out");
		host->artifact(job, "gguf", mended);
	}
	host->value_set(job, "register.served_template", "modelfile");
	host->value_set(job, "register.tag", tag);
	host->value_set(job, "register.uploaded", sha);
	host->value_set(job, "register.weights", sh.weights);
	host->value_set(job, "register.manifest", manifest);
	host->value_set(job, "register.server_version", version);
	host->value_set(job, "register.server_profile", ollama_profile_name(profile));
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
