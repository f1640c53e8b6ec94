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
 * (template_served()), and when it is the GGUF's, keeps it if it renders
 * as training did, else mends it (template_fix: the chat template taken
 * out of a copy of the GGUF, which is registered instead) or fails. Last
 * it checks that the template that serves is the template that trained
 * (template_check()): training examples, and probe conversations that
 * exercise the trained template's filters (probe_check(): a padded
 * message, a multi-line system prompt, several turns), counted by the
 * tokenize job's own program (probe_lengths()).
 */
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "plio.h"
#include "gguf.h"
#include "ollama.h"
#include "ollama_admin.h"
#include "pyjob.h"

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

/*
 * The conversations a training example alone does not exercise: the filters
 * of the trained template (Gemma 3's trims each message, `| trim`, and folds
 * a system prompt, lines and all, into the first user turn) only show on
 * messages that have something to filter. Each case is built from a
 * training example's prompt (msgs, without its answer) and answer.
 */
enum { PROBE_PADDING, PROBE_SYSTEM, PROBE_TURNS, PROBE_N };
static const char *const probe_names[PROBE_N] = {
	"padding",
	"multi-line system prompt",
	"multi-turn conversation",
};
static const char *const probe_what[PROBE_N] = {
	"spaces and newlines around each user and assistant message",
	"a system prompt of several lines, one of them blank",
	"a user turn, the answer (padded) and a second user turn",
};

/* A copy of s with whitespace around it, as a client might send it. */
static char *
padded(const char *s)
{
	size_t n = strlen(s) + 8;
	char *p = malloc(n);

	if (p != NULL)
		snprintf(p, n, "  %s \n ", s);
	return p;
}

static void
msg_add(cJSON *a, const char *role, const char *content)
{
	cJSON *m = cJSON_CreateObject();

	cJSON_AddStringToObject(m, "role", role);
	cJSON_AddStringToObject(m, "content", content);
	cJSON_AddItemToArray(a, m);
}

/* Every user and assistant message of a (a JSON array) padded in place;
 * the system prompt is left alone (the trained template does not trim it). */
static void
pad_messages(cJSON *a)
{
	cJSON *m;

	cJSON_ArrayForEach(m, a) {
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
		cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
		if (!cJSON_IsString(r) || !cJSON_IsString(c) || strcmp(r->valuestring, "system") == 0)
			continue;
		char *p = padded(c->valuestring);
		if (p != NULL)
			cJSON_ReplaceItemInObjectCaseSensitive(m, "content", cJSON_CreateString(p));
		free(p);
	}
}

/* The whole conversation of probe case k (the last message an answer, as
 * tokenize wants it), from a training prompt and its answer. */
static cJSON *
probe_case(int k, const cJSON *prompt, const char *answer)
{
	cJSON *a = cJSON_Duplicate(prompt, 1), *m;
	const char *lastuser = NULL;
	char *sys;

	cJSON_ArrayForEach(m, prompt) {
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
		if (cJSON_IsString(r) && cJSON_IsString(c) && strcmp(r->valuestring, "user") == 0)
			lastuser = c->valuestring;
	}
	switch (k) {
	case PROBE_PADDING:
		msg_add(a, "assistant", answer);
		pad_messages(a);
		break;
	case PROBE_SYSTEM: {
		cJSON *first = cJSON_GetArrayItem(a, 0);
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(first, "role");
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(first, "content");
		const char *old = cJSON_IsString(r) && strcmp(r->valuestring, "system") == 0 &&
		    cJSON_IsString(c) ? c->valuestring : "You answer requests.";
		size_t n = strlen(old) + 128;
		if ((sys = malloc(n)) == NULL)
			break;
		snprintf(sys, n, "%s\nAnswer in the form training taught.\n\n"
		    "Keep to the request.", old);
		if (old == c->valuestring)
			cJSON_ReplaceItemInObjectCaseSensitive(first, "content",
			    cJSON_CreateString(sys));
		else {
			m = cJSON_CreateObject();
			cJSON_AddStringToObject(m, "role", "system");
			cJSON_AddStringToObject(m, "content", sys);
			cJSON_InsertItemInArray(a, 0, m);
		}
		free(sys);
		msg_add(a, "assistant", answer);
		break;
	}
	case PROBE_TURNS: {
		char *p = padded(answer);
		msg_add(a, "assistant", p ? p : answer);
		free(p);
		msg_add(a, "user", lastuser ? lastuser : "And again?");
		msg_add(a, "assistant", answer);
		break;
	}
	}
	return a;
}

/* The answer of the corpus example key (its last message's content). */
static char *
corpus_answer(const char *path, const char *key)
{
	FILE *f = plc_fopen_in(path);
	char *line = NULL, *out = NULL;
	size_t cap = 0;

	if (f == NULL)
		return NULL;
	while (out == NULL && getline(&line, &cap, f) != -1) {
		if (strstr(line, key) == NULL)
			continue;
		cJSON *j = cJSON_Parse(line);
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "key");
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "messages");
		if (cJSON_IsString(k) && strcmp(k->valuestring, key) == 0 && cJSON_IsArray(m)) {
			const cJSON *last = cJSON_GetArrayItem(m, cJSON_GetArraySize(m) - 1);
			const cJSON *c = cJSON_GetObjectItemCaseSensitive(last, "content");
			out = strdup(cJSON_IsString(c) ? c->valuestring : "");
		}
		cJSON_Delete(j);
	}
	free(line);
	fclose(f);
	return out;
}

/*
 * The trained template's prompt lengths of the probe cases: the cases are
 * written as a corpus and tokenized by the job program that tokenized
 * training (jobs/tokenize_corpus.py), with the tokenize job's own config
 * (TOKENS' directory: tokenize_corpus.config.json, its base, chat template
 * and tokenizer), so that they are rendered by the template that trained.
 * plen[k] receives case k's count; cases[k] its prompt (the answer taken
 * off).
 */
static int
probe_lengths(pl_job *job, const char *tpath, int64_t num_ctx, const cJSON *prompt,
    const char *answer, cJSON *cases[PROBE_N], int32_t plen[PROBE_N])
{
	static const struct pl_key none[] = { PL_KEY_END };
	char dir[PATH_MAX], cfgpath[PATH_MAX + 64], corpus[PATH_MAX], out[PATH_MAX];
	char events[PATH_MAX], npz[PATH_MAX + 16], err[1024], key[64], how[512];
	struct pyjob pj;
	struct pl_spawn sp;
	struct pl_exit ex = PL_EXIT_INIT;
	struct npz_array keys, lens;
	int rc;

	snprintf(dir, sizeof(dir), "%s", tpath);
	snprintf(cfgpath, sizeof(cfgpath), "%s/tokenize_corpus.config.json", dirname(dir));
	char *text = plc_read_file(cfgpath, NULL, 1 << 20);
	if (text == NULL)
		return host->fail(job, "template check: %s: %s: the tokenize job's config, "
		    "beside its tokens, is needed to render the probe cases with the template "
		    "that trained", cfgpath, strerror(errno));
	cJSON *cfg = cJSON_Parse(text);
	free(text);
	if (!cJSON_IsObject(cfg)) {
		cJSON_Delete(cfg);
		return host->fail(job, "template check: %s: not a JSON object", cfgpath);
	}
	snprintf(corpus, sizeof(corpus), "%s/probes.jsonl", host->workdir(job));
	snprintf(out, sizeof(out), "%s/probes", host->workdir(job));
	snprintf(events, sizeof(events), "%s/probes.events", host->workdir(job));
	FILE *f = fopen(corpus, "w");
	if (f == NULL) {
		cJSON_Delete(cfg);
		return host->fail(job, "template check: %s: %s", corpus, strerror(errno));
	}
	for (int k = 0; k < PROBE_N; k++) {
		cJSON *conv = probe_case(k, prompt, answer), *line = cJSON_CreateObject();
		snprintf(key, sizeof(key), "probe-%d", k);
		cJSON_AddStringToObject(line, "key", key);
		cJSON_AddItemToObject(line, "messages", conv);
		char *l = cJSON_PrintUnformatted(line);
		fprintf(f, "%s\n", l);
		free(l);
		cases[k] = cJSON_Duplicate(conv, 1);
		cJSON_DeleteItemFromArray(cases[k], cJSON_GetArraySize(cases[k]) - 1);
		cJSON_Delete(line);
	}
	if (fclose(f) == EOF) {
		cJSON_Delete(cfg);
		return host->fail(job, "template check: %s: %s", corpus, strerror(errno));
	}
	if (mkdir(out, 0755) == -1 && errno != EEXIST) {
		cJSON_Delete(cfg);
		return host->fail(job, "template check: %s: %s", out, strerror(errno));
	}
	/* The probes are no training examples: the limits that keep those
	 * within max_seq_length and the serving context's margin do not apply,
	 * only the tag's context (a conversation of two turns is twice an
	 * example's length). */
	static const char *const repl[] = { "corpus", "output_dir", "max_seq_length",
	    "num_ctx", "num_ctx_margin", NULL };
	for (int i = 0; repl[i]; i++)
		cJSON_DeleteItemFromObjectCaseSensitive(cfg, repl[i]);
	cJSON_AddStringToObject(cfg, "corpus", corpus);
	cJSON_AddStringToObject(cfg, "output_dir", out);
	cJSON_AddNumberToObject(cfg, "max_seq_length", 1 << 30);
	cJSON_AddNumberToObject(cfg, "num_ctx", (double)num_ctx);
	cJSON_AddNumberToObject(cfg, "num_ctx_margin", 0);
	rc = pyjob_prepare(host, job, none, "tokenize_corpus", cfg, &pj);
	const cJSON *py = cJSON_GetObjectItemCaseSensitive(cfg, "python");
	if (rc == PL_OK && cJSON_IsString(py) && *py->valuestring)
		snprintf(pj.python, sizeof(pj.python), "%s", py->valuestring);
	cJSON_Delete(cfg);
	if (rc != PL_OK)
		return rc;
	/* Its events go to a file of their own: the probe's tokens are no
	 * artifact of this job. */
	pj.argv[4] = "--events";
	pj.argv[5] = events;
	pj.argv[6] = NULL;
	memset(&sp, 0, sizeof(sp));
	sp.abi = PL_ABI_VERSION;
	sp.size = sizeof(sp);
	sp.name = "probe-tokenize";
	sp.argv = pj.argv;
	rc = host->spawn(job, &sp, &ex);
	if (host->cancelled(job))
		return PL_ECANCELED;
	if (rc != PL_OK)
		return host->fail(job, "template check: spawning %s: %s", pj.script,
		    host->strerror(rc));
	if (!ex.exited || ex.status != 0) {
		pyjob_exit_str(&ex, how, sizeof(how));
		return host->fail(job, "template check: tokenizing the probe cases (%s) with "
		    "the tokenize job's config: %s", corpus, how);
	}
	snprintf(npz, sizeof(npz), "%s/tokens.npz", out);
	if (npz_read(npz, "keys", &keys, err, sizeof(err)) == -1)
		return host->fail(job, "template check: %s", err);
	if (npz_read(npz, "prompt_len", &lens, err, sizeof(err)) == -1) {
		npz_free(&keys);
		return host->fail(job, "template check: %s", err);
	}
	rc = PL_OK;
	if (keys.n != PROBE_N || lens.n != PROBE_N)
		rc = host->fail(job, "template check: %s holds %zu cases, not %d", npz,
		    keys.n, PROBE_N);
	for (int k = 0; rc == PL_OK && k < PROBE_N; k++) {
		char want[64];
		snprintf(want, sizeof(want), "probe-%d", k);
		if (npz_str(&keys, k, key, sizeof(key)) == -1 || strcmp(key, want) != 0)
			rc = host->fail(job, "template check: %s: case %d is not %s", npz, k, want);
		else
			plen[k] = npz_int(&lens, k);
	}
	npz_free(&keys);
	npz_free(&lens);
	return rc;
}

/*
 * The prompt tokens the tag counts for msgs (consumed): prompt_eval_count
 * of a one-token /api/chat; -1 with o->error set when the request failed.
 * From 0.30 an answer whose one token is not whole UTF-8 ends done: false
 * without metrics (llama-server's chat parser refuses it; HACKING.md:
 * Ollama): the request is then sent again with format json, whose grammar
 * allows only whole characters and leaves the prompt as it was.
 */
static long
served_count(struct ollama *o, const char *tag, cJSON *msgs, int64_t num_ctx)
{
	cJSON *req = cJSON_CreateObject(), *opt, *ans = NULL;
	const cJSON *pe = NULL;
	long served = -2;

	cJSON_AddStringToObject(req, "model", tag);
	cJSON_AddItemToObject(req, "messages", msgs);
	cJSON_AddBoolToObject(req, "stream", 0);
	cJSON_AddBoolToObject(req, "truncate", 0);
	opt = cJSON_AddObjectToObject(req, "options");
	cJSON_AddNumberToObject(opt, "num_ctx", (double)num_ctx);
	cJSON_AddNumberToObject(opt, "num_predict", 1);
	cJSON_AddNumberToObject(opt, "temperature", 0);
	for (int try = 0; try < 2 && served == -2; try++) {
		if (try == 1)
			cJSON_AddStringToObject(req, "format", "json");
		char *body = cJSON_PrintUnformatted(req);
		ans = ollama_request(o, "POST", "/api/chat", body);
		free(body);
		if (ans == NULL) {
			cJSON_Delete(req);
			return -1;
		}
		pe = cJSON_GetObjectItemCaseSensitive(ans, "prompt_eval_count");
		if (cJSON_IsNumber(pe))
			served = (long)pe->valuedouble;
		cJSON_Delete(ans);
	}
	cJSON_Delete(req);
	if (served == -2)
		snprintf(o->error, sizeof(o->error), "the answer has no prompt_eval_count");
	return served < 0 ? -1 : served;
}

/*
 * A template check's mismatch: the job's failure, or with soft (the GGUF's
 * own template on trial, which the Modelfile's may still replace) a warning
 * in its log. Returns PL_EFAIL either way.
 */
static int
check_mismatch(pl_job *job, int soft, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (!soft)
		return host->fail(job, "%s", buf);
	host->log(job, PL_LOG_WARN, "%s", buf);
	return PL_EFAIL;
}

/*
 * The probe cases through the tag: each must count the prompt tokens the
 * trained template counts for it. The cases are built from the training
 * example at index ex (the shortest, so that a conversation of two turns
 * still fits num_ctx).
 */
static int
probe_check(pl_job *job, struct ollama *o, const char *tag, const char *what,
    int64_t num_ctx, const char *tpath, const char *cpath, const struct npz_array *keys,
    size_t ex, int soft)
{
	cJSON *cases[PROBE_N] = { NULL }, *prompt = NULL;
	int32_t plen[PROBE_N];
	char key[256], err[1024] = "", *answer = NULL;
	int rc = PL_EFAIL;

	if (npz_str(keys, ex, key, sizeof(key)) == -1)
		return host->fail(job, "tokens: %s: key %zu is too long", tpath, ex);
	if ((prompt = corpus_prompt(cpath, key, err, sizeof(err))) == NULL)
		return host->fail(job, "corpus: %s", err);
	if ((answer = corpus_answer(cpath, key)) == NULL) {
		cJSON_Delete(prompt);
		return host->fail(job, "corpus: %s: no answer of example %s", cpath, key);
	}
	if ((rc = probe_lengths(job, tpath, num_ctx, prompt, answer, cases, plen)) != PL_OK)
		goto out;
	for (int k = 0; k < PROBE_N; k++) {
		long served = served_count(o, tag, cases[k], num_ctx);
		cases[k] = NULL;
		if (served == -1) {
			rc = host->fail(job, "template check: case %s through %s: %s",
			    probe_names[k], tag, o->error);
			goto out;
		}
		if (served != plen[k]) {
			rc = check_mismatch(job, soft, "template check: case %s (%s, from "
			    "example %s): %s renders it as %ld prompt tokens, the trained template "
			    "as %d: the template that serves (%s) is not the template that "
			    "trained%s", probe_names[k], probe_what[k], key, tag, served, plen[k],
			    what, k == PROBE_PADDING ? " (Ollama's Go templates have no trim "
			    "function; etc/Modelfile.tmpl trims each message with range, index "
			    "and slice)" : "");
			goto out;
		}
		host->log(job, PL_LOG_INFO, "template check: case %s (from example %s): %d "
		    "prompt tokens served and trained", probe_names[k], key, plen[k]);
	}
	host->value_set(job, "register.template_cases", "padding, multi-line system prompt, "
	    "multi-turn conversation");
	rc = PL_OK;
out:
	for (int k = 0; k < PROBE_N; k++)
		cJSON_Delete(cases[k]);
	cJSON_Delete(prompt);
	free(answer);
	return rc;
}

static int
template_check(pl_job *job, struct ollama *o, const char *tag, const char *what,
    int64_t num_ctx, const char *tpath, const char *cpath, int soft)
{
	struct npz_array keys, plen;
	char err[1024] = "", key[256];
	int64_t want = host->get_int(job, "template_examples", 0);
	size_t pick[64], npick = 0, longest = 0, shortest = 0;
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
	for (size_t i = 1; i < plen.n; i++) {
		if (npz_int(&plen, i) > npz_int(&plen, longest))
			longest = i;
		if (npz_int(&plen, i) < npz_int(&plen, shortest))
			shortest = i;
	}
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
		long served = served_count(o, tag, msgs, num_ctx);
		loaded = 1;
		if (served == -1) {
			rc = host->fail(job, "template check: example %s through %s: %s", key, tag,
			    o->error);
			goto out;
		}
		if (served != trained) {
			rc = check_mismatch(job, soft, "%s renders training example %s as %ld "
			    "prompt tokens, tokenize counted %d (%s): the template that serves (%s) "
			    "is not the template that trained", tag, key, served, trained, tpath,
			    what);
			goto out;
		}
		host->log(job, PL_LOG_INFO, "template check: example %s%s: %d prompt tokens "
		    "served and trained", key, i == longest ? " (the longest)" : "", trained);
	}
	if ((rc = probe_check(job, o, tag, what, num_ctx, tpath, cpath, &keys,
	    shortest, soft)) != PL_OK) {
		loaded = 1;
		goto out;
	}
	rc = PL_EFAIL;
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
enum served_template { SERVED_MODELFILE, SERVED_GGUF, SERVED_GGUF_CHECKED, SERVED_OTHER };

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

/* The previous version's weights, which this one's must differ from:
 * previous_tag's on the server, or those the previous run's register job
 * recorded; "" when there are none. 0, or -1 with why in o->error. */
static int
previous_weights(pl_job *job, struct ollama *o, char *w, size_t len)
{
	const char *prev = host->get(job, "previous_tag"), *prun;
	struct ollama_show sh;
	char *v;
	w[0] = '\0';
	if (prev != NULL && *prev) {
		memset(&sh, 0, sizeof(sh));
		if (ollama_show(o, prev, &sh) == -1)
			return -1;
		snprintf(w, len, "%s", sh.weights);
		ollama_show_free(&sh);
		return 0;
	}
	prun = host->run_get(job, "previous");
	v = prun ? host->value_get(job, prun, NULL, "register.weights") : NULL;
	if (v != NULL)
		snprintf(w, len, "%s", v);
	free(v);
	return 0;
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

	if (previous_weights(job, &o, prev_w, sizeof(prev_w)) == -1) {
		rc = host->fail(job, "previous_tag %s: %s", prev, o.error);
		goto out;
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
	char what[4200];
	int checked = 0;
	snprintf(what, sizeof(what), "TEMPLATE of %s", mfpath);
	if (served == SERVED_GGUF) {
		char gwhat[4200];
		host->log(job, PL_LOG_WARN, "%s: Ollama %s serves the GGUF's own "
		    "tokenizer.chat_template (%s), not the TEMPLATE of %s: it prefers the "
		    "Jinja template when that one has more capabilities, or when "
		    "OLLAMA_GO_TEMPLATE=0 is set on the server", tag, version, gguf, mfpath);
		/* The GGUF's own template is the one that trained when the base's
		 * tokenizer_config.json carried it into the GGUF; then it serves as
		 * it is, filters and all (llama-server's Jinja trims). Only a
		 * template that renders otherwise than training is replaced. */
		snprintf(gwhat, sizeof(gwhat), "the GGUF's own chat template of %s", gguf);
		if (tpath != NULL) {
			host->log(job, PL_LOG_INFO, "template check of the GGUF's own chat "
			    "template, which serves if it renders as training did");
			if (template_check(job, &o, tag, gwhat, num_ctx, tpath, cpath, 1) == PL_OK) {
				host->log(job, PL_LOG_INFO, "%s serves the GGUF's own chat template "
				    "(llama-server's Jinja), which renders as the template that "
				    "trained: kept", tag);
				served = SERVED_GGUF_CHECKED;
				checked = 1;
			} else if (host->cancelled(job)) {
				rc = PL_ECANCELED;
				goto out;
			}
		}
	}
	if (served == SERVED_GGUF) {
		const char *fix = host->get(job, "template_fix");
		char mended[4200], msha[65];
		if (fix == NULL)
			fix = "gguf";
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
	host->value_set(job, "register.served_template",
	    served == SERVED_GGUF_CHECKED ? "gguf" : "modelfile");
	host->value_set(job, "register.tag", tag);
	host->value_set(job, "register.uploaded", sha);
	host->value_set(job, "register.weights", sh.weights);
	host->value_set(job, "register.manifest", manifest);
	host->value_set(job, "register.server_version", version);
	host->value_set(job, "register.server_profile", ollama_profile_name(profile));
	if (sh.context_length > 0 && sh.context_length < num_ctx)
		host->log(job, PL_LOG_WARN, "num_ctx %lld exceeds the model's trained context "
		    "%ld: the server caps it", (long long)num_ctx, sh.context_length);
	if (!checked && (rc = template_check(job, &o, tag, what, num_ctx, tpath, cpath,
	    0)) != PL_OK)
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

/* Reuse: the key holds the server's version and the previous version's
 * weights this one must differ from (G24: a register checked against
 * another previous version is no proof against this one); an earlier
 * register of the same key stands only while the server still has its
 * tag at the manifest digest it recorded (a tag deleted or created again
 * behind the daemon's back is registered again). */
static int
register_reuse_key(pl_job *job, char *buf, size_t len)
{
	struct ollama o;
	char w[80];
	if (ollama_reuse_key(host->get(job, "url"), NULL, buf, len) == -1)
		return PL_EIO;
	if (ollama_init(&o, host->get(job, "url"), 10) == -1 ||
	    previous_weights(job, &o, w, sizeof(w)) == -1) {
		snprintf(buf, len, "previous_tag %s: %s", host->get(job, "previous_tag"), o.error);
		return PL_EIO;
	}
	size_t n = strlen(buf);
	snprintf(buf + n, len - n, "previous weights=%s\n", w[0] ? w : "none");
	return PL_OK;
}

static int
register_reuse_check(pl_job *job, const char *run, const char *jobname, char *why, size_t len)
{
	char *m = host->value_get(job, run, jobname, "register.manifest");
	int rc = ollama_reuse_check(host->get(job, "url"), host->get(job, "tag"), m, why, len);
	free(m);
	return rc == 0 ? PL_OK : PL_ENOENT;
}

static const struct pl_stage register_stage = PL_STAGE(
	.name = "register",
	.summary = "create the Ollama tag from the GGUF and prove what it serves",
	.flags = PL_STAGE_REUSE,
	.keys = register_keys,
	.check = register_check,
	.run = register_run,
	.reuse_key = register_reuse_key,
	.reuse_check = register_reuse_check);

PL_PLUGIN(&host, &register_stage)
