/*
 * pipeline/proto.h: the wire vocabulary of pipelined's control and feed
 * sockets, compiled by both the daemon and pipelinectl (the bgpd/bgpctl
 * pattern: it exists once).
 *
 * Control socket: newline-delimited JSON. The client's first line is
 *     {"verb":"hello","version":PL_PROTO_VERSION}
 * Every request gets zero or more data lines and exactly one closing line:
 *     {"status":"ok","result":{...}}
 *     {"status":"error","code":"EINVAL","error":"message"}
 * A line longer than PL_PROTO_MAX_LINE gets an error and a closed
 * connection.
 *
 * Feed socket (read-only): the client sends one line
 *     {"verb":"watch","version":PL_PROTO_VERSION,"since":ID,"run":NAME}
 * and reads event lines {"id":..,"ts":..,"run":..,"job":..,"type":..,...}
 * forever: first the stored events after `since` (of `run` when given),
 * then live ones. A watcher that stops reading is dropped after a
 * {"type":"feed.dropped"} notice and may reconnect with since.
 */
#ifndef PIPELINE_PROTO_H
#define PIPELINE_PROTO_H

#define PL_PROTO_VERSION   1
#define PL_PROTO_MAX_LINE  (4 * 1024 * 1024)
/* The longest line a client reads from either socket: pipelinectl stops
 * with an error at a line this long without its newline, so a socket
 * that is not pipelined's costs it bounded memory. */
#define PL_PROTO_MAX_REPLY (32 * 1024 * 1024)

#include <string.h>

/* Who may use a verb: PL_READ anyone who can connect; PL_WRITE root, the
 * daemon's own user and members of its configured group (pipelined(8)). */
enum pl_access { PL_READ, PL_WRITE };

/*
 * Control verbs: X(verb, access, description). The daemon's dispatch
 * (daemon/server/control.c) is generated from this list, a handler v_VERB each;
 * pipelinectl names the verbs it sends from it; tests/integration/build/docs.sh
 * reads it to check that each is documented. check is PL_WRITE although
 * it changes nothing: it opens the files a spec names.
 */
#define PL_VERBS(X)                                                          \
	X(hello,     PL_READ,  "protocol handshake")                         \
	X(check,     PL_WRITE, "validate a run spec")                        \
	X(submit,    PL_WRITE, "submit a run spec")                          \
	X(status,    PL_READ,  "the state of one run or of all runs")        \
	X(list,      PL_READ,  "runs, newest first")                         \
	X(logs,      PL_READ,  "a chunk of a job's log")                     \
	X(cancel,    PL_WRITE, "cancel a run")                               \
	X(retry,     PL_WRITE, "re-run what did not succeed")                \
	X(values,    PL_READ,  "the values stored by a run's jobs")          \
	X(artifacts, PL_READ,  "the artifacts of a run")                     \
	X(metrics,   PL_READ,  "a job's metrics")                            \
	X(web,       PL_READ,  "the status page's address and a login code") \
	X(du,        PL_READ,  "the bytes each run's files hold")             \
	X(gc,        PL_WRITE, "remove the artifact files retention lets go") \
	X(explain,   PL_READ,  "why a job ran instead of being reused")        \
	X(ping,      PL_READ,  "liveness")

/* Feed verbs (the feed socket takes one request). */
#define PL_FEED_VERBS(X)                                                     \
	X(watch,     PL_READ,  "follow the events of all runs or of one")

/* PLV_hello, ...: every verb of both sockets. */
enum pl_verb {
#define PL_X_VERB(v, a, d) PLV_##v,
	PL_VERBS(PL_X_VERB) PL_FEED_VERBS(PL_X_VERB)
#undef PL_X_VERB
	PLV_COUNT
};

static inline const char *
pl_verb_name(enum pl_verb v)
{
#define PL_X_VERB(v, a, d) #v,
	static const char *const names[] = { PL_VERBS(PL_X_VERB) PL_FEED_VERBS(PL_X_VERB) };
#undef PL_X_VERB
	return (unsigned)v < PLV_COUNT ? names[v] : "?";
}

/* Error codes in closing lines: X(code, description). */
#define PL_PROTO_ERRORS(X)                                                   \
	X(EPROTO,   "protocol error")                                        \
	X(EVERSION, "protocol version mismatch")                             \
	X(EVERB,    "unknown verb")                                          \
	X(EPERM,    "permission denied")                                     \
	X(EINVAL,   "invalid request")                                       \
	X(ENOENT,   "no such run or job")                                    \
	X(EEXIST,   "already exists")                                        \
	X(ESTATE,   "not in a state that allows this")                       \
	X(EINTERNAL,"internal error")                                        \
	X(ETOOLONG, "request line too long")                                 \
	X(EBUSY,    "too many connections")                                  \
	X(ENOSPC,   "the store's file system is full")                       \
	X(EIO,      "the store refused the change")

/* PLP_EPROTO, ...: the code a reply_err() takes, "EPROTO" on the wire.
 * PLP_OK (0) is no error, never sent: a function that refuses a request
 * returns the code to answer with, or PLP_OK. */
enum pl_proto_err {
	PLP_OK,
#define PL_X_PERR(c, d) PLP_##c,
	PL_PROTO_ERRORS(PL_X_PERR)
#undef PL_X_PERR
	PLP_COUNT
};

static inline const char *
pl_proto_err_name(enum pl_proto_err e)
{
#define PL_X_PERR(c, d) #c,
	static const char *const names[] = { "OK", PL_PROTO_ERRORS(PL_X_PERR) };
#undef PL_X_PERR
	return (unsigned)e < PLP_COUNT ? names[e] : "EINTERNAL";
}

/*
 * Run and job states (the store's rows, the feed, status and watch use
 * these words): X(state, final). final: nothing more happens to a run or
 * job in that state (a retry may start it again). PLR_running,
 * PLJ_pending, ...; pl_run_state_name() and pl_job_state_name() spell
 * them, pl_run_state_find() and pl_job_state_find() read one back (-1: not
 * a state of the list), pl_run_state_final() and pl_job_state_final() say
 * whether it is final. The daemon keeps the enums; the words are spelled
 * only in SQL and on the wire (its store converts at its boundary).
 */
#define PL_RUN_STATES(X) X(running, 0) X(succeeded, 1) X(failed, 1) X(cancelled, 1) \
	X(rejected, 1)
#define PL_JOB_STATES(X) X(pending, 0) X(running, 0) X(retrying, 0) X(succeeded, 1) \
	X(failed, 1) X(cancelled, 1) X(skipped, 1) X(rejected, 1) X(reused, 1)
/* reused: the job was not run; the outputs of an earlier job with the
 * same key stand for its own (pl_job_state_ok() counts it a success). */
/* The words of a list as string literals: { PL_RUN_STATES(PL_X_WORD) }. */
#define PL_X_WORD(s, final) #s,
/* Whether each is final, in the list's order. */
#define PL_X_FINAL(s, final) final,

enum pl_run_state {
#define PL_X_RS(s, final) PLR_##s,
	PL_RUN_STATES(PL_X_RS)
#undef PL_X_RS
	PLR_COUNT
};

enum pl_job_state {
#define PL_X_JS(s, final) PLJ_##s,
	PL_JOB_STATES(PL_X_JS)
#undef PL_X_JS
	PLJ_COUNT
};

static const char *const pl_run_states_[] = { PL_RUN_STATES(PL_X_WORD) };
static const char *const pl_job_states_[] = { PL_JOB_STATES(PL_X_WORD) };
static const unsigned char pl_run_final_[] = { PL_RUN_STATES(PL_X_FINAL) };
static const unsigned char pl_job_final_[] = { PL_JOB_STATES(PL_X_FINAL) };

/* The index of s in a list of n words, or -1. */
static inline int
pl_word_find(const char *const *words, int n, const char *s)
{
	for (int i = 0; s != NULL && i < n; i++)
		if (strcmp(s, words[i]) == 0)
			return i;
	return -1;
}

/* Whether a job in state s did its work: succeeded, or reused that of an
 * earlier job; the jobs after it may start. */
static inline int
pl_job_state_ok(int s)
{
	return s == PLJ_succeeded || s == PLJ_reused;
}

static inline const char *
pl_run_state_name(enum pl_run_state s)
{
	return (unsigned)s < PLR_COUNT ? pl_run_states_[s] : "?";
}

static inline const char *
pl_job_state_name(enum pl_job_state s)
{
	return (unsigned)s < PLJ_COUNT ? pl_job_states_[s] : "?";
}

static inline int
pl_run_state_find(const char *s)
{
	return pl_word_find(pl_run_states_, PLR_COUNT, s);
}

static inline int
pl_job_state_find(const char *s)
{
	return pl_word_find(pl_job_states_, PLJ_COUNT, s);
}

/* 1 when s (an enum, or -1 for a word outside the list) is final. */
static inline int
pl_run_state_final(int s)
{
	return (unsigned)s < PLR_COUNT && pl_run_final_[s];
}

static inline int
pl_job_state_final(int s)
{
	return (unsigned)s < PLJ_COUNT && pl_job_final_[s];
}

#endif
