/*
 * host.h: the server's plugin host, what every program that runs or
 * checks a stage links of libpld.a (the daemon, pipelinectl check and
 * stage, pipeline-stage): run specs (spec.c, spec_sweep.c), the registry
 * of stages (plugin.c), struct pl_job and its host backends (host.c,
 * host_spawn.c, job.c, stagectx.c). No store and no libuv: the daemon's
 * own declarations are server.h's, the store's store.h's.
 */
#ifndef PL_HOST_H
#define PL_HOST_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "pipeline/proto.h"
#include "executor.h"
#include "pld.h"

struct stat;
struct store;

/* spec.c: pipeline.ini run specs */
struct spec_kv {
	char *key;
	char *value;
	int line;
};
struct spec_section {
	char *name;
	int line;
	struct spec_kv *kv;
	int nkv;
	/* Filled in by spec_check for job sections. */
	char *stage;
	char **after;
	int nafter;
	int retries;
	double backoff, backoff_max, timeout;
	char **res_names;
	int *res_counts;
	int nres;
	char *executor;
	const struct executor *ex;  /* exec_find(executor), set by spec_check */
	/* A sweep's copy (spec_expand): its values ("lora_r=64"), the section
	 * it was copied from, its variant's number from 1; NULL, NULL, 0 for
	 * a job no sweep copied. */
	char *variant;
	char *origin;
	int vindex;
	/* A shared job after a sweep's variants (its gate, a job that only
	 * orders on them): its after on the variant jobs is met once each
	 * has ended, worked or not, and one worked (sched.c: dep_met); the
	 * gate ranks those that finished. */
	int sweep_any;
	/* A sweep's probe copy (prune = yes): its rejection skips its
	 * variants without failing the run (sched.c). */
	int sweep_probe;
};
struct spec {
	char *path;        /* as given (absolute when submitted) */
	char *dir;         /* directory for relative paths */
	char *text;        /* the whole file */
	struct spec_section *run;   /* the [run] section, or NULL */
	struct spec_section **jobs;
	int njobs;
	char *name;        /* run name */
	char *previous;
	char *owner;       /* who its jobs run as: "UID:GID[:G1,G2...]" (NULL: the daemon's user) */
	int64_t submitter; /* the uid that submitted it (SO_PEERCRED); -1: unknown */
	/* Its sweep, once expanded (spec_expand): the swept job's name and
	 * its line, and per variant its name suffix ("r64") and values
	 * ("lora_r=64"); nvariants 0 without a sweep. */
	char *sweep_job;
	int sweep_line;
	int nvariants;
	char **variant_suffix;
	char **variant_values;
};
/* Parse text (named path for messages). Errors -> errs. */
struct spec *spec_parse(const char *path, const char *text, char **errs);
/* spec_parse within the submit limits of c (NULL: the defaults), its sweep
 * expanded (spec_sweep.c, where it lives): a text
 * of more than max_spec_bytes is refused before it is parsed, a spec of
 * more than max_spec_jobs jobs once it is parsed and expanded. What the
 * daemon checks or submits, and pipelinectl check, go through here. */
struct spec *spec_load(const char *path, const char *text, const struct conf *c,
	    char **errs);
void	spec_free(struct spec *s);
void	spec_section_free(struct spec_section *sec);
/* spec_sweep.c: expand the spec's sweep (pipeline.ini(5) SWEEPS), if it
 * has one, into a copy per variant of the swept job and of the jobs on a
 * path from it to the gate's candidate, within max_variants ([run], at
 * most c's ceiling; c NULL: the defaults). 0, or -1 with the errors
 * (file:line) in errs. spec_load does it; a restart, which parses the
 * stored text, does it again. */
int	spec_expand(struct spec *s, const struct conf *c, char **errs);
/* A spec's max_variants when [run] sets none (the ceiling of
 * pipelined.conf(5), CONF_MAX_VARIANTS, is pld.h's). */
#define SPEC_MAX_VARIANTS 16
const struct spec_kv *spec_find(const struct spec_section *sec, const char *key);
const char *spec_get(const struct spec_section *sec, const char *key);
/* The jobs each job's `after` names, as indices in s->jobs (-1: no such
 * job): dep[i][k] for s->jobs[i]->after[k], dep[i] sized by the caller.
 * One hash map for the whole spec: a chain of n jobs costs n, not n^2. */
void	spec_after_index(const struct spec *s, int **dep);
/* Validate everything: common keys, stages (through the plugin registry),
 * DAG (unknown after, cycles), resources against conf (may be NULL).
 * Each job section whose stage is registered is handed to stage_check
 * (may be NULL) with flags, which returns its number of errors: the
 * daemon and pipelinectl pass host_check_section (host.c sits above
 * spec.c). With SPEC_CHECK_NOFILES nothing opens, stats or reads a path
 * the spec names (the host's PL_KEY_FILE and PL_KEY_DIR checks and the
 * check hooks' probes, which ask host->check_files()): syntax, keys,
 * bounds, cross-key rules, resources and the DAG are checked all the
 * same. A restart checks its stored runs so (sched.c): their files were
 * checked at submit, and a job that has used an input needs it no more. */
#define SPEC_CHECK_NOFILES 0x1
struct stage_reg;
typedef int spec_stage_check(const struct stage_reg *reg, const struct spec *spec,
    const struct spec_section *sec, int flags, char **errs);
int	spec_check(struct spec *s, const struct conf *c, spec_stage_check *stage_check,
	    int flags, char **errs);
int	spec_is_common_key(const char *key);
/* Whether a stage's jobs are never reused: its plugin's descriptor has
 * neither PL_STAGE_REUSE nor PL_STAGE_REUSE_ASKED (gate), or no plugin
 * provides it. */
int	spec_reuse_never(const char *stage);
/* Whether job sec of s may be reused: not turned off by reuse = no in
 * [run] or the section, and a stage reused by default (PL_STAGE_REUSE) or
 * reuse = yes on one that allows it (pipeline.ini(5)). */
int	spec_reuse_allowed(const struct spec *s, const struct spec_section *sec);
/* Why job sec of s is not reused ("reuse = no in [run]", "stage gate
 * never reuses", ...) written to buf and returned, or NULL when it may
 * be. */
const char *spec_reuse_off(const struct spec *s, const struct spec_section *sec, char *buf,
	    size_t len);
extern const char *const spec_common_keys[];
extern const char *const spec_run_keys[];

/* plugin.c: the registry of stages */
struct plugin {
	char path[PATH_MAX];
	void *handle;
	int nstages;
};
struct stage_reg {
	struct pl_stage *st;    /* the registry's copy */
	struct plugin *plugin;
};
/* Load every *.so in dir, handing each the host's function table
 * (&plugin_host: the registry sits below host.c, which registers into it);
 * refused plugins are logged, never fatal. Returns the number loaded. */
int	plugin_load_dir(const char *dir, const struct pl_host *host);
/* Load one plugin; 0, or -1 with the reason in why. */
int	plugin_load(const char *path, const struct pl_host *host, char *why, size_t whylen);
const struct stage_reg *plugin_stage(const char *name);
int	plugin_nstages(void);
const struct stage_reg *plugin_stage_at(int i);
/* The table's register_stage (plugin_host, host.c). */
int	plugin_register_stage(void *plugin, const struct pl_stage *st);
/* Check a struct a plugin handed the host (starting with abi and size): 0,
 * or -1 with why ("WHAT of ABI .. size .. (host: ABI .. size ..)") when
 * its ABI is not the host's or its size is not size. */
int	plugin_struct_check(const char *what, const void *src, size_t size, char *why,
	    size_t whylen);
/* Whether v is a value of key k: 0; 1 when it is not of the key's syntax,
 * 2 when it is outside the key's bounds, with why ("bad value ...: expected
 * ...", "... is out of range: ..."). For a spec's values (host.c) and a
 * table's defaults (at registration). */
int	plugin_key_value(const struct pl_key *k, const char *v, char *why, size_t whylen);
extern struct pl_host plugin_host;  /* host_name is set by pipelinectl */

/*
 * host.c, host_spawn.c, job.c: the pl_host table and struct pl_job. The
 * table is one for every program; where what a stage reports goes and
 * where what it looks up comes from is the job's host backend (after
 * executor.h's struct executor), chosen once, by job_new(), for the way the
 * job runs:
 *
 *   host_store      in the daemon (host_store.c): each report stored in
 *                   a transaction of its own, then announced; lookups in
 *                   the store; spawns under pipeline-shim with their rows
 *   host_stage_proc in a stage process (stagectx.c): each report written
 *                   to the process's events file for the daemon to store;
 *                   lookups in the context the daemon handed over
 *   host_by_hand    pipelinectl stage, and every stage's check (host.c):
 *                   reports printed, nothing stored to look up
 *
 * Only the daemon names host_store, so a program that does not
 * (pipelinectl) links neither it nor the store's writes. Every backend
 * has every function: the ones of the store's transaction and process
 * rows do nothing where nothing is stored (job.c's job_none_*).
 */
struct proc_row;
struct host_backend {
	/* The daemon's own jobs (host_store): warnings go to the daemon's
	 * log too and debug lines only at its debug level; a spawned
	 * process's events count against the events quota, its directory is
	 * the attempt's, its run's shim starts it and its state is
	 * announced (host_spawn.c). */
	int daemon;
	/* host->input(): key's path, or NULL with why ("" when it was
	 * reported at check time); logs nothing. The store's may name the
	 * run's artifacts and walks a path with the daemon's rights. */
	const char *(*input)(pl_job *j, const char *key, char *why, size_t whylen);
	/* host->spawn(), its structs checked. */
	int	(*spawn)(pl_job *j, const struct pl_spawn *spec, struct pl_exit *out);
	/* Lookups (run NULL: the job's own): host->artifact_find(),
	 * value_get(), value_history(). */
	int	(*artifact_find)(pl_job *j, const char *run, const char *job, const char *name,
		    char *path, size_t pathlen, char *sha256);
	char	*(*value_get)(pl_job *j, const char *run, const char *job, const char *key);
	char	*(*value_history)(pl_job *j, const char *key, int limit);
	/* A transaction around the records below (the calls nest); the
	 * events reader's is undoable (nothing in memory runs ahead of it),
	 * reads its error, and after a failed commit calls fail (the
	 * store's failure hook). 0 or -1. */
	int	(*begin)(pl_job *j);
	int	(*commit)(pl_job *j);
	void	(*rollback)(pl_job *j);
	void	(*undoable)(pl_job *j);
	int	(*error)(pl_job *j, char *msg, size_t len);
	void	(*fail)(pl_job *j);
	/* A job.TYPE event of the job's, taking d (on failure too): 0 or -1. */
	int	(*event)(pl_job *j, const char *type, cJSON *d);
	/* The job's progress, and d, the data of the job.progress event that
	 * follows, put in the form this backend publishes (the feed's: done
	 * and unit; a job program's line: step). done is NAN for a job
	 * program's line with no count: d only. */
	int	(*progress)(pl_job *j, double done, double total, const char *unit, cJSON *d);
	int	(*metric)(pl_job *j, const char *name, int64_t step, double value);
	/* An artifact's record; its job.artifact event follows. */
	int	(*artifact)(pl_job *j, const char *name, const char *path, uint64_t size,
		    const char *sha256);
	/* host->value_set(): the value recorded (no event follows). */
	int	(*value_set)(pl_job *j, const char *key, const char *value);
	/* A spawned process's row (host_spawn.c): found (0, or -1 when none),
	 * inserted, updated with its events offset; and the job's state, with
	 * the message status shows (a batch job's pending reason). */
	int	(*proc_find)(pl_job *j, const char *name, struct proc_row *row);
	int	(*proc_insert)(pl_job *j, const char *name, const char *executor, const char *dir,
		    int64_t *id);
	int	(*proc_update)(pl_job *j, struct proc *p, int64_t events_offset);
	int	(*job_state)(pl_job *j, enum pl_job_state state, const char *message);
	/* A file job_artifact_as() hashed whole, with its stat before it was
	 * read and after (of the descriptor read): the store keeps its
	 * digest for reuse, so the first reuse of a multi-GB artifact is a
	 * stat per file (store_digest_keep); where nothing is stored, or the
	 * digest is a stage process's, nothing. */
	void	(*digest_keep)(pl_job *j, const char *path, const struct stat *sb,
		    const struct stat *after, const char *hex);
};
extern const struct host_backend host_stage_proc;  /* stagectx.c */
extern const struct host_backend host_by_hand;     /* host.c */
/* job.c: a backend's functions where nothing is stored (the metric's
 * too: its event is the record), all of them in one initializer. */
#define HOST_NOTHING_STORED \
	.begin = job_none_txn, .commit = job_none_txn, .rollback = job_none_void, \
	.undoable = job_none_void, .error = job_none_error, .fail = job_none_void, \
	.metric = job_none_metric, .proc_find = job_none_proc_find, \
	.proc_insert = job_none_proc_insert, .proc_update = job_none_proc_update, \
	.job_state = job_none_job_state, .digest_keep = job_none_digest_keep
int	job_none_txn(pl_job *j);
void	job_none_digest_keep(pl_job *j, const char *path, const struct stat *sb,
	    const struct stat *after, const char *hex);
void	job_none_void(pl_job *j);
int	job_none_error(pl_job *j, char *msg, size_t len);
int	job_none_metric(pl_job *j, const char *name, int64_t step, double value);
int	job_none_proc_find(pl_job *j, const char *name, struct proc_row *row);
int	job_none_proc_insert(pl_job *j, const char *name, const char *executor,
	    const char *dir, int64_t *id);
int	job_none_proc_update(pl_job *j, struct proc *p, int64_t events_offset);
int	job_none_job_state(pl_job *j, enum pl_job_state state, const char *message);

/* JOB_MODE_PLAN: a job of a spec not submitted, whose key is computed
 * for `submit --plan` (reuse_plan): it logs nothing, and the artifacts of
 * its own run are those of the jobs the plan reuses (struct reuse_plan). */
enum { JOB_MODE_CHECK = 1, JOB_MODE_RUN = 2, JOB_MODE_PLAN = 3 };
struct plan_art {              /* an artifact a planned reuse would give */
	char job[128], name[128], path[PATH_MAX], sha256[65];
};
struct reuse_plan {
	struct plan_art *a;
	int n;
};
struct pl_job {
	int mode;
	const struct stage_reg *reg;
	const struct spec *spec;
	const struct spec_section *sec;
	const struct host_backend *hb;    /* set by job_new(), never changed */
	const struct conf *conf;          /* NULL by hand */
	struct store *store;              /* host_store's; NULL in any other backend */
	/* Identity */
	char run[128];
	char name[128];
	int64_t run_id, job_id, attempt_id;
	int attempt;
	int adopted;
	int nspawned;            /* spawn() calls so far in this attempt */
	char jobdir[PATH_MAX];            /* state/runs/RUN/JOB */
	char workdir[PATH_MAX];           /* jobdir/work (or by hand: given) */
	char logpath[PATH_MAX];           /* the job log */
	int logfd;                        /* job_logf's descriptor, -1 until used */
	int jobdirfd;                     /* jobdir, opened without following links; -1 by hand */
	const char *owner;                /* who its programs run as (spec->owner); NULL: as we do */
	const struct executor *ex;        /* executor for spawns */
	char *ex_opts;                    /* executor options ("k=v\n" lines) */
	double deadline;                  /* monotonic; 0: none */
	volatile int cancel;              /* set by the scheduler */
	int timed_out;
	char failmsg[512];
	bool check_failed;                /* check mode: the hook reported an error */
	int64_t reuse_src;                /* reuse.c: the job whose work this one takes, or 0 */
	const struct reuse_plan *plan;    /* JOB_MODE_PLAN: what the plan's reused jobs give */
	char reuse_msg[400];              /* ... and the message its state carries */
	char ran_why[400];                /* reuse.c: why a job that may be reused ran
	                                     ("" when it may not): its message once done */
	char refused[512];                /* a spec path refused to the daemon's rights (host.c) */
	/* Check mode: errors, and the input keys whose path failed its
	 * check (host->input() gives NULL for them: reported once). */
	char **errs;
	uint64_t bad_inputs;
	bool nofiles;                     /* check mode: SPEC_CHECK_NOFILES (check_files() 0) */
	/* Strings handed to the plugin, freed with the job. */
	char **pool;
	int npool, cappool;
	pthread_mutex_t lock;
	/* The run owner's file server, kept for the job's artifacts once one
	 * was started (job_artifact_as(); NULL: none), under files_lock. */
	struct owner_files *files;
	pthread_mutex_t files_lock;
	/* By hand: print progress/events to this stream. */
	FILE *out;
	int json_out;
	/* Proc being waited on (for cancel). */
	struct proc *cur;
	/* The last ended process's final row, for the scheduler to write in
	 * the transaction that records the job's end (one commit less per
	 * job; a daemon that dies first takes the ending from exit.json). */
	struct proc final;
	int64_t final_offset;
	int has_final;
	/* In a stage process (pipeline-stage, stagectx.c): the context the
	 * daemon handed over (inputs resolved, values and artifacts it may
	 * look up) and the events file its host functions write to; NULL and
	 * -1 in the daemon and by hand. */
	cJSON *ctx;
	int evfd;
	/* In the daemon: this job's own spawn is its stage process, whose
	 * events carry values and digests (stagerun.c, host_spawn.c). */
	int stage_proc;
	/* ... and the memory cgroup the privileged parent made for its
	 * owner, handed to it in PL_MEMCAP_DIR (stagerun.c: memcap_ask());
	 * "": none. In a re-adopted job (adopted): the group its stage
	 * process ran in before the restart, read back from its record, to
	 * be removed after the process and handed to no start. */
	char memcap_dir[PATH_MAX];
	/* The events quota of this attempt (host_spawn.c): lines and bytes
	 * read so far, the processes a re-entered attempt counted from their
	 * files, and whether the reader refused something, which fails the
	 * job whatever its stage returns (stage_run). */
	int64_t ev_lines, ev_bytes;
	int64_t *quota_ids;
	int nquota_ids;
	int ev_refused;
	/* What the daemon made for the run's owner and gives it with the
	 * next process directory, in one message to the privileged parent
	 * (job_chown_later()): the work directory, a stage process's
	 * context file. */
	int chown_fds[2];                 /* PRIV_FCHOWN_FDS - 1 (priv.h) */
	int nchown;
};
/* Write j's deferred process row (inside the caller's transaction). */
void	job_flush_final(struct pl_job *j);
/* job.c: a descriptor of something the daemon made for j's run owner
 * (a directory, a file) given to the owner: with j's next process
 * directory, in one PRIV_FCHOWN (job_chown_flush(j, dirfd)), where the
 * privileged parent gives it and nothing of the owner's runs before
 * that; at once where it does not, or nothing is left to wait with.
 * Already the owner's: nothing. fd stays the caller's. 0, or -1 with
 * errno. job_chown_flush(j, fd): the waiting ones, and fd unless -1,
 * given now (at the job's end too, for a job that spawned nothing). */
int	job_chown_later(pl_job *j, int fd);
int	job_chown_flush(pl_job *j, int fd);
/* host_spawn.c: host->spawn() (pipeline-plugin(3)): the plugin's structs
 * checked, then the backend's spawn. host_spawn_shim(), the spawn of the
 * daemon and by hand: start or adopt a process under pipeline-shim, read
 * its events until it ends. */
int	host_spawn(pl_job *j, const struct pl_spawn *spec, struct pl_exit *out);
int	host_spawn_shim(pl_job *j, const struct pl_spawn *spec, struct pl_exit *out);
/* job.c: a process's ending as the stage sees it, out filled (a batch
 * system's class first in its error), and the result code: PL_ELOST,
 * the spawn's own timeout (own_deadline, monotonic; 0: none) or the
 * job's cancel once it was stopped (term_at, not 0), else PL_OK. The
 * daemon's spawn and a stage process's batch spawn (stagectx.c) end
 * alike. */
int	job_proc_result(pl_job *j, const struct pl_spawn *spec, const struct proc *p,
	    double own_deadline, double term_at, struct pl_exit *out);
/* job.c, for host.c and host_spawn.c: host->log() (into the job log,
 * and the daemon's for warnings), host->cancelled() (cancelled or past
 * its deadline), an event printed by hand (pipelinectl stage; takes d). */
void	job_log(pl_job *j, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int	job_cancelled(pl_job *j);
void	job_print_event(pl_job *j, const char *type, cJSON *d);
/* An artifact's path resolved (against cwd when relative; NULL: as it
 * is; the links above its last component followed, a link at it not) and
 * its size and, when hex is not NULL, its digest (plc_sha256_path_ctl:
 * at most max bytes, 0 for no cap, the callers pass artifact_max_size;
 * stopped by cancel and the job's timeout),
 * all as j's run owner would read it (owner_files_open(): the owner's
 * file server in a split daemon, else owner_fs_enter): a file the owner
 * could not read by hand fails with EACCES. *abs is
 * malloc'd. 0 or -1 (errno set, *abs NULL, why saying what, naming the
 * path). job_artifact_refused(errno) tells a refusal (a link, a FIFO, a
 * device, over the cap) from a path that could not be read. */
int	job_artifact_as(pl_job *j, const char *cwd, const char *path, uint64_t max,
	    char **abs, uint64_t *size, char hex[65], char *why, size_t whylen);
#define JOB_ARTIFACT_MAX(j) \
	((uint64_t)conf_number((j)->conf, "daemon.artifact_max_size", CONF_ARTIFACT_MAX_SIZE))
int	job_artifact_refused(int err);
/* A file of the job's own directories the daemon's user cannot open (a
 * run owner's process directory, 0750, its events file 0600, in a daemon
 * process of its own user), opened read-only through the owner's file
 * server (job_artifact_as()'s, kept in j->files): a regular file only, no
 * link followed. A descriptor, or -1 with errno (EACCES where there is no
 * file server: the daemon's own open said all). */
int	job_open_as(pl_job *j, const char *path);
/* A job of a stage, run or checked (mode), with its host backend. */
struct pl_job *job_new(int mode, const struct host_backend *hb, const struct stage_reg *reg,
	    const struct spec *spec, const struct spec_section *sec);
void	job_free(struct pl_job *j);
/* Run a stage's check hook plus the host's generic key checks; flags as
 * spec_check's (SPEC_CHECK_NOFILES). */
int	host_check_section(const struct stage_reg *reg, const struct spec *spec,
	    const struct spec_section *sec, int flags, char **errs);
/* Every PATH and INPUT key of j's stage resolved as host->input() would,
 * without logging: {"KEY":{"path":P}|{"error":WHY}} (for a stage process). */
cJSON	*host_inputs_resolve(pl_job *j);
/* host->input() of a job of a run the store holds (host_store): the
 * run's artifacts looked up, paths walked with the daemon's rights when
 * the stage works with them. */
const char *host_input_in_run(pl_job *j, const char *key, char *why, size_t whylen);
/* The i-th key of a stage's table; NULL past the end. */
const struct pl_key *host_key(const struct stage_reg *reg, int i);
/* A key by name; *index (may be NULL) gets its place in the table. */
const struct pl_key *host_find_key(const struct stage_reg *reg, const char *key, int *index);
/* Open the job log and write a line to it (host and daemon). */
void	job_logf(struct pl_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Read p's events file from offset as spawn() does (one batch per 64 KiB:
 * rows and events stored, then on_event); returns the offset after the
 * last whole line. Exposed for the fuzz target of the events file. */
int64_t	host_events_read(struct pl_job *j, struct proc *p, const struct pl_spawn *spec,
	    int64_t offset, struct pl_exit *out);

/* stagectx.c: the host's side in a stage process (pipeline-stage), where
 * the run hook runs as the run's owner: the backend host_stage_proc,
 * which answers lookups from the context file the daemon handed over
 * (j->ctx) and writes what the stage reports to the events file
 * (j->evfd). Below host.c and host_spawn.c. */
#define STAGE_PROC_NAME "pl-stage"   /* the spawn name of a job's stage process */
/* Append {"type":type,...d's members} as one line (takes d); type
 * without its "job." prefix. 0 or -1. */
int	stagectx_emit(pl_job *j, const char *type, cJSON *d);

#endif
