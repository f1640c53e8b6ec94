/*
 * pipeline-shim: the parent of job processes (the containerd-shim /
 * conmon pattern), so that jobs outlive the daemon.
 *
 *   pipeline-shim -d DIR [-r RDIR [-e]] -l LOG [-c CWD] [-u UID:GID[:GROUPS]] [-o UID] -- PROGRAM [ARG...]
 *   pipeline-shim -R FD          (the same, its command line and environment read from FD)
 *   pipeline-shim [-u UID:GID[:GROUPS]] [-o UID] -G FD   (a run's shim: see below)
 *
 * The first form supervises one process: it starts a session of its own,
 * locks RDIR (flock; RDIR is DIR unless -r names another), runs PROGRAM in
 * a new process group with stdin from /dev/null and stdout/stderr appended
 * to LOG, records RDIR/shim.json (its pid and start time, the child's pid
 * and process group), waits, and writes RDIR/exit.json atomically with the
 * child's real exit status. SIGTERM, SIGINT and SIGHUP sent to the shim
 * are forwarded to the child's process group, as are SIGUSR1 and SIGUSR2
 * (a Slurm batch script's warnings). The job's own progress goes to
 * DIR/events (PL_EVENTS), written by the job itself; with -e (a stage
 * process, pipeline-stage) the shim opens RDIR/events itself and hands it
 * to the child as descriptor 3 (PL_EVENTS_FD): the lines the daemon takes
 * as the stage's own are in a file its owner cannot write. DIR is the job's to
 * write; RDIR need not be: the daemon gives the shim one of its own, so
 * that no record it acts on as root is the job's to forge (exec.h). The
 * slurm executor runs this form in its batch scripts; -R is how the daemon
 * starts it by hand (pipelinectl stage): the shim itself is always started
 * with an environment of the daemon's (shim_clean_env), the job's
 * environment is data (the request format below) that only the child,
 * once it has become the job's user, executes with. -o UID in this form
 * only gives the records the group of RDIR when RDIR is UID's: a batch
 * script's shim, root, for root's own run of a split daemon whose daemon
 * process is UID (exec_slurm.c), so that the daemon process reads them;
 * they stay root's.
 *
 * A run's shim (-G). Executing a program costs about a millisecond here
 * (the dynamic loader's start-up dominates), a shim process per job
 * another fork and exit: more than a short job itself. So the daemon
 * starts one shim per run (the containerd shim-v2 pattern: one shim per
 * pod): `pipeline-shim -G FD`, in a session of its own, takes requests
 * over the SOCK_SEQPACKET socket FD. A request is one small message with
 * two descriptors attached (SCM_RIGHTS): the write end of a pipe, and a
 * memfd holding uint32 argc, uint32 envc, then argc + envc NUL-terminated
 * strings: the first form's command line and the environment, of any size
 * up to SHIM_REQ_MAX (a socket message holds far less). The shim does for
 * that process exactly what the first form does (the lock, the log, the
 * process group, shim.json, exit.json), as the parent of every process of
 * the run, and refuses a request whose RDIR is not its own (its owner
 * another, or writable by others) when it is to drop to another user. The
 * daemon's thread holds the pipe's read end. A request it takes gets no
 * reply: the shim closes the pipe once exit.json is in place, which is all
 * the daemon's thread waits for (one wake-up per process); a request it
 * refuses gets {int32 pid, int32 errno, uint64 start} there, then the pipe
 * closed. So the daemon needs no lock around the socket beyond the send,
 * and its threads wait each on its own pipe. With -u before -G (how the
 * privileged parent starts it, priv.c) it is pinned to that one owner:
 * a request to run as anyone else, or with no -u (as the shim's root),
 * is refused with EPERM. -o UID, on that command line only (the parent's
 * word, never a request's), names the daemon process's own user when it
 * is not root (pipelined.conf(5) user): a records directory of that
 * user's, writable by nobody else, is then the shim's own too. It exits when the daemon's
 * end is closed (the run ended, or the daemon went) and its last child
 * has ended.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec.h"
#include "procstat.h"

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
	struct proc_stat ps;
	return proc_stat_read(pid, &ps) == 0 ? ps.start : 0;
}

/* -o: the daemon process's own user (a run's shim's command line, the
 * privileged parent's word; in the first form, the records' group only);
 * -1: none. */
static long records_owner = -1;

/* A record fd of the shim's (root's) in the records directory dirfd:
 * when that directory is the -o user's, the file is given the
 * directory's group, so that the daemon process, that user, reads what
 * the shim recorded; the file stays root's, for the parent to trust. */
static void
records_share(int dirfd, int fd)
{
	struct stat st;
	if (records_owner > 0 && fstat(dirfd, &st) == 0 && st.st_uid == (uid_t)records_owner &&
	    fchown(fd, (uid_t)-1, st.st_gid) == -1)
		fprintf(stderr, "pipeline-shim: a record's group: %s\n", strerror(errno));
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
	/* A new file: never one (or a link) the job may have put there. */
	int fl = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	int fd = openat(dirfd, tmp, fl, 0640);
	if (fd == -1 && errno == EEXIST && unlinkat(dirfd, tmp, 0) == 0)
		fd = openat(dirfd, tmp, fl, 0640);
	if (fd == -1)
		return -1;
	records_share(dirfd, fd);
	size_t len = strlen(text);
	if (write(fd, text, len) != (ssize_t)len) {
		close(fd);
		unlinkat(dirfd, tmp, 0);
		return -1;
	}
	close(fd);
	return renameat(dirfd, tmp, dirfd, name);
}

static double
now_s(void)
{
	struct timeval t;
	gettimeofday(&t, NULL);
	return t.tv_sec + t.tv_usec / 1e6;
}

/* shim.json: the child's start time too, so that a daemon that finds
 * this shim gone can tell the child's process group from a recycled one
 * before it kills what is left of it. */
static void
record_shim(int dirfd, pid_t shim, unsigned long long start, pid_t child)
{
	char host[256] = "", text[1024];
	gethostname(host, sizeof(host) - 1);
	snprintf(text, sizeof(text),
	    "{\"shim_pid\":%d,\"shim_start\":%llu,\"child_pid\":%d,\"pgid\":%d,"
	    "\"child_start\":%llu,\"host\":\"%s\"}\n",
	    (int)shim, start, (int)child, (int)child, starttime(child), host);
	write_atomic(dirfd, "shim.json", text);
}

/* A record that cannot be written (the disk full) is said in the job
 * log, where whoever reads why the process was lost looks. */
static int
record_exit(int dirfd, int logfd, int status, double t0)
{
	char text[256];
	snprintf(text, sizeof(text),
	    "{\"exited\":%d,\"status\":%d,\"signal\":%d,\"start\":%.3f,\"end\":%.3f}\n",
	    WIFEXITED(status) ? 1 : 0, WIFEXITED(status) ? WEXITSTATUS(status) : 0,
	    WIFSIGNALED(status) ? WTERMSIG(status) : 0, t0, now_s());
	int rc = write_atomic(dirfd, "exit.json", text);
	if (rc == -1 && logfd >= 0)
		dprintf(logfd, "pipeline-shim: cannot write exit.json (the process ended: %.*s): %s\n",
		    (int)strlen(text) - 1, text, strerror(errno));
	return rc;
}

/* Who the child runs as (-u UID:GID[:G1,G2...]): set when the shim is
 * root and the job's owner is another user (pipelined(8) USERS). */
struct cred {
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[SHIM_NGROUPS];
};

/* One process's supervision, as the command line asks for it. */
struct sup {
	const char *dir, *rdir, *logp, *cwd, *user;
	long rowner;        /* -o: the records' other owner; -1: none */
	char **argv;
	int dirfd, logfd;
	int stage_events;   /* -e: RDIR/events, opened here, is the child's descriptor 3 */
	int evfd;
	double t0;
};

/* Parse -u's UID:GID[:G1,G2...]: 0, or -1 when malformed. */
static int
parse_cred(const char *text, struct cred *c)
{
	char *end;
	unsigned long u = strtoul(text, &end, 10), g;
	if (end == text || *end != ':')
		return -1;
	const char *p = end + 1;
	g = strtoul(p, &end, 10);
	if (end == p || (*end != ':' && *end != '\0') || u >= (uid_t)-1 || g >= (gid_t)-1)
		return -1;
	c->uid = (uid_t)u;
	c->gid = (gid_t)g;
	c->ngroups = 0;
	while (*end == ':' || *end == ',') {
		p = end + 1;
		unsigned long x = strtoul(p, &end, 10);
		if (end == p || x >= (gid_t)-1 || c->ngroups == SHIM_NGROUPS)
			return -1;
		c->groups[c->ngroups++] = (gid_t)x;
	}
	return *end == '\0' ? 0 : -1;
}

/* The command line: 0, or -1 when malformed. -G FD sets *group_fd and
 * -R FD *req_fd (req_fd NULL: -R is not taken), each alone. */
static int
parse_args(int argc, char **argv, struct sup *s, int *group_fd, int *req_fd)
{
	int opt;
	memset(s, 0, sizeof(*s));
	s->rowner = -1;
	*group_fd = -1;
	if (req_fd)
		*req_fd = -1;
	optind = 0; /* a full restart of getopt: a run's shim parses many */
	while ((opt = getopt(argc, argv, "+d:r:l:c:u:o:eG:R:")) != -1) {
		switch (opt) {
		case 'e': s->stage_events = 1; break;
		case 'd': s->dir = optarg; break;
		case 'r': s->rdir = optarg; break;
		case 'l': s->logp = optarg; break;
		case 'c': s->cwd = optarg; break;
		case 'u': s->user = optarg; break;
		case 'o': {
			char *end;
			unsigned long o = strtoul(optarg, &end, 10);
			if (end == optarg || *end != '\0' || o == 0 || o >= (uid_t)-1)
				return -1;
			s->rowner = (long)o;
			break;
		}
		case 'G': *group_fd = atoi(optarg); return 0;
		case 'R':
			if (req_fd == NULL)
				return -1;
			*req_fd = atoi(optarg);
			return 0;
		default: return -1;
		}
	}
	if (s->dir == NULL || s->logp == NULL || optind >= argc)
		return -1;
	/* -e needs a records directory other than the job's own. */
	if (s->stage_events && s->rdir == NULL)
		return -1;
	if (s->rdir == NULL)
		s->rdir = s->dir;
	s->evfd = -1;
	s->argv = argv + optind;
	return 0;
}

/* Lock RDIR and open LOG: 0, or -1 with a message on stderr and errno
 * (EBUSY: another shim holds the lock). */
static int
sup_open(struct sup *s)
{
	/* The records are written relative to the directory, kept open: a
	 * relative RDIR means the same after a chdir, and a directory
	 * renamed or replaced afterwards changes nothing. The lock is the
	 * directory itself (flock works on a directory's descriptor): no
	 * file to create. */
	s->dirfd = open(s->rdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s->dirfd == -1 || flock(s->dirfd, LOCK_EX | LOCK_NB) == -1) {
		int e = s->dirfd == -1 ? errno : EBUSY;
		fprintf(stderr, "pipeline-shim: %s: %s\n", s->rdir,
		    s->dirfd == -1 ? strerror(errno) : "another shim holds its lock");
		if (s->dirfd >= 0)
			close(s->dirfd);
		errno = e;
		return -1;
	}
	/* The log is not followed if it is a link, and must be a file of
	 * its own (not a FIFO, a device or another name of a file); by hand
	 * it may be the caller's /dev/stderr. */
	struct stat st;
	int strict = strcmp(s->logp, "/dev/stderr") != 0;
	s->logfd = open(s->logp, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC |
	    (strict ? O_NOFOLLOW : 0), 0640);
	if (s->logfd >= 0 && strict && (fstat(s->logfd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    st.st_nlink > 1)) {
		close(s->logfd);
		s->logfd = -1;
		errno = EINVAL;
	}
	if (s->logfd == -1) {
		int e = errno;
		fprintf(stderr, "pipeline-shim: %s: %s\n", s->logp, errno == EINVAL ?
		    "not a regular file of one link" : strerror(errno));
		close(s->dirfd);
		errno = e;
		return -1;
	}
	fcntl(s->logfd, F_SETFL, O_WRONLY | O_APPEND);
	/* A stage process's events (-e): a file of the records directory,
	 * which its owner cannot write by name, reached by the child only
	 * through the descriptor it is handed. */
	if (s->stage_events) {
		s->evfd = openat(s->dirfd, "events", O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW |
		    O_CLOEXEC, 0640);
		if (s->evfd >= 0 && (fstat(s->evfd, &st) == -1 || !S_ISREG(st.st_mode) ||
		    st.st_nlink > 1)) {
			close(s->evfd);
			s->evfd = -1;
			errno = EINVAL;
		}
		if (s->evfd >= 0)
			records_share(s->dirfd, s->evfd);
		if (s->evfd == -1) {
			int e = errno;
			fprintf(stderr, "pipeline-shim: %s/events: %s\n", s->rdir, errno == EINVAL ?
			    "not a regular file of one link" : strerror(errno));
			close(s->logfd);
			close(s->dirfd);
			errno = e;
			return -1;
		}
	}
	s->t0 = now_s();
	return 0;
}

/* The events descriptor is the child's: the shim lets go of it once the
 * child is started (or could not be). */
static void
sup_close_events(struct sup *s)
{
	if (s->evfd >= 0)
		close(s->evfd);
	s->evfd = -1;
}

/* Where PROGRAM is, for a PATH of absolute directories: a run's shim
 * starts the same few programs again and again, so it remembers each
 * name's path per PATH (a shell's hash table) and checks that the file is
 * still executable before each use. NULL when the PATH has a relative
 * entry (the lookup then depends on the child's directory: the child
 * searches) or the name is not found (the child searches, and reports). */
#define NFOUND 32
static struct found { char *name, *path, *file; } found[NFOUND];
static int nfound;

static const char *
env_path(char *const envp[])
{
	for (char *const *e = envp; e && *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			return *e + 5;
	return "/bin:/usr/bin"; /* execvp's default */
}

/* Forget found[i] (its place taken by the last). */
static void
found_drop(int i)
{
	free(found[i].name);
	free(found[i].path);
	free(found[i].file);
	found[i] = found[--nfound];
}

static const char *
find_program(const char *name, const char *path)
{
	for (int i = 0; i < nfound; i++) {
		struct found *f = &found[i];
		if (strcmp(f->name, name) == 0 && strcmp(f->path, path) == 0) {
			if (access(f->file, X_OK) == 0)
				return f->file;
			found_drop(i);
			break;
		}
	}
	char file[PATH_MAX];
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		if (*p != '/')
			return NULL;
		struct stat st;
		if (snprintf(file, sizeof(file), "%.*s/%s", (int)(end - p), p, name) <
		    (int)sizeof(file) && stat(file, &st) == 0 && S_ISREG(st.st_mode) &&
		    access(file, X_OK) == 0)
			break;
		if (*end == '\0')
			return NULL;
		p = end;
	}
	if (nfound == NFOUND)
		found_drop(0);
	struct found *f = &found[nfound++];
	f->name = strdup(name);
	f->path = strdup(path);
	f->file = strdup(file);
	if (f->name == NULL || f->path == NULL || f->file == NULL) {
		found_drop(nfound - 1);
		return NULL;
	}
	return f->file;
}

/* The kernel's sigaction, for the raw system call: glibc's wrapper
 * refuses its own internal signals (32 and 33), which a process started
 * by glibc's posix_spawn (make's recipes, for one) inherits ignored. */
struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

/* The signals a child is given back at their default: those the shim
 * ignores, blocks or reads (SIGPIPE, SIGCHLD, SIGTERM, SIGINT, SIGHUP)
 * and any other this shim inherited ignored (ignored stays ignored across
 * exec): a job program starts with every signal at its default. Found
 * once per shim. */
static int reset_sigs[NSIG];
static int nreset = -1;

static void
find_reset_sigs(void)
{
	static const int own[] = { SIGPIPE, SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2 };
	nreset = 0;
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		reset_sigs[nreset++] = own[i];
	for (int sig = 1; sig < NSIG; sig++) {
		struct ksigaction old;
		int mine = 0;
		for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
			mine |= own[i] == sig;
		if (!mine && sig != SIGKILL && sig != SIGSTOP &&
		    syscall(SYS_rt_sigaction, sig, NULL, &old, sizeof(uint64_t)) == 0 &&
		    old.handler == (void *)SIG_IGN)
			reset_sigs[nreset++] = sig;
	}
}

/* What a vfork child of the shim reports before it exits (it shares the
 * shim's memory until it execs). */
struct child_err {
	volatile int err;
	volatile int chdir_failed;
	volatile int cred_failed;
};

/* In the child: become cr's uid, gid and groups, each step checked, then
 * verified (all three uids and gids, the group list, and no way back to
 * root). Raw system calls: they change this process only, where glibc's
 * wrappers would act for every thread of the shim whose memory a vfork
 * child shares. 0, or -1 with errno. */
static int
drop_privileges(const struct cred *cr)
{
	if (syscall(SYS_setgroups, (size_t)cr->ngroups, cr->groups) == -1 ||
	    syscall(SYS_setresgid, cr->gid, cr->gid, cr->gid) == -1 ||
	    syscall(SYS_setresuid, cr->uid, cr->uid, cr->uid) == -1)
		return -1;
	uid_t ru, eu, su;
	gid_t rg, eg, sg, now[SHIM_NGROUPS];
	long n = syscall(SYS_getgroups, SHIM_NGROUPS, now);
	/* The same groups, in any order: the kernel sorts them. */
	int same = n == cr->ngroups;
	for (long i = 0; same && i < n; i++) {
		same = 0;
		for (int k = 0; !same && k < cr->ngroups; k++)
			same = now[i] == cr->groups[k];
	}
	if (syscall(SYS_getresuid, &ru, &eu, &su) == -1 ||
	    syscall(SYS_getresgid, &rg, &eg, &sg) == -1 || !same ||
	    ru != cr->uid || eu != cr->uid || su != cr->uid ||
	    rg != cr->gid || eg != cr->gid || sg != cr->gid ||
	    (cr->uid != 0 && syscall(SYS_setresuid, 0, 0, 0) != -1)) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

/* The vfork child: never returns. A function of its own, so that its
 * variables live on its own part of the stack. */
static void __attribute__((noreturn, noinline))
child_exec(const struct sup *s, char **envp, const sigset_t *mask, const char *file,
    const char *path, const struct cred *cr, struct child_err *ce)
{
	struct ksigaction dfl = { .handler = (void *)SIG_DFL };
	for (int i = 0; i < nreset; i++)
		syscall(SYS_rt_sigaction, reset_sigs[i], &dfl, NULL, sizeof(uint64_t));
	setpgid(0, 0);
	int nul = open("/dev/null", O_RDONLY);
	if (nul > 0) {
		dup2(nul, 0);
		close(nul);
	}
	dup2(s->logfd, 1);
	dup2(s->logfd, 2);
	/* A job program inherits 0, 1 and 2, nothing else (pipeline-job(7)):
	 * not a run shim's socket (a job reading it would take other jobs'
	 * requests, their environment included), not what the shim's own
	 * starter left open. In this child only: the shim keeps its own. */
	unsigned first = 3;
	if (s->evfd >= 0) {
		/* -e: the stage process's events, descriptor 3. */
		if (s->evfd == 3)
			fcntl(3, F_SETFD, 0);
		else
			dup2(s->evfd, 3);
		first = 4;
	}
	if (close_range(first, ~0U, 0) == -1)
		for (int fd = (int)first; fd < 65536; fd++)
			close(fd);
	/* Before the chdir: the work directory is entered as the job. */
	if (cr != NULL && drop_privileges(cr) == -1) {
		ce->err = errno;
		ce->cred_failed = 1;
		_exit(126);
	}
	if (s->cwd && chdir(s->cwd) == -1) {
		ce->err = errno;
		ce->chdir_failed = 1;
		_exit(126);
	}
	sigprocmask(SIG_SETMASK, mask, NULL);
	if (file != NULL) {
		execve(file, s->argv, envp);
		ce->err = errno;
		_exit(127);
	}
	/* Search PATH here, as posix_spawnp does: ENOENT and the like go on
	 * to the next entry, EACCES is remembered. */
	const char *prog = s->argv[0];
	char cand[PATH_MAX];
	int e = ENOENT, eacces = 0;
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		size_t dl = (size_t)(end - p);
		if (dl + strlen(prog) + 2 <= sizeof(cand)) {
			memcpy(cand, p, dl);
			cand[dl] = '\0';
			if (dl > 0)
				strcat(cand, "/");
			strcat(cand, prog);
			execve(cand, s->argv, envp);
			e = errno;
			if (e == EACCES)
				eacces = 1;
			else if (e != ENOENT && e != ENOTDIR && e != ESTALE && e != ENODEV &&
			    e != ETIMEDOUT)
				break;
		}
		if (*end == '\0')
			break;
		p = end;
	}
	ce->err = eacces && (e == ENOENT || e == ENOTDIR) ? EACCES : e;
	_exit(127);
}

/* Start the child: its own process group, stdin from /dev/null, stdout
 * and stderr to the log, in CWD, with envp and the signal mask `mask`.
 * vfork: nothing of the shim's memory is copied for a child that only
 * execs, and (unlike posix_spawn, which makes a sigaction call per signal
 * in the child) the child resets only what a shim ignores, blocks or
 * inherited ignored (find_reset_sigs). Safe
 * because no shim has a signal handler installed while it spawns (a run's
 * shim takes its signals from a signalfd; the single form installs its
 * handlers after the spawn) and all signals are blocked across the vfork.
 * The pid, or -1 with *status set to what the shim records for a program
 * that could not start (127: not found, 126). */
static pid_t
sup_spawn(struct sup *s, char **envp, const sigset_t *mask, int *status)
{
	const char *prog = s->argv[0], *path = env_path(envp);
	const char *file = strchr(prog, '/') ? prog : find_program(prog, path);
	struct child_err ce = { 0, 0, 0 };
	static struct cred cred; /* not on the stack the vfork child shares */
	if (s->user != NULL && parse_cred(s->user, &cred) == -1) {
		dprintf(s->logfd, "pipeline-shim: bad -u %s (UID:GID[:G1,G2...])\n", s->user);
		*status = 126 << 8;
		return -1;
	}
	if (nreset < 0)
		find_reset_sigs();
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid_t pid = vfork();
	if (pid == 0)
		child_exec(s, envp, mask, file, path, s->user ? &cred : NULL, &ce);
	int e = pid == -1 ? errno : ce.err;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid != -1 && e == 0)
		return pid;
	if (pid > 0)
		waitpid(pid, NULL, 0);
	if (ce.cred_failed)
		dprintf(s->logfd, "pipeline-shim: cannot run as uid %u gid %u: %s\n",
		    (unsigned)cred.uid, (unsigned)cred.gid, strerror(e));
	else if (ce.chdir_failed)
		dprintf(s->logfd, "pipeline-shim: chdir %s: %s\n", s->cwd, strerror(e));
	else if (e == E2BIG) {
		/* Said with both sizes: the job's environment is the usual
		 * cause, and its size is the submitter's to change. */
		size_t n = 0;
		for (char **v = s->argv; *v; v++)
			n += strlen(*v) + 1 + sizeof(char *);
		for (char **v = envp; *v; v++)
			n += strlen(*v) + 1 + sizeof(char *);
		dprintf(s->logfd, "pipeline-shim: cannot run %s: its command line and environment "
		    "are %zu bytes, over the system's limit of %ld bytes (ARG_MAX; 128 KiB an "
		    "entry)\n", prog, n, sysconf(_SC_ARG_MAX));
	} else
		dprintf(s->logfd, "pipeline-shim: cannot run %s: %s\n", prog, strerror(e));
	*status = (e == ENOENT && !ce.chdir_failed && !ce.cred_failed ? 127 : 126) << 8;
	return -1;
}

static void
usage(void)
{
	fprintf(stderr, "usage: pipeline-shim -d DIR [-r RDIR [-e]] -l LOG [-c CWD] [-u UID:GID[:GROUPS]] [-o UID]\n"
	    "           -- PROGRAM [ARG...]\n"
	    "       pipeline-shim -R FD\n"
	    "       pipeline-shim [-u UID:GID[:GROUPS]] -G FD\n");
	exit(2);
}

static int run_shim(int sock, const char *pin, long rowner);

/* A request's bytes from fd: a memfd or a file (read from its start, as
 * often as it is sent), or a pipe (read to its end: a Slurm batch
 * script's). A buffer of *len bytes, or NULL with errno (E2BIG: over
 * SHIM_REQ_MAX). */
static char *
read_request(int fd, size_t *len)
{
	struct stat st;
	if (fstat(fd, &st) == -1)
		return NULL;
	int file = S_ISREG(st.st_mode);
	if (file && (st.st_size < 0 || (uint64_t)st.st_size > SHIM_REQ_MAX)) {
		errno = E2BIG;
		return NULL;
	}
	size_t n = file ? (size_t)st.st_size : 0, got = 0, cap = file ? n + 1 : 65536;
	char *buf = malloc(cap);
	while (buf != NULL && (!file || got < n)) {
		if (!file && got == cap) {
			char *nb = cap >= SHIM_REQ_MAX ? NULL : realloc(buf, cap * 2);
			if (nb == NULL) {
				free(buf);
				errno = E2BIG;
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t r = file ? pread(fd, buf + got, n - got, (off_t)got) :
		    read(fd, buf + got, cap - got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == 0 && !file)
			break;
		if (r <= 0) {
			free(buf);
			errno = r == 0 ? EINVAL : errno;
			return NULL;
		}
		got += (size_t)r;
	}
	*len = got;
	return buf;
}

static int parse_request(char *buf, size_t len, char ***argvp, char ***envpp);

int
main(int argc, char **argv)
{
	struct sup s;
	int gfd, rfd;
	char **envp = environ;
	if (parse_args(argc, argv, &s, &gfd, &rfd) == -1)
		usage();
	if (gfd >= 0)
		return run_shim(gfd, s.user, s.rowner);
	if (rfd >= 0) {
		/* -R: the command line and the environment are the request's;
		 * the shim's own environment is the daemon's clean one. */
		size_t len;
		char *buf = read_request(rfd, &len), **cargv;
		int ac = buf == NULL ? -1 : parse_request(buf, len, &cargv, &envp);
		if (ac < 0 || parse_args(ac, cargv, &s, &gfd, NULL) == -1 || gfd >= 0) {
			fprintf(stderr, "pipeline-shim: -R %d: %s\n", rfd,
			    buf == NULL ? strerror(errno) : "a malformed request");
			return 2;
		}
		/* Standard input (a batch script's pipe) becomes /dev/null. */
		int nul = rfd == 0 ? open("/dev/null", O_RDONLY) : -1;
		if (nul > 0) {
			dup2(nul, 0);
			close(nul);
		} else if (rfd != 0)
			close(rfd);
	}

	/* The first form's -o: the records' group only (above). */
	records_owner = s.rowner;
	setsid();
	if (sup_open(&s) == -1)
		return 2;
	if (rfd < 0 && getenv("PL_EVENTS") == NULL) {
		char events[4200], *abs = realpath(s.dir, NULL);
		snprintf(events, sizeof(events), "%s/events", abs ? abs : s.dir);
		free(abs);
		setenv("PL_EVENTS", events, 1);
	}
	if (rfd < 0 && getenv("PL_JOB_DIR") == NULL)
		setenv("PL_JOB_DIR", s.dir, 1);
	if (rfd < 0)
		envp = environ;

	/* Block the forwarded signals until the child's group is known. */
	static const int fwd[] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2 };
	sigset_t set, old;
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof(fwd) / sizeof(fwd[0]); i++)
		sigaddset(&set, fwd[i]);
	sigprocmask(SIG_BLOCK, &set, &old);
	int status = 0;
	pid_t pid = sup_spawn(&s, envp, &old, &status);
	sup_close_events(&s);
	if (pid > 0)
		child_pgid = pid;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	for (size_t i = 0; i < sizeof(fwd) / sizeof(fwd[0]); i++)
		sigaction(fwd[i], &sa, NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);

	if (pid > 0) {
		record_shim(s.dirfd, getpid(), starttime(getpid()), pid);
		while (waitpid(pid, &status, 0) == -1) {
			if (errno != EINTR) {
				status = 0;
				break;
			}
		}
	}
	if (record_exit(s.dirfd, s.logfd, status, s.t0) == -1) {
		fprintf(stderr, "pipeline-shim: cannot record the exit in %s: %s\n", s.rdir,
		    strerror(errno));
		return 1;
	}
	return 0;
}

/* ---- a run's shim ------------------------------------------------------ */


struct child {
	pid_t pid;
	int dirfd;
	int donefd;    /* the pipe's write end: closed once exit.json is in */
	double t0;
	int logfd;     /* the job log, for a record that cannot be written */
};

/* The refusal of a request, on its pipe. */
static void
reply(int fd, int err, unsigned long long start)
{
	struct shim_reply r = { .pid = getpid(), .err = err, .start = start };
	while (write(fd, &r, sizeof(r)) == -1 && errno == EINTR)
		;
}

/* One request's message: its pipe's write end in *fd and its memfd in
 * *req (-1: none attached). 1, 0 when the daemon's end closed, -1 on
 * error. */
static int
recv_request(int sock, int *fd, int *req)
{
	char b[16];
	struct iovec iov = { .iov_base = b, .iov_len = sizeof(b) };
	union { char b[CMSG_SPACE(2 * sizeof(int))]; struct cmsghdr align; } c;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = c.b, .msg_controllen = sizeof(c.b) };
	*fd = *req = -1;
	ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return (int)n;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
		size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (nfd >= 1)
			memcpy(fd, CMSG_DATA(cm), sizeof(int));
		if (nfd >= 2)
			memcpy(req, CMSG_DATA(cm) + sizeof(int), sizeof(int));
	}
	return 1;
}

/* Whether RDIR (open as dirfd) may hold the records of a process that
 * runs as another user: this shim's own (or, rowner not -1, the daemon
 * user's that the shim's command line named), writable by nobody else.
 * 0, or -1 with errno EPERM and a line in the log. */
static int
records_own(const struct sup *s, long rowner)
{
	struct stat st;
	if (s->user == NULL)
		return 0;
	if (fstat(s->dirfd, &st) == 0 && (st.st_uid == geteuid() ||
	    (rowner > 0 && st.st_uid == (uid_t)rowner)) && !(st.st_mode & 022))
		return 0;
	dprintf(s->logfd, "pipeline-shim: %s: the records directory of a process run as "
	    "another user must be the shim's own, writable by nobody else\n", s->rdir);
	errno = EPERM;
	return -1;
}

/* An environment entry and where it stood, for env_dedupe(). */
struct envent {
	const char *s;
	size_t namelen;
	int at;
};

static int
envent_cmp(const void *a, const void *b)
{
	const struct envent *x = a, *y = b;
	size_t n = x->namelen < y->namelen ? x->namelen : y->namelen;
	int c = memcmp(x->s, y->s, n);
	if (c != 0)
		return c;
	if (x->namelen != y->namelen)
		return x->namelen < y->namelen ? -1 : 1;
	return x->at - y->at;
}

/* In a request's environment an entry replaces an earlier one of the same
 * name (a Slurm batch script sends the batch step's environment, then the
 * job's): the later ones are kept, in their order. */
static void
env_dedupe(char **envp)
{
	int n = 0;
	while (envp[n])
		n++;
	if (n < 2)
		return;
	struct envent *e = calloc((size_t)n, sizeof(*e));
	char *drop = calloc((size_t)n, 1);
	if (e == NULL || drop == NULL) {
		free(e);
		free(drop);
		return;
	}
	for (int i = 0; i < n; i++)
		e[i] = (struct envent){ envp[i], strcspn(envp[i], "="), i };
	qsort(e, (size_t)n, sizeof(*e), envent_cmp);
	for (int i = 0; i + 1 < n; i++)
		if (e[i].namelen == e[i + 1].namelen && memcmp(e[i].s, e[i + 1].s, e[i].namelen) == 0)
			drop[e[i].at] = 1;
	int k = 0;
	for (int i = 0; i < n; i++)
		if (!drop[i])
			envp[k++] = envp[i];
	envp[k] = NULL;
	free(e);
	free(drop);
}

/* Split a request into argv and envp (pointers into buf; in envp a later
 * entry replaces an earlier one of its name): argc, or -1 when it is
 * malformed. */
static int
parse_request(char *buf, size_t len, char ***argvp, char ***envpp)
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
	*argvp = v;
	*envpp = v + ac + 1;
	env_dedupe(*envpp);
	return (int)ac;
}

/* Whether the request's -u (text, NULL: none) is the pin's (pin), the
 * one owner a run's shim started with -u takes requests for: the same
 * uid, gid and groups. */
static int
pinned_ok(const struct cred *pin, const char *text)
{
	static struct cred c;
	if (text == NULL || parse_cred(text, &c) == -1)
		return 0;
	return c.uid == pin->uid && c.gid == pin->gid && c.ngroups == pin->ngroups &&
	    memcmp(c.groups, pin->groups, (size_t)c.ngroups * sizeof(gid_t)) == 0;
}

static int
run_shim(int sock, const char *pin, long rowner)
{
	static struct cred pinc;
	if (pin != NULL && (parse_cred(pin, &pinc) == -1 || pinc.uid == 0)) {
		fprintf(stderr, "pipeline-shim: -u %s: a run's shim is pinned to one owner "
		    "other than root (UID:GID[:G1,G2...])\n", pin);
		return 2;
	}
	records_owner = rowner;
	setsid(); /* terminal signals meant for the daemon stay away */
	if (sock > 3)
		close_range(3, (unsigned)sock - 1, 0);
	close_range((unsigned)sock + 1, ~0U, 0);
	fcntl(sock, F_SETFD, FD_CLOEXEC);
	unsigned long long self_start = starttime(getpid());
	sigset_t sigs, none;
	sigemptyset(&sigs);
	sigemptyset(&none);
	sigaddset(&sigs, SIGCHLD);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	struct child *kids = NULL;
	int nkids = 0, cap = 0;
	if (sfd == -1)
		return 1;
	while (sock >= 0 || nkids > 0) {
		struct pollfd pf[2] = { { .fd = sfd, .events = POLLIN }, { .fd = sock, .events = POLLIN } };
		if (poll(pf, sock >= 0 ? 2 : 1, -1) == -1 && errno != EINTR)
			return 1;
		if (pf[0].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGCHLD)
					continue;
				/* Forwarded to every process of the run. */
				for (int i = 0; i < nkids; i++)
					kill(-kids[i].pid, (int)si.ssi_signo);
			}
			int status;
			pid_t pid;
			while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
				for (int i = 0; i < nkids; i++) {
					if (kids[i].pid != pid)
						continue;
					record_exit(kids[i].dirfd, kids[i].logfd, status, kids[i].t0);
					close(kids[i].logfd);
					close(kids[i].dirfd); /* and its lock */
					close(kids[i].donefd);
					kids[i] = kids[--nkids];
					break;
				}
			}
		}
		if (sock < 0 || !(pf[1].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		int done, rq;
		int n = recv_request(sock, &done, &rq);
		if (n == 0 || (n == -1 && errno != EINTR)) {
			close(sock); /* the run ended or the daemon went */
			sock = -1;
			continue;
		}
		if (n == -1 || done < 0) {
			if (rq >= 0)
				close(rq);
			continue; /* no pipe: nobody waits for a reply */
		}
		size_t len = 0;
		char *buf = rq >= 0 ? read_request(rq, &len) : NULL, **cargv, **cenv;
		int err = rq < 0 ? EINVAL : errno;
		if (rq >= 0)
			close(rq);
		int ac = buf == NULL ? -1 : parse_request(buf, len, &cargv, &cenv);
		struct sup s;
		int gfd;
		int bad = ac < 0 || parse_args(ac, cargv, &s, &gfd, NULL) == -1 || gfd >= 0;
		if (bad || (pin != NULL && !pinned_ok(&pinc, s.user))) {
			if (ac >= 0)
				free(cargv);
			free(buf);
			reply(done, buf == NULL ? err : bad ? EINVAL : EPERM, self_start);
			close(done);
			continue;
		}
		if (nkids == cap) {
			/* Room for the child first: one the shim could not
			 * track would never get its exit.json. */
			struct child *nk = reallocarray(kids, cap ? 2 * (size_t)cap : 16, sizeof(*kids));
			if (nk == NULL) {
				free(cargv);
				free(buf);
				reply(done, ENOMEM, self_start);
				close(done);
				continue;
			}
			kids = nk;
			cap = cap ? 2 * cap : 16;
		}
		int opened = sup_open(&s) == 0;
		if (!opened || records_own(&s, rowner) == -1) {
			err = errno;
			if (opened) {
				sup_close_events(&s);
				close(s.logfd);
				close(s.dirfd);
			}
			free(cargv);
			free(buf);
			reply(done, err, self_start);
			close(done);
			continue;
		}
		int status = 0;
		pid_t pid = sup_spawn(&s, cenv, &none, &status);
		sup_close_events(&s);
		if (pid > 0) {
			record_shim(s.dirfd, getpid(), self_start, pid);
			kids[nkids++] = (struct child){ pid, s.dirfd, done, s.t0, s.logfd };
		} else {
			/* It never ran: the record now, and the pipe closed. */
			record_exit(s.dirfd, s.logfd, status, s.t0);
			close(s.logfd);
			close(s.dirfd);
			close(done);
		}
		free(cargv);
		free(buf);
	}
	return 0;
}
