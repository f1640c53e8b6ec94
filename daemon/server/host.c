/* host.c: the pl_host function table that stage plugins call, and the
 * struct pl_job behind it: values and keys, inputs, progress, metrics,
 * events, artifacts, stored values, and the checks of a stage's section.
 * The same table serves every program: where a report goes and where a
 * lookup comes from is the job's host backend (struct host_backend),
 * the daemon's (host_store.c), a stage process's (stagectx.c) or, here,
 * host_by_hand: `pipelinectl stage` and every stage's check, where
 * reports are printed and nothing is stored to look up. Spawning and the
 * events reader are host_spawn.c's. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pld.h"
#include "host.h"
#include "plio.h"
#include "priv.h"


static const char *
h_strerror(int code)
{
	switch (code) {
#define PL_X_STR(name, val, str) case name: return str;
	PL_ERRORS(PL_X_STR)
#undef PL_X_STR
	}
	return "unknown error";
}

/* Keep a string alive as long as the job. */
static const char *
pool(struct pl_job *j, char *s)
{
	if (s == NULL)
		return NULL;
	pthread_mutex_lock(&j->lock);
	if (j->npool == j->cappool) {
		j->cappool = j->cappool ? 2 * j->cappool : 16;
		j->pool = xrealloc(j->pool, (size_t)j->cappool, sizeof(char *));
	}
	j->pool[j->npool++] = s;
	pthread_mutex_unlock(&j->lock);
	return s;
}

static int
h_fail(pl_job *j, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->failmsg, sizeof(j->failmsg), fmt, ap);
	va_end(ap);
	job_logf(j, "error: %s", j->failmsg);
	/* A path the host refused (input_resolve) is why, whatever the stage
	 * made of the missing path: the job's message says so. */
	if (j->refused[0] != '\0')
		snprintf(j->failmsg, sizeof(j->failmsg), "%s", j->refused);
	return PL_EFAIL;
}

const struct pl_key *
host_key(const struct stage_reg *reg, int i)
{
	const struct pl_key *k;

	if (reg->st->keys == NULL)
		return NULL;
	k = &reg->st->keys[i];
	return k->name ? k : NULL;
}

const struct pl_key *
host_find_key(const struct stage_reg *reg, const char *key, int *index)
{
	const struct pl_key *k;

	for (int i = 0; (k = host_key(reg, i)) != NULL; i++)
		if (strcmp(k->name, key) == 0) {
			if (index)
				*index = i;
			return k;
		}
	return NULL;
}

static const char *
h_get(pl_job *j, const char *key)
{
	const char *v = spec_get(j->sec, key);
	if (v != NULL)
		return v;
	const struct pl_key *k = host_find_key(j->reg, key, NULL);
	return k ? k->def : NULL;
}

static int64_t
h_get_int(pl_job *j, const char *key, int64_t def)
{
	int64_t v;
	const char *s = h_get(j, key);
	return s && parse_int(s, &v) == 0 ? v : def;
}

static double
h_get_double(pl_job *j, const char *key, double def)
{
	double v;
	const char *s = h_get(j, key);
	return s && parse_double(s, &v) == 0 ? v : def;
}

static int
h_get_bool(pl_job *j, const char *key, int def)
{
	int v;
	const char *s = h_get(j, key);
	return s && parse_bool(s, &v) == 0 ? v : def;
}

static double
h_get_duration(pl_job *j, const char *key, double def)
{
	double v;
	const char *s = h_get(j, key);
	return s && parse_duration(s, &v) == 0 ? v : def;
}

static int64_t
h_get_size(pl_job *j, const char *key, int64_t def)
{
	int64_t v;
	const char *s = h_get(j, key);
	return s && parse_size(s, &v) == 0 ? v : def;
}

static const struct spec_section *
spec_job(const struct spec *s, const char *name)
{
	for (int i = 0; s && i < s->njobs; i++)
		if (strcmp(s->jobs[i]->name, name) == 0)
			return s->jobs[i];
	return NULL;
}

/* The artifact `name` of the nearest upstream job that made one:
 * breadth-first over `after` edges. */
static int
upstream_artifact(pl_job *j, const char *name, char *path, size_t len)
{
	const struct spec *s = j->spec;
	int n = s->njobs, head = 0, tail = 0;
	const struct spec_section **q = xcalloc((size_t)n + 1, sizeof(*q));
	char *seen = xcalloc((size_t)n + 1, 1);
	q[tail++] = j->sec;
	int rc = PL_ENOENT;
	while (head < tail && rc != PL_OK) {
		const struct spec_section *cur = q[head++];
		for (int i = 0; i < cur->nafter && rc != PL_OK; i++) {
			const struct spec_section *d = spec_job(s, cur->after[i]);
			if (d == NULL)
				continue;
			int idx = 0;
			for (int k = 0; k < n; k++)
				if (s->jobs[k] == d)
					idx = k;
			if (seen[idx])
				continue;
			seen[idx] = 1;
			rc = j->hb->artifact_find(j, j->run, d->name, name, path, len, NULL);
			q[tail++] = d;
		}
	}
	free(q);
	free(seen);
	return rc;
}

/* Whether the job's stage works with the daemon's own rights: a run of
 * the daemon's own user (or with no owner), whose stages run in the
 * daemon's process or as that user. (By hand, pipelinectl stage, the
 * stage works with its caller's own rights.) */
static int
with_our_rights(const pl_job *j)
{
	uid_t uid;
	gid_t gid;
	return j->owner == NULL || (owner_ids(j->owner, &uid, &gid) == 0 && uid == geteuid());
}

/* For a stage that works with the daemon's rights: path (absolute,
 * malloc'd, taken) walked by path_trusted() now, every directory and link
 * on it checked, and handed on resolved (pooled); or NULL with why, which
 * is also the job's message (j->refused). */
static const char *
input_trusted(pl_job *j, const char *key, char *path, char *why, size_t whylen)
{
	char pwhy[PATH_MAX + 256];
	/* Root's and the daemon's own user's directories are trusted; in a
	 * split daemon a run of no owner is root's, and the daemon process
	 * may be a user of its own (_pipelined): root trusts that user's
	 * directories and links only in the state directory, the runs' tree
	 * it keeps, and nowhere its links lead out of it (HACKING.md). */
	uid_t trusted = j->owner == NULL && priv_active() ? 0 : geteuid();
	char *below = NULL, *r;
	const char *user = conf_get(j->conf, "daemon.user"),
	    *state = conf_get(j->conf, "daemon.state_dir");
	struct passwd *pw;
	if (trusted == 0 && user != NULL && *user && state != NULL && *state &&
	    (pw = getpwnam(user)) != NULL && pw->pw_uid != 0 &&
	    (below = realpath(state, NULL)) != NULL)
		trusted = pw->pw_uid;
	r = path_trusted_below(path, trusted, below, pwhy, sizeof(pwhy));
	free(below);
	if (r == NULL) {
		if (strncmp(pwhy, path, strlen(path)) == 0)
			snprintf(why, whylen, "%s: %s", key, pwhy);
		else
			snprintf(why, whylen, "%s: %s: %s", key, path, pwhy);
		snprintf(j->refused, sizeof(j->refused), "%s", why);
	}
	free(path);
	return r != NULL ? pool(j, r) : NULL;
}

/* An input resolved (pooled), or NULL with why it is not ("" when it
 * was reported at check time). in_run: the job is of a run the store
 * holds (the daemon's, host_store), whose artifacts it may name; by hand
 * and at check time there are none. A job's artifact (JOB.ARTIFACT, or
 * the nearest upstream one) is a path like any other: walked again now,
 * when the stage works with the daemon's rights, since what lay on it
 * when the job that made it ran may have changed since. */
static const char *
input_resolve(pl_job *j, const char *key, char *why, size_t whylen, int in_run)
{
	int ours = in_run && with_our_rights(j);
	const char *v = spec_get(j->sec, key);
	int ki = -1;
	const struct pl_key *k = host_find_key(j->reg, key, &ki);
	char path[PATH_MAX];
	why[0] = '\0';
	if (k && ki < 64 && (j->bad_inputs >> ki & 1))
		return NULL;
	if (v == NULL || *v == '\0') {
		if (k && k->artifact && in_run) {
			if (upstream_artifact(j, k->artifact, path, sizeof(path)) == PL_OK)
				return ours ? input_trusted(j, key, xstrdup(path), why, whylen) :
				    pool(j, xstrdup(path));
			snprintf(why, whylen, "%s: no upstream job registered an artifact \"%s\";"
			    " set %s = PATH or JOB.ARTIFACT", key, k->artifact, key);
			return NULL;
		}
		if (k && k->def)
			v = k->def;
		else {
			snprintf(why, whylen, "%s: not set", key);
			return NULL;
		}
	}
	/* JOB.ARTIFACT, when JOB is a job of this run; at check time it does
	 * not exist yet. */
	const char *dot = strchr(v, '.');
	if (dot && v[0] != '/' && j->spec) {
		char jn[128];
		snprintf(jn, sizeof(jn), "%.*s", (int)(dot - v), v);
		if (spec_job(j->spec, jn) != NULL && !in_run)
			return NULL;
		if (spec_job(j->spec, jn) != NULL) {
			if (j->hb->artifact_find(j, j->run, jn, dot + 1, path, sizeof(path),
			    NULL) == PL_OK)
				return ours ? input_trusted(j, key, xstrdup(path), why, whylen) :
				    pool(j, xstrdup(path));
			snprintf(why, whylen, "%s: job %s registered no artifact \"%s\"", key, jn,
			    dot + 1);
			return NULL;
		}
	}
	/* Relative: to the spec's directory; by hand, to the current one. */
	const char *base = j->spec && j->spec->dir ? j->spec->dir : ".";
	if (ours) {
		/* The stage works with the daemon's rights: the path is walked
		 * here, every directory and link on it checked (path_trusted),
		 * and handed on resolved. */
		char *joined, cwd[PATH_MAX];
		if (v[0] == '/')
			joined = xstrdup(v);
		else if (asprintf(&joined, "%s/%s/%s", base[0] == '/' ? "" :
		    getcwd(cwd, sizeof(cwd)) ? cwd : ".", base, v) == -1)
			fatal("asprintf");
		return input_trusted(j, key, joined, why, whylen);
	}
	if (v[0] == '/')
		return pool(j, xstrdup(v));
	char *r = path_resolve(base, v);
	char *abs = realpath(r, NULL);
	if (abs != NULL) {
		free(r);
		r = abs;
	}
	return pool(j, r);
}

const char *
host_input_in_run(pl_job *j, const char *key, char *why, size_t whylen)
{
	return input_resolve(j, key, why, whylen, 1);
}

static const char *
h_input(pl_job *j, const char *key)
{
	char why[PATH_MAX + 256];
	const char *p = j->hb->input(j, key, why, sizeof(why));
	if (p == NULL && why[0] != '\0')
		job_log(j, PL_LOG_ERROR, "%s", why);
	return p;
}

cJSON *
host_inputs_resolve(pl_job *j)
{
	cJSON *o = cJSON_CreateObject();
	const struct pl_key *k;
	char why[PATH_MAX + 256];
	for (int i = 0; (k = host_key(j->reg, i)) != NULL; i++) {
		if (k->type != PL_KEY_INPUT && k->type != PL_KEY_PATH)
			continue;
		const char *p = j->hb->input(j, k->name, why, sizeof(why));
		cJSON *e = cJSON_AddObjectToObject(o, k->name);
		if (p != NULL)
			cJSON_AddStringToObject(e, "path", p);
		else
			cJSON_AddStringToObject(e, "error", why);
	}
	return o;
}

static const char *
h_run_get(pl_job *j, const char *key)
{
	if (strcmp(key, "name") == 0)
		return j->run;
	if (strcmp(key, "previous") == 0)
		return j->spec ? j->spec->previous : NULL;
	return j->spec ? spec_get(j->spec->run, key) : NULL;
}

static const char *
h_conf_get(pl_job *j, const char *sk)
{
	return conf_get(j->conf, sk);
}

static void
h_check_error(pl_job *j, const char *key, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	const struct spec_kv *kv = key ? spec_find(j->sec, key) : NULL;
	errs_add(j->errs, j->spec ? j->spec->path : "-", kv ? kv->line : j->sec->line,
	    key ? key : "-", "%s", msg);
	j->check_failed = true;
}

/* Whether a check hook may open the spec's files: not in a check without
 * them (SPEC_CHECK_NOFILES); always outside the check hook. */
static int
h_check_files(pl_job *j)
{
	return !(j->mode == JOB_MODE_CHECK && j->nofiles);
}

static const char *h_run_name(pl_job *j) { return j->run; }
static const char *h_job_name(pl_job *j) { return j->name; }
static int h_attempt(pl_job *j) { return j->attempt; }
static int h_adopted(pl_job *j) { return j->adopted; }
static const char *h_workdir(pl_job *j) { return j->workdir; }

/* A job.TYPE event in a transaction of its own (takes d). */
static void
emit(pl_job *j, const char *type, cJSON *d)
{
	if (j->hb->begin(j) == -1) {
		cJSON_Delete(d);
		return;
	}
	j->hb->event(j, type, d);
	j->hb->commit(j);
}

static void
h_progress(pl_job *j, double done, double total, const char *unit)
{
	cJSON *d = cJSON_CreateObject();
	cJSON_AddNumberToObject(d, "done", done);
	cJSON_AddNumberToObject(d, "total", total);
	if (unit)
		cJSON_AddStringToObject(d, "unit", unit);
	if (j->hb->begin(j) == -1) {
		cJSON_Delete(d);
		return;
	}
	j->hb->progress(j, done, total, unit, d);
	j->hb->event(j, "job.progress", d);
	j->hb->commit(j);
}

static void
h_metric(pl_job *j, const char *name, int64_t step, double value)
{
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "name", name);
	cJSON_AddNumberToObject(d, "step", (double)step);
	cJSON_AddNumberToObject(d, "value", value);
	if (j->hb->begin(j) == -1) {
		cJSON_Delete(d);
		return;
	}
	j->hb->metric(j, name, step, value);
	j->hb->event(j, "job.metric", d);
	j->hb->commit(j);
}

static void
h_event(pl_job *j, const char *type, const char *json)
{
	cJSON *d = json ? cJSON_Parse(json) : cJSON_CreateObject();
	if (d == NULL || !cJSON_IsObject(d)) {
		cJSON_Delete(d);
		d = cJSON_CreateObject();
		if (json)
			cJSON_AddStringToObject(d, "text", json);
	}
	char t[128];
	snprintf(t, sizeof(t), "job.%s", type);
	emit(j, t, d);
}

/* An artifact's record and its job.artifact event, in one transaction.
 * Takes abs. */
static int
artifact_record(pl_job *j, const char *name, char *abs, uint64_t size, const char *hex)
{
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "name", name);
	cJSON_AddStringToObject(d, "path", abs);
	cJSON_AddNumberToObject(d, "size", (double)size);
	cJSON_AddStringToObject(d, "sha256", hex);
	int rc = PL_EIO;
	if (j->hb->begin(j) == -1)
		cJSON_Delete(d);
	else if (j->hb->artifact(j, name, abs, size, hex) == -1) {
		cJSON_Delete(d);
		j->hb->rollback(j);
	} else if (j->hb->event(j, "job.artifact", d) == -1)
		j->hb->rollback(j);
	else
		rc = j->hb->commit(j) == 0 ? PL_OK : PL_EIO;
	free(abs);
	return rc;
}

static int
h_artifact(pl_job *j, const char *name, const char *path)
{
	char hex[65], why[1024];
	uint64_t size = 0;
	char *abs;
	if (job_artifact_as(j, NULL, path, JOB_ARTIFACT_MAX(j), &abs, &size, hex, why, sizeof(why)) == -1) {
		int e = errno;
		job_log(j, PL_LOG_ERROR, "artifact %s: %s", name, why);
		return e == ECANCELED ? PL_ECANCELED : job_artifact_refused(e) ? PL_EINVAL : PL_EIO;
	}
	return artifact_record(j, name, abs, size, hex);
}

/* An artifact whose digest the stage computed over what it wrote: the
 * host only checks the path (as the run's owner) and the digest's form
 * and takes the size. */
static int
h_artifact_digest(pl_job *j, const char *name, const char *path, const char *sha256_hex)
{
	size_t n = sha256_hex ? strspn(sha256_hex, "0123456789abcdef") : 0;
	if (n != 64 || sha256_hex[64] != '\0') {
		job_log(j, PL_LOG_ERROR, "artifact %s: %s: \"%.80s\" is not a sha256 digest "
		    "(64 lowercase hex digits)", name, path, sha256_hex ? sha256_hex : "(null)");
		return PL_EINVAL;
	}
	uint64_t size = 0;
	char *abs, why[1024];
	if (job_artifact_as(j, NULL, path, 0, &abs, &size, NULL, why, sizeof(why)) == -1) {
		int e = errno;
		job_log(j, PL_LOG_ERROR, "artifact %s: %s", name, why);
		return job_artifact_refused(e) ? PL_EINVAL : PL_EIO;
	}
	return artifact_record(j, name, abs, size, sha256_hex);
}

static int
h_artifact_find(pl_job *j, const char *run, const char *jobname, const char *name,
    char *path, size_t pathlen, char *sha256)
{
	return j->hb->artifact_find(j, run, jobname, name, path, pathlen, sha256);
}

static int
h_value_set(pl_job *j, const char *key, const char *value)
{
	if (j->hb->begin(j) == -1)
		return PL_EIO;
	if (j->hb->value_set(j, key, value) == -1) {
		j->hb->rollback(j);
		return PL_EIO;
	}
	return j->hb->commit(j) == 0 ? PL_OK : PL_EIO;
}

static char *
h_value_get(pl_job *j, const char *run, const char *jobname, const char *key)
{
	return j->hb->value_get(j, run, jobname, key);
}

static char *
h_value_history(pl_job *j, const char *key, int limit)
{
	return j->hb->value_history(j, key, limit);
}

struct pl_host plugin_host = {
	.abi = PL_ABI_VERSION,
	.size = sizeof(struct pl_host),
	.host_name = "pipelined",
	.register_stage = plugin_register_stage,
	.strerror = h_strerror,
	.log = job_log,
	.fail = h_fail,
	.get = h_get,
	.get_int = h_get_int,
	.get_double = h_get_double,
	.get_bool = h_get_bool,
	.get_duration = h_get_duration,
	.get_size = h_get_size,
	.input = h_input,
	.run_get = h_run_get,
	.conf_get = h_conf_get,
	.check_error = h_check_error,
	.run_name = h_run_name,
	.job_name = h_job_name,
	.attempt = h_attempt,
	.adopted = h_adopted,
	.workdir = h_workdir,
	.progress = h_progress,
	.metric = h_metric,
	.event = h_event,
	.spawn = host_spawn,
	.artifact = h_artifact,
	.artifact_find = h_artifact_find,
	.cancelled = job_cancelled,
	.value_set = h_value_set,
	.value_get = h_value_get,
	.value_history = h_value_history,
	.artifact_digest = h_artifact_digest,
	.check_files = h_check_files,
};

/* host_by_hand: pipelinectl stage, and every stage's check (no run, no
 * store): reports printed (job_print_event), inputs resolved against the
 * spec's directory with the caller's rights, nothing stored to look up;
 * spawns under pipeline-shim with no rows. */
static const char *
hand_input(pl_job *j, const char *key, char *why, size_t whylen)
{
	return input_resolve(j, key, why, whylen, 0);
}

static int
hand_artifact_find(pl_job *j, const char *run, const char *jobname, const char *name,
    char *path, size_t pathlen, char *sha256)
{
	return PL_ENOENT;
}

static char *
hand_value_get(pl_job *j, const char *run, const char *jobname, const char *key)
{
	return NULL;
}

static char *
hand_value_history(pl_job *j, const char *key, int limit)
{
	return xstrdup("[]");
}

static int
hand_event(pl_job *j, const char *type, cJSON *d)
{
	job_print_event(j, type, d);
	return 0;
}

static int
hand_progress(pl_job *j, double done, double total, const char *unit, cJSON *d)
{
	return 0;
}

static int
hand_artifact(pl_job *j, const char *name, const char *path, uint64_t size, const char *sha256)
{
	return 0;
}

static int
hand_value_set(pl_job *j, const char *key, const char *value)
{
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "key", key);
	cJSON_AddStringToObject(d, "value", value ? value : "");
	job_print_event(j, "job.value", d);
	return 0;
}

const struct host_backend host_by_hand = {
	.daemon = 0,
	.input = hand_input,
	.spawn = host_spawn_shim,
	.artifact_find = hand_artifact_find,
	.value_get = hand_value_get,
	.value_history = hand_value_history,
	HOST_NOTHING_STORED,
	.event = hand_event,
	.progress = hand_progress,
	.artifact = hand_artifact,
	.value_set = hand_value_set,
};

/*
 * A PL_KEY_FILE or PL_KEY_DIR input set to a path (not JOB.ARTIFACT of
 * this run) must name what it says, readable now: it is opened as the
 * checker (the peer's file-system credentials on the daemon, control.c),
 * without blocking on a FIFO, and its kind read from the descriptor.
 */
static int
check_input_path(const struct spec *spec, const struct pl_key *k, const struct spec_kv *kv,
    char **errs)
{
	const char *v = kv->value, *dot = strchr(v, '.');
	const char *file = spec ? spec->path : "-";
	int dir = (k->flags & PL_KEY_DIR) != 0, fd, rc = 0;
	struct stat st;
	char jn[128];

	if (k->type != PL_KEY_PATH && k->type != PL_KEY_INPUT)
		return 0;
	if (k->type == PL_KEY_INPUT && dot && v[0] != '/' && spec) {
		snprintf(jn, sizeof(jn), "%.*s", (int)(dot - v), v);
		if (spec_job(spec, jn) != NULL)
			return 0;
	}
	char *p = v[0] == '/' ? xstrdup(v) : path_resolve(spec && spec->dir ? spec->dir : ".", v);
	if ((fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (dir ? O_DIRECTORY : 0))) == -1) {
		errs_add(errs, file, kv->line, kv->key, "%s: %s", p, errno == ENOTDIR && dir ?
		    "not a directory" : strerror(errno));
		rc = -1;
	} else if (fstat(fd, &st) == -1) {
		errs_add(errs, file, kv->line, kv->key, "%s: %s", p, strerror(errno));
		rc = -1;
	} else if (!dir && !S_ISREG(st.st_mode)) {
		errs_add(errs, file, kv->line, kv->key, "%s: %s", p, S_ISDIR(st.st_mode) ?
		    "a directory, not a file" : "not a regular file");
		rc = -1;
	}
	if (fd != -1)
		close(fd);
	free(p);
	return rc;
}

/* The names of a list, ", "-separated, as many as fit in room bytes
 * (its NUL included) with the words for the rest, ", and N more": the
 * number of names left out. */
static int
name_list(char *buf, size_t room, const char *const *names, int n)
{
	size_t len = 0, all = 0;
	int i;
	buf[0] = '\0';
	for (i = 0; i < n; i++)
		all += strlen(names[i]) + (i ? 2 : 0);
	for (i = 0; i < n; i++) {
		/* Room for this name and, unless all fit, for the words of
		 * the rest. */
		size_t need = strlen(names[i]) + (i ? 2 : 0) + (all < room ? 0 : 24);
		if (len + need >= room)
			break;
		len += (size_t)snprintf(buf + len, room - len, "%s%s", i ? ", " : "", names[i]);
	}
	if (i < n)
		snprintf(buf + len, room - len, "%sand %d more", i ? ", " : "", n - i);
	return n - i;
}

/* A key no table of the stage has: the error names the nearest known key
 * and lists the stage's keys and those of every job, whole or with the
 * number left out in words, sized to fit in one error (ERRS_MSG_MAX). */
static void
unknown_key(const struct stage_reg *reg, const struct spec *spec, const struct spec_kv *kv,
    char **errs)
{
	const char *file = spec ? spec->path : "-", *st = reg->st->name;
	const char *names[512];
	char hint[128], known[ERRS_MSG_MAX], common[ERRS_MSG_MAX], more[160] = "";
	struct suggest sg = { .word = kv->key };
	const struct pl_key *q;
	int n = 0, nc = 0;
	for (int qi = 0; (q = host_key(reg, qi)) != NULL && n < 512; qi++) {
		if (q->flags & PL_KEY_HIDDEN)
			continue;
		suggest_try(&sg, q->name);
		names[n++] = q->name;
	}
	while (spec_common_keys[nc] != NULL)
		suggest_try(&sg, spec_common_keys[nc++]);
	suggest_hint(&sg, hint, sizeof(hint));
	name_list(common, sizeof(common), spec_common_keys, nc);
	/* What the message holds besides the stage's list. */
	snprintf(more, sizeof(more), " (`pipelinectl stage %s --help` lists them)", st);
	size_t fixed = strlen("unknown key for stage ") + strlen(st) + strlen(hint) +
	    strlen(" (known: ") + strlen("; every job: ") + strlen(common) + strlen(")");
	/* The whole list when it fits, else a shorter one and the pointer. */
	size_t room = fixed < ERRS_MSG_MAX - 64 ? ERRS_MSG_MAX - fixed : 64;
	if (name_list(known, room, names, n) == 0)
		more[0] = '\0';
	else {
		room = fixed + strlen(more) < ERRS_MSG_MAX - 64 ? ERRS_MSG_MAX - fixed - strlen(more) :
		    64;
		name_list(known, room, names, n);
	}
	errs_add(errs, file, kv->line, kv->key, "unknown key for stage %s%s (known: %s%s; "
	    "every job: %s)", st, hint, n ? known : "none", more, common);
}

/* Generic key checks, then the stage's own check hook. With
 * SPEC_CHECK_NOFILES no path is opened: neither here nor, told so by
 * check_files(), in the hook. */
int
host_check_section(const struct stage_reg *reg, const struct spec *spec,
    const struct spec_section *sec, int flags, char **errs)
{
	const struct pl_stage *st = reg->st;
	int nerr = 0, nbound = 0;
	const char *file = spec ? spec->path : "-";
	for (int i = 0; i < sec->nkv; i++) {
		const struct spec_kv *kv = &sec->kv[i];
		if (spec_is_common_key(kv->key))
			continue;
		const struct pl_key *k = host_find_key(reg, kv->key, NULL);
		if (k == NULL) {
			unknown_key(reg, spec, kv, errs);
			nerr++;
			continue;
		}
		/* A value of another syntax holds the stage's own checks back;
		 * like a bad path, an out-of-range one does not. */
		char why[512];
		int bad = plugin_key_value(k, kv->value, why, sizeof(why));
		if (bad)
			errs_add(errs, file, kv->line, kv->key, "%s", why);
		if (bad == 1) {
			nerr++;
			continue;
		}
		nbound += bad == 2;
	}
	/* Paths do not hold the stage's own checks back (every problem at
	 * once); a bad one reads as unset to them. */
	uint64_t bad_inputs = 0;
	int nbad = 0;
	for (int i = 0; i < sec->nkv; i++) {
		int ki = -1;
		const struct pl_key *k = host_find_key(reg, sec->kv[i].key, &ki);
		if (k != NULL && (k->flags & (PL_KEY_FILE | PL_KEY_DIR)) &&
		    !(flags & SPEC_CHECK_NOFILES) &&
		    check_input_path(spec, k, &sec->kv[i], errs) == -1) {
			nbad++;
			if (ki < 64)
				bad_inputs |= 1ull << ki;
		}
	}
	const struct pl_key *k;
	for (int ki = 0; (k = host_key(reg, ki)) != NULL; ki++) {
		if ((k->flags & PL_KEY_REQUIRED) && spec_find(sec, k->name) == NULL &&
		    !(k->type == PL_KEY_INPUT && k->artifact && spec && spec->njobs > 1)) {
			errs_add(errs, file, sec->line, k->name, "required by stage %s but not set",
			    st->name);
			nerr++;
		}
	}
	if (st->check != NULL && nerr == 0) {
		struct pl_job *j = job_new(JOB_MODE_CHECK, &host_by_hand, reg, spec, sec);
		j->errs = errs;
		j->bad_inputs = bad_inputs;
		j->nofiles = (flags & SPEC_CHECK_NOFILES) != 0;
		int rc = st->check(j);
		if (j->check_failed)
			nerr++;
		else if (rc != PL_OK) {
			errs_add(errs, file, sec->line, "-", "stage %s refused the section: %s",
			    st->name, h_strerror(rc));
			nerr++;
		}
		job_free(j);
	}
	return nerr + nbad + nbound;
}
