/*
 * notify.c: notifications that are never lost ([notify] in pipelined.conf).
 *
 * The events an operator picks (run.end, job.failed, gate.verdict,
 * train.resumed, run.start) become rows of the store's outbox, inserted by
 * store_event() in the very transaction that records the state change
 * (notify_classify() says which feed events are wanted and for which
 * targets): a state change that committed has its notification committed
 * with it. A thread of this file's own delivers the outbox: a webhook gets
 * a JSON POST through libcurl, signed with HMAC-SHA256 of the body under
 * the configured secret (X-Pipelined-Signature-256: sha256=HEX, as GitHub
 * signs its webhooks) and carrying an idempotency key that stays the same
 * on every try; a command runs under the shim with the event in its
 * environment and on its standard input. A delivery that fails (no answer
 * within the timeout, a status other than 2xx, a command's non-zero exit)
 * is tried again with exponential backoff, up to `retries` times. Delivery
 * is at least once: a daemon killed between a delivery and its recording
 * delivers again after the restart, with the same key, so a receiver
 * keeps each key once. Nothing here runs on the loop thread or holds the
 * store's lock while it waits on a receiver: a receiver that is down or
 * slow delays only other notifications.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/hmac.h>

#include "pld.h"
#include "server.h"
#include "plio.h"

extern char **environ;

#define NOTIFY_MAX_TARGETS 16
#define BACKOFF_MAX 300.0

/* The kinds [notify] events may name are conf.c's (conf_notify_kinds),
 * which checks the key: the configuration sits below this file. */
#define kinds conf_notify_kinds
#define NKINDS CONF_NOTIFY_NKINDS

/* What [notify] says: read at start and at every reload, published whole
 * through one pointer (notify_reconf). A reload leaves the one before it
 * in place, as the daemon keeps its configurations: the store may be
 * inserting outbox rows for its targets on another thread. */
struct ncfg {
	char shim[PATH_MAX];
	char *targets[NOTIFY_MAX_TARGETS + 1];	/* "url:URL" or "command:CMD" */
	int ntargets;
	int want[NKINDS];
	char secret[256];
	double timeout;
	int retries;
};

static struct {
	struct store *store;
	char state_dir[PATH_MAX];
	struct ncfg *cfg;
	pthread_t thr;
	pthread_mutex_t mtx;
	pthread_cond_t cv;
	int wake, stop, on;
} N = { .mtx = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static const struct ncfg *
ncfg(void)
{
	return __atomic_load_n(&N.cfg, __ATOMIC_ACQUIRE);
}

static const char *
sget(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : "";
}

/* The notification kind of a feed event, or NULL. */
static const char *
kind_of(const char *type, const cJSON *data)
{
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(data, "state");
	const char *state = cJSON_IsString(st) ? st->valuestring : "";
	if (strcmp(type, "run.submitted") == 0)
		return "run.start";
	if (strcmp(type, "run.state") == 0 && pl_run_state_find(state) != PLR_running)
		return "run.end";
	if (strcmp(type, "job.state") == 0 && pl_job_state_find(state) == PLJ_failed)
		return "job.failed";
	if (strcmp(type, "job.verdict") == 0)
		return "gate.verdict";
	if (strcmp(type, "job.resumed") == 0)
		return "train.resumed";
	return NULL;
}

const char *
notify_classify(const char *type, const cJSON *data, const char *const **targets)
{
	const struct ncfg *cf = ncfg();
	const char *k = cf != NULL && cf->ntargets > 0 ? kind_of(type, data) : NULL;
	if (k == NULL)
		return NULL;
	for (int i = 0; i < NKINDS; i++)
		if (strcmp(kinds[i], k) == 0 && cf->want[i]) {
			*targets = (const char *const *)cf->targets;
			return k;
		}
	return NULL;
}

/* Called by the store after a commit that added outbox rows. */
void
notify_wake(void)
{
	pthread_mutex_lock(&N.mtx);
	N.wake = 1;
	pthread_cond_signal(&N.cv);
	pthread_mutex_unlock(&N.mtx);
}

static size_t
discard(char *p, size_t sz, size_t n, void *u)
{
	return sz * n;
}

/* POST the body; 0 on a 2xx answer, else -1 with the reason in err. */
static int
post(const struct ncfg *cf, CURL *c, const char *url, const char *kind, const char *key, const char *body,
    char *err, size_t errsz)
{
	struct curl_slist *h = NULL;
	char line[512];
	h = curl_slist_append(h, "Content-Type: application/json");
	snprintf(line, sizeof(line), "User-Agent: pipelined/%s", PL_VERSION);
	h = curl_slist_append(h, line);
	snprintf(line, sizeof(line), "X-Pipelined-Event: %s", kind);
	h = curl_slist_append(h, line);
	snprintf(line, sizeof(line), "X-Pipelined-Delivery: %s", key);
	h = curl_slist_append(h, line);
	snprintf(line, sizeof(line), "Idempotency-Key: %s", key);
	h = curl_slist_append(h, line);
	if (cf->secret[0] != '\0') {
		unsigned char md[32];
		unsigned int mdlen = 0;
		char hex[65];
		HMAC(EVP_sha256(), cf->secret, (int)strlen(cf->secret), (const unsigned char *)body,
		    strlen(body), md, &mdlen);
		for (unsigned int i = 0; i < mdlen && i < 32; i++)
			snprintf(hex + 2 * i, 3, "%02x", md[i]);
		snprintf(line, sizeof(line), "X-Pipelined-Signature-256: sha256=%s", hex);
		h = curl_slist_append(h, line);
	}
	char cerr[CURL_ERROR_SIZE] = "";
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(cf->timeout * 1000));
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(cf->timeout * 1000));
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	CURLcode rc = curl_easy_perform(c);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	if (rc != CURLE_OK) {
		snprintf(err, errsz, "%s", cerr[0] ? cerr : curl_easy_strerror(rc));
		return -1;
	}
	if (status < 200 || status > 299) {
		snprintf(err, errsz, "HTTP %ld", status);
		return -1;
	}
	return 0;
}

/* Run the command under the shim (pipeline-shim -d), the event's body on
 * its standard input and in the file PL_NOTIFY_FILE, its kind, key, run
 * and job in the environment; 0 when it exits 0. */
static int
run_command(const struct ncfg *cf, const char *cmd, const char *kind, const char *key, const char *run,
    const char *job, const char *body, char *err, size_t errsz)
{
	char dir[PATH_MAX], file[PATH_MAX + 16], log[PATH_MAX + 16], script[8192];
	snprintf(dir, sizeof(dir), "%s/notify/%s", N.state_dir, key);
	if (plc_mkdirs(dir, 0750) == -1) {
		snprintf(err, errsz, "%s: %s", dir, strerror(errno));
		return -1;
	}
	/* A try before left its records: this is a new try. */
	snprintf(file, sizeof(file), "%s/exit.json", dir);
	unlink(file);
	snprintf(file, sizeof(file), "%s/shim.json", dir);
	unlink(file);
	snprintf(file, sizeof(file), "%s/event.json", dir);
	snprintf(log, sizeof(log), "%s/log", dir);
	if (plc_write_file_atomic(file, body, strlen(body), 0640) == -1) {
		snprintf(err, errsz, "%s: %s", file, strerror(errno));
		return -1;
	}
	snprintf(script, sizeof(script), "exec <\"$PL_NOTIFY_FILE\" || exit 126\n%s", cmd);
	char shim[PATH_MAX];
	snprintf(shim, sizeof(shim), "%s", cf->shim);
	char *argv[] = { shim, "-d", dir, "-l", log, "--", "/bin/sh", "-c", script, NULL };
	int n = 0;
	while (environ[n])
		n++;
	char **envp = xcalloc((size_t)n + 6, sizeof(char *));
	int k = 0;
	for (int i = 0; i < n; i++)
		if (strncmp(environ[i], "PL_NOTIFY_", 10) != 0)
			envp[k++] = environ[i];
	char e[5][PATH_MAX + 64];
	snprintf(e[0], sizeof(e[0]), "PL_NOTIFY_EVENT=%s", kind);
	snprintf(e[1], sizeof(e[1]), "PL_NOTIFY_KEY=%s", key);
	snprintf(e[2], sizeof(e[2]), "PL_NOTIFY_RUN=%s", run ? run : "");
	snprintf(e[3], sizeof(e[3]), "PL_NOTIFY_JOB=%s", job ? job : "");
	snprintf(e[4], sizeof(e[4]), "PL_NOTIFY_FILE=%s", file);
	for (int i = 0; i < 5; i++)
		envp[k++] = e[i];
	envp[k] = NULL;
	/* As every shim: started with the daemon's clean environment, the
	 * command's (the daemon's own and the PL_NOTIFY_ variables, whose
	 * values name a submitter's run and job) handed over as data. */
	size_t len;
	int rq = shim_request_fd(argv, envp, &len);
	free(envp);
	if (rq == -1) {
		snprintf(err, errsz, "the request to %s: %s", shim, strerror(errno));
		return -1;
	}
	pid_t pid = shim_spawn_fd(shim, NULL, "-R", rq);
	int serr = errno;
	close(rq);
	if (pid == -1) {
		snprintf(err, errsz, "%s: %s", shim, strerror(serr));
		return -1;
	}
	/* The shim is the daemon's child; it ends when the command has. The
	 * command gets the timeout too, then SIGTERM through the shim. */
	double deadline = plc_mono_secs() + cf->timeout;
	int st = 0;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (w == -1 && errno != EINTR) {
			snprintf(err, errsz, "waitpid: %s", strerror(errno));
			return -1;
		}
		if (plc_mono_secs() > deadline) {
			kill(pid, SIGTERM);
			waitpid(pid, &st, 0);
			snprintf(err, errsz, "command timed out after %gs", cf->timeout);
			return -1;
		}
		struct timespec ts = { 0, 20 * 1000000 };
		nanosleep(&ts, NULL);
	}
	snprintf(file, sizeof(file), "%s/exit.json", dir);
	char *t = plc_read_file(file, NULL, 4096);
	cJSON *o = t ? cJSON_Parse(t) : NULL;
	free(t);
	const cJSON *ex = cJSON_GetObjectItemCaseSensitive(o, "exited");
	const cJSON *sv = cJSON_GetObjectItemCaseSensitive(o, "status");
	int ok = cJSON_IsNumber(ex) && ex->valueint == 1 && cJSON_IsNumber(sv) && sv->valueint == 0;
	if (!ok)
		snprintf(err, errsz, "command %s (see %s)", o == NULL ? "left no exit record" :
		    "exited non-zero or was killed", log);
	cJSON_Delete(o);
	return ok ? 0 : -1;
}

static void *
notify_main(void *arg)
{
	/* Deliveries wait for nobody: this thread runs at the lowest CPU
	 * priority (nice 19, per thread on Linux), so on a machine whose cores
	 * the scheduler's jobs keep busy they take what is left over and the
	 * scheduler's throughput does not change. */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
	CURL *c = curl_easy_init();
	for (;;) {
		pthread_mutex_lock(&N.mtx);
		int stop = N.stop;
		N.wake = 0;
		pthread_mutex_unlock(&N.mtx);
		if (stop)
			break;
		/* Let a burst of commits gather (100 ms) before reading the
		 * outbox: one read and one recording per batch, not per
		 * notification, keeps this thread off the store's lock. */
		struct timespec gather = { 0, 100 * 1000000L };
		nanosleep(&gather, NULL);
		cJSON *due = store_outbox_due(N.store, now_wall(), 64);
		const struct ncfg *cf = ncfg();
		/* Deliver the batch, then record every result in one
		 * transaction: the store's lock is never held across a
		 * delivery, and the scheduler's commits share the disk with
		 * one commit per batch, not one per notification. */
		struct res { int64_t id; int ok, attempts, give_up; double next; char err[512]; }
		    res[64];
		int nres = 0;
		const cJSON *r;
		cJSON_ArrayForEach(r, due) {
			if (nres == 64)
				break;
			const char *kind = sget(r, "kind"), *target = sget(r, "target");
			const char *key = sget(r, "key"), *body = sget(r, "body");
			int attempts = (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r,
			    "attempts")) + 1;
			int64_t id = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r,
			    "id"));
			struct res *x = &res[nres++];
			char *err = x->err;
			err[0] = '\0';
			int ok = -1;
			if (strncmp(target, "url:", 4) == 0 && c != NULL)
				ok = post(cf, c, target + 4, kind, key, body, err, sizeof(x->err));
			else if (strncmp(target, "command:", 8) == 0)
				ok = run_command(cf, target + 8, kind, key, sget(r, "run"), sget(r, "job"),
				    body, err, sizeof(x->err));
			else
				snprintf(err, sizeof(x->err), "unknown target %s", target);
			int give_up = ok != 0 && attempts >= cf->retries;
			double back = 1.0;
			for (int i = 1; i < attempts && back < BACKOFF_MAX; i++)
				back *= 2;
			if (back > BACKOFF_MAX)
				back = BACKOFF_MAX;
			x->id = id;
			x->ok = ok == 0;
			x->attempts = attempts;
			x->give_up = give_up;
			x->next = now_wall() + back;
			if (ok == 0)
				log_debug("notify: %s %s delivered to %s", kind, key, target);
			else if (give_up)
				log_warnx("notify: %s %s to %s: giving up after %d tries: %s", kind, key,
				    target, attempts, err);
			else
				log_info("notify: %s %s to %s: try %d failed (%s), again in %gs", kind,
				    key, target, attempts, err, back);
		}
		if (nres > 0 && store_begin(N.store) == 0) {
			for (int i = 0; i < nres; i++)
				store_outbox_result(N.store, res[i].id, res[i].ok, res[i].attempts,
				    res[i].err, res[i].next, res[i].give_up);
			store_commit(N.store);
		}
		int n = cJSON_GetArraySize(due);
		cJSON_Delete(due);
		if (n > 0)
			continue;
		/* Sleep until the next row is due, a commit wakes us, or 5 s. */
		double next = store_outbox_next(N.store), now = now_wall();
		double wait = next > 0 ? next - now : 5;
		if (wait > 5)
			wait = 5;
		if (wait <= 0)
			continue;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)wait;
		ts.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&N.mtx);
		while (!N.wake && !N.stop)
			if (pthread_cond_timedwait(&N.cv, &N.mtx, &ts) == ETIMEDOUT)
				break;
		pthread_mutex_unlock(&N.mtx);
	}
	curl_easy_cleanup(c);
	return NULL;
}

/* [notify] of conf, as a whole. */
static struct ncfg *
ncfg_read(const struct conf *conf)
{
	struct ncfg *cf = xcalloc(1, sizeof(*cf));
	const char *v;
	snprintf(cf->shim, sizeof(cf->shim), "%s", conf->shim);
	cf->timeout = 10;
	cf->retries = 10;
	if ((v = conf_get(conf, "notify.timeout")) != NULL)
		parse_duration(v, &cf->timeout);
	if ((v = conf_get(conf, "notify.retries")) != NULL) {
		int64_t n;
		if (parse_int(v, &n) == 0)
			cf->retries = (int)n;
	}
	if ((v = conf_get(conf, "notify.secret")) != NULL)
		snprintf(cf->secret, sizeof(cf->secret), "%s", v);
	v = conf_get(conf, "notify.events");
	char **ev = split_list(v ? v : "run.end job.failed gate.verdict train.resumed", NULL);
	for (int i = 0; ev && ev[i]; i++)
		for (int k = 0; k < NKINDS; k++)
			if (strcmp(ev[i], kinds[k]) == 0)
				cf->want[k] = 1;
	strv_free(ev);
	char **urls = (v = conf_get(conf, "notify.url")) ? split_list(v, NULL) : NULL;
	for (int i = 0; urls && urls[i] && cf->ntargets < NOTIFY_MAX_TARGETS; i++) {
		char *t = xcalloc(1, strlen(urls[i]) + 5);
		sprintf(t, "url:%s", urls[i]);
		cf->targets[cf->ntargets++] = t;
	}
	strv_free(urls);
	if ((v = conf_get(conf, "notify.command")) != NULL && *v != '\0' &&
	    cf->ntargets < NOTIFY_MAX_TARGETS) {
		char *t = xcalloc(1, strlen(v) + 9);
		sprintf(t, "command:%s", v);
		cf->targets[cf->ntargets++] = t;
	}
	cf->targets[cf->ntargets] = NULL;
	return cf;
}

/* Read [notify] and start the delivery thread. The thread runs whether or
 * not a target is set: a reload may add one. */
int
notify_start(const struct conf *conf, struct store *store)
{
	N.store = store;
	snprintf(N.state_dir, sizeof(N.state_dir), "%s", conf->state_dir);
	struct ncfg *cf = ncfg_read(conf);
	__atomic_store_n(&N.cfg, cf, __ATOMIC_RELEASE);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	/* Rows already in the outbox (from before a restart) are delivered
	 * whatever the targets are now: they name their own. */
	if (pthread_create(&N.thr, NULL, notify_main, NULL) != 0) {
		log_warn("notify_start: pthread_create");
		return -1;
	}
	N.on = 1;
	if (cf->ntargets > 0)
		log_info("notify: %d target%s", cf->ntargets, cf->ntargets == 1 ? "" : "s");
	return 0;
}

/* A reload: [notify] as the new configuration says, at once. Events
 * recorded from now on go to the new targets; rows already in the outbox
 * keep the targets they name. */
void
notify_reconf(const struct conf *conf)
{
	struct ncfg *cf = ncfg_read(conf);
	__atomic_store_n(&N.cfg, cf, __ATOMIC_RELEASE);
	log_info("notify: %d target%s", cf->ntargets, cf->ntargets == 1 ? "" : "s");
	notify_wake();
}
