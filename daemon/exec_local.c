/* exec_local.c: the local executor. In the daemon the shim is forked by
 * the zygote (one long-lived `pipeline-shim -Z`, see shim.c: a fork there
 * costs a tenth of executing the shim); elsewhere, or when the zygote
 * cannot be had, the shim is spawned as the daemon's child. Either way it
 * puts itself in a session of its own and is watched through a pidfd; a
 * restarted daemon re-adopts it by pid, checked against the start time
 * recorded when it was spawned, so a recycled pid is never mistaken for
 * the shim. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pipelined.h"

static int
pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int
shim_ready(const struct proc *p)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/shim.json", p->dir);
	return access(path, F_OK) == 0;
}

/* ---- the zygote ----------------------------------------------------- */

extern char **environ;

static pthread_mutex_t zmtx = PTHREAD_MUTEX_INITIALIZER;
static int zenabled;
static int zfd = -1;
static pid_t zpid = -1;
static char zpath[PATH_MAX];

void
exec_local_zygote(int on)
{
	pthread_mutex_lock(&zmtx);
	zenabled = on;
	if (!on && zfd >= 0) {
		close(zfd); /* the zygote exits on EOF */
		zfd = -1;
		waitpid(zpid, NULL, 0);
		zpid = -1;
	}
	pthread_mutex_unlock(&zmtx);
}

static void
zygote_stop(void)
{
	if (zfd >= 0)
		close(zfd);
	zfd = -1;
	if (zpid > 0) {
		kill(zpid, SIGKILL);
		waitpid(zpid, NULL, 0);
	}
	zpid = -1;
}

static int
zygote_start(const char *shim)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		log_warn("%s: socketpair", __func__);
		return -1;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, sv[1], 3); /* dup2 clears CLOEXEC */
	char *const argv[] = { (char *)shim, "-Z", "3", NULL };
	pid_t pid;
	int rc = posix_spawn(&pid, shim, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(sv[1]);
	if (rc != 0) {
		errno = rc;
		log_warn("%s: %s", __func__, shim);
		close(sv[0]);
		return -1;
	}
	zfd = sv[0];
	zpid = pid;
	snprintf(zpath, sizeof(zpath), "%s", shim);
	return 0;
}

/* One request: 0 with p filled in, 1 when the zygote refused it (fall
 * back to exec), -1 when the zygote is gone. */
static int
zygote_spawn(struct proc *p, char *const argv[], char *const envp[])
{
	uint32_t ac = 0, ec = 0;
	size_t len = 8;
	for (; argv[ac]; ac++)
		len += strlen(argv[ac]) + 1;
	for (; envp[ec]; ec++)
		len += strlen(envp[ec]) + 1;
	char *buf = xcalloc(1, len), *o = buf + 8;
	memcpy(buf, &ac, 4);
	memcpy(buf + 4, &ec, 4);
	for (uint32_t i = 0; i < ac; i++)
		o = stpcpy(o, argv[i]) + 1;
	for (uint32_t i = 0; i < ec; i++)
		o = stpcpy(o, envp[i]) + 1;
	ssize_t n;
	while ((n = send(zfd, buf, len, MSG_NOSIGNAL)) == -1 && errno == EINTR)
		;
	free(buf);
	if (n == -1)
		return errno == EMSGSIZE ? 1 : -1;
	struct { int32_t pid; int32_t err; uint64_t start; } r;
	struct iovec iov = { .iov_base = &r, .iov_len = sizeof(r) };
	union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } c;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = c.buf, .msg_controllen = sizeof(c.buf) };
	while ((n = recvmsg(zfd, &m, MSG_CMSG_CLOEXEC)) == -1 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(r))
		return -1;
	int pidfd = -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&pidfd, CMSG_DATA(cm), sizeof(int));
	if (r.pid <= 0) {
		errno = r.err;
		log_warn("zygote: could not start %s", argv[0]);
		return 1;
	}
	p->pid = r.pid;
	p->starttime = r.start;
	p->pidfd = pidfd;
	p->state = PROC_RUNNING;
	return 0;
}

static int
zygote_try(struct proc *p, char *const argv[], char *const envp[])
{
	pthread_mutex_lock(&zmtx);
	int rc = 1;
	for (int tries = 0; zenabled && tries < 2; tries++) {
		if (zfd >= 0 && strcmp(zpath, argv[0]) != 0)
			zygote_stop(); /* the configured shim changed */
		if (zfd < 0 && zygote_start(argv[0]) == -1)
			break;
		rc = zygote_spawn(p, argv, envp);
		if (rc >= 0)
			break;
		log_warnx("the shim zygote (pid %d) is gone; starting another", (int)zpid);
		zygote_stop();
		rc = 1;
	}
	pthread_mutex_unlock(&zmtx);
	return rc;
}

static int
local_start(struct proc *p, char *const argv[], char *const envp[], const char *cwd)
{
	if (zygote_try(p, argv, envp) == 0)
		return 0;
	pid_t pid;
	int rc = posix_spawn(&pid, argv[0], NULL, NULL, argv, envp);
	if (rc != 0) {
		errno = rc;
		log_warn("%s: %s", __func__, argv[0]);
		return -1;
	}
	p->pid = pid;
	p->starttime = proc_starttime(pid);
	p->pidfd = pidfd_open_(pid);
	p->state = PROC_RUNNING;
	return 0;
}

static int
local_adopt(struct proc *p)
{
	if (p->pid <= 0 || p->starttime == 0) {
		/* Crashed between writing the row and starting: look at what
		 * the shim recorded, if it ever ran. */
		if (proc_read_shim(p, NULL, NULL) == -1) {
			if (proc_read_exit(p) == 1)
				return 0;
			p->state = PROC_STARTING;
			return 0;
		}
	}
	int fd = pidfd_open_(p->pid);
	if (fd >= 0 && proc_starttime(p->pid) == p->starttime) {
		p->pidfd = fd;
		p->state = PROC_RUNNING;
		return 0;
	}
	if (fd >= 0)
		close(fd);
	if (proc_read_exit(p) == 0) {
		p->state = PROC_LOST;
		snprintf(p->reason, sizeof(p->reason), "shim %d gone, no exit record", (int)p->pid);
	}
	return 0;
}

static int
local_wait(struct proc *p, int timeout_ms)
{
	if (p->pid > 0 && p->pidfd >= 0) {
		struct pollfd pfd = { .fd = p->pidfd, .events = POLLIN };
		int n = poll(&pfd, 1, timeout_ms);
		if (n == 0)
			return 0;
		if (n < 0 && errno == EINTR)
			return 0;
	} else if (p->pid > 0) {
		/* No pidfd (old kernel): poll the pid. */
		if (kill(p->pid, 0) == 0 && proc_starttime(p->pid) == p->starttime) {
			usleep((useconds_t)timeout_ms * 1000);
			return 0;
		}
	}
	if (p->pid > 0)
		waitpid(p->pid, NULL, WNOHANG); /* our child unless adopted */
	if (proc_read_exit(p) == 0) {
		p->state = PROC_LOST;
		snprintf(p->reason, sizeof(p->reason), "shim ended without an exit record");
	}
	return 1;
}

static int
local_signal(struct proc *p, int sig)
{
	pid_t child = 0, pgid = 0;
	/* Right after the start the shim may not have recorded the child's
	 * process group yet: give it a moment, as long as it lives. */
	for (int i = 0; i < 200 && !shim_ready(p) && p->pid > 0 && kill(p->pid, 0) == 0; i++)
		usleep(5000);
	if (proc_read_shim(p, &child, &pgid) == 0 && pgid > 0)
		return kill(-pgid, sig);
	return p->pid > 0 ? kill(p->pid, sig) : -1;
}

static void
local_release(struct proc *p)
{
	if (p->pidfd >= 0)
		close(p->pidfd);
	p->pidfd = -1;
}

const struct executor exec_local = {
	.name = "local",
	.start = local_start,
	.adopt = local_adopt,
	.wait = local_wait,
	.signal = local_signal,
	.release = local_release,
};
