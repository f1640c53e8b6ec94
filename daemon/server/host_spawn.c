/* host_spawn.c: host->spawn(), and the spawn of the daemon's jobs and of
 * a stage run by hand (host_spawn_shim()): a job's processes under
 * pipeline-shim through its executor, adoption of one started before a
 * restart (by its row in procs, or its shim's records), and the
 * events-file reader that records a process's progress, metrics and
 * artifacts as it writes them, through the job's host backend (stored in
 * the daemon, printed by hand, where rows and transactions are nothing).
 * The table and the other host functions are host.c's. */
#include <errno.h>
#include <dirent.h>
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

#include "pld.h"
#include "host.h"
#include "store.h"
#include "priv.h"
#include "plio.h"

extern char **environ;


/* Where p's events file is: a stage process's in its records directory,
 * the daemon's, which its shim opened as root and handed to it as
 * descriptor 3 (pipeline-shim -e), so that nothing its owner writes
 * passes for the stage's own lines; a job program's in its process
 * directory, which it writes itself. */
static void
events_path(const pl_job *j, const struct proc *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s/events", j->stage_proc && p->rdir[0] ? p->rdir : p->dir);
}

struct evreader {
	pl_job *j;
	struct proc *p;
	int fd;            /* the events file proc_start() made and holds; -1: none (opened each read) */
	const struct pl_spawn *spec;
	int64_t offset;
	struct pl_exit *out;
	int stop;          /* on_event asked to stop the child */
	int dead;          /* refused (an artifact, the quota, a failed commit): read no more */
	int marked;        /* the failed-commit mark was looked for */
	int64_t unpublished;            /* lines of a type a job program does not publish */
	char first_unpublished[64];
	char cwd[PATH_MAX];
};

static void reader_refuse(struct evreader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The reader stops: why becomes the job's failure (j->refused, which
 * host->fail() keeps; stage_run() fails a hook that returns PL_OK after
 * it), the process is stopped and nothing more of its file is read. */
static void
reader_refuse(struct evreader *r, const char *fmt, ...)
{
	va_list ap;
	if (r->dead)
		return;
	r->dead = 1;
	r->j->ev_refused = 1;
	if (r->j->refused[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(r->j->refused, sizeof(r->j->refused), fmt, ap);
		va_end(ap);
		snprintf(r->j->failmsg, sizeof(r->j->failmsg), "%s", r->j->refused);
	}
	job_log(r->j, PL_LOG_ERROR, "%s", r->j->refused);
}

/* The name of the mark a failed commit leaves beside the process
 * directory (in attempt-N, root's): NAME.events-failed-OFFSET, empty, so
 * that it is made on a full disk too (an inode, no data block). */
static void
mark_name(const struct evreader *r, int64_t off, char *buf, size_t len)
{
	snprintf(buf, len, "attempt-%d/%s.events-failed-%lld", r->j->attempt, r->p->name,
	    (long long)off);
}

/* A batch whose commit failed (the disk full): marked, so that no restart
 * reads those lines again (each would fail the same commit and stop the
 * daemon again: a stop-restart loop), the job failed, then the store's
 * failure hook, as for every failed commit (the daemon stops). */
static void
events_commit_failed(struct evreader *r, const char *why)
{
	char mark[PATH_MAX];
	mark_name(r, r->offset, mark, sizeof(mark));
	int fd = r->j->jobdirfd >= 0 ? openat(r->j->jobdirfd, mark, O_WRONLY | O_CREAT |
	    O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
	if (fd >= 0)
		close(fd);
	else
		job_log(r->j, PL_LOG_ERROR, "events: cannot mark %s/%s: %s", r->j->jobdir, mark,
		    strerror(errno));
	reader_refuse(r, "events: %s's event lines from byte %lld could not be stored (%s); "
	    "they are not read again", r->p->name, (long long)r->offset, why);
	r->j->hb->fail(r->j);
}

/* The marks of an earlier process of this name in this attempt, whose
 * events file a new start empties. */
static void
marks_clear(struct evreader *r)
{
	char dir[64], pre[160];
	snprintf(dir, sizeof(dir), "attempt-%d", r->j->attempt);
	snprintf(pre, sizeof(pre), "%s.events-failed-", r->p->name);
	int dfd = r->j->jobdirfd >= 0 ? openat(r->j->jobdirfd, dir, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC) : -1;
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (d == NULL) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, pre, strlen(pre)) == 0)
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

/* Once per reader with a job directory (the daemon's): a mark left for
 * this offset means these lines failed a commit before the restart:
 * refused, not read again. */
static void
events_mark_check(struct evreader *r)
{
	char mark[PATH_MAX];
	struct stat st;
	r->marked = 1;
	if (r->j->jobdirfd < 0)
		return;
	mark_name(r, r->offset, mark, sizeof(mark));
	if (fstatat(r->j->jobdirfd, mark, &st, AT_SYMLINK_NOFOLLOW) == 0)
		reader_refuse(r, "events: %s's event lines from byte %lld could not be stored "
		    "before the daemon's restart (a commit failed: the disk full?); they are not "
		    "read again", r->p->name, (long long)r->offset);
}

/* The events quota of one attempt of the daemon's (pipelined.conf(5):
 * events_max_lines, events_max_size): 0 while a line of len bytes (its
 * newline included) fits, else -1 with the job refused, naming the
 * quota. */
static int
quota_take(struct evreader *r, size_t len)
{
	pl_job *j = r->j;
	int64_t maxl = conf_number(j->conf, "daemon.events_max_lines", CONF_EVENTS_MAX_LINES);
	int64_t maxb = conf_number(j->conf, "daemon.events_max_size", CONF_EVENTS_MAX_SIZE);
	if (!j->hb->daemon)
		return 0;
	if (j->ev_lines + 1 > maxl) {
		reader_refuse(r, "events quota: the job's programs reported more than %lld event "
		    "lines in this attempt (events_max_lines); %s stopped", (long long)maxl,
		    r->p->name);
		return -1;
	}
	if (j->ev_bytes + (int64_t)len > maxb) {
		reader_refuse(r, "events quota: the job's programs reported more than %lld bytes "
		    "of event lines in this attempt (events_max_size); %s stopped",
		    (long long)maxb, r->p->name);
		return -1;
	}
	j->ev_lines++;
	j->ev_bytes += (int64_t)len;
	return 0;
}

/* p's events file opened to read (the job's to write: no link), or -1.
 * A daemon process of its own user cannot reach a run owner's process
 * directory: the owner's file server opens it. */
static int
events_open(pl_job *j, const struct proc *p)
{
	char path[PATH_MAX];
	events_path(j, p, path, sizeof(path));
	int fd = file_open_at(AT_FDCWD, path, O_RDONLY, 0);
	if (fd == -1 && errno == EACCES && j->jobdirfd >= 0)
		fd = job_open_as(j, path);
	return fd;
}

/* A re-entered attempt's quota counts what its processes reported before
 * the restart: the lines of each one's file up to its stored offset,
 * read as events_read() reads them (a run owner's file through the
 * owner's file server). */
static void
quota_recount(pl_job *j, const struct proc *p, int64_t offset)
{
	for (int i = 0; i < j->nquota_ids; i++)
		if (j->quota_ids[i] == p->id)
			return;
	j->quota_ids = realloc(j->quota_ids, (size_t)(j->nquota_ids + 1) * sizeof(int64_t));
	if (j->quota_ids == NULL)
		fatal("quota_recount");
	j->quota_ids[j->nquota_ids++] = p->id;
	char buf[65536];
	int fd = offset > 0 ? events_open(j, p) : -1;
	if (fd == -1 && offset > 0)
		job_log(j, PL_LOG_WARN, "events quota: %s's lines before the restart not "
		    "counted: %s", p->name, strerror(errno));
	j->ev_bytes += offset;
	for (int64_t at = 0; fd >= 0 && at < offset; ) {
		ssize_t n = pread(fd, buf, (size_t)(offset - at) < sizeof(buf) ?
		    (size_t)(offset - at) : sizeof(buf), at);
		if (n <= 0)
			break;
		for (ssize_t k = 0; k < n; k++)
			j->ev_lines += buf[k] == '\n';
		at += n;
	}
	if (fd >= 0)
		close(fd);
}

struct line {
	cJSON *o;
	char *type;
	char *text;
	char hex[65];
	uint64_t size;
	char *apath;
	int bad, own, unpublished;
};

/* Pass 1 over one line: parsed, its kind settled, an artifact's digest
 * computed (outside the store's lock). -1 when the line is refused and
 * the batch ends before it. */
static int
line_parse(struct evreader *r, struct line *L, char *ln)
{
	memset(L, 0, sizeof(*L));
	L->text = ln;
	if (quota_take(r, strlen(ln) + 1) == -1)
		return -1;
	L->o = cJSON_Parse(ln);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(L->o, "type");
	if (!cJSON_IsObject(L->o) || !cJSON_IsString(t) || !valid_name(t->valuestring)) {
		L->bad = 1;
		return 0;
	}
	L->type = t->valuestring;
	/* A stage process's own lines (stagectx.c) carry the values it set
	 * and the digests it computed as the owner, and may be of any type;
	 * its programs' lines never do (it strips the mark from what it
	 * relays). */
	const cJSON *mk = cJSON_GetObjectItemCaseSensitive(L->o, "pl_stage");
	L->own = r->j->stage_proc && cJSON_IsTrue(mk);
	if (!L->own && !event_program_type(L->type)) {
		L->unpublished = 1;
		if (r->unpublished++ == 0) {
			snprintf(r->first_unpublished, sizeof(r->first_unpublished), "%s", L->type);
			job_log(r->j, r->spec->on_event ? PL_LOG_INFO : PL_LOG_WARN, "events: %s's "
			    "\"%s\" lines go to its stage only, not stored or published (a job "
			    "program publishes %s)", r->p->name, L->type, EVENT_PROGRAM_TYPES);
		}
		return 0;
	}
	if (strcmp(L->type, "artifact") != 0)
		return 0;
	const cJSON *nm = cJSON_GetObjectItemCaseSensitive(L->o, "name");
	const cJSON *pa = cJSON_GetObjectItemCaseSensitive(L->o, "path");
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(L->o, "sha256");
	int digest = L->own && cJSON_IsString(sh) && strlen(sh->valuestring) == 64 &&
	    strspn(sh->valuestring, "0123456789abcdef") == 64;
	if (!cJSON_IsString(nm) || !cJSON_IsString(pa)) {
		L->bad = 1;
		return 0;
	}
	/* Resolved and hashed with the owner's rights (the daemon reads
	 * nothing for a job its owner could not), bounded and interruptible;
	 * a stage process's digest is taken, its size read. */
	char why[1024];
	if (job_artifact_as(r->j, digest ? NULL : r->cwd, pa->valuestring,
	    JOB_ARTIFACT_MAX(r->j), &L->apath,
	    &L->size, digest ? NULL : L->hex, why, sizeof(why)) == -1) {
		int e = errno;
		if (job_artifact_refused(e) || e == ECANCELED) {
			/* The batch ends before this line, which is not
			 * stored: not counted either. */
			if (r->j->hb->daemon) {
				r->j->ev_lines--;
				r->j->ev_bytes -= (int64_t)strlen(ln) + 1;
			}
			if (e != ECANCELED)   /* cancelled or timed out: the job ends anyway */
				reader_refuse(r, "artifact %s: %s", nm->valuestring, why);
			return -1;
		}
		job_log(r->j, PL_LOG_ERROR, "artifact %s: %s", nm->valuestring, why);
		L->bad = 1;
		return 0;
	}
	if (digest)
		snprintf(L->hex, sizeof(L->hex), "%s", sh->valuestring);
	return 0;
}

/* Pass 2 over one line, inside the batch's transaction: its rows and
 * its job.TYPE event, through the job's backend (by hand: printed). */
static void
line_store(struct evreader *r, struct line *L)
{
	pl_job *j = r->j;
	if (L->bad) {
		job_log(j, PL_LOG_WARN, "ignored a malformed event line: %.200s", L->text);
		return;
	}
	if (L->unpublished)
		return;
	char type[128];
	snprintf(type, sizeof(type), "job.%s", L->type);
	cJSON *d = cJSON_Duplicate(L->o, 1);
	cJSON_DeleteItemFromObject(d, "type");
	cJSON_DeleteItemFromObject(d, "pl_stage");
	if (L->own && strcmp(L->type, "value") == 0) {
		/* host->value_set() in the stage process: a value, not an
		 * event, as in the daemon. */
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(L->o, "key");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(L->o, "value");
		if (cJSON_IsString(k) && cJSON_IsString(v))
			j->hb->value_set(j, k->valuestring, v->valuestring);
		cJSON_Delete(d);
		return;
	}
	if (strcmp(L->type, "error") == 0) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(L->o, "message");
		if (cJSON_IsString(m))
			snprintf(r->out->error, sizeof(r->out->error), "%s", m->valuestring);
		/* A stage process's own failure, whole: the job's message, as
		 * the stage's host->fail() makes it in the daemon (the ABI's
		 * error keeps 255 bytes of it). */
		if (cJSON_IsString(m) && L->own)
			snprintf(j->failmsg, sizeof(j->failmsg), "%s", m->valuestring);
	}
	if (strcmp(L->type, "progress") == 0) {
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(L->o, "step");
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(L->o, "total");
		const cJSON *u = cJSON_GetObjectItemCaseSensitive(L->o, "unit");
		/* The program's own unit (optimizer-steps, examples), as the
		 * feed has it: status and watch say the same. */
		j->hb->progress(j, cJSON_IsNumber(s) ? s->valuedouble : NAN,
		    cJSON_IsNumber(t) ? t->valuedouble : 0,
		    cJSON_IsString(u) && *u->valuestring ? u->valuestring : "step", d);
	} else if (strcmp(L->type, "metric") == 0) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(L->o, "name");
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(L->o, "step");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(L->o, "value");
		/* The step is stored as an integer: past 2^63 it has none. */
		if (cJSON_IsString(nm) && cJSON_IsNumber(s) && cJSON_IsNumber(v) &&
		    s->valuedouble > -0x1p63 && s->valuedouble < 0x1p63)
			j->hb->metric(j, nm->valuestring, (int64_t)s->valuedouble, v->valuedouble);
	} else if (strcmp(L->type, "artifact") == 0) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(L->o, "name");
		cJSON_ReplaceItemInObject(d, "path", cJSON_CreateString(L->apath));
		cJSON_DeleteItemFromObject(d, "size");
		cJSON_DeleteItemFromObject(d, "sha256");
		cJSON_AddNumberToObject(d, "size", (double)L->size);
		cJSON_AddStringToObject(d, "sha256", L->hex);
		j->hb->artifact(j, nm->valuestring, L->apath, L->size, L->hex);
	} else if (L->own && strcmp(L->type, "proc") == 0) {
		/* A stage process's program under a batch executor, queued or
		 * running (stagectx.c's batch_state()): the job's message, as
		 * for the daemon's own launches (proc_announce_state()). */
		const cJSON *pn = cJSON_GetObjectItemCaseSensitive(L->o, "proc");
		const cJSON *ps = cJSON_GetObjectItemCaseSensitive(L->o, "state");
		const cJSON *pr = cJSON_GetObjectItemCaseSensitive(L->o, "reason");
		const cJSON *pi = cJSON_GetObjectItemCaseSensitive(L->o, "id");
		if (cJSON_IsString(pn) && cJSON_IsString(ps)) {
			char m[256];
			snprintf(m, sizeof(m), "%s %s%s%s%s%s", pn->valuestring, ps->valuestring,
			    cJSON_IsString(pi) ? " as " : "", cJSON_IsString(pi) ? pi->valuestring : "",
			    cJSON_IsString(pr) ? ": " : "", cJSON_IsString(pr) ? pr->valuestring : "");
			j->hb->job_state(j, PLJ_running, m);
		}
	}
	j->hb->event(j, type, d);
}

/* Store one batch of complete event lines, then hand them to the
 * plugin. The store's copy comes first: on_event may block or fail. A
 * line refused (an artifact that is no regular file or directory, the
 * events quota) ends the batch before it and the reading: the offset
 * stays at it, so a restart refuses it again rather than pass it. */
static void
events_read(struct evreader *r)
{
	if (!r->marked)
		events_mark_check(r);
	if (r->dead)
		return;
	int fd = r->fd >= 0 ? r->fd : events_open(r->j, r->p);
	if (fd == -1)
		return;
	while (!r->dead) {
		char buf[65536];
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, r->offset);
		if (n <= 0)
			break;
		buf[n] = '\0';
		char *last = memrchr(buf, '\n', (size_t)n);
		if (last == NULL) {
			if (n == sizeof(buf) - 1) {
				/* A line longer than the buffer: skipped whole, counted. */
				if (quota_take(r, (size_t)n) == -1)
					break;
				job_log(r->j, PL_LOG_WARN, "event line over %zu bytes ignored", sizeof(buf));
				r->offset += n;
				continue;
			}
			break;
		}
		*last = '\0';
		int64_t newoff = r->offset;
		int cut = 0;
		/* Pass 1: parse, compute artifact digests (outside the lock). */
		struct line *lines = NULL;
		int nl = 0;
		for (char *save = NULL, *ln = strtok_r(buf, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
			lines = xrealloc(lines, (size_t)nl + 1, sizeof(*lines));
			if (line_parse(r, &lines[nl], ln) == -1) {
				cJSON_Delete(lines[nl].o);
				free(lines[nl].apath);
				cut = 1;
				break;
			}
			nl++;
			/* Through this line (and the empty ones strtok passed). */
			newoff = r->offset + (ln - buf) + (int64_t)strlen(ln) + 1;
		}
		if (!cut)
			newoff = r->offset + (last - buf) + 1;
		/* Pass 2: one transaction for the batch and the new offset.
		 * Nothing in memory runs ahead of it (undoable): a commit that
		 * fails comes back here, which marks the lines first. */
		const struct host_backend *hb = r->j->hb;
		int64_t id0 = r->p->id;
		int txn = newoff > r->offset, failed = 0;
		char why[256];
		if (txn && hb->begin(r->j) == -1) {
			hb->error(r->j, why, sizeof(why));
			failed = 1;
			events_commit_failed(r, why);
		} else if (txn)
			hb->undoable(r->j);
		for (int i = 0; i < nl && !failed; i++)
			line_store(r, &lines[i]);
		if (txn && !failed) {
			hb->proc_update(r->j, r->p, newoff);
			if (hb->commit(r->j) == -1) {
				hb->error(r->j, why, sizeof(why));
				r->p->id = id0;
				failed = 1;
				events_commit_failed(r, why);
			}
		}
		if (!failed)
			r->offset = newoff;
		for (int i = 0; i < nl; i++) {
			struct line *L = &lines[i];
			if (!failed && !L->bad && r->spec->on_event && !r->stop &&
			    r->spec->on_event(r->spec->arg, L->type, L->text) != 0)
				r->stop = 1;
			cJSON_Delete(L->o);
			free(L->apath);
		}
		free(lines);
		if (cut || failed)
			break;
	}
	if (fd != r->fd)
		close(fd);
}

int64_t
host_events_read(pl_job *j, struct proc *p, const struct pl_spawn *spec, int64_t offset,
    struct pl_exit *out)
{
	struct evreader r = { .j = j, .p = p, .fd = -1, .spec = spec, .offset = offset,
		.out = out };
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
	if (j->memcap_dir[0] && !j->adopted &&
	    asprintf(&env[k++], "PL_MEMCAP_DIR=%s", j->memcap_dir) < 0)
		fatal("build_env");
	/* A stage process writes its events to descriptor 3 (shim -e). */
	if (j->stage_proc && p->rdir[0] && (env[k++] = strdup("PL_EVENTS_FD=3")) == NULL)
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

/* A process's row, committed on its own (where nothing is stored,
 * nothing). */
static void
proc_save(pl_job *j, struct proc *p, int64_t offset)
{
	j->hb->begin(j);
	j->hb->proc_update(j, p, offset);
	j->hb->commit(j);
}

/* A process's struct proc before it starts: where it runs (in the
 * daemon, through its run's shim), its directory (below the attempt's,
 * or by hand below the work directory's .pl) and log. */
static int
proc_open_as(void *arg, const char *path)
{
	return job_open_as(arg, path);
}

static void
proc_init(pl_job *j, const struct pl_spawn *spec, struct proc *p)
{
	memset(p, 0, sizeof(*p));
	/* Under Slurm the shim's records are in the process directory, a
	 * run owner's: read through the owner's file server when the
	 * daemon's own open is refused, as the events are. */
	if (j->hb->daemon && j->jobdirfd >= 0) {
		p->open_as = proc_open_as;
		p->open_arg = j;
	}
	p->ex = j->ex;
	p->pidfd = -1;
	p->run = j->hb->daemon ? j->run : NULL;
	/* A re-adopted job's group is its process's of before the restart,
	 * only to be removed (stagerun.c): a process started again gets none. */
	p->cgroup = j->hb->daemon && j->memcap_dir[0] && !j->adopted ? j->memcap_dir : NULL;
	p->opts = j->ex_opts;
	snprintf(p->log, sizeof(p->log), "%s", j->logpath[0] ? j->logpath : "/dev/stderr");
	if (j->hb->daemon)
		snprintf(p->dir, sizeof(p->dir), "%s/attempt-%d/%s", j->jobdir, j->attempt, spec->name);
	else
		snprintf(p->dir, sizeof(p->dir), "%s/.pl/%s", j->workdir, spec->name);
	/* The shim's records: the daemon's own beside the job's directory
	 * (exec.h); by hand, and under a batch system, the process
	 * directory itself. */
	if (j->hb->daemon && p->ex == &exec_local)
		proc_records_dir(p->dir, p->rdir, sizeof(p->rdir));
	p->attempt_id = j->attempt_id;
	snprintf(p->name, sizeof(p->name), "%s", spec->name);
	p->started = now_wall();
}

/* The process's row: found (started before: *found is 1, and *done when
 * it has ended, with out filled and the result returned), or inserted
 * now when its row comes first (row_first). PL_OK or PL_EIO. */
static int
proc_row_find(pl_job *j, const struct pl_spawn *spec, struct proc *p, struct evreader *r,
    struct pl_exit *out, int row_first, int *found, int *done)
{
	struct proc_row row;

	*found = *done = 0;
	if (j->has_final && strcmp(j->final.name, spec->name) == 0) {
		/* The same name again in this attempt: its row first, so that
		 * the lookup below finds it, as for any ended process. */
		proc_save(j, &j->final, j->final_offset);
		j->has_final = 0;
	}
	/* A row to find: the job was re-entered, or it spawned before in
	 * this attempt (a fresh attempt's first spawn has none). */
	int may_have_row = j->adopted || j->nspawned > 0;
	j->nspawned++;
	*found = may_have_row && j->hb->proc_find(j, spec->name, &row) == 0;
	if (*found) {
		/* Re-entered after a restart: this process was started before. */
		p->id = row.id;
		p->pid = row.pid;
		p->starttime = row.starttime;
		snprintf(p->ext_id, sizeof(p->ext_id), "%s", row.ext_id);
		p->state = row.state;
		r->offset = row.events_offset;
		if (j->adopted)
			quota_recount(j, p, row.events_offset);
		const struct executor *ex = exec_find(row.executor);
		if (ex != NULL)
			p->ex = ex;
		if (p->ex != &exec_local)
			p->rdir[0] = '\0';
		if (row.state == PROC_ENDED || row.state == PROC_LOST) {
			out->exited = row.exited;
			out->status = row.status;
			out->signal = row.sig;
			out->adopted = 1;
			*done = 1;
			return row.state == PROC_LOST ? PL_ELOST : PL_OK;
		}
	} else if (row_first) {
		if (j->hb->begin(j) == -1)
			return PL_EIO;
		if (j->hb->proc_insert(j, spec->name, p->ex->name, p->dir, &p->id) == -1) {
			j->hb->rollback(j);
			return PL_EIO;
		}
		j->hb->commit(j);
	}
	return PL_OK;
}

/* The shim's command line for spec's program: -d DIR [-r RDIR] -l LOG
 * -c CWD [-u OWNER] -- ARGV. */
static char **
shim_argv(pl_job *j, const struct pl_spawn *spec, const struct proc *p, const char *cwd)
{
	int na = 0;
	while (spec->argv[na])
		na++;
	char shim[PATH_MAX];
	conf_shim_path(j->conf, shim, sizeof(shim));
	char **argv = xcalloc((size_t)na + 16, sizeof(char *));
	int k = 0;
	argv[k++] = xstrdup(shim);
	argv[k++] = xstrdup("-d");
	argv[k++] = xstrdup(p->dir);
	if (p->rdir[0]) {
		argv[k++] = xstrdup("-r");
		argv[k++] = xstrdup(p->rdir);
	}
	argv[k++] = xstrdup("-l");
	argv[k++] = xstrdup(p->log);
	argv[k++] = xstrdup("-c");
	argv[k++] = xstrdup(cwd);
	if (j->owner) {
		argv[k++] = xstrdup("-u");
		argv[k++] = xstrdup(j->owner);
	}
	if (j->stage_proc && p->rdir[0])
		argv[k++] = xstrdup("-e");
	argv[k++] = xstrdup("--");
	for (int i = 0; i < na; i++)
		argv[k++] = xstrdup(spec->argv[i]);
	return argv;
}

/* A local job program's events file, made here in its new process
 * directory (d, the daemon's still) and held open to read, then given to
 * the run's owner with the directory (job_chown_later()): the reader
 * then reads it through that descriptor, with no open per read, and
 * for a run owner no round trip to the owner's file server (a daemon
 * process of its own user cannot reach the owner's directory). The
 * program appends to it by its path; one that puts another file in its
 * place writes where nobody reads. Not for a stage process (its events
 * are in the records directory) nor under a batch executor, whose
 * events another host writes (a file system shared with the nodes
 * shows appends to a path opened again). 0 (made or not), or -1 with
 * errno when the chown is refused. */
static int
events_make(pl_job *j, const struct proc *p, int d, struct evreader *r)
{
	if (j->stage_proc || p->ex != &exec_local || r->fd >= 0)
		return 0;
	/* Not made (a directory the owner already had, from an earlier
	 * spawn of this name): read by its path, as before. */
	int fd = openat(d, "events", O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd == -1)
		return 0;
	if (job_chown_later(j, fd) == -1) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	r->fd = fd;
	return 0;
}

/* Start the process: its directory made (or emptied of an earlier try's
 * records), the shim started through the executor, the row updated with
 * what identifies it. PL_OK, PL_EIO or PL_ECHILD. */
static int
proc_start(pl_job *j, const struct pl_spawn *spec, struct proc *p, struct evreader *r)
{
	struct stat sb;
	int fresh = stat(p->dir, &sb) == -1, dfd;
	/* Below the job's directory, no link is followed (the job may
	 * write there); by hand the directory is the caller's. */
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "attempt-%d/%s", j->attempt, spec->name);
	static const char *const stale[] = { "events", "exit.json", "shim.json", NULL };
	if (j->jobdirfd >= 0) {
		/* Emptied of an earlier try's records, its events file made,
		 * then the owner's, with what waited for it (the work
		 * directory, a context file: job_chown_later()), in one
		 * message. */
		if ((dfd = dirs_make_leaf(j->jobdirfd, rel)) >= 0) {
			for (int i = 0; !fresh && stale[i]; i++)
				unlinkat(dfd, stale[i], 0);
			if (events_make(j, p, dfd, r) == -1 || job_chown_flush(j, dfd) == -1) {
				int e = errno;
				close(dfd);
				dfd = -1;
				errno = e;
			}
		}
	} else {
		dfd = plc_mkdirs(p->dir, 0750) == -1 ? -1 :
		    open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		for (int i = 0; dfd >= 0 && !fresh && stale[i]; i++)
			unlinkat(dfd, stale[i], 0);
	}
	if (dfd == -1) {
		job_log(j, PL_LOG_ERROR, "spawn: cannot make %s: %s", p->dir, strerror(errno));
		return PL_EIO;
	}
	close(dfd);
	if (!fresh)
		marks_clear(r);
	r->marked = 1;   /* a new events file: no mark of an earlier one applies */
	if (p->rdir[0] && j->jobdirfd >= 0) {
		/* The records directory: the daemon's, mode 0700, in the
		 * attempt's directory (the daemon's, mode 0711), so the job can
		 * neither write it nor put another in its place. */
		snprintf(rel, sizeof(rel), "attempt-%d/.shim/%s", j->attempt, spec->name);
		if ((dfd = dirs_make_at(j->jobdirfd, rel, 0700)) == -1) {
			job_log(j, PL_LOG_ERROR, "spawn: cannot make %s: %s", p->rdir, strerror(errno));
			return PL_EIO;
		}
		for (int i = j->stage_proc ? 0 : 1; stale[i]; i++)
			unlinkat(dfd, stale[i], 0);
		close(dfd);
	} else if (p->rdir[0] && plc_mkdirs(p->rdir, 0700) == -1) {
		job_log(j, PL_LOG_ERROR, "spawn: cannot make %s: %s", p->rdir, strerror(errno));
		return PL_EIO;
	}
	char **argv = shim_argv(j, spec, p, r->cwd);
	char **env = build_env(j, p, spec);
	job_logf(j, "spawn %s: %s%s", spec->name, spec->argv[0],
	    spec->resume_from ? " (resuming)" : "");
	int rc = p->ex->start(p, argv, env, r->cwd);
	free_vec(argv);
	free_vec(env);
	if (rc == -1) {
		job_log(j, PL_LOG_ERROR, "spawn %s: could not start the shim%s%s", spec->name,
		    p->reason[0] ? ": " : "", p->reason);
		p->state = PROC_LOST;
		proc_save(j, p, r->offset);
		return PL_ECHILD;
	}
	/* The shim's pid and start time. A run's shim wrote shim.json
	 * before it replied, so a daemon that dies before this is
	 * committed finds them there (local_adopt): no commit of its
	 * own for that case, the next one carries it. */
	if (p->ex != &exec_local || p->child)
		proc_save(j, p, r->offset);
	return PL_OK;
}

/* A batch executor moved the process (queued -> running): its row, a
 * job.proc event and the job's message (status shows why a batch job
 * waits: its pending reason), in one transaction. */
static void
proc_announce_state(pl_job *j, const struct pl_spawn *spec, struct proc *p, struct evreader *r)
{
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "proc", spec->name);
	cJSON_AddStringToObject(d, "state", p->state == PROC_QUEUED ? "queued" : "running");
	if (p->reason[0])
		cJSON_AddStringToObject(d, "reason", p->reason);
	char m[256];
	if (p->state == PROC_QUEUED)
		snprintf(m, sizeof(m), "queued%s%s%s%s", p->ext_id[0] ? " as " : "",
		    p->ext_id, p->reason[0] ? ": " : "", p->reason);
	else
		snprintf(m, sizeof(m), "running%s%s", p->ext_id[0] ? " as " : "", p->ext_id);
	j->hb->begin(j);
	j->hb->proc_update(j, p, r->offset);
	j->hb->event(j, "job.proc", d);
	j->hb->job_state(j, PLJ_running, m);
	j->hb->commit(j);
}

/* How the wait ended: the spawn's own deadline, and when SIGTERM was
 * sent (0: never). */
struct proc_stop {
	double own_deadline;
	double term_at;
};

/* Wait for the process to end, reading its events as they come;
 * cancellation, the job's or the spawn's timeout, or a stage's on_event
 * asking to stop send SIGTERM, then SIGKILL after kill_grace. */
static void
proc_wait(pl_job *j, const struct pl_spawn *spec, struct proc *p, struct evreader *r,
    struct proc_stop *st)
{
	double grace = j->conf ? j->conf->kill_grace : 10;
	int killed = 0, last_state = p->state;
	char last_reason[128];

	st->own_deadline = spec->timeout > 0 ? plc_mono_secs() + spec->timeout : 0;
	st->term_at = 0;
	snprintf(last_reason, sizeof(last_reason), "%s", p->reason);
	/* Wake on a write to the process directory (the events file) or on
	 * the process's end (its pidfd, local only); otherwise every 200 ms
	 * for cancellation, timeouts and batch-system states. The inotify
	 * instance is made only once the process has run for 50 ms: closing
	 * one costs the kernel an RCU grace period (~2 ms), more than a short
	 * job itself; until then a 10 ms poll reads the events. */
	int ifd = -1, ino_tried = 0;
	double spawned = plc_mono_secs();
	for (;;) {
		if (!ino_tried && plc_mono_secs() - spawned > 0.05) {
			ino_tried = 1;
			ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
			if (ifd >= 0 && inotify_add_watch(ifd, p->dir,
			    IN_MODIFY | IN_CREATE | IN_MOVED_TO) == -1) {
				close(ifd);
				ifd = -1;
			}
		}
		struct pollfd pf[2];
		int npf = 0;
		if (ifd >= 0)
			pf[npf++] = (struct pollfd){ .fd = ifd, .events = POLLIN };
		if (p->pidfd >= 0)
			pf[npf++] = (struct pollfd){ .fd = p->pidfd, .events = POLLIN };
		int w;
		if (npf > 0) {
			poll(pf, (nfds_t)npf, ino_tried ? 200 : 10);
			char drain[4096];
			while (ifd >= 0 && read(ifd, drain, sizeof(drain)) > 0)
				;
			w = p->ex->wait(p, 0);
		} else {
			w = p->ex->wait(p, 200);
		}
		events_read(r);
		if (w != 0)
			break;
		if ((p->state != last_state || strcmp(p->reason, last_reason) != 0) &&
		    j->hb->daemon) {
			snprintf(last_reason, sizeof(last_reason), "%s", p->reason);
			proc_announce_state(j, spec, p, r);
			last_state = p->state;
		}
		int stop = job_cancelled(j) || r->stop || r->dead ||
		    (st->own_deadline > 0 && plc_mono_secs() > st->own_deadline);
		if (stop && st->term_at == 0) {
			job_logf(j, "stopping %s (SIGTERM)", spec->name);
			p->ex->signal(p, SIGTERM);
			st->term_at = plc_mono_secs();
		} else if (stop && !killed && plc_mono_secs() - st->term_at > grace) {
			job_logf(j, "killing %s (SIGKILL after %gs)", spec->name, grace);
			p->ex->signal(p, SIGKILL);
			killed = 1;
		}
	}
	if (ifd >= 0)
		close(ifd);
}

/* The ended process's row: a local process of a run's job keeps it for
 * the transaction that records the job's end (job_flush_final), any other
 * is saved now (where nothing is stored, both are nothing). Then the
 * executor's hold on it is released. */
static void
proc_end(pl_job *j, struct proc *p, struct evreader *r)
{
	if (p->ex == &exec_local && j->mode == JOB_MODE_RUN) {
		/* An earlier process's row first, on its own. */
		if (j->has_final)
			proc_save(j, &j->final, j->final_offset);
		j->final = *p;
		j->final.pidfd = -1;
		j->final_offset = r->offset;
		j->has_final = 1;
	} else
		proc_save(j, p, r->offset);
	p->ex->release(p);
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}


/* The process's row found or written, the process re-adopted or
 * started, waited for with its events read, its ending recorded and
 * returned. */
int
host_spawn_shim(pl_job *j, const struct pl_spawn *spec, struct pl_exit *out)
{
	if (spec->argv == NULL || spec->argv[0] == NULL || !valid_name(spec->name)) {
		job_log(j, PL_LOG_ERROR, "spawn: bad pl_spawn (name or argv)");
		return PL_EINVAL;
	}
	if (job_cancelled(j))
		return PL_ECANCELED;
	struct proc p;
	proc_init(j, spec, &p);
	struct evreader r = { .j = j, .p = &p, .fd = -1, .spec = spec, .out = out };
	snprintf(r.cwd, sizeof(r.cwd), "%s", spec->cwd ? spec->cwd : j->workdir);
	double t0 = plc_mono_secs();
	/* A local process of a stage that can be re-entered gets no row
	 * before it starts: the shim's shim.json (written before the start is
	 * confirmed) and exit.json are the record until its first events or
	 * its end write one, and a re-entered job reads them (below). Other
	 * stages' jobs are killed, not re-entered, after a restart: their
	 * processes are found by their rows, written first. */
	int row_first = p.ex != &exec_local || j->reg == NULL ||
	    !(j->reg->st->flags & PL_STAGE_ADOPTABLE);
	int found, done;
	int rc = proc_row_find(j, spec, &p, &r, out, row_first, &found, &done);
	if (rc != PL_OK || done)
		return rc;
	/* Re-adopt a process whose row has not ended, or, re-entered with no
	 * row, one whose directory is there: the shim may have started it
	 * before the daemon stopped. One that never started is started now. */
	int adopt = 0;
	struct stat sb;
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
	if (!adopt && (rc = proc_start(j, spec, &p, &r)) != PL_OK)
		return rc;
	pthread_mutex_lock(&j->lock);
	j->cur = &p;
	pthread_mutex_unlock(&j->lock);
	struct proc_stop st;
	proc_wait(j, spec, &p, &r, &st);
	pthread_mutex_lock(&j->lock);
	j->cur = NULL;
	pthread_mutex_unlock(&j->lock);
	proc_end(j, &p, &r);
	rc = job_proc_result(j, spec, &p, st.own_deadline, st.term_at, out);
	out->seconds = plc_mono_secs() - t0;
	if (r.unpublished > 0)
		job_logf(j, "events: %lld line%s of %s not stored or published (types a job "
		    "program does not publish, handed to its stage only; the first \"%s\")",
		    (long long)r.unpublished, r.unpublished == 1 ? "" : "s", spec->name,
		    r.first_unpublished);
	if (r.dead && rc == PL_OK)
		rc = PL_EFAIL;   /* refused: j->refused says why */
	return rc;
}

void
job_flush_final(struct pl_job *j)
{
	if (j->has_final)
		j->hb->proc_update(j, &j->final, j->final_offset);
	j->has_final = 0;
}

/* host->spawn(): the plugin's structs must be of this host's ABI and
 * size; then the job's backend spawns. */
int
host_spawn(pl_job *j, const struct pl_spawn *spec, struct pl_exit *out)
{
	char why[256];
	const char *who = j->reg && j->reg->plugin ? j->reg->plugin->path : "plugin";

	if (plugin_struct_check("struct pl_spawn", spec, sizeof(*spec), why, sizeof(why)) == -1 ||
	    plugin_struct_check("struct pl_exit", out, sizeof(*out), why, sizeof(why)) == -1) {
		job_log(j, PL_LOG_ERROR, "spawn: %s: %s", who, why);
		return PL_EINVAL;
	}
	/* What the host writes starts zeroed, whatever the plugin's struct held. */
	memset(&out->exited, 0, sizeof(*out) - offsetof(struct pl_exit, exited));
	return j->hb->spawn(j, spec, out);
}
