/*
 * pipelined.h: the daemon's private header. One section per subsystem,
 * each named for its file. pipelinectl links the same core library (for
 * `pipelinectl check` and `pipelinectl stage`), so nothing here assumes a
 * running daemon except where it says so.
 */
#ifndef PIPELINED_H
#define PIPELINED_H

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "pipeline/proto.h"
#include "exec.h"

#define PL_VERSION "0.1.0"

/* log.c */
enum { LOG_LVL_ERR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };
int	log_init(int foreground, int level, const char *file);
void	log_tee_stderr(int on);
void	log_setlevel(int level);
int	log_getlevel(void);
int	log_level_parse(const char *s);
const char *log_level_name(int level);
void	log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void	fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* util.c */
double	now_wall(void);                 /* seconds since the epoch */
int	parse_duration(const char *s, double *out);
int	parse_size(const char *s, int64_t *out);
int	parse_bool(const char *s, int *out);
int	parse_int(const char *s, int64_t *out);
int	parse_double(const char *s, double *out);
int	valid_name(const char *s);      /* [A-Za-z0-9._-]+, not starting with '.' */
/* NAME or NAME@N, a run's revision (run_ref_split()); run_rev_name()
 * spells revision N of NAME: NAME for the first, NAME@N after. */
int	valid_run_ref(const char *s);
int	run_ref_split(const char *ref, char *base, size_t len, int *rev);
void	run_rev_name(const char *base, int rev, char *buf, size_t len);
/* Split a comma/space separated list; returns a NULL-terminated malloc'd
 * vector of malloc'd words (free with strv_free). */
char	**split_list(const char *s, int *count);
void	strv_free(char **v);
/* Resolve path against dir unless absolute; returns malloc'd string. */
char	*path_resolve(const char *dir, const char *path);
/* path, resolved, when a process with the daemon's rights may use it for
 * a submitter: no directory on it that a user other than root or trusted
 * could change, no link of another user's to what it does not own (util.c);
 * NULL with why set when not. malloc'd. */
char	*path_trusted(const char *path, uid_t trusted, char *why, size_t whylen);
/* Whether a job program's event line of this type is stored and
 * published (pipeline-job(7)); EVENT_PROGRAM_TYPES lists them in words. */
int	event_program_type(const char *type);
#define EVENT_PROGRAM_TYPES \
	"started, progress, metric, log, checkpoint, artifact, done and error"
char	*xstrdup(const char *s);
void	*xcalloc(size_t n, size_t sz);
/* p resized to n elements of sz bytes (reallocarray(3)); exits on failure
 * or overflow, as xcalloc and xstrdup do. */
void	*xrealloc(void *p, size_t n, size_t sz);
/* The directory holding the running executable (for the shim, plugins). */
const char *self_dir(void);
/* Process start time (field 22 of /proc/PID/stat); 0 when unknown. */
uint64_t proc_starttime(pid_t pid);
/* NULL when s is valid UTF-8; else a malloc'd copy with U+FFFD for each
 * byte that is not part of a valid sequence (replies stay valid JSON). */
char	*utf8_clean(const char *s);
/* The line (from 1) of text's first NUL byte among len bytes; 0: none. */
int	nul_line(const char *text, size_t len);
/* Does this JSON text hold a \u0000 escape (a NUL inside a string)? */
int	json_has_nul(const char *json);
/* Did you mean: offer each candidate to suggest_try(); best is the closest
 * within a small edit distance (a swap of neighbours counts one), or NULL.
 * suggest_hint() writes "; did you mean \"best\"?" or "" into buf. */
struct suggest {
	const char *word;
	const char *best;
	int dist;
};
void	suggest_try(struct suggest *s, const char *cand);
const char *suggest_hint(const struct suggest *s, char *buf, size_t n);

/* access.c: who may see and act on which run (pipelined(8) SECURITY) */
struct conf;
struct access_peer {          /* a peer's credentials (SO_PEERCRED, SO_PEERGROUPS) */
	uid_t uid;
	gid_t gid;
	gid_t groups[64];
	int ngroups;
};
/* A viewer: ACCESS_ALL (root, the daemon's user, admin_group), or the
 * uid whose runs it sees. */
#define ACCESS_ALL ((int64_t)-1)
/* The credentials of a Unix socket's peer (and its pid, if pid): 0 or -1. */
int	access_peer_of(int fd, struct access_peer *p, pid_t *pid);
int	access_in_group(const struct access_peer *p, gid_t g);
/* May the peer check, submit, cancel and retry at all (group, admin_group)? */
int	access_may_write(const struct conf *conf, const struct access_peer *p);
int64_t	access_viewer(const struct conf *conf, const struct access_peer *p);
/* May viewer see and act on a run submitted by submitter (-1: unknown)? */
int	access_run(int64_t viewer, int64_t submitter);
/* "no run RUN", in buf: the answer for a run that does not exist and for
 * one viewer may not see alike (code ENOENT, HTTP 404). */
const char *access_no_run(int64_t viewer, const char *run, char *buf, size_t len);

/* notify.c: [notify], the outbox's delivery thread */
struct store;
int	notify_start(const struct conf *conf, struct store *store);
const char *notify_classify(const char *type, const cJSON *data, const char *const **targets);
void	notify_wake(void);
/* A reload: the new configuration's [notify], in force at once. */
void	notify_reconf(const struct conf *conf);

/* httpd.c: the HTTP listener (http_listen): /metrics, the status page */
int	httpd_start(const struct conf *conf, const char *dbpath);
/* A reload: the new http_token, http_host, http_max_streams,
 * http_header_timeout and per-session and per-user bounds, in force at
 * once. A value it cannot use (a token
 * too short, streams not below the running connection limit) is kept at
 * its running one in conf and named in kept (", "-separated); -1 then. */
int	httpd_reconf(struct conf *conf, char *kept, size_t len);
/* A one-time login code of uid for the page (32 hex digits into out),
 * whose session sees what viewer may (access.c): 0, or -1. */
int	httpd_login_code(char *out, size_t outsz, int64_t viewer, uid_t uid);
/* Are a and b the same non-empty string? Compared as HMACs: the time says
 * nothing of where they differ, nor of their lengths. */
int	httpd_equal(const char *a, const char *b);
/* Is a Host: header one of names (space-separated, without ports)? */
int	httpd_host_allowed(const char *host, const char *names);
/* Where a request's header stands in the first len bytes of a connection. */
enum { HEAD_MORE, HEAD_DONE, HEAD_URI_LONG, HEAD_TOO_LARGE };
int	httpd_head_scan(const char *buf, size_t len);

/* web.c: the status page's JSON, files and event stream (HTTP threads) */
struct sse;
void	web_init(const char *dbpath, const char *feed_socket, const char *state_dir,
	    const char *web_dir);
char	*web_static(const char *url, const char **type, size_t *len);
/* A JSON document for viewer (access.c); NULL with *status 404 or 503
 * and the answer's text in err (a run viewer may not see is answered as
 * one that does not exist). */
char	*web_api(const char *url, const char *run, const char *job, const char *off,
	    int64_t viewer, size_t *len, int *status, char *err, size_t errlen);
struct sse *web_sse_open(const char *run, long long since, int64_t viewer);
ssize_t	web_sse_read(struct sse *s, char *dst, size_t max);
void	web_sse_close(struct sse *s);
/* Parse "ADDRESS:PORT" or "[ADDRESS]:PORT"; -1 with a message in err. */
int	httpd_parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len,
	    char *err, size_t errsz);
/* Can a listener on ss take token (16 characters or more; set off
 * loopback)? -1 with the reason in err. */
int	httpd_token_problem(const struct sockaddr_storage *ss, const char *token, char *err,
	    size_t errsz);

/* metrics.c: the Prometheus exposition of GET /metrics */
enum metrics_counter { MC_FEED_WATCHERS, MC_FEED_DROPPED };
/* Counters the store does not hold; any thread. */
void	metrics_count(enum metrics_counter which, long delta);
int	metrics_init(const char *dbpath);
/* The exposition as a malloc'd text (*len bytes), or NULL. HTTP thread only. */
char	*metrics_render(size_t *len);
/* A process's state letter, process group and start time (fields 3, 5
 * and 22 of /proc/PID/stat; any may be NULL): 0, -1 when it is gone. */
int	proc_stat(pid_t pid, char *state, pid_t *pgrp, uint64_t *start);
/* The job files under the state directory, which jobs may write to, are
 * reached without following a link. dirs_make_at: make the directories
 * of rel ('/'-separated) below dirfd as needed, each opened O_NOFOLLOW:
 * the last one's descriptor, or -1 (ELOOP: a link on the way, ENOTDIR:
 * a file). file_open_at: open(2) name in dirfd, O_NOFOLLOW, refused
 * unless a regular file with one link (EINVAL, EMLINK). */
int	dirs_make_at(int dirfd, const char *rel, mode_t mode);
/* dirs_make_at for a directory that owner's job programs write (the work
 * and process directories): made 0750 and, when owner (a spec->owner) is
 * set, given to its uid and gid; the directories above are made 0711, so
 * that the owner can reach it. */
int	dirs_make_owned(int dirfd, const char *rel, const char *owner);
/* The uid and gid of an owner string ("UID:GID[:G1,...]"): 0 or -1. */
int	owner_ids(const char *owner, uid_t *uid, gid_t *gid);
/* Take an owner's file-system rights on the calling thread only (its
 * fsuid, fsgid and groups, through the raw system calls, which Linux
 * keeps per thread), so that what the thread opens next is opened as the
 * owner would: 1 when switched (owner_fs_leave() gives the daemon's back),
 * 0 when there is nothing to switch (no owner, the daemon's own uid, or a
 * daemon that is not root), -1 (errno set) when the switch failed. */
struct owner_fs {
	int ngroups;
	gid_t groups[256];
};
int	owner_fs_enter(const char *owner, struct owner_fs *save);
void	owner_fs_leave(const struct owner_fs *save);
int	file_open_at(int dirfd, const char *name, int flags, mode_t mode);

/* errlist.c: error lists */
/* Append "file:line: key: message\n" to *errs (a line of 0 or less:
 * "file: key: message"). The first 100 errors are kept, then "... and N
 * more errors"; appending costs the new line on the thread that wrote the
 * list last. */
void	errs_add(char **errs, const char *file, int line, const char *key,
	    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Append the lines of more (an error list) that *errs lacks. */
void	errs_merge(char **errs, const char *more);
/* The longest message errs_add() keeps, its NUL included: a longer one is
 * cut, so a message that lists names sizes its list to fit. */
#define ERRS_MSG_MAX 1024

/* ini.c: the INI line reader (specs and pipelined.conf) */
struct ini_reader {
	const char *path;        /* for the reader's errors: the spec's or the conf's */
	const char *text;
	size_t off;
	int line;                /* the line being read */
	char *raw;               /* its text, whole */
	char *longval;           /* a value inih could not take whole */
	char **errs;
	int nerr;
	/* Called with each line's text before inih sees it (may be NULL). */
	void (*on_line)(void *arg, const char *raw);
	void *arg;
};
/* The reader for ini_parse_stream (stream: a struct ini_reader). */
char	*ini_reader_line(char *str, int num, void *stream);
/* A value as the handler should take it (whole, however long). */
const char *ini_reader_value(const struct ini_reader *r, const char *value);
void	ini_reader_free(struct ini_reader *r);
/* inih's ini_parse_stream over text with that reader; *line is the line
 * the handler is called for; lines that are no key are reported into errs
 * as path:line (*nerr counts them). For pipelined.conf. */
int	ini_text_parse(const char *path, const char *text, int (*handler)(void *, const char *,
	    const char *, const char *), void *user, int *line, char **errs, int *nerr);

/* conf.c: pipelined.conf */
#define CONF_MAX_RES 32
/* The notification kinds [notify] events may name (notify.c sends them). */
#define CONF_NOTIFY_NKINDS 5
extern const char *const conf_notify_kinds[CONF_NOTIFY_NKINDS];
struct resource {
	char name[64];
	int capacity;
	int used;
};
/* The submit limits' defaults (pipelined.conf(5) max_spec_bytes,
 * max_spec_jobs): a release DAG has tens of jobs, a sweep thousands; a
 * 70,000-job spec held the control loop for 3.2 s and left a 238 MB WAL. */
#define CONF_MAX_SPEC_BYTES (1 << 20)
#define CONF_MAX_SPEC_JOBS 10000
struct conf {
	char path[PATH_MAX];
	char dir[PATH_MAX];           /* the config file's directory */
	char state_dir[PATH_MAX];
	char control_socket[PATH_MAX];
	char feed_socket[PATH_MAX];
	char plugin_dir[PATH_MAX];
	char shim[PATH_MAX];
	char jobs_dir[PATH_MAX];
	char python[PATH_MAX];
	char log_file[PATH_MAX];
	char group[64];
	gid_t gid;                    /* (gid_t)-1 when no group is set */
	char admin_group[64];         /* its members see and act on every run */
	gid_t admin_gid;              /* (gid_t)-1 when unset */
	char job_user[64];            /* root's submissions run as this user ("": root) */
	uid_t job_uid;                /* its uid and primary group, (uid_t)-1 when unset */
	gid_t job_gid;
	char user[64];                /* the user a daemon started as root becomes ("": none) */
	uid_t user_uid;               /* its uid and primary group, (uid_t)-1 when unset */
	gid_t user_gid;
	int log_level;
	int max_jobs;
	double kill_grace;
	int feed_queue_max;           /* bytes a watcher may have queued */
	char http_listen[256];        /* ADDRESS:PORT for /metrics and the page, or "" */
	char http_token[256];         /* the bearer token: sees every run, and /metrics */
	char http_host[512];          /* the Host: names answered ("": the address, localhost) */
	int http_max_connections;     /* HTTP connections at once */
	int http_max_per_ip;          /* HTTP connections from one address (0: no limit) */
	int http_max_per_session;     /* HTTP connections of one session (0: no limit) */
	int http_max_per_user;        /* HTTP connections of one user's sessions (0: no limit) */
	int http_max_streams;         /* status page event streams at once */
	double http_timeout;          /* seconds a connection may make no progress */
	double http_header_timeout;   /* seconds to the end of a request's header */
	char web_dir[PATH_MAX];       /* the page's files */
	int control_max_clients;      /* control connections open at once */
	double control_idle_timeout;  /* seconds a control connection may be silent */
	int feed_max_watchers;        /* feed connections open at once */
	double feed_idle_timeout;     /* seconds to the watch request, or to a drop notice's delivery */
	int max_spec_bytes;           /* a run spec's largest size (spec_load) */
	int max_spec_jobs;            /* a run spec's most jobs, after any expansion */
	int max_variants;             /* the ceiling of a spec's max_variants (sweeps) */
	int keep_promoted;            /* [retention]: promoted runs kept before the newest, per alias */
	int keep_days;                /* runs submitted in these last days are kept */
	int64_t gc_min_size;          /* artifact files gc removes: this size or more */
	int nres;
	struct resource res[CONF_MAX_RES];
	/* Every key as read, "section.key" -> value, for host->conf_get(). */
	cJSON *all;
	cJSON *lines;                 /* "section.key" -> its line in the file */
};
/* Parse a configuration file. Errors are appended to errs (file:line: key:
 * message lines) and -1 returned. */
int	conf_load(struct conf *c, const char *path, char **errs);
void	conf_free(struct conf *c);
void	conf_print(const struct conf *c, FILE *f);
const char *conf_get(const struct conf *c, const char *section_key);
/* A count or size key of the configuration (a stage process has only the
 * keys set, not the struct's fields), or def when unset. */
int64_t	conf_number(const struct conf *c, const char *section_key, int64_t def);
/* Their defaults: what one attempt of a job may report through its
 * events files (lines and bytes), and the largest artifact hashed. */
#define CONF_EVENTS_MAX_LINES	100000
#define CONF_EVENTS_MAX_SIZE	(16ll << 20)
#define CONF_ARTIFACT_MAX_SIZE	(256ll << 30)
/* pipeline-stage, which runs stages as their run's owner: beside the
 * shim (both are the daemon's helpers). */
void	conf_stage_path(const struct conf *c, char *buf, size_t len);
int	conf_line(const struct conf *c, const char *section_key);  /* 0: a default */
/* A reload: keep in nc the running values (old's) of the keys that need a
 * restart, naming in changed those whose value changed; their count. */
int	conf_keep_restart(struct conf *nc, const struct conf *old, char *changed, size_t len);

/* conf_check.c: every path the configuration names, checked as the daemon
 * will use it, and http_listen free (not the sockets and the address when
 * daemon_runs: a running daemon holds them). Errors appended to errs. */
int	conf_check(const struct conf *c, int daemon_runs, char **errs);
/* become.c: root's last acts for a daemon with `user`, then root given
 * up for good: 0, or -1 after a line on standard error. */
int	become_user(const struct conf *c);
struct resource *conf_resource(struct conf *c, const char *name);

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
/* A spec's max_variants when [run] sets none, and the ceiling of
 * pipelined.conf(5) when it sets none. */
#define SPEC_MAX_VARIANTS 16
#define CONF_MAX_VARIANTS 64
const struct spec_kv *spec_find(const struct spec_section *sec, const char *key);
const char *spec_get(const struct spec_section *sec, const char *key);
/* The jobs each job's `after` names, as indices in s->jobs (-1: no such
 * job): dep[i][k] for s->jobs[i]->after[k], dep[i] sized by the caller.
 * One hash map for the whole spec: a chain of n jobs costs n, not n^2. */
void	spec_after_index(const struct spec *s, int **dep);
/* Validate everything: common keys, stages (through the plugin registry),
 * DAG (unknown after, cycles), resources against conf (may be NULL).
 * Each job section whose stage is registered is handed to stage_check
 * (may be NULL), which returns its number of errors: the daemon and
 * pipelinectl pass host_check_section (host.c sits above spec.c). */
struct stage_reg;
typedef int spec_stage_check(const struct stage_reg *reg, const struct spec *spec,
    const struct spec_section *sec, char **errs);
int	spec_check(struct spec *s, const struct conf *c, spec_stage_check *stage_check,
	    char **errs);
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
char	*store_value_history(struct store *s, const char *key, int limit);
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
 * read) when it was hashed, if path is sb still (inside a transaction): a
 * file that changed while it was read is not kept (the next look reads it
 * again). */
void	store_digest_keep(struct store *s, const char *path, const struct stat *sb,
	    const char hex[65]);
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

/*
 * host.c, host_spawn.c, job.c: the pl_host table and struct pl_job. The
 * table is one for every program; where what a stage reports goes and
 * where what it looks up comes from is the job's host backend (after
 * exec.h's struct executor), chosen once, by job_new(), for the way the
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
	 * read: the store keeps its digest for reuse, so the first reuse of
	 * a multi-GB artifact is a stat per file (store_digest_keep); where
	 * nothing is stored, or the digest is a stage process's, nothing. */
	void	(*digest_keep)(pl_job *j, const char *path, const struct stat *sb,
		    const char *hex);
};
extern const struct host_backend host_store;       /* host_store.c */
/* The stored name of a run j's stage names, in buf: its own run and its
 * previous (submit resolved it) as they are; another NAME@N that revision,
 * a bare NAME its newest revision that succeeded, else its newest (as
 * previous is read); a name of no run as it is (host_store.c: the
 * daemon's jobs only). */
const char *hstore_run_named(struct pl_job *j, const char *run, char *buf, size_t len);
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
	    const char *hex);
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
/* host_store.c: the newest of plan's artifacts name (of job, or of any
 * job when NULL): PL_OK with path and sha256 (when not NULL) copied, or
 * PL_ENOENT. */
int	reuse_plan_find(const struct reuse_plan *plan, const char *job, const char *name,
	    char *path, size_t pathlen, char *sha256);
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
	/* Strings handed to the plugin, freed with the job. */
	char **pool;
	int npool, cappool;
	pthread_mutex_t lock;
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
	/* The events quota of this attempt (host_spawn.c): lines and bytes
	 * read so far, the processes a re-entered attempt counted from their
	 * files, and whether the reader refused something, which fails the
	 * job whatever its stage returns (stage_run). */
	int64_t ev_lines, ev_bytes;
	int64_t *quota_ids;
	int nquota_ids;
	int ev_refused;
};
/* Write j's deferred process row (inside the caller's transaction). */
void	job_flush_final(struct pl_job *j);
/* host_spawn.c: host->spawn() (pipeline-plugin(3)): the plugin's structs
 * checked, then the backend's spawn. host_spawn_shim(), the spawn of the
 * daemon and by hand: start or adopt a process under pipeline-shim, read
 * its events until it ends. */
int	host_spawn(pl_job *j, const struct pl_spawn *spec, struct pl_exit *out);
int	host_spawn_shim(pl_job *j, const struct pl_spawn *spec, struct pl_exit *out);
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
 * all with the file-system rights of j's run owner (owner_fs_enter): a
 * file the owner could not read by hand fails with EACCES. *abs is
 * malloc'd. 0 or -1 (errno set, *abs NULL, why saying what, naming the
 * path). job_artifact_refused(errno) tells a refusal (a link, a FIFO, a
 * device, over the cap) from a path that could not be read. */
int	job_artifact_as(pl_job *j, const char *cwd, const char *path, uint64_t max,
	    char **abs, uint64_t *size, char hex[65], char *why, size_t whylen);
#define JOB_ARTIFACT_MAX(j) \
	((uint64_t)conf_number((j)->conf, "daemon.artifact_max_size", CONF_ARTIFACT_MAX_SIZE))
int	job_artifact_refused(int err);
/* A job of a stage, run or checked (mode), with its host backend. */
struct pl_job *job_new(int mode, const struct host_backend *hb, const struct stage_reg *reg,
	    const struct spec *spec, const struct spec_section *sec);
void	job_free(struct pl_job *j);
/* Run a stage's check hook plus the host's generic key checks. */
int	host_check_section(const struct stage_reg *reg, const struct spec *spec,
	    const struct spec_section *sec, char **errs);
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

/* stagerun.c: a job's run hook, in the daemon or in a stage process of
 * its own as the run's owner (pipeline-plugin(3), "How a stage runs"). */
/* 1 when j's run hook runs out of the daemon. */
int	stage_out_of_process(const struct pl_job *j);
/* Run j's stage: its run hook here, or its stage process through
 * host->spawn(); the hook's result either way. */
int	stage_run(struct pl_job *j);

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
/* A filtered copy of the configuration for a stage process: every key
 * but those that hold secrets. */
cJSON	*stage_conf_copy(const struct conf *c);

/* pipelined.c, sched.c, control.c, feed.c: the daemon itself. pipelined.c
 * owns the loop and its handles and wires the parts together at start:
 * each is given what it needs and none reaches into another's state.
 * control.c, the layer above the scheduler, calls its sched_* functions;
 * the scheduler calls neither listener (its events reach the feed through
 * the store's announce hook). */
#include <uv.h>
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
/* A sweep's job's values ("lora_r=64"), to free; NULL for another job. */
char	*sched_job_variant(const char *run, const char *job);
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
