/*
 * exec.h: what pipeline-shim and the daemon's executors share (the
 * executors themselves are daemon/server/executor.h's): progress and
 * results always come from the files the shim and the job leave, whatever
 * the executor:
 *
 *   DIR/events      the child's event lines (pipeline-job(7)); PL_EVENTS
 *   RDIR/shim.json  written by the shim once the child runs:
 *                   {"shim_pid","shim_start","child_pid","pgid","child_start","host"}
 *   RDIR/exit.json  written by the shim (atomically) when the child ended:
 *                   {"exited":0|1,"status":N,"signal":N,"start":T,"end":T}
 *   the job log     stdout and stderr of the child, appended (--log)
 *
 * DIR, the process directory, is the job's to write. RDIR, where the shim
 * keeps its records (and its lock), is not: for the local executor in the
 * daemon it is DIR's sibling .shim/NAME (proc_records_dir()), the
 * daemon's, mode 0700, so that what root acts on (the process group it
 * signals, the exit status it records) is never a number the job wrote;
 * by hand, and under Slurm (whose records are on a shared file system by
 * design), RDIR is DIR.
 */
#ifndef PL_EXEC_H
#define PL_EXEC_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

/* A run's shim's refusal of a request (shim.c), written to the pipe the
 * request came with, which it then closes: its pid and start time, and
 * errno. A request it takes gets no reply: the pipe is closed once
 * exit.json is in place, so the daemon's thread wakes once per process.
 * A request (its command line and environment) travels in a memfd sent
 * with it, of any size up to SHIM_REQ_MAX: the daemon refuses a larger
 * one, naming both sizes, and never starts the shim another way. */
#define SHIM_REQ_MAX (64 << 20)

/* The most supplementary groups a run's owner carries: the shim's -u,
 * the privileged parent's messages (priv.h: PRIV_NGROUPS) and the
 * credentials the control socket reads of its peer (access.h) take as
 * many, so an owner's groups reach its processes whole. The parent
 * refuses an owner with more (the decoder, a vouch); the control socket
 * then reads none of its connection's groups. */
#define SHIM_NGROUPS 256
struct shim_reply {
	int32_t pid;
	int32_t err;
	uint64_t start;
};

#endif
