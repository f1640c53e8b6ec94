/* host.c: the pl_host function table that stage plugins call, and the
 * struct pl_job behind it. The same table serves the daemon (job->store
 * set: everything is stored, then announced) and `pipelinectl stage`
 * (no store: progress, events and artifacts are printed). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pwd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipelined.h"
#include "plcommon.h"

extern char **environ;

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
		j->pool = realloc(j->pool, (size_t)j->cappool * sizeof(char *));
	}
	j->pool[j->npool++] = s;
	pthread_mutex_unlock(&j->lock);
	return s;
}

struct pl_job *
job_new(int mode, const struct stage_reg *reg, const struct spec *spec,
    const struct spec_section *sec)
{
	struct pl_job *j = xcalloc(1, sizeof(*j));
	j->mode = mode;
	j->reg = reg;
	j->spec = spec;
	j->sec = sec;
	j->attempt = 1;
	j->ex = &exec_local;
	j->out = stderr;
	j->logfd = -1;
	j->jobdirfd = -1;
	pthread_mutex_init(&j->lock, NULL);
	if (spec)
		snprintf(j->run, sizeof(j->run), "%s", spec->name);
	if (sec)
		snprintf(j->name, sizeof(j->name), "%s", sec->name);
	return j;
}

void
job_free(struct pl_job *j)
{
	if (j == NULL)
		return;
	for (int i = 0; i < j->npool; i++)
		free(j->pool[i]);
	free(j->pool);
	free(j->ex_opts);
	if (j->logfd >= 0)
		close(j->logfd);
	if (j->jobdirfd >= 0)
		close(j->jobdirfd);
	pthread_mutex_destroy(&j->lock);
	free(j);
}

void
job_logf(struct pl_job *j, const char *fmt, ...)
{
	char msg[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (j->logpath[0] == '\0') {
		fprintf(j->out ? j->out : stderr, "%s\n", msg);
		fflush(j->out ? j->out : stderr);
		return;
	}
	/* Opened once per job (the shim appends to the same file: O_APPEND
	 * keeps each line whole). */
	pthread_mutex_lock(&j->lock);
	if (j->logfd < 0 && j->jobdirfd >= 0)
		j->logfd = file_open_at(j->jobdirfd, "job.log", O_WRONLY | O_APPEND | O_CREAT, 0640);
	else if (j->logfd < 0)
		j->logfd = open(j->logpath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	int fd = j->logfd;
	pthread_mutex_unlock(&j->lock);
	if (fd == -1)
		return;
	char line[4200];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	char ts[32];
	strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
	int n = snprintf(line, sizeof(line), "[pipelined %s] %s\n", ts, msg);
	if (n > (int)sizeof(line))
		n = sizeof(line);
	plc_write_all(fd, line, (size_t)n);
}

static void
h_log(pl_job *j, int level, const char *fmt, ...)
{
	char msg[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	static const char *const lv[] = { "error", "warning", "info", "debug" };
	if (level == PL_LOG_DEBUG && log_getlevel() < LOG_LVL_DEBUG && j->store)
		return;
	job_logf(j, "%s: %s", lv[level < 0 || level > 3 ? 2 : level], msg);
	if (j->store && level <= PL_LOG_WARN)
		log_warnx("%s/%s: %s", j->run, j->name, msg);
}

static int
h_fail(pl_job *j, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->failmsg, sizeof(j->failmsg), fmt, ap);
	va_end(ap);
	job_logf(j, "error: %s", j->failmsg);
	return PL_EFAIL;
}

const struct pl_key *
host_key(const struct stage_reg *reg, int i)
{
	const struct pl_key *k;

	if (reg->st->keys == NULL)
		return NULL;
	k = (const struct pl_key *)(const void *)((const char *)reg->st->keys +
	    (size_t)i * reg->key_size);
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

/* The bounds of an integer-valued key (PL_KEY_MIN, PL_KEY_MAX), read only
 * from a table whose entries hold them. */
static unsigned
key_bounds(const struct stage_reg *reg, const struct pl_key *k, int64_t *min, int64_t *max)
{
	if (reg->key_size < offsetof(struct pl_key, max) + sizeof(k->max))
		return 0;
	*min = k->min;
	*max = k->max;
	return k->flags & (PL_KEY_MIN | PL_KEY_MAX);
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
			rc = store_artifact_find(j->store, j->run, d->name, name, path, len, NULL);
			q[tail++] = d;
		}
	}
	free(q);
	free(seen);
	return rc;
}

static const char *
h_input(pl_job *j, const char *key)
{
	const char *v = spec_get(j->sec, key);
	int ki = -1;
	const struct pl_key *k = host_find_key(j->reg, key, &ki);
	char path[PATH_MAX];
	if (k && ki < 64 && (j->bad_inputs >> ki & 1))
		return NULL;
	if (v == NULL || *v == '\0') {
		if (k && k->artifact && j->store) {
			if (upstream_artifact(j, k->artifact, path, sizeof(path)) == PL_OK)
				return pool(j, xstrdup(path));
			h_log(j, PL_LOG_ERROR, "%s: no upstream job registered an artifact \"%s\";"
			    " set %s = PATH or JOB.ARTIFACT", key, k->artifact, key);
			return NULL;
		}
		if (k && k->def)
			v = k->def;
		else {
			h_log(j, PL_LOG_ERROR, "%s: not set", key);
			return NULL;
		}
	}
	/* JOB.ARTIFACT, when JOB is a job of this run; at check time it does
	 * not exist yet. */
	const char *dot = strchr(v, '.');
	if (dot && v[0] != '/' && j->spec) {
		char jn[128];
		snprintf(jn, sizeof(jn), "%.*s", (int)(dot - v), v);
		if (spec_job(j->spec, jn) != NULL && j->store == NULL)
			return NULL;
		if (spec_job(j->spec, jn) != NULL) {
			if (store_artifact_find(j->store, j->run, jn, dot + 1, path, sizeof(path),
			    NULL) == PL_OK)
				return pool(j, xstrdup(path));
			h_log(j, PL_LOG_ERROR, "%s: job %s registered no artifact \"%s\"", key, jn, dot + 1);
			return NULL;
		}
	}
	if (v[0] == '/')
		return pool(j, xstrdup(v));
	/* Relative: to the spec's directory; by hand, to the current one. */
	const char *base = j->spec && j->spec->dir ? j->spec->dir : ".";
	char *r = path_resolve(base, v);
	char *abs = realpath(r, NULL);
	if (abs != NULL) {
		free(r);
		r = abs;
	}
	return pool(j, r);
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
	j->failmsg[0] = 1; /* marks that an error was reported */
}

static const char *h_run_name(pl_job *j) { return j->run; }
static const char *h_job_name(pl_job *j) { return j->name; }
static int h_attempt(pl_job *j) { return j->attempt; }
static int h_adopted(pl_job *j) { return j->adopted; }
static const char *h_workdir(pl_job *j) { return j->workdir; }

static int
h_cancelled(pl_job *j)
{
	if (j->cancel)
		return 1;
	if (j->deadline > 0 && now_mono() > j->deadline) {
		j->timed_out = 1;
		return 1;
	}
	return 0;
}

/* By hand, events are printed as JSON lines or as text. */
static void
hand_print(pl_job *j, const char *type, cJSON *d)
{
	if (j->json_out) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "type", type);
		for (cJSON *c = d ? d->child : NULL; c; c = c->next)
			cJSON_AddItemToObject(o, c->string, cJSON_Duplicate(c, 1));
		char *t = cJSON_PrintUnformatted(o);
		fprintf(stdout, "%s\n", t);
		free(t);
		cJSON_Delete(o);
	} else {
		char *t = d ? cJSON_PrintUnformatted(d) : NULL;
		fprintf(stdout, "%s %s\n", type, t ? t : "");
		free(t);
	}
	fflush(stdout);
	cJSON_Delete(d);
}

static void
emit(pl_job *j, const char *type, cJSON *d)
{
	if (j->store == NULL) {
		hand_print(j, type, d);
		return;
	}
	if (store_begin(j->store) == -1) {
		cJSON_Delete(d);
		return;
	}
	store_event(j->store, j->run, j->name, type, d);
	store_commit(j->store);
}

static void
h_progress(pl_job *j, double done, double total, const char *unit)
{
	cJSON *d = cJSON_CreateObject();
	cJSON_AddNumberToObject(d, "done", done);
	cJSON_AddNumberToObject(d, "total", total);
	if (unit)
		cJSON_AddStringToObject(d, "unit", unit);
	if (j->store == NULL) {
		hand_print(j, "job.progress", d);
		return;
	}
	if (store_begin(j->store) == -1) {
		cJSON_Delete(d);
		return;
	}
	store_job_progress(j->store, j->job_id, done, total, unit);
	store_event(j->store, j->run, j->name, "job.progress", d);
	store_commit(j->store);
}

static void
h_metric(pl_job *j, const char *name, int64_t step, double value)
{
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "name", name);
	cJSON_AddNumberToObject(d, "step", (double)step);
	cJSON_AddNumberToObject(d, "value", value);
	if (j->store == NULL) {
		hand_print(j, "job.metric", d);
		return;
	}
	if (store_begin(j->store) == -1) {
		cJSON_Delete(d);
		return;
	}
	store_metric(j->store, j->job_id, name, step, value);
	store_event(j->store, j->run, j->name, "job.metric", d);
	store_commit(j->store);
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

/* Digest a file or a directory. */
static int
digest(const char *path, char hex[65], uint64_t *size)
{
	struct stat st;
	if (stat(path, &st) == -1)
		return -1;
	if (S_ISDIR(st.st_mode))
		return plc_sha256_dir(path, hex, size);
	*size = (uint64_t)st.st_size;
	return plc_sha256_file(path, hex);
}

/* Store an artifact and publish its job.artifact event (by hand: print
 * it). Takes abs. */
static int
artifact_record(pl_job *j, const char *name, char *abs, uint64_t size, const char *hex)
{
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "name", name);
	cJSON_AddStringToObject(d, "path", abs);
	cJSON_AddNumberToObject(d, "size", (double)size);
	cJSON_AddStringToObject(d, "sha256", hex);
	if (j->store == NULL) {
		hand_print(j, "job.artifact", d);
		free(abs);
		return PL_OK;
	}
	int rc = PL_EIO;
	if (store_begin(j->store) == 0) {
		if (store_artifact(j->store, j->run_id, j->job_id, name, abs, size, hex) == 0 &&
		    store_event(j->store, j->run, j->name, "job.artifact", d) > 0) {
			d = NULL;
			rc = store_commit(j->store) == 0 ? PL_OK : PL_EIO;
		} else {
			store_rollback(j->store);
		}
	}
	cJSON_Delete(d);
	free(abs);
	return rc;
}

static int
h_artifact(pl_job *j, const char *name, const char *path)
{
	char hex[65];
	uint64_t size = 0;
	char *abs = realpath(path, NULL);
	if (abs == NULL || digest(abs, hex, &size) == -1) {
		h_log(j, PL_LOG_ERROR, "artifact %s: %s: %s", name, path, strerror(errno));
		free(abs);
		return PL_EIO;
	}
	return artifact_record(j, name, abs, size, hex);
}

/* An artifact whose digest the stage computed over what it wrote: the
 * host only checks the path and the digest's form and takes the size. */
static int
h_artifact_digest(pl_job *j, const char *name, const char *path, const char *sha256_hex)
{
	size_t n = sha256_hex ? strspn(sha256_hex, "0123456789abcdef") : 0;
	if (n != 64 || sha256_hex[64] != '\0') {
		h_log(j, PL_LOG_ERROR, "artifact %s: %s: \"%.80s\" is not a sha256 digest "
		    "(64 lowercase hex digits)", name, path, sha256_hex ? sha256_hex : "(null)");
		return PL_EINVAL;
	}
	struct stat st;
	uint64_t size = 0;
	char *abs = realpath(path, NULL);
	int ok = abs != NULL && stat(abs, &st) == 0;
	if (ok && S_ISDIR(st.st_mode))
		ok = plc_tree_bytes(abs, &size) == 0;
	else if (ok && S_ISREG(st.st_mode))
		size = (uint64_t)st.st_size;
	else if (ok) {
		errno = EINVAL;   /* neither a file nor a directory */
		ok = 0;
	}
	if (!ok) {
		h_log(j, PL_LOG_ERROR, "artifact %s: %s: %s", name, path, strerror(errno));
		free(abs);
		return PL_EIO;
	}
	return artifact_record(j, name, abs, size, sha256_hex);
}

static int
h_artifact_find(pl_job *j, const char *run, const char *jobname, const char *name,
    char *path, size_t pathlen, char *sha256)
{
	if (j->store == NULL)
		return PL_ENOENT;
	return store_artifact_find(j->store, run ? run : j->run, jobname, name, path,
	    pathlen, sha256);
}

static int
h_value_set(pl_job *j, const char *key, const char *value)
{
	if (j->store == NULL) {
		cJSON *d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, "key", key);
		cJSON_AddStringToObject(d, "value", value ? value : "");
		hand_print(j, "job.value", d);
		return PL_OK;
	}
	if (store_begin(j->store) == -1)
		return PL_EIO;
	if (store_value_set(j->store, j->run_id, j->job_id, key, value) == -1) {
		store_rollback(j->store);
		return PL_EIO;
	}
	return store_commit(j->store) == 0 ? PL_OK : PL_EIO;
}

static char *
h_value_get(pl_job *j, const char *run, const char *jobname, const char *key)
{
	if (j->store == NULL)
		return NULL;
	return store_value_get(j->store, run ? run : j->run, jobname, key);
}

static char *
h_value_history(pl_job *j, const char *key, int limit)
{
	if (j->store == NULL)
		return xstrdup("[]");
	return store_value_history(j->store, key, limit);
}

/* ---- spawn ---------------------------------------------------------- */

struct evreader {
	pl_job *j;
	struct proc *p;
	const struct pl_spawn *spec;
	int64_t offset;
	struct pl_exit *out;
	int stop;          /* on_event asked to stop the child */
	char cwd[PATH_MAX];
};

/* Resolve an artifact path written by a job: relative to its cwd. */
static char *
job_path(struct evreader *r, const char *path)
{
	return path_resolve(r->cwd, path);
}

/* Store one batch of complete event lines, then hand them to the
 * plugin. The store's copy comes first: on_event may block or fail. */
static void
events_read(struct evreader *r)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/events", r->p->dir);
	int fd = file_open_at(AT_FDCWD, path, O_RDONLY, 0); /* the job's to write: no link */
	if (fd == -1)
		return;
	for (;;) {
		char buf[65536];
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, r->offset);
		if (n <= 0)
			break;
		buf[n] = '\0';
		char *last = memrchr(buf, '\n', (size_t)n);
		if (last == NULL) {
			if (n == sizeof(buf) - 1) {
				/* A line longer than the buffer: skip it whole. */
				h_log(r->j, PL_LOG_WARN, "event line over %zu bytes ignored", sizeof(buf));
				r->offset += n;
				continue;
			}
			break;
		}
		*last = '\0';
		int64_t newoff = r->offset + (last - buf) + 1;
		/* Pass 1: parse, compute artifact digests (outside the lock). */
		struct line { cJSON *o; char *type; char *text; char hex[65]; uint64_t size; char *apath; int bad; } *lines = NULL;
		int nl = 0;
		for (char *save = NULL, *ln = strtok_r(buf, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
			lines = realloc(lines, (size_t)(nl + 1) * sizeof(*lines));
			struct line *L = &lines[nl++];
			memset(L, 0, sizeof(*L));
			L->text = ln;
			L->o = cJSON_Parse(ln);
			const cJSON *t = cJSON_GetObjectItemCaseSensitive(L->o, "type");
			if (!cJSON_IsObject(L->o) || !cJSON_IsString(t) || !valid_name(t->valuestring)) {
				L->bad = 1;
				continue;
			}
			L->type = t->valuestring;
			if (strcmp(L->type, "artifact") == 0) {
				const cJSON *nm = cJSON_GetObjectItemCaseSensitive(L->o, "name");
				const cJSON *pa = cJSON_GetObjectItemCaseSensitive(L->o, "path");
				if (!cJSON_IsString(nm) || !cJSON_IsString(pa)) {
					L->bad = 1;
					continue;
				}
				char *jp = job_path(r, pa->valuestring);
				L->apath = realpath(jp, NULL);
				free(jp);
				if (L->apath == NULL || digest(L->apath, L->hex, &L->size) == -1) {
					h_log(r->j, PL_LOG_ERROR, "artifact %s: %s: %s", nm->valuestring,
					    pa->valuestring, strerror(errno));
					L->bad = 1;
				}
			}
		}
		/* Pass 2: one transaction for the batch and the new offset. */
		if (r->j->store)
			store_begin(r->j->store);
		for (int i = 0; i < nl; i++) {
			struct line *L = &lines[i];
			if (L->bad) {
				h_log(r->j, PL_LOG_WARN, "ignored a malformed event line: %.200s", L->text);
				continue;
			}
			char type[128];
			snprintf(type, sizeof(type), "job.%s", L->type);
			cJSON *d = cJSON_Duplicate(L->o, 1);
			cJSON_DeleteItemFromObject(d, "type");
			if (strcmp(L->type, "error") == 0) {
				const cJSON *m = cJSON_GetObjectItemCaseSensitive(L->o, "message");
				if (cJSON_IsString(m))
					snprintf(r->out->error, sizeof(r->out->error), "%s", m->valuestring);
			}
			if (strcmp(L->type, "artifact") == 0) {
				cJSON_ReplaceItemInObject(d, "path", cJSON_CreateString(L->apath));
				cJSON_AddNumberToObject(d, "size", (double)L->size);
				cJSON_AddStringToObject(d, "sha256", L->hex);
			}
			if (r->j->store == NULL) {
				hand_print(r->j, type, d);
				continue;
			}
			if (strcmp(L->type, "progress") == 0) {
				const cJSON *s = cJSON_GetObjectItemCaseSensitive(L->o, "step");
				const cJSON *t = cJSON_GetObjectItemCaseSensitive(L->o, "total");
				if (cJSON_IsNumber(s))
					store_job_progress(r->j->store, r->j->job_id, s->valuedouble,
					    cJSON_IsNumber(t) ? t->valuedouble : 0, "step");
				/* The feed speaks done/total/unit for every progress. */
				cJSON_AddNumberToObject(d, "done", cJSON_IsNumber(s) ? s->valuedouble : 0);
				if (!cJSON_HasObjectItem(d, "unit"))
					cJSON_AddStringToObject(d, "unit", "step");
			} else if (strcmp(L->type, "metric") == 0) {
				const cJSON *nm = cJSON_GetObjectItemCaseSensitive(L->o, "name");
				const cJSON *s = cJSON_GetObjectItemCaseSensitive(L->o, "step");
				const cJSON *v = cJSON_GetObjectItemCaseSensitive(L->o, "value");
				/* The step is stored as an integer: past 2^63 it has none. */
				if (cJSON_IsString(nm) && cJSON_IsNumber(s) && cJSON_IsNumber(v) &&
				    s->valuedouble > -0x1p63 && s->valuedouble < 0x1p63)
					store_metric(r->j->store, r->j->job_id, nm->valuestring,
					    (int64_t)s->valuedouble, v->valuedouble);
			} else if (strcmp(L->type, "artifact") == 0) {
				const cJSON *nm = cJSON_GetObjectItemCaseSensitive(L->o, "name");
				store_artifact(r->j->store, r->j->run_id, r->j->job_id, nm->valuestring,
				    L->apath, L->size, L->hex);
			}
			store_event(r->j->store, r->j->run, r->j->name, type, d);
		}
		r->offset = newoff;
		if (r->j->store) {
			store_proc_update(r->j->store, r->p, r->offset);
			store_commit(r->j->store);
		}
		for (int i = 0; i < nl; i++) {
			struct line *L = &lines[i];
			if (!L->bad && r->spec->on_event && !r->stop &&
			    r->spec->on_event(r->spec->arg, L->type, L->text) != 0)
				r->stop = 1;
			cJSON_Delete(L->o);
			free(L->apath);
		}
		free(lines);
	}
	close(fd);
}

int64_t
host_events_read(pl_job *j, struct proc *p, const struct pl_spawn *spec, int64_t offset,
    struct pl_exit *out)
{
	struct evreader r = { .j = j, .p = p, .spec = spec, .offset = offset, .out = out };
	snprintf(r.cwd, sizeof(r.cwd), "%s", spec->cwd ? spec->cwd : j->workdir);
	events_read(&r);
	return r.offset;
}

static char **
build_env(pl_job *j, const struct proc *p, const struct pl_spawn *spec)
{
	int n = 0;
	for (char **e = environ; *e; e++)
		n++;
	int extra = 0;
	for (const char *const *e = spec->env; e && *e; e++)
		extra++;
	char **env = xcalloc((size_t)(n + extra + 16), sizeof(char *));
	int k = 0;
	/* A job run as its owner gets the owner's HOME, USER and LOGNAME,
	 * not the daemon's. */
	struct passwd pw, *pwp = NULL;
	char pwbuf[4096];
	uid_t uid;
	gid_t gid;
	if (owner_ids(j->owner, &uid, &gid) == 0)
		getpwuid_r(uid, &pw, pwbuf, sizeof(pwbuf), &pwp);
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "PL_", 3) != 0 && (pwp == NULL || (strncmp(*e, "HOME=", 5) != 0 &&
		    strncmp(*e, "USER=", 5) != 0 && strncmp(*e, "LOGNAME=", 8) != 0)))
			env[k++] = xstrdup(*e);
	if (pwp != NULL && (asprintf(&env[k++], "HOME=%s", pw.pw_dir) < 0 ||
	    asprintf(&env[k++], "USER=%s", pw.pw_name) < 0 ||
	    asprintf(&env[k++], "LOGNAME=%s", pw.pw_name) < 0))
		fatal("build_env");
	if (asprintf(&env[k++], "PL_EVENTS=%s/events", p->dir) < 0 ||
	    asprintf(&env[k++], "PL_JOB_DIR=%s", p->dir) < 0 ||
	    asprintf(&env[k++], "PL_WORKDIR=%s", j->workdir) < 0 ||
	    asprintf(&env[k++], "PL_ATTEMPT=%d", j->attempt) < 0 ||
	    asprintf(&env[k++], "PL_RUN=%s", j->run) < 0 ||
	    asprintf(&env[k++], "PL_JOB=%s", j->name) < 0)
		fatal("build_env");
	if (spec->resume_from && asprintf(&env[k++], "PL_RESUME_FROM=%s", spec->resume_from) < 0)
		fatal("build_env");
	for (const char *const *e = spec->env; e && *e; e++)
		env[k++] = xstrdup(*e);
	env[k] = NULL;
	return env;
}

static void
free_vec(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

/* A process's row, committed on its own. */
static void
proc_save(pl_job *j, struct proc *p, int64_t offset)
{
	store_begin(j->store);
	store_proc_update(j->store, p, offset);
	store_commit(j->store);
}

static int spawn_run(pl_job *j, const struct pl_spawn *spec, struct pl_exit *out);

/* The plugin's structs, copied into this host's: a shorter pl_spawn reads
 * zero past its size, and no more of out is written than its size. */
static int
h_spawn(pl_job *j, const struct pl_spawn *pspec, struct pl_exit *pout)
{
	struct pl_spawn spec;
	struct pl_exit out;
	char why[256];
	const char *who = j->reg && j->reg->plugin ? j->reg->plugin->path : "plugin";

	if (plugin_struct_in("struct pl_spawn", pspec, PL_SPAWN_SIZE_MIN, &spec, sizeof(spec),
	    why, sizeof(why)) == -1 || plugin_struct_in("struct pl_exit", pout, PL_EXIT_SIZE_MIN,
	    &out, sizeof(out), why, sizeof(why)) == -1) {
		h_log(j, PL_LOG_ERROR, "spawn: %s: %s", who, why);
		return PL_EINVAL;
	}
	/* What the host writes starts zeroed, whatever the plugin's struct held. */
	memset(&out.exited, 0, sizeof(out) - offsetof(struct pl_exit, exited));
	int rc = spawn_run(j, &spec, &out);
	memcpy((char *)pout + offsetof(struct pl_exit, exited), &out.exited,
	    pout->size - offsetof(struct pl_exit, exited));
	return rc;
}

static int
spawn_run(pl_job *j, const struct pl_spawn *spec, struct pl_exit *out)
{
	if (spec->argv == NULL || spec->argv[0] == NULL || !valid_name(spec->name)) {
		h_log(j, PL_LOG_ERROR, "spawn: bad pl_spawn (name or argv)");
		return PL_EINVAL;
	}
	if (h_cancelled(j))
		return PL_ECANCELED;
	struct proc p;
	memset(&p, 0, sizeof(p));
	p.ex = j->ex;
	p.pidfd = -1;
	p.run = j->store ? j->run : NULL;
	p.opts = j->ex_opts;
	snprintf(p.log, sizeof(p.log), "%s", j->logpath[0] ? j->logpath : "/dev/stderr");
	if (j->store)
		snprintf(p.dir, sizeof(p.dir), "%s/attempt-%d/%s", j->jobdir, j->attempt, spec->name);
	else
		snprintf(p.dir, sizeof(p.dir), "%s/.pl/%s", j->workdir, spec->name);

	p.attempt_id = j->attempt_id;
	snprintf(p.name, sizeof(p.name), "%s", spec->name);
	p.started = now_wall();

	struct evreader r = { .j = j, .p = &p, .spec = spec, .out = out };
	snprintf(r.cwd, sizeof(r.cwd), "%s", spec->cwd ? spec->cwd : j->workdir);
	int adopt = 0;
	double t0 = now_mono();
	/* A local process of a stage that can be re-entered gets no row
	 * before it starts: the shim's shim.json (written before the start is
	 * confirmed) and exit.json are the record until its first events or
	 * its end write one, and a re-entered job reads them (below). Other
	 * stages' jobs are killed, not re-entered, after a restart: their
	 * processes are found by their rows, written first. */
	int row_first = j->store && (p.ex != &exec_local || j->reg == NULL ||
	    !(j->reg->st->flags & PL_STAGE_ADOPTABLE));
	struct stat sb;
	struct proc_row row;
	if (j->store && j->has_final && strcmp(j->final.name, spec->name) == 0) {
		/* The same name again in this attempt: its row first, so that
		 * the lookup below finds it, as for any ended process. */
		proc_save(j, &j->final, j->final_offset);
		j->has_final = 0;
	}
	/* A row to find: the job was re-entered, or it spawned before in
	 * this attempt (a fresh attempt's first spawn has none). */
	int may_have_row = j->adopted || j->nspawned > 0;
	j->nspawned++;
	int found = j->store && may_have_row &&
	    store_proc_find(j->store, j->attempt_id, spec->name, &row) == 0;
	if (found) {
		/* Re-entered after a restart: this process was started before. */
		p.id = row.id;
		p.pid = row.pid;
		p.starttime = row.starttime;
		snprintf(p.ext_id, sizeof(p.ext_id), "%s", row.ext_id);
		p.state = row.state;
		r.offset = row.events_offset;
		if (strcmp(row.executor, "slurm") == 0 && &exec_slurm != NULL)
			p.ex = &exec_slurm;
		if (row.state == PROC_ENDED || row.state == PROC_LOST) {
			out->exited = row.exited;
			out->status = row.status;
			out->signal = row.sig;
			out->adopted = 1;
			return row.state == PROC_LOST ? PL_ELOST : PL_OK;
		}
	} else if (row_first) {
		if (store_begin(j->store) == -1)
			return PL_EIO;
		if (store_proc_insert(j->store, j->attempt_id, spec->name, p.ex->name, p.dir,
		    &p.id) == -1) {
			store_rollback(j->store);
			return PL_EIO;
		}
		store_commit(j->store);
	}
	/* Re-adopt a process whose row has not ended, or, re-entered with no
	 * row, one whose directory is there: the shim may have started it
	 * before the daemon stopped. One that never started is started now. */
	if (found || (!row_first && j->adopted && stat(p.dir, &sb) == 0)) {
		if (p.ex->adopt(&p) == -1)
			return PL_EIO;
		if (p.state != PROC_STARTING) {
			adopt = 1;
			out->adopted = 1;
			job_logf(j, "re-adopted %s (state %d%s)", spec->name, p.state,
			    found ? "" : ", from its directory");
		}
	}
	if (!adopt) {
		int fresh = stat(p.dir, &sb) == -1, dfd;
		/* Below the job's directory, no link is followed (the job may
		 * write there); by hand the directory is the caller's. */
		char rel[PATH_MAX];
		snprintf(rel, sizeof(rel), "attempt-%d/%s", j->attempt, spec->name);
		if (j->jobdirfd >= 0)
			dfd = dirs_make_owned(j->jobdirfd, rel, j->owner);
		else
			dfd = plc_mkdirs(p.dir, 0750) == -1 ? -1 :
			    open(p.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd == -1) {
			h_log(j, PL_LOG_ERROR, "spawn: cannot make %s: %s", p.dir, strerror(errno));
			return PL_EIO;
		}
		static const char *const stale[] = { "events", "exit.json", "shim.json", NULL };
		for (int i = 0; !fresh && stale[i]; i++)
			unlinkat(dfd, stale[i], 0);
		close(dfd);
		int na = 0;
		while (spec->argv[na])
			na++;
		const char *shim = j->conf ? j->conf->shim : NULL;
		char shimbuf[PATH_MAX];
		if (shim == NULL) {
			snprintf(shimbuf, sizeof(shimbuf), "%s/pipeline-shim", self_dir());
			shim = shimbuf;
		}
		char **argv = xcalloc((size_t)na + 12, sizeof(char *));
		int k = 0;
		argv[k++] = xstrdup(shim);
		argv[k++] = xstrdup("-d");
		argv[k++] = xstrdup(p.dir);
		argv[k++] = xstrdup("-l");
		argv[k++] = xstrdup(p.log);
		argv[k++] = xstrdup("-c");
		argv[k++] = xstrdup(r.cwd);
		if (j->owner) {
			argv[k++] = xstrdup("-u");
			argv[k++] = xstrdup(j->owner);
		}
		argv[k++] = xstrdup("--");
		for (int i = 0; i < na; i++)
			argv[k++] = xstrdup(spec->argv[i]);
		char **env = build_env(j, &p, spec);
		job_logf(j, "spawn %s: %s%s", spec->name, spec->argv[0],
		    spec->resume_from ? " (resuming)" : "");
		int rc = p.ex->start(&p, argv, env, r.cwd);
		free_vec(argv);
		free_vec(env);
		if (rc == -1) {
			h_log(j, PL_LOG_ERROR, "spawn %s: could not start the shim", spec->name);
			if (j->store) {
				p.state = PROC_LOST;
				proc_save(j, &p, r.offset);
			}
			return PL_ECHILD;
		}
		/* The shim's pid and start time. A run's shim wrote shim.json
		 * before it replied, so a daemon that dies before this is
		 * committed finds them there (local_adopt): no commit of its
		 * own for that case, the next one carries it. */
		if (j->store && (p.ex != &exec_local || p.child))
			proc_save(j, &p, r.offset);
	}
	pthread_mutex_lock(&j->lock);
	j->cur = &p;
	pthread_mutex_unlock(&j->lock);

	double grace = j->conf ? j->conf->kill_grace : 10;
	double own_deadline = spec->timeout > 0 ? now_mono() + spec->timeout : 0;
	double term_at = 0;
	int killed = 0, last_state = p.state;
	char last_reason[128];
	snprintf(last_reason, sizeof(last_reason), "%s", p.reason);
	/* Wake on a write to the process directory (the events file) or on
	 * the process's end (its pidfd, local only); otherwise every 200 ms
	 * for cancellation, timeouts and batch-system states. The inotify
	 * instance is made only once the process has run for 50 ms: closing
	 * one costs the kernel an RCU grace period (~2 ms), more than a short
	 * job itself; until then a 10 ms poll reads the events. */
	int ifd = -1, ino_tried = 0;
	double spawned = now_mono();
	for (;;) {
		if (!ino_tried && now_mono() - spawned > 0.05) {
			ino_tried = 1;
			ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
			if (ifd >= 0 && inotify_add_watch(ifd, p.dir,
			    IN_MODIFY | IN_CREATE | IN_MOVED_TO) == -1) {
				close(ifd);
				ifd = -1;
			}
		}
		struct pollfd pf[2];
		int npf = 0;
		if (ifd >= 0)
			pf[npf++] = (struct pollfd){ .fd = ifd, .events = POLLIN };
		if (p.pidfd >= 0)
			pf[npf++] = (struct pollfd){ .fd = p.pidfd, .events = POLLIN };
		int w;
		if (npf > 0) {
			poll(pf, (nfds_t)npf, ino_tried ? 200 : 10);
			char drain[4096];
			while (ifd >= 0 && read(ifd, drain, sizeof(drain)) > 0)
				;
			w = p.ex->wait(&p, 0);
		} else {
			w = p.ex->wait(&p, 200);
		}
		events_read(&r);
		if (w != 0)
			break;
		if ((p.state != last_state || strcmp(p.reason, last_reason) != 0) && j->store) {
			snprintf(last_reason, sizeof(last_reason), "%s", p.reason);
			/* A batch executor moved it (queued -> running). */
			cJSON *d = cJSON_CreateObject();
			cJSON_AddStringToObject(d, "proc", spec->name);
			cJSON_AddStringToObject(d, "state", p.state == PROC_QUEUED ? "queued" : "running");
			if (p.reason[0])
				cJSON_AddStringToObject(d, "reason", p.reason);
			char m[256];
			if (p.state == PROC_QUEUED)
				snprintf(m, sizeof(m), "queued%s%s%s%s", p.ext_id[0] ? " as " : "",
				    p.ext_id, p.reason[0] ? ": " : "", p.reason);
			else
				snprintf(m, sizeof(m), "running%s%s", p.ext_id[0] ? " as " : "", p.ext_id);
			store_begin(j->store);
			store_proc_update(j->store, &p, r.offset);
			store_event(j->store, j->run, j->name, "job.proc", d);
			/* status shows why a batch job waits (its pending reason). */
			store_job_state(j->store, j->job_id, j->run, j->name, "running", j->attempt, m);
			store_commit(j->store);
			last_state = p.state;
		}
		int stop = h_cancelled(j) || r.stop || (own_deadline > 0 && now_mono() > own_deadline);
		if (stop && term_at == 0) {
			job_logf(j, "stopping %s (SIGTERM)", spec->name);
			p.ex->signal(&p, SIGTERM);
			term_at = now_mono();
		} else if (stop && !killed && now_mono() - term_at > grace) {
			job_logf(j, "killing %s (SIGKILL after %gs)", spec->name, grace);
			p.ex->signal(&p, SIGKILL);
			killed = 1;
		}
	}
	if (ifd >= 0)
		close(ifd);
	pthread_mutex_lock(&j->lock);
	j->cur = NULL;
	pthread_mutex_unlock(&j->lock);
	if (j->store && p.ex == &exec_local && j->mode == JOB_MODE_RUN) {
		/* Written with the job's end (job_flush_final): an earlier
		 * process's row first, on its own. */
		if (j->has_final)
			proc_save(j, &j->final, j->final_offset);
		j->final = p;
		j->final.pidfd = -1;
		j->final_offset = r.offset;
		j->has_final = 1;
	} else if (j->store)
		proc_save(j, &p, r.offset);
	p.ex->release(&p);
	if (p.end_class[0]) {
		/* A batch system's verdict (timeout, oom, preempted, node_fail,
		 * cancelled) is what operators need to see first. */
		char e[sizeof(out->error)];
		snprintf(e, sizeof(e), "%s: %s%s%s", p.ex->name, p.end_class,
		    out->error[0] ? "; " : "", out->error);
		snprintf(out->error, sizeof(out->error), "%s", e);
		job_logf(j, "%s ended as %s", spec->name, p.end_class);
	}
	out->exited = p.exited;
	out->status = p.status;
	out->signal = p.sig;
	out->seconds = now_mono() - t0;
	if (p.state == PROC_LOST) {
		h_log(j, PL_LOG_ERROR, "%s: the process vanished without an exit record (%s)",
		    spec->name, p.reason[0] ? p.reason : "shim gone");
		return PL_ELOST;
	}
	if (own_deadline > 0 && now_mono() > own_deadline && term_at > 0)
		return PL_ETIMEDOUT;
	if (h_cancelled(j) && term_at > 0)
		return j->timed_out ? PL_ETIMEDOUT : PL_ECANCELED;
	return PL_OK;
}

void
job_flush_final(struct pl_job *j)
{
	if (j->has_final && j->store)
		store_proc_update(j->store, &j->final, j->final_offset);
	j->has_final = 0;
}

struct pl_host plugin_host = {
	.abi = PL_ABI_VERSION,
	.size = sizeof(struct pl_host),
	.host_name = "pipelined",
	.register_stage = plugin_register_stage,
	.strerror = h_strerror,
	.log = h_log,
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
	.spawn = h_spawn,
	.artifact = h_artifact,
	.artifact_find = h_artifact_find,
	.cancelled = h_cancelled,
	.value_set = h_value_set,
	.value_get = h_value_get,
	.value_history = h_value_history,
	.artifact_digest = h_artifact_digest,
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

/* Generic key checks, then the stage's own check hook. */
int
host_check_section(const struct stage_reg *reg, const struct spec *spec,
    const struct spec_section *sec, char **errs)
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
			char known[1024] = "";
			const struct pl_key *q;
			for (int qi = 0; (q = host_key(reg, qi)) != NULL; qi++) {
				if (q->flags & PL_KEY_HIDDEN)
					continue;
				if (known[0])
					strncat(known, ", ", sizeof(known) - strlen(known) - 1);
				strncat(known, q->name, sizeof(known) - strlen(known) - 1);
			}
			errs_add(errs, file, kv->line, kv->key, "unknown key for stage %s (known: %s)",
			    st->name, known[0] ? known : "none");
			nerr++;
			continue;
		}
		const char *v = kv->value;
		int64_t iv;
		double dv;
		int bv;
		const char *what = NULL;
		switch (k->type) {
		case PL_KEY_INT: if (parse_int(v, &iv) == -1) what = "an integer"; break;
		case PL_KEY_FLOAT: if (parse_double(v, &dv) == -1) what = "a number"; break;
		case PL_KEY_BOOL: if (parse_bool(v, &bv) == -1) what = "yes or no"; break;
		case PL_KEY_DURATION: if (parse_duration(v, &dv) == -1) what = "a duration (30s, 5m, 2h)"; break;
		case PL_KEY_SIZE: if (parse_size(v, &iv) == -1) what = "a size (512, 8M, 2G)"; break;
		case PL_KEY_PATH: case PL_KEY_INPUT: if (*v == '\0') what = "a path"; break;
		default: break;
		}
		if (what) {
			errs_add(errs, file, kv->line, kv->key, "bad value \"%s\": expected %s", v, what);
			nerr++;
			continue;
		}
		/* The key's bounds (pl_key min and max), on the value as parsed;
		 * like a bad path, an out-of-range value does not hold the
		 * stage's own checks back. */
		int64_t lo = 0, hi = 0;
		unsigned b = key_bounds(reg, k, &lo, &hi);
		double x = k->type == PL_KEY_INT || k->type == PL_KEY_SIZE ? (double)iv : dv;
		int num = k->type == PL_KEY_INT || k->type == PL_KEY_SIZE ||
		    k->type == PL_KEY_FLOAT || k->type == PL_KEY_DURATION;
		if (num && (((b & PL_KEY_MIN) && x < (double)lo) || ((b & PL_KEY_MAX) && x > (double)hi))) {
			if ((b & PL_KEY_MIN) && (b & PL_KEY_MAX))
				errs_add(errs, file, kv->line, kv->key, "%s is out of range: must be "
				    "between %lld and %lld", v, (long long)lo, (long long)hi);
			else if (b & PL_KEY_MIN)
				errs_add(errs, file, kv->line, kv->key, "%s is out of range: must be "
				    "%lld or more", v, (long long)lo);
			else
				errs_add(errs, file, kv->line, kv->key, "%s is out of range: must be "
				    "%lld or less", v, (long long)hi);
			nbound++;
		}
	}
	/* Paths do not hold the stage's own checks back (every problem at
	 * once); a bad one reads as unset to them. */
	uint64_t bad_inputs = 0;
	int nbad = 0;
	for (int i = 0; i < sec->nkv; i++) {
		int ki = -1;
		const struct pl_key *k = host_find_key(reg, sec->kv[i].key, &ki);
		if (k != NULL && (k->flags & (PL_KEY_FILE | PL_KEY_DIR)) &&
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
		struct pl_job *j = job_new(JOB_MODE_CHECK, reg, spec, sec);
		j->errs = errs;
		j->bad_inputs = bad_inputs;
		int rc = st->check(j);
		if (j->failmsg[0] == 1)
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
