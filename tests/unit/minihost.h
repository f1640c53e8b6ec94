/*
 * minihost.h: a small pl_host for unit tests of stage plugins (merge,
 * tensor_fix). It loads a plugin with dlopen as the daemon does, hands it
 * this table, and runs a stage with key=value pairs, recording the failure
 * message, the artifacts, progress calls and events; cancellation can be
 * armed to fire after a number of cancelled() calls; sh() and entries()
 * serve both tests. Header-only: include it in one test file.
 */
#ifndef MINIHOST_H
#define MINIHOST_H

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pipeline/plugin.h"

/* Run a shell command made with printf's format: its exit status. */
static int sh(const char *fmt, ...) PL_PRINTF(1, 2);
static int
sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	return rc == -1 ? -1 : WEXITSTATUS(rc);
}

/* How many entries dir holds (0 when it is gone): a test that expects
 * none sees every temporary and partial output left behind. */
static int
entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}


struct pl_job {
	const struct pl_stage *st;
	const char *const *kv;      /* "key=value" strings, NULL-terminated */
	char workdir[PATH_MAX];
	char fail[4096];
	char log[65536];
	size_t loglen;
	char artifacts[8][2][PATH_MAX];
	char digests[8][65];        /* artifact_digest's; "" for artifact() */
	int nartifacts;
	int nprogress;
	double last_done, last_total;
	char events[4096];
	int cancel_after;           /* <0: never */
	int ncancelled;
	char pool[32][PATH_MAX];
	int npool;
	int nofiles;                /* check_files() answers 0 */
};

static const struct pl_stage *mh_stages[8];
static int mh_nstages;

static int
mh_register(void *plugin, const struct pl_stage *st)
{
	(void)plugin;
	if (st->abi != PL_ABI_VERSION || mh_nstages == 8)
		return PL_EINVAL;
	mh_stages[mh_nstages++] = st;
	return PL_OK;
}

static const char *
mh_strerror(int code)
{
	switch (code) {
#define PL_X_STR(name, val, str) case name: return str;
	PL_ERRORS(PL_X_STR)
#undef PL_X_STR
	}
	return "unknown error";
}

static void mh_log(pl_job *j, int level, const char *fmt, ...) PL_PRINTF(3, 4);
static void
mh_log(pl_job *j, int level, const char *fmt, ...)
{
	va_list ap;
	char buf[4096];
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "  [%s] %s\n", level == PL_LOG_ERROR ? "error" : level == PL_LOG_WARN ?
	    "warn" : level == PL_LOG_INFO ? "info" : "debug", buf);
	size_t n = strlen(buf);
	if (j->loglen + n + 2 < sizeof(j->log)) {
		memcpy(j->log + j->loglen, buf, n);
		j->loglen += n;
		j->log[j->loglen++] = '\n';
		j->log[j->loglen] = '\0';
	}
}

static int mh_fail(pl_job *j, const char *fmt, ...) PL_PRINTF(2, 3);
static int
mh_fail(pl_job *j, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->fail, sizeof(j->fail), fmt, ap);
	va_end(ap);
	fprintf(stderr, "  [fail] %s\n", j->fail);
	return PL_EFAIL;
}

static const struct pl_key *
mh_key(pl_job *j, const char *key)
{
	for (const struct pl_key *k = j->st->keys; k && k->name; k++)
		if (strcmp(k->name, key) == 0)
			return k;
	return NULL;
}

static const char *
mh_get(pl_job *j, const char *key)
{
	size_t l = strlen(key);
	for (const char *const *p = j->kv; p && *p; p++)
		if (strncmp(*p, key, l) == 0 && (*p)[l] == '=')
			return *p + l + 1;
	const struct pl_key *k = mh_key(j, key);
	return k ? k->def : NULL;
}

static int64_t
mh_get_int(pl_job *j, const char *key, int64_t def)
{
	const char *v = mh_get(j, key);
	return v ? strtoll(v, NULL, 10) : def;
}

static double
mh_get_double(pl_job *j, const char *key, double def)
{
	const char *v = mh_get(j, key);
	return v ? strtod(v, NULL) : def;
}

static int
mh_get_bool(pl_job *j, const char *key, int def)
{
	const char *v = mh_get(j, key);
	if (v == NULL)
		return def;
	return strcmp(v, "yes") == 0 || strcmp(v, "true") == 0 || strcmp(v, "on") == 0 ||
	    strcmp(v, "1") == 0;
}

static const char *
mh_input(pl_job *j, const char *key)
{
	const char *v = mh_get(j, key);
	if (v == NULL || j->npool == 32)
		return NULL;
	char *out = j->pool[j->npool++];
	if (v[0] == '/')
		snprintf(out, PATH_MAX, "%s", v);
	else {
		char cwd[PATH_MAX];
		if (getcwd(cwd, sizeof(cwd)) == NULL)
			return NULL;
		snprintf(out, PATH_MAX, "%s/%s", cwd, v);
	}
	return out;
}

static const char *mh_null_get(pl_job *j, const char *k) { (void)j; (void)k; return NULL; }
static const char *mh_name(pl_job *j) { (void)j; return "test"; }
static int mh_attempt(pl_job *j) { (void)j; return 1; }
static int mh_adopted(pl_job *j) { (void)j; return 0; }
static const char *mh_workdir(pl_job *j) { return j->workdir; }

static int mh_check_files(pl_job *j) { return !j->nofiles; }

static void mh_check_error(pl_job *j, const char *key, const char *fmt, ...) PL_PRINTF(3, 4);
static void
mh_check_error(pl_job *j, const char *key, const char *fmt, ...)
{
	va_list ap;
	char buf[2048];
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	snprintf(j->fail, sizeof(j->fail), "%s: %s", key ? key : "(section)", buf);
	fprintf(stderr, "  [check] %s\n", j->fail);
}

static void
mh_progress(pl_job *j, double done, double total, const char *unit)
{
	(void)unit;
	j->nprogress++;
	j->last_done = done;
	j->last_total = total;
}

static void
mh_metric(pl_job *j, const char *name, int64_t step, double value)
{
	(void)j; (void)name; (void)step; (void)value;
}

static void
mh_event(pl_job *j, const char *type, const char *json)
{
	size_t n = strlen(j->events);
	snprintf(j->events + n, sizeof(j->events) - n, "%s %s\n", type, json ? json : "");
}

static int
mh_artifact(pl_job *j, const char *name, const char *path)
{
	if (j->nartifacts == 8)
		return PL_ENOMEM;
	if (access(path, F_OK) != 0)
		return PL_ENOENT;
	snprintf(j->artifacts[j->nartifacts][0], PATH_MAX, "%s", name);
	snprintf(j->artifacts[j->nartifacts][1], PATH_MAX, "%s", path);
	j->nartifacts++;
	return PL_OK;
}

static int
mh_artifact_digest(pl_job *j, const char *name, const char *path, const char *sha256_hex)
{
	if (sha256_hex == NULL || strlen(sha256_hex) != 64 ||
	    strspn(sha256_hex, "0123456789abcdef") != 64)
		return PL_EINVAL;
	int rc = mh_artifact(j, name, path);
	if (rc == PL_OK)
		snprintf(j->digests[j->nartifacts - 1], 65, "%s", sha256_hex);
	return rc;
}

static int
mh_cancelled(pl_job *j)
{
	j->ncancelled++;
	return j->cancel_after >= 0 && j->ncancelled > j->cancel_after;
}

static const struct pl_host mh_host = {
	.abi = PL_ABI_VERSION,
	.size = sizeof(struct pl_host),
	.host_name = "minihost",
	.register_stage = mh_register,
	.strerror = mh_strerror,
	.log = mh_log,
	.fail = mh_fail,
	.get = mh_get,
	.get_int = mh_get_int,
	.get_double = mh_get_double,
	.get_bool = mh_get_bool,
	.input = mh_input,
	.run_get = mh_null_get,
	.conf_get = mh_null_get,
	.check_error = mh_check_error,
	.run_name = mh_name,
	.job_name = mh_name,
	.attempt = mh_attempt,
	.adopted = mh_adopted,
	.workdir = mh_workdir,
	.progress = mh_progress,
	.metric = mh_metric,
	.event = mh_event,
	.artifact = mh_artifact,
	.cancelled = mh_cancelled,
	.artifact_digest = mh_artifact_digest,
	.check_files = mh_check_files,
};

/* Load plugins/NAME.so (from $TOP, default ".") and return its stage. */
static const struct pl_stage *
mh_load(const char *name)
{
	char p[PATH_MAX];
	const char *top = getenv("TOP");
	snprintf(p, sizeof(p), "%s/plugins/%s.so", top ? top : ".", name);
	void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		fprintf(stderr, "dlopen %s: %s\n", p, dlerror());
		return NULL;
	}
	pl_plugin_init_fn init = (pl_plugin_init_fn)dlsym(h, PL_ENTRY_SYMBOL);
	if (init == NULL || init(&mh_host, h) != PL_OK)
		return NULL;
	for (int i = 0; i < mh_nstages; i++)
		if (strcmp(mh_stages[i]->name, name) == 0)
			return mh_stages[i];
	return NULL;
}

/* Run a stage; kv is a NULL-terminated list of "key=value"; cancelled()
 * turns true after cancel_after calls (-1: never). */
static int
mh_run(const struct pl_stage *st, pl_job *j, const char *const *kv, const char *workdir,
    int cancel_after)
{
	memset(j, 0, sizeof(*j));
	j->st = st;
	j->kv = kv;
	j->cancel_after = cancel_after;
	snprintf(j->workdir, sizeof(j->workdir), "%s", workdir);
	return st->run(j);
}

#endif
