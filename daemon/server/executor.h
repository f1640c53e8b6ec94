/*
 * executor.h: the executor seam. An executor starts a job's process under
 * pipeline-shim and watches it; progress and results always come from the
 * files the shim and the job leave, whatever the executor (daemon/lib's
 * exec.h describes them).
 *
 * The local executor (exec_local.c) has the run's shim start the process
 * and watches it through a pipe that shim closes once exit.json is in; the slurm executor (exec_slurm.c) submits a batch script that runs
 * the shim on a compute node and watches the Slurm job. A restarted daemon
 * rebuilds a struct proc from the store and calls adopt().
 */
#ifndef PL_EXECUTOR_H
#define PL_EXECUTOR_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "exec.h"

struct executor;

/* Process states as stored (procs.state). */
enum proc_state {
	PROC_STARTING = 0, /* row written, not yet started */
	PROC_QUEUED,       /* accepted by a batch system, not running yet */
	PROC_RUNNING,
	PROC_ENDED,        /* exit record read */
	PROC_LOST          /* vanished without an exit record */
};

struct proc {
	int64_t id;                  /* procs.id in the store; 0: no row yet */
	int64_t attempt_id;          /* for the row's first write */
	char name[104];              /* the process's name in its attempt */
	double started;              /* wall clock at the start request */
	const struct executor *ex;
	char dir[PATH_MAX];          /* the process directory (exec.h) */
	char rdir[PATH_MAX];         /* the shim's records (exec.h); "": dir */
	char log[PATH_MAX];          /* the job log the shim appends to */
	const char *run;             /* local: the run, whose shim starts it (NULL: a shim of its own) */
	const char *cgroup;          /* local: the directory of PRIV_CGROUP's group its run's
	                                shim (one of its own) is moved into; NULL: none */
	pid_t pid;                   /* local: the shim's pid */
	uint64_t starttime;          /* local: the shim's start time (/proc stat field 22) */
	int pidfd;                   /* local: the run shim's pipe, or the shim's pidfd; -1 when none */
	int child;                   /* local: the shim is our child (reap it) */
	char ext_id[64];             /* slurm: the job id */
	int state;                   /* enum proc_state */
	char reason[128];            /* why it is queued (Slurm's reason), or how it was lost */
	/* The ending, once state is PROC_ENDED or PROC_LOST. */
	int exited, status, sig;
	char end_class[32];          /* "", or the batch system's class: "oom",
	                                "timeout", "node_fail", "preempted", "cancelled" */
	/* Executor options for this job (slurm: partition, gres, ...), as
	 * "key=value" lines; NULL for local. */
	const char *opts;
	/* A batch executor's record the daemon's own open was refused
	 * (EACCES: a run owner's process directory under Slurm, in a daemon
	 * process of its own user) opened read-only another way (the owner's
	 * file server, job_open_as()): a descriptor, or -1 with errno; NULL:
	 * none. A local process's records are the daemon's (.shim/). */
	int (*open_as)(void *arg, const char *path);
	void *open_arg;
};

struct executor {
	const char *name;            /* "local", "slurm" (exec_find()) */
	/* A batch system's: the job's resources are the batch system's to
	 * count (the daemon's [resources] are not taken) and its executor
	 * options (partition, gres, ...) apply. */
	int batch;
	/* Start the shim for argv with envp in cwd. Fills pid/starttime or
	 * ext_id and sets state. 0 or -1 (logged). */
	int (*start)(struct proc *p, char *const argv[], char *const envp[], const char *cwd);
	/* After a daemon restart: reattach to p (from its stored ids). Sets
	 * state to RUNNING/QUEUED if it still lives, or ENDED/LOST. 0 or -1. */
	int (*adopt)(struct proc *p);
	/* Wait up to timeout_ms for p to end; 1 when it ended (state and the
	 * ending filled in), 0 when it still runs, -1 on error. */
	int (*wait)(struct proc *p, int timeout_ms);
	/* Deliver sig to the job's processes (the child's process group). */
	int (*signal)(struct proc *p, int sig);
	/* Release what start/adopt acquired (fds). */
	void (*release)(struct proc *p);
};

/* exec_local.c. exec_local_run_shims(1): start each run's processes
 * through one shim per run (pipelined does; started at the run's first
 * process, replaced when it dies); exec_local_run_done(run): the run
 * ended, its shim may exit once its processes have. A process with a
 * cgroup (a stage process's, PRIV_CGROUP) gets a shim of its own, moved
 * into that group by the privileged parent; exec_local_cgroup_done(dir)
 * tells it to go likewise. */
extern const struct executor exec_local;
void	exec_local_run_shims(int on);
void	exec_local_run_done(const char *run);
void	exec_local_cgroup_done(const char *cgroup);
/* exec_slurm.c */
extern const struct executor exec_slurm;

/* executor.c: the executor of that name ("local", "slurm"), or NULL when
 * there is none. EXEC_NAMES lists them. */
#define EXEC_NAMES "local or slurm"
const struct executor *exec_find(const char *name);

/* shimfiles.c: shared by executors. Read RDIR/exit.json into p (1 when
 * present, 0 when absent, -1 when unreadable); read RDIR/shim.json (the
 * child's start time 0 in a record that has none). proc_records_dir(): the
 * records directory of process directory dir (.../NAME: .../.shim/NAME). */
int	proc_read_exit(struct proc *p);
/* Hold the descriptor that proc_read_exit() and proc_read_shim() use
 * when the process is out of them; the daemon calls it at start. */
void	proc_reserve_fd(void);
int	proc_read_shim(struct proc *p, pid_t *child_pid, pid_t *pgid, uint64_t *child_start);
void	proc_records_dir(const char *dir, char *out, size_t len);
/* The environment a shim is started with: made by the daemon, never the
 * job's (the job's travels as data and is applied in the child only). */
extern char *const shim_clean_env[];
/* A memfd holding argv then envp as a shim request (uint32 argc, uint32
 * envc, the strings NUL-terminated): the descriptor, or -1 with errno
 * (E2BIG: *len over SHIM_REQ_MAX); *len its size. */
int	shim_request_fd(char *const argv[], char *const envp[], size_t *len);
/* Start `shim [-u PIN] OPT 3` (-R: a request, -G: a run's shim's socket,
 * pinned to the owner PIN unless NULL), fd on its descriptor 3, with
 * shim_clean_env: its pid, or -1 with errno. */
pid_t	shim_spawn_fd(const char *shim, const char *pin, const char *opt, int fd);
/* The same, with `-o ROWNER` (after the pin) when rowner is neither -1
 * nor 0: the daemon process's own user, whose records directories the shim
 * then takes for its own (the privileged parent's word, priv.c). */
pid_t	shim_spawn_owned(const char *shim, const char *pin, uid_t rowner, const char *opt,
	    int fd);
/* The owner a shim command line's -u names (before "--"), or "". */
const char *argv_owner(char *const argv[]);

#endif
