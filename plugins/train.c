/*
 * train.c: the train stage. Runs jobs/train.py and owns the policy the
 * reference program lost the most hours to:
 *
 *  - Before each launch it lists what Ollama has loaded (/api/ps) and
 *    evicts everything but keep_loaded and the embedding model, waiting
 *    until the runners are really gone (the unload answer comes first).
 *    The embedding model is never evicted: its eviction livelocked its
 *    client (G21).
 *  - A launch succeeded only when the job reported loop_started, not when
 *    the process started. A death before it (an out-of-memory because a
 *    model was reloaded onto the GPU within seconds, G21; a kill by the
 *    host's low-memory monitor) means evict again and relaunch, up to
 *    launch_retries times with a doubling backoff.
 *  - A death after the loop started means relaunch resuming from the
 *    newest complete checkpoint (its COMPLETE marker written last, every
 *    file hashing as recorded; checked here, not trusted), up to
 *    max_resumes times.
 *  - With evict_during_training a watcher thread evicts models that
 *    reappear while the job runs.
 *  - Per-step metrics are stored by the host from the job's events, one
 *    row per step, so the loss curve spans every segment (G30); the
 *    adapter is the job's artifact event; the run's real peak is stored
 *    with the probe's figure as a calibration pair (value "probe_pair")
 *    for the next probe (F24).
 *  - The ML stack each launch reports (its stack event: the lock and its
 *    digest, the versions of torch, transformers, PEFT, bitsandbytes) is
 *    stored as the job value "stack", which `pipelinectl report` shows.
 *
 * The stage is adoptable: its processes are named launch-1, launch-2, ...
 * and its counters live in the job value "train_state", so a restarted
 * daemon re-enters the run hook, re-adopts the launch that was running and
 * continues with the same counts.
 *
 * A job program that fails on its own (exit status 1, or 2 for bad input)
 * is not relaunched: retrying a bug fifteen times only hides it. Only an
 * out-of-memory (exit 3), a kill by a signal or a lost process count as
 * deaths to relaunch or resume after.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "plio.h"
#include "inputcheck.h"
#include "ollama.h"
#include "pyjob.h"
#include "safetensors.h"
#include "trainkeys.h"
#include "vramcal.h"

static const struct pl_host *host;

static const struct pl_key train_keys[] = {
	PL_TRAIN_RECIPE_KEYS,
	PL_KEY_INT(.name = "save_steps", .def = "25", .flags = PL_KEY_MIN, .min = 0,
	    .help = "save a checkpoint every this many optimizer steps"),
	PL_KEY_INT(.name = "test_stall_at_step", .def = "0", .flags = PL_KEY_HIDDEN,
	    .help = "test only: the job sleeps after this step's events"),
	PL_KEY_BOOL(.name = "resume", .def = "yes", .flags = PL_KEY_VOLATILE,
	    .help = "start from the newest complete checkpoint already in the work directory"),
	PL_KEY_STRING(.name = "ollama_url", .def = "", .flags = PL_KEY_VOLATILE,
	    .help = "Ollama to evict models from before each launch (empty: none)"),
	PL_KEY_LIST(.name = "keep_loaded", .def = "", .flags = PL_KEY_VOLATILE, .help = "models never evicted"),
	PL_KEY_STRING(.name = "embedding_model", .def = "",
	    .help = "the embedding model: never evicted (G21)"),
	PL_KEY_DURATION(.name = "unload_wait", .def = "30",
	    .help = "how long to wait for evicted runners to leave /api/ps"),
	PL_KEY_INT(.name = "launch_retries", .def = "15", .flags = PL_KEY_MIN, .min = 0,
	    .help = "relaunches allowed when the job dies before its training loop starts"),
	PL_KEY_DURATION(.name = "launch_backoff", .def = "5",
	    .help = "delay before the first relaunch; doubles each time"),
	PL_KEY_DURATION(.name = "launch_backoff_max", .def = "60",
	    .help = "cap of the relaunch delay"),
	PL_KEY_INT(.name = "max_resumes", .def = "10", .flags = PL_KEY_MIN, .min = 0,
	    .help = "relaunches from a checkpoint after deaths inside the training loop"),
	PL_KEY_BOOL(.name = "evict_during_training", .def = "no",
	    .help = "evict models that reappear while the job runs"),
	PL_KEY_DURATION(.name = "watch_interval", .def = "2",
	    .help = "how often that watcher lists /api/ps"),
	PL_KEY_STRING(.name = "probe_job", .def = "probe",
	    .help = "the job of this run whose probe value the calibration pair uses"),
	PL_KEY_FLOAT(.name = "probe_mb",
	    .help = "the probe's peak in MB, when no probe job ran (by hand)"),
	PL_KEY_STRING(.name = "gpu",
	    .help = "the GPU's name for calibration (default: the probe's)"),
	PL_KEY_STRING(.name = "recipe",
	    .help = "the recipe's name for calibration (default: the probe's)"),
	PL_KEY_END
};

/* Counters kept in the job value "train_state" (see the top comment). */
struct train_state {
	int attempt;
	int seq;            /* the launch-N being, or about to be, run */
	int launched;       /* seq of the launch already spawned (re-adopt it) */
	int fails;          /* launches in a row that died before the loop */
	int resumes;
	int loop_started;   /* launch `seq` reported loop_started */
	int ever_started;   /* some launch of this attempt reached the loop */
	double peak_mb;
};

struct watcher {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	int running;
	char *msgs;         /* newline-separated, for the job thread to log */
	size_t mlen;
	int evicted;
};

struct train {
	pl_job *job;
	struct train_state st;
	int use_ollama;
	char url[512];
	char **keep;        /* keep_loaded plus embedding_model */
	int nkeep;
	double unload_wait;
	/* This launch. */
	char adapter[PATH_MAX];
	char oom[256];
	long last_ckpt;
	char resume_from[PATH_MAX];   /* the checkpoint this launch resumes from, or "" */
	char launch[32];              /* this launch's process name */
	struct watcher w;
};

/* ---- state ---------------------------------------------------------- */

static void
state_save(struct train *t)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "{\"attempt\":%d,\"seq\":%d,\"launched\":%d,"
	    "\"fails\":%d,\"resumes\":%d,\"loop_started\":%s,\"ever_started\":%s,"
	    "\"peak_mb\":%.1f}", t->st.attempt, t->st.seq, t->st.launched,
	    t->st.fails, t->st.resumes, t->st.loop_started ? "true" : "false",
	    t->st.ever_started ? "true" : "false", t->st.peak_mb);
	int rc = host->value_set(t->job, "train_state", buf);
	if (rc != PL_OK)
		host->log(t->job, PL_LOG_WARN, "train: storing train_state: %s",
		    host->strerror(rc));
}

static int
jint(const cJSON *o, const char *k, int def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? v->valueint : def;
}

/* Load the counters of this attempt, if a previous entry of the run hook
 * (before a daemon restart) left them. */
static void
state_load(struct train *t)
{
	memset(&t->st, 0, sizeof(t->st));
	t->st.attempt = host->attempt(t->job);
	t->st.seq = 1;
	char *v = host->value_get(t->job, NULL, host->job_name(t->job), "train_state");
	if (v == NULL)
		return;
	cJSON *o = cJSON_Parse(v);
	free(v);
	if (cJSON_IsObject(o) && jint(o, "attempt", -1) == t->st.attempt) {
		t->st.seq = jint(o, "seq", 1);
		t->st.launched = jint(o, "launched", 0);
		t->st.fails = jint(o, "fails", 0);
		t->st.resumes = jint(o, "resumes", 0);
		t->st.loop_started = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "loop_started"));
		t->st.ever_started = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ever_started"));
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "peak_mb");
		t->st.peak_mb = cJSON_IsNumber(p) ? p->valuedouble : 0;
		host->log(t->job, PL_LOG_INFO, "train: re-entered at launch-%d (%d "
		    "failed launches, %d resumes so far)", t->st.seq, t->st.fails,
		    t->st.resumes);
	}
	cJSON_Delete(o);
}

/* ---- eviction -------------------------------------------------------- */

static int
is_kept(const struct train *t, const struct ollama_model *m)
{
	for (int i = 0; i < t->nkeep; i++)
		if (ollama_model_is(m, t->keep[i]))
			return 1;
	return 0;
}

static void
split_keep(struct train *t)
{
	const char *lists[2] = { host->get(t->job, "keep_loaded"),
	    host->get(t->job, "embedding_model") };
	for (int l = 0; l < 2; l++) {
		if (lists[l] == NULL)
			continue;
		char *dup = strdup(lists[l]);
		for (char *s = NULL, *w = strtok_r(dup, ", \t", &s); w != NULL;
		    w = strtok_r(NULL, ", \t", &s)) {
			char **nk = realloc(t->keep, (size_t)(t->nkeep + 1) * sizeof(*nk));
			if (nk == NULL)
				break;
			t->keep = nk;
			t->keep[t->nkeep++] = strdup(w);
		}
		free(dup);
	}
}

/* Evict every loaded model but the kept ones and wait for their runners
 * to leave /api/ps. An Ollama that cannot be reached is logged, not
 * fatal: the launch itself tells whether the GPU is free. */
static void
evict(struct train *t)
{
	struct ollama c;
	struct ollama_list l;
	char **gone = NULL;
	int ngone = 0;

	ollama_init(&c, t->url, 10);
	if (ollama_ps(&c, &l) == -1) {
		host->log(t->job, PL_LOG_WARN, "train: listing loaded models: %s", c.error);
		return;
	}
	for (size_t i = 0; i < l.n; i++) {
		struct ollama_model *m = &l.v[i];
		if (is_kept(t, m)) {
			host->log(t->job, PL_LOG_INFO, "train: keeping %s loaded", m->name);
			continue;
		}
		if (ollama_unload(&c, m->name) == -1) {
			host->log(t->job, PL_LOG_WARN, "train: evicting %s: %s", m->name, c.error);
			continue;
		}
		host->log(t->job, PL_LOG_INFO, "train: evicting %s (%.0f MB on the GPU)",
		    m->name, (double)m->size_vram / 1048576.0);
		char **ng = realloc(gone, (size_t)(ngone + 1) * sizeof(*ng));
		if (ng == NULL)
			continue;
		gone = ng;
		gone[ngone++] = m->name;
	}
	/* The unload answer comes before the runner is gone (HACKING.md:
	 * Ollama): wait until ps no longer lists any of them. */
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ngone > 0) {
		struct ollama_list now;
		if (ollama_ps(&c, &now) == -1)
			break;
		int left = 0;
		for (int i = 0; i < ngone; i++)
			left += ollama_list_has(&now, gone[i]);
		ollama_list_free(&now);
		if (left == 0)
			break;
		struct timespec t1;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		if (el > t->unload_wait || host->cancelled(t->job)) {
			host->log(t->job, PL_LOG_WARN, "train: %d evicted model(s) still "
			    "listed by /api/ps after %.0f s; launching anyway", left, el);
			break;
		}
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	free(gone);
	ollama_list_free(&l);
}

/* ---- the watcher ------------------------------------------------------ */

static void
watcher_note(struct watcher *w, const char *fmt, ...) PL_PRINTF(2, 3);

static void
watcher_note(struct watcher *w, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	size_t n = strlen(line);
	pthread_mutex_lock(&w->mu);
	if (w->mlen < 65536) {
		char *nm = realloc(w->msgs, w->mlen + n + 2);
		if (nm != NULL) {
			w->msgs = nm;
			memcpy(w->msgs + w->mlen, line, n);
			w->msgs[w->mlen + n] = '\n';
			w->mlen += n + 1;
			w->msgs[w->mlen] = '\0';
		}
	}
	pthread_mutex_unlock(&w->mu);
}

/* The watcher runs on a thread of its own, which is not a job thread: it
 * does not call the host, it leaves its messages for the job thread to
 * log (watcher_flush, from the event callback and after the spawn). */
static void
watcher_flush(struct train *t)
{
	struct watcher *w = &t->w;
	if (!w->running)
		return;
	pthread_mutex_lock(&w->mu);
	char *m = w->msgs;
	w->msgs = NULL;
	w->mlen = 0;
	pthread_mutex_unlock(&w->mu);
	if (m == NULL)
		return;
	for (char *s = NULL, *line = strtok_r(m, "\n", &s); line; line = strtok_r(NULL, "\n", &s))
		host->log(t->job, PL_LOG_INFO, "train: %s", line);
	free(m);
}

static void *
watcher_main(void *arg)
{
	struct train *t = arg;
	struct watcher *w = &t->w;
	struct ollama c;
	double interval = host->get_duration(t->job, "watch_interval", 0);
	int warned = 0;

	if (interval < 0.05)
		interval = 0.05;
	ollama_init(&c, t->url, 10);
	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		double s = (double)until.tv_sec + (double)until.tv_nsec / 1e9 + interval;
		until.tv_sec = (time_t)s;
		until.tv_nsec = (long)((s - (double)until.tv_sec) * 1e9);
		while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
			;
		if (w->stop)
			break;
		pthread_mutex_unlock(&w->mu);
		struct ollama_list l;
		if (ollama_ps(&c, &l) == -1) {
			if (!warned++)
				watcher_note(w, "watcher: %s", c.error);
		} else {
			for (size_t i = 0; i < l.n; i++) {
				if (is_kept(t, &l.v[i]))
					continue;
				if (ollama_unload(&c, l.v[i].name) == 0) {
					watcher_note(w, "watcher: %s reappeared during training; "
					    "evicted it", l.v[i].name);
					w->evicted++;
				} else
					watcher_note(w, "watcher: evicting %s: %s", l.v[i].name,
					    c.error);
			}
			ollama_list_free(&l);
		}
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void
watcher_start(struct train *t)
{
	struct watcher *w = &t->w;
	w->stop = 0;
	if (pthread_create(&w->th, NULL, watcher_main, t) != 0) {
		host->log(t->job, PL_LOG_WARN, "train: cannot start the eviction "
		    "watcher: %s", strerror(errno));
		return;
	}
	w->running = 1;
}

static void
watcher_stop(struct train *t)
{
	struct watcher *w = &t->w;
	if (!w->running)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	watcher_flush(t);
	w->running = 0;
}

/* ---- one launch ------------------------------------------------------- */

/* The launch's stack event, less its type, as the value "stack". */
static void
stack_store(struct train *t, const char *line)
{
	cJSON *o = cJSON_Parse(line);
	char *s;

	if (o == NULL) {
		host->log(t->job, PL_LOG_WARN, "train: a stack event that is not JSON");
		return;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(o, "type");
	if ((s = cJSON_PrintUnformatted(o)) != NULL &&
	    host->value_set(t->job, "stack", s) != PL_OK)
		host->log(t->job, PL_LOG_WARN, "train: cannot store the value stack");
	free(s);
	cJSON_Delete(o);
}

static int
train_event(void *arg, const char *type, const char *line)
{
	struct train *t = arg;

	watcher_flush(t);
	if (strcmp(type, "loop_started") == 0) {
		if (!t->st.loop_started) {
			t->st.loop_started = 1;
			t->st.ever_started = 1;
			t->st.fails = 0;
			state_save(t);
		}
	} else if (strcmp(type, "metric") == 0) {
		char name[64];
		if (pyjob_event_str(line, "name", name, sizeof(name)) == 0 &&
		    strcmp(name, "peak_mb") == 0) {
			double v = pyjob_event_num(line, "value", 0);
			if (v > t->st.peak_mb)
				t->st.peak_mb = v;
		}
	} else if (strcmp(type, "memory") == 0) {
		double v = pyjob_event_num(line, "peak_mb", 0);
		if (v > t->st.peak_mb)
			t->st.peak_mb = v;
	} else if (strcmp(type, "artifact") == 0) {
		char name[64];
		if (pyjob_event_str(line, "name", name, sizeof(name)) == 0 &&
		    strcmp(name, "adapter") == 0)
			pyjob_event_str(line, "path", t->adapter, sizeof(t->adapter));
	} else if (strcmp(type, "checkpoint") == 0) {
		t->last_ckpt = (long)pyjob_event_num(line, "step", -1);
	} else if (strcmp(type, "resumed") == 0) {
		/* Where each relaunch resumed, as a metric beside the loss,
		 * so a plot of the loss can mark the segments. */
		double step = pyjob_event_num(line, "step", -1);
		if (step >= 0)
			host->metric(t->job, "resumed", (int64_t)step, step);
		/* The feed's job.resumed (and the train.resumed notification)
		 * is the stage's to publish, not the program's (the daemon
		 * publishes no "resumed" line of a job program): once the
		 * program confirms the resume the stage itself asked for. */
		if (step >= 0 && t->resume_from[0] != '\0') {
			cJSON *d = cJSON_CreateObject();
			cJSON_AddNumberToObject(d, "step", step);
			cJSON_AddStringToObject(d, "path", t->resume_from);
			cJSON_AddStringToObject(d, "launch", t->launch);
			char *text = cJSON_PrintUnformatted(d);
			cJSON_Delete(d);
			if (text != NULL)
				host->event(t->job, "resumed", text);
			free(text);
		}
	} else if (strcmp(type, "stack") == 0) {
		stack_store(t, line);
	} else if (strcmp(type, "shared_prefix") == 0) {
		char why[256] = "?";
		pyjob_event_str(line, "why", why, sizeof(why));
		if (strstr(line, "\"on\":true") != NULL)
			host->log(t->job, PL_LOG_INFO, "train: shared prefix on: %s; predicted "
			    "speed-up %.2fx (the step's tokens, plain over shared)", why,
			    pyjob_event_num(line, "predicted_speedup", 0));
		else
			host->log(t->job, PL_LOG_INFO, "train: shared prefix off: %s", why);
	} else if (strcmp(type, "oom") == 0) {
		char phase[32] = "?";
		pyjob_event_str(line, "phase", phase, sizeof(phase));
		snprintf(t->oom, sizeof(t->oom), "out of GPU memory in %s: %.1f MB of %.1f MB",
		    phase, pyjob_event_num(line, "mb", 0),
		    pyjob_event_num(line, "capacity_mb", 0));
	}
	return 0;
}

static void
skip_ckpt(void *arg, const char *dir, const char *why)
{
	struct train *t = arg;
	host->log(t->job, PL_LOG_WARN, "train: checkpoint %s passed over: %s", dir, why);
}

/* Sleep for s seconds in short slices; 1 when the job was cancelled. */
static int
nap(pl_job *job, double s)
{
	while (s > 0) {
		if (host->cancelled(job))
			return 1;
		double d = s < 0.2 ? s : 0.2;
		struct timespec ts = { (time_t)d, (long)((d - (double)(time_t)d) * 1e9) };
		nanosleep(&ts, NULL);
		s -= d;
	}
	return host->cancelled(job);
}

/* ---- calibration ------------------------------------------------------ */

/* Store the real peak with the probe's figure as a calibration pair. */
static void
add_pair(struct train *t)
{
	pl_job *job = t->job;
	double probe_mb = -1;
	char gpu[128] = "", recipe[PATH_MAX] = "";
	const char *pj = host->get(job, "probe_job");
	char *pv = pj && *pj ? host->value_get(job, NULL, pj, "probe") : NULL;

	if (pv != NULL) {
		cJSON *o = cJSON_Parse(pv);
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "probe_mb");
		if (cJSON_IsNumber(x))
			probe_mb = x->valuedouble;
		x = cJSON_GetObjectItemCaseSensitive(o, "gpu");
		if (cJSON_IsString(x))
			snprintf(gpu, sizeof(gpu), "%s", x->valuestring);
		x = cJSON_GetObjectItemCaseSensitive(o, "recipe");
		if (cJSON_IsString(x))
			snprintf(recipe, sizeof(recipe), "%s", x->valuestring);
		cJSON_Delete(o);
		free(pv);
	}
	if (host->get(job, "probe_mb") != NULL)
		probe_mb = host->get_double(job, "probe_mb", 0);
	const char *k = host->get(job, "gpu");
	if (k != NULL && *k != '\0')
		snprintf(gpu, sizeof(gpu), "%s", k);
	if (gpu[0] == '\0')
		snprintf(gpu, sizeof(gpu), "unnamed-gpu");
	k = host->get(job, "recipe");
	if (k != NULL && *k != '\0')
		snprintf(recipe, sizeof(recipe), "%s", k);
	if (recipe[0] == '\0')
		vramcal_recipe_name(host->get(job, "engine"), host->get(job, "base"),
		    recipe, sizeof(recipe));

	if (!(t->st.peak_mb > 0)) {
		host->log(job, PL_LOG_WARN, "train: the job reported no peak memory; "
		    "no calibration pair");
		return;
	}
	if (!(probe_mb > 0)) {
		host->log(job, PL_LOG_INFO, "train: real peak %.1f MB; no probe figure "
		    "(no value \"probe\" from job %s, no probe_mb), so no calibration pair",
		    t->st.peak_mb, pj ? pj : "-");
		return;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "gpu", gpu);
	cJSON_AddStringToObject(o, "recipe", recipe);
	cJSON_AddNumberToObject(o, "probe_mb", probe_mb);
	cJSON_AddNumberToObject(o, "real_mb", t->st.peak_mb);
	cJSON_AddNumberToObject(o, "lora_r", (double)host->get_int(job, "lora_r", 0));
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	int rc = host->value_set(job, "probe_pair", s);
	free(s);
	if (rc != PL_OK)
		host->log(job, PL_LOG_WARN, "train: storing the calibration pair: %s",
		    host->strerror(rc));
	else
		host->log(job, PL_LOG_INFO, "train: calibration pair for %s, %s: probe "
		    "%.1f MB, real %.1f MB (over-estimate %.1f%%)", gpu, recipe, probe_mb,
		    t->st.peak_mb, (1.0 - t->st.peak_mb / probe_mb) * 100.0);
}

/* ---- the stage -------------------------------------------------------- */

static int
train_check(pl_job *job)
{
	trainkeys_check(host, job);
	const char *u = host->get(job, "ollama_url");
	if (u != NULL && *u != '\0' && strncmp(u, "http://", 7) != 0 &&
	    strncmp(u, "https://", 8) != 0)
		host->check_error(job, "ollama_url", "\"%s\" is not an http(s) URL", u);
	if (host->get_bool(job, "evict_during_training", 0) && (u == NULL || *u == '\0'))
		host->check_error(job, "evict_during_training", "needs ollama_url");
	plc_check_base(host, job, "base");
	return PL_OK;
}

static void
train_free(struct train *t)
{
	for (int i = 0; i < t->nkeep; i++)
		free(t->keep[i]);
	free(t->keep);
	free(t->w.msgs);
	pthread_mutex_destroy(&t->w.mu);
	pthread_cond_destroy(&t->w.cv);
}

static int
train_loop(struct train *t, struct pyjob *pj)
{
	pl_job *job = t->job;
	int retries = (int)host->get_int(job, "launch_retries", 0);
	int max_resumes = (int)host->get_int(job, "max_resumes", 0);
	double backoff = host->get_duration(job, "launch_backoff", 0);
	double backoff_max = host->get_duration(job, "launch_backoff_max", 0);
	int want_resume = host->get_bool(job, "resume", 0);
	int watch = t->use_ollama && host->get_bool(job, "evict_during_training", 0);
	char ckroot[PATH_MAX], ckpt[PATH_MAX], name[32], how[512];

	snprintf(ckroot, sizeof(ckroot), "%s/checkpoints", host->workdir(job));
	for (;;) {
		if (host->cancelled(job))
			return PL_ECANCELED;
		long step = -1;
		int have_ckpt = 0;
		if (want_resume || t->st.ever_started)
			have_ckpt = pyjob_checkpoint_newest(ckroot, ckpt, sizeof(ckpt),
			    &step, skip_ckpt, t);
		snprintf(name, sizeof(name), "launch-%d", t->st.seq);
		int readopt = t->st.launched == t->st.seq;
		if (!readopt) {
			if (t->use_ollama)
				evict(t);
			t->st.launched = t->st.seq;
			t->st.loop_started = 0;
			state_save(t);
			if (have_ckpt)
				host->log(job, PL_LOG_INFO, "train: %s resumes from %s "
				    "(step %ld)", name, ckpt, step);
			else if (t->st.ever_started)
				host->log(job, PL_LOG_WARN, "train: %s starts from step 0: "
				    "no complete checkpoint in %s", name, ckroot);
		}
		t->adapter[0] = '\0';
		t->oom[0] = '\0';
		t->last_ckpt = -1;
		snprintf(t->resume_from, sizeof(t->resume_from), "%s", have_ckpt ? ckpt : "");
		snprintf(t->launch, sizeof(t->launch), "%s", name);

		struct pl_spawn sp;
		struct pl_exit ex = PL_EXIT_INIT;
		memset(&sp, 0, sizeof(sp));
		sp.abi = PL_ABI_VERSION;
		sp.size = sizeof(sp);
		sp.name = name;
		sp.argv = pj->argv;
		sp.resume_from = have_ckpt ? ckpt : NULL;
		sp.on_event = train_event;
		sp.arg = t;
		if (watch)
			watcher_start(t);
		int rc = host->spawn(job, &sp, &ex);
		if (watch)
			watcher_stop(t);
		if (rc == PL_ECANCELED || host->cancelled(job))
			return PL_ECANCELED;
		if (rc == PL_ETIMEDOUT)
			return host->fail(job, "train: %s timed out", name);
		if (rc != PL_OK && rc != PL_ELOST)
			return host->fail(job, "train: spawning %s: %s", name,
			    host->strerror(rc));
		if (rc == PL_ELOST)
			snprintf(how, sizeof(how), "was lost (no exit record)");
		else
			pyjob_exit_str(&ex, how, sizeof(how));
		if (t->oom[0] != '\0' && strstr(how, t->oom) == NULL) {
			size_t n = strlen(how);
			snprintf(how + n, sizeof(how) - n, " [%s]", t->oom);
		}

		if (rc == PL_OK && ex.exited && ex.status == 0) {
			char path[PATH_MAX];
			if (t->adapter[0] == '\0' && host->artifact_find(job, NULL,
			    host->job_name(job), "adapter", path, sizeof(path), NULL) == PL_OK)
				snprintf(t->adapter, sizeof(t->adapter), "%s", path);
			if (t->adapter[0] == '\0')
				return host->fail(job, "train: %s exited 0 without an "
				    "adapter artifact", name);
			t->st.seq++;
			state_save(t);
			return PL_OK;
		}
		int death = rc == PL_ELOST || !ex.exited || ex.status == PYJOB_EXIT_OOM;
		if (!death)
			return host->fail(job, "train: %s %s", name, how);

		t->st.seq++;
		if (!t->st.loop_started) {
			t->st.fails++;
			if (t->st.fails > retries) {
				state_save(t);
				return host->fail(job, "train: the training loop never "
				    "started: %d launches in a row died before it "
				    "(launch_retries = %d); the last %s", t->st.fails,
				    retries, how);
			}
			double d = backoff;
			for (int i = 1; i < t->st.fails && d < backoff_max; i++)
				d *= 2;
			if (d > backoff_max)
				d = backoff_max;
			host->log(job, PL_LOG_WARN, "train: %s died before the training "
			    "loop started (%s); evicting and relaunching in %.1f s "
			    "(%d of %d relaunches)", name, how, d, t->st.fails, retries);
			state_save(t);
			if (nap(job, d))
				return PL_ECANCELED;
			continue;
		}
		t->st.resumes++;
		if (t->st.resumes > max_resumes) {
			state_save(t);
			return host->fail(job, "train: %s died inside the training loop "
			    "(%s) and max_resumes = %d resumes are spent", name, how,
			    max_resumes);
		}
		host->log(job, PL_LOG_WARN, "train: %s died inside the training loop "
		    "(%s); relaunching from the newest complete checkpoint (resume "
		    "%d of %d)", name, how, t->st.resumes, max_resumes);
		state_save(t);
	}
}

/*
 * The base's identity (st_set_identity: config.json's digest and the
 * tensor index's), handed to jobs/train.py, which writes it beside the
 * adapter as pipeline-base.json (PEFT ignores the file); merge checks the
 * base it is given against it. A base that is not a local checkpoint
 * (a hub name the engine downloads) gets none, and says so.
 */
static cJSON *
base_identity(pl_job *job)
{
	const char *dir = host->input(job, "base");
	struct st_set s;
	char c[65], t[65], err[ST_ERRLEN];
	cJSON *o, *id;

	memset(&s, 0, sizeof(s));
	if (dir == NULL || st_set_open(&s, dir, err, sizeof(err)) == -1 ||
	    st_set_identity(&s, c, t, err, sizeof(err)) == -1) {
		st_set_close(&s);
		host->log(job, PL_LOG_INFO, "train: the base's identity is not recorded beside "
		    "the adapter: %s", dir == NULL ? "base: not resolved" : err);
		return NULL;
	}
	st_set_close(&s);
	o = cJSON_CreateObject();
	id = cJSON_AddObjectToObject(o, "base_identity");
	cJSON_AddStringToObject(id, "base", dir);
	cJSON_AddStringToObject(id, "config_sha256", c);
	cJSON_AddStringToObject(id, "tensors_sha256", t);
	return o;
}

static int
train_run(pl_job *job)
{
	struct train t;
	struct pyjob pj;

	memset(&t, 0, sizeof(t));
	t.job = job;
	pthread_mutex_init(&t.w.mu, NULL);
	pthread_cond_init(&t.w.cv, NULL);
	const char *u = host->get(job, "ollama_url");
	if (u != NULL && *u != '\0') {
		t.use_ollama = 1;
		snprintf(t.url, sizeof(t.url), "%s", u);
	}
	t.unload_wait = host->get_duration(job, "unload_wait", 0);
	split_keep(&t);
	state_load(&t);

	cJSON *ident = base_identity(job);
	int rc = pyjob_prepare(host, job, train_keys, "train", ident, &pj);
	cJSON_Delete(ident);
	if (rc == PL_OK)
		rc = train_loop(&t, &pj);
	if (rc == PL_OK) {
		host->log(job, PL_LOG_INFO, "train: adapter %s after %d launch(es), "
		    "%d resume(s); real peak %.1f MB", t.adapter, t.st.seq - 1,
		    t.st.resumes, t.st.peak_mb);
		add_pair(&t);
		char buf[256];
		snprintf(buf, sizeof(buf), "{\"launches\":%d,\"resumes\":%d,"
		    "\"peak_mb\":%.1f,\"watcher_evictions\":%d}", t.st.seq - 1,
		    t.st.resumes, t.st.peak_mb, t.w.evicted);
		host->value_set(job, "train", buf);
	}
	train_free(&t);
	return rc;
}

static const struct pl_stage train_stage = PL_STAGE(
	.name = "train",
	.summary = "LoRA training with evict-retry launches and checkpoint resume",
	.flags = PL_STAGE_ADOPTABLE | PL_STAGE_REUSE,
	.keys = train_keys,
	.check = train_check,
	.run = train_run);

PL_PLUGIN(&host, &train_stage)
