/*
 * slurm.h: talking to Slurm for the slurm executor (exec_slurm.c): the
 * batch script, sbatch, the state queries (scontrol show job, squeue,
 * sacct, the jobcomp/filetxt file) with their parsers, the mapping of
 * Slurm's job states onto proc states and end classes, and scancel.
 *
 * The parsers take the text Slurm 22.05 prints and never run anything, so
 * the unit tests (tests/unit/test_slurm.c) feed them outputs captured from
 * a real cluster.
 */
#ifndef PL_SLURM_H
#define PL_SLURM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "executor.h"

/* Slurm's job states (JOB_* and the flag states that scontrol prints). */
enum slurm_state {
	SLURM_UNKNOWN = 0,
	SLURM_PENDING,
	SLURM_RUNNING,
	SLURM_SUSPENDED,
	SLURM_COMPLETING,
	SLURM_CONFIGURING,
	SLURM_COMPLETED,
	SLURM_CANCELLED,
	SLURM_FAILED,
	SLURM_TIMEOUT,
	SLURM_NODE_FAIL,
	SLURM_PREEMPTED,
	SLURM_BOOT_FAIL,
	SLURM_DEADLINE,
	SLURM_OUT_OF_MEMORY,
	SLURM_REQUEUED,
	SLURM_REQUEUE_HOLD,
	SLURM_REQUEUE_FED,
	SLURM_SPECIAL_EXIT,
	SLURM_RESV_DEL_HOLD,
	SLURM_REVOKED,
	SLURM_RESIZING,
	SLURM_SIGNALING,
	SLURM_STAGE_OUT,
	SLURM_STOPPED
};

/* What one query learned about a job. */
struct slurm_job {
	char id[64];
	int state;              /* enum slurm_state */
	char state_name[32];    /* as Slurm printed it */
	char reason[128];       /* Reason= (pending reason, or why it ended); "" for None */
	int restarts;           /* Restarts= (requeues so far); -1 unknown */
	int exit_status;        /* ExitCode=S:G, S */
	int exit_signal;        /* ExitCode=S:G, G */
	int have_exit;          /* ExitCode was present */
	char nodes[128];        /* NodeList= / BatchHost= */
	char source[16];        /* "scontrol", "squeue", "sacct", "jobcomp" */
};

/* Executor options, from the "key=value" lines of struct proc.opts (the
 * run spec's keys over pipelined.conf's [slurm] defaults). */
struct slurm_opts {
	char partition[64];
	char gres[128];
	char time[32];
	char mem[32];
	char account[64];
	char sbatch_options[512];  /* extra sbatch options, whitespace-separated */
	char signal[32];           /* --signal=B:VALUE; default "USR1@120"; "none" */
	char checkpoints[256];     /* checkpoint root searched on a requeue;
	                              default "$PL_WORKDIR/checkpoints" */
	char jobcomp[256];         /* the jobcomp/filetxt file, "" to ask Slurm */
	char job_name[64];         /* --job-name */
	char bin_dir[256];         /* where Slurm's commands are; "" for PATH */
	double poll;               /* seconds between state queries (default 1) */
	int requeue;               /* --requeue (default) or --no-requeue */
};

/* State names and classes. */
int	slurm_state_parse(const char *name);
const char *slurm_state_name(int state);
/* 1 for states a job never leaves on its own (COMPLETED, FAILED, ...). */
int	slurm_state_terminal(int state);
/* The proc state for a Slurm state: PROC_QUEUED, PROC_RUNNING or
 * PROC_ENDED. */
int	slurm_proc_state(int state);
/* The end class (struct proc.end_class) of a terminal state: "",
 * "timeout", "node_fail", "preempted", "cancelled", "oom". */
const char *slurm_end_class(int state);

/* Parsers. Each returns 0 when it found the job, -1 otherwise. */
/* One line of `scontrol show job -o ID` (also the jobcomp/filetxt line
 * format, which uses the same key=value pairs). */
int	slurm_parse_scontrol(const char *line, struct slurm_job *j);
/* `squeue -h -j ID -o '%i|%T|%r'` output. */
int	slurm_parse_squeue(const char *text, const char *id, struct slurm_job *j);
/* `sacct -n -P -X -j ID -o JobID,State,ExitCode,Reason,NodeList` output. */
int	slurm_parse_sacct(const char *text, const char *id, struct slurm_job *j);
/* The last record of job id in a jobcomp/filetxt file's text. */
int	slurm_parse_jobcomp(const char *text, const char *id, struct slurm_job *j);
/* `sbatch --parsable` output: "ID" or "ID;CLUSTER". */
int	slurm_parse_sbatch(const char *text, char *id, size_t idlen);
/* The value of key in `scontrol show config` output, e.g. JobCompLoc. */
int	slurm_parse_config(const char *text, const char *key, char *buf, size_t len);

/* Options: parse opts ("key=value" lines; NULL means none). Keys:
 * partition, gres, time, mem, account, sbatch_options, signal
 * (USR1@120), signal_before (a duration: USR1 that long before the time
 * limit), checkpoints, jobcomp, job_name, poll / poll_interval (a
 * duration), requeue, bin_dir; others are ignored. On error the offending
 * key is named in err and -1 returned. */
/* A spec's sbatch_options: 0, or -1 with err naming the option refused
 * (only the job's shape and placement; see slurm.c). */
int	slurm_spec_options_check(const char *v, char *err, size_t errlen);
int	slurm_opts_parse(const char *opts, struct slurm_opts *o, char *err, size_t errlen);

/* The batch script that runs argv (the shim first) with envp in cwd for
 * the proc whose directory is dir, records directory records (where the
 * daemon records the job's end: exec_slurm.c) and job log is log.
 * Returns a malloc'd text, or NULL with the reason in err. */
char	*slurm_script(const struct slurm_opts *o, const char *dir, const char *records,
	    const char *log, char *const argv[], char *const envp[], const char *cwd, char *err,
	    size_t errlen);

/* Run Slurm's commands from dir (NULL or "": look them up in PATH). */
void	slurm_set_bin_dir(const char *dir);

/* Running Slurm's commands. slurm_cmd runs argv (looked up in PATH) with
 * stdout and stderr captured into out (NUL-terminated, truncated), for at
 * most timeout_ms; returns the exit status, or -1 when it could not run,
 * was killed or its status was lost (out then says why). */
/* How long a Slurm command may take. */
#define SLURM_TIMEOUT_MS 30000
int	slurm_cmd(char *const argv[], char *out, size_t outlen, int timeout_ms);
/* The second half of slurm_cmd, for a command already started (pid)
 * whose stdout and stderr are the pipe fd reads (closed here). */
int	slurm_collect(pid_t pid, int fd, const char *name, char *out, size_t outlen,
	    int timeout_ms);
/* The last line of a command's output, for an error message. */
void	slurm_last_words(const char *out, char *err, size_t errlen);
/* Submit script_path; the job id into id. 0, or -1 with Slurm's message
 * in err. */
int	slurm_submit(const char *script_path, char *id, size_t idlen, char *err, size_t errlen);
/* Ask Slurm about job id: scontrol, then sacct, then the jobcomp file
 * (jobcomp may be "" to look it up in Slurm's configuration). 1 when
 * found, 0 when no source knows the job, -1 when Slurm could not be asked
 * (err says why). */
int	slurm_query(const char *id, const char *jobcomp, struct slurm_job *j,
	    char *err, size_t errlen);
/* Signal the job: sig 0 or SIGKILL cancels it (scancel ID); SIGUSR1 and
 * SIGUSR2 go to the batch shell, which forwards them to the job's process
 * group (--batch); any other signal goes to every process of the job
 * (--full). 0, or -1 with Slurm's message in err. */
int	slurm_cancel(const char *id, int sig, char *err, size_t errlen);
/* slurm_cancel's command line, in argv (8), with the buffers sigarg (32)
 * and idarg (80) it points into. */
void	slurm_cancel_argv(const char *id, int sig, char *argv[8], char sigarg[32], char idarg[80]);

/* Quote s for /bin/sh ('...'); returns malloc'd text. */
char	*slurm_shquote(const char *s);

#endif
