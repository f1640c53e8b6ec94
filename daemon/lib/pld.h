/*
 * pld.h: daemon/lib, what the daemon's programs share (libpldlib.a):
 * logging, parsers and paths, error lists, the INI reader, pipelined.conf
 * and listening addresses, one section per file. Every program of the
 * daemon's side may include it (pipelinectl and pipeline-stage with the
 * server's plugin host, daemon/server/host.h); it declares nothing of the
 * server, the store or the HTTP side, and needs no libuv.
 */
#ifndef PL_PLD_H
#define PL_PLD_H

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "procstat.h"
#include "pipeline/proto.h"

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
/* The same, trusted's directories and links trusted only at below (an
 * absolute, resolved path) or under it, and a path its links lead to
 * ending there too. */
char	*path_trusted_below(const char *path, uid_t trusted, const char *below, char *why,
	    size_t whylen);
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

/* util.c: processes, and the files under the state directory. */
/* A process's state letter, process group and start time (procstat.h's
 * proc_stat_read(); any may be NULL): 0, -1 when it is gone. */
int	proc_stat(pid_t pid, char *state, pid_t *pgrp, uint64_t *start);
/* The job files under the state directory, which jobs may write to, are
 * reached without following a link. dirs_make_at: make the directories
 * of rel ('/'-separated) below dirfd as needed, each opened O_NOFOLLOW:
 * the last one's descriptor, or -1 (ELOOP: a link on the way, ENOTDIR:
 * a file). file_open_at: open(2) name in dirfd, O_NOFOLLOW, refused
 * unless a regular file with one link (EINVAL, EMLINK). */
int	dirs_make_at(int dirfd, const char *rel, mode_t mode);
/* dirs_make_at for a directory that a job's programs write (the work and
 * process directories): made 0750, the directories above 0711, so that
 * its owner can reach it once job.c's job_chown_later() or
 * job_chown_flush() has given it to that owner. */
int	dirs_make_leaf(int dirfd, const char *rel);
/* The uid and gid of an owner string ("UID:GID[:G1,...]"): 0 or -1. */
int	owner_ids(const char *owner, uid_t *uid, gid_t *gid);
/* Take an owner's file-system rights on the calling thread only (its
 * fsuid, fsgid and groups, through the raw system calls, which Linux
 * keeps per thread), so that what the thread opens next is opened as the
 * owner would: 1 when switched (owner_fs_leave() gives the daemon's back),
 * 0 when there is nothing to switch (no owner, the daemon's own uid, or a
 * daemon that is not root), -1 (errno set) when the switch failed. A
 * split daemon reads a run owner's files through the owner's file server
 * instead (priv.h: owner_files_open()). */
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
/* Started as root, a daemon that runs its runs as their submitters
 * (group, admin_group or job_user) is split, and its daemon process is
 * never root: user unset there means CONF_DEFAULT_USER, which must then
 * exist. 0, or -1 with the error appended to errs. */
#define CONF_DEFAULT_USER "_pipelined"
int	conf_default_user(struct conf *c, char **errs);
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
 * shim (both are the daemon's helpers). conf_shim_path: the shim, the
 * configuration's (c may be NULL), else the one beside this program. */
void	conf_stage_path(const struct conf *c, char *buf, size_t len);
void	conf_shim_path(const struct conf *c, char *buf, size_t len);
int	conf_line(const struct conf *c, const char *section_key);  /* 0: a default */
/* A reload: keep in nc the running values (old's) of the keys that need a
 * restart, naming in changed those whose value changed; their count. */
int	conf_keep_restart(struct conf *nc, const struct conf *old, char *changed, size_t len);
struct resource *conf_resource(struct conf *c, const char *name);
/* The ceiling of a spec's max_variants (pipelined.conf(5)) when it sets
 * none. */
#define CONF_MAX_VARIANTS 64

/* addr.c: listening addresses (http_listen) */
/* Parse "ADDRESS:PORT" or "[ADDRESS]:PORT"; -1 with a message in err. */
int	httpd_parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len,
	    char *err, size_t errsz);
/* Can a listener on ss take token (16 characters or more; set off
 * loopback)? -1 with the reason in err. */
int	httpd_token_problem(const struct sockaddr_storage *ss, const char *token, char *err,
	    size_t errsz);

#endif
