/*
 * pipeline-shim: the parent of every job process (the containerd-shim /
 * conmon pattern), so that jobs outlive the daemon.
 *
 *   pipeline-shim -d DIR -l LOG [-c CWD] -- PROGRAM [ARG...]
 *   pipeline-shim -Z FD          (the zygote: see below)
 *
 * It starts a session of its own, locks DIR (flock), runs PROGRAM in a new
 * process group with stdin from /dev/null and stdout/stderr appended to
 * LOG, records
 * DIR/shim.json (its pid and start time, the child's pid and process
 * group), waits, and writes DIR/exit.json atomically with the child's real
 * exit status. SIGTERM, SIGINT and SIGHUP sent to the shim are forwarded to
 * the child's process group. The job's own progress goes to DIR/events
 * (PL_EVENTS), written by the job itself.
 *
 * The zygote. Executing a program costs about a millisecond here (the
 * dynamic loader's start-up dominates), more than a short job itself, so
 * the daemon starts one long-lived `pipeline-shim -Z FD` and asks it for
 * shims over a SOCK_SEQPACKET socket on FD: each request is one message
 * (uint32 argc, uint32 envc, then argc + envc NUL-terminated strings: the
 * shim command line above and the environment); the zygote forks, the
 * child runs the shim exactly as if it had been executed with that command
 * line and environment, and the zygote replies {int32 pid, int32 errno,
 * uint64 start time} with a pidfd of the shim attached (SCM_RIGHTS). The
 * zygote reaps its children and exits when the daemon's end closes: the
 * shims it made live on, like every shim. A zygote in a session of its
 * own keeps terminal signals meant for the daemon away from the jobs.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static volatile sig_atomic_t child_pgid;

static void
forward(int sig)
{
	if (child_pgid > 0)
		kill(-child_pgid, sig);
}

static unsigned long long
starttime(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (p == NULL)
		return 0;
	int field = 2;
	for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " "))
		if (++field == 22)
			return strtoull(tok, NULL, 10);
	return 0;
}

/* Write path atomically: a temporary, then rename. No fsync: the records
 * must survive the death of any process (they do: rename is atomic), and
 * like the store (synchronous=NORMAL) they may be lost to a power failure;
 * two fsyncs per job cost more than the job itself for short commands. */
static int
write_atomic(int dirfd, const char *name, const char *text)
{
	char tmp[256];
	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd == -1)
		return -1;
	size_t len = strlen(text);
	if (write(fd, text, len) != (ssize_t)len) {
		close(fd);
		unlinkat(dirfd, tmp, 0);
		return -1;
	}
	close(fd);
	return renameat(dirfd, tmp, dirfd, name);
}

static void
usage(void)
{
	fprintf(stderr, "usage: pipeline-shim -d DIR -l LOG [-c CWD] -- PROGRAM [ARG...]\n"
	    "       pipeline-shim -Z FD\n");
	exit(2);
}

static int zygote(int sock);

int
main(int argc, char **argv)
{
	const char *dir = NULL, *logp = NULL, *cwd = NULL;
	int opt;
	optind = 1;
	while ((opt = getopt(argc, argv, "+d:l:c:Z:")) != -1) {
		switch (opt) {
		case 'd': dir = optarg; break;
		case 'l': logp = optarg; break;
		case 'c': cwd = optarg; break;
		case 'Z': return zygote(atoi(optarg));
		default: usage();
		}
	}
	if (dir == NULL || logp == NULL || optind >= argc)
		usage();
	char **cargv = argv + optind;

	setsid();
	/* The records are written relative to the directory, so that a
	 * relative DIR survives the chdir to CWD. */
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* The lock is the directory itself (flock works on a directory's
	 * descriptor): no file to create per process. */
	if (dirfd == -1 || flock(dirfd, LOCK_EX | LOCK_NB) == -1) {
		fprintf(stderr, "pipeline-shim: %s: %s\n", dir,
		    dirfd == -1 ? strerror(errno) : "another shim holds its lock");
		return 2;
	}
	int logfd = open(logp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (logfd == -1) {
		fprintf(stderr, "pipeline-shim: %s: %s\n", logp, strerror(errno));
		return 2;
	}
	struct timeval t0;
	gettimeofday(&t0, NULL);
	char events[4200];
	snprintf(events, sizeof(events), "%s/events", dir);
	if (events[0] != '/' && getenv("PL_EVENTS") == NULL) {
		char *abs = realpath(dir, NULL);
		if (abs) {
			snprintf(events, sizeof(events), "%s/events", abs);
			free(abs);
		}
	}
	if (getenv("PL_EVENTS") == NULL)
		setenv("PL_EVENTS", events, 1);
	if (getenv("PL_JOB_DIR") == NULL)
		setenv("PL_JOB_DIR", dir, 1);

	/* Block the forwarded signals until the child's group is known. */
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, &old);

	/* The child: its own process group, stdin from /dev/null, stdout and
	 * stderr to the log, in CWD. posix_spawn (a vfork) rather than fork:
	 * nothing of the shim's memory is copied for a child that only execs. */
	int status = 0;
	pid_t pid = -1;
	if (cwd && chdir(cwd) == -1) {
		dprintf(logfd, "pipeline-shim: chdir %s: %s\n", cwd, strerror(errno));
		status = 126 << 8;
	} else {
		posix_spawnattr_t at;
		posix_spawn_file_actions_t fa;
		sigset_t def;
		sigemptyset(&def);
		sigaddset(&def, SIGTERM);
		sigaddset(&def, SIGINT);
		sigaddset(&def, SIGHUP);
		sigaddset(&def, SIGPIPE);
		sigaddset(&def, SIGCHLD);
		posix_spawnattr_init(&at);
		posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
		    POSIX_SPAWN_SETSIGDEF);
		posix_spawnattr_setpgroup(&at, 0);
		posix_spawnattr_setsigmask(&at, &old);
		posix_spawnattr_setsigdefault(&at, &def);
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
		posix_spawn_file_actions_adddup2(&fa, logfd, 1);
		posix_spawn_file_actions_adddup2(&fa, logfd, 2);
		int rc = posix_spawnp(&pid, cargv[0], &fa, &at, cargv, environ);
		posix_spawn_file_actions_destroy(&fa);
		posix_spawnattr_destroy(&at);
		if (rc != 0) {
			dprintf(logfd, "pipeline-shim: cannot run %s: %s\n", cargv[0], strerror(rc));
			status = (rc == ENOENT ? 127 : 126) << 8;
			pid = -1;
		}
	}
	if (pid > 0) {
		setpgid(pid, pid); /* done by the spawn already; harmless */
		child_pgid = pid;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);

	char text[1024];
	if (pid > 0) {
		char host[256] = "";
		gethostname(host, sizeof(host) - 1);
		snprintf(text, sizeof(text),
		    "{\"shim_pid\":%d,\"shim_start\":%llu,\"child_pid\":%d,\"pgid\":%d,\"host\":\"%s\"}\n",
		    (int)getpid(), starttime(getpid()), (int)pid, (int)pid, host);
		write_atomic(dirfd, "shim.json", text);
		while (waitpid(pid, &status, 0) == -1) {
			if (errno != EINTR) {
				status = 0;
				break;
			}
		}
	}
	struct timeval t1;
	gettimeofday(&t1, NULL);
	snprintf(text, sizeof(text),
	    "{\"exited\":%d,\"status\":%d,\"signal\":%d,\"start\":%.3f,\"end\":%.3f}\n",
	    WIFEXITED(status) ? 1 : 0, WIFEXITED(status) ? WEXITSTATUS(status) : 0,
	    WIFSIGNALED(status) ? WTERMSIG(status) : 0,
	    t0.tv_sec + t0.tv_usec / 1e6, t1.tv_sec + t1.tv_usec / 1e6);
	if (write_atomic(dirfd, "exit.json", text) == -1) {
		fprintf(stderr, "pipeline-shim: cannot record the exit in %s: %s\n", dir, strerror(errno));
		return 1;
	}
	return 0;
}

/* ---- the zygote ------------------------------------------------------ */

#define ZYGOTE_MAX (1 << 20)   /* a request's size limit: the daemon falls back to exec */

struct zreply {
	int32_t pid;
	int32_t err;
	uint64_t start;
};

static void
zreply(int sock, pid_t pid, int err, int pidfd)
{
	struct zreply r = { .pid = pid, .err = err, .start = pid > 0 ? starttime(pid) : 0 };
	struct iovec iov = { .iov_base = &r, .iov_len = sizeof(r) };
	union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } c;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (pidfd >= 0) {
		memset(&c, 0, sizeof(c));
		m.msg_control = c.buf;
		m.msg_controllen = sizeof(c.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pidfd, sizeof(int));
	}
	while (sendmsg(sock, &m, MSG_NOSIGNAL) == -1 && errno == EINTR)
		;
}

/* Split a request into argv and envp (pointers into buf); -1 when it is
 * malformed. */
static int
zparse(char *buf, size_t len, char ***argvp, char ***envpp)
{
	uint32_t ac, ec;
	if (len < 8)
		return -1;
	memcpy(&ac, buf, 4);
	memcpy(&ec, buf + 4, 4);
	if (ac == 0 || ac > 65536 || ec > 65536)
		return -1;
	char **v = calloc((size_t)ac + ec + 2, sizeof(char *));
	if (v == NULL)
		return -1;
	size_t off = 8;
	for (uint32_t i = 0; i < ac + ec; i++) {
		char *nul = off < len ? memchr(buf + off, '\0', len - off) : NULL;
		if (nul == NULL) {
			free(v);
			return -1;
		}
		v[i < ac ? i : i + 1] = buf + off;
		off = (size_t)(nul - buf) + 1;
	}
	v[ac] = NULL;
	v[ac + ec + 1] = NULL;
	*argvp = v;
	*envpp = v + ac + 1;
	return (int)ac;
}

static int
zygote(int sock)
{
	setsid();
	/* Nothing of the daemon's but the socket. */
	for (int fd = 3; fd < 1024; fd++)
		if (fd != sock)
			close(fd);
	sigset_t chld, none;
	sigemptyset(&chld);
	sigemptyset(&none);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	signal(SIGPIPE, SIG_IGN);
	char *buf = malloc(ZYGOTE_MAX);
	if (buf == NULL || sfd == -1)
		return 1;
	for (;;) {
		struct pollfd pf[2] = { { .fd = sock, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
		if (poll(pf, 2, -1) == -1 && errno != EINTR)
			return 1;
		if (pf[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) > 0)
				;
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
		}
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		ssize_t n = recv(sock, buf, ZYGOTE_MAX, MSG_TRUNC);
		if (n == 0 || (n == -1 && errno != EINTR))
			break; /* the daemon is gone */
		if (n == -1)
			continue;
		char **cargv, **cenv;
		int ac = n > ZYGOTE_MAX ? -1 : zparse(buf, (size_t)n, &cargv, &cenv);
		if (ac < 0) {
			zreply(sock, -1, n > ZYGOTE_MAX ? E2BIG : EINVAL, -1);
			continue;
		}
		pid_t pid = fork();
		if (pid == 0) {
			close(sock);
			close(sfd);
			signal(SIGPIPE, SIG_DFL);
			sigprocmask(SIG_SETMASK, &none, NULL);
			environ = cenv;
			_exit(main(ac, cargv));
		}
		int err = pid == -1 ? errno : 0;
		int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
		zreply(sock, pid, err, pidfd);
		if (pidfd >= 0)
			close(pidfd);
		free(cargv);
	}
	return 0;
}
