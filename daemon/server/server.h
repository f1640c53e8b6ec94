/*
 * server.h: the daemon's own, one section per file: notifications,
 * checks of the configuration, giving up root, du and gc, the store's
 * host backend, where a run hook runs, reuse, the scheduler and the
 * control and feed sockets (libuv's loop). With the plugin host
 * (host.h), the store (store.h) and access.h, which it includes.
 */
#ifndef PL_SERVER_H
#define PL_SERVER_H

#include <uv.h>

#include "pld.h"
#include "access.h"
#include "host.h"
#include "store.h"

/* notify.c: [notify], the outbox's delivery thread */
int	notify_start(const struct conf *conf, struct store *store);
const char *notify_classify(const char *type, const cJSON *data, const char *const **targets);
void	notify_wake(void);
/* A reload: the new configuration's [notify], in force at once. */
void	notify_reconf(const struct conf *conf);

/* conf_check.c: every path the configuration names, checked as the daemon
 * will use it, and http_listen free (not the sockets and the address when
 * daemon_runs: a running daemon holds them). Errors appended to errs. */
int	conf_check(const struct conf *c, int daemon_runs, char **errs);
/* become.c: root's last acts for a daemon with `user`, then root given
 * up for good: 0, or -1 after a line on standard error. */
int	become_prepare(const struct conf *c);
int	become_drop(const struct conf *c);
void	become_regroup(const struct conf *c, gid_t gid);

/*
 * gc.c: du and gc (pipelinectl(1), pipelined.conf(5) [retention]).
 * gc_du: {runs:[du rows + disk], bytes, disk}, or for one run {run, jobs:
 * [{job, disk}], artifacts}. gc_collect: the plan, and unless dry the
 * removal (marked, committed, then unlinked) of what the viewer may act
 * on; PLP_OK with result {dry_run, min_size, removed, bytes, skipped,
 * kept, errors}, or the refusal in err. gc_finish: at start, unlink the
 * files a gc marked and did not unlink (killed).
 */
cJSON	*gc_du(struct store *s, const struct conf *c, int64_t viewer, const char *run);
enum pl_proto_err gc_collect(struct store *s, const struct conf *c, int64_t viewer,
	    int64_t uid, const char *run, int dry, cJSON **result, char *err, size_t errlen);
int	gc_finish(struct store *s, const struct conf *c);

/* host_store.c: the store's host backend, the daemon's jobs'. */
extern const struct host_backend host_store;       /* host_store.c */
/* The stored name of a run j's stage names, in buf: its own run and its
 * previous (submit resolved it) as they are; another NAME@N that revision,
 * a bare NAME its newest revision that succeeded, else its newest (as
 * previous is read); a name of no run as it is (host_store.c: the
 * daemon's jobs only). */
const char *hstore_run_named(struct pl_job *j, const char *run, char *buf, size_t len);
/* Who may read what j's run's submitter may (access.c): what j looks up
 * across runs is of those runs only. */
int64_t	hstore_viewer(struct pl_job *j);
/* host_store.c: the newest of plan's artifacts name (of job, or of any
 * job when NULL): PL_OK with path and sha256 (when not NULL) copied, or
 * PL_ENOENT. */
int	reuse_plan_find(const struct reuse_plan *plan, const char *job, const char *name,
	    char *path, size_t pathlen, char *sha256);

/* stagerun.c: a job's run hook, in the daemon or in a stage process of
 * its own as the run's owner (pipeline-plugin(3), "How a stage runs"). */
/* 1 when j's run hook runs out of the daemon. */
int	stage_out_of_process(const struct pl_job *j);
/* Run j's stage: its run hook here, or its stage process through
 * host->spawn(); the hook's result either way. */
int	stage_run(struct pl_job *j);
/* The memory cgroup a stage process ran in (PRIV_CGROUP), as recorded in
 * its records directory rdir, removed once empty, then the record: for a
 * process a restarted daemon killed instead of re-adopting it. */
void	stage_memcap_leftover(const char *rdir);
/* A filtered copy of the configuration for a stage process: every key
 * but those that hold secrets. */
cJSON	*stage_conf_copy(const struct conf *c);

/* reuse.c: a job's key, and whether an earlier job's work stands for it
 * (1: pj->reuse_src and pj->reuse_msg set; the stage does not run). On
 * the job's thread, before its stage runs. */
int	reuse_try(struct pl_job *pj);
/* explain's answer for a job the viewer may read: {job, nearest, lines},
 * or NULL. */
cJSON	*reuse_explain(struct store *s, const char *run, const char *job, int64_t viewer);
/* `submit --plan`: what each job of spec (checked, not submitted; owner
 * and name set) would do, in the order it could run: an array of {job,
 * stage, action: "run" or "reuse", from_run, from_job (reuse), after (a
 * job it waits for, which runs), key (when known), why: [lines]}. Reads
 * inputs with the rights of spec->owner, asks the stages' servers
 * (reuse_key, reuse_check): on a thread that may block, never the loop's. */
cJSON	*reuse_plan(struct store *s, const struct conf *c, const struct spec *spec,
	    int64_t viewer);

/* pipelined.c, sched.c, control.c, feed.c: the daemon itself. pipelined.c
 * owns the loop and its handles and wires the parts together at start:
 * each is given what it needs and none reaches into another's state.
 * control.c, the layer above the scheduler, calls its sched_* functions;
 * the scheduler calls neither listener (its events reach the feed through
 * the store's announce hook). */
/* sched.c: the DAG scheduler; its state is static in sched.c. sched_init
 * on the loop thread, once: loads the unfinished runs (re-adopting their
 * jobs) and returns how many runs it knows, or -1. The rest from any
 * thread. */
int	sched_init(uv_loop_t *loop, struct store *store, struct conf *conf);
void	sched_reconf(struct conf *conf); /* a reload: resources in use carry over */
void	sched_stop(void);       /* start no more jobs (the daemon is stopping) */
void	sched_kick(void);       /* a scheduling pass */
int	sched_running(void);    /* jobs running now */
/* Submit a run: PLP_OK, or the refusal to answer with (PLP_EEXIST: a run
 * of that name exists; PLP_ENOSPC or PLP_EIO: the store refused it, its
 * file system full or otherwise), the reason in err. */
enum pl_proto_err sched_submit(struct spec *spec, char *err, size_t errlen);
/* Cancel a run, retry a run or a job and what follows it: PLP_OK with what
 * was done in msg, or the refusal to answer with (PLP_ENOENT: no such run
 * or job; PLP_ESTATE: cancel of a run that is not running, retry of one
 * that is; PLP_EIO: the store refused the change), the reason in msg. */
enum pl_proto_err sched_cancel(const char *run, char *msg, size_t len);
enum pl_proto_err sched_retry(const char *run, const char *job, char *msg, size_t len);
/* The job's state (enum pl_job_state), or -1 when the run has no such job. */
int	sched_job_state(const char *run, const char *job);
/* Why an open (pending or retrying) job has not started: */
enum sched_why {
	SW_NONE,                /* it is not open, or a pass will start it */
	SW_AFTER,               /* a job of its after has not succeeded: what */
	SW_BACKOFF,             /* a failed attempt's backoff, until next_at */
	SW_SLOTS,               /* max_jobs jobs run already (used, capacity) */
	SW_RESOURCE,            /* resource what lacks need (used of capacity) */
	SW_STOPPING,            /* the daemon is stopping */
};
struct sched_wait {
	enum sched_why why;
	char what[128];         /* the job or the resource waited for */
	int need, used, capacity;
	/* SW_RESOURCE: what a sweep keeps of it for an earlier variant,
	 * which the job would take (sched.c: res_kept), and that variant's
	 * open job it is kept for ("" when none is). */
	int kept;
	char kept_for[128];
	double next_at;         /* SW_BACKOFF: wall clock */
	/* SW_SLOTS, SW_RESOURCE: the place in the queue for it (1: the
	 * next job the scheduler starts when it frees), and the running
	 * jobs that hold it, "RUN/JOB" each, at most SCHED_HOLDERS. */
	int place;
	int nholders;           /* every holder, listed or not */
#define SCHED_HOLDERS 8
	char holders[SCHED_HOLDERS][256];
};
/* Fill *w for a job of a run: 0, or -1 when there is no such job. */
int	sched_job_wait(const char *run, const char *job, struct sched_wait *w);
/* A sweep's job's values ("lora_r=64"), to free, and in *origin the
 * spec's job it copies (to free); NULL for another job. */
char	*sched_job_variant(const char *run, const char *job, char **origin);
const char *sched_job_log(const char *run, const char *job);
/* What control.c and feed.c are given when they start listening: the
 * loop, the store, and where the configuration is (a reload replaces it). */
struct listen_ctx {
	uv_loop_t *loop;
	struct store *store;
	struct conf *const *conf;
	/* The page's one-time login code (httpd_login_code), handed to
	 * control.c by the program that runs both: the control socket
	 * links without the HTTP side. */
	int (*login_code)(char *out, size_t outsz, int64_t viewer, uid_t uid);
};
/* control.c: the control socket at path; its verbs call the scheduler. */
int	control_listen(const struct listen_ctx *ctx, const char *path);
/* feed.c */
int	feed_listen(const struct listen_ctx *ctx, const char *path);
void	feed_announce(int64_t id, const char *run, const char *line); /* any thread */
void	feed_flush(void);       /* loop thread: deliver announced events */
/* sock.c, for control.c and feed.c: create a Unix socket at path safely
 * (its directory and itself given to group gid unless (gid_t)-1). */
int	sock_listen(uv_loop_t *loop, uv_pipe_t *srv, const char *path, int mode, gid_t gid,
	    uv_connection_cb cb);
/* Give a listening socket and its directory to another group (a reload). */
void	sock_regroup(const char *path, gid_t gid);


#endif
