/* job.c: a struct pl_job's life (job_new, job_free) and what both host.c
 * and host_spawn.c do with it: the job log, host->log(), cancellation and
 * timeouts, an event printed by hand (pipelinectl stage), an artifact's
 * digest (read as the run's owner would: through the owner's file server
 * in a split daemon, priv.h's owner_files_open()), and the host
 * backend's functions where nothing is stored (job_none_*). Below
 * host_spawn.c and host.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pld.h"
#include "host.h"
#include "priv.h"
#include "plio.h"

struct pl_job *
job_new(int mode, const struct host_backend *hb, const struct stage_reg *reg,
    const struct spec *spec, const struct spec_section *sec)
{
	struct pl_job *j = xcalloc(1, sizeof(*j));
	j->mode = mode;
	j->hb = hb;
	j->reg = reg;
	j->spec = spec;
	j->sec = sec;
	j->attempt = 1;
	j->ex = &exec_local;
	j->out = stderr;
	j->logfd = -1;
	j->jobdirfd = -1;
	j->evfd = -1;
	pthread_mutex_init(&j->lock, NULL);
	pthread_mutex_init(&j->files_lock, NULL);
	if (spec)
		snprintf(j->run, sizeof(j->run), "%s", spec->name);
	if (sec)
		snprintf(j->name, sizeof(j->name), "%s", sec->name);
	return j;
}

static void job_files_drop(pl_job *j);

/* Whether fd is the owner's already (uid and gid), where j has one. */
static int
chown_needed(pl_job *j, int fd, uid_t *uid, gid_t *gid)
{
	struct stat st;
	if (j->owner == NULL || owner_ids(j->owner, uid, gid) == -1)
		return 0;
	return fstat(fd, &st) == -1 || st.st_uid != *uid || st.st_gid != *gid;
}

int
job_chown_later(pl_job *j, int fd)
{
	uid_t uid;
	gid_t gid;
	if (!chown_needed(j, fd, &uid, &gid))
		return 0;
	int d = -1;
	if (priv_active() && j->nchown < (int)(sizeof(j->chown_fds) / sizeof(j->chown_fds[0])))
		d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (d == -1)
		return priv_fchown(fd, uid, gid);
	j->chown_fds[j->nchown++] = d;
	return 0;
}

int
job_chown_flush(pl_job *j, int fd)
{
	uid_t uid;
	gid_t gid;
	int fds[PRIV_FCHOWN_FDS], n = 0, rc = 0, e = 0;
	_Static_assert(sizeof(j->chown_fds) / sizeof(j->chown_fds[0]) == PRIV_FCHOWN_FDS - 1,
	    "chown_fds holds all but the process directory");
	for (int i = 0; i < j->nchown; i++)
		fds[n++] = j->chown_fds[i];
	if (fd >= 0 && chown_needed(j, fd, &uid, &gid))
		fds[n++] = fd;
	if (n > 0 && owner_ids(j->owner, &uid, &gid) == 0 &&
	    (rc = priv_fchown_fds(fds, n, uid, gid)) == -1)
		e = errno;
	for (int i = 0; i < j->nchown; i++)
		close(j->chown_fds[i]);
	j->nchown = 0;
	errno = e;
	return rc;
}

int
job_proc_result(pl_job *j, const struct pl_spawn *spec, const struct proc *p,
    double own_deadline, double term_at, struct pl_exit *out)
{
	if (p->end_class[0]) {
		/* A batch system's verdict (timeout, oom, preempted, node_fail,
		 * cancelled) is what operators need to see first. */
		char e[sizeof(out->error)];
		snprintf(e, sizeof(e), "%s: %s%s%s", p->ex->name, p->end_class,
		    out->error[0] ? "; " : "", out->error);
		snprintf(out->error, sizeof(out->error), "%s", e);
		job_logf(j, "%s ended as %s", spec->name, p->end_class);
	}
	out->exited = p->exited;
	out->status = p->status;
	out->signal = p->sig;
	if (p->state == PROC_LOST) {
		job_log(j, PL_LOG_ERROR, "%s: the process vanished without an exit record (%s)",
		    spec->name, p->reason[0] ? p->reason : "shim gone");
		return PL_ELOST;
	}
	if (own_deadline > 0 && plc_mono_secs() > own_deadline && term_at > 0)
		return PL_ETIMEDOUT;
	if (job_cancelled(j) && term_at > 0)
		return j->timed_out ? PL_ETIMEDOUT : PL_ECANCELED;
	return PL_OK;
}

void
job_free(struct pl_job *j)
{
	if (j == NULL)
		return;
	for (int i = 0; i < j->nchown; i++)
		close(j->chown_fds[i]);
	for (int i = 0; i < j->npool; i++)
		free(j->pool[i]);
	free(j->pool);
	free(j->ex_opts);
	if (j->logfd >= 0)
		close(j->logfd);
	if (j->jobdirfd >= 0)
		close(j->jobdirfd);
	if (j->evfd >= 0)
		close(j->evfd);
	cJSON_Delete(j->ctx);
	free(j->quota_ids);
	pthread_mutex_destroy(&j->lock);
	job_files_drop(j);
	pthread_mutex_destroy(&j->files_lock);
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
	if (j->mode == JOB_MODE_PLAN)
		return; /* a plan runs nothing: no log */
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

void
job_log(pl_job *j, int level, const char *fmt, ...)
{
	char msg[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	static const char *const lv[] = { "error", "warning", "info", "debug" };
	if (level == PL_LOG_DEBUG && log_getlevel() < LOG_LVL_DEBUG && j->hb->daemon)
		return;
	job_logf(j, "%s: %s", lv[level < 0 || level > 3 ? 2 : level], msg);
	if (j->hb->daemon && level <= PL_LOG_WARN && j->mode != JOB_MODE_PLAN)
		log_warnx("%s/%s: %s", j->run, j->name, msg);
}

int
job_cancelled(pl_job *j)
{
	if (j->cancel)
		return 1;
	if (j->deadline > 0 && plc_mono_secs() > j->deadline) {
		j->timed_out = 1;
		return 1;
	}
	return 0;
}

/* Where nothing is stored (by hand, a stage process, whose events file
 * is the record), a transaction and a process's row are nothing: no
 * row is found, every write succeeds. */
int
job_none_txn(pl_job *j)
{
	return 0;
}

void
job_none_void(pl_job *j)
{
}

int
job_none_error(pl_job *j, char *msg, size_t len)
{
	if (len > 0)
		msg[0] = '\0';
	return 0;
}

int
job_none_metric(pl_job *j, const char *name, int64_t step, double value)
{
	return 0;
}

int
job_none_proc_find(pl_job *j, const char *name, struct proc_row *row)
{
	return -1;
}

int
job_none_proc_insert(pl_job *j, const char *name, const char *executor, const char *dir,
    int64_t *id)
{
	return 0;
}

int
job_none_proc_update(pl_job *j, struct proc *p, int64_t events_offset)
{
	return 0;
}

int
job_none_job_state(pl_job *j, enum pl_job_state state, const char *message)
{
	return 0;
}

/* By hand, events are printed as JSON lines or as text. */
void
job_print_event(pl_job *j, const char *type, cJSON *d)
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

static int
artifact_stop(void *arg)
{
	return job_cancelled(arg);
}

/* Each file an artifact's hash read whole: the backend's to keep. */
static void
artifact_hashed(void *arg, const char *path, const struct stat *sb, const struct stat *after,
    const char hex[65])
{
	pl_job *j = arg;
	j->hb->digest_keep(j, path, sb, after, hex);
}

void
job_none_digest_keep(pl_job *j, const char *path, const struct stat *sb,
    const struct stat *after, const char *hex)
{
	(void)j, (void)path, (void)sb, (void)after, (void)hex;
}

/* A run owner's files for j, under j->files_lock: the job's file server
 * (kept in j->files: one a job, not one a read; an idle one of the
 * owner's, left by an earlier job, before a new one: priv.c) where there
 * is one to ask, else own (the daemon's own calls, with owner_fs_enter(); the
 * caller closes it); NULL, errno set, when neither can be had. */
static struct owner_files *
job_files_get(pl_job *j, struct owner_files *own)
{
	if (j->files != NULL)
		return j->files;
	if (owner_files_open(own, j->owner) == -1)
		return NULL;
	if (own->fs == NULL)
		return own;
	j->files = xcalloc(1, sizeof(*j->files));
	owner_files_move(j->files, own);
	return j->files;
}

/* The job's file server closed and forgotten: at the job's end, kept
 * idle for the owner's next job; a server gone (EIO: its owner may end
 * it) is ended instead (owner_files_close()), and the next read takes or
 * starts another. */
static void
job_files_drop(pl_job *j)
{
	if (j->files == NULL)
		return;
	owner_files_close(j->files);
	free(j->files);
	j->files = NULL;
}

int
job_open_as(pl_job *j, const char *path)
{
	struct owner_files own, *of;
	int fd = -1, e = EACCES;
	pthread_mutex_lock(&j->files_lock);
	if ((of = job_files_get(j, &own)) == NULL)
		e = errno;
	else if (of == &own)
		owner_files_close(&own);	/* no server: the caller's open stands */
	else {
		fd = of->fs->openat(of->fs->arg, AT_FDCWD, path, 0, 0);
		e = errno;
		/* As file_open_at(): not another name of a file elsewhere. */
		struct stat st;
		if (fd >= 0 && (fstat(fd, &st) == -1 || st.st_nlink > 1)) {
			e = EMLINK;
			close(fd);
			fd = -1;
		}
		if (fd == -1 && e == EIO)
			job_files_drop(j);
	}
	pthread_mutex_unlock(&j->files_lock);
	errno = e;
	return fd;
}

int
job_artifact_refused(int err)
{
	return err == ELOOP || err == EINVAL || err == EFBIG;
}

/* The artifact's absolute path with the links above its last component
 * resolved, not the last one itself: a link there is refused, not taken
 * for what it points at. */
static char *
artifact_abs(struct owner_files *of, const char *p)
{
	const char *slash = strrchr(p, '/');
	char *dir, *base, *r;
	if (slash == NULL) {
		dir = xstrdup(".");
		base = xstrdup(p);
	} else {
		dir = slash == p ? xstrdup("/") : strndup(p, (size_t)(slash - p));
		base = xstrdup(slash + 1);
	}
	char *rd = dir != NULL ? owner_files_realpath(of, dir) : NULL;
	if (rd == NULL || *base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		r = rd != NULL && *base == '\0' ? xstrdup(rd) : rd != NULL ? owner_files_realpath(of, p) :
		    NULL;
	else if (asprintf(&r, "%s%s%s", rd, strcmp(rd, "/") == 0 ? "" : "/", base) == -1)
		fatal("asprintf");
	int e = errno;
	free(rd);
	free(dir);
	free(base);
	errno = e;
	return r;
}

int
job_artifact_as(pl_job *j, const char *cwd, const char *path, uint64_t max, char **abs,
    uint64_t *size, char hex[65], char *why, size_t whylen)
{
	struct owner_files own, *of;
	struct stat st;
	int rc = -1;
	*abs = NULL;
	why[0] = '\0';
	pthread_mutex_lock(&j->files_lock);
	if ((of = job_files_get(j, &own)) == NULL) {
		pthread_mutex_unlock(&j->files_lock);
		snprintf(why, whylen, "%s: cannot take its owner's rights: %s", path,
		    strerror(errno));
		return -1;
	}
	char *p = path_resolve(cwd, path);
	*abs = artifact_abs(of, p);
	free(p);
	/* Bounded and interruptible: a FIFO or a device is refused before
	 * it is opened, the size is capped, and cancel and the job's timeout
	 * stop it between chunks. */
	struct plc_hash_ctl ctl = { .max = max, .stop = artifact_stop, .arg = j,
	    .hashed = artifact_hashed, .hashed_arg = j, .fs = of->fs };
	if (*abs == NULL)
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
	else if (hex != NULL) {
		rc = plc_sha256_path_ctl(*abs, hex, size, &ctl);
		snprintf(why, whylen, "%s", ctl.why);
	} else if (of->fs != NULL) {
		/* Sized through the owner's file server, by the hash's rules. */
		rc = plc_tree_bytes_ctl(*abs, size, &ctl);
		snprintf(why, whylen, "%s", ctl.why);
	} else if (lstat(*abs, &st) == -1)
		snprintf(why, whylen, "%s: %s", *abs, strerror(errno));
	else if (S_ISDIR(st.st_mode)) {
		if ((rc = plc_tree_bytes(*abs, size)) == -1)
			snprintf(why, whylen, "%s: %s", *abs, strerror(errno));
	} else if (S_ISREG(st.st_mode)) {
		*size = (uint64_t)st.st_size;
		rc = 0;
	} else {
		snprintf(why, whylen, "%s: %s, not a regular file or a directory: refused", *abs,
		    S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISFIFO(st.st_mode) ? "a FIFO" :
		    "a device or socket");
		errno = S_ISLNK(st.st_mode) ? ELOOP : EINVAL;
	}
	int e = errno;
	/* A server gone (EIO: its owner may end it) is started again for
	 * the next artifact. */
	if (of == &own)
		owner_files_close(&own);
	else if (rc == -1 && e == EIO)
		job_files_drop(j);
	pthread_mutex_unlock(&j->files_lock);
	if (rc == -1) {
		free(*abs);
		*abs = NULL;
	}
	errno = e;
	return rc;
}
