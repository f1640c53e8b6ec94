/* test_sched.c: the scheduler (sched.c) without a daemon. It runs against
 * a real SQLite store in a temporary directory, a real libuv loop (this
 * thread is its loop thread), the real spec parser and checks, and a
 * stand-in for the work: stages registered in process ("fake", and
 * "fake_adopt", which is PL_STAGE_ADOPTABLE) whose run hook records each
 * launch and blocks until the test ends it with the result it chooses, or
 * until the scheduler cancels it. No daemon process, no socket, no shim.
 *
 * Each case runs in a child process of its own, as the daemon runs one
 * scheduler per process (its state is static in sched.c). The restart
 * case kills its first child with SIGKILL while jobs run, as a daemon
 * dies, and starts a second scheduler over the same store file: it must
 * find the truth the first one committed. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "pld.h"
#include "server.h"
#include "plio.h"
#include "runner.h"

/* One call of a fake stage's run hook. */
struct launch {
	char run[64], job[64];
	int attempt, adopted;
	double at;                /* plc_mono_secs() when it was launched */
	int rc, done;             /* the test's verdict, once done */
	int ended;                /* the hook returned */
};
#define MAXL 256
static struct launch launches[MAXL];
static int nlaunch;
static pthread_mutex_t fmtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fcv = PTHREAD_COND_INITIALIZER;

/* What a job named "look" reads of the value k of these runs (NULL: its
 * previous), into looked (revisions). */
static const char *look_runs[4];
static char looked[4][64];

static int
fake_run(struct pl_job *pj)
{
	for (int i = 0; strcmp(pj->name, "look") == 0 && i < 3; i++) {
		char *v = pj->hb->value_get(pj, look_runs[i] ? look_runs[i] : pj->spec->previous,
		    NULL, "k");
		snprintf(looked[i], sizeof(looked[i]), "%s", v ? v : "(none)");
		free(v);
	}
	pthread_mutex_lock(&fmtx);
	if (nlaunch == MAXL)
		abort();
	struct launch *l = &launches[nlaunch++];
	snprintf(l->run, sizeof(l->run), "%s", pj->run);
	snprintf(l->job, sizeof(l->job), "%s", pj->name);
	l->attempt = pj->attempt;
	l->adopted = pj->adopted;
	l->at = plc_mono_secs();
	/* pj->cancel is a flag the scheduler sets: looked at every 5 ms. */
	while (!l->done && !pj->cancel) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 5000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&fcv, &fmtx, &ts);
	}
	int rc = l->done ? l->rc : PL_ECANCELED;
	l->ended = 1;
	pthread_mutex_unlock(&fmtx);
	return rc;
}

static const struct pl_stage fake = PL_STAGE(.name = "fake",
	.summary = "the test's stand-in", .run = fake_run);
static const struct pl_stage fake_adopt = PL_STAGE(.name = "fake_adopt",
	.summary = "the test's stand-in, re-entered after a restart",
	.flags = PL_STAGE_ADOPTABLE, .run = fake_run);

static uv_loop_t *loop;
static struct store *store;
static struct conf conf;
static char dir[PATH_MAX];

/* A scheduler over dir's store: conf_text is pipelined.conf's tail. */
static void
start(const char *conf_text)
{
	char path[PATH_MAX + 32], text[4 * PATH_MAX + 512], *errs = NULL;
	snprintf(path, sizeof(path), "%s/pipelined.conf", dir);
	snprintf(text, sizeof(text), "[daemon]\nstate_dir = %s\ncontrol_socket = %s/c.sock\n"
	    "feed_socket = %s/f.sock\nplugin_dir = %s\n%s", dir, dir, dir, dir, conf_text);
	FILE *f = fopen(path, "w");
	if (f == NULL || fputs(text, f) == EOF || fclose(f) != 0)
		abort();
	if (conf_load(&conf, path, &errs) == -1) {
		fprintf(stderr, "%s", errs);
		abort();
	}
	snprintf(path, sizeof(path), "%s/pipelined.db", dir);
	if (store_open(&store, path) == -1)
		abort();
	loop = uv_default_loop();
}

static void
submit(const char *name, const char *text)
{
	char path[128], *errs = NULL, err[512];
	snprintf(path, sizeof(path), "%s.ini", name);
	struct spec *s = spec_parse(path, text, &errs);
	if (s == NULL || spec_check(s, &conf, host_check_section, 0, &errs) == -1) {
		fprintf(stderr, "%s: %s", path, errs ? errs : "?\n");
		abort();
	}
	free(errs);
	CHECK(sched_submit(s, err, sizeof(err)) == PLP_OK);
}

/* Run the loop for secs (the retry timer fires on it). */
static void
pump(double secs)
{
	double until = plc_mono_secs() + secs;
	while (plc_mono_secs() < until) {
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(2000);
	}
}

/* The launch of run/job's attempt, waited for up to secs; NULL if none. */
static struct launch *
launched(const char *run, const char *job, int attempt, double secs)
{
	double until = plc_mono_secs() + secs;
	for (;;) {
		struct launch *found = NULL;
		pthread_mutex_lock(&fmtx);
		for (int i = 0; i < nlaunch; i++)
			if (strcmp(launches[i].run, run) == 0 && strcmp(launches[i].job, job) == 0 &&
			    launches[i].attempt == attempt)
				found = &launches[i];
		pthread_mutex_unlock(&fmtx);
		if (found || plc_mono_secs() >= until)
			return found;
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(2000);
	}
}

/* Launches of run so far, and how many of them run now. */
static int
count(const char *run, int *running)
{
	int n = 0, r = 0;
	pthread_mutex_lock(&fmtx);
	for (int i = 0; i < nlaunch; i++)
		if (strcmp(launches[i].run, run) == 0) {
			n++;
			r += !launches[i].done && !launches[i].ended;
		}
	pthread_mutex_unlock(&fmtx);
	if (running)
		*running = r;
	return n;
}

static void
finish(struct launch *l, int rc)
{
	if (l == NULL)
		return;
	pthread_mutex_lock(&fmtx);
	l->rc = rc;
	l->done = 1;
	pthread_cond_broadcast(&fcv);
	pthread_mutex_unlock(&fmtx);
}

/* Wait up to secs for run/job to be in state (the scheduler's memory). */
static int
state_is(const char *run, const char *job, const char *state, double secs)
{
	double until = plc_mono_secs() + secs;
	for (;;) {
		int st = sched_job_state(run, job);
		if (st != -1 && st == pl_job_state_find(state))
			return 1;
		if (plc_mono_secs() >= until) {
			fprintf(stderr, "%s/%s is %s, not %s\n", run, job,
			    st != -1 ? pl_job_state_name(st) : "unknown", state);
			return 0;
		}
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(2000);
	}
}

/* The run's state in the store. */
static int
run_is(const char *run, const char *state, double secs)
{
	double until = plc_mono_secs() + secs;
	for (;;) {
		int st = store_run_state_get(store, run);
		int ok = st != -1 && st == pl_run_state_find(state);
		if (ok || plc_mono_secs() >= until) {
			if (!ok)
				fprintf(stderr, "run %s is %s, not %s\n", run,
				    st != -1 ? pl_run_state_name(st) : "unknown", state);
			return ok;
		}
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(2000);
	}
}

static struct job_row
row(const char *run, const char *job)
{
	struct job_row r;
	memset(&r, 0, sizeof(r));
	if (store_job_get(store, store_run_id(store, run), job, &r) == -1)
		r.attempts = -1;
	return r;
}

/* Run run's only job: launched, ended with rc, its value k set to v. */
static void
one_job(const char *run, int rc, const char *state, const char *v)
{
	finish(launched(run, "a", 1, 5), rc);
	CHECK(run_is(run, state, 5));
	CHECK(store_begin(store) == 0 && store_value_set(store, store_run_id(store, run),
	    row(run, "a").id, "k", v) == 0 && store_commit(store) == 0);
}

/* Revisions: a spec submitted again under an ended run's name is its
 * next revision, NAME@N; a submit while the newest runs is refused
 * (ESTATE), and a retry of a revision that is not the newest. What a
 * stage reads of another run by name: a bare NAME is its newest revision
 * that succeeded, NAME@N that one; its previous, as submit resolved it
 * (previous = v1: v1@2 then), stays that revision when a newer one has
 * succeeded since. */
static void
revisions(void)
{
	char err[512];
	start("max_jobs = 8\n");
	CHECK(sched_init(loop, store, &conf) == 0);
	submit("v1", "[a]\nstage = fake\n");
	one_job("v1", PL_OK, "succeeded", "r1");
	submit("v1", "[a]\nstage = fake\n");
	one_job("v1@2", PL_OK, "succeeded", "r2");
	submit("v1", "[a]\nstage = fake\n");
	one_job("v1@3", PL_EIO, "failed", "r3");
	CHECK(sched_retry("v1", NULL, err, sizeof(err)) == PLP_ESTATE &&
	    strstr(err, "run v1@1 has a newer revision, v1@3") != NULL, "retry v1: %s", err);

	look_runs[0] = "v1";
	look_runs[1] = "v1@3";
	submit("x", "[run]\nprevious = v1\n[look]\nstage = fake\n");
	char *prev = store_run_previous_get(store, "x");
	CHECK(prev != NULL && strcmp(prev, "v1@2") == 0, "x's previous: %s", prev ? prev : "-");
	free(prev);
	struct launch *l = launched("x", "look", 1, 5);
	CHECK(l != NULL);
	CHECK(strcmp(looked[0], "r2") == 0 && strcmp(looked[1], "r3") == 0 &&
	    strcmp(looked[2], "r2") == 0, "v1: %s, v1@3: %s, previous: %s", looked[0], looked[1],
	    looked[2]);
	struct spec *s = spec_parse("x.ini", "[a]\nstage = fake\n", NULL);
	CHECK(s != NULL && spec_check(s, &conf, host_check_section, 0, NULL) == 0);
	CHECK(sched_submit(s, err, sizeof(err)) == PLP_ESTATE &&
	    strstr(err, "run x is running") != NULL, "a resubmit of x while it runs: %s", err);
	spec_free(s);
	finish(l, PL_OK);
	CHECK(run_is("x", "succeeded", 5));

	/* v1@4 succeeds; x's retry reads v1 as v1@4, its previous as v1@2. */
	submit("v1", "[a]\nstage = fake\n");
	one_job("v1@4", PL_OK, "succeeded", "r4");
	look_runs[1] = "v1@1";
	CHECK(sched_retry("x", "look", err, sizeof(err)) == PLP_OK &&
	    strstr(err, "retrying the stored spec of x; to run an edited spec, submit it") != NULL,
	    "retry x: %s", err);
	l = launched("x", "look", 2, 5);
	CHECK(l != NULL);
	CHECK(strcmp(looked[0], "r4") == 0 && strcmp(looked[1], "r1") == 0 &&
	    strcmp(looked[2], "r2") == 0, "v1: %s, v1@1: %s, previous: %s", looked[0], looked[1],
	    looked[2]);
	finish(l, PL_OK);
	CHECK(run_is("x", "succeeded", 5));
}

/* A job never starts before its dependencies succeed: a diamond with a
 * fan-out (a -> b, c) and a fan-in (b, c -> d); a failure skips what
 * follows and fails the run. */
static void
dag(void)
{
	start("max_jobs = 8\n");
	CHECK(sched_init(loop, store, &conf) == 0);
	submit("diamond", "[a]\nstage = fake\n[b]\nstage = fake\nafter = a\n"
	    "[c]\nstage = fake\nafter = a\n[d]\nstage = fake\nafter = b, c\n");
	struct launch *a = launched("diamond", "a", 1, 5);
	CHECK(a != NULL);
	pump(0.2);
	CHECK(count("diamond", NULL) == 1);        /* b, c, d wait for a */
	finish(a, PL_OK);
	struct launch *b = launched("diamond", "b", 1, 5), *c = launched("diamond", "c", 1, 5);
	CHECK(b != NULL && c != NULL);             /* the fan-out, both at once */
	int running;
	CHECK(count("diamond", &running) == 3 && running == 2);
	finish(b, PL_OK);
	CHECK(state_is("diamond", "b", "succeeded", 5));
	pump(0.2);
	CHECK(launched("diamond", "d", 1, 0) == NULL); /* the fan-in waits for c too */
	CHECK(state_is("diamond", "d", "pending", 0));
	finish(c, PL_OK);
	struct launch *d = launched("diamond", "d", 1, 5);
	CHECK(d != NULL);
	CHECK(d && b && c && d->at >= b->at && d->at >= c->at && b->at >= a->at);
	finish(d, PL_OK);
	CHECK(run_is("diamond", "succeeded", 5));

	/* A failed job (no retries): what follows it is skipped, never
	 * launched; a job beside it still runs; the run fails. */
	submit("broken", "[a]\nstage = fake\n[b]\nstage = fake\nafter = a\n"
	    "[c]\nstage = fake\nafter = b\n[side]\nstage = fake\n");
	a = launched("broken", "a", 1, 5);
	struct launch *side = launched("broken", "side", 1, 5);
	CHECK(a != NULL && side != NULL);
	finish(a, PL_EIO);
	CHECK(state_is("broken", "a", "failed", 5));
	CHECK(state_is("broken", "b", "skipped", 5));
	CHECK(state_is("broken", "c", "skipped", 5));
	CHECK(run_is("broken", "running", 0));     /* side still runs */
	finish(side, PL_OK);
	CHECK(run_is("broken", "failed", 5));
	CHECK(count("broken", NULL) == 2);
	CHECK(row("broken", "c").state == PLJ_skipped);
}

/* A failed attempt is retried after its backoff, doubling up to
 * retry_backoff_max; attempts are counted; after `retries` retries the
 * job fails for good. */
static void
retry(void)
{
	start("max_jobs = 4\n");
	CHECK(sched_init(loop, store, &conf) == 0);
	submit("flaky", "[x]\nstage = fake\nretries = 3\nretry_backoff = 0.2\n"
	    "retry_backoff_max = 0.5\n[after_x]\nstage = fake\nafter = x\n");
	/* Each failure's retry time, as committed: its backoff after the
	 * failure, which happened between finish() and the state seen. */
	static const double wait[] = { 0.2, 0.4, 0.5 };   /* doubling, capped */
	struct launch *l = launched("flaky", "x", 1, 5);
	CHECK(l != NULL);
	for (int n = 1; n <= 3; n++) {
		double before = now_wall();
		finish(l, PL_EIO);
		CHECK(state_is("flaky", "x", "retrying", 5));
		double after = now_wall(), at = row("flaky", "x").next_at;
		CHECK(at >= before + wait[n - 1] && at <= after + wait[n - 1]);
		CHECK(row("flaky", "x").attempts == n);
		CHECK(launched("flaky", "x", n + 1, 0) == NULL);  /* not before it */
		l = launched("flaky", "x", n + 1, 10);
		CHECK(l != NULL);
		CHECK(now_wall() >= at);           /* it came when due */
	}
	finish(l, PL_EIO);
	CHECK(state_is("flaky", "x", "failed", 5));
	pump(1.2);                                 /* past any backoff: no fifth */
	CHECK(launched("flaky", "x", 5, 0) == NULL);
	CHECK(row("flaky", "x").attempts == 4);
	CHECK(state_is("flaky", "after_x", "skipped", 0));
	CHECK(run_is("flaky", "failed", 5));

	/* A retry that succeeds lets the job after it run. */
	submit("heals", "[x]\nstage = fake\nretries = 1\nretry_backoff = 0.05\n"
	    "[y]\nstage = fake\nafter = x\n");
	finish(launched("heals", "x", 1, 5), PL_EIO);
	finish(launched("heals", "x", 2, 5), PL_OK);
	finish(launched("heals", "y", 1, 5), PL_OK);
	CHECK(run_is("heals", "succeeded", 5));
	CHECK(row("heals", "x").attempts == 2);
}

/* Jobs needing a resource beyond what is free wait; max_jobs holds. */
static void
resources(void)
{
	start("max_jobs = 3\n[resources]\ngpu = 2\n");
	CHECK(sched_init(loop, store, &conf) == 0);
	submit("gpus", "[g1]\nstage = fake\nresources = gpu\n[g2]\nstage = fake\n"
	    "resources = gpu\n[g3]\nstage = fake\nresources = gpu\n[big]\nstage = fake\n"
	    "resources = gpu:2\n");
	CHECK(launched("gpus", "g1", 1, 5) != NULL && launched("gpus", "g2", 1, 5) != NULL);
	pump(0.2);
	CHECK(count("gpus", NULL) == 2);           /* g3 and big wait for a gpu */
	finish(launched("gpus", "g1", 1, 0), PL_OK);
	struct launch *g3 = launched("gpus", "g3", 1, 5);
	CHECK(g3 != NULL);
	pump(0.2);
	CHECK(launched("gpus", "big", 1, 0) == NULL); /* needs both */
	finish(launched("gpus", "g2", 1, 0), PL_OK);
	pump(0.2);
	CHECK(launched("gpus", "big", 1, 0) == NULL); /* g3 holds one */
	finish(g3, PL_OK);
	struct launch *big = launched("gpus", "big", 1, 5);
	CHECK(big != NULL);
	finish(big, PL_OK);
	CHECK(run_is("gpus", "succeeded", 5));

	/* Five jobs without resources: never more than max_jobs (3) at once,
	 * and the daemon's count says the same. */
	submit("many", "[j1]\nstage = fake\n[j2]\nstage = fake\n[j3]\nstage = fake\n"
	    "[j4]\nstage = fake\n[j5]\nstage = fake\n");
	pump(0.3);
	int running;
	CHECK(count("many", &running) == 3 && running == 3);
	CHECK(sched_running() == 3);
	finish(launched("many", "j1", 1, 0), PL_OK);
	CHECK(launched("many", "j4", 1, 5) != NULL);
	pump(0.2);
	CHECK(count("many", &running) == 4 && running == 3);
	for (int i = 1; i <= 5; i++) {
		char j[8];
		snprintf(j, sizeof(j), "j%d", i);
		finish(launched("many", j, 1, 5), PL_OK);
	}
	CHECK(run_is("many", "succeeded", 5));
	CHECK(sched_running() == 0);
}

/* Why an open job waits, as status shows it (sched_job_wait): a job of
 * its own run; a resource, with the jobs that hold it and its place among
 * those that want it, across runs in the order a pass tries them;
 * max_jobs; none once it could start. */
static void
waits(void)
{
	struct sched_wait w;
	start("max_jobs = 3\n[resources]\ngpu = 1\n");
	CHECK(sched_init(loop, store, &conf) == 0);
	submit("a", "[train]\nstage = fake\nresources = gpu\n");
	CHECK(launched("a", "train", 1, 5) != NULL);
	submit("b", "[prep]\nstage = fake\n[train]\nstage = fake\nafter = prep\n"
	    "resources = gpu\n");
	submit("c", "[train]\nstage = fake\nresources = gpu\n");
	CHECK(launched("b", "prep", 1, 5) != NULL);
	CHECK(sched_job_wait("b", "train", &w) == 0 && w.why == SW_AFTER &&
	    strcmp(w.what, "prep") == 0, "b/train: %d %s", w.why, w.what);
	/* c's train is ready first: it is 1st in line, b's 2nd once ready. */
	CHECK(sched_job_wait("c", "train", &w) == 0 && w.why == SW_RESOURCE &&
	    strcmp(w.what, "gpu") == 0 && w.need == 1 && w.used == 1 && w.capacity == 1 &&
	    w.place == 1 && w.nholders == 1 && strcmp(w.holders[0], "a/train") == 0,
	    "c/train: %d %s %d/%d place %d holders %d %s", w.why, w.what, w.used, w.capacity,
	    w.place, w.nholders, w.holders[0]);
	finish(launched("b", "prep", 1, 0), PL_OK);
	pump(0.2);
	CHECK(sched_job_wait("b", "train", &w) == 0 && w.why == SW_RESOURCE && w.place == 1,
	    "b/train: %d place %d", w.why, w.place);
	CHECK(sched_job_wait("c", "train", &w) == 0 && w.why == SW_RESOURCE && w.place == 2,
	    "c/train: %d place %d", w.why, w.place);
	CHECK(sched_job_wait("b", "nosuch", &w) == -1);
	CHECK(sched_job_wait("a", "train", &w) == 0 && w.why == SW_NONE); /* it runs */
	/* The gpu to b's train (the pass's order), c's still waits, for it. */
	finish(launched("a", "train", 1, 0), PL_OK);
	CHECK(launched("b", "train", 1, 5) != NULL);
	pump(0.2);
	CHECK(sched_job_wait("c", "train", &w) == 0 && w.why == SW_RESOURCE && w.place == 1 &&
	    strcmp(w.holders[0], "b/train") == 0, "c/train: place %d %s", w.place, w.holders[0]);
	/* max_jobs (3): two more jobs running, a third without resources waits,
	 * 2nd in line: c's train (an earlier run) is tried first. */
	submit("d", "[x]\nstage = fake\n[y]\nstage = fake\n[z]\nstage = fake\n");
	CHECK(launched("d", "x", 1, 5) != NULL && launched("d", "y", 1, 5) != NULL);
	pump(0.2);
	CHECK(sched_job_wait("d", "z", &w) == 0 && w.why == SW_SLOTS && w.used == 3 &&
	    w.capacity == 3 && w.nholders == 3 && w.place == 2,
	    "d/z: %d %d/%d holders %d place %d", w.why, w.used, w.capacity, w.nholders, w.place);
	finish(launched("d", "x", 1, 0), PL_OK);
	finish(launched("d", "y", 1, 0), PL_OK);
	finish(launched("b", "train", 1, 0), PL_OK);
	CHECK(launched("d", "z", 1, 5) != NULL && launched("c", "train", 1, 5) != NULL);
	finish(launched("d", "z", 1, 0), PL_OK);
	finish(launched("c", "train", 1, 0), PL_OK);
	CHECK(run_is("c", "succeeded", 5) && run_is("d", "succeeded", 5));
}

/* Cancel: the running job is told (its hook returns PL_ECANCELED), the
 * pending ones never start; the run ends cancelled. Cancelling a run
 * that is not running is refused. */
static void
cancel(void)
{
	char msg[256];
	start("max_jobs = 4\n");
	CHECK(sched_init(loop, store, &conf) == 0);
	submit("stop", "[a]\nstage = fake\n[b]\nstage = fake\nafter = a\n"
	    "[r]\nstage = fake\nretries = 5\nretry_backoff = 30\n");
	struct launch *a = launched("stop", "a", 1, 5), *r = launched("stop", "r", 1, 5);
	CHECK(a != NULL && r != NULL);
	finish(r, PL_EIO);
	CHECK(state_is("stop", "r", "retrying", 5));
	CHECK(sched_cancel("stop", msg, sizeof(msg)) == PLP_OK);
	CHECK(state_is("stop", "a", "cancelled", 5));
	CHECK(a && a->ended && !a->done);          /* stopped by the scheduler */
	CHECK(state_is("stop", "b", "cancelled", 5));
	CHECK(state_is("stop", "r", "cancelled", 5)); /* a waiting retry too */
	CHECK(run_is("stop", "cancelled", 5));
	pump(0.2);
	CHECK(count("stop", NULL) == 2);           /* b never started */
	CHECK(row("stop", "b").state == PLJ_cancelled);
	CHECK(sched_cancel("stop", msg, sizeof(msg)) == PLP_ESTATE); /* not running now */
	CHECK(sched_cancel("nosuch", msg, sizeof(msg)) == PLP_ENOENT);
	CHECK(sched_running() == 0);
}

/* The restart case's first scheduler: a finished run, and a run with an
 * adoptable job, a plain one and one waiting out a backoff, all running
 * when it is killed. It says so on fd. */
static void
restart_first(int fd)
{
	start("max_jobs = 4\n");
	if (sched_init(loop, store, &conf) != 0)
		_exit(3);
	submit("old", "[o]\nstage = fake\n");
	finish(launched("old", "o", 1, 5), PL_OK);
	submit("live", "[ad]\nstage = fake_adopt\n[plain]\nstage = fake\n"
	    "[later]\nstage = fake\nafter = plain\n"
	    "[slow]\nstage = fake\nretries = 1\nretry_backoff = 1.5\n");
	if (!run_is("old", "succeeded", 5) || launched("live", "ad", 1, 5) == NULL ||
	    launched("live", "plain", 1, 5) == NULL)
		_exit(3);
	finish(launched("live", "slow", 1, 5), PL_EIO);
	if (!state_is("live", "slow", "retrying", 5))
		_exit(3);
	double at = now_wall();
	if (write(fd, &at, sizeof(at)) != sizeof(at))
		_exit(3);
	for (;;)
		pump(1);                           /* until killed */
}

static void
restart(void)
{
	int p[2];
	if (pipe(p) == -1)
		abort();
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		restart_first(p[1]);
	}
	close(p[1]);
	double failed_at = 0;
	CHECK(read(p[0], &failed_at, sizeof(failed_at)) == sizeof(failed_at));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);

	/* The second scheduler, over the same file. */
	start("max_jobs = 4\n");
	CHECK(sched_init(loop, store, &conf) == 2);  /* both runs, finished or not */
	CHECK(state_is("old", "o", "succeeded", 0));
	/* The adoptable job is re-entered in the same attempt. */
	struct launch *ad = launched("live", "ad", 1, 5);
	CHECK(ad != NULL && ad->adopted == 1);
	CHECK(row("live", "ad").attempts == 1);
	/* The plain one is queued again: a new attempt, the lost one counted,
	 * no retry spent (it has none, and it runs). */
	struct launch *plain = launched("live", "plain", 2, 5);
	CHECK(plain != NULL && plain->adopted == 0);
	struct job_row pr = row("live", "plain");
	CHECK(pr.attempts == 2 && pr.lost == 1);
	/* Its first attempt is stored as lost (the store's word for it). */
	{
		sqlite3_stmt *st = NULL;
		CHECK(sqlite3_prepare_v2(store_db(store), "SELECT state FROM attempts WHERE"
		    " job_id = ? AND n = 1", -1, &st, NULL) == SQLITE_OK);
		sqlite3_bind_int64(st, 1, pr.id);
		CHECK(sqlite3_step(st) == SQLITE_ROW &&
		    strcmp((const char *)sqlite3_column_text(st, 0), "lost") == 0);
		sqlite3_finalize(st);
	}
	CHECK(launched("live", "later", 1, 0) == NULL);
	/* The backoff committed before the death is kept: the retry comes no
	 * sooner than 1.5 s after the failure. */
	struct launch *slow = launched("live", "slow", 2, 10);
	CHECK(slow != NULL);
	CHECK(now_wall() - failed_at >= 1.5 - 0.05);
	CHECK(launched("live", "slow", 1, 0) == NULL); /* not the first attempt again */
	finish(ad, PL_OK);
	finish(plain, PL_OK);
	finish(slow, PL_OK);
	finish(launched("live", "later", 1, 5), PL_OK);
	CHECK(run_is("live", "succeeded", 5));
	CHECK(count("old", NULL) == 0);            /* a finished run does not run again */
}

/* A pass starts the jobs whose dependencies succeeded, and only those
 * (sched.c keeps them as ready bits, updated as states change, instead of
 * looking at every open job): a chain longer than a word of bits runs in
 * order, one job at a time; a job that succeeded and is queued again
 * holds back what follows it again; a job whose directory cannot be made
 * fails at once with the reason, and what follows is skipped. */
static void
ready(void)
{
	start("max_jobs = 2\n");
	CHECK(sched_init(loop, store, &conf) == 0);
	char text[8192], name[16];
	int n = snprintf(text, sizeof(text), "[c0]\nstage = fake\n");
	for (int i = 1; i < 150; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n,
		    "[c%d]\nstage = fake\nafter = c%d\n", i, i - 1);
	CHECK(n < (int)sizeof(text));
	submit("chain", text);
	for (int i = 0; i < 150; i++) {
		snprintf(name, sizeof(name), "c%d", i);
		struct launch *l = launched("chain", name, 1, 5);
		int running;
		CHECK(l != NULL && count("chain", &running) == i + 1 && running == 1);
		finish(l, PL_OK);
	}
	CHECK(run_is("chain", "succeeded", 5));

	submit("again", "[a]\nstage = fake\n[b]\nstage = fake\nafter = a\n");
	finish(launched("again", "a", 1, 5), PL_OK);
	finish(launched("again", "b", 1, 5), PL_OK);
	CHECK(run_is("again", "succeeded", 5));
	char msg[256];
	CHECK(sched_retry("again", "a", msg, sizeof(msg)) == PLP_OK);
	struct launch *a2 = launched("again", "a", 2, 5);
	CHECK(a2 != NULL);
	pump(0.2);
	CHECK(launched("again", "b", 2, 0) == NULL); /* b waits for a's new attempt */
	CHECK(state_is("again", "b", "pending", 0));
	finish(a2, PL_OK);
	struct launch *b2 = launched("again", "b", 2, 5);
	CHECK(b2 != NULL && b2->at >= a2->at);
	finish(b2, PL_OK);
	CHECK(run_is("again", "succeeded", 5));

	/* A file where the job's directory goes: the launch fails. */
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/runs", dir);
	CHECK(mkdir(path, 0711) == 0 || errno == EEXIST); /* the runs before made it */
	snprintf(path, sizeof(path), "%s/runs/blocked", dir);
	CHECK(mkdir(path, 0711) == 0);
	snprintf(path, sizeof(path), "%s/runs/blocked/x", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL && fclose(f) == 0);
	submit("blocked", "[x]\nstage = fake\n[y]\nstage = fake\nafter = x\n"
	    "[z]\nstage = fake\n");
	CHECK(state_is("blocked", "x", "failed", 5));
	CHECK(state_is("blocked", "y", "skipped", 5));
	finish(launched("blocked", "z", 1, 5), PL_OK);
	CHECK(run_is("blocked", "failed", 5));
	CHECK(launched("blocked", "x", 1, 0) == NULL && launched("blocked", "y", 1, 0) == NULL);
	struct job_row r = row("blocked", "x");
	CHECK(strstr(r.message, "cannot make") != NULL && strstr(r.message, "runs/blocked/x") != NULL);
	CHECK(r.state == PLJ_failed && r.attempts == 1); /* the attempt started, and failed */
}

/* The case's store directory, made empty: 0, or -1 when it cannot be. */
static int
fresh_dir(const char *name)
{
	char cmd[PATH_MAX + 16];

	snprintf(dir, sizeof(dir), "%s/%s", getenv("TEST_TMP") ? getenv("TEST_TMP") : "/tmp",
	    name);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0 || mkdir(dir, 0700) == -1) {
		fprintf(stderr, "fresh_dir: cannot make %s\n", dir);
		return -1;
	}
	return 0;
}

/* Each case: the scheduler of its own process, on a store of its own. */
#define SCHED_CASE(name)                                                    \
	static void case_##name(void)                                       \
	{                                                                   \
		CHECK(fresh_dir(#name) == 0);                               \
		if (check_failures == 0)                                    \
			name();                                             \
	}
SCHED_CASE(dag)
SCHED_CASE(revisions)
SCHED_CASE(retry)
SCHED_CASE(resources)
SCHED_CASE(cancel)
SCHED_CASE(restart)
SCHED_CASE(ready)
SCHED_CASE(waits)

static const struct unit_case cases[] = {
	UNIT_CASE(dag),
	UNIT_CASE(revisions),
	UNIT_CASE(retry),
	UNIT_CASE(resources),
	UNIT_CASE(cancel),
	UNIT_CASE(restart),
	UNIT_CASE(ready),
	UNIT_CASE(waits),
	UNIT_END
};

int
main(int argc, char **argv)
{
	static struct plugin self = { .path = "test_sched" };
	log_init(1, LOG_LVL_WARN, NULL);
	if (plugin_host.register_stage(&self, &fake) != PL_OK ||
	    plugin_host.register_stage(&self, &fake_adopt) != PL_OK) {
		fprintf(stderr, "cannot register the fake stages\n");
		return 1;
	}
	return unit_main(argc, argv, cases);
}
