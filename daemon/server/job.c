/* job.c: a struct pl_job's life (job_new, job_free) and what both host.c
 * and host_spawn.c do with it: the job log, host->log(), cancellation and
 * timeouts, an event printed by hand (pipelinectl stage), an artifact's
 * digest. Below host_spawn.c and host.c. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipelined.h"
#include "plio.h"

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
	j->evfd = -1;
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
	if (j->evfd >= 0)
		close(j->evfd);
	cJSON_Delete(j->ctx);
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

void
job_log(pl_job *j, int level, const char *fmt, ...)
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

/* Digest a file or a directory. */
int
job_digest(const char *path, char hex[65], uint64_t *size)
{
	struct stat st;
	if (stat(path, &st) == -1)
		return -1;
	if (S_ISDIR(st.st_mode))
		return plc_sha256_dir(path, hex, size);
	*size = (uint64_t)st.st_size;
	return plc_sha256_file(path, hex);
}

int
job_artifact_as(const pl_job *j, const char *cwd, const char *path, char **abs,
    uint64_t *size, char hex[65])
{
	struct owner_fs save;
	struct stat st;
	int as = owner_fs_enter(j->owner, &save), rc = -1;
	*abs = NULL;
	if (as == -1)
		return -1;
	char *p = cwd != NULL ? path_resolve(cwd, path) : xstrdup(path);
	*abs = realpath(p, NULL);
	free(p);
	if (*abs == NULL)
		;
	else if (hex != NULL)
		rc = job_digest(*abs, hex, size);
	else if (stat(*abs, &st) == -1)
		;
	else if (S_ISDIR(st.st_mode))
		rc = plc_tree_bytes(*abs, size);
	else if (S_ISREG(st.st_mode)) {
		*size = (uint64_t)st.st_size;
		rc = 0;
	} else
		errno = EINVAL;   /* neither a file nor a directory */
	int e = errno;
	if (as == 1)
		owner_fs_leave(&save);
	if (rc == -1) {
		free(*abs);
		*abs = NULL;
	}
	errno = e;
	return rc;
}
