/* shimfiles.c: what the daemon and a shim exchange, for every executor:
 * the files the shim leaves behind (read from its records directory,
 * exec.h), the request that carries a process's command line and
 * environment, and the environment a shim is started with. A record that
 * cannot be opened for want of a descriptor (EMFILE, ENFILE) is not a
 * missing record: one descriptor is held in reserve for reading it, and
 * the read is retried. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pld.h"
#include "executor.h"
#include "plio.h"

/* A shim needs nothing of an environment: the job's is data it is sent
 * (shim_request_fd()), applied in the child once it has become the job's
 * user. So a preloaded library, a locale or a malloc setting of the job's
 * never reaches a process of root's. */
char *const shim_clean_env[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };

int
shim_request_fd(char *const argv[], char *const envp[], size_t *len)
{
	uint32_t ac = 0, ec = 0;
	size_t n = 8;
	for (; argv[ac]; ac++)
		n += strlen(argv[ac]) + 1;
	for (; envp && envp[ec]; ec++)
		n += strlen(envp[ec]) + 1;
	*len = n;
	if (n > SHIM_REQ_MAX) {
		errno = E2BIG;
		return -1;
	}
	int fd = memfd_create("pipeline-shim-request", MFD_CLOEXEC);
	if (fd == -1)
		return -1;
	char *buf = malloc(n), *o = buf + 8;
	if (buf == NULL) {
		close(fd);
		errno = ENOMEM;
		return -1;
	}
	memcpy(buf, &ac, 4);
	memcpy(buf + 4, &ec, 4);
	for (uint32_t i = 0; i < ac; i++)
		o = stpcpy(o, argv[i]) + 1;
	for (uint32_t i = 0; i < ec; i++)
		o = stpcpy(o, envp[i]) + 1;
	int rc = plc_write_all(fd, buf, n);
	int e = errno;
	free(buf);
	if (rc == -1) {
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

pid_t
shim_spawn_fd(const char *shim, const char *pin, const char *opt, int fd)
{
	return shim_spawn_owned(shim, pin, (uid_t)-1, opt, fd);
}

pid_t
shim_spawn_owned(const char *shim, const char *pin, uid_t rowner, const char *opt, int fd)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, 3); /* dup2 clears CLOEXEC */
	/* No signal blocked in the shim (the privileged parent blocks those
	 * its signalfd reads). */
	posix_spawnattr_t at;
	sigset_t none;
	sigemptyset(&none);
	posix_spawnattr_init(&at);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
	char ro[16];
	snprintf(ro, sizeof(ro), "%u", (unsigned)rowner);
	char *argv[8];
	int n = 0;
	argv[n++] = (char *)shim;
	if (pin != NULL) {
		argv[n++] = "-u";
		argv[n++] = (char *)pin;
	}
	if (rowner != (uid_t)-1 && rowner != 0) {
		argv[n++] = "-o";
		argv[n++] = ro;
	}
	argv[n++] = (char *)opt;
	argv[n++] = "3";
	argv[n] = NULL;
	pid_t pid;
	int rc = posix_spawn(&pid, shim, &fa, &at, argv, shim_clean_env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (rc != 0) {
		errno = rc;
		return -1;
	}
	return pid;
}

void
proc_records_dir(const char *dir, char *out, size_t len)
{
	const char *slash = strrchr(dir, '/');
	if (slash == NULL)
		snprintf(out, len, ".shim/%s", dir);
	else
		snprintf(out, len, "%.*s/.shim/%s", (int)(slash - dir), dir, slash + 1);
}

static pthread_mutex_t reserve_mtx = PTHREAD_MUTEX_INITIALIZER;
static int reserve_fd = -1;

/* Hold the reserve descriptor (at start, and after each use). */
void
proc_reserve_fd(void)
{
	pthread_mutex_lock(&reserve_mtx);
	if (reserve_fd == -1)
		reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	pthread_mutex_unlock(&reserve_mtx);
}

/* A record is opened without following a link, as a regular file of one
 * link: under Slurm it lies in the job's directory. */
static char *
read_nofollow(const struct proc *p, const char *path)
{
	int fd = file_open_at(AT_FDCWD, path, O_RDONLY, 0);
	if (fd == -1 && errno == EACCES && p->open_as != NULL && p->ex != NULL && p->ex->batch)
		fd = p->open_as(p->open_arg, path);
	if (fd == -1)
		return NULL;
	char *t = plc_read_fd(fd, NULL, 1 << 20);
	int e = errno;
	close(fd);
	errno = e;
	return t;
}

/* Read a record; NULL with errno ENOENT when there is none. Out of
 * descriptors, the reserve is given up for the read and taken again; a
 * thread that lost the freed slot to another waits and tries again, for
 * up to 10 s. */
static char *
read_record(const struct proc *p, const char *path)
{
	for (int tries = 0;; tries++) {
		char *t = read_nofollow(p, path);
		if (t != NULL || (errno != EMFILE && errno != ENFILE))
			return t;
		pthread_mutex_lock(&reserve_mtx);
		if (reserve_fd != -1) {
			close(reserve_fd);
			reserve_fd = -1;
			t = read_nofollow(p, path);
			int e = errno;
			reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			errno = e;
		}
		pthread_mutex_unlock(&reserve_mtx);
		if (t != NULL || (errno != EMFILE && errno != ENFILE))
			return t;
		if (tries == 0)
			log_warnx("%s: %s: out of descriptors; retrying", __func__, path);
		if (tries == 1000) {
			log_warn("%s: %s: giving up", __func__, path);
			return NULL;
		}
		usleep(10000);
	}
}

static cJSON *
read_json(const struct proc *p, const char *name)
{
	/* No link followed: RDIR is DIR by hand and under Slurm. */
	const char *dir = p->rdir[0] ? p->rdir : p->dir;
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	char *t = read_record(p, path);
	if (t == NULL) {
		if (errno != ENOENT)
			log_warn("%s: %s", __func__, path);
		return NULL;
	}
	cJSON *o = cJSON_Parse(t);
	free(t);
	if (o != NULL && !cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static int
num(const cJSON *o, const char *k, int def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? v->valueint : def;
}

int
proc_read_exit(struct proc *p)
{
	cJSON *o = read_json(p, "exit.json");
	if (o == NULL)
		return 0;
	p->exited = num(o, "exited", 0);
	p->status = num(o, "status", 0);
	p->sig = num(o, "signal", 0);
	p->state = PROC_ENDED;
	cJSON_Delete(o);
	return 1;
}

int
proc_read_shim(struct proc *p, pid_t *child_pid, pid_t *pgid, uint64_t *child_start)
{
	cJSON *o = read_json(p, "shim.json");
	if (o == NULL)
		return -1;
	if (child_pid)
		*child_pid = num(o, "child_pid", 0);
	if (pgid)
		*pgid = num(o, "pgid", 0);
	const cJSON *cs = cJSON_GetObjectItemCaseSensitive(o, "child_start");
	if (child_start)
		*child_start = cJSON_IsNumber(cs) ? (uint64_t)cs->valuedouble : 0;
	if (p->pid <= 0)
		p->pid = num(o, "shim_pid", 0);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "shim_start");
	if (p->starttime == 0 && cJSON_IsNumber(st))
		p->starttime = (uint64_t)st->valuedouble;
	cJSON_Delete(o);
	return 0;
}

/* The owner a shim command line's -u names (before "--"), or "". */
const char *
argv_owner(char *const argv[])
{
	for (int i = 1; argv[i] && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "-u") == 0 && argv[i + 1])
			return argv[i + 1];
	return "";
}
