/*
 * exec_slurm.c: the slurm executor. start() writes DIR/job.sbatch, a batch
 * script that runs the shim on a compute node in the process directory
 * (which must be on a filesystem the nodes share, at the same path), and
 * submits it with sbatch; wait() follows the job through Slurm (scontrol
 * show job, then sacct, then the jobcomp file once the controller has
 * forgotten it) while progress and the ending come from the shim's files,
 * exactly as for local jobs.
 *
 * Files this executor keeps in the daemon's records directory
 * (proc_records_dir(), exec.h), which the job cannot write:
 *   slurm.ended   the daemon recorded the end; a late requeue of the job
 *                 then runs nothing. The batch script reads it on the
 *                 node as the job's user, often the run's owner, who
 *                 cannot write the directory (as the process directory
 *                 would be: a daemon process of its own user cannot
 *                 write a run owner's): the file is anyone's to read,
 *                 the directory and its .shim parent let anyone through
 *                 (0711) without listing them
 * and what the daemon alone reads back and acts on as root:
 *   job.sbatch    the script as submitted (slurm_script() explains it):
 *                 sbatch reads it after the daemon wrote it; Slurm runs
 *                 it as the run's owner where the privileged parent
 *                 submitted it as the owner (a split daemon's run with
 *                 an owner, priv.c), as root for root's own runs in a
 *                 split daemon (submitted by the parent too, as root),
 *                 else as the daemon's user (a daemon that is not split
 *                 runs sbatch itself)
 *   slurm.owner   the owner the parent submitted the job as ("root" for
 *                 root's own run), whose scancel (through the parent)
 *                 stops it
 *   slurm.jobid   the job id, written as soon as sbatch answered, so a
 *                 daemon killed before it stored the id still finds it
 *                 (and cancels that job, no other)
 *   slurm.cancel  the daemon stopped the job (the signal number)
 * The shim's records (shim.json, exit.json) are in the process directory
 * on the shared file system by design: the ending is read from there, and
 * nothing the daemon does as root takes a number from them. Root's own
 * run's shim, root in the batch step, gives them the directory's group
 * (-o) when the daemon process is not root, so that it reads them; a
 * run owner's shim's, the owner's, the daemon process reads through the
 * owner's file server (struct proc's open_as) as it reads the events.
 *
 * Slurm states map onto proc states in slurm.c. An ending is final only
 * when Slurm's state is terminal: a job whose processes were killed is
 * often requeued a moment later (preemption, node failure, an operator's
 * `scontrol requeue`), and then the same job id runs the script again,
 * which resumes from the newest complete checkpoint.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pld.h"
#include "plio.h"
#include "priv.h"
#include "slurm.h"

/* How long a job that Slurm says was killed (cancelled, preempted, node
 * failure, or ended without an exit record), without the daemon having
 * stopped it, must stay ended before it is believed: `scancel
 * --signal=KILL` followed by `scontrol requeue` passes through CANCELLED
 * for a moment, and the shim may have recorded its child's SIGKILL. */
#define SETTLE_S 3.0

/* Per-job bookkeeping that struct proc has no room for. Job threads call
 * the executor concurrently, hence the lock. */
struct track {
	char id[64];
	double last_query;   /* monotonic */
	double ended_seen;   /* when a terminal state without exit record was first seen */
	int signalled;       /* the daemon stopped it (slurm.cancel) */
	int restarts;        /* Slurm's restart count last seen; -1 unknown */
	int warned;          /* a query failure was logged */
	struct track *next;
};
static struct track *tracks;
static pthread_mutex_t tracks_lock = PTHREAD_MUTEX_INITIALIZER;

static struct track *
track_get(const struct proc *p)
{
	pthread_mutex_lock(&tracks_lock);
	struct track *t;
	for (t = tracks; t; t = t->next)
		if (strcmp(t->id, p->ext_id) == 0)
			break;
	if (t == NULL) {
		t = xcalloc(1, sizeof(*t));
		snprintf(t->id, sizeof(t->id), "%s", p->ext_id);
		t->restarts = -1;
		t->last_query = -1e9;
		t->next = tracks;
		tracks = t;
	}
	pthread_mutex_unlock(&tracks_lock);
	return t;
}

static void
track_drop(const struct proc *p)
{
	pthread_mutex_lock(&tracks_lock);
	for (struct track **tp = &tracks; *tp; tp = &(*tp)->next) {
		if (strcmp((*tp)->id, p->ext_id) == 0) {
			struct track *t = *tp;
			*tp = t->next;
			free(t);
			break;
		}
	}
	pthread_mutex_unlock(&tracks_lock);
}

/* Whether name is one of the daemon's own files (above). */
static int
own_file(const char *name)
{
	return strcmp(name, "slurm.jobid") == 0 || strcmp(name, "slurm.cancel") == 0 ||
	    strcmp(name, "job.sbatch") == 0 || strcmp(name, "slurm.owner") == 0 ||
	    strcmp(name, "slurm.ended") == 0;
}

static void
dir_file(const struct proc *p, const char *name, char *buf, size_t len)
{
	if (own_file(name)) {
		char rdir[PATH_MAX];
		proc_records_dir(p->dir, rdir, sizeof(rdir));
		snprintf(buf, len, "%s/%s", rdir, name);
	} else
		snprintf(buf, len, "%s/%s", p->dir, name);
}

static int
dir_has(const struct proc *p, const char *name)
{
	char f[PATH_MAX + 32];
	dir_file(p, name, f, sizeof(f));
	return access(f, F_OK) == 0;
}

static int
dir_put(const struct proc *p, const char *name, const char *text)
{
	char f[PATH_MAX + 32];
	if (own_file(name)) {
		proc_records_dir(p->dir, f, sizeof(f));
		if (plc_mkdirs(f, 0700) == -1) {
			log_warn("%s: %s", __func__, f);
			return -1;
		}
	}
	dir_file(p, name, f, sizeof(f));
	if (plc_write_file_atomic(f, text, strlen(text), 0640) == -1) {
		log_warn("%s: %s", __func__, f);
		return -1;
	}
	return 0;
}

/* Append one line to the job log, so that the operator reading it sees
 * what Slurm said (a refused submission above all). */
static void
joblog(const struct proc *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
joblog(const struct proc *p, const char *fmt, ...)
{
	if (p->log[0] == '\0' || strncmp(p->log, "/dev/", 5) == 0)
		return;
	FILE *f = fopen(p->log, "ae");
	if (f == NULL)
		return;
	char ts[32];
	time_t now = time(NULL);
	struct tm tm;
	strftime(ts, sizeof(ts), "%H:%M:%S", localtime_r(&now, &tm));
	va_list ap;
	va_start(ap, fmt);
	fprintf(f, "[pipelined %s] slurm: ", ts);
	vfprintf(f, fmt, ap);
	fputc('\n', f);
	va_end(ap);
	fclose(f);
}

static int
opts(const struct proc *p, struct slurm_opts *o)
{
	char err[256];
	if (slurm_opts_parse(p->opts, o, err, sizeof(err)) == -1) {
		log_warnx("%s: %s: slurm option %s", __func__, p->dir, err);
		return -1;
	}
	slurm_set_bin_dir(o->bin_dir);
	return 0;
}

static int
slurm_start(struct proc *p, char *const argv[], char *const envp[], const char *cwd)
{
	struct slurm_opts o;
	char err[512], path[PATH_MAX + 32];
	if (opts(p, &o) == -1) {
		snprintf(p->reason, sizeof(p->reason), "bad slurm option (see the daemon log)");
		return -1;
	}
	/* Leftovers of an earlier start of this process directory. */
	static const char *const stale[] = { "slurm.ended", "slurm.cancel", "slurm.jobid",
		"slurm.owner", NULL };
	for (int i = 0; stale[i]; i++) {
		dir_file(p, stale[i], path, sizeof(path));
		unlink(path);
	}
	/* A split daemon's run with an owner (priv.c): the batch job is the
	 * owner's in Slurm, submitted by the parent as the owner, so its
	 * batch step and the shim in it run as the owner. That shim gets no
	 * -u: it has nobody to become (a shim that is not root cannot even
	 * set its groups, and refuses). The job log, which Slurm (--output)
	 * and the shim append to as the owner, is given to the owner. Root's
	 * own run (no -u) is submitted by the parent too, as root, by its
	 * rule for root: the job is root's and its shim, with no -u, runs as
	 * root, as when the daemon submitted it. */
	const char *owner = priv_active() ? argv_owner(argv) : "";
	int by_parent = priv_active();
	char **av = NULL, ouid[16];
	if (by_parent && owner[0] == '\0' && dir_put(p, "slurm.owner", "root") == -1) {
		snprintf(p->reason, sizeof(p->reason), "cannot record the job's owner");
		return -1;
	}
	/* The shim's argv as the batch step runs it: a run owner's without
	 * -u OWNER (the step is the owner's already); root's, where the
	 * daemon process is not root (user, or _pipelined), with -o UID
	 * first: the shim, root in the batch step, writes its records root's
	 * in the process directory, the daemon process's, and -o gives them
	 * that directory's group, so that the daemon process reads them
	 * (pipeline-shim's first form). */
	if (owner[0] || (by_parent && geteuid() != 0)) {
		int n = 0, k = 0;
		while (argv[n])
			n++;
		av = xcalloc((size_t)n + 3, sizeof(char *));
		av[k++] = argv[0];
		if (!owner[0]) {
			snprintf(ouid, sizeof(ouid), "%u", (unsigned)geteuid());
			av[k++] = "-o";
			av[k++] = ouid;
		}
		for (int i = 1; i < n; i++) {
			if (strcmp(argv[i], "-u") == 0 && i + 1 < n && argv[i + 1] == owner)
				i++;
			else
				av[k++] = argv[i];
		}
	}
	if (owner[0]) {
		uid_t uid;
		gid_t gid;
		int fd = open(p->log, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
		if (fd == -1 || owner_ids(owner, &uid, &gid) == -1 || priv_fchown(fd, uid, gid) == -1 ||
		    dir_put(p, "slurm.owner", owner) == -1) {
			log_warn("%s: %s: the job log for owner %s", __func__, p->log, owner);
			snprintf(p->reason, sizeof(p->reason), "cannot give the job log to its owner");
			if (fd != -1)
				close(fd);
			free(av);
			return -1;
		}
		close(fd);
	}
	char rdir[PATH_MAX];
	proc_records_dir(p->dir, rdir, sizeof(rdir));
	char *text = slurm_script(&o, p->dir, rdir, p->log, av ? av : argv, envp, cwd, err,
	    sizeof(err));
	free(av);
	if (text == NULL) {
		log_warnx("%s: %s: batch script: %s", __func__, p->dir, err);
		joblog(p, "cannot write the batch script: %s", err);
		snprintf(p->reason, sizeof(p->reason), "batch script: %.100s", err);
		return -1;
	}
	dir_file(p, "job.sbatch", path, sizeof(path));
	int rc = dir_put(p, "job.sbatch", text);
	free(text);
	if (rc == -1)
		return -1;
	if (by_parent) {
		int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd == -1)
			snprintf(err, sizeof(err), "%s: %s", path, strerror(errno));
		rc = fd == -1 ? -1 : priv_sbatch(owner[0] ? owner : NULL, fd, p->ext_id,
		    sizeof(p->ext_id), err, sizeof(err));
		if (fd != -1)
			close(fd);
	} else
		rc = slurm_submit(path, p->ext_id, sizeof(p->ext_id), err, sizeof(err));
	if (rc == -1) {
		log_warnx("%s: %s: sbatch refused the job: %s", __func__, path, err);
		joblog(p, "sbatch refused the job: %s", err);
		snprintf(p->reason, sizeof(p->reason), "sbatch: %.110s", err);
		p->ext_id[0] = '\0';
		return -1;
	}
	char line[80];
	snprintf(line, sizeof(line), "%s\n", p->ext_id);
	dir_put(p, "slurm.jobid", line);
	struct track *t = track_get(p);
	t->last_query = -1e9;
	/* Queued until the first wait() asks Slurm: that one brings Slurm's
	 * pending reason (the host publishes reason changes too), or RUNNING.
	 * A daemon killed before it stored the id adopts by slurm.jobid. */
	p->state = PROC_QUEUED;
	snprintf(p->reason, sizeof(p->reason), "submitted");
	log_info("%s: %s: submitted as Slurm job %s", __func__, p->dir, p->ext_id);
	joblog(p, "submitted as Slurm job %s (%s)", p->ext_id, path);
	return 0;
}

/* Did slurmstepd kill this job's batch step for exceeding its memory?
 * Without the cgroup plugins Slurm records such a job as FAILED, not
 * OUT_OF_MEMORY, and says so only in the job's output. */
static int
memory_killed(const struct proc *p)
{
	int fd = open(p->log, O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return 0;
	struct stat st;
	char buf[65536 + 1];
	ssize_t n = 0;
	if (fstat(fd, &st) == 0) {
		off_t off = st.st_size > 65536 ? st.st_size - 65536 : 0;
		n = pread(fd, buf, sizeof(buf) - 1, off);
	}
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char needle[96];
	snprintf(needle, sizeof(needle), "StepId=%s.batch exceeded memory limit", p->ext_id);
	return strstr(buf, needle) != NULL;
}

static void
mark_ended(struct proc *p)
{
	char text[160], f[PATH_MAX + 32];
	snprintf(text, sizeof(text), "%s %s\n", p->ext_id, p->end_class[0] ? p->end_class : "-");
	if (dir_put(p, "slurm.ended", text) == -1)
		return;
	/* For the batch script, as the job's user (above). */
	dir_file(p, "slurm.ended", f, sizeof(f));
	if (chmod(f, 0644) == -1)
		log_warn("%s: %s", __func__, f);
	for (int up = 0; up < 2; up++) {
		*strrchr(f, '/') = '\0';
		if (chmod(f, 0711) == -1)
			log_warn("%s: %s", __func__, f);
	}
}

/*
 * Ask Slurm once and move p accordingly. Returns 1 when p ended (state,
 * ending and class filled in), 0 otherwise.
 */
static int
query(struct proc *p, const struct slurm_opts *o, struct track *t)
{
	struct slurm_job j;
	char err[256] = "";
	int q = slurm_query(p->ext_id, o->jobcomp, &j, err, sizeof(err));
	double now = plc_mono_secs();
	if (q == -1) {
		if (!t->warned)
			log_warnx("%s: Slurm job %s: cannot ask Slurm (will retry): %s",
			    __func__, p->ext_id, err);
		t->warned = 1;
		return 0;
	}
	if (t->warned)
		log_info("%s: Slurm job %s: Slurm answers again", __func__, p->ext_id);
	t->warned = 0;
	if (q == 0) {
		/* No source knows the job: the controller forgot it and the
		 * cluster keeps neither accounting nor completion records. */
		p->end_class[0] = '\0';
		if (proc_read_exit(p) == 1) {
			snprintf(p->reason, sizeof(p->reason), "Slurm job %s forgotten by Slurm; "
			    "ending from the exit record", p->ext_id);
		} else {
			p->state = PROC_LOST;
			snprintf(p->reason, sizeof(p->reason), "Slurm job %s unknown to scontrol, "
			    "sacct and jobcomp, and no exit record", p->ext_id);
		}
		mark_ended(p);
		return 1;
	}
	int ps = slurm_proc_state(j.state);
	if (ps != PROC_ENDED) {
		t->ended_seen = 0;
		if (t->restarts >= 0 && j.restarts > t->restarts) {
			log_info("%s: Slurm job %s was requeued (restart %d)", __func__, p->ext_id,
			    j.restarts);
			joblog(p, "Slurm requeued job %s (restart %d); it resumes from its newest "
			    "complete checkpoint when it runs again", p->ext_id, j.restarts);
		}
		if (j.restarts >= 0)
			t->restarts = j.restarts;
		if (ps == PROC_QUEUED) {
			const char *why = j.reason[0] ? j.reason : j.state_name;
			if (j.restarts > 0)
				snprintf(p->reason, sizeof(p->reason), "%s (requeued, restart %d)",
				    why, j.restarts);
			else
				snprintf(p->reason, sizeof(p->reason), "%s", why);
		} else {
			if (p->state != PROC_RUNNING)
				log_info("%s: Slurm job %s running on %s", __func__, p->ext_id,
				    j.nodes[0] ? j.nodes : "?");
			p->reason[0] = '\0';
		}
		p->state = ps;
		return 0;
	}

	int state_before = p->state;
	int have_exit = proc_read_exit(p) == 1;  /* sets PROC_ENDED when present */
	/* Endings that a requeue may follow at once, when the daemon did not
	 * ask for them: the processes were killed from outside (the exit
	 * record, if any, says killed), and Slurm or an operator may run the
	 * job again under the same id. */
	int requeueable = !have_exit || j.state == SLURM_CANCELLED || j.state == SLURM_NODE_FAIL ||
	    j.state == SLURM_PREEMPTED || j.state == SLURM_BOOT_FAIL;
	if (requeueable && !t->signalled && !dir_has(p, "slurm.cancel")) {
		if (t->ended_seen == 0)
			t->ended_seen = now;
		if (now - t->ended_seen < SETTLE_S) {
			/* Not ended yet for the daemon: the next wait() asks again. */
			p->state = state_before;
			return 0;
		}
	}
	snprintf(p->end_class, sizeof(p->end_class), "%s", slurm_end_class(j.state));
	if (p->end_class[0] == '\0' && (j.state == SLURM_FAILED || j.state == SLURM_CANCELLED) &&
	    memory_killed(p))
		snprintf(p->end_class, sizeof(p->end_class), "oom");
	if (strcmp(p->end_class, "cancelled") == 0 && memory_killed(p))
		snprintf(p->end_class, sizeof(p->end_class), "oom");
	if (have_exit) {
		p->state = PROC_ENDED;
		snprintf(p->reason, sizeof(p->reason), "Slurm job %s %s%s%s%s", p->ext_id,
		    j.state_name, j.reason[0] ? " (" : "", j.reason, j.reason[0] ? ")" : "");
	} else if (j.state == SLURM_COMPLETED) {
		/* Slurm saw the script succeed, yet the shim recorded nothing:
		 * the process directory is not shared with the node, or the
		 * shim could not write it. */
		p->state = PROC_LOST;
		snprintf(p->reason, sizeof(p->reason), "Slurm job %s COMPLETED but left no exit "
		    "record (is the state directory shared with the nodes?)", p->ext_id);
	} else {
		/* Ended by Slurm before the shim could record anything
		 * (cancelled while queued, killed with the node, SIGKILL): a
		 * kill, with Slurm's signal when it recorded one. */
		p->state = PROC_ENDED;
		p->exited = 0;
		p->status = 0;
		p->sig = j.exit_signal > 0 ? j.exit_signal : SIGKILL;
		snprintf(p->reason, sizeof(p->reason), "Slurm job %s %s%s%s%s, no exit record",
		    p->ext_id, j.state_name, j.reason[0] ? " (" : "", j.reason,
		    j.reason[0] ? ")" : "");
	}
	log_info("%s: %s (%s)", __func__, p->reason, p->end_class[0] ? p->end_class : "no class");
	joblog(p, "%s%s%s", p->reason, p->end_class[0] ? "; class " : "", p->end_class);
	mark_ended(p);
	return 1;
}

static int
slurm_wait(struct proc *p, int timeout_ms)
{
	if (p->state == PROC_ENDED || p->state == PROC_LOST)
		return 1;
	if (p->ext_id[0] == '\0') {
		errno = ESRCH;
		return -1;
	}
	struct slurm_opts o;
	if (opts(p, &o) == -1)
		return -1;
	struct track *t = track_get(p);
	double end = plc_mono_secs() + timeout_ms / 1000.0;
	int state0 = p->state;
	for (;;) {
		double now = plc_mono_secs();
		/* Once the exit record exists, look more often: the job ends
		 * in Slurm a moment later. */
		double every = dir_has(p, "exit.json") ? 0.5 : o.poll;
		if (t->ended_seen > 0)
			every = 0.5;
		if (now - t->last_query >= every) {
			t->last_query = now;
			if (query(p, &o, t) == 1)
				return 1;
			if (p->state != state0)
				return 0;
		}
		double left = end - plc_mono_secs();
		if (left <= 0)
			return 0;
		usleep((useconds_t)((left < 0.1 ? left : 0.1) * 1e6));
	}
}

static int
slurm_adopt(struct proc *p)
{
	if (p->ext_id[0] == '\0') {
		/* Killed between sbatch and storing the id: the id file has it. */
		char f[PATH_MAX + 32];
		dir_file(p, "slurm.jobid", f, sizeof(f));
		char *t = plc_read_file(f, NULL, 128);
		if (t != NULL) {
			t[strcspn(t, "\r\n")] = '\0';
			snprintf(p->ext_id, sizeof(p->ext_id), "%s", t);
			free(t);
		}
	}
	if (p->ext_id[0] == '\0') {
		if (proc_read_exit(p) == 1)
			return 0;
		p->state = PROC_STARTING; /* never submitted */
		return 0;
	}
	struct slurm_opts o;
	if (opts(p, &o) == -1)
		return -1;
	struct track *t = track_get(p);
	t->signalled = dir_has(p, "slurm.cancel");
	if (p->state != PROC_QUEUED && p->state != PROC_RUNNING)
		p->state = PROC_QUEUED;
	t->last_query = plc_mono_secs();
	query(p, &o, t);
	log_info("%s: Slurm job %s re-adopted (%s)", __func__, p->ext_id,
	    p->state == PROC_QUEUED ? "queued" : p->state == PROC_RUNNING ? "running" :
	    p->state == PROC_ENDED ? "ended" : "lost");
	return 0;
}

/*
 * Stopping signals (TERM, INT, HUP) go to every process of a running job
 * (scancel --full); USR1 and USR2 to the batch shell, which forwards them
 * to the job's process group; SIGKILL, and anything for a job that is not
 * running yet, cancels the job (scancel).
 */
static int
slurm_signal(struct proc *p, int sig)
{
	if (p->ext_id[0] == '\0') {
		errno = ESRCH;
		return -1;
	}
	int stop = sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGKILL;
	int s = sig == SIGKILL || p->state != PROC_RUNNING ? 0 : sig;
	if (stop || s == 0) {
		char text[32];
		snprintf(text, sizeof(text), "%d\n", sig);
		dir_put(p, "slurm.cancel", text);
		track_get(p)->signalled = 1;
	}
	char err[256] = "", f[PATH_MAX + 32];
	/* Look again soon: the ending follows within a moment. */
	track_get(p)->last_query = plc_mono_secs() - 1e9;
	/* The parent's job, submitted as its owner: cancelled by the parent
	 * as the same owner, so that Slurm refuses any job not the owner's
	 * (and the parent any it did not submit); root's ("root") as root. */
	dir_file(p, "slurm.owner", f, sizeof(f));
	char *owner = priv_active() ? plc_read_file(f, NULL, 1024) : NULL;
	if (owner != NULL)
		owner[strcspn(owner, "\n")] = '\0';
	int rc = owner != NULL ? priv_scancel(strcmp(owner, "root") == 0 ? NULL : owner,
	    p->ext_id, s, err, sizeof(err)) : slurm_cancel(p->ext_id, s, err, sizeof(err));
	free(owner);
	if (rc == -1) {
		log_warnx("%s: scancel %s%s: %s", __func__, p->ext_id, s ? " --signal" : "", err);
		return -1;
	}
	log_info("%s: Slurm job %s: %s %d%s%s", __func__, p->ext_id,
	    s == 0 ? "cancelled for signal" : "sent signal", sig, err[0] ? ": " : "", err);
	return 0;
}

static void
slurm_release(struct proc *p)
{
	track_drop(p);
}

const struct executor exec_slurm = {
	.name = "slurm",
	.batch = 1,
	.start = slurm_start,
	.adopt = slurm_adopt,
	.wait = slurm_wait,
	.signal = slurm_signal,
	.release = slurm_release,
};
