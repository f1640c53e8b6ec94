/* exec_local.c: the local executor. In the daemon every process of a run
 * is started by the run's shim (one long-lived `pipeline-shim -G` per run,
 * see shim.c: executing a shim per process cost more than a short job);
 * elsewhere (pipelinectl stage) a shim of its own (`pipeline-shim -R`) is
 * spawned as our child. Either way the shim is started with the daemon's
 * clean environment and gets the process's command line and environment
 * as data, in a memfd: nothing runs as root with an environment a job
 * chose, and a request too large for the run's shim is refused, never
 * started another way. The shim lives in a session of its own; a process
 * is watched through a pipe its run's shim closes once the exit record is
 * in place (or the pidfd of its own shim); a restarted daemon re-adopts it
 * by the shim's pid, checked against the start time recorded when it was
 * spawned, so a recycled pid is never mistaken for the shim, and takes its
 * ending from exit.json. The records (shim.json, exit.json) are read from
 * the process's records directory, the daemon's (exec.h), never from the
 * directory the job writes; a signal goes to the child's process group
 * only while the pid recorded there is, by its pidfd and start time, the
 * child the shim started and still leads its own group. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pld.h"
#include "executor.h"
#include "priv.h"

static int
pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* p's records directory. */
static const char *
records(const struct proc *p)
{
	return p->rdir[0] ? p->rdir : p->dir;
}

/* Whether the shim's record `name` (shim.json, exit.json) is in p's
 * records directory. */
static int
has_record(const struct proc *p, const char *name)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/%s", records(p), name);
	return access(path, F_OK) == 0;
}

/* ---- the runs' shims --------------------------------------------------- */

struct rshim {
	char run[128];
	char owner[4096];    /* the -u its requests carry ("": none), its pin */
	char cgroup[PATH_MAX]; /* the memory cgroup the parent moved it into ("": none) */
	int fd;              /* our end of its socket */
	pid_t pid;           /* our child */
	uint64_t start;      /* its start time (/proc stat field 22) */
	struct rshim *next;
};

static pthread_mutex_t rmtx = PTHREAD_MUTEX_INITIALIZER;
static int renabled;
static struct rshim *rshims;
/* Shims told to go: reaped once they have (they wait for their last
 * process). Only these pids are waited for: a plugin's own children are
 * its own business. */
static pid_t *closing;
static int nclosing;

static void
reap_closing(void)
{
	for (int i = 0; i < nclosing; i++) {
		pid_t r = waitpid(closing[i], NULL, WNOHANG);
		if (r == closing[i] || (r == -1 && errno == ECHILD))
			closing[i--] = closing[--nclosing];
	}
}

void
exec_local_run_shims(int on)
{
	pthread_mutex_lock(&rmtx);
	renabled = on;
	pthread_mutex_unlock(&rmtx);
}

static void
rshim_drop(struct rshim **pp)
{
	struct rshim *r = *pp;
	*pp = r->next;
	close(r->fd); /* the shim exits once its last process has ended */
	closing = xrealloc(closing, (size_t)nclosing + 1, sizeof(*closing));
	closing[nclosing++] = r->pid;
	free(r);
}

/* Tell the first shim of run (NULL: any) moved into cgroup (NULL: any)
 * to go: its pid, or 0 when there was none. */
static pid_t
rshim_go(const char *run, const char *cgroup)
{
	pid_t pid = 0;
	pthread_mutex_lock(&rmtx);
	reap_closing();
	for (struct rshim **pp = &rshims; *pp; pp = &(*pp)->next) {
		if ((run == NULL || strcmp((*pp)->run, run) == 0) &&
		    (cgroup == NULL || strcmp((*pp)->cgroup, cgroup) == 0)) {
			pid = (*pp)->pid;
			rshim_drop(pp);
			break;
		}
	}
	pthread_mutex_unlock(&rmtx);
	return pid;
}

void
exec_local_run_done(const char *run)
{
	rshim_go(run, NULL);
}

/* A job's memory cgroup (PRIV_CGROUP) is done with: the shim the parent
 * moved into it told to go, and waited for (5 s at most: it exits once
 * its last process has), so that the group is empty for the parent to
 * remove. */
void
exec_local_cgroup_done(const char *cgroup)
{
	pid_t pid = rshim_go(NULL, cgroup);
	int fd = pid > 0 ? pidfd_open_(pid) : -1;
	if (fd == -1)
		return;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	while (poll(&p, 1, 5000) == -1 && errno == EINTR)
		;
	close(fd);
}

/* Start run's shim for owner's processes: `pipeline-shim [-u OWNER] -G
 * 3`, started by the privileged parent where there is one (priv.c), which
 * pins it to that owner, and moves it into cgroup (a job's own shim, for
 * its stage process: exec_local_cgroup_done()) when that is not "";
 * else our child. */
static struct rshim *
rshim_start(const char *run, const char *shim, const char *owner, const char *cgroup)
{
	pid_t pid;
	uint64_t start;
	int fd = priv_shim_start(shim, owner[0] ? owner : NULL, cgroup[0] ? cgroup : NULL,
	    &pid, &start);
	if (fd == -1) {
		log_warn("%s: %s", __func__, shim);
		return NULL;
	}
	struct rshim *r = xcalloc(1, sizeof(*r));
	snprintf(r->run, sizeof(r->run), "%s", run);
	snprintf(r->owner, sizeof(r->owner), "%s", owner);
	snprintf(r->cgroup, sizeof(r->cgroup), "%s", cgroup);
	r->fd = fd;
	r->pid = pid;
	r->start = start;
	r->next = rshims;
	rshims = r;
	return r;
}

/* Send one request to p's run's shim r: the memfd rq holding the command
 * line and environment, and the write end of the pipe its end (or its
 * refusal) comes on: 0 with p filled in (p->pidfd is the read end:
 * local_wait), -1 when the shim is gone, -2 when no pipe could be made
 * (p->reason says why). Under rmtx: only the send. */
static int
rshim_send(struct rshim *r, struct proc *p, int rq)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) == -1) {
		snprintf(p->reason, sizeof(p->reason), "pipe: %s", strerror(errno));
		return -2;
	}
	char one = 1;
	struct iovec iov = { .iov_base = &one, .iov_len = 1 };
	union { char b[CMSG_SPACE(2 * sizeof(int))]; struct cmsghdr align; } c;
	memset(&c, 0, sizeof(c));
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = c.b, .msg_controllen = sizeof(c.b) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
	int fds[2] = { pfd[1], rq };
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	ssize_t n;
	while ((n = sendmsg(r->fd, &m, MSG_NOSIGNAL)) == -1 && errno == EINTR)
		;
	close(pfd[1]); /* the shim holds it now (or nobody: EOF) */
	if (n == -1) {
		close(pfd[0]);
		return -1;
	}
	p->pid = r->pid;
	p->starttime = r->start;
	p->pidfd = pfd[0];
	p->state = PROC_RUNNING;
	return 0;
}

/* Drop run's shim if it is still the one with this pid (gone). */
static void
rshim_gone(const char *run, pid_t pid)
{
	pthread_mutex_lock(&rmtx);
	for (struct rshim **pp = &rshims; *pp; pp = &(*pp)->next) {
		if (strcmp((*pp)->run, run) == 0 && (*pp)->pid == pid) {
			log_warnx("the shim of run %s is gone; starting another", run);
			rshim_drop(pp);
			break;
		}
	}
	pthread_mutex_unlock(&rmtx);
}

/* Start p through its run's shim with the request rq: 0, 1 when there
 * is no run's shim to ask (not in the daemon, or no run: a shim of its
 * own), -1 when the start failed (p->reason says why). The lock covers
 * the send only: the request's end, or its refusal, comes on a pipe of
 * its own (local_wait). */
static int
rshim_try(struct proc *p, char *const argv[], int rq)
{
	const char *shim = argv[0], *owner = argv_owner(argv);
	const char *cgroup = p->cgroup ? p->cgroup : "";
	if (p->run == NULL || p->run[0] == '\0')
		return 1;
	for (int tries = 0; tries < 2; tries++) {
		pthread_mutex_lock(&rmtx);
		reap_closing();
		if (!renabled) {
			pthread_mutex_unlock(&rmtx);
			return 1;
		}
		struct rshim *r = rshims;
		while (r && (strcmp(r->run, p->run) != 0 || strcmp(r->owner, owner) != 0 ||
		    strcmp(r->cgroup, cgroup) != 0))
			r = r->next;
		if (r == NULL)
			r = rshim_start(p->run, shim, owner, cgroup);
		int rc = r ? rshim_send(r, p, rq) : -2;
		pid_t pid = r ? r->pid : 0;
		pthread_mutex_unlock(&rmtx);
		if (rc == 0)
			return 0;
		if (rc == -2)
			break;
		rshim_gone(p->run, pid);
	}
	if (p->reason[0] == '\0')
		snprintf(p->reason, sizeof(p->reason), "the run's shim (%s) cannot be started", shim);
	return -1;
}

/* Start p: through its run's shim in the daemon, else as `argv[0] -R 3`,
 * our child, with the request on descriptor 3. The shim's own environment
 * is shim_clean_env either way; envp travels as data. */
static int
local_start(struct proc *p, char *const argv[], char *const envp[], const char *cwd)
{
	(void)cwd; /* in argv (-c) */
	size_t len;
	int rq = shim_request_fd(argv, envp, &len);
	if (rq == -1) {
		if (errno == E2BIG)
			snprintf(p->reason, sizeof(p->reason), "its command line and environment are "
			    "%zu bytes, over the limit of %d bytes", len, SHIM_REQ_MAX);
		else
			snprintf(p->reason, sizeof(p->reason), "the request to the shim: %s",
			    strerror(errno));
		log_warnx("%s: %s: %s", __func__, p->dir, p->reason);
		return -1;
	}
	int rc = rshim_try(p, argv, rq);
	if (rc != 1) {
		close(rq);
		if (rc == -1)
			log_warnx("%s: %s: %s", __func__, p->dir, p->reason);
		return rc;
	}
	pid_t pid = shim_spawn_fd(argv[0], NULL, "-R", rq);
	int e = errno;
	close(rq);
	if (pid == -1) {
		errno = e;
		log_warn("%s: %s", __func__, argv[0]);
		snprintf(p->reason, sizeof(p->reason), "%s: %s", argv[0], strerror(e));
		return -1;
	}
	p->pid = pid;
	p->starttime = proc_starttime(pid);
	p->pidfd = pidfd_open_(pid);
	p->state = PROC_RUNNING;
	p->child = 1;
	return 0;
}

/* How many of what a shim started still run: the processes of group
 * pgid, and its leader, the child the shim recorded (start time cstart),
 * should it have left the group (setsid). Zombies, which hold no file or
 * directory any more, do not count. */
static int
orphans_running(pid_t pgid, uint64_t cstart)
{
	DIR *d = opendir("/proc");
	if (d == NULL)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char *end, st;
		long pid = strtol(e->d_name, &end, 10);
		pid_t pg;
		uint64_t t;
		if (*end == '\0' && pid > 0 && proc_stat((pid_t)pid, &st, &pg, &t) == 0 &&
		    (pg == pgid || (pid == pgid && t == cstart)) && st != 'Z' && st != 'X')
			n++;
	}
	closedir(d);
	return n;
}

/* p's shim is gone without an exit record: the program it started may
 * run on, orphaned, in its process group (shim.json, in the records
 * directory the job cannot write), in the directories
 * the job's next attempt will use. Kill it and its group (SIGTERM, SIGKILL
 * after ORPHAN_GRACE_S) and wait until none of it runs, so that no job
 * runs twice at once. A live process with the child's pid is the child
 * only with the start time recorded (a recycled pid is left alone, and
 * then the group is gone too: a pid is not reused while its group lives).
 * Says what it did in p->reason. */
#define ORPHAN_GRACE_S 5
#define ORPHAN_WAIT_S 30
static void
kill_orphans(struct proc *p)
{
	pid_t child = 0, pgid = 0;
	uint64_t cstart = 0, t = 0;
	if (proc_read_shim(p, &child, &pgid, &cstart) == -1 || pgid <= 1 || child != pgid)
		return;
	/* A record without the child's start time (an older shim): the child
	 * started after its shim. */
	int alive = proc_stat(pgid, NULL, NULL, &t) == 0;
	if (alive && (cstart != 0 ? t != cstart : t < p->starttime))
		return;
	if (cstart == 0)
		cstart = t;
	if (orphans_running(pgid, cstart) <= 0)
		return;
	log_warnx("%s: %s: the shim is gone, its process group %d runs on: killing it",
	    __func__, p->dir, (int)pgid);
	int n, i;
	for (i = 0; (n = orphans_running(pgid, cstart)) > 0 &&
	    i < (ORPHAN_GRACE_S + ORPHAN_WAIT_S) * 20; i++) {
		if (i == 0 || i == ORPHAN_GRACE_S * 20) {
			int sig = i == 0 ? SIGTERM : SIGKILL;
			if (priv_active())
				priv_signal(records(p), PRIV_SIG_ORPHANS, sig);
			else {
				kill(-pgid, sig);
				if (alive)
					kill(pgid, sig);
			}
		}
		usleep(50000);
	}
	size_t len = strlen(p->reason);
	if (n > 0)
		log_warnx("%s: %s: process group %d still runs after SIGKILL", __func__, p->dir,
		    (int)pgid);
	snprintf(p->reason + len, sizeof(p->reason) - len, "; its process group %d %s",
	    (int)pgid, n > 0 ? "still runs after SIGKILL" : i > ORPHAN_GRACE_S * 20 ?
	    "was killed (SIGKILL)" : "was killed (SIGTERM)");
}

static int
local_adopt(struct proc *p)
{
	if (p->pid <= 0 || p->starttime == 0) {
		/* Crashed between writing the row and starting: look at what
		 * the shim recorded, if it ever ran. */
		if (proc_read_shim(p, NULL, NULL, NULL) == -1) {
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
		kill_orphans(p);
	}
	return 0;
}

static int local_adopt(struct proc *p);

/* The process directory is locked by another shim: that one started this
 * process (the daemon died between asking a run's shim and hearing back,
 * and asked again after its restart). Follow it instead: wait for its
 * shim.json (or exit.json), up to HOLDER_WAIT_S, then adopt it as after a
 * restart. 0 when adopted (running or ended), -1 when nothing appeared. */
#define HOLDER_WAIT_S 5
static int
adopt_holder(struct proc *p)
{
	for (int i = 0; i < HOLDER_WAIT_S * 100 && !has_record(p, "shim.json") &&
	    !has_record(p, "exit.json"); i++)
		usleep(10000);
	p->pid = 0;
	p->starttime = 0;
	p->state = PROC_STARTING;
	local_adopt(p);
	if (p->state == PROC_STARTING)
		return -1;
	log_warnx("%s: started by shim %d before a restart: following that one", p->dir,
	    (int)p->pid);
	return 0;
}

/* A run's shim's pipe that became readable: its end (nothing to read:
 * 0), or its refusal: 1 when the process is lost with the shim's reason,
 * 2 when another shim holds it and it was adopted from that one. */
static int
refused(struct proc *p)
{
	struct shim_reply rep;
	ssize_t n;
	while ((n = read(p->pidfd, &rep, sizeof(rep))) == -1 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(rep) || rep.err == 0)
		return 0;
	close(p->pidfd);
	p->pidfd = -1;
	if (rep.err == EBUSY && adopt_holder(p) == 0)
		return 2;
	p->state = PROC_LOST;
	snprintf(p->reason, sizeof(p->reason), "the run's shim refused to start it: %s",
	    strerror(rep.err));
	return 1;
}

static int
local_wait(struct proc *p, int timeout_ms)
{
	int ended = 0;
	if (p->pid > 0 && p->pidfd >= 0) {
		/* The run shim's pipe (closed once exit.json is in), or the
		 * pidfd of the process's own shim. */
		struct pollfd pfd = { .fd = p->pidfd, .events = POLLIN };
		int n = poll(&pfd, 1, timeout_ms);
		if (n < 0 && errno == EINTR)
			return 0;
		ended = n != 0;
	} else if (p->pid > 0) {
		/* No pidfd (old kernel): poll the pid. */
		if (kill(p->pid, 0) == 0 && proc_starttime(p->pid) == p->starttime)
			usleep((useconds_t)timeout_ms * 1000);
		else
			ended = 1;
	}
	if (ended && p->child)
		waitpid(p->pid, NULL, WNOHANG);
	if (ended && !p->child) {
		int r = refused(p);
		if (r == 1 || (r == 2 && p->state != PROC_RUNNING))
			return 1; /* lost, or adopted already ended (or lost) */
		if (r == 2)
			return 0; /* adopted: waited on from now */
	}
	/* A run's shim outlives the processes it started (its pidfd, after a
	 * restart, says nothing about this one): the exit record does. */
	if (proc_read_exit(p) == 1)
		return 1;
	if (!ended)
		return 0;
	p->state = PROC_LOST;
	snprintf(p->reason, sizeof(p->reason), "shim ended without an exit record");
	kill_orphans(p);
	return 1;
}

/* A run's shim forwards what it is sent to every process of the run. */
static int
is_run_shim(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	for (ssize_t i = 0; i + 2 < n; i++)
		if (buf[i] == '\0' && buf[i + 1] == '-' && buf[i + 2] == 'G' &&
		    (i + 3 >= n || buf[i + 3] == '\0'))
			return 1;
	return 0;
}

/* Deliver sig to the child a shim started, pid `child` with start time
 * cstart, and to its process group while it still leads its own: only
 * while the pid is that process (its pidfd opened first, then its start
 * time compared: a pid recycled before the open fails the comparison).
 * The number is not another process's group between the check and
 * kill(2) unless, in those microseconds, the child ended, its shim reaped
 * it and the kernel handed the pid out again (a whole turn of pid_max).
 * One that left its group (setsid, setpgid) is signalled alone, through
 * its pidfd: the group it joined is not the job's to name. 0 when
 * signalled or already gone, -1 otherwise. */
static int
signal_child(pid_t child, uint64_t cstart, int sig)
{
	if (child <= 1 || cstart == 0)
		return -1;
	int fd = pidfd_open_(child);
	if (fd == -1)
		return errno == ESRCH ? 0 : -1;
	char st;
	pid_t pg;
	uint64_t t;
	int rc = 0;
	if (proc_stat(child, &st, &pg, &t) == 0 && t == cstart) {
		if (pg == child)
			rc = kill(-child, sig);
		else
			rc = (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
	}
	close(fd);
	return rc == -1 && errno == ESRCH ? 0 : rc;
}

static int
local_signal(struct proc *p, int sig)
{
	pid_t child = 0, pgid = 0;
	uint64_t cstart = 0;
	/* Right after the start a shim may not have recorded the child yet:
	 * give it a moment, as long as it lives. */
	for (int i = 0; i < 200 && !has_record(p, "shim.json") && p->pid > 0 && kill(p->pid, 0) == 0; i++)
		usleep(5000);
	if (proc_read_shim(p, &child, &pgid, &cstart) == 0 && child > 0)
		return priv_active() ? priv_signal(records(p), PRIV_SIG_CHILD, sig) :
		    signal_child(child, cstart, sig);
	/* No record: a shim of its own that has not started the child, our
	 * child (it forwards the signal), never a run's shim, which would
	 * forward it to every process of the run. */
	if (p->pid <= 0 || is_run_shim(p->pid) || proc_starttime(p->pid) != p->starttime)
		return -1;
	return kill(p->pid, sig);
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
