/*
 * bake.c: the `bake` stage. Scores a served model through the serving path:
 * every case of a case file (pipeline-cases(5)), `passes` times, through
 * Ollama's /api/chat or an OpenAI-compatible /v1/chat/completions, with
 * the production system prompt and a schema whose enum holds every
 * accepted capability. Every case result and the aggregates go to the
 * store; the case-set digest says which bakes may be compared.
 *
 * What it guards against: silent prompt truncation (G01: num_ctx on every
 * request, the server's context checked, truncated prompts are bake
 * errors), routing on the wrong channel (G25: the case file refuses setup
 * on another channel), a schema enum without the hidden capabilities
 * (G26), timings from a model half on the CPU (G22: size_vram == size,
 * others evicted, or the speed is reported as not comparable), and one
 * pass overstating a margin (F15: passes = 3, every pass stored).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "plio.h"
#include "chat.h"
#include "ollama.h"
#include "ollama_admin.h"
#include "score.h"

static const struct pl_host *host;

static const struct pl_key bake_keys[] = {
	PL_KEY_STRING(.name = "backend", .def = "ollama",
	    .help = "ollama (/api/chat) or openai (llama-server, vLLM: /v1/chat/completions)"),
	PL_KEY_STRING(.name = "url", .flags = PL_KEY_VOLATILE,
	    .help = "server base URL (default: Ollama's 127.0.0.1:11434, llama-server's :8080)"),
	PL_KEY_STRING(.name = "model", .flags = PL_KEY_REQUIRED,
	    .help = "the served model: an Ollama tag, or the OpenAI model id"),
	PL_KEY_PATH(.name = "cases", .flags = PL_KEY_REQUIRED | PL_KEY_FILE,
	    .help = "the case file, JSON lines (pipeline-cases(5))"),
	PL_KEY_PATH(.name = "system", .flags = PL_KEY_REQUIRED | PL_KEY_FILE,
	    .help = "the system prompt file; {{channel}} becomes the case's channel"),
	PL_KEY_PATH(.name = "capabilities", .flags = PL_KEY_REQUIRED | PL_KEY_FILE,
	    .help = "the capability list, hidden ones included (pipeline-cases(5))"),
	PL_KEY_LIST(.name = "disabled",
	    .help = "capabilities to disable: their cases are skipped as not runnable"),
	PL_KEY_INPUT(.name = "stats", .artifact = "stats",
	    .help = "the tokenize stage's stats (corpus_keys) for held-out; none: all held out"),
	PL_KEY_STRING(.name = "stats_run",
	    .help = "take the stats artifact of this run instead (the incumbent's corpus)"),
	PL_KEY_INT(.name = "passes", .def = "3", .flags = PL_KEY_MIN | PL_KEY_MAX, .min = 1, .max = SC_MAX_PASSES,
	    .help = "passes over every case (1-32)"),
	PL_KEY_INT(.name = "num_ctx", .flags = PL_KEY_MIN, .min = 256,
	    .help = "context every request needs; sent to Ollama, checked on llama-server "
	    "(default: the Ollama tag's PARAMETER num_ctx, which register set; else 9216)"),
	PL_KEY_BOOL(.name = "shift",
	    .help = "Ollama shift as the live clients send it (default: not sent)"),
	PL_KEY_INT(.name = "seed", .def = "3407", .help = "sampling seed (temperature is 0)"),
	PL_KEY_INT(.name = "max_tokens", .def = "256", .flags = PL_KEY_MIN, .min = 1,
	    .help = "token cap of one answer"),
	PL_KEY_INT(.name = "concurrency", .def = "1", .flags = PL_KEY_MIN | PL_KEY_MAX, .min = 1, .max = 64,
	    .help = "requests in flight (llama-server -np N); speed then is throughput"),
	PL_KEY_DURATION(.name = "case_timeout", .def = "300", .flags = PL_KEY_VOLATILE, .help = "limit of one request"),
	PL_KEY_FLOAT(.name = "max_bytes_per_token", .def = "8",
	    .help = "a prompt counted as fewer tokens than bytes/this was cut (G01); 0: off"),
	PL_KEY_STRING(.name = "keep_alive", .def = "30m",
	    .help = "Ollama keep_alive of the model during the bake, as the live clients send it"),
	PL_KEY_BOOL(.name = "evict", .def = "yes",
	    .help = "Ollama: unload every other model before timing (G22)"),
	PL_KEY_INT(.name = "max_errors", .def = "0",
	    .help = "bake errors (truncation, server) tolerated before the stage fails"),
	PL_KEY_END
};

/* One pass of one case. */
struct result {
	int outcome;		/* enum sc_outcome */
	int chat;		/* enum chat_status */
	char got[SC_NAME_MAX];
	char why[256];
	char finish[32];
	char output[240];	/* the start of the answer, for the report */
	double seconds;
	long prompt_tokens;
};

struct bake {
	pl_job *job;
	struct chat_client chat;
	struct sc_caps caps;
	struct sc_case *cases;
	int ncases;
	char *system;
	cJSON *schema;
	int passes;
	int concurrency;
	struct result *res;	/* [case * passes + pass] */
	/* Per-case reuse: each case's digest (sc_case_digest), the passes
	 * taken from an earlier bake (NULL: it runs), the cases that go to
	 * the server (todo[ntodo]), how many were taken and where from. */
	char (*csha)[65];
	cJSON **kept;
	int *todo;
	int ntodo, reused;
	char from[512];
	/* The work queue: pass-major, so a pass finishes before the next. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int next, total, done, stop, running;
};

/*
 * keep_alive as the JSON value Ollama reads (HACKING.md: Ollama): a
 * number is seconds (negative: forever) and must go as a number, since a
 * string without a unit ("-1", "300") is refused; "30m" goes as a string.
 */
static void
keep_alive_json(const char *v, char *out, size_t len)
{
	char *end;

	out[0] = '\0';
	if (v == NULL || *v == '\0')
		return;
	(void)strtod(v, &end);
	if (*end == '\0')
		snprintf(out, len, "%s", v);
	else
		snprintf(out, len, "\"%s\"", v);
}

/* The system prompt with {{channel}} replaced by the case's channel: the
 * case routes on its own channel (G25). */
static char *
render_system(const char *sys, const char *channel)
{
	static const char tok[] = "{{channel}}";
	size_t n = 0, cl = strlen(channel), tl = sizeof(tok) - 1;
	const char *p;
	char *out, *o;

	for (p = sys; (p = strstr(p, tok)) != NULL; p += tl)
		n++;
	out = malloc(strlen(sys) + n * cl + 1);
	if (out == NULL)
		return NULL;
	for (o = out, p = sys; *p; ) {
		if (strncmp(p, tok, tl) == 0) {
			memcpy(o, channel, cl);
			o += cl;
			p += tl;
		} else
			*o++ = *p++;
	}
	*o = '\0';
	return out;
}

static cJSON *
case_messages(const struct bake *b, const struct sc_case *c)
{
	cJSON *m = cJSON_CreateArray(), *t, *s;
	char *sys = render_system(b->system, c->channel);

	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "role", "system");
	cJSON_AddStringToObject(t, "content", sys ? sys : b->system);
	cJSON_AddItemToArray(m, t);
	free(sys);
	cJSON_ArrayForEach(s, c->setup)
		cJSON_AddItemToArray(m, cJSON_Duplicate(s, 1));
	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "role", "user");
	cJSON_AddStringToObject(t, "content", c->user);
	cJSON_AddItemToArray(m, t);
	return m;
}

static void
run_one(struct bake *b, struct plc_http_conn *conn, int ci, int pass)
{
	const struct sc_case *c = &b->cases[ci];
	struct result *r = &b->res[ci * b->passes + pass];
	struct chat_reply rep;
	cJSON *msgs = case_messages(b, c);

	if (chat_send(&b->chat, conn, msgs, b->schema, &rep) == -1) {
		r->outcome = SC_ERROR;
		r->chat = CHAT_SERVER;
		snprintf(r->why, sizeof(r->why), "%s", rep.error);
		cJSON_Delete(msgs);
		return;
	}
	cJSON_Delete(msgs);
	r->chat = rep.status;
	r->seconds = rep.seconds;
	r->prompt_tokens = rep.prompt_tokens;
	snprintf(r->finish, sizeof(r->finish), "%s", rep.finish);
	snprintf(r->output, sizeof(r->output), "%.*s", (int)sizeof(r->output) - 1,
	    rep.content ? rep.content : "");
	if (rep.status == CHAT_OK || rep.status == CHAT_CAPPED) {
		/* A capped answer is still the model's answer; the scorer
		 * finds it unparseable if the cap cut the JSON. */
		r->outcome = sc_score(c, &b->caps, rep.content, rep.len, r->got,
		    sizeof(r->got), r->why, sizeof(r->why));
		if (rep.status == CHAT_CAPPED && r->outcome != SC_PASS)
			snprintf(r->why + strlen(r->why), sizeof(r->why) - strlen(r->why),
			    " (%s)", rep.error);
	} else if (rep.status == CHAT_UNPARSED) {
		r->outcome = SC_UNPARSEABLE;
		snprintf(r->why, sizeof(r->why), "%s: %s", chat_status_name(rep.status),
		    rep.error);
	} else {
		r->outcome = SC_ERROR;
		snprintf(r->why, sizeof(r->why), "%s: %s", chat_status_name(rep.status),
		    rep.error);
	}
	chat_reply_free(&rep);
}

/* Each worker keeps its own connection to the server across its cases
 * (NULL when out of memory: then a connection per request). */
static void *
worker(void *arg)
{
	struct bake *b = arg;
	struct plc_http_conn *conn = plc_http_conn_new();

	for (;;) {
		int t, ci, pass;

		pthread_mutex_lock(&b->mu);
		/* A pass starts only when the one before it is done, so that
		 * passes are repeats and not interleavings. */
		while (!b->stop && b->next < b->total &&
		    b->done < (b->next / b->ntodo) * b->ntodo)
			pthread_cond_wait(&b->cv, &b->mu);
		if (b->stop || b->next >= b->total) {
			b->running--;
			pthread_cond_broadcast(&b->cv);
			pthread_mutex_unlock(&b->mu);
			plc_http_conn_free(conn);
			return NULL;
		}
		t = b->next++;
		pthread_mutex_unlock(&b->mu);
		ci = b->todo[t % b->ntodo];
		pass = t / b->ntodo;
		if (sc_case_skipped(&b->cases[ci], &b->caps))
			b->res[ci * b->passes + pass].outcome = SC_SKIPPED;
		else
			run_one(b, conn, ci, pass);
		pthread_mutex_lock(&b->mu);
		b->done++;
		pthread_cond_broadcast(&b->cv);
		pthread_mutex_unlock(&b->mu);
	}
}

/* Run the queue on `concurrency` threads; the job thread watches progress
 * and cancellation. Host calls stay on the job thread. */
static int
run_all(struct bake *b)
{
	pthread_t *th = calloc(b->concurrency, sizeof(*th));
	int last = -1, rc = PL_OK;

	b->total = b->ntodo * b->passes;
	if (b->total == 0)
		return PL_OK;
	b->running = b->concurrency;
	for (int i = 0; i < b->concurrency; i++)
		if (pthread_create(&th[i], NULL, worker, b) != 0) {
			pthread_mutex_lock(&b->mu);
			b->running -= b->concurrency - i;
			b->stop = i == 0;
			pthread_mutex_unlock(&b->mu);
			if (i == 0) {
				free(th);
				return host->fail(b->job, "bake: cannot start a thread");
			}
			b->concurrency = i;
			break;
		}
	pthread_mutex_lock(&b->mu);
	while (b->running > 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&b->cv, &b->mu, &ts);
		int done = b->done;
		pthread_mutex_unlock(&b->mu);
		if (done != last) {
			host->progress(b->job, done, b->total, "case-passes");
			last = done;
		}
		if (host->cancelled(b->job)) {
			rc = PL_ECANCELED;
			pthread_mutex_lock(&b->mu);
			b->stop = 1;
			pthread_cond_broadcast(&b->cv);
			pthread_mutex_unlock(&b->mu);
		}
		pthread_mutex_lock(&b->mu);
	}
	pthread_mutex_unlock(&b->mu);
	for (int i = 0; i < b->concurrency; i++)
		pthread_join(th[i], NULL);
	free(th);
	return rc;
}

/*
 * G22: a model split across CPU and GPU gives honest answers at dishonest
 * speeds. Evict every other model, load ours with the bake's num_ctx, and
 * time only if /api/ps shows it whole on the GPU.
 */
static int
ollama_placement(struct bake *b, int evict, const char *keep_alive, char *note,
    size_t notelen, char *served, size_t servedlen)
{
	struct ollama o;
	struct ollama_list l;
	int comparable = 0;
	char ka[64];

	snprintf(note, notelen, "not checked");
	served[0] = '\0';
	if (ollama_init(&o, b->chat.url, 120) == -1)
		return 0;
	if (evict && ollama_ps(&o, &l) == 0) {
		for (size_t i = 0; i < l.n; i++) {
			if (ollama_model_is(&l.v[i], b->chat.model))
				continue;
			host->log(b->job, PL_LOG_INFO, "evicting %s before timing (G22)",
			    l.v[i].name);
			if (ollama_unload_wait(&o, l.v[i].name, 60, 0.25) == -1)
				host->log(b->job, PL_LOG_WARN, "%s", o.error);
		}
		ollama_list_free(&l);
	}
	/* A runner loaded at another context is reloaded by the bake's first
	 * request (0.30 and later also for another shift: needsReload), and
	 * by the live clients' next one after it: say so. */
	if (ollama_ps(&o, &l) == 0) {
		for (size_t i = 0; i < l.n; i++)
			if (ollama_model_is(&l.v[i], b->chat.model) && l.v[i].context_length > 0 &&
			    l.v[i].context_length != b->chat.num_ctx) {
				host->log(b->job, PL_LOG_WARN, "%s is loaded with a %ld-token "
				    "context, the bake's num_ctx is %d: the bake reloads it, and a "
				    "client that keeps asking with %ld reloads it back", l.v[i].name,
				    l.v[i].context_length, b->chat.num_ctx, l.v[i].context_length);
				host->value_set(b->job, "bake.reload", "yes");
			}
		ollama_list_free(&l);
	}
	keep_alive_json(keep_alive, ka, sizeof(ka));
	if (ollama_load_opts(&o, b->chat.model, ka[0] ? ka : NULL, b->chat.num_ctx,
	    b->chat.shift) == -1) {
		snprintf(note, notelen, "load failed: %s", o.error);
		return 0;
	}
	if (ollama_ps(&o, &l) == -1) {
		snprintf(note, notelen, "ps failed: %s", o.error);
		return 0;
	}
	int found = 0, others = 0;
	for (size_t i = 0; i < l.n; i++) {
		if (ollama_model_is(&l.v[i], b->chat.model)) {
			found = 1;
			snprintf(served, servedlen, "%s", strncmp(l.v[i].digest, "sha256:", 7) == 0 ?
			    l.v[i].digest + 7 : l.v[i].digest);
			comparable = l.v[i].size > 0 && l.v[i].size_vram == l.v[i].size;
			snprintf(note, notelen, "size_vram %llu of %llu bytes",
			    (unsigned long long)l.v[i].size_vram,
			    (unsigned long long)l.v[i].size);
		} else
			others++;
	}
	ollama_list_free(&l);
	if (!found) {
		snprintf(note, notelen, "%s not listed by /api/ps after loading", b->chat.model);
		comparable = 0;
	} else if (others > 0) {
		size_t n = strlen(note);
		snprintf(note + n, notelen - n, "; %d other model%s still loaded", others,
		    others == 1 ? "" : "s");
		comparable = 0;
	}
	return comparable;
}

/*
 * The context of every request: the spec's num_ctx, else (Ollama) the
 * tag's own PARAMETER num_ctx, the one register set and the live clients
 * that send none get, so that the bake does not reload their runner at
 * another size; else 9216. The key has no table default: which one
 * applies depends on the backend and the tag. -1 when the tag cannot be
 * read.
 */
static int
bake_num_ctx(struct bake *b)
{
	struct ollama o;
	struct ollama_show sh;
	const char *p;
	long n = 9216;

	if (host->get(b->job, "num_ctx") != NULL || b->chat.backend != CHAT_OLLAMA)
		return (int)host->get_int(b->job, "num_ctx", 9216);
	if (ollama_init(&o, b->chat.url, 60) == -1 || ollama_show(&o, b->chat.model, &sh) == -1)
		return host->fail(b->job, "num_ctx: reading the PARAMETER num_ctx of %s: %s",
		    b->chat.model, o.error), -1;
	for (p = sh.parameters; p && (p = strstr(p, "num_ctx")) != NULL; p += 7)
		if ((p == sh.parameters || p[-1] == '\n') && sscanf(p + 7, "%ld", &n) == 1)
			break;
	host->log(b->job, PL_LOG_INFO, "num_ctx %ld: %s", n, p ? "the tag's PARAMETER num_ctx" :
	    "the tag has no PARAMETER num_ctx; the default");
	ollama_show_free(&sh);
	return (int)n;
}

static int
load_stats(struct bake *b, struct sc_keys *keys, int *have, char *src, size_t srclen)
{
	const char *v = host->get(b->job, "stats");
	const char *run = host->get(b->job, "stats_run");
	char path[4096], err[512];

	*have = 0;
	if (v != NULL && strcmp(v, "none") == 0) {
		snprintf(src, srclen, "none");
		return 0;
	}
	if (run != NULL && *run) {
		if (host->artifact_find(b->job, run, NULL, "stats", path, sizeof(path),
		    NULL) != PL_OK)
			return host->fail(b->job, "stats_run %s: no stats artifact in that run", run);
		v = path;
	} else {
		v = host->input(b->job, "stats");
		if (v == NULL)
			return host->fail(b->job, "stats: no corpus keys (the tokenize stage's "
			    "stats artifact); set stats = PATH, or stats = none when the model "
			    "was trained on none of the cases");
	}
	if (sc_keys_load(v, keys, err, sizeof(err)) == -1)
		return host->fail(b->job, "stats: %s", err);
	snprintf(src, srclen, "%s", v);
	*have = 1;
	return 0;
}

static cJSON *
case_json(const struct bake *b, int ci, const struct sc_row *row, const char *train_key)
{
	cJSON *o = cJSON_CreateObject(), *ps, *x0;
	const struct sc_case *c = &b->cases[ci];
	int first = -1, varied = 0;

	cJSON_AddStringToObject(o, "id", c->id);
	cJSON_AddStringToObject(o, "kind", c->kind == SC_GUARD ? "guard" : "route");
	cJSON_AddStringToObject(o, "group", c->group);
	cJSON_AddBoolToObject(o, "held_out", row->held_out);
	if (train_key)
		cJSON_AddStringToObject(o, "train_key", train_key);
	else
		cJSON_AddNullToObject(o, "train_key");
	cJSON_AddBoolToObject(o, "runnable", row->runnable);
	cJSON_AddStringToObject(o, "case_sha256", b->csha[ci]);
	if (b->kept[ci] != NULL) {
		/* Taken from an earlier bake: its passes as they were stored. */
		ps = cJSON_Duplicate(b->kept[ci], 1);
		cJSON_AddItemToObject(o, "passes", ps);
		cJSON_ArrayForEach(x0, ps) {
			int oc = sc_outcome_parse(cJSON_GetStringValue(
			    cJSON_GetObjectItemCaseSensitive(x0, "outcome")));
			if (first < 0)
				first = oc;
			else if (oc != first)
				varied = 1;
		}
	} else
		ps = cJSON_AddArrayToObject(o, "passes");
	for (int p = 0; p < b->passes && row->runnable && b->kept[ci] == NULL; p++) {
		const struct result *r = &b->res[ci * b->passes + p];
		cJSON *x = cJSON_CreateObject();
		cJSON_AddStringToObject(x, "outcome", sc_outcome_name(r->outcome));
		cJSON_AddStringToObject(x, "got", r->got);
		if (r->why[0])
			cJSON_AddStringToObject(x, "why", r->why);
		cJSON_AddStringToObject(x, "finish", r->finish);
		cJSON_AddNumberToObject(x, "s", (double)(long)(r->seconds * 1000) / 1000);
		cJSON_AddNumberToObject(x, "prompt_tokens", (double)r->prompt_tokens);
		cJSON_AddStringToObject(x, "output", r->output);
		cJSON_AddItemToArray(ps, x);
		if (first < 0)
			first = r->outcome;
		else if (r->outcome != first)
			varied = 1;
	}
	cJSON_AddNumberToObject(o, "passed", sc_row_passed(row));
	cJSON_AddNumberToObject(o, "runs", row->runs);
	/* The spread between passes: at temperature 0 an answer that
	 * changes between passes is worth knowing (F15, F16). */
	cJSON_AddBoolToObject(o, "varied", varied);
	return o;
}

/*
 * Per-case reuse. A bake that runs (its job's key missed: the case file
 * changed, or the job's other inputs did) takes, case by case, the
 * results an earlier bake of the same identity stored for a case whose
 * canonical text (sc_case_digest, id included) is this case's: what
 * decides an answer and its score is the identity, sha256 over the
 * stored row's form, this plugin's own bytes (the scoring), the server
 * (the Ollama version, the manifest and weights digests the tag serves:
 * ollama_reuse_key), the system prompt, the capability list with its
 * flags (disabled included), passes, num_ctx (as resolved), max_tokens,
 * seed, shift, max_bytes_per_token and concurrency (batched requests
 * may answer otherwise). Held-out is not in it: a row's held_out is made
 * again from this job's stats. A bake that succeeds stores the value
 * bake.reuse/IDENTITY, so value_history() of that key lists the earlier
 * bakes that may stand; each case's row (case/ID) carries its
 * case_sha256. Through the openai backend the server cannot say what it
 * serves: nothing is taken. -1 with why when there is no identity.
 */
static int
bake_identity(struct bake *b, pl_job *job, char hex[65], char *why, size_t len)
{
	char srv[2048], plug[65] = "unknown";
	Dl_info dl;

	if (b->chat.backend != CHAT_OLLAMA) {
		snprintf(why, len, "the openai backend's server does not say which weights it "
		    "serves");
		return -1;
	}
	if (ollama_reuse_key(b->chat.url, b->chat.model, srv, sizeof(srv)) == -1) {
		snprintf(why, len, "what %s serves cannot be read: %s", b->chat.model, srv);
		return -1;
	}
	if (dladdr((void *)bake_identity, &dl) == 0 || dl.dli_fname == NULL ||
	    plc_sha256_file(dl.dli_fname, plug) == -1) {
		snprintf(why, len, "the bake plugin's own file cannot be read");
		return -1;
	}
	cJSON *o = cJSON_CreateObject();
	char sys[65], num[64];
	const char *shift = host->get(job, "shift");
	plc_sha256_buf(b->system, strlen(b->system), sys);
	cJSON_AddStringToObject(o, "rows", "case/ID with case_sha256, passes as stored");
	cJSON_AddStringToObject(o, "plugin", plug);
	cJSON_AddStringToObject(o, "server", srv);
	cJSON_AddStringToObject(o, "system", sys);
	cJSON_AddItemToObject(o, "capabilities", sc_caps_canon(&b->caps));
	cJSON_AddNumberToObject(o, "passes", b->passes);
	cJSON_AddNumberToObject(o, "num_ctx", b->chat.num_ctx);
	cJSON_AddNumberToObject(o, "max_tokens", b->chat.max_tokens);
	cJSON_AddNumberToObject(o, "seed", (double)b->chat.seed);
	cJSON_AddStringToObject(o, "shift", shift ? (b->chat.shift ? "yes" : "no") : "unset");
	snprintf(num, sizeof(num), "%.17g", b->chat.max_bytes_per_token);
	cJSON_AddStringToObject(o, "max_bytes_per_token", num);
	cJSON_AddNumberToObject(o, "concurrency", b->concurrency);
	char *text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	plc_sha256_buf(text, strlen(text), hex);
	free(text);
	return 0;
}

/* The passes of a stored row, into case ci's results: 0, or -1 when the
 * row does not stand for it (another case, another pass count, a bake
 * error in a pass: that one runs again). */
static int
take_row(struct bake *b, int ci, const cJSON *row)
{
	const cJSON *ps = cJSON_GetObjectItemCaseSensitive(row, "passes"), *x;
	int p = 0;

	if (!cJSON_IsArray(ps) || cJSON_GetArraySize(ps) != b->passes ||
	    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "runnable")) ||
	    strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "id")) ?: "",
	    b->cases[ci].id) != 0 ||
	    strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row,
	    "case_sha256")) ?: "", b->csha[ci]) != 0)
		return -1;
	cJSON_ArrayForEach(x, ps) {
		struct result *r = &b->res[ci * b->passes + p++];
		int oc = sc_outcome_parse(cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(x, "outcome")));
		const cJSON *sec = cJSON_GetObjectItemCaseSensitive(x, "s");
		const cJSON *tok = cJSON_GetObjectItemCaseSensitive(x, "prompt_tokens");
		const char *v;
		if (oc < 0 || oc == SC_ERROR || oc == SC_SKIPPED)
			return -1;
		memset(r, 0, sizeof(*r));
		r->outcome = oc;
		r->chat = CHAT_OK;
		r->seconds = cJSON_IsNumber(sec) ? sec->valuedouble : 0;
		r->prompt_tokens = cJSON_IsNumber(tok) ? (long)tok->valuedouble : 0;
		if ((v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "got"))))
			snprintf(r->got, sizeof(r->got), "%s", v);
		if ((v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "why"))))
			snprintf(r->why, sizeof(r->why), "%s", v);
		if ((v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "finish"))))
			snprintf(r->finish, sizeof(r->finish), "%s", v);
		if ((v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "output"))))
			snprintf(r->output, sizeof(r->output), "%s", v);
	}
	b->kept[ci] = cJSON_Duplicate(ps, 1);
	return 0;
}

/* Whether reuse = no is set on the job or in [run]. */
static int
reuse_off(pl_job *job)
{
	const char *v = host->run_get(job, "reuse");

	if (!host->get_bool(job, "reuse", 1))
		return 1;
	return v != NULL && (strcmp(v, "no") == 0 || strcmp(v, "false") == 0 ||
	    strcmp(v, "off") == 0 || strcmp(v, "0") == 0);
}

/* Take what earlier bakes of identity ident stored for this job's cases
 * (see bake_identity); the others go on b->todo. */
static void
reuse_cases(struct bake *b, pl_job *job, const char *ident)
{
	char key[128], *text;
	cJSON *cands = NULL, *c;
	const char *me_run = host->run_name(job), *me_job = host->job_name(job);
	int nsrc = 0;

	snprintf(key, sizeof(key), "bake.reuse/%s", ident);
	if (ident != NULL && (text = host->value_history(job, key, 64)) != NULL) {
		cands = cJSON_Parse(text);
		free(text);
	}
	/* Not this job itself: an attempt before that got as far. */
	for (c = cands ? cands->child : NULL; c != NULL; ) {
		cJSON *next = c->next;
		if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "run")) ?: "",
		    me_run) == 0 && strcmp(cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(c, "job")) ?: "", me_job) == 0)
			cJSON_Delete(cJSON_DetachItemViaPointer(cands, c));
		c = next;
	}
	for (int i = 0; i < b->ncases; i++) {
		cJSON *hist = NULL, *h;
		if (cJSON_GetArraySize(cands) > 0 && !sc_case_skipped(&b->cases[i], &b->caps)) {
			snprintf(key, sizeof(key), "case/%s", b->cases[i].id);
			if ((text = host->value_history(job, key, 0)) != NULL) {
				hist = cJSON_Parse(text);
				free(text);
			}
		}
		cJSON_ArrayForEach(h, hist) {
			const char *hr = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(h, "run"));
			const char *hj = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(h, "job"));
			cJSON *row = NULL;
			int ok = 0;
			if (hr == NULL || hj == NULL)
				continue;
			cJSON_ArrayForEach(c, cands)
				if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c,
				    "run")) ?: "", hr) == 0 && strcmp(cJSON_GetStringValue(
				    cJSON_GetObjectItemCaseSensitive(c, "job")) ?: "", hj) == 0)
					break;
			if (c == NULL)
				continue;
			row = cJSON_Parse(cJSON_GetStringValue(
			    cJSON_GetObjectItemCaseSensitive(h, "value")) ?: "");
			ok = row != NULL && take_row(b, i, row) == 0;
			cJSON_Delete(row);
			if (!ok)
				continue;
			b->reused++;
			/* The sources, in the order they were first taken from. */
			if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "taken"))) {
				size_t n = strlen(b->from);
				cJSON_AddBoolToObject(c, "taken", 1);
				if (nsrc++ < 3)
					snprintf(b->from + n, sizeof(b->from) - n, "%s%s/%s",
					    n ? ", " : "", hr, hj);
				else if (nsrc == 4)
					snprintf(b->from + n, sizeof(b->from) - n, ", ...");
			}
			break;
		}
		cJSON_Delete(hist);
		if (b->kept[i] == NULL)
			b->todo[b->ntodo++] = i;
	}
	cJSON_Delete(cands);
}

static int
bake_run(pl_job *job)
{
	struct bake b;
	struct sc_keys keys;
	struct sc_row *rows = NULL;
	struct sc_agg agg;
	char err[1024], digest[65], note[256], stats_src[4096], ident[65] = "";
	char reuse_msg[700] = "";
	const char *v;
	int have_keys = 0, have_ident = 0, rc = PL_EFAIL;

	memset(&b, 0, sizeof(b));
	memset(&keys, 0, sizeof(keys));
	memset(&agg, 0, sizeof(agg));
	b.job = job;
	pthread_mutex_init(&b.mu, NULL);
	pthread_cond_init(&b.cv, NULL);

	b.passes = (int)host->get_int(job, "passes", 0);
	b.concurrency = (int)host->get_int(job, "concurrency", 0);
	if (b.passes < 1 || b.passes > SC_MAX_PASSES) {
		rc = host->fail(job, "passes: %d is not between 1 and %d", b.passes, SC_MAX_PASSES);
		goto out;
	}
	if (b.concurrency < 1 || b.concurrency > 64) {
		rc = host->fail(job, "concurrency: %d is not between 1 and 64", b.concurrency);
		goto out;
	}
	if ((v = host->input(job, "capabilities")) == NULL ||
	    sc_caps_load(v, &b.caps, err, sizeof(err)) == -1) {
		rc = host->fail(job, "capabilities: %s", v ? err : "cannot resolve the path");
		goto out;
	}
	if ((v = host->get(job, "disabled")) != NULL) {
		char *list = strdup(v), *w, *save = NULL;
		for (w = strtok_r(list, " ,\t", &save); w; w = strtok_r(NULL, " ,\t", &save))
			if (sc_caps_disable(&b.caps, w) == -1) {
				rc = host->fail(job, "disabled: %s is not in the capability list", w);
				free(list);
				goto out;
			}
		free(list);
	}
	if ((v = host->input(job, "cases")) == NULL ||
	    sc_cases_load(v, &b.caps, &b.cases, &b.ncases, err, sizeof(err)) == -1) {
		rc = host->fail(job, "cases: %s", v ? err : "cannot resolve the path");
		goto out;
	}
	if ((v = host->input(job, "system")) == NULL ||
	    (b.system = plc_read_file(v, NULL, 16u << 20)) == NULL) {
		rc = host->fail(job, "system: %s: %s", v ? v : "?", strerror(errno));
		goto out;
	}
	if (load_stats(&b, &keys, &have_keys, stats_src, sizeof(stats_src)) != 0) {
		rc = PL_EFAIL;
		goto out;
	}
	if (strstr(b.system, "{{channel}}") == NULL)
		for (int i = 0; i < b.ncases; i++)
			if (strcmp(b.cases[i].channel, "default") != 0) {
				host->log(job, PL_LOG_WARN, "case %s routes on channel %s, but the "
				    "system prompt has no {{channel}}: every case routes alike (G25)",
				    b.cases[i].id, b.cases[i].channel);
				break;
			}
	sc_case_set_digest(b.cases, b.ncases, b.system, &b.caps, digest);
	b.schema = sc_schema(&b.caps);

	if (chat_init(&b.chat, host->get(job, "backend"), host->get(job, "url"),
	    host->get(job, "model"), err, sizeof(err)) == -1) {
		rc = host->fail(job, "%s", err);
		goto out;
	}
	if ((b.chat.num_ctx = bake_num_ctx(&b)) < 0) {
		rc = PL_EFAIL;
		goto out;
	}
	if (host->get(job, "shift") != NULL)
		b.chat.shift = host->get_bool(job, "shift", 0);
	b.chat.seed = host->get_int(job, "seed", 0);
	b.chat.max_tokens = (int)host->get_int(job, "max_tokens", 0);
	b.chat.timeout = host->get_duration(job, "case_timeout", 0);
	b.chat.max_bytes_per_token = host->get_double(job, "max_bytes_per_token", 0);
	const char *keep = host->get(job, "keep_alive");
	if (keep == NULL)
		keep = "";
	if (b.chat.backend == CHAT_OLLAMA && *keep)
		keep_alive_json(keep, b.chat.keep_alive, sizeof(b.chat.keep_alive));
	if (b.chat.num_ctx < 256 || b.chat.max_tokens < 1) {
		rc = host->fail(job, "num_ctx %d / max_tokens %d out of range", b.chat.num_ctx,
		    b.chat.max_tokens);
		goto out;
	}
	/* G01: know the context before the first case, not after the last. */
	if (chat_check_context(&b.chat, err, sizeof(err)) == -1) {
		rc = host->fail(job, "context check: %s", err);
		goto out;
	}
	host->log(job, PL_LOG_INFO, "bake %s via %s at %s: %d cases x %d passes, "
	    "num_ctx %d (server %d), case set %.12s", b.chat.model,
	    b.chat.backend == CHAT_OLLAMA ? "ollama" : "openai", b.chat.url, b.ncases,
	    b.passes, b.chat.num_ctx, b.chat.server_ctx, digest);

	b.res = calloc((size_t)b.ncases * b.passes, sizeof(*b.res));
	rows = calloc(b.ncases, sizeof(*rows));
	b.csha = calloc(b.ncases ? b.ncases : 1, sizeof(*b.csha));
	b.kept = calloc(b.ncases ? b.ncases : 1, sizeof(*b.kept));
	b.todo = calloc(b.ncases ? b.ncases : 1, sizeof(*b.todo));
	if (b.res == NULL || rows == NULL || b.csha == NULL || b.kept == NULL ||
	    b.todo == NULL) {
		rc = host->fail(job, "out of memory");
		goto out;
	}
	for (int i = 0; i < b.ncases; i++)
		sc_case_digest(&b.cases[i], b.csha[i]);
	have_ident = bake_identity(&b, job, ident, err, sizeof(err)) == 0;
	if (!have_ident)
		host->log(job, PL_LOG_INFO, "per-case reuse: none: %s", err);
	else if (reuse_off(job))
		host->log(job, PL_LOG_INFO, "per-case reuse: off (reuse = no)");
	if (have_ident && !reuse_off(job))
		reuse_cases(&b, job, ident);
	else
		for (int i = 0; i < b.ncases; i++)
			b.todo[b.ntodo++] = i;
	int nran = 0;
	for (int i = 0; i < b.ntodo; i++)
		if (!sc_case_skipped(&b.cases[b.todo[i]], &b.caps))
			nran++;
	if (b.reused > 0)
		snprintf(reuse_msg, sizeof(reuse_msg), "%d of %d cases reused from %s, %d run",
		    b.reused, b.ncases, b.from, nran);
	else
		snprintf(reuse_msg, sizeof(reuse_msg), "0 of %d cases reused, %d run", b.ncases,
		    nran);
	host->log(job, PL_LOG_INFO, "%s", reuse_msg);
	int comparable = 0;
	char served[80] = "", tagd[80] = "";
	/* Nothing to ask: no model loaded, none evicted, no speed. */
	if (nran == 0)
		snprintf(note, sizeof(note), "speed not measured: no case ran");
	else if (b.chat.backend == CHAT_OLLAMA) {
		comparable = ollama_placement(&b, host->get_bool(job, "evict", 0),
		    keep, note, sizeof(note), served, sizeof(served));
		/*
		 * The runner must be the tag's: a tag overwritten while loaded
		 * keeps its old runner, which goes on answering for the old
		 * weights (G24). /api/ps prints the manifest
		 * digest of the tag that loaded the runner.
		 */
		struct ollama o;
		if (served[0] && ollama_init(&o, b.chat.url, 60) == 0 &&
		    ollama_manifest_digest(&o, b.chat.model, tagd, sizeof(tagd)) == 0 &&
		    strcmp(served, tagd) != 0) {
			rc = host->fail(job, "%s: the loaded runner is manifest %.12s, the tag is "
			    "%.12s: an older runner still serves it (unload it and bake again)",
			    b.chat.model, served, tagd);
			goto out;
		}
	} else
		snprintf(note, sizeof(note), "the openai backend does not report GPU placement");
	if (!comparable && nran > 0)
		host->log(job, PL_LOG_WARN, "speed is not comparable: %s (G22)", note);

	if ((rc = run_all(&b)) != PL_OK) {
		host->fail(job, "cancelled after %d of %d case-passes", b.done, b.total);
		goto out;
	}
	if (b.chat.backend == CHAT_OLLAMA && comparable) {
		/* Still whole on the GPU at the end? Something may have
		 * loaded beside it during the bake. */
		char note2[256];
		char served2[80];
		comparable = ollama_placement(&b, 0, keep, note2, sizeof(note2), served2,
		    sizeof(served2));
		if (!comparable) {
			snprintf(note, sizeof(note), "after the bake: %s", note2);
			host->log(job, PL_LOG_WARN, "speed is not comparable: %s (G22)", note);
		}
	}

	/* Rows, per-case values, aggregates. */
	int errors = 0;
	const char *first_error = NULL;
	int first_error_case = -1;
	for (int i = 0; i < b.ncases; i++) {
		struct sc_row *r = &rows[i];
		const struct sc_case *c = &b.cases[i];
		snprintf(r->id, sizeof(r->id), "%s", c->id);
		snprintf(r->group, sizeof(r->group), "%s", c->group);
		r->kind = c->kind;
		r->held_out = sc_held_out(c, have_keys ? &keys : NULL);
		r->no_key = c->train_key == NULL;
		r->runnable = !sc_case_skipped(c, &b.caps);
		for (int p = 0; r->runnable && p < b.passes; p++) {
			const struct result *x = &b.res[i * b.passes + p];
			r->runs++;
			r->seconds += x->seconds;
			if (x->outcome == SC_PASS)
				r->pass_mask |= 1u << p;
			if (x->outcome == SC_ERROR) {
				r->errors++;
				if (first_error == NULL) {
					first_error = x->why;
					first_error_case = i;
				}
			}
		}
		errors += r->errors;
		cJSON *cj = case_json(&b, i, r, c->train_key);
		char *text = cJSON_PrintUnformatted(cj), key[SC_NAME_MAX + 8];
		snprintf(key, sizeof(key), "case/%s", c->id);
		if (host->value_set(job, key, text) != PL_OK) {
			free(text);
			cJSON_Delete(cj);
			rc = host->fail(job, "cannot store %s", key);
			goto out;
		}
		free(text);
		cJSON_Delete(cj);
	}
	if (sc_aggregate(rows, b.ncases, b.passes, &agg) == -1) {
		rc = host->fail(job, "aggregate failed");
		goto out;
	}
	/* Speed is what this job measured: of the cases that ran. */
	double ran_s = 0;
	int ran_n = 0;
	for (int i = 0; i < b.ntodo; i++) {
		ran_s += rows[b.todo[i]].seconds;
		ran_n += rows[b.todo[i]].runs;
	}
	agg.s_per_case = ran_n ? ran_s / ran_n : 0;
	if (ran_n == 0) {
		comparable = 0;
		snprintf(note, sizeof(note), "speed not measured: no case ran (%d reused)",
		    b.reused);
	} else if (b.reused > 0) {
		size_t n = strlen(note);
		snprintf(note + n, sizeof(note) - n, "; timed on the %d case%s that ran, not the "
		    "%d reused", nran, nran == 1 ? "" : "s", b.reused);
	}

	cJSON *sum = sc_agg_json(&agg);
	cJSON_AddStringToObject(sum, "case_set", digest);
	cJSON_AddStringToObject(sum, "model", b.chat.model);
	cJSON_AddStringToObject(sum, "backend", b.chat.backend == CHAT_OLLAMA ? "ollama" : "openai");
	cJSON_AddStringToObject(sum, "url", b.chat.url);
	cJSON_AddNumberToObject(sum, "num_ctx", b.chat.num_ctx);
	cJSON_AddNumberToObject(sum, "server_ctx", b.chat.server_ctx);
	cJSON_AddNumberToObject(sum, "seed", (double)b.chat.seed);
	cJSON_AddNumberToObject(sum, "concurrency", b.concurrency);
	cJSON_AddStringToObject(sum, "stats", stats_src);
	cJSON_AddBoolToObject(sum, "speed_comparable", comparable);
	cJSON_AddStringToObject(sum, "speed_note", note);
	cJSON_AddBoolToObject(sum, "complete", errors == 0);
	cJSON_AddNumberToObject(sum, "cases_reused", b.reused);
	cJSON_AddNumberToObject(sum, "cases_run", nran);
	cJSON_AddStringToObject(sum, "reused_from", b.from);
	cJSON_AddItemToObject(sum, "rows", sc_rows_json(rows, b.ncases));
	char *text = cJSON_PrintUnformatted(sum);
	cJSON_Delete(sum);
	int vrc = host->value_set(job, "bake.summary", text);
	char path[4200];
	snprintf(path, sizeof(path), "%s/bake.json", host->workdir(job));
	int wrc = plc_write_file_atomic(path, text, strlen(text), 0644);
	free(text);
	if (vrc != PL_OK) {
		rc = host->fail(job, "cannot store bake.summary");
		goto out;
	}
	if (wrc == -1) {
		rc = host->fail(job, "%s: %s", path, strerror(errno));
		goto out;
	}
	host->artifact(job, "results", path);
	host->value_set(job, "bake.case_set", digest);

	host->metric(job, "accuracy", 0, agg.overall.acc);
	host->metric(job, "held_out_accuracy", 0, agg.held_out.acc);
	host->metric(job, "guard_breaches", 0, agg.guard_breaches);
	if (ran_n > 0)
		host->metric(job, "s_per_case", 0, agg.s_per_case);
	host->value_set(job, "bake.reuse", reuse_msg);
	host->value_set(job, "message", reuse_msg);
	host->log(job, PL_LOG_INFO, "overall %.2f%% [%.2f, %.2f] of %d runnable (%d not "
	    "runnable); held-out %.2f%% of %d; %d held-out guard breach%s; spread %.2f pp "
	    "over %d passes; %.3f s per case%s; %d bake error%s",
	    agg.overall.acc * 100, agg.overall.lo * 100, agg.overall.hi * 100, agg.runnable,
	    agg.skipped, agg.held_out.acc * 100, agg.held_out_cases, agg.guard_breaches,
	    agg.guard_breaches == 1 ? "" : "es", agg.spread_pp, b.passes, agg.s_per_case,
	    ran_n == 0 ? " (not measured: no case ran)" : b.reused > 0 ?
	    " (of the cases that ran)" : comparable ? "" : " (not comparable)", errors,
	    errors == 1 ? "" : "s");

	if (errors > host->get_int(job, "max_errors", 0)) {
		rc = host->fail(job, "%d case-pass%s failed to get an honest answer "
		    "(first: case %s, %s:%d: %s); the results are stored but incomplete",
		    errors, errors == 1 ? "" : "es", b.cases[first_error_case].id,
		    host->input(job, "cases"), b.cases[first_error_case].line, first_error);
		goto out;
	}
	/* Last: the mark that these rows may stand for a later bake's. */
	if (have_ident) {
		char mk[128], mv[64];
		snprintf(mk, sizeof(mk), "bake.reuse/%s", ident);
		snprintf(mv, sizeof(mv), "{\"cases\":%d}", b.ncases);
		host->value_set(job, mk, mv);
	}
	rc = PL_OK;
out:
	sc_agg_free(&agg);
	free(rows);
	free(b.res);
	for (int i = 0; b.kept != NULL && i < b.ncases; i++)
		cJSON_Delete(b.kept[i]);
	free(b.kept);
	free(b.csha);
	free(b.todo);
	cJSON_Delete(b.schema);
	free(b.system);
	sc_cases_free(b.cases, b.ncases);
	sc_caps_free(&b.caps);
	sc_keys_free(&keys);
	pthread_mutex_destroy(&b.mu);
	pthread_cond_destroy(&b.cv);
	return rc;
}

static int
bake_check(pl_job *job)
{
	const char *v = host->get(job, "backend");

	if (v && strcmp(v, "ollama") != 0 && strcmp(v, "openai") != 0)
		host->check_error(job, "backend", "must be ollama or openai, not \"%s\"", v);

	/* The capability list and the case file are small: check them whole
	 * at submit, so that a typo in a case is not found after a 12-hour
	 * training run; not in a check without files. */
	struct sc_caps caps;
	struct sc_case *cases;
	int ncases;
	char err[1024];
	const char *cp = host->input(job, "capabilities"), *cs = host->input(job, "cases");
	if (cp == NULL || !host->check_files(job))
		return PL_OK;
	if (sc_caps_load(cp, &caps, err, sizeof(err)) == -1) {
		host->check_error(job, "capabilities", "%s", err);
		return PL_OK;
	}
	if ((v = host->get(job, "disabled")) != NULL) {
		char *list = strdup(v), *w, *save = NULL;
		for (w = strtok_r(list, " ,\t", &save); w; w = strtok_r(NULL, " ,\t", &save))
			if (sc_caps_disable(&caps, w) == -1)
				host->check_error(job, "disabled", "%s is not in %s", w, cp);
		free(list);
	}
	if (cs != NULL) {
		if (sc_cases_load(cs, &caps, &cases, &ncases, err, sizeof(err)) == -1)
			host->check_error(job, "cases", "%s", err);
		else
			sc_cases_free(cases, ncases);
	}
	sc_caps_free(&caps);
	return PL_OK;
}

/* Reuse: a bake of the same key (its case file, system prompt,
 * capabilities and options by their digests and values) through the same
 * Ollama version, of the tag serving the same manifest and weights (the
 * GGUF register made) stands for this one. Through the openai backend the
 * server cannot say what it serves: never reused. */
static int
bake_reuse_key(pl_job *job, char *buf, size_t len)
{
	const char *b = host->get(job, "backend");
	if (b != NULL && strcmp(b, "ollama") != 0) {
		snprintf(buf, len, "the %s backend's server does not say which weights it serves",
		    b);
		return PL_ENOSYS;
	}
	return ollama_reuse_key(host->get(job, "url"), host->get(job, "model"), buf, len) == 0 ?
	    PL_OK : PL_EIO;
}

static const struct pl_stage bake_stage = PL_STAGE(
	.name = "bake",
	.summary = "score a served model on a case file, every pass stored",
	.flags = PL_STAGE_REUSE,
	.keys = bake_keys,
	.check = bake_check,
	.run = bake_run,
	.reuse_key = bake_reuse_key);

PL_PLUGIN(&host, &bake_stage)
