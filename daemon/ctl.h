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

/* Send one request to the daemon's control socket and read its reply.
 * args (may be NULL) is consumed: the verb is added to it and it is
 * freed, so the caller must not free or reuse it.
 * On success *result is the closing line's "result" object (the caller
 * frees it with cJSON_Delete) and 0 is returned; otherwise the error is
 * printed (daemon not running, refused, error reply) and -1 returned. */
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
