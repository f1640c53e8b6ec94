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

/* Control verbs. */
#define PL_VERBS(X)                                                          \
	X(hello,     "protocol handshake")                                   \
	X(check,     "validate a run spec")                                  \
	X(submit,    "submit a run spec")                                    \
	X(status,    "the state of one run or of all runs")                  \
	X(list,      "runs, newest first")                                   \
	X(logs,      "a chunk of a job's log")                               \
	X(cancel,    "cancel a run")                                         \
	X(retry,     "re-run what did not succeed")                          \
	X(values,    "the values stored by a run's jobs")                    \
	X(artifacts, "the artifacts of a run")                               \
	X(metrics,   "a job's metrics")                                      \
	X(ping,      "liveness")

/* Error codes in closing lines. */
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

/* Run and job states (store, feed and status use these words). */
#define PL_RUN_STATES  "running", "succeeded", "failed", "cancelled", "rejected"
#define PL_JOB_STATES  "pending", "running", "retrying", "succeeded", "failed", "cancelled", "skipped", \
	"rejected"

#endif
