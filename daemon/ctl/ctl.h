/*
 * ctl.h: shared by pipelinectl's verb files. pipelinectl.c holds the
 * connection and the common verbs; a verb that grows large lives in a
 * ctl_VERB.c of its own and is declared here.
 */
#ifndef PL_CTL_H
#define PL_CTL_H

#include <cjson/cJSON.h>

#include "pipeline/proto.h"

/* Set by the common option parser: --json was given. */
extern int ctl_json;

/* The verb as the user typed it, for messages ("pipelinectl" before). */
extern const char *ctl_verb;

/* pipelinectl's exit statuses (pipelinectl(1) EXIT STATUS lists them). */
enum {
	CTL_OK = 0,		/* done; a run that succeeded or still runs */
	CTL_ERROR = 1,		/* an error: refused, a spec that does not check, I/O */
	CTL_EUSAGE = 2,		/* a usage error: unknown verb or option, missing argument */
	CTL_REJECTED = 3,	/* the run's jobs worked and the gate said no */
	CTL_ENOENT = 4,		/* no such run or job */
	CTL_ENODAEMON = 5,	/* pipelined is not running or cannot be reached */
	CTL_FAILED = 6,		/* the run failed */
	CTL_CANCELLED = 7,	/* the run was cancelled */
};

/* Print an error once, naming ctl_verb: on standard error, or with --json
 * as {"ok":false,"verb","code","exit","error","errors":[lines]} on
 * standard output. ctl_fail() then exits with rc. code is the daemon's
 * (ENOENT, EINVAL, ...) or pipelinectl's own (EUSAGE, ENODAEMON, EFAILED,
 * ECANCELLED, EREJECTED, ELOCAL). */
void	ctl_error(int rc, const char *code, const char *msg);
void	ctl_fail(int rc, const char *code, const char *fmt, ...)
	    __attribute__((noreturn, format(printf, 3, 4)));

/* Send one request to the daemon's control socket and read its reply.
 * args (may be NULL) is consumed: the verb is added to it and it is
 * freed, so the caller must not free or reuse it.
 * On success *result is the closing line's "result" object (the caller
 * frees it with cJSON_Delete) and 0 is returned; otherwise the error is
 * printed by ctl_fail() (daemon not running, refused, error reply), which
 * exits with its status; -1 is not returned today. */
int	ctl_request(enum pl_verb verb, cJSON *args, cJSON **result);

/* A reply's field: the string ("" when absent or not a string) and the
 * number (0 likewise). */
const char *jstr(const cJSON *o, const char *k);
double	jnum(const cJSON *o, const char *k);

/* Verbs in files of their own; weak so pipelinectl links without them.
 * Each gets the argv after the verb (argv[0] is the verb) and returns the
 * process exit status. */
int	ctl_gguf(int argc, char **argv) __attribute__((weak));   /* ctl_gguf.c */
int	ctl_report(int argc, char **argv) __attribute__((weak)); /* ctl_report.c */
int	ctl_plot(int argc, char **argv) __attribute__((weak));   /* ctl_plot.c */
int	ctl_doctor(int argc, char **argv) __attribute__((weak)); /* ctl_doctor.c */

/* The configuration (-f, $PIPELINED_CONF, the tree's or /etc's), loaded
 * on the first call. */
struct conf;
const struct conf *ctl_conf(void);

#endif
