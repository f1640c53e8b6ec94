/* exec_local.c: the local executor. The shim is spawned as the daemon's
 * child (it puts itself in a session of its own) and watched through a
 * pidfd; a restarted daemon re-adopts it by pid, checked against the start
 * time recorded when it was spawned, so a recycled pid is never mistaken
 * for the shim. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
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

static int
local_start(struct proc *p, char *const argv[], char *const envp[], const char *cwd)
{
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
