/*
 * store.h: the store's functions, for the daemon's modules (the store's
 * inside is store_int.h's, its read-only handle store_ro.h's). Neither
 * pipelinectl nor pipeline-stage includes it.
 */
#ifndef PL_STORE_H
#define PL_STORE_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "pipeline/proto.h"

struct proc;
struct spec;

/*
 * store.c, store_query.c: the SQLite store (thread-safe; one connection,
 * one mutex). store.c: opening, the schema and its migrations,
 * transactions, events and the outbox's writes, and every write below;
 * store_query.c: the reads (store_outbox_due/next, store_attempt_deadline,
 * store_value_get/history, store_artifact_find, store_proc_find,
 * store_attempt_procs, store_q_*, store_job_get, store_run_id,
 * store_run_state_get, store_run_owner_get). Their shared inside is in
 * store_int.h; rows go out in JSON through wire.h.
 */
struct store;
#define STORE_SCHEMA_VERSION 9 /* = the number of migrations in store.c */
int	store_open(struct store **sp, const char *path);
void	store_close(struct store *s);
int	store_integrity_ok(struct store *s);
/* Last event id committed. */
int64_t	store_last_event(struct store *s);
/* An event to announce after commit: the feed line (malloc'd). */
struct ann {
	int64_t id;
	char *run;
	char *line;
	int64_t submitter;   /* the run's submitter, filled by the feed when needed */
	struct ann *next;
};
/* Called with each committed event, on the committing thread. */
typedef void (*store_announce_fn)(int64_t id, const char *run, const char *line);
void	store_set_announce(struct store *s, store_announce_fn fn);
/* The outbox: fn says whether an event is wanted (its notification kind)
 * and for which targets (NULL-terminated); store_event() then inserts one
 * row per target in the event's transaction, and wake is called after the
 * commit. */
typedef const char *(*store_outbox_fn)(const char *type, const cJSON *data,
	    const char *const **targets);
void	store_set_outbox(struct store *s, store_outbox_fn fn, void (*wake)(void));
/* Pending rows due at now (id, kind, run, job, target, key, body,
 * attempts), the time the next one is due (0: none), and a try's result. */
cJSON	*store_outbox_due(struct store *s, double now, int limit);
double	store_outbox_next(struct store *s);
int	store_outbox_result(struct store *s, int64_t id, int delivered, int attempts,
	    const char *error, double next_at, int give_up);

/* Transactions: store_begin() locks; store_commit() commits, unlocks and
 * announces the events inserted in between; store_rollback() likewise
 * without announcing. Every write below must run between them. */
int	store_begin(struct store *s);
int	store_commit(struct store *s);
void	store_rollback(struct store *s);
/* A write that fails fails its whole transaction. A failed commit calls
 * the failure hook (the daemon stops: its memory is ahead of the store),
 * unless the transaction was marked undoable (its caller changed nothing
 * in memory): then store_commit() returns -1 and store_error() gives the
 * reason and ENOSPC (the disk is full) or EIO. */
typedef void (*store_fail_fn)(const char *why);
void	store_set_fail(struct store *s, store_fail_fn fn);
void	store_undoable(struct store *s);
int	store_error(struct store *s, char *msg, size_t len);
/* The failure hook, called by the writer of an undoable transaction that
 * failed and has done what it must first (host_spawn.c marks the lines
 * it could not store). */
void	store_fail(struct store *s);
/* Insert an event; data is an object (consumed) or NULL. */
int64_t	store_event(struct store *s, const char *run, const char *job,
	    const char *type, cJSON *data);

/* Revision revision of run base, named spec->name (run_rev_name()). */
int	store_run_create(struct store *s, const struct spec *spec, const char *base,
	    int revision, int64_t *id);
/* The states are proto.h's enums; the store spells them in its rows and
 * events, and reads them back (a word it does not know is an error). */
int	store_run_state(struct store *s, int64_t run_id, const char *run,
	    enum pl_run_state state, const char *message);
/* variant: a sweep's job's values; deps: its expanded after list (a
 * sweep's run); NULL otherwise. */
int	store_job_create(struct store *s, int64_t run_id, const char *name,
	    const char *stage, int seq, const char *variant, const char *deps, int64_t *id);
int	store_job_state(struct store *s, int64_t job_id, const char *run,
	    const char *job, enum pl_job_state state, int attempt, const char *message);
int	store_job_progress(struct store *s, int64_t job_id, double done,
	    double total, const char *unit);
int	store_job_next_at(struct store *s, int64_t job_id, double at);
int	store_job_counters(struct store *s, int64_t job_id, int attempts, int lost,
	    int retry_base);
/* An attempt's deadline (wall clock; 0: none) is stored with its start,
 * and read back (0 when none was stored) when a restarted daemon
 * re-enters it. */
int	store_attempt_start(struct store *s, int64_t job_id, int n, double deadline,
	    int64_t *id);
int	store_attempt_end(struct store *s, int64_t attempt_id, enum pl_job_state state,
	    int result, const char *message);
/* An attempt the daemon's restart found running and could not re-enter:
 * its state is "lost", a word of the store's attempts only. */
int	store_attempt_lost(struct store *s, int64_t attempt_id, int result,
	    const char *message);
double	store_attempt_deadline(struct store *s, int64_t attempt_id);
int	store_metric(struct store *s, int64_t job_id, const char *name,
	    int64_t step, double value);
int	store_artifact(struct store *s, int64_t run_id, int64_t job_id,
	    const char *name, const char *path, uint64_t size, const char *sha256);
int	store_value_set(struct store *s, int64_t run_id, int64_t job_id,
	    const char *key, const char *value);
/* Reads (lock internally), of a run by its stored name. */
char	*store_value_get(struct store *s, const char *run, const char *job,
	    const char *key);
/* Every value of key of the runs viewer may read, newest first. */
char	*store_value_history(struct store *s, const char *key, int limit, int64_t viewer);
/* Run's values and artifacts, newest first, for a stage process's
 * lookups: {"values":[{job,key,value,ts}],"artifacts":[{job,name,path,
 * sha256}]}; NULL when there is no such run. */
cJSON	*store_run_snapshot(struct store *s, const char *run);
/* The newest limit values of the runs whose owner's uid is uid (NULL:
 * every run), newest first, as [{run,job,key,value,ts}]: what
 * value_history() answers from in a stage process. */
cJSON	*store_values_recent(struct store *s, const char *uid, int limit);
int	store_artifact_find(struct store *s, const char *run, const char *job,
	    const char *name, char *path, size_t pathlen, char *sha256);
/* Procs (spawned processes). */
struct proc_row {
	int64_t id;
	char dir[PATH_MAX];
	pid_t pid;
	uint64_t starttime;
	char ext_id[64];
	char executor[16];
	int state;
	int64_t events_offset;
	int exited, status, sig;
	char end_class[32];
};
int	store_proc_find(struct store *s, int64_t attempt_id, const char *name,
	    struct proc_row *row);
int	store_proc_insert(struct store *s, int64_t attempt_id, const char *name,
	    const char *executor, const char *dir, int64_t *id);
/* Write p's row: inserted (p->id set) when it has none yet. */
int	store_proc_update(struct store *s, struct proc *p, int64_t events_offset);
/* Live procs of an attempt (for killing before a requeue). */
int	store_attempt_procs(struct store *s, int64_t attempt_id,
	    struct proc_row **rows, int *n);
/* Queries answering control verbs: return JSON (caller frees). */
cJSON	*store_q_runs(struct store *s, int64_t viewer);
cJSON	*store_q_run(struct store *s, const char *run);
cJSON	*store_q_values(struct store *s, const char *run, const char *job);
cJSON	*store_q_artifacts(struct store *s, const char *run);
cJSON	*store_q_metrics(struct store *s, const char *run, const char *job,
	    const char *name);
/* Events after since (optionally of one run), at most limit, as feed lines. */
int	store_q_events(struct store *s, int64_t since, const char *run, int64_t viewer, int limit,
	    void (*fn)(void *arg, int64_t id, const char *line), void *arg);
/* Every run, for restart: id, name, spec path, text, state (a run whose
 * stored state is not a word of PL_RUN_STATES is logged and left out). */
int	store_q_unfinished(struct store *s,
	    void (*fn)(void *arg, int64_t id, const char *name, const char *path,
	    const char *text, enum pl_run_state state), void *arg);
/* A job's stored state, attempt count, lost count, latest attempt id. */
struct job_row {
	int64_t id;
	enum pl_job_state state;
	int attempts, lost, retry_base;
	double next_at;
	int64_t attempt_id;
	char message[512];
};
/* 0, or -1 when there is no such job or its stored state is not a word
 * of PL_JOB_STATES (logged). */
int	store_job_get(struct store *s, int64_t run_id, const char *name, struct job_row *r);
int64_t	store_run_id(struct store *s, const char *name);
/* The run's state, or -1: no such run, or a word not of PL_RUN_STATES. */
int	store_run_state_get(struct store *s, const char *name);
char	*store_run_owner_get(struct store *s, const char *name); /* NULL: the daemon's user */
/* Who submitted the run (-1: unknown): 0, or -1 when there is no such run. */
int	store_run_submitter(struct store *s, const char *name, int64_t *submitter);
/* The stored previous run of a run (as submit resolved it): malloc'd,
 * NULL when none. */
char	*store_run_previous_get(struct store *s, const char *name);
/* The newest revision of the run named base. */
struct run_rev {
	char name[128];        /* NAME, or NAME@N past the first */
	int revision;
	int state;             /* enum pl_run_state; -1: a word not of the list */
	int64_t submitter;     /* -1: unknown */
};
/* 0, or -1 when no run has that name. */
int	store_run_latest(struct store *s, const char *base, struct run_rev *rr);
/* The run a reference names (run_ref_split()): NAME@N its revision N;
 * NAME its newest revision, or with succeeded the newest that succeeded
 * (the newest when none has). Its name in name: 0, or -1 when there is
 * none or ref is not a reference. */
int	store_run_resolve(struct store *s, const char *ref, int succeeded, char *name,
	    size_t len);

/* store_reuse.c: reuse's records (reuse.c). */
struct store_digest {          /* a file's digest is good while these hold */
	const char *path;
	int64_t dev, ino, size, mtime, ctime;  /* times in nanoseconds */
};
struct reuse_cand {            /* an earlier job of the same key */
	int64_t job_id, submitter;
	char run[128], job[128];
};
struct reuse_art {             /* one artifact record of a job */
	char name[128], path[PATH_MAX], sha256[65];
	int64_t size;
	int removed;
};
/* The digest kept for d, all of whose fields must match: 0, or -1. */
int	store_digest_get(struct store *s, const struct store_digest *d, char hex[65]);
/* Keep hex as d's digest (inside a transaction). */
int	store_digest_put(struct store *s, const struct store_digest *d, const char *hex);
/* d as path's, of which sb is the stat. */
struct stat;
void	store_digest_of(struct store_digest *d, const char *path, const struct stat *sb);
/* Keep hex as the digest of path, which was sb (its stat before it was
 * read) when it was hashed, if after (the caller's stat of what it read,
 * once read; NULL: none) is sb still (inside a transaction): a file that
 * changed while it was read is not kept (the next look reads it again).
 * The store stats nothing itself. */
void	store_digest_keep(struct store *s, const char *path, const struct stat *sb,
	    const struct stat *after, const char hex[65]);
/* Record a job's key, its parts (JSON) and why no earlier job was taken
 * (NULL: none was refused); a job that was reused before (run again)
 * loses the records its reuse copied and reused_from (inside a
 * transaction). */
int	store_job_key_set(struct store *s, int64_t job_id, const char *key, const char *parts,
	    const char *note);
/* The digest recorded for an artifact at path of run_id: 0, or -1. */
int	store_artifact_digest_in_run(struct store *s, int64_t run_id, const char *path,
	    char hex[65]);
/* The jobs other than job_id of key that did their work, newest first
 * (*out malloc'd). */
int	store_reuse_candidates(struct store *s, const char *key, int64_t job_id,
	    struct reuse_cand **out, int *n);
/* Every artifact record of a job (*out malloc'd). */
int	store_job_artifact_rows(struct store *s, int64_t job_id, struct reuse_art **out, int *n);
/* Give job_id of run_id copies of src_job's artifact records (not
 * removed) and values, and note where they came from (inside a
 * transaction). */
int	store_reuse_copy(struct store *s, int64_t src_job, int64_t run_id, int64_t job_id);
/* explain's rows: {job, nearest}, or NULL when the viewer may not read
 * the job or there is none. */
cJSON	*store_q_explain(struct store *s, const char *run, const char *job, int64_t viewer);
/* The nearest earlier job of stage that the viewer may read and that did
 * its work, with a key, finished before job not_id started (0: any),
 * one named job first; explain's row form, or NULL. */
cJSON	*store_q_nearest(struct store *s, const char *stage, const char *job, int64_t not_id,
	    int64_t viewer);
/* For tests: the SQLite handle. */
void	*store_db(struct store *s);

/*
 * store_gc.c: the store's side of du and gc (gc.c). The runs, oldest
 * first, and every artifact record; a promoted run has promoted (the time
 * its gate.alias_digest was stored) and alias set.
 */
struct gc_run {
	int64_t id;
	char *name;
	int state;               /* enum pl_run_state, -1: a word not of the list */
	int64_t submitter;       /* -1: unknown */
	double created;
	char *previous, *spec_text;
	double promoted;         /* 0: never promoted */
	char *alias;
	int keep;                /* gc.c's plan: kept, and why */
	char why[256];
};
struct gc_art {
	int64_t id, run_id;
	char *job, *name, *path;
	int64_t size;
	int removed;             /* marked removed */
	int take;                /* gc.c's plan: to mark */
};
struct gc_set {
	struct gc_run *runs;
	int nruns;
	struct gc_art *arts;
	int narts;
};
int	store_gc_load(struct store *s, struct gc_set *g);
void	store_gc_free(struct gc_set *g);
/* Mark records removed at ts by uid: one transaction, committed. */
int	store_gc_mark(struct store *s, const int64_t *ids, int n, double ts, int64_t uid);
/* Paths whose every record is marked removed (NULL-terminated), and
 * when each was first marked (*marked, malloc'd). */
char	**store_gc_pending(struct store *s, double **marked);
/* 1 when a record not marked removed references path, 0 when none, -1. */
int	store_gc_path_held(struct store *s, const char *path);
/* du's rows: per run the viewer sees (or the one run named), newest
 * first: name, state, artifacts, bytes, removed, removed_bytes. */
cJSON	*store_q_du(struct store *s, int64_t viewer, const char *run);

#endif
