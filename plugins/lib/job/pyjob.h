/*
 * pyjob.h: what the stages that run a job program (jobs/NAME.py: tokenize,
 * probe, train) share: writing the job's CONFIG.json from the stage's key
 * table, finding the interpreter and the jobs/ directory, parsing event
 * lines, describing how a process ended, and checking checkpoints.
 *
 * The contract with the job programs (pipeline-job(7), jobs/pljob/):
 * the plugin writes WORKDIR/NAME.config.json holding every key of the
 * stage that has a value (numbers, booleans and strings as typed; inputs
 * and paths resolved to absolute paths) and runs
 * `PYTHON JOBS/NAME.py --config WORKDIR/NAME.config.json`. PYTHON is the
 * spec's `python` key, else the daemon's `daemon.python`, else
 * /usr/bin/python3; JOBS is the `jobs_dir` key, else `daemon.jobs_dir`,
 * else the jobs/ directory beside the plugin directory (plugins/../jobs,
 * which is the source tree's jobs/ and the installed lib/pipelined/jobs).
 */
#ifndef PL_PYJOB_H
#define PL_PYJOB_H

#include <limits.h>
#include <stddef.h>

#include "pipeline/plugin.h"

/* Exit statuses of the job programs. */
#define PYJOB_EXIT_OK       0
#define PYJOB_EXIT_FAIL     1
#define PYJOB_EXIT_BADINPUT 2
#define PYJOB_EXIT_OOM      3

struct pyjob {
	char python[PATH_MAX];
	char script[PATH_MAX];
	char config[PATH_MAX];
	const char *argv[8];     /* python script --config config NULL */
};

/* Resolve the interpreter and the script jobs/NAME.py, and write the
 * config: every key in keys with a value, plus the members of extra (a
 * cJSON object, may be NULL; not consumed). Logs and returns a PL_E* code
 * after host->fail() on error. */
int	pyjob_prepare(const struct pl_host *host, pl_job *job,
	    const struct pl_key *keys, const char *name, const void *extra,
	    struct pyjob *pj);

/* The jobs/ directory beside this plugin's directory (dladdr); 0 or -1. */
int	pyjob_default_jobs_dir(char *buf, size_t len);

/* Describe an ending: "exited with status 3 (out of memory)",
 * "killed by signal 9 (Killed)", with the last error event appended. */
void	pyjob_exit_str(const struct pl_exit *e, char *buf, size_t len);

/* A number member of an event line; def when absent or not a number. */
double	pyjob_event_num(const char *json_line, const char *key, double def);
/* A string member into buf; 0, or -1 when absent. */
int	pyjob_event_str(const char *json_line, const char *key, char *buf,
	    size_t len);

/* Checkpoints (jobs/pljob/): ROOT/checkpoint-STEP/ directories, each
 * complete only when its COMPLETE marker (sha256sum(1) lines, written
 * last) lists exactly the other files present and every hash matches.
 * Verify one: 0 when complete; -1 with the reason in why otherwise. */
int	pyjob_checkpoint_verify(const char *dir, char *why, size_t len);
/* The newest complete checkpoint under root into path, its step into
 * *step: 1 when found, 0 when there is none. Each incomplete one passed
 * over is reported through skip(arg, dir, why) when skip is not NULL. */
int	pyjob_checkpoint_newest(const char *root, char *path, size_t len,
	    long *step, void (*skip)(void *, const char *, const char *), void *arg);

#endif
