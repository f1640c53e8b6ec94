/* sched.c: the DAG scheduler. Each running job has a job thread that
 * executes the stage's run hook and then, itself, records the job's end
 * and runs the scheduling pass that end allows (the first job that pass
 * starts runs next on the same thread): a job's end costs no trip through
 * the loop thread. The loop thread schedules for what comes from outside
 * (submit, cancel, retry, the retry timer). Both hold the scheduler's lock
 * (smtx) for that: every sched_* entry point takes it.
 *
 * The scheduler's state (S below) is its own. It is given the loop, the
 * store and the configuration at sched_init() and calls nothing of the
 * sockets: what it commits reaches the feed through the store's announce
 * hook. control.c, the layer above, calls its sched_* entry points.
 *
 * Job states: pending -> running -> succeeded | failed | cancelled, with
 * retrying (a failed attempt waiting out its backoff) and skipped (a
 * dependency did not succeed); or running -> reused, when an earlier
 * job's work stands for the job's own (reuse.c: its key is computed on
 * the job's thread before the stage runs; the reused state and the copies
 * of the earlier job's records commit in one transaction), which counts
 * as a success for the jobs after it. Every transition is committed to
 * the store before it is announced (store_commit announces).
 *
 * Restart: runs that were running are rebuilt from the spec text kept in
 * the store. A job that was running is re-entered on a new thread when its
 * stage is PL_STAGE_ADOPTABLE (its spawn() calls re-adopt the processes by
 * name); otherwise its leftover processes are killed and the job is queued
 * again without spending a retry (the attempt is recorded as lost). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pld.h"
#include "server.h"
#include "priv.h"
#include "plio.h"

struct srun;

/* The scheduler's state, its own: given at sched_init() (the loop, the
 * store, the configuration), reached by the rest of the daemon only
 * through the sched_* functions. */
static struct {
	uv_loop_t *loop;
	struct store *store;
	struct conf *conf;
	pthread_t loop_thread;
	uv_async_t wake;        /* a job thread's pass -> the loop: set the timer */
	uv_timer_t timer;       /* the next retry */
	int stopping;
	struct srun *runs, **runs_tail;
	int running;            /* jobs running now */
} S;

struct sjob {
	struct srun *run;
	struct spec_section *sec;
	const struct stage_reg *reg;
	int64_t id;
	int seq;
	enum pl_job_state st;    /* set with set_state() only */
	int attempts, lost, retry_base;
	double next_at;          /* wall clock, for retrying */
	int64_t attempt_id;
	int running;             /* a thread exists */
	int holds_res;
	struct pl_job *pj;
	int rc;                  /* the run hook's result */
	int *deps;               /* indices of the jobs in `after` */
	int ndeps;
	int *rdeps;              /* indices of the jobs whose `after` names this one */
	int nrdeps;
	int unmet;               /* deps not succeeded (see ready_note) */
	struct sjob *done_next;  /* link in the handoff list or the pool's queue */
	char *launch_err;        /* why the launch failed, for the job's message, or NULL */
};

struct srun {
	int64_t id;
	char *name;
	struct spec *spec;
	enum pl_run_state state;
	int cancel;
	struct sjob *jobs;
	int njobs;
	/* So that a scheduling pass costs what changed, not the run's size:
	 * no job before first_open is pending or retrying; how many retry,
	 * how many have a thread; failed: a job failed, was cancelled or
	 * skipped since the last pass (skips may propagate). */
	int first_open, nretrying, nrunning, failed;
	/* Bit i: job i is pending or retrying and every job it comes after
	 * succeeded (ready_note), so a pass visits the jobs that may start,
	 * not every open one (a chain has all of them open). */
	uint64_t *ready;
	/* runs/NAME below the state directory, opened (O_NOFOLLOW, as
	 * job_dirs opens every directory below it) at the run's first job
	 * and held until the run ends, not walked again for every job. */
	int dirfd;
	struct srun *next;
};

static int
open_job(const struct sjob *j)
{
	return j->st == PLJ_pending || j->st == PLJ_retrying;
}

/* j's ready bit from its state and its count of unmet dependencies. */
static void
ready_set(struct sjob *j)
{
	struct srun *r = j->run;
	uint64_t bit = UINT64_C(1) << (j->seq % 64);
	if (r->ready == NULL)
		return; /* being built: run_build counts once the deps are known */
	if (open_job(j) && j->unmet == 0)
		r->ready[j->seq / 64] |= bit;
	else
		r->ready[j->seq / 64] &= ~bit;
}

/* Whether d is a sweep's probe of a set that dominates n's, another
 * probe copy (spec_sweep.c: fits_if): n runs once d has ended, fit or
 * not (a probe that does not fit says nothing of a smaller set). */
static int
probe_after_probe(const struct sjob *n, const struct sjob *d)
{
	return n->sec->sweep_probe && d->sec->sweep_probe;
}

/* Whether n's dependency d, in state st, is met: d succeeded; for a
 * sweep's gate (sweep_any) and a variant's job, d ended at all (the gate
 * ranks the variants that finished; sched_kick skips it when none did),
 * and so for a probe after a probe of a set that dominates its own. */
static int
dep_met(const struct sjob *n, const struct sjob *d, enum pl_job_state st)
{
	if (n->sec->sweep_any && d->sec->vindex > 0)
		return pl_job_state_final(st);
	if (probe_after_probe(n, d))
		return pl_job_state_final(st);
	return pl_job_state_ok(st);
}

/* Keep the run's ready bits right after j went from state was to its
 * own: j's bit, and, when j's success (or end, dep_met) came or went,
 * its dependents' counts of unmet dependencies and their bits. */
static void
ready_note(struct sjob *j, enum pl_job_state was)
{
	struct srun *r = j->run;
	if (r->ready == NULL)
		return;
	for (int k = 0; k < j->nrdeps; k++) {
		struct sjob *n = &r->jobs[j->rdeps[k]];
		int d = dep_met(n, j, was) - dep_met(n, j, j->st);
		if (d == 0)
			continue;
		n->unmet += d;
		ready_set(n);
	}
	ready_set(j);
}

/* The first ready job at or after i, or njobs. */
static int
ready_next(const struct srun *r, int i)
{
	while (i < r->njobs) {
		uint64_t w = r->ready[i / 64] >> (i % 64);
		if (w != 0)
			return i + __builtin_ctzll(w);
		i = (i / 64 + 1) * 64;
	}
	return r->njobs;
}

/* The states are proto.h's enums (PL_JOB_STATES, PL_RUN_STATES), which
 * also say which are final; the store spells them. */
static void
set_state(struct sjob *j, enum pl_job_state st)
{
	enum pl_job_state was = j->st;
	j->st = st;
	ready_note(j, was);
	struct srun *r = j->run;
	r->nretrying += (j->st == PLJ_retrying) - (was == PLJ_retrying);
	if ((j->st == PLJ_pending || j->st == PLJ_retrying) && j->seq < r->first_open)
		r->first_open = j->seq;
	if (pl_job_state_final(j->st) && !pl_job_state_ok(j->st))
		r->failed = 1;
}

/* The scheduler's lock: runs, jobs, resources, the counters. Recursive:
 * entry points call each other (sched_submit -> sched_kick). */
static pthread_mutex_t smtx = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
/* An entry point: the real thing under the scheduler's lock. */
#define WITH_SMTX(call) __extension__ ({ pthread_mutex_lock(&smtx); \
	__typeof__(call) rc_ = (call); pthread_mutex_unlock(&smtx); rc_; })
/* A pass on a job thread needs the retry timer set: the loop sets it. */
static int timer_due;

static struct srun *
run_find(const char *name)
{
	for (struct srun *r = S.runs; r; r = r->next)
		if (strcmp(r->name, name) == 0)
			return r;
	return NULL;
}

static struct sjob *
job_find(struct srun *r, const char *name)
{
	for (int i = 0; i < r->njobs; i++)
		if (strcmp(r->jobs[i].sec->name, name) == 0)
			return &r->jobs[i];
	return NULL;
}

static void
run_add(struct srun *r)
{
	r->next = NULL;
	*S.runs_tail = r;
	S.runs_tail = &r->next;
}

/* Set a job's state in the store (announced after commit) and in memory. */
static int
job_set(struct sjob *j, enum pl_job_state state, const char *msg)
{
	if (store_begin(S.store) == -1)
		return -1;
	if (store_job_state(S.store, j->id, j->run->name, j->sec->name, state,
	    state == PLJ_running ? j->attempts : 0, msg) == -1) {
		store_rollback(S.store);
		return -1;
	}
	if (store_commit(S.store) == -1)
		return -1;
	set_state(j, state);
	return 0;
}

/* Whether j needs resource res (and how much), or 0. */
static int
res_need(const struct sjob *j, const struct resource *res)
{
	if (j->sec->ex->batch)
		return 0; /* Slurm's resources are Slurm's. */
	for (int i = 0; i < j->sec->nres; i++)
		if (conf_resource(S.conf, j->sec->res_names[i]) == res)
			return j->sec->res_counts[i];
	return 0;
}

/*
 * How much of res a sweep keeps from j for the variants before j's (0
 * for a job of no variant, or of the first): per earlier variant, the
 * most that one of its open jobs needs, less what its running jobs hold.
 * So the variants take a resource that cannot hold them all in their
 * order: when a variant's training ends, the device is kept for that
 * variant's bake (when the bake asks for it too) rather than given to
 * the next variant's training, and the light jobs between them (merge
 * .. register) run alone, not beside that training. A job of the
 * earliest variant still open is never kept from anything, so the
 * sweep goes on. *why: the earlier variant's job it is kept for.
 */
static int
res_kept(const struct sjob *j, const struct resource *res, const struct sjob **why)
{
	int v = j->sec->vindex, kept = 0;
	*why = NULL;
	if (v <= 1)
		return 0;
	const struct srun *r = j->run;
	int *want = xcalloc((size_t)v * 2, sizeof(int)), *held = want + v;
	const struct sjob **first = xcalloc((size_t)v, sizeof(*first));
	for (int i = 0; i < r->njobs; i++) {
		const struct sjob *o = &r->jobs[i];
		int u = o->sec->vindex, n;
		if (u < 1 || u >= v || (n = res_need(o, res)) == 0)
			continue;
		if (o->running && o->holds_res)
			held[u] += n;
		else if (open_job(o) && n > want[u]) {
			want[u] = n;
			first[u] = o;
		}
	}
	for (int u = 1; u < v; u++)
		if (want[u] > held[u]) {
			kept += want[u] - held[u];
			if (*why == NULL)
				*why = first[u];
		}
	free(want);
	free(first);
	return kept;
}

/* Whether r has room for need units of it for j, with what a sweep
 * keeps for j's earlier variants counted as used (*kept, *why:
 * res_kept's). */
static int
res_room(const struct sjob *j, const struct resource *r, int need, int *kept,
    const struct sjob **why)
{
	*kept = 0;
	*why = NULL;
	if (r->used + need > r->capacity)
		return 0;
	if (j->run->spec->nvariants > 0 && (*kept = res_kept(j, r, why)) > 0 &&
	    r->used + need + *kept > r->capacity)
		return 0;
	*kept = 0;
	*why = NULL;
	return 1;
}

static int
res_available(struct sjob *j)
{
	if (j->sec->ex->batch)
		return 1; /* Slurm's resources are Slurm's. */
	for (int i = 0; i < j->sec->nres; i++) {
		struct resource *r = conf_resource(S.conf, j->sec->res_names[i]);
		int kept;
		const struct sjob *why;
		if (r == NULL || !res_room(j, r, j->sec->res_counts[i], &kept, &why))
			return 0;
	}
	return 1;
}

static void
res_take(struct sjob *j, int sign)
{
	if (j->sec->ex->batch)
		return;
	for (int i = 0; i < j->sec->nres; i++) {
		struct resource *r = conf_resource(S.conf, j->sec->res_names[i]);
		if (r != NULL)
			r->used += sign * j->sec->res_counts[i];
	}
	j->holds_res = sign > 0;
}

/* Whether j has a thread, counted for its run and the daemon. */
static void
set_running(struct sjob *j, int on)
{
	int d = on - j->running;
	j->running = on;
	j->run->nrunning += d;
	__atomic_add_fetch(&S.running, d, __ATOMIC_RELAXED); /* sched_running() reads it unlocked */
}

/* Job threads are kept for a while after their job and reused: creating
 * and tearing down a thread per job cost more than a short job's own
 * bookkeeping. A thread records its job's end itself (job_end_pass), runs
 * next the first job that pass started, and otherwise waits up to
 * POOL_IDLE_S for one. */
#define POOL_IDLE_S 10
static pthread_mutex_t pool_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static struct sjob *pool_work;   /* jobs handed over, not yet taken */
static int pool_free;            /* waiting threads no job was handed to yet */

/* The job a thread's own pass started, which it runs next (see
 * job_thread_start); taking: the thread is in that pass. */
static __thread struct sjob *self_next;
static __thread int self_taking;

static void job_end_pass(struct sjob *j);
static int job_open(struct sjob *j);

static void *
job_thread(void *arg)
{
	struct sjob *j = arg;
	while (j != NULL) {
		if (job_open(j) == 0) {
			j->rc = reuse_try(j->pj) == 1 ? PL_OK : stage_run(j->pj);
			/* What waited for a process directory that never came
			 * (a reused job's work directory), given now. */
			if (job_chown_flush(j->pj, -1) == -1)
				log_warn("%s: %s/%s: its work directory to its owner", __func__,
				    j->run->name, j->sec->name);
		}
		pthread_mutex_lock(&smtx);
		self_taking = 1;
		self_next = NULL;
		job_end_pass(j);
		self_taking = 0;
		j = self_next;
		self_next = NULL;
		pthread_mutex_unlock(&smtx);
		if (j != NULL)
			continue;
		/* Wait for the next job. */
		pthread_mutex_lock(&pool_mtx);
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += POOL_IDLE_S;
		pool_free++;
		while (pool_work == NULL &&
		    pthread_cond_timedwait(&pool_cv, &pool_mtx, &until) == 0)
			;
		j = pool_work;
		if (j != NULL)
			pool_work = j->done_next; /* handed over: counted off already */
		else
			pool_free--;              /* timed out idle: this thread goes */
		pthread_mutex_unlock(&pool_mtx);
	}
	return NULL;
}

/* Run j's stage: next on this thread when its own pass started j, else
 * on a waiting thread, or a new one. */
static int
job_thread_start(struct sjob *j)
{
	if (self_taking && self_next == NULL) {
		self_next = j;
		return 0;
	}
	pthread_mutex_lock(&pool_mtx);
	if (pool_free > 0) {
		pool_free--;
		j->done_next = pool_work;
		pool_work = j;
		pthread_mutex_unlock(&pool_mtx);
		pthread_cond_signal(&pool_cv);
		return 0;
	}
	pthread_mutex_unlock(&pool_mtx);
	pthread_t thr;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&thr, &at, job_thread, j);
	pthread_attr_destroy(&at);
	if (rc != 0)
		log_warnx("%s: %s/%s: pthread_create: %s", __func__, j->run->name, j->sec->name,
		    strerror(rc));
	return rc == 0 ? 0 : -1;
}

static char *
executor_opts(struct sjob *j)
{
	/* The job's own keys, else [slurm] defaults; the last three exist in
	 * pipelined.conf only. */
	static const char *const keys[] = { "partition", "gres", "time", "mem", "account",
	    "sbatch_options", "poll_interval", "signal_before", "bin_dir", NULL };
	char *s = xstrdup("");
	for (int i = 0; keys[i]; i++) {
		const char *v = spec_get(j->sec, keys[i]);
		char sk[64];
		snprintf(sk, sizeof(sk), "slurm.%s", keys[i]);
		if (v == NULL)
			v = conf_get(S.conf, sk);
		if (v == NULL)
			continue;
		char *n;
		if (asprintf(&n, "%s%s=%s\n", s, keys[i], v) == -1)
			fatal("executor_opts");
		free(s);
		s = n;
	}
	return s;
}

/* Jobs launched inside job_end_pass's transaction are handed to their
 * threads once it has committed: a thread handed its job earlier would
 * only wait for the store's lock. */
static int handoff_hold;
static struct sjob *handoff, **handoff_tail = &handoff;

/* Undo job_launch's bookkeeping for a job whose stage did not run (its
 * thread did not start, or job_open failed). */
static void
launch_undo(struct sjob *j)
{
	set_running(j, 0);
	res_take(j, -1);
	job_free(j->pj);
	j->pj = NULL;
}

/* A started attempt that could not be launched: record it failed. */
static void
start_failed(struct sjob *j)
{
	store_begin(S.store);
	const char *why = j->launch_err ? j->launch_err : "could not start the job thread";
	store_attempt_end(S.store, j->attempt_id, PLJ_failed, PL_EIO, why);
	store_job_state(S.store, j->id, j->run->name, j->sec->name, PLJ_failed, 0, why);
	store_commit(S.store);
	set_state(j, PLJ_failed);
	free(j->launch_err);
	j->launch_err = NULL;
}

/* Hand the held jobs to their threads (after the commit). */
static void
handoff_release(void)
{
	handoff_hold = 0;
	int failed = 0;
	while (handoff != NULL) {
		struct sjob *j = handoff;
		handoff = j->done_next;
		if (job_thread_start(j) != 0) {
			launch_undo(j);
			start_failed(j);
			failed = 1;
		}
	}
	handoff_tail = &handoff;
	if (failed)
		sched_kick();
}

/* The run's directory, runs/NAME, made or opened without following a
 * link (jobs write below the state directory) at its first job, under
 * smtx: r->dirfd. 0, or -1 with why naming the job's directory (jobdir). */
static int
run_dir(struct srun *r, const char *jobdir, char *why, size_t len)
{
	if (r->dirfd >= 0)
		return 0;
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "runs/%s", r->name);
	int sfd = open(S.conf->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), e = errno;
	if (sfd >= 0) {
		r->dirfd = dirs_make_at(sfd, rel, 0711);
		e = errno;
		close(sfd);
	}
	if (r->dirfd >= 0)
		return 0;
	/* Named by the job's directory, which is what could not be made. */
	snprintf(why, len, "cannot %s %s: %s", sfd >= 0 ? "make" : "open",
	    sfd >= 0 ? jobdir : S.conf->state_dir, strerror(e));
	return -1;
}

/* The job's directory, its work directory and its log, made or opened
 * below the run's (r->dirfd, open while the job runs) without following
 * a link: pj->jobdirfd and pj->logfd. On the job's thread, without smtx
 * or the store: two jobs' directories are made at once. 0, or -1 with
 * why naming the path. */
static int
job_dirs(struct pl_job *pj, struct sjob *j, char *why, size_t len)
{
	struct srun *r = j->run;
	const char *what = pj->jobdir, *verb = "make";
	int wfd = -1;
	pj->jobdirfd = dirs_make_at(r->dirfd, j->sec->name, 0711);
	if (pj->jobdirfd >= 0) {
		what = pj->workdir;
		/* The owner's with the job's first process directory, in one
		 * message to the parent (job_chown_later()). */
		if ((wfd = dirs_make_leaf(pj->jobdirfd, "work")) >= 0 &&
		    job_chown_later(pj, wfd) == -1) {
			int e = errno;
			close(wfd);
			wfd = -1;
			errno = e;
		}
	}
	if (wfd >= 0) {
		what = pj->logpath;
		verb = "open";
		pj->logfd = file_open_at(pj->jobdirfd, "job.log", O_WRONLY | O_APPEND | O_CREAT,
		    0640);
	}
	int e = errno;
	if (wfd >= 0)
		close(wfd);
	if (pj->logfd >= 0)
		return 0;
	/* A run owner's batch job's log is the owner's (exec_slurm.c gives
	 * it away: Slurm and the shim append to it as the owner), which a
	 * daemon process of its own user, restarted, cannot open again: the
	 * job is followed to its end all the same, without the daemon's own
	 * lines in its log. */
	if (wfd >= 0 && e == EACCES && pj->adopted && pj->ex != NULL && pj->ex->batch &&
	    pj->owner != NULL) {
		log_warnx("%s: %s: the run owner's batch job log: %s; the daemon's lines of "
		    "this attempt are not in it", __func__, pj->logpath, strerror(e));
		return 0;
	}
	snprintf(why, len, "cannot %s %s: %s", verb, what, strerror(e));
	return -1;
}

/* On the job's thread, before its stage runs: the job's directories
 * and the attempt's first log line. -1: the launch failed, with
 * j->launch_err saying why; job_end_pass records it. */
static int
job_open(struct sjob *j)
{
	struct pl_job *pj = j->pj;
	struct srun *r = j->run;
	char why[PATH_MAX + 64];
	if (job_dirs(pj, j, why, sizeof(why)) == -1) {
		log_warnx("%s: %s/%s: %s", __func__, r->name, j->sec->name, why);
		if (pj->jobdirfd >= 0) /* else there is no log to write to */
			job_logf(pj, "=== %s attempt %d of job %s: %s ===", r->name, j->attempts,
			    j->sec->name, why);
		j->launch_err = xstrdup(why);
		return -1;
	}
	job_logf(pj, "=== %s attempt %d of job %s (stage %s)%s ===", r->name, j->attempts,
	    j->sec->name, j->reg->st->name, pj->adopted ? ", re-entered after a daemon restart" :
	    "");
	return 0;
}

/* Build the job's pl_job and start its thread (which makes the job's
 * directories: job_open). adopt: re-enter the attempt that was running
 * when the daemon stopped. */
static int
job_launch(struct sjob *j, int adopt)
{
	struct srun *r = j->run;
	struct pl_job *pj = job_new(JOB_MODE_RUN, &host_store, j->reg, r->spec, j->sec);
	pj->conf = S.conf;
	pj->store = S.store;
	pj->run_id = r->id;
	pj->job_id = j->id;
	pj->attempt_id = j->attempt_id;
	pj->attempt = j->attempts;
	pj->adopted = adopt;
	pj->owner = r->spec->owner;
	snprintf(pj->jobdir, sizeof(pj->jobdir), "%s/runs/%s/%s", S.conf->state_dir, r->name,
	    j->sec->name);
	snprintf(pj->workdir, sizeof(pj->workdir), "%s/work", pj->jobdir);
	snprintf(pj->logpath, sizeof(pj->logpath), "%s/job.log", pj->jobdir);
	free(j->launch_err);
	j->launch_err = NULL;
	char why[PATH_MAX + 64];
	if (run_dir(r, pj->jobdir, why, sizeof(why)) == -1) {
		log_warnx("%s: %s/%s: %s", __func__, r->name, j->sec->name, why);
		j->launch_err = xstrdup(why);
		job_free(pj);
		return -1;
	}
	if (j->sec->ex != &exec_local) {
		pj->ex = j->sec->ex;
		pj->ex_opts = executor_opts(j);
	}
	/* The deadline was stored when the attempt started: a re-entered one
	 * keeps what is left of it (none stored, by an older daemon: the
	 * timeout counts from now). */
	double dl = adopt && j->sec->timeout > 0 ? store_attempt_deadline(S.store,
	    j->attempt_id) : 0;
	if (dl > 0)
		pj->deadline = plc_mono_secs() + fmax(dl - now_wall(), 0.001);
	else if (j->sec->timeout > 0)
		pj->deadline = plc_mono_secs() + j->sec->timeout;
	j->pj = pj;
	set_running(j, 1);
	if (!j->holds_res)
		res_take(j, 1);
	if (handoff_hold) {
		j->done_next = NULL;
		*handoff_tail = j;
		handoff_tail = &j->done_next;
		return 0;
	}
	if (job_thread_start(j) != 0) {
		launch_undo(j);
		return -1;
	}
	return 0;
}

static void
job_start(struct sjob *j)
{
	j->attempts++;
	if (store_begin(S.store) == -1)
		return;
	if (store_attempt_start(S.store, j->id, j->attempts, j->sec->timeout > 0 ?
	    now_wall() + j->sec->timeout : 0, &j->attempt_id) == -1 ||
	    store_job_counters(S.store, j->id, j->attempts, j->lost, j->retry_base) == -1 ||
	    store_job_state(S.store, j->id, j->run->name, j->sec->name, PLJ_running,
	    j->attempts, NULL) == -1) {
		store_rollback(S.store);
		j->attempts--;
		return;
	}
	if (store_commit(S.store) == -1) {
		j->attempts--;
		return;
	}
	set_state(j, PLJ_running);
	if (job_launch(j, 0) == -1)
		start_failed(j);
}

static double
backoff(const struct sjob *j)
{
	int n = j->attempts - j->lost - j->retry_base; /* failed attempts so far */
	double d = j->sec->backoff * pow(2, n > 0 ? n - 1 : 0);
	return d > j->sec->backoff_max ? j->sec->backoff_max : d;
}

/* A job thread ended: record the attempt and decide what follows. */
static void
job_finished(struct sjob *j)
{
	set_running(j, 0);
	res_take(j, -1);
	struct pl_job *pj = j->pj;
	int rc = j->rc;
	char msg[600];
	enum pl_job_state astate, jstate;
	if (rc == PL_OK && pj->reuse_src != 0) {
		astate = jstate = PLJ_reused;
		snprintf(msg, sizeof(msg), "%s", pj->reuse_msg);
	} else if (rc == PL_OK) {
		astate = jstate = PLJ_succeeded;
		/* Why it ran instead of being reused (reuse.c), when it may be. */
		snprintf(msg, sizeof(msg), "%s", pj->ran_why);
	} else if (pj->timed_out || rc == PL_ETIMEDOUT) {
		astate = PLJ_failed;
		jstate = PLJ_failed;
		snprintf(msg, sizeof(msg), "timed out after %gs", j->sec->timeout);
	} else if (pj->cancel || j->run->cancel || rc == PL_ECANCELED) {
		astate = jstate = PLJ_cancelled;
		snprintf(msg, sizeof(msg), "cancelled");
	} else if (rc == PL_EREJECTED) {
		/* The stage did its work and judged it (the gate's verdict):
		 * not a failure to retry. */
		astate = jstate = PLJ_rejected;
		snprintf(msg, sizeof(msg), "%s", pj->failmsg[0] ? pj->failmsg :
		    plugin_host.strerror(rc));
	} else {
		astate = jstate = PLJ_failed;
		snprintf(msg, sizeof(msg), "%s", pj->failmsg[0] ? pj->failmsg :
		    plugin_host.strerror(rc));
	}
	int retry = jstate == PLJ_failed && !j->run->cancel &&
	    j->attempts - j->lost - j->retry_base <= j->sec->retries;
	if (retry) {
		jstate = PLJ_retrying;
		j->next_at = now_wall() + backoff(j);
	}
	if (store_begin(S.store) == 0) {
		job_flush_final(pj);
		if (jstate == PLJ_reused)
			store_reuse_copy(S.store, pj->reuse_src, j->run->id, j->id);
		store_attempt_end(S.store, j->attempt_id, astate, rc, msg[0] ? msg : NULL);
		if (retry)
			store_job_next_at(S.store, j->id, j->next_at);
		store_job_state(S.store, j->id, j->run->name, j->sec->name, jstate, 0,
		    msg[0] ? msg : NULL);
		store_commit(S.store);
	}
	set_state(j, jstate);
	job_logf(pj, "=== attempt %d %s%s%s ===", j->attempts, pl_job_state_name(astate),
	    msg[0] ? ": " : "", msg);
	job_free(pj);
	j->pj = NULL;
}

/* On j's thread, under smtx: its end and the starts it allows in one
 * transaction (the nested begin/commit pairs join it): one commit, then
 * the announcements, instead of one per change; then the started jobs go
 * to their threads. */
static void
job_end_pass(struct sjob *j)
{
	int txn = store_begin(S.store) == 0;
	handoff_hold = txn;
	if (j->launch_err != NULL) { /* job_open failed: the stage did not run */
		launch_undo(j);
		start_failed(j);
	} else
		job_finished(j);
	sched_kick();
	if (txn)
		store_commit(S.store);
	handoff_release();
}

/* A pass on a job thread asked for the retry timer (sched_kick). */
static void
on_wake(uv_async_t *a)
{
	pthread_mutex_lock(&smtx);
	if (timer_due) {
		timer_due = 0;
		sched_kick(); /* on the loop thread: sets the timer */
	}
	pthread_mutex_unlock(&smtx);
}

static void
timer_cb(uv_timer_t *t)
{
	sched_kick();
}

/* Move first_open past the jobs that are no longer pending or retrying. */
static void
advance_open(struct srun *r)
{
	while (r->first_open < r->njobs && !open_job(&r->jobs[r->first_open]))
		r->first_open++;
}

static void
run_finish_check(struct srun *r)
{
	if (r->nrunning > 0 || r->first_open < r->njobs)
		return; /* a job runs or waits (first_open was just advanced) */
	int all_final = 1, all_ok = 1, nfailed = 0, nrejected = 0;
	for (int i = 0; i < r->njobs; i++) {
		const struct sjob *j = &r->jobs[i];
		/* A sweep's variant pruned by its probe (rejected) and the
		 * variant's jobs skipped after it are no failure: a skip after
		 * a failed job comes with that failure. */
		int pruned = (j->sec->sweep_probe && j->st == PLJ_rejected) ||
		    (j->sec->vindex > 0 && j->st == PLJ_skipped);
		all_final &= pl_job_state_final(j->st) && !j->running;
		all_ok &= pl_job_state_ok(j->st) || pruned;
		nfailed += j->st == PLJ_failed || j->st == PLJ_cancelled;
		nrejected += j->st == PLJ_rejected && !pruned;
	}
	if (!all_final)
		return;
	/* Rejected: every job worked, and one judged the result not good
	 * enough (the gate said no); the jobs after it were skipped. */
	enum pl_run_state st = all_ok ? PLR_succeeded : r->cancel ? PLR_cancelled :
	    nfailed == 0 && nrejected > 0 ? PLR_rejected : PLR_failed;
	char msg[512] = "";
	if (!all_ok && !r->cancel) {
		for (int i = 0; i < r->njobs; i++)
			if (r->jobs[i].st == (nfailed ? PLJ_failed : PLJ_rejected)) {
				snprintf(msg, sizeof(msg), "job %s %s", r->jobs[i].sec->name,
				    pl_job_state_name(r->jobs[i].st));
				break;
			}
	}
	if (store_begin(S.store) == -1)
		return;
	store_run_state(S.store, r->id, r->name, st, msg[0] ? msg : NULL);
	if (store_commit(S.store) == 0) {
		r->state = st;
		if (r->dirfd >= 0) {
			close(r->dirfd);
			r->dirfd = -1;
		}
		log_info("run %s %s%s%s", r->name, pl_run_state_name(st), msg[0] ? ": " : "", msg);
		exec_local_run_done(r->name);
	}
}

void
sched_kick(void)
{
	pthread_mutex_lock(&smtx);
	double now = now_wall(), next = 0;
	for (struct srun *r = S.runs; r; r = r->next) {
		if (r->state != PLR_running)
			continue;
again:
		advance_open(r);
		/* Skips propagate until nothing changes (only after a job
		 * failed, was cancelled or skipped). */
		for (int changed = r->failed || r->cancel; changed;) {
			changed = 0;
			r->failed = 0;
			for (int i = r->first_open; i < r->njobs; i++) {
				struct sjob *j = &r->jobs[i];
				if (!open_job(j))
					continue;
				if (r->cancel) {
					job_set(j, PLJ_cancelled, "run cancelled");
					changed = 1;
					continue;
				}
				/* A sweep's gate waits out a variant that did not
				 * work, unless none did. */
				int nvar = 0, vopen = 0, vok = 0;
				const struct sjob *vlast = NULL;
				for (int k = 0; k < j->ndeps; k++) {
					struct sjob *d = &r->jobs[j->deps[k]];
					if (j->sec->sweep_any && d->sec->vindex > 0) {
						nvar++;
						vopen += !pl_job_state_final(d->st);
						vok += pl_job_state_ok(d->st);
						vlast = d;
						continue;
					}
					if (pl_job_state_final(d->st) && !pl_job_state_ok(d->st) &&
					    !probe_after_probe(j, d)) {
						char m[256];
						if (d->sec->sweep_probe && d->st == PLJ_rejected)
							snprintf(m, sizeof(m), "pruned: %s predicts "
							    "it will not fit (its message has the "
							    "figures)", d->sec->name);
						else
							snprintf(m, sizeof(m), "dependency %s %s",
							    d->sec->name, pl_job_state_name(d->st));
						job_set(j, PLJ_skipped, m);
						changed = 1;
						break;
					}
				}
				if (open_job(j) && nvar > 0 && vopen == 0 && vok == 0) {
					char m[256];
					snprintf(m, sizeof(m), "no variant worked (the last, %s, %s)",
					    vlast->sec->name, pl_job_state_name(vlast->st));
					job_set(j, PLJ_skipped, m);
					changed = 1;
				}
			}
		}
		advance_open(r);
		for (int i = ready_next(r, r->first_open); i < r->njobs && !S.stopping;
		    i = ready_next(r, i + 1)) {
			struct sjob *j = &r->jobs[i];
			/* Full, and no retry whose time the timer must know. */
			if (S.running >= S.conf->max_jobs && r->nretrying == 0)
				break;
			if (j->st == PLJ_retrying && j->next_at > now) {
				if (next == 0 || j->next_at < next)
					next = j->next_at;
				continue;
			}
			if (S.running >= S.conf->max_jobs || !res_available(j))
				continue;
			job_start(j);
		}
		advance_open(r); /* past a job that failed to start */
		/* A job failed to start (start_failed): the jobs after it are
		 * skipped in this pass, not in a next one that nothing may
		 * cause (a run whose every started job failed so would wait
		 * for ever). Each time round a job more is final. */
		if (r->failed)
			goto again;
		run_finish_check(r);
	}
	if (next > 0 && !pthread_equal(pthread_self(), S.loop_thread)) {
		/* libuv's handles are the loop thread's: it sets the timer. */
		timer_due = 1;
		uv_async_send(&S.wake);
	} else if (next > 0) {
		double ms = (next - now) * 1000;
		uv_timer_start(&S.timer, timer_cb, ms > 0 ? (uint64_t)ms + 1 : 1, 0);
	}
	pthread_mutex_unlock(&smtx);
}

static struct srun *
run_build(int64_t id, struct spec *spec, enum pl_run_state state)
{
	struct srun *r = xcalloc(1, sizeof(*r));
	r->id = id;
	r->name = xstrdup(spec->name);
	r->spec = spec;
	r->dirfd = -1;
	r->state = state;
	r->njobs = spec->njobs;
	r->jobs = xcalloc((size_t)spec->njobs, sizeof(*r->jobs));
	for (int i = 0; i < spec->njobs; i++) {
		struct sjob *j = &r->jobs[i];
		j->run = r;
		j->sec = spec->jobs[i];
		j->reg = plugin_stage(j->sec->stage);
		j->seq = i;
		set_state(j, PLJ_pending);
	}
	/* Resolve `after` once, both ways: a job's end then touches its
	 * dependents only, and a pass the jobs that may start. */
	int **dep = xcalloc((size_t)spec->njobs + 1, sizeof(*dep));
	for (int i = 0; i < spec->njobs; i++)
		dep[i] = xcalloc((size_t)spec->jobs[i]->nafter + 1, sizeof(int));
	spec_after_index(spec, dep);
	for (int i = 0; i < spec->njobs; i++) {
		struct sjob *j = &r->jobs[i];
		j->deps = dep[i];
		for (int k = 0; k < j->sec->nafter; k++)
			if (dep[i][k] >= 0) {
				j->deps[j->ndeps++] = dep[i][k];
				r->jobs[dep[i][k]].nrdeps++;
			}
	}
	free(dep);
	for (int i = 0; i < spec->njobs; i++) {
		struct sjob *j = &r->jobs[i];
		j->rdeps = xcalloc((size_t)j->nrdeps + 1, sizeof(int));
		j->nrdeps = 0;
	}
	for (int i = 0; i < spec->njobs; i++) {
		struct sjob *j = &r->jobs[i];
		j->unmet = j->ndeps; /* every job is pending yet */
		for (int k = 0; k < j->ndeps; k++) {
			struct sjob *d = &r->jobs[j->deps[k]];
			d->rdeps[d->nrdeps++] = i;
		}
	}
	r->ready = xcalloc((size_t)spec->njobs / 64 + 1, sizeof(uint64_t));
	for (int i = 0; i < spec->njobs; i++)
		ready_set(&r->jobs[i]);
	return r;
}

/*
 * The revision a submit of spec makes: 1 for a new name; for a name in
 * use, the next revision of that run, when the submitter is the run's and
 * its newest revision has ended (EEXIST, naming no one, or ESTATE,
 * naming the state, when not). The spec's previous, NAME or NAME@N, is
 * resolved to the run it names now (NAME: its newest revision that
 * succeeded), so a restart, gc and the stages all read the same; a name
 * of no run stays as written. Under smtx: no other submit of the name
 * comes between this and the commit.
 */
static enum pl_proto_err
submit_revision(struct spec *spec, char *base, size_t baselen, int *revision, char *err,
    size_t errlen)
{
	struct run_rev rr;
	snprintf(base, baselen, "%s", spec->name);
	*revision = 1;
	if (store_run_latest(S.store, base, &rr) == 0) {
		/* A run of no known submitter is root's or the daemon's user's
		 * (the store's migration 4 -> 5). */
		int mine = rr.submitter == spec->submitter || (rr.submitter < 0 &&
		    (spec->submitter == 0 || spec->submitter == (int64_t)geteuid()));
		if (!mine) {
			snprintf(err, errlen, "the run name %s is another user's; give the new run"
			    " another name ([run] name or submit --name)", base);
			return PLP_EEXIST;
		}
		if (rr.state == -1 || !pl_run_state_final(rr.state)) {
			snprintf(err, errlen, "run %s is %s: a new revision is made only of a run"
			    " that has ended (wait for it, or cancel it first)", rr.name,
			    rr.state == -1 ? "in an unknown state" : pl_run_state_name(rr.state));
			return PLP_ESTATE;
		}
		*revision = rr.revision + 1;
	}
	if (spec->previous != NULL) {
		char pbase[128], name[128];
		int prev;
		if (run_ref_split(spec->previous, pbase, sizeof(pbase), &prev) == 0 &&
		    strcmp(pbase, base) == 0) {
			const struct spec_kv *kv = spec->run ? spec_find(spec->run, "previous") : NULL;
			snprintf(err, errlen, "%s:%d: previous: previous = %s names this run: a"
			    " run's earlier revision is not its previous version (name the version"
			    " before it)", spec->path ? spec->path : "-", kv ? kv->line : 0,
			    spec->previous);
			return PLP_EINVAL;
		}
		if (store_run_resolve(S.store, spec->previous, 1, name, sizeof(name)) == 0) {
			free(spec->previous);
			spec->previous = xstrdup(name);
		}
	}
	char name[128];
	run_rev_name(base, *revision, name, sizeof(name));
	free(spec->name);
	spec->name = xstrdup(name);
	return PLP_OK;
}

static enum pl_proto_err
sched_submit_locked(struct spec *spec, char *err, size_t errlen)
{
	char base[128];
	int revision;
	enum pl_proto_err pe = submit_revision(spec, base, sizeof(base), &revision, err, errlen);
	if (pe != PLP_OK)
		return pe;
	struct srun *r = run_build(0, spec, PLR_running);
	if (store_begin(S.store) == -1)
		goto fail;
	store_undoable(S.store);   /* nothing is in memory before the commit */
	if (store_run_create(S.store, spec, base, revision, &r->id) == -1)
		goto rollback;
	for (int i = 0; i < r->njobs; i++) {
		struct sjob *j = &r->jobs[i];
		/* A sweep's run keeps each job's values and after list for
		 * the status page, which reads the store. */
		char *deps = NULL;
		for (int k = 0; spec->nvariants > 0 && k < j->sec->nafter; k++) {
			char *d;
			if (asprintf(&d, "%s%s%s", deps ? deps : "", deps ? " " : "",
			    j->sec->after[k]) == -1)
				fatal("sched_submit");
			free(deps);
			deps = d;
		}
		int rc = store_job_create(S.store, r->id, j->sec->name, j->sec->stage, i,
		    j->sec->variant, spec->nvariants > 0 ? (deps ? deps : "") : NULL, &j->id);
		free(deps);
		if (rc == -1)
			goto rollback;
	}
	if (store_commit(S.store) == -1)
		goto fail;
	run_add(r);
	log_info("run %s submitted (%d jobs)", r->name, r->njobs);
	sched_kick();
	return PLP_OK;
rollback:
	store_rollback(S.store);
fail:;
	char why[256];
	int e = store_error(S.store, why, sizeof(why));
	snprintf(err, errlen, "the store refused the run: %s", why);
	for (int i = 0; i < r->njobs; i++) {
		free(r->jobs[i].deps);
		free(r->jobs[i].rdeps);
	}
	free(r->ready);
	free(r->jobs);
	free(r->name);
	free(r);
	return e == ENOSPC ? PLP_ENOSPC : PLP_EIO;
}

enum pl_proto_err
sched_submit(struct spec *spec, char *err, size_t errlen)
{
	return WITH_SMTX(sched_submit_locked(spec, err, errlen));
}

static enum pl_proto_err
sched_cancel_locked(const char *name, char *msg, size_t len)
{
	struct srun *r = run_find(name);
	if (r == NULL) {
		snprintf(msg, len, "no run %s", name);
		return PLP_ENOENT;
	}
	if (r->state != PLR_running) {
		snprintf(msg, len, "run %s is %s, not running", name, pl_run_state_name(r->state));
		return PLP_ESTATE;
	}
	r->cancel = 1;
	int stopping = 0;
	for (int i = 0; i < r->njobs; i++)
		if (r->jobs[i].running && r->jobs[i].pj) {
			r->jobs[i].pj->cancel = 1;
			stopping++;
		}
	snprintf(msg, len, "cancelling run %s (%d running job%s stopping)", name, stopping,
	    stopping == 1 ? "" : "s");
	sched_kick();
	return PLP_OK;
}

enum pl_proto_err
sched_cancel(const char *name, char *msg, size_t len)
{
	return WITH_SMTX(sched_cancel_locked(name, msg, len));
}

/* Mark j and everything downstream of it. */
static void
mark_downstream(struct srun *r, struct sjob *j, char *mark)
{
	int idx = (int)(j - r->jobs);
	if (mark[idx])
		return;
	mark[idx] = 1;
	for (int i = 0; i < r->njobs; i++)
		for (int k = 0; k < r->jobs[i].sec->nafter; k++)
			if (strcmp(r->jobs[i].sec->after[k], j->sec->name) == 0)
				mark_downstream(r, &r->jobs[i], mark);
}

static enum pl_proto_err
sched_retry_locked(const char *name, const char *job, char *msg, size_t len)
{
	struct srun *r = run_find(name);
	if (r == NULL) {
		snprintf(msg, len, "no run %s", name);
		return PLP_ENOENT;
	}
	if (r->state == PLR_running) {
		snprintf(msg, len, "run %s is still running; cancel it first or wait", name);
		return PLP_ESTATE;
	}
	/* Only the newest revision runs again: one revision of a run at a
	 * time, the one a plain RUN names. */
	char base[128];
	int rev;
	struct run_rev rr;
	if (run_ref_split(name, base, sizeof(base), &rev) == 0 &&
	    store_run_latest(S.store, base, &rr) == 0 && strcmp(rr.name, name) != 0) {
		snprintf(msg, len, "run %s@%d has a newer revision, %s: retry that, or submit"
		    " the spec again", base, rev > 0 ? rev : 1, rr.name);
		return PLP_ESTATE;
	}
	char *mark = xcalloc((size_t)r->njobs, 1);
	if (job != NULL) {
		struct sjob *j = job_find(r, job);
		if (j == NULL) {
			free(mark);
			snprintf(msg, len, "run %s has no job %s", name, job);
			return PLP_ENOENT;
		}
		mark_downstream(r, j, mark);
	} else {
		for (int i = 0; i < r->njobs; i++)
			if (!pl_job_state_ok(r->jobs[i].st))
				mark[i] = 1;
	}
	int n = 0;
	for (int i = 0; i < r->njobs; i++)
		n += mark[i];
	if (n == 0) {
		/* Nothing to queue: the run, its finish time and its log stay
		 * as they are (no second "succeeded", no notification). */
		free(mark);
		snprintf(msg, len, "run %s: nothing to retry (every job succeeded); nothing changed"
		    " (a retry runs the stored spec; to run an edited spec, submit it)", name);
		return PLP_OK;
	}
	n = 0;
	if (store_begin(S.store) == -1) {
		free(mark);
		snprintf(msg, len, "store error");
		return PLP_EIO;
	}
	for (int i = 0; i < r->njobs; i++) {
		if (!mark[i])
			continue;
		struct sjob *j = &r->jobs[i];
		j->retry_base = j->attempts - j->lost; /* a fresh retry budget */
		store_job_counters(S.store, j->id, j->attempts, j->lost, j->retry_base);
		store_job_state(S.store, j->id, r->name, j->sec->name, PLJ_pending, 0, "retry requested");
		set_state(j, PLJ_pending);
		n++;
	}
	store_run_state(S.store, r->id, r->name, PLR_running, NULL);
	if (store_commit(S.store) == -1) {
		free(mark);
		snprintf(msg, len, "store error");
		return PLP_EIO;
	}
	free(mark);
	r->cancel = 0;
	r->state = PLR_running;
	snprintf(msg, len, "run %s: %d job%s queued again, retrying the stored spec of %s;"
	    " to run an edited spec, submit it", name, n, n == 1 ? "" : "s", name);
	sched_kick();
	return PLP_OK;
}

enum pl_proto_err
sched_retry(const char *name, const char *job, char *msg, size_t len)
{
	return WITH_SMTX(sched_retry_locked(name, job, msg, len));
}

int
sched_job_state(const char *run, const char *job)
{
	pthread_mutex_lock(&smtx);
	struct srun *r = run_find(run);
	struct sjob *j = r ? job_find(r, job) : NULL;
	int st = j != NULL ? (int)j->st : -1;
	pthread_mutex_unlock(&smtx);
	return st;
}

/* Why the open job j waits, as the scheduling pass sees it (sched_kick):
 * its after, its backoff, max_jobs, or the first of its resources that
 * lacks room; the jobs that hold that, and its place among the ready
 * jobs that want it, in the pass's order (runs as submitted, jobs as
 * specified). */
static void
job_wait(struct sjob *j, struct sched_wait *w)
{
	memset(w, 0, sizeof(*w));
	if (!open_job(j))
		return;
	for (int k = 0; k < j->ndeps && j->unmet > 0; k++) {
		struct sjob *d = &j->run->jobs[j->deps[k]];
		if (!dep_met(j, d, d->st)) {
			w->why = SW_AFTER;
			snprintf(w->what, sizeof(w->what), "%s", d->sec->name);
			return;
		}
	}
	if (j->st == PLJ_retrying && j->next_at > now_wall()) {
		w->why = SW_BACKOFF;
		w->next_at = j->next_at;
		return;
	}
	if (S.stopping) {
		w->why = SW_STOPPING;
		return;
	}
	const struct resource *res = NULL;
	if (S.running >= S.conf->max_jobs) {
		w->why = SW_SLOTS;
		w->used = S.running;
		w->capacity = S.conf->max_jobs;
	} else {
		const struct sjob *why = NULL;
		for (int i = 0; i < j->sec->nres && !j->sec->ex->batch && res == NULL; i++) {
			struct resource *r = conf_resource(S.conf, j->sec->res_names[i]);
			if (r != NULL && !res_room(j, r, j->sec->res_counts[i], &w->kept, &why)) {
				res = r;
				w->need = j->sec->res_counts[i];
			}
		}
		if (res == NULL)
			return; /* the next pass starts it */
		w->why = SW_RESOURCE;
		snprintf(w->what, sizeof(w->what), "%s", res->name);
		w->used = res->used;
		w->capacity = res->capacity;
		if (why != NULL)
			snprintf(w->kept_for, sizeof(w->kept_for), "%s", why->sec->name);
	}
	w->place = 1;
	for (struct srun *r = S.runs; r; r = r->next) {
		if (r->state != PLR_running)
			continue;
		for (int i = 0; i < r->njobs; i++) {
			struct sjob *o = &r->jobs[i];
			int holds = res != NULL ? o->running && o->holds_res && res_need(o, res) > 0 :
			    o->running;
			if (!holds)
				continue;
			if (w->nholders < SCHED_HOLDERS)
				snprintf(w->holders[w->nholders], sizeof(w->holders[0]), "%s/%s", r->name,
				    o->sec->name);
			w->nholders++;
		}
	}
	/* The ready jobs the pass would try first. */
	for (struct srun *r = S.runs; r; r = r->next) {
		if (r->state != PLR_running)
			continue;
		int before = 1;
		for (int i = ready_next(r, 0); i < r->njobs && before; i = ready_next(r, i + 1)) {
			struct sjob *o = &r->jobs[i];
			if (o == j) {
				before = 0;
				break;
			}
			if (o->st == PLJ_retrying && o->next_at > now_wall())
				continue;
			if (res == NULL || res_need(o, res) > 0)
				w->place++;
		}
		if (!before)
			break;
	}
}

char *
sched_job_variant(const char *run, const char *job, char **origin)
{
	pthread_mutex_lock(&smtx);
	struct srun *r = run_find(run);
	struct sjob *j = r ? job_find(r, job) : NULL;
	char *v = j != NULL && j->sec->variant != NULL ? xstrdup(j->sec->variant) : NULL;
	*origin = j != NULL && j->sec->origin != NULL ? xstrdup(j->sec->origin) : NULL;
	pthread_mutex_unlock(&smtx);
	return v;
}

int
sched_job_wait(const char *run, const char *job, struct sched_wait *w)
{
	pthread_mutex_lock(&smtx);
	struct srun *r = run_find(run);
	struct sjob *j = r ? job_find(r, job) : NULL;
	if (j != NULL)
		job_wait(j, w);
	pthread_mutex_unlock(&smtx);
	return j != NULL ? 0 : -1;
}

const char *
sched_job_log(const char *run, const char *job)
{
	static char path[PATH_MAX];
	pthread_mutex_lock(&smtx);
	struct srun *r = run_find(run);
	int known = r != NULL && job_find(r, job) != NULL;
	pthread_mutex_unlock(&smtx);
	if (!known)
		return NULL;
	snprintf(path, sizeof(path), "%s/runs/%s/%s/job.log", S.conf->state_dir, run, job);
	return path;
}

/* Kill what is left of an attempt that cannot be re-entered, and remove
 * the memory cgroup its stage process ran in. */
#define LEFTOVER_WAIT_S 30
static void
kill_leftovers(struct sjob *j, int64_t attempt_id)
{
	struct proc_row *rows;
	int n;
	if (store_attempt_procs(S.store, attempt_id, &rows, &n) == -1)
		return;
	for (int i = 0; i < n; i++) {
		struct proc p;
		memset(&p, 0, sizeof(p));
		if ((p.ex = exec_find(rows[i].executor)) == NULL)
			p.ex = &exec_local;
		p.pidfd = -1;
		p.id = rows[i].id;
		p.pid = rows[i].pid;
		p.starttime = rows[i].starttime;
		snprintf(p.dir, sizeof(p.dir), "%s", rows[i].dir);
		if (p.ex == &exec_local)
			proc_records_dir(p.dir, p.rdir, sizeof(p.rdir));
		snprintf(p.ext_id, sizeof(p.ext_id), "%s", rows[i].ext_id);
		int live = rows[i].state != PROC_ENDED && rows[i].state != PROC_LOST;
		if (live && p.ex->adopt(&p) == 0 && (p.state == PROC_RUNNING ||
		    p.state == PROC_QUEUED)) {
			log_warnx("%s: %s/%s: killing leftover process of attempt %d", __func__,
			    j->run->name, j->sec->name, j->attempts);
			/* A kill refused (the privileged parent's rule) or one
			 * that does not take is logged, not waited on for ever:
			 * the daemon must come up. */
			int waited = 0;
			if (p.ex->signal(&p, SIGKILL) == -1)
				log_warn("%s: %s/%s: the leftover process of attempt %d could not be "
				    "killed", __func__, j->run->name, j->sec->name, j->attempts);
			else
				while (p.ex->wait(&p, 1000) == 0 && ++waited < LEFTOVER_WAIT_S)
					;
			if (waited >= LEFTOVER_WAIT_S)
				log_warnx("%s: %s/%s: the leftover process of attempt %d outlived %d s "
				    "after SIGKILL; left", __func__, j->run->name, j->sec->name,
				    j->attempts, LEFTOVER_WAIT_S);
		}
		if (live)
			p.ex->release(&p);
		/* A stage process's memory cgroup (PRIV_CGROUP), as its
		 * records directory has it: removed, its process having
		 * ended before the restart or just now. */
		if (p.rdir[0])
			stage_memcap_leftover(p.rdir);
	}
	free(rows);
}

struct load_ctx {
	int n;
};

static void
load_run(void *arg, int64_t id, const char *name, const char *path, const char *text,
    enum pl_run_state state)
{
	struct load_ctx *lc = arg;
	/* Finished runs are loaded too: retry needs them in memory. */
	char *errs = NULL;
	struct spec *spec = spec_parse(path ? path : name, text ? text : "", &errs);
	/* A sweep is expanded again as it was at submit time: a ceiling
	 * lowered since does not undo a run it let in. */
	struct conf nolimit;
	memset(&nolimit, 0, sizeof(nolimit));
	nolimit.max_variants = 100000;
	if (spec != NULL && spec_expand(spec, &nolimit, &errs) == -1) {
		spec_free(spec);
		spec = NULL;
	}
	/* Without files: they were checked at submit, and a job that has
	 * used an input (a corpus already tokenized) needs it no more; one
	 * still to come that misses it fails as that job, not the run here. */
	if (spec == NULL || spec_check(spec, S.conf, host_check_section, SPEC_CHECK_NOFILES,
	    &errs) == -1) {
		if (state == PLR_running) {
			log_warnx("%s: run %s can no longer be checked; failing it:\n%s", __func__,
			    name, errs ? errs : "");
			store_begin(S.store);
			store_run_state(S.store, id, name, PLR_failed,
			    "spec no longer valid after a restart (a plugin is missing?)");
			store_commit(S.store);
		}
		free(errs);
		spec_free(spec);
		return;
	}
	free(errs);
	/* Keep the name under which it was submitted (submit --name), and
	 * who its jobs run as. */
	free(spec->name);
	spec->name = xstrdup(name);
	spec->owner = store_run_owner_get(S.store, name);
	/* And the previous run submit resolved (NAME to NAME@N). */
	free(spec->previous);
	spec->previous = store_run_previous_get(S.store, name);
	struct srun *r = run_build(id, spec, state);
	for (int i = 0; i < r->njobs; i++) {
		struct sjob *j = &r->jobs[i];
		struct job_row row;
		if (store_job_get(S.store, id, j->sec->name, &row) == -1) {
			log_warnx("%s: run %s: job %s cannot be read from the store", __func__,
			    name, j->sec->name);
			continue;
		}
		j->id = row.id;
		j->attempts = row.attempts;
		j->lost = row.lost;
		j->retry_base = row.retry_base;
		j->next_at = row.next_at;
		j->attempt_id = row.attempt_id;
		set_state(j, row.state);
	}
	run_add(r);
	lc->n++;
	if (state != PLR_running)
		return;
	for (int i = 0; i < r->njobs; i++) {
		struct sjob *j = &r->jobs[i];
		if (j->st != PLJ_running)
			continue;
		if (j->reg->st->flags & PL_STAGE_ADOPTABLE) {
			log_info("run %s: re-entering job %s (attempt %d)", name, j->sec->name,
			    j->attempts);
			if (job_launch(j, 1) == -1)
				job_set(j, PLJ_failed, j->launch_err ? j->launch_err :
				    "could not re-enter after a restart");
			continue;
		}
		kill_leftovers(j, j->attempt_id);
		j->lost++;
		store_begin(S.store);
		store_attempt_lost(S.store, j->attempt_id, PL_ELOST,
		    "the daemon stopped during an in-process stage");
		store_job_counters(S.store, j->id, j->attempts, j->lost, j->retry_base);
		store_job_state(S.store, j->id, name, j->sec->name, PLJ_pending,
		    0, "queued again: the daemon stopped while it ran");
		store_commit(S.store);
		set_state(j, PLJ_pending);
		log_info("run %s: job %s queued again after a restart", name, j->sec->name);
	}
}

static int
sched_init_locked(uv_loop_t *loop, struct store *store, struct conf *conf)
{
	S.loop = loop;
	S.store = store;
	S.conf = conf;
	S.loop_thread = pthread_self();
	S.runs_tail = &S.runs;
	uv_async_init(loop, &S.wake, on_wake);
	uv_timer_init(loop, &S.timer);
	struct load_ctx lc = { 0 };
	if (store_q_unfinished(S.store, load_run, &lc) == -1)
		return -1;
	sched_kick();
	return lc.n;
}

int
sched_init(uv_loop_t *loop, struct store *store, struct conf *conf)
{
	return WITH_SMTX(sched_init_locked(loop, store, conf));
}

/* The resources in use carry over to the new configuration; running jobs
 * keep a pointer to the old one, which is therefore never freed. */
void
sched_reconf(struct conf *conf)
{
	pthread_mutex_lock(&smtx);
	for (int i = 0; i < conf->nres; i++) {
		struct resource *old = conf_resource(S.conf, conf->res[i].name);
		if (old)
			conf->res[i].used = old->used;
	}
	S.conf = conf;
	sched_kick();
	pthread_mutex_unlock(&smtx);
}

/* Without the lock: a failed commit stops the daemon from whichever
 * thread committed, which may wait for the store while another holds smtx. */
void
sched_stop(void)
{
	__atomic_store_n(&S.stopping, 1, __ATOMIC_RELAXED);
}

int
sched_running(void)
{
	return __atomic_load_n(&S.running, __ATOMIC_RELAXED);
}
