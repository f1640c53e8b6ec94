/* pyjob.c: running job programs from stage plugins (see pyjob.h). */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "plio.h"
#include "pyjob.h"

int
pyjob_default_jobs_dir(char *buf, size_t len)
{
	Dl_info info;
	char path[PATH_MAX], real[PATH_MAX];

	/* This code is linked into each plugin, so the object that holds
	 * this function is the plugin itself. */
	if (dladdr((void *)pyjob_default_jobs_dir, &info) == 0 ||
	    info.dli_fname == NULL || realpath(info.dli_fname, real) == NULL)
		return -1;
	char *slash = strrchr(real, '/');
	if (slash == NULL)
		return -1;
	*slash = '\0';
	/* plugins/NAME.so -> plugins/../jobs; a test binary in tests/unit
	 * finds nothing there and gets -1. */
	snprintf(path, sizeof(path), "%s/../jobs", real);
	if (realpath(path, real) == NULL)
		return -1;
	if ((size_t)snprintf(buf, len, "%s", real) >= len)
		return -1;
	return 0;
}

static int
key_set(const struct pl_host *host, pl_job *job, const struct pl_key *k)
{
	return host->get(job, k->name) != NULL;
}

/* One key's resolved value as JSON, or NULL to leave it out. */
static cJSON *
key_value(const struct pl_host *host, pl_job *job, const struct pl_key *k,
    int *failed)
{
	const char *s;

	switch (k->type) {
	case PL_KEY_INPUT:
	case PL_KEY_PATH:
		if (!key_set(host, job, k) && (k->type == PL_KEY_PATH || k->artifact == NULL))
			return NULL;
		s = host->input(job, k->name);
		if (s == NULL) {
			if (k->flags & PL_KEY_REQUIRED)
				*failed = 1;
			return NULL;
		}
		return cJSON_CreateString(s);
	case PL_KEY_INT:
		if (!key_set(host, job, k))
			return NULL;
		return cJSON_CreateNumber((double)host->get_int(job, k->name, 0));
	case PL_KEY_FLOAT:
		if (!key_set(host, job, k))
			return NULL;
		return cJSON_CreateNumber(host->get_double(job, k->name, 0));
	case PL_KEY_BOOL:
		if (!key_set(host, job, k))
			return NULL;
		return cJSON_CreateBool(host->get_bool(job, k->name, 0));
	case PL_KEY_DURATION:
		if (!key_set(host, job, k))
			return NULL;
		return cJSON_CreateNumber(host->get_duration(job, k->name, 0));
	case PL_KEY_SIZE:
		if (!key_set(host, job, k))
			return NULL;
		return cJSON_CreateNumber((double)host->get_size(job, k->name, 0));
	default:
		s = host->get(job, k->name);
		return s ? cJSON_CreateString(s) : NULL;
	}
}

static int
has_key(const struct pl_key *keys, const char *name)
{
	for (const struct pl_key *k = keys; k->name != NULL; k++)
		if (strcmp(k->name, name) == 0)
			return 1;
	return 0;
}

int
pyjob_prepare(const struct pl_host *host, pl_job *job, const struct pl_key *keys,
    const char *name, const void *extra, struct pyjob *pj)
{
	const char *s;
	char jobs[PATH_MAX];

	memset(pj, 0, sizeof(*pj));

	s = has_key(keys, "python") ? host->get(job, "python") : NULL;
	if (s == NULL || *s == '\0')
		s = host->conf_get ? host->conf_get(job, "daemon.python") : NULL;
	if (s == NULL || *s == '\0')
		s = "/usr/bin/python3";
	snprintf(pj->python, sizeof(pj->python), "%s", s);

	s = has_key(keys, "jobs_dir") ? host->get(job, "jobs_dir") : NULL;
	if (s != NULL && *s != '\0' && has_key(keys, "jobs_dir"))
		s = host->input(job, "jobs_dir");
	if (s == NULL || *s == '\0')
		s = host->conf_get ? host->conf_get(job, "daemon.jobs_dir") : NULL;
	if (s == NULL || *s == '\0') {
		if (pyjob_default_jobs_dir(jobs, sizeof(jobs)) == -1)
			return host->fail(job, "%s: cannot find the jobs/ directory beside "
			    "the plugin directory; set the jobs_dir key or daemon.jobs_dir",
			    name);
		s = jobs;
	}
	snprintf(pj->script, sizeof(pj->script), "%s/%s.py", s, name);
	if (access(pj->script, R_OK) == -1)
		return host->fail(job, "%s: job program %s: %s (set jobs_dir or "
		    "daemon.jobs_dir)", name, pj->script, strerror(errno));

	cJSON *cfg = cJSON_CreateObject();
	int failed = 0;
	for (const struct pl_key *k = keys; k->name != NULL; k++) {
		cJSON *v = key_value(host, job, k, &failed);
		if (v != NULL)
			cJSON_AddItemToObject(cfg, k->name, v);
	}
	if (failed) {
		cJSON_Delete(cfg);
		return host->fail(job, "%s: a required input could not be resolved "
		    "(see the log)", name);
	}
	const cJSON *e;
	cJSON_ArrayForEach(e, (const cJSON *)extra) {
		cJSON_DeleteItemFromObjectCaseSensitive(cfg, e->string);
		cJSON_AddItemToObject(cfg, e->string, cJSON_Duplicate(e, 1));
	}
	char *text = cJSON_Print(cfg);
	cJSON_Delete(cfg);
	if (text == NULL)
		return host->fail(job, "%s: out of memory writing the config", name);
	snprintf(pj->config, sizeof(pj->config), "%s/%s.config.json",
	    host->workdir(job), name);
	size_t tl = strlen(text);
	text[tl] = '\n';
	int rc = plc_write_file_atomic(pj->config, text, tl + 1, 0644);
	free(text);
	if (rc == -1)
		return host->fail(job, "%s: %s", pj->config, strerror(errno));

	pj->argv[0] = pj->python;
	pj->argv[1] = pj->script;
	pj->argv[2] = "--config";
	pj->argv[3] = pj->config;
	pj->argv[4] = NULL;
	return PL_OK;
}

void
pyjob_exit_str(const struct pl_exit *e, char *buf, size_t len)
{
	static const char *const what[] = {
		[PYJOB_EXIT_OK] = "success", [PYJOB_EXIT_FAIL] = "failure",
		[PYJOB_EXIT_BADINPUT] = "bad input", [PYJOB_EXIT_OOM] = "out of memory",
	};
	int n;

	if (e->exited)
		n = snprintf(buf, len, "exited with status %d%s%s%s", e->status,
		    e->status >= 0 && e->status <= 3 ? " (" : "",
		    e->status >= 0 && e->status <= 3 ? what[e->status] : "",
		    e->status >= 0 && e->status <= 3 ? ")" : "");
	else
		n = snprintf(buf, len, "killed by signal %d (%s)", e->signal,
		    strsignal(e->signal));
	if (e->error[0] != '\0' && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, ": %s", e->error);
}

double
pyjob_event_num(const char *json_line, const char *key, double def)
{
	cJSON *j = cJSON_Parse(json_line);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
	double d = def;
	if (cJSON_IsNumber(v))
		d = v->valuedouble;
	else if (cJSON_IsString(v) && v->valuestring[0] != '\0') {
		char *end;
		double x = strtod(v->valuestring, &end);
		if (*end == '\0')
			d = x;
	}
	cJSON_Delete(j);
	return d;
}

int
pyjob_event_str(const char *json_line, const char *key, char *buf, size_t len)
{
	cJSON *j = cJSON_Parse(json_line);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
	int rc = -1;
	if (cJSON_IsString(v)) {
		snprintf(buf, len, "%s", v->valuestring);
		rc = 0;
	}
	cJSON_Delete(j);
	return rc;
}

static int
is_hex64(const char *s)
{
	for (int i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
pyjob_checkpoint_verify(const char *dir, char *why, size_t len)
{
	char path[PATH_MAX];
	char **listed = NULL, **present = NULL;
	size_t nl = 0, np = 0;
	int rc = -1;

	snprintf(path, sizeof(path), "%s/COMPLETE", dir);
	char *text = plc_read_file(path, NULL, 1 << 20);
	if (text == NULL) {
		snprintf(why, len, "no COMPLETE marker (%s)", strerror(errno));
		return -1;
	}
	/* Each line: 64 hex digits, two spaces, a plain file name. */
	int lineno = 0;
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		lineno++;
		if (strlen(line) < 67 || !is_hex64(line) || line[64] != ' ' ||
		    line[65] != ' ' || strchr(line + 66, '/') != NULL) {
			snprintf(why, len, "COMPLETE line %d is malformed", lineno);
			goto out;
		}
		char **nv = realloc(listed, (nl + 1) * sizeof(*listed));
		if (nv == NULL)
			goto oom;
		listed = nv;
		listed[nl++] = line;
	}
	if (nl == 0) {
		snprintf(why, len, "COMPLETE lists no files");
		goto out;
	}
	DIR *d = opendir(dir);
	if (d == NULL) {
		snprintf(why, len, "%s", strerror(errno));
		goto out;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    strcmp(de->d_name, "COMPLETE") == 0)
			continue;
		char **nv = realloc(present, (np + 1) * sizeof(*present));
		if (nv == NULL || (nv[np] = strdup(de->d_name)) == NULL) {
			if (nv != NULL)
				present = nv;
			closedir(d);
			goto oom;
		}
		present = nv;
		np++;
	}
	closedir(d);
	/* The marker must list exactly the files present: a file it does not
	 * cover was written after it, or by something else. */
	qsort(present, np, sizeof(*present), cmp_str);
	for (size_t i = 0; i < nl; i++) {
		const char *name = listed[i] + 66;
		if (bsearch(&name, present, np, sizeof(*present), cmp_str) == NULL) {
			snprintf(why, len, "%s is listed in COMPLETE but missing", name);
			goto out;
		}
	}
	if (np != nl) {
		snprintf(why, len, "%zu files present but COMPLETE lists %zu", np, nl);
		goto out;
	}
	for (size_t i = 0; i < nl; i++) {
		char hex[65];
		const char *name = listed[i] + 66;
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		struct stat st;
		if (stat(path, &st) == -1 || !S_ISREG(st.st_mode)) {
			snprintf(why, len, "%s is not a plain file", name);
			goto out;
		}
		if (plc_sha256_file(path, hex) == -1) {
			snprintf(why, len, "%s: %s", name, strerror(errno));
			goto out;
		}
		if (strncmp(hex, listed[i], 64) != 0) {
			snprintf(why, len, "%s: sha256 %s, COMPLETE records %.64s",
			    name, hex, listed[i]);
			goto out;
		}
	}
	rc = 0;
	goto out;
oom:
	snprintf(why, len, "out of memory");
out:
	for (size_t i = 0; i < np; i++)
		free(present[i]);
	free(present);
	free(listed);
	free(text);
	return rc;
}

int
pyjob_checkpoint_newest(const char *root, char *path, size_t len, long *step,
    void (*skip)(void *, const char *, const char *), void *arg)
{
	DIR *d = opendir(root);
	if (d == NULL)
		return 0;
	long *steps = NULL;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		const char *p = de->d_name;
		if (strncmp(p, "checkpoint-", 11) != 0 || p[11] == '\0')
			continue;
		char *end;
		errno = 0;
		long s = strtol(p + 11, &end, 10);
		if (*end != '\0' || errno != 0 || s < 0 || p[11] < '0' || p[11] > '9')
			continue;
		long *nv = realloc(steps, (n + 1) * sizeof(*steps));
		if (nv == NULL)
			break;
		steps = nv;
		steps[n++] = s;
	}
	closedir(d);
	int found = 0;
	/* Newest first: pick the largest step not yet tried. */
	for (size_t tried = 0; tried < n && !found; tried++) {
		size_t best = 0;
		for (size_t i = 1; i < n; i++)
			if (steps[i] > steps[best])
				best = i;
		char dir[PATH_MAX], why[512];
		snprintf(dir, sizeof(dir), "%s/checkpoint-%ld", root, steps[best]);
		struct stat st;
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (pyjob_checkpoint_verify(dir, why, sizeof(why)) == 0) {
				snprintf(path, len, "%s", dir);
				if (step != NULL)
					*step = steps[best];
				found = 1;
			} else if (skip != NULL)
				skip(arg, dir, why);
		}
		steps[best] = -1;
	}
	free(steps);
	return found;
}
