/*
 * pipeline-shim: the parent of every job process (the containerd-shim /
 * conmon pattern), so that jobs outlive the daemon.
 *
 *   pipeline-shim -d DIR -l LOG [-c CWD] -- PROGRAM [ARG...]
 *
 * It starts a session of its own, runs PROGRAM in a new process group with
 * stdin from /dev/null and stdout/stderr appended to LOG, records
 * DIR/shim.json (its pid and start time, the child's pid and process
 * group), waits, and writes DIR/exit.json atomically with the child's real
 * exit status. SIGTERM, SIGINT and SIGHUP sent to the shim are forwarded to
 * the child's process group. The job's own progress goes to DIR/events
 * (PL_EVENTS), written by the job itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
write_atomic(const char *dir, const char *name, const char *text)
{
	char tmp[4200], path[4200];
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd == -1)
		return -1;
	size_t len = strlen(text);
	if (write(fd, text, len) != (ssize_t)len) {
		close(fd);
		unlink(tmp);
		return -1;
	}
	close(fd);
	return rename(tmp, path);
}

static void
usage(void)
{
	fprintf(stderr, "usage: pipeline-shim -d DIR -l LOG [-c CWD] -- PROGRAM [ARG...]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *dir = NULL, *logp = NULL, *cwd = NULL;
	int opt;
	while ((opt = getopt(argc, argv, "+d:l:c:")) != -1) {
		switch (opt) {
		case 'd': dir = optarg; break;
		case 'l': logp = optarg; break;
		case 'c': cwd = optarg; break;
		default: usage();
		}
	}
	if (dir == NULL || logp == NULL || optind >= argc)
		usage();
	char **cargv = argv + optind;

	setsid();
	char lockpath[4200];
	snprintf(lockpath, sizeof(lockpath), "%s/lock", dir);
	int lockfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
	if (lockfd == -1 || flock(lockfd, LOCK_EX | LOCK_NB) == -1) {
		fprintf(stderr, "pipeline-shim: %s: %s\n", lockpath,
		    lockfd == -1 ? strerror(errno) : "another shim holds it");
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

	/* Block the forwarded signals until the child's group is known. */
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, &old);

	pid_t pid = fork();
	if (pid == -1) {
		fprintf(stderr, "pipeline-shim: fork: %s\n", strerror(errno));
		return 2;
	}
	if (pid == 0) {
		setpgid(0, 0);
		sigprocmask(SIG_SETMASK, &old, NULL);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0) {
			dup2(devnull, 0);
			close(devnull);
		}
		dup2(logfd, 1);
		dup2(logfd, 2);
		if (getenv("PL_EVENTS") == NULL)
			setenv("PL_EVENTS", events, 1);
		if (getenv("PL_JOB_DIR") == NULL)
			setenv("PL_JOB_DIR", dir, 1);
		if (cwd && chdir(cwd) == -1) {
			fprintf(stderr, "pipeline-shim: chdir %s: %s\n", cwd, strerror(errno));
			_exit(126);
		}
		execvp(cargv[0], cargv);
		fprintf(stderr, "pipeline-shim: cannot run %s: %s\n", cargv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	setpgid(pid, pid); /* also done by the child: whichever runs first */
	child_pgid = pid;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);

	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	char text[1024];
	snprintf(text, sizeof(text),
	    "{\"shim_pid\":%d,\"shim_start\":%llu,\"child_pid\":%d,\"pgid\":%d,\"host\":\"%s\"}\n",
	    (int)getpid(), starttime(getpid()), (int)pid, (int)pid, host);
	write_atomic(dir, "shim.json", text);

	int status = 0;
	while (waitpid(pid, &status, 0) == -1) {
		if (errno != EINTR) {
			status = 0;
			break;
		}
	}
	struct timeval t1;
	gettimeofday(&t1, NULL);
	snprintf(text, sizeof(text),
	    "{\"exited\":%d,\"status\":%d,\"signal\":%d,\"start\":%.3f,\"end\":%.3f}\n",
	    WIFEXITED(status) ? 1 : 0, WIFEXITED(status) ? WEXITSTATUS(status) : 0,
	    WIFSIGNALED(status) ? WTERMSIG(status) : 0,
	    t0.tv_sec + t0.tv_usec / 1e6, t1.tv_sec + t1.tv_usec / 1e6);
	if (write_atomic(dir, "exit.json", text) == -1) {
		fprintf(stderr, "pipeline-shim: cannot record the exit in %s: %s\n", dir, strerror(errno));
		return 1;
	}
	return 0;
}
