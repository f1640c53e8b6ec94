/*
 * priv.c: the privileged parent of a multi-user daemon, after OpenBSD's
 * bgpd and relayd (priv.h; pipelined(8) SECURITY). The parent keeps root
 * and does nothing but wait for the daemon process's requests, check
 * each by rules of its own and act:
 *
 *   PRIV_SHIM_START  starts a run's pipeline-shim pinned to one owner
 *                    (-u before -G), never uid 0 and never a user who is
 *                    neither job_user nor, by the group database the
 *                    parent reads itself, a member of group or
 *                    admin_group; root's own runs without job_user get an
 *                    unpinned shim only while the parent's configuration
 *                    has no job_user. The shim's socket goes back.
 *   PRIV_SIGNAL      reads the records directory named, below the state
 *                    directory, the daemon's and writable by nobody else,
 *                    and its shim.json, root's (the shim's); signals only
 *                    the child of a shim this parent started (or one
 *                    started before it, by an earlier parent), by its
 *                    pidfd and start time, and its group while it leads
 *                    it; never a pid or group under 2.
 *   PRIV_FCHOWN      gives regular files or directories the daemon's user
 *                    owns (one to three, each checked) to an owner the
 *                    shim rule allows.
 *   PRIV_NOTIFY      passes READY=1, STOPPING=1 or STATUS=... to the
 *                    service manager, which hears the main process only.
 *   PRIV_SBATCH      runs sbatch --parsable as a run's owner (the shim
 *                    rule, and never uid or gid 0), or for root's own
 *                    runs as root by the shim's rule for root (root
 *                    vouched for, no job_user), in an environment of
 *                    its own PATH and SLURM_CONF, the batch script a
 *                    regular file it was given as a descriptor, on
 *                    sbatch's standard input; the answer goes back only
 *                    as a job id, remembered with the owner's uid (0 for
 *                    root's). The job is the owner's in Slurm and runs
 *                    as the owner (root's, as root).
 *   PRIV_SCANCEL     runs scancel as the owner of a job id this parent's
 *                    sbatch answered for that uid (an earlier parent's
 *                    too, by priv.owners), never another: Slurm refuses
 *                    a job not the owner's, the parent one it did not
 *                    submit.
 *   PRIV_CHECK       reads the credentials of a submitter's connection
 *                    itself, refuses uid 0 (whose checks the daemon
 *                    makes while it is root; else it runs them as root)
 *                    and a peer it would not vouch for, and starts
 *                    pipeline-stage --check as the peer (the sbatch
 *                    rule's process: groups, gid, uid for good, a clean
 *                    environment, ended past PRIV_CHECK_TIMEOUT_S), the
 *                    spec's text a sealed memfd of at most
 *                    max_spec_bytes on its standard input; the read end
 *                    of its output goes back. What it answers is the
 *                    submitter's word about its own files.
 *   PRIV_FILES       forks a file server as a run's owner (the shim
 *                    rule), not exec'd: groups, gid and uid for good,
 *                    not dumpable; it answers PFS_* requests (a real
 *                    path, a stat, a read-only open of a regular file
 *                    or directory, O_NOFOLLOW|O_NONBLOCK, the descriptor
 *                    back) on the socket that goes back, until the
 *                    daemon closes it. The daemon reads a run owner's
 *                    files through it and hashes them itself, and keeps
 *                    it idle a while for the same owner's next reader
 *                    (owner_files_close()), not for another owner's.
 *   PRIV_RMTREE      removes, as root, a file or directory gc names below
 *                    state_dir/runs (a run's job's, two components or
 *                    more, none "." or ".."): state_dir/runs, from its
 *                    own configuration, and every directory on the way
 *                    opened O_DIRECTORY|O_NOFOLLOW from the one before,
 *                    the last name removed relative to its parent,
 *                    following nothing (a member's 0750 work directory,
 *                    which the daemon's user cannot enter).
 *   PRIV_CGROUP      makes, as root, a memory cgroup below the parent's
 *                    own cgroup (memcap.c's place, never one the daemon
 *                    names) for an owner the shim rule allows, never
 *                    root, capped at a size in range with no swap, all
 *                    of it root's, at most PRIV_CGROUPS (64) at once,
 *                    each remembered with its owner's uid; and removes
 *                    one of its own pattern from there, empty. A shim
 *                    start naming one the parent made for the same uid
 *                    (and has not removed) gets its shim moved into it
 *                    by the parent, root, before the shim's socket goes
 *                    back, so that the shim and all it starts (a
 *                    member's probe) run in it: the owner needs no right
 *                    to join it, on cgroup v1 or v2 (v2's rule on the
 *                    common ancestor's cgroup.procs binds no root).
 *
 * sbatch, scancel and gc's removals run in a helper process of the
 * parent's, whose reply the loop reads when it comes, so the other
 * requests are served meanwhile (a removal of hundreds of gigabytes of
 * checkpoints holds up no shim start or signal); replies carry their
 * request's id.
 *
 * The daemon process that ends ends the parent (its socket's end of
 * file), which exits with its status; a parent that ends takes the
 * daemon process with it (PR_SET_PDEATHSIG): a daemon without its parent
 * could start no job. Either way the shims run on, in sessions of their
 * own, and the next start re-adopts them. SIGTERM, SIGINT and SIGHUP sent
 * to the parent (the service manager's main process) go on to the daemon
 * process; SIGHUP also reloads the parent's rules from the configuration.
 *
 * The daemon process stays root unless `user` is set (pipelined.conf(5)):
 * then it becomes that user for good (become.c's become_drop(), priv_start()'s
 * drop) before any thread. The parent takes that user's uid from the
 * configuration (daemon_uid), never from the daemon: the records
 * directories and PRIV_FCHOWN's files must be that user's; the shims it
 * starts get -o UID, so that they take such a records directory for
 * their own; priv.owners lies in state_dir/priv, root's (owners_path()),
 * since the state directory is the user's; and PRIV_CHECK runs root's
 * own checks as root, which the daemon process can no longer make. A
 * run owner's files at run time (the hashing of artifacts and reused
 * inputs) are read through PRIV_FILES's server of the owner's, root's own
 * runs' too once the daemon process is not root (HACKING.md: Processes
 * and threads).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "exec.h"
#include "pld.h"
#include "executor.h"
#include "priv.h"
#include "slurm.h"
#include "plio.h"
#include "memcap.h"

/* ---- the decoder ------------------------------------------------------- */

/* PRIV_RMTREE's path: relative, two components or more, none empty, "."
 * or "..". */
static int
runs_rel_ok(const char *p)
{
	int parts = 0;
	if (*p == '\0' || *p == '/')
		return 0;
	for (;;) {
		size_t l = strcspn(p, "/");
		if (l == 0 || (l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		parts++;
		if (p[l] == '\0')
			break;
		p += l + 1;
	}
	return parts >= 2;
}

static const size_t priv_len[PRIV_NTYPES] = {
	[PRIV_SHIM_START] = sizeof(struct priv_shim_start),
	[PRIV_SIGNAL] = sizeof(struct priv_signal),
	[PRIV_FCHOWN] = sizeof(struct priv_fchown),
	[PRIV_NOTIFY] = sizeof(struct priv_notify),
	[PRIV_VOUCH] = sizeof(struct priv_vouch),
	[PRIV_SBATCH] = sizeof(struct priv_sbatch),
	[PRIV_SCANCEL] = sizeof(struct priv_scancel),
	[PRIV_CHECK] = sizeof(struct priv_check),
	[PRIV_FILES] = sizeof(struct priv_files),
	[PRIV_RMTREE] = sizeof(struct priv_rmtree),
	[PRIV_CGROUP] = sizeof(struct priv_cgroup),
};
static const int priv_nfd[PRIV_NTYPES] = { [PRIV_FCHOWN] = 1, [PRIV_VOUCH] = 1,
	[PRIV_SBATCH] = 1, [PRIV_CHECK] = 2 };

/* The signals the daemon sends: a job's end (TERM, KILL), Slurm's
 * warnings forwarded (USR1, USR2), a hang-up, an interrupt. */
static int
sig_allowed(int sig)
{
	return sig == SIGTERM || sig == SIGKILL || sig == SIGINT || sig == SIGHUP ||
	    sig == SIGUSR1 || sig == SIGUSR2;
}

/* A string field: NUL-terminated inside its n bytes, and nothing but
 * NULs after the terminator (no stale bytes travel). */
static int
field_ok(const char *f, size_t n)
{
	const char *nul = memchr(f, '\0', n);
	if (nul == NULL)
		return 0;
	for (const char *q = nul; q < f + n; q++)
		if (*q != '\0')
			return 0;
	return 1;
}

/* An owner: its kind, its count, no group past the count, root's all
 * zeros. user (Slurm's owners): a user has no id 0 anywhere. */
static int
owner_wellformed(const struct priv_owner *o, int user)
{
	user = user && o->kind == PRIV_OWNER_USER;
	if (o->kind > PRIV_OWNER_ROOT || o->ngroups > PRIV_NGROUPS ||
	    (o->kind == PRIV_OWNER_ROOT && (o->uid != 0 || o->gid != 0 || o->ngroups != 0)) ||
	    (user && (o->uid == 0 || o->gid == 0)))
		return 0;
	for (uint32_t i = 0; i < PRIV_NGROUPS; i++)
		if (i < o->ngroups ? user && o->groups[i] == 0 : o->groups[i] != 0)
			return 0;
	return 1;
}

int
priv_decode(const void *buf, size_t n, int nfd, char *why, size_t whylen)
{
	union priv_msg m;
	if (n < sizeof(struct priv_hdr)) {
		snprintf(why, whylen, "a message of %zu bytes, shorter than a header", n);
		return -1;
	}
	memcpy(&m, buf, n < sizeof(m) ? n : sizeof(m));
	uint32_t t = m.h.type;
	if (t == 0 || t >= PRIV_NTYPES) {
		snprintf(why, whylen, "type %u unknown", t);
		return -1;
	}
	if (n != priv_len[t] || m.h.len != n || m.h.zero != 0) {
		snprintf(why, whylen, "type %u: %zu bytes (header says %u), not %zu", t, n, m.h.len,
		    priv_len[t]);
		return -1;
	}
	int want = t == PRIV_FCHOWN ? (int)m.chown.count : priv_nfd[t];
	if (t == PRIV_FCHOWN && (m.chown.count < 1 || m.chown.count > PRIV_FCHOWN_FDS)) {
		snprintf(why, whylen, "fchown: %u descriptors, not 1 to %d", m.chown.count,
		    PRIV_FCHOWN_FDS);
		return -1;
	}
	if (nfd != want) {
		snprintf(why, whylen, "type %u: %d descriptors, not %d", t, nfd, want);
		return -1;
	}
	switch (t) {
	case PRIV_SHIM_START:
		if (!owner_wellformed(&m.shim.owner, 0) ||
		    !field_ok(m.shim.cgroup, sizeof(m.shim.cgroup)) ||
		    (m.shim.cgroup[0] != '\0' && (!memcap_leaf_ok(m.shim.cgroup) ||
		    m.shim.owner.kind != PRIV_OWNER_USER))) {
			snprintf(why, whylen, "shim start: a malformed owner or cgroup");
			return -1;
		}
		break;
	case PRIV_FILES:
		if (!owner_wellformed(&m.files.owner, 1)) {
			snprintf(why, whylen, "files: a malformed owner, or a user of id 0");
			return -1;
		}
		break;
	case PRIV_SBATCH:
		if (!owner_wellformed(&m.sbatch.owner, 1)) {
			snprintf(why, whylen, "sbatch: a malformed owner, or a user of id 0");
			return -1;
		}
		break;
	case PRIV_SCANCEL:
		if (!owner_wellformed(&m.scancel.owner, 1) || (m.scancel.sig != 0 &&
		    !sig_allowed(m.scancel.sig)) || !field_ok(m.scancel.id, sizeof(m.scancel.id)) ||
		    m.scancel.id[0] == '\0' ||
		    m.scancel.id[strspn(m.scancel.id, "0123456789")] != '\0') {
			snprintf(why, whylen, "scancel: a malformed owner, signal or job id");
			return -1;
		}
		break;
	case PRIV_SIGNAL:
		if (m.sig.mode > PRIV_SIG_ORPHANS || !sig_allowed(m.sig.sig) ||
		    !field_ok(m.sig.rdir, sizeof(m.sig.rdir)) || m.sig.rdir[0] != '/') {
			snprintf(why, whylen, "signal: a malformed mode, signal or directory");
			return -1;
		}
		break;
	case PRIV_FCHOWN:
		if (m.chown.uid == (uint32_t)-1 || m.chown.gid == (uint32_t)-1) {
			snprintf(why, whylen, "fchown: no owner");
			return -1;
		}
		break;
	case PRIV_RMTREE:
		if (!field_ok(m.rmtree.path, sizeof(m.rmtree.path)) ||
		    !runs_rel_ok(m.rmtree.path)) {
			snprintf(why, whylen, "rmtree: not a path of two components or more "
			    "below the runs' directory");
			return -1;
		}
		break;
	case PRIV_CGROUP: {
		static const struct priv_owner none;
		const struct priv_cgroup *g = &m.cgroup;
		int make = g->op == PRIV_CG_MAKE;
		if (g->zero != 0 || !field_ok(g->name, sizeof(g->name)) || (make ?
		    !owner_wellformed(&g->owner, 1) || g->owner.kind != PRIV_OWNER_USER ||
		    g->bytes < PRIV_CG_MIN || g->bytes > PRIV_CG_MAX || g->name[0] != '\0' :
		    g->op != PRIV_CG_REMOVE || !memcap_leaf_ok(g->name) || g->bytes != 0 ||
		    memcmp(&g->owner, &none, sizeof(none)) != 0)) {
			snprintf(why, whylen, "cgroup: a malformed operation, owner (a user, "
			    "no id 0), size (%lld to %lld bytes) or name", PRIV_CG_MIN,
			    PRIV_CG_MAX);
			return -1;
		}
		break;
	}
	case PRIV_CHECK:
		if (!field_ok(m.check.path, sizeof(m.check.path)) || m.check.path[0] == '\0') {
			snprintf(why, whylen, "check: no spec path");
			return -1;
		}
		break;
	case PRIV_NOTIFY:
		if (!field_ok(m.notify.text, sizeof(m.notify.text)) ||
		    (strcmp(m.notify.text, "READY=1") != 0 && strcmp(m.notify.text, "STOPPING=1") != 0 &&
		    strncmp(m.notify.text, "STATUS=", 7) != 0) || strchr(m.notify.text, '\n')) {
			snprintf(why, whylen, "notify: not READY=1, STOPPING=1 or one STATUS= line");
			return -1;
		}
		break;
	}
	return (int)t;
}

/* ---- the parent's rules ------------------------------------------------ */

/* The shims this parent started, by pid and start time: the last
 * PRIV_SHIMS of them (an older one's records are refused). */
#define PRIV_SHIMS 65536
static struct { pid_t pid; uint64_t start; } started[PRIV_SHIMS];
static unsigned nstarted;

/* The owners vouched for (PRIV_VOUCH), by their pin (owner_pin()):
 * kept in state_dir/priv.owners, root's, one a line, so that a restart's
 * parent starts the shims of the runs it finds. */
#define PRIV_VOUCHED 1024
#define PIN_MAX (24 + 11 * PRIV_NGROUPS)
static char vouched[PRIV_VOUCHED][PIN_MAX];
static int nvouched;

static int
is_vouched(const char *pin)
{
	for (int i = 0; i < nvouched; i++)
		if (strcmp(vouched[i], pin) == 0)
			return 1;
	return 0;
}

/* Is uid:gid the start of a vouched owner's pin? */
static int
ids_vouched(uid_t uid, gid_t gid)
{
	char pre[32];
	int n = snprintf(pre, sizeof(pre), "%u:%u", (unsigned)uid, (unsigned)gid);
	for (int i = 0; i < nvouched; i++)
		if (strncmp(vouched[i], pre, (size_t)n) == 0 &&
		    (vouched[i][n] == '\0' || vouched[i][n] == ':'))
			return 1;
	return 0;
}

/* The Slurm jobs this parent's sbatch submitted, by id and uid: the last
 * PRIV_SJOBS of them, kept in priv.owners too ("sbatch ID UID" lines)
 * for a restart's parent. */
static struct { char id[32]; uint32_t uid; } sjobs[PRIV_SJOBS];
static unsigned nsjobs;

static void
sjob_add(const char *id, uint32_t uid)
{
	unsigned i = nsjobs++ % PRIV_SJOBS;
	snprintf(sjobs[i].id, sizeof(sjobs[i].id), "%s", id);
	sjobs[i].uid = uid;
}

static int
sjob_known(const char *id, uint32_t uid)
{
	for (unsigned i = 0; i < PRIV_SJOBS && i < nsjobs; i++)
		if (sjobs[i].uid == uid && strcmp(sjobs[i].id, id) == 0)
			return 1;
	return 0;
}

/* state_dir/priv.owners, root's own regular file (mode 0600), opened
 * for appending: its descriptor, or -1 with a warning. */
static int
owners_fd(const char *path, int flags)
{
	int fd = open(path, flags | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	struct stat st;
	if (fd == -1 || fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 077)) {
		log_warnx("privileged parent: %s: not root's own file: no owner is vouched for "
		    "across a restart", path);
		if (fd != -1)
			close(fd);
		return -1;
	}
	return fd;
}

/* Where priv.owners lies: in the state directory while the daemon
 * process is root; else (the state directory the daemon's user's, who
 * could swap a file in it) in state_dir/priv, a directory of root's
 * that nobody else may write, made here, and, when made now, with the
 * priv.owners a root daemon left in the state directory moved in. Once
 * it holds priv.owners the user can neither remove nor rename it (a
 * directory renamed needs write access to itself). 0, or -1 with a
 * warning. */
static int
owners_path(const struct priv_rules *r, char *path, size_t len)
{
	if (r->daemon_uid == 0) {
		snprintf(path, len, "%s/priv.owners", r->state_dir);
		return 0;
	}
	int sfd = open(r->state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int made = sfd != -1 && mkdirat(sfd, "priv", 0700) == 0;
	int dfd = sfd == -1 ? -1 : openat(sfd, "priv", O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
	struct stat st, old;
	int ok = dfd != -1 && fstat(dfd, &st) == 0 && st.st_uid == 0 && !(st.st_mode & 077);
	if (ok && made && fstatat(sfd, "priv.owners", &old, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(old.st_mode) && old.st_uid == 0 && !(old.st_mode & 077) &&
	    old.st_nlink == 1 && renameat(sfd, "priv.owners", dfd, "priv.owners") == -1)
		log_warn("privileged parent: %s/priv.owners", r->state_dir);
	if (dfd != -1)
		close(dfd);
	if (sfd != -1)
		close(sfd);
	if (!ok) {
		log_warnx("privileged parent: %s/priv: not root's own directory: no owner is "
		    "vouched for across a restart", r->state_dir);
		return -1;
	}
	snprintf(path, len, "%s/priv/priv.owners", r->state_dir);
	return 0;
}

/* The lines priv.owners holds: what the parent keeps (the owners it
 * vouched for, its newest PRIV_SJOBS Slurm jobs) and what it forgot. */
static unsigned owners_lines;

/* A line that could not be written (a full disk, say): priv.owners
 * lacks what the parent keeps, and is written again whole at the next
 * vouch, so that a restart's parent knows every owner this one started
 * shims for once the disk has room again. */
static int owners_unsaved;

/* Write priv.owners again with only what the parent keeps: in a new
 * file beside it, synced and renamed over it (plc_atomic_*), so that a
 * parent killed meanwhile leaves the old file or the new one, whole. */
static void
owners_compact(struct priv_rules *r)
{
	char path[PATH_MAX];
	struct plc_atomic a;
	unsigned n = nsjobs < PRIV_SJOBS ? nsjobs : PRIV_SJOBS;
	if (owners_path(r, path, sizeof(path)) == -1)
		return;
	if (plc_atomic_open(&a, path, 0600) == -1) {
		log_warn("privileged parent: %s: cannot write it again", path);
		return;
	}
	FILE *f = fdopen(dup(a.fd), "w");
	int ok = f != NULL;
	for (int i = 0; ok && i < nvouched; i++)
		ok = fprintf(f, "%s\n", vouched[i]) >= 0;
	for (unsigned k = 0; ok && k < n; k++) {
		unsigned i = (nsjobs - n + k) % PRIV_SJOBS;
		ok = fprintf(f, "sbatch %s %u\n", sjobs[i].id, sjobs[i].uid) >= 0;
	}
	if ((f != NULL && fclose(f) != 0) || !ok) {
		log_warn("privileged parent: %s: cannot write it again", path);
		plc_atomic_abort(&a);
		return;
	}
	int done = plc_atomic_commit(&a) == 0;
	if (!done)
		log_warn("privileged parent: %s: cannot write it again", path);
	else {
		owners_lines = (unsigned)nvouched + n;
		owners_unsaved = 0;
	}
	/* The old descriptor may be the replaced file's: append to the new. */
	close(r->vouchfd);
	r->vouchfd = owners_fd(path, O_WRONLY);
}

/* A line appended to priv.owners, synced; the file written again once
 * it holds twice what the parent keeps. */
static void
owners_append(struct priv_rules *r, const char *line)
{
	if (r->vouchfd < 0)
		return;
	if (dprintf(r->vouchfd, "%s\n", line) < 0 || fdatasync(r->vouchfd) == -1) {
		log_warn("privileged parent: priv.owners");
		owners_unsaved = 1;
	} else if (++owners_lines > 2 * PRIV_SJOBS + (unsigned)nvouched)
		owners_compact(r);
}

/* Read priv.owners at the parent's start (a line too long for a pin
 * skipped whole), then write it again when it holds more than the parent
 * keeps: the file stays bounded across restarts. */
static void
owners_open(struct priv_rules *r)
{
	char path[PATH_MAX];
	r->vouchfd = -1;
	if (owners_path(r, path, sizeof(path)) == -1)
		return;
	r->vouchfd = owners_fd(path, O_RDWR | O_CREAT);
	if (r->vouchfd == -1)
		return;
	FILE *f = fdopen(dup(r->vouchfd), "r");
	char line[PIN_MAX + 2];
	int whole = 1;
	owners_lines = 0;
	while (f != NULL && fgets(line, sizeof(line), f)) {
		int was = whole;
		whole = strchr(line, '\n') != NULL;
		owners_lines += whole || feof(f);
		if (!was || !whole)
			continue;	/* a part of a long line, or one cut short */
		line[strcspn(line, "\n")] = '\0';
		char id[32];
		unsigned uid;
		if (sscanf(line, "sbatch %31[0-9] %u", id, &uid) == 2)
			sjob_add(id, uid);
		else if (line[0] && !is_vouched(line) && nvouched < PRIV_VOUCHED)
			snprintf(vouched[nvouched++], PIN_MAX, "%s", line);
	}
	if (f != NULL)
		fclose(f);
	if (owners_lines > (unsigned)nvouched + (nsjobs < PRIV_SJOBS ? nsjobs : PRIV_SJOBS))
		owners_compact(r);
}

/* An owner vouched for, kept in memory and appended to priv.owners; or,
 * while a line could not be written (owners_unsaved), priv.owners written
 * again whole at each vouch until it is: one already known too (a
 * submit once the disk has room again). */
static void
vouch_add(struct priv_rules *r, const char *pin)
{
	if (!is_vouched(pin) && nvouched < PRIV_VOUCHED) {
		snprintf(vouched[nvouched++], PIN_MAX, "%s", pin);
		if (!owners_unsaved) {
			owners_append(r, pin);
			return;
		}
	}
	if (owners_unsaved && r->vouchfd >= 0)
		owners_compact(r);
}

/* The text a shim is pinned with: "UID:GID[:G1,G2...]" (control.c's
 * run_owner()), or "root". */
static void
owner_pin(const struct priv_owner *o, char *pin, size_t len)
{
	if (o->kind == PRIV_OWNER_ROOT) {
		snprintf(pin, len, "root");
		return;
	}
	size_t n = (size_t)snprintf(pin, len, "%u:%u", o->uid, o->gid);
	for (uint32_t i = 0; i < o->ngroups && n < len; i++)
		n += (size_t)snprintf(pin + n, len - n, "%c%u", i ? ',' : ':', o->groups[i]);
}

void
priv_rules_load(struct priv_rules *r, const struct conf *c)
{
	r->group = c->gid;
	r->admin_group = c->admin_gid;
	r->job_uid = c->job_uid;
	/* Who owns what the daemon process makes: the configuration's user
	 * when root started a daemon with one (it becomes that user), else
	 * the parent's own uid; taken at start, never from the daemon's
	 * word, and kept across a reload (user needs a restart). */
	if (r->since == 0)
		r->daemon_uid = c->user[0] && geteuid() == 0 ? c->user_uid : geteuid();
	const char *bin = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c->all,
	    "slurm.bin_dir"));	/* conf_get(), a layer above */
	snprintf(r->slurm_bin, sizeof(r->slurm_bin), "%s", bin ? bin : "");
	if (c->shim[0])
		snprintf(r->shim, sizeof(r->shim), "%s", c->shim);
	else
		snprintf(r->shim, sizeof(r->shim), "%s/pipeline-shim", self_dir());
	/* pipeline-stage lies beside the shim (conf_stage_path(), a layer
	 * above). */
	const char *slash = strrchr(r->shim, '/');
	snprintf(r->stage, sizeof(r->stage), "%.*s/pipeline-stage",
	    slash ? (int)(slash - r->shim) : 1, slash ? r->shim : ".");
	snprintf(r->conf_path, sizeof(r->conf_path), "%s", c->path);
	snprintf(r->plugin_dir, sizeof(r->plugin_dir), "%s", c->plugin_dir);
	r->max_spec_bytes = c->max_spec_bytes;
	r->max_spec_jobs = c->max_spec_jobs;
	r->max_variants = c->max_variants;
	if (realpath(c->state_dir, r->state_dir) == NULL)
		snprintf(r->state_dir, sizeof(r->state_dir), "%s", c->state_dir);
	if (r->since == 0) {
		r->since = proc_starttime(getpid());
		owners_open(r);
	}
}

int
priv_shim_known(const struct priv_rules *r, pid_t pid, uint64_t t)
{
	if (pid <= 1 || t == 0)
		return 0;
	/* An earlier parent's: its record says so. Start times count clock
	 * ticks, and a shim the earlier parent started just before it was
	 * killed may share this parent's own tick (this parent's shims of
	 * that tick are in the list anyway). */
	if (t <= r->since)
		return 1;
	unsigned n = nstarted < PRIV_SHIMS ? nstarted : PRIV_SHIMS;
	for (unsigned i = 0; i < n; i++)
		if (started[i].pid == pid && started[i].start == t)
			return 1;
	return 0;
}

/* May processes run as (or files be given to) uid, gid with these
 * groups? Not root; a user of the password database that is job_user or
 * a member of group or admin_group by the group database; gid and every
 * group among that user's. 0, or -1 with why. */
static int
owner_allowed(const struct priv_rules *r, uid_t uid, gid_t gid, const uint32_t *groups,
    uint32_t ngroups, char *why, size_t whylen)
{
	if (uid == 0) {
		snprintf(why, whylen, "uid 0 refused");
		return -1;
	}
	struct passwd *pw = getpwuid(uid);
	gid_t g[PRIV_NGROUPS];
	int ng = PRIV_NGROUPS;
	if (pw == NULL || getgrouplist(pw->pw_name, pw->pw_gid, g, &ng) == -1) {
		snprintf(why, whylen, "uid %u: no such user, or too many groups", (unsigned)uid);
		return -1;
	}
	int member = uid == r->job_uid, has_gid = 0;
	for (int i = 0; i < ng; i++) {
		if ((r->group != (gid_t)-1 && g[i] == r->group) ||
		    (r->admin_group != (gid_t)-1 && g[i] == r->admin_group))
			member = 1;
		has_gid |= g[i] == gid;
	}
	if (!member) {
		snprintf(why, whylen, "uid %u is not job_user nor a member of group or admin_group",
		    (unsigned)uid);
		return -1;
	}
	if (!has_gid || gid == 0) {
		snprintf(why, whylen, "gid %u is not one of uid %u's groups", (unsigned)gid,
		    (unsigned)uid);
		return -1;
	}
	for (uint32_t k = 0; k < ngroups; k++) {
		int in = 0;
		for (int i = 0; i < ng && !in; i++)
			in = g[i] == (gid_t)groups[k];
		if (!in || groups[k] == 0) {
			snprintf(why, whylen, "group %u is not one of uid %u's groups",
			    (unsigned)groups[k], (unsigned)uid);
			return -1;
		}
	}
	return 0;
}

/* May processes run as owner o: root's runs' unpinned shim and Slurm
 * commands, without job_user and vouched for; a user vouched for, or
 * allowed (owner_allowed()). 0, or EPERM with why; pin filled. */
static int
owner_check(struct priv_rules *r, const struct priv_owner *o, char *pin, struct priv_reply *rep)
{
	owner_pin(o, pin, PIN_MAX);
	if (o->kind == PRIV_OWNER_ROOT) {
		if (r->job_uid != (uid_t)-1 || !is_vouched(pin)) {
			snprintf(rep->why, sizeof(rep->why), "nothing as root: %s",
			    r->job_uid != (uid_t)-1 ? "root's runs run as job_user" :
			    "root submitted nothing");
			return EPERM;
		}
	} else if ((o->uid == 0 || !is_vouched(pin)) && owner_allowed(r, o->uid, o->gid,
	    o->groups, o->ngroups, rep->why, sizeof(rep->why)) == -1)
		return EPERM;
	return 0;
}

/* PRIV_CGROUP's groups: those this parent made and has not removed,
 * each with the uid it was made for, at most PRIV_CGROUPS at once (a
 * probe a job: max_jobs at most), so that a compromised daemon process
 * cannot fill the hierarchy, nor have a shim moved into a group it did
 * not get for that owner. */
#define PRIV_CGROUPS 64
static struct {
	char name[64];		/* memcap_leaf_ok(); "": a free slot */
	uid_t uid;
	char dir[PATH_MAX];
} cgroups[PRIV_CGROUPS];

static int
cgroup_find(const char *name)
{
	for (int i = 0; i < PRIV_CGROUPS; i++)
		if (cgroups[i].name[0] != '\0' && strcmp(cgroups[i].name, name) == 0)
			return i;
	return -1;
}

static int
act_shim_start(struct priv_rules *r, const struct priv_shim_start *m, struct priv_reply *rep,
    int *rfd)
{
	char pin[PIN_MAX];
	const struct priv_owner *o = &m->owner;
	if (owner_check(r, o, pin, rep) != 0)
		return EPERM;
	int cg = -1;
	if (m->cgroup[0] != '\0' && ((cg = cgroup_find(m->cgroup)) == -1 ||
	    cgroups[cg].uid != o->uid)) {
		snprintf(rep->why, sizeof(rep->why), "cgroup %s: not one this parent made for "
		    "uid %u", m->cgroup, (unsigned)o->uid);
		return EPERM;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		return errno;
	pid_t pid = shim_spawn_owned(r->shim, o->kind == PRIV_OWNER_ROOT ? NULL : pin,
	    r->daemon_uid, "-G", sv[1]);
	int e = errno;
	close(sv[1]);
	if (pid == -1) {
		close(sv[0]);
		snprintf(rep->why, sizeof(rep->why), "%s: %s", r->shim, strerror(e));
		return e;
	}
	/* Into its cgroup, as root, before its socket goes back: until the
	 * daemon has the socket the shim starts nothing, so that all it
	 * starts is in the group. Our child, not reaped yet: the pid is
	 * still the shim's. */
	if (cg != -1 && memcap_move(cgroups[cg].dir, pid) == -1) {
		e = errno;
		kill(pid, SIGKILL);
		close(sv[0]);
		snprintf(rep->why, sizeof(rep->why), "%s: the shim not moved in: %s",
		    cgroups[cg].name, strerror(e));
		return e;
	}
	rep->pid = pid;
	rep->start = proc_starttime(pid);
	started[nstarted++ % PRIV_SHIMS].pid = pid;
	started[(nstarted - 1) % PRIV_SHIMS].start = rep->start;
	*rfd = sv[0];
	return 0;
}

/* The records directory the daemon named: below the state directory (no
 * link, no dot, its real path), in a .shim directory, the daemon user's
 * and writable by nobody else. Its descriptor, or -1 with why. */
static int
records_open(const struct priv_rules *r, const char *rdir, char *why, size_t whylen)
{
	char real[PATH_MAX];
	size_t sl = strlen(r->state_dir);
	if (realpath(rdir, real) == NULL || strcmp(real, rdir) != 0 ||
	    strncmp(real, r->state_dir, sl) != 0 || real[sl] != '/') {
		snprintf(why, whylen, "%s: not a real path below %s", rdir, r->state_dir);
		return -1;
	}
	char *slash = strrchr(real, '/');
	if (slash - real < 6 || strncmp(slash - 6, "/.shim", 6) != 0) {
		snprintf(why, whylen, "%s: not a records directory", rdir);
		return -1;
	}
	int fd = open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd == -1 || fstat(fd, &st) == -1 || st.st_uid != r->daemon_uid ||
	    (st.st_mode & 022)) {
		snprintf(why, whylen, "%s: not the daemon's own records directory", rdir);
		if (fd != -1)
			close(fd);
		return -1;
	}
	return fd;
}

/* What the shim recorded in dfd/shim.json, a regular file of root's (the
 * shim's), never the job's. 0, or -1 with why. */
static int
record_read(int dfd, pid_t *shim, uint64_t *sstart, pid_t *child, pid_t *pgid,
    uint64_t *cstart, char *why, size_t whylen)
{
	int fd = openat(dfd, "shim.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	char buf[1024];
	ssize_t n = -1;
	if (fd != -1 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
	    st.st_nlink == 1)
		n = read(fd, buf, sizeof(buf) - 1);
	if (fd != -1)
		close(fd);
	cJSON *o = NULL;
	if (n > 0) {
		buf[n] = '\0';
		o = cJSON_Parse(buf);
	}
	const cJSON *v[5];
	static const char *const k[5] = { "shim_pid", "shim_start", "child_pid", "pgid",
		"child_start" };
	int ok = cJSON_IsObject(o);
	for (int i = 0; ok && i < 5; i++)
		ok = cJSON_IsNumber(v[i] = cJSON_GetObjectItemCaseSensitive(o, k[i])) &&
		    v[i]->valuedouble >= 0 && v[i]->valuedouble < 1e18;
	if (ok) {
		*shim = (pid_t)v[0]->valuedouble;
		*sstart = (uint64_t)v[1]->valuedouble;
		*child = (pid_t)v[2]->valuedouble;
		*pgid = (pid_t)v[3]->valuedouble;
		*cstart = (uint64_t)v[4]->valuedouble;
	} else
		snprintf(why, whylen, "no shim.json of the shim's to read");
	cJSON_Delete(o);
	return ok ? 0 : -1;
}

static int
act_signal(struct priv_rules *r, const struct priv_signal *m, struct priv_reply *rep)
{
	int dfd = records_open(r, m->rdir, rep->why, sizeof(rep->why));
	if (dfd == -1)
		return EPERM;
	pid_t shim, child, pgid;
	uint64_t sstart, cstart;
	int rc = record_read(dfd, &shim, &sstart, &child, &pgid, &cstart, rep->why,
	    sizeof(rep->why));
	close(dfd);
	if (rc == -1)
		return ENOENT;
	if (child <= 1 || cstart == 0 || !priv_shim_known(r, shim, sstart)) {
		snprintf(rep->why, sizeof(rep->why), "pid %d: not the child of a shim this parent "
		    "started", (int)child);
		return EPERM;
	}
	int fd = (int)syscall(SYS_pidfd_open, child, 0);
	if (fd == -1)
		return errno == ESRCH ? 0 : errno;
	struct proc_stat ps;
	int alive = proc_stat_read(child, &ps) == 0 && ps.start == cstart;
	pid_t pg = ps.pgrp, ppid = alive ? ps.ppid : 0;
	rc = 0;
	if (m->mode == PRIV_SIG_CHILD) {
		if (!alive)
			rc = 0;	/* gone, or its pid another's now */
		else if (ppid != shim) {
			snprintf(rep->why, sizeof(rep->why), "pid %d is not shim %d's child",
			    (int)child, (int)shim);
			rc = EPERM;
		} else if (pg == child)
			rc = kill(-child, m->sig) == -1 ? errno : 0;
		else
			rc = syscall(SYS_pidfd_send_signal, fd, m->sig, NULL, 0) == -1 ? errno : 0;
	} else {
		/* The shim is gone: the group it recorded, led by its child
		 * (whose pid no other group takes while the group lives). */
		if (pgid != child || (alive == 0 && proc_stat_read(child, &ps) == 0)) {
			snprintf(rep->why, sizeof(rep->why), "pid %d: not the recorded child", (int)child);
			rc = EPERM;
		} else {
			if (kill(-pgid, m->sig) == -1 && errno != ESRCH)
				rc = errno;
			if (alive && pg == pgid)
				kill(pgid, m->sig);
		}
	}
	close(fd);
	return rc == ESRCH ? 0 : rc;
}

static int
act_fchown(struct priv_rules *r, const struct priv_fchown *m, const int *fds,
    struct priv_reply *rep)
{
	struct stat st;
	if ((m->uid == 0 || !ids_vouched(m->uid, m->gid)) &&
	    owner_allowed(r, m->uid, m->gid, NULL, 0, rep->why, sizeof(rep->why)) == -1)
		return EPERM;
	/* Each in turn; the first refused ends it (decoded: 1 to 3). */
	for (uint32_t i = 0; i < m->count; i++) {
		if (fstat(fds[i], &st) == -1 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) ||
		    (st.st_uid != r->daemon_uid && st.st_uid != m->uid)) {
			snprintf(rep->why, sizeof(rep->why), "descriptor %u: not a file or "
			    "directory of the daemon's", i + 1);
			return EPERM;
		}
		/* AT_EMPTY_PATH: a path descriptor too (dirs_make_leaf()). */
		if (fchownat(fds[i], "", m->uid, m->gid, AT_EMPTY_PATH) == -1)
			return errno;
	}
	return 0;
}

/* The credentials of a submitter's connection, read here (SO_PEERCRED,
 * SO_PEERGROUPS): *root for uid 0, else in o a user who is a member of
 * group or admin_group by the groups it connected with or the group
 * database. 0, or an errno with why. */
static int
peer_owner(const struct priv_rules *r, int fd, struct priv_owner *o, int *root,
    struct priv_reply *rep)
{
	struct ucred cr;
	gid_t g[PRIV_NGROUPS + 1];
	socklen_t cl = sizeof(cr), gl = sizeof(g);
	int dom = 0;
	socklen_t dl = sizeof(dom);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl) == -1 || dom != AF_UNIX ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == -1 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &gl) == -1 ||
	    gl / sizeof(gid_t) > PRIV_NGROUPS) {
		snprintf(rep->why, sizeof(rep->why), "not a Unix socket's peer of %d groups "
		    "or fewer", PRIV_NGROUPS);
		return EINVAL;
	}
	memset(o, 0, sizeof(*o));
	*root = cr.uid == 0;
	if (*root)
		return 0;
	o->uid = cr.uid;
	o->gid = cr.gid;
	o->ngroups = gl / sizeof(gid_t);
	int member = 0;
	for (uint32_t i = 0; i <= o->ngroups; i++) {
		gid_t x = i < o->ngroups ? g[i] : cr.gid;
		if (i < o->ngroups)
			o->groups[i] = g[i];
		member |= (r->group != (gid_t)-1 && x == r->group) ||
		    (r->admin_group != (gid_t)-1 && x == r->admin_group);
	}
	if (!member && owner_allowed(r, cr.uid, cr.gid, NULL, 0, rep->why,
	    sizeof(rep->why)) == -1)
		return EPERM;
	return 0;
}

/* Read the credentials of a submitter's connection: root (its runs
 * root's, or job_user's), or a member of group or admin_group; the owner
 * its runs run as is vouched for. */
static int
act_vouch(struct priv_rules *r, int fd, struct priv_reply *rep)
{
	struct priv_owner o;
	char pin[PIN_MAX];
	int root, e = peer_owner(r, fd, &o, &root, rep);
	if (e != 0)
		return e;
	if (root) {
		if (r->job_uid != (uid_t)-1)
			return 0;	/* job_user's runs: its own rule */
		o.kind = PRIV_OWNER_ROOT;
	}
	owner_pin(&o, pin, sizeof(pin));
	vouch_add(r, pin);
	return 0;
}

/* prog with argv as owner o (a user, never uid 0: its groups, gid and
 * uid set and checked, with no way back to root, as become.c does; or
 * root's own runs' owner, PRIV_OWNER_ROOT, for Slurm's commands only:
 * the parent's ids), standard input in, standard output out, standard
 * error err, in the environment env, in dir (NULL: the parent's);
 * alarm_s, when not 0, ends it past that many seconds (an alarm outlives
 * execve). Its pid, or -1. */
static pid_t
spawn_as(const struct priv_owner *o, int in, int out, int err, const char *dir,
    const char *prog, char *const argv[], char **env, unsigned alarm_s)
{
	gid_t g[PRIV_NGROUPS];
	for (uint32_t i = 0; i < o->ngroups; i++)
		g[i] = o->groups[i];
	sigset_t none;
	sigemptyset(&none);
	int user = o->kind == PRIV_OWNER_USER;
	pid_t pid = fork();
	if (pid == 0) {
		uid_t ru, eu, su;
		if ((user && o->uid == 0) || dup2(in, 0) == -1 || dup2(out, 1) == -1 ||
		    dup2(err, 2) == -1 || close_range(3, ~0U, 0) == -1 ||
		    sigprocmask(SIG_SETMASK, &none, NULL) == -1 ||
		    (dir != NULL && chdir(dir) == -1) ||
		    (user && (setgroups(o->ngroups, g) == -1 ||
		    setresgid(o->gid, o->gid, o->gid) == -1 ||
		    setresuid(o->uid, o->uid, o->uid) == -1 || setresuid(0, 0, 0) != -1 ||
		    getresuid(&ru, &eu, &su) == -1 || ru != o->uid || eu != o->uid ||
		    su != o->uid)))
			_exit(126);
		environ = env;
		alarm(alarm_s);
		execvp(prog, argv);
		dprintf(2, "%s: %s\n", prog, strerror(errno));
		_exit(127);
	}
	return pid;
}

/* Slurm's command argv as owner o (one owner_check() allowed: a user,
 * with no id 0 by the decoder, or root's own runs), standard input in,
 * in a clean environment: the parent's own PATH and SLURM_CONF (the
 * operator's, as when the daemon ran Slurm's commands itself). Its
 * status, and its output in out (slurm_collect()). */
static int
slurm_as(const struct priv_rules *r, const struct priv_owner *o, int in, char *argv[],
    char *out, size_t outlen)
{
	char prog[PATH_MAX], path[PATH_MAX + 8], conf[PATH_MAX + 16] = "";
	snprintf(prog, sizeof(prog), "%s%s%s", r->slurm_bin, r->slurm_bin[0] ? "/" : "", argv[0]);
	const char *pv = getenv("PATH"), *sc = getenv("SLURM_CONF");
	snprintf(path, sizeof(path), "PATH=%s", pv ? pv : "/usr/local/bin:/usr/bin:/bin");
	if (sc != NULL)
		snprintf(conf, sizeof(conf), "SLURM_CONF=%s", sc);
	char *env[] = { path, conf[0] ? conf : NULL, NULL };
	int p[2];
	if (pipe2(p, O_CLOEXEC) == -1)
		return -1;
	pid_t pid = spawn_as(o, in, p[1], p[1], NULL, prog, argv, env, 0);
	close(p[1]);
	if (pid == -1) {
		close(p[0]);
		return -1;
	}
	return slurm_collect(pid, p[0], argv[0], out, outlen, SLURM_TIMEOUT_MS);
}

/* Set in a helper (below): the job id is its parent's to remember. */
static int in_helper;

/* A job id of the parent's sbatch, remembered in memory and priv.owners. */
static void
sjob_record(struct priv_rules *r, const char *id, uint32_t uid)
{
	char line[64];
	sjob_add(id, uid);
	snprintf(line, sizeof(line), "sbatch %s %u", id, uid);
	owners_append(r, line);
}

/* sbatch --parsable as the owner (root's own runs: as root, by
 * owner_check()'s rule for root), the script the descriptor it checked
 * (a regular file, read from its start); the job id remembered. */
static int
act_sbatch(struct priv_rules *r, const struct priv_sbatch *m, int fd, struct priv_reply *rep)
{
	char pin[PIN_MAX], out[8192], id[32];
	struct stat st;
	if (owner_check(r, &m->owner, pin, rep) != 0)
		return EPERM;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) || lseek(fd, 0, SEEK_SET) == -1) {
		snprintf(rep->why, sizeof(rep->why), "sbatch: the script is not a regular file");
		return EINVAL;
	}
	char *argv[] = { "sbatch", "--parsable", NULL };
	int rc = slurm_as(r, &m->owner, fd, argv, out, sizeof(out));
	if (rc != 0 || slurm_parse_sbatch(out, id, sizeof(id)) == -1) {
		slurm_last_words(out, rep->why, sizeof(rep->why));
		if (rc == 0 || rep->why[0] == '\0')
			snprintf(rep->why, sizeof(rep->why), "sbatch printed no job id (status %d)", rc);
		return EIO;
	}
	if (!in_helper)
		sjob_record(r, id, m->owner.uid);
	snprintf(rep->why, sizeof(rep->why), "%s", id);
	return 0;
}

/* scancel as the owner of a job this parent submitted for that uid:
 * Slurm then checks the job is the caller's too, and the daemon names no
 * other user's job, nor one it did not submit through here. */
static int
act_scancel(struct priv_rules *r, const struct priv_scancel *m, struct priv_reply *rep)
{
	char pin[PIN_MAX], out[4096], sigarg[32], idarg[80], *argv[8];
	if (owner_check(r, &m->owner, pin, rep) != 0)
		return EPERM;
	if (!sjob_known(m->id, m->owner.uid)) {
		snprintf(rep->why, sizeof(rep->why), "scancel: Slurm job %s is not one this parent "
		    "submitted for uid %u", m->id, m->owner.uid);
		return EPERM;
	}
	slurm_cancel_argv(m->id, m->sig, argv, sigarg, idarg);
	int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int rc = slurm_as(r, &m->owner, in, argv, out, sizeof(out));
	close(in);
	slurm_last_words(out, rep->why, sizeof(rep->why));
	return rc == 0 ? 0 : EIO;
}

/* A spec's file checks as the submitter of connection cfd (read here,
 * never the daemon's word; not root, whose checks the daemon makes, and
 * only a peer it would vouch for): pipeline-stage --check started as the
 * peer in a clean environment, with what it needs of the configuration
 * as arguments (a member may not read the file, which may hold secrets),
 * the spec's text (tfd, a sealed memfd of at most max_spec_bytes) on its
 * standard input, its output a pipe whose read end goes back;
 * PRIV_CHECK_TIMEOUT_S ends it. The loop reaps it with the shims. What it
 * prints is the submitter's own word about its own files, which the
 * daemon merges into its reply and takes for nothing else. */
static int
act_check(struct priv_rules *r, const struct priv_check *m, int cfd, int tfd,
    struct priv_reply *rep, int *rfd)
{
	struct priv_owner o;
	struct stat st;
	int root, e = peer_owner(r, cfd, &o, &root, rep);
	if (e != 0)
		return e;
	/* Root's own checks are the daemon process's while it is root; a
	 * daemon process of its own user cannot open root's files, and the
	 * parent, which read the peer's uid 0 itself, runs them as root. */
	if (root && r->daemon_uid == 0) {
		snprintf(rep->why, sizeof(rep->why), "check: uid 0's checks are the daemon's");
		return EPERM;
	}
	if (root)
		o = (struct priv_owner){ .kind = PRIV_OWNER_ROOT };
	int seals = fcntl(tfd, F_GET_SEALS);
	int want = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;
	if (seals == -1 || (seals & want) != want || fstat(tfd, &st) == -1 ||
	    !S_ISREG(st.st_mode) || st.st_size > (r->max_spec_bytes > 0 ? r->max_spec_bytes :
	    CONF_MAX_SPEC_BYTES) || lseek(tfd, 0, SEEK_SET) == -1) {
		snprintf(rep->why, sizeof(rep->why), "check: the spec is no sealed memfd of %d "
		    "bytes or fewer", r->max_spec_bytes);
		return EINVAL;
	}
	int p[2], null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null == -1 || pipe2(p, O_CLOEXEC) == -1) {
		e = errno;
		if (null != -1)
			close(null);
		return e;
	}
	char lim[3][16];
	snprintf(lim[0], sizeof(lim[0]), "%d", r->max_spec_bytes);
	snprintf(lim[1], sizeof(lim[1]), "%d", r->max_spec_jobs);
	snprintf(lim[2], sizeof(lim[2]), "%d", r->max_variants);
	char *argv[] = { "pipeline-stage", "--check", r->conf_path, r->plugin_dir, lim[0], lim[1],
		lim[2], (char *)m->path, NULL };
	char *env[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };
	pid_t pid = spawn_as(&o, tfd, p[1], null, "/", r->stage, argv, env,
	    PRIV_CHECK_TIMEOUT_S);
	e = errno;
	close(p[1]);
	close(null);
	if (pid == -1) {
		close(p[0]);
		return e;
	}
	rep->pid = pid;
	*rfd = p[0];
	return 0;
}

static int	act_files(struct priv_rules *, const struct priv_files *, struct priv_reply *,
		    int *);

/* PRIV_RMTREE: the path's directories walked from state_dir/runs, each
 * opened from the one before with no link followed, the last name
 * removed relative to its parent. A path already gone is done. */
static int
act_rmtree(const struct priv_rules *r, const struct priv_rmtree *m, struct priv_reply *rep)
{
	char root[PATH_MAX + 8], rel[PATH_MAX];
	snprintf(root, sizeof(root), "%s/runs", r->state_dir);
	snprintf(rel, sizeof(rel), "%s", m->path);
	int fd = r->state_dir[0] == '/' ? open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC) : -1, e = 0;
	if (fd == -1) {
		e = r->state_dir[0] == '/' ? errno : ENOENT;
		snprintf(rep->why, sizeof(rep->why), "%s: %s", root, strerror(e));
		return e;
	}
	char *p = rel;
	for (;;) {
		char *slash = strchr(p, '/');
		if (slash == NULL)
			break;
		*slash = '\0';
		int nfd = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		e = nfd == -1 ? errno : 0;
		close(fd);
		if ((fd = nfd) == -1) {
			if (e == ENOENT)
				return 0;
			snprintf(rep->why, sizeof(rep->why), "%s: %s%s", p, strerror(e),
			    e == ELOOP || e == ENOTDIR ? " (a link on the way: not followed)" : "");
			return e;
		}
		p = slash + 1;
	}
	if (plc_rmtree_at(fd, p, PRIV_RMTREE_DEPTH) == -1) {
		e = errno;
		snprintf(rep->why, sizeof(rep->why), "%s: %s", m->path, strerror(e));
	}
	close(fd);
	return e;
}

/* PRIV_CGROUP: a memory cgroup made below the parent's own, capped, for
 * an owner the shim's rule allows (cgroups, above); or one it made
 * removed. */
static int
act_cgroup(struct priv_rules *r, const struct priv_cgroup *m, struct priv_reply *rep)
{
	int e;
	if (m->op == PRIV_CG_REMOVE) {
		/* A parent that serves no owner made none. */
		if (r->group == (gid_t)-1 && r->admin_group == (gid_t)-1 &&
		    r->job_uid == (uid_t)-1) {
			snprintf(rep->why, sizeof(rep->why), "cgroup: this parent serves no owner");
			return EPERM;
		}
		/* One of an earlier parent's too (its pattern): forgotten. */
		if (memcap_remove_leaf(m->name) == 0) {
			int i = cgroup_find(m->name);
			if (i != -1)
				cgroups[i].name[0] = '\0';
			return 0;
		}
		e = errno;
		snprintf(rep->why, sizeof(rep->why), "%s: %s", m->name, strerror(e));
		return e;
	}
	char pin[PIN_MAX], why[1024];
	if (owner_check(r, &m->owner, pin, rep) != 0)
		return EPERM;
	int slot = 0;
	while (slot < PRIV_CGROUPS && cgroups[slot].name[0] != '\0')
		slot++;
	if (slot == PRIV_CGROUPS) {
		snprintf(rep->why, sizeof(rep->why), "cgroup: %d of the parent's already, none "
		    "removed", PRIV_CGROUPS);
		return EAGAIN;
	}
	struct memcap mc;
	if (memcap_make_root(&mc, m->bytes, why, sizeof(why)) == -1) {
		e = errno ? errno : EPERM;
		snprintf(rep->why, sizeof(rep->why), "%s", why);
		return e;
	}
	const char *leaf = strrchr(mc.dir, '/') + 1;
	if (strlen(mc.dir) >= sizeof(rep->why) || !memcap_leaf_ok(leaf) ||
	    strlen(leaf) >= sizeof(cgroups[slot].name)) {
		rmdir(mc.dir);
		snprintf(rep->why, sizeof(rep->why), "a cgroup's directory too long to answer");
		return ENAMETOOLONG;
	}
	snprintf(cgroups[slot].name, sizeof(cgroups[slot].name), "%s", leaf);
	snprintf(cgroups[slot].dir, sizeof(cgroups[slot].dir), "%s", mc.dir);
	cgroups[slot].uid = m->owner.uid;
	snprintf(rep->why, sizeof(rep->why), "%s", mc.dir);
	return 0;
}

void
priv_handle(struct priv_rules *r, const void *buf, size_t n, int *fds, int nfd,
    struct priv_reply *rep, int *rfd)
{
	union priv_msg m;
	memset(rep, 0, sizeof(*rep));
	*rfd = -1;
	int t = priv_decode(buf, n, nfd, rep->why, sizeof(rep->why));
	if (t != -1)
		memcpy(&m, buf, n);
	else if (n >= sizeof(struct priv_hdr))
		memcpy(&rep->h, buf, sizeof(rep->h));
	rep->h.type = t == -1 ? 0 : (uint32_t)t;
	rep->h.len = sizeof(*rep);
	rep->h.zero = 0;
	switch (t) {
	case -1: rep->err = EINVAL; break;
	case PRIV_SHIM_START: rep->h.id = m.h.id; rep->err = act_shim_start(r, &m.shim, rep, rfd); break;
	case PRIV_SIGNAL: rep->h.id = m.h.id; rep->err = act_signal(r, &m.sig, rep); break;
	case PRIV_FCHOWN: rep->h.id = m.h.id; rep->err = act_fchown(r, &m.chown, fds, rep); break;
	case PRIV_NOTIFY: rep->h.id = m.h.id; sd_notify(0, m.notify.text); break;
	case PRIV_VOUCH: rep->h.id = m.h.id; rep->err = act_vouch(r, fds[0], rep); break;
	case PRIV_SBATCH: rep->h.id = m.h.id; rep->err = act_sbatch(r, &m.sbatch, fds[0], rep); break;
	case PRIV_SCANCEL: rep->h.id = m.h.id; rep->err = act_scancel(r, &m.scancel, rep); break;
	case PRIV_CHECK:
		rep->h.id = m.h.id;
		rep->err = act_check(r, &m.check, fds[0], fds[1], rep, rfd);
		break;
	case PRIV_FILES: rep->h.id = m.h.id; rep->err = act_files(r, &m.files, rep, rfd); break;
	case PRIV_RMTREE: rep->h.id = m.h.id; rep->err = act_rmtree(r, &m.rmtree, rep); break;
	case PRIV_CGROUP: rep->h.id = m.h.id; rep->err = act_cgroup(r, &m.cgroup, rep); break;
	}
	for (int i = 0; i < nfd; i++)
		close(fds[i]);
}

/* ---- the channel ------------------------------------------------------- */

#define PRIV_MAXFD 4

/* One message with its descriptors (MSG_CMSG_CLOEXEC): its length, 0 at
 * the end, -1 on error. A message cut short (MSG_TRUNC, MSG_CTRUNC) gets
 * a length of 1, which no type has. */
static ssize_t
chan_recv(int s, void *buf, size_t len, int *fds, int *nfd)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	union { char b[CMSG_SPACE(PRIV_MAXFD * sizeof(int))]; struct cmsghdr a; } c;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.b,
		.msg_controllen = sizeof(c.b) };
	ssize_t n;
	while ((n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC)) == -1 && errno == EINTR)
		;
	*nfd = 0;
	if (n <= 0)
		return n;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + (size_t)i * sizeof(int), sizeof(int));
			if (*nfd < PRIV_MAXFD)
				fds[(*nfd)++] = fd;
			else
				close(fd);
		}
	}
	return (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? 1 : n;
}

static int
chan_send(int s, const void *buf, size_t len, const int *fds, int nfd)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	union { char b[CMSG_SPACE(PRIV_MAXFD * sizeof(int))]; struct cmsghdr a; } c;
	memset(&c, 0, sizeof(c));
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (nfd > 0 && nfd <= PRIV_MAXFD) {
		mh.msg_control = c.b;
		mh.msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)nfd * sizeof(int));
	}
	ssize_t n;
	while ((n = sendmsg(s, &mh, MSG_NOSIGNAL)) == -1 && errno == EINTR)
		;
	return n == (ssize_t)len ? 0 : -1;
}

/* ---- the file server --------------------------------------------------- */

static const int pfs_flags[PFS_NOPS] = { [PFS_REALPATH] = 0, [PFS_STATAT] = PFS_AT | PFS_FOLLOW,
	[PFS_OPENAT] = PFS_AT | PFS_DIR | PFS_BENEATH };

int
pfs_decode(const void *buf, size_t n, int nfd, char *why, size_t whylen)
{
	struct pfs_req q;
	if (n != sizeof(q)) {
		snprintf(why, whylen, "files: a request of %zu bytes, not %zu", n, sizeof(q));
		return -1;
	}
	memcpy(&q, buf, n);
	if (q.op == 0 || q.op >= PFS_NOPS || (q.flags & ~(uint32_t)pfs_flags[q.op]) != 0) {
		snprintf(why, whylen, "files: op %u with flags %#x unknown", q.op, q.flags);
		return -1;
	}
	if (nfd != ((q.flags & PFS_AT) ? 1 : 0) || ((q.flags & PFS_BENEATH) && !(q.flags & PFS_AT))) {
		snprintf(why, whylen, "files: op %u: %d descriptors", q.op, nfd);
		return -1;
	}
	if (!field_ok(q.path, sizeof(q.path)) || q.path[0] == '\0' ||
	    (!(q.flags & PFS_AT) && q.path[0] != '/')) {
		snprintf(why, whylen, "files: op %u: no path, or a relative one", q.op);
		return -1;
	}
	return (int)q.op;
}

static void
pfs_stat_fill(struct pfs_stat *p, const struct stat *st)
{
	*p = (struct pfs_stat){ .dev = st->st_dev, .ino = st->st_ino,
		.size = (uint64_t)st->st_size, .mode = st->st_mode, .nlink = (uint32_t)st->st_nlink,
		.uid = st->st_uid, .gid = st->st_gid, .mtime_s = st->st_mtim.tv_sec,
		.mtime_ns = st->st_mtim.tv_nsec, .ctime_s = st->st_ctim.tv_sec,
		.ctime_ns = st->st_ctim.tv_nsec };
}

/* PFS_OPENAT: a regular file, or with PFS_DIR a directory, looked at
 * before it is opened (a device or a FIFO is never opened) and after:
 * 0 with *rfd, or an errno. */
static int
pfs_open(const struct pfs_req *q, int dfd, struct pfs_rep *rep, int *rfd)
{
	int dir = (q->flags & PFS_DIR) != 0, fd;
	int fl = O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | (dir ? O_DIRECTORY : 0);
	struct stat st;
	if (q->flags & PFS_BENEATH) {
		struct {
			uint64_t flags, mode, resolve;
		} how = { (uint64_t)fl, 0, 0x04 /* RESOLVE_NO_SYMLINKS */ | 0x08 /* BENEATH */ };
		fd = (int)syscall(SYS_openat2, dfd, q->path, &how, sizeof(how));
	} else {
		if (fstatat(dfd, q->path, &st, AT_SYMLINK_NOFOLLOW) == -1)
			return errno;
		if (S_ISLNK(st.st_mode))
			return ELOOP;
		if (!(S_ISREG(st.st_mode) || (dir && S_ISDIR(st.st_mode))))
			return S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		fd = openat(dfd, q->path, fl);
	}
	if (fd == -1)
		return errno;
	if (fstat(fd, &st) == -1 || !(S_ISREG(st.st_mode) || (dir && S_ISDIR(st.st_mode)))) {
		close(fd);
		return EINVAL;
	}
	pfs_stat_fill(&rep->st, &st);
	*rfd = fd;
	return 0;
}

void
pfs_handle(const void *buf, size_t n, int *fds, int nfd, struct pfs_rep *rep, int *rfd)
{
	struct pfs_req q;
	struct stat st;
	char why[160], real[PATH_MAX];
	memset(rep, 0, sizeof(*rep));
	*rfd = -1;
	int op = pfs_decode(buf, n, nfd, why, sizeof(why));
	if (op != -1)
		memcpy(&q, buf, sizeof(q));
	int dfd = op != -1 && (q.flags & PFS_AT) ? fds[0] : AT_FDCWD;
	switch (op) {
	case -1:
		rep->err = EINVAL;
		break;
	case PFS_REALPATH:
		if (realpath(q.path, real) == NULL)
			rep->err = errno;
		else
			snprintf(rep->path, sizeof(rep->path), "%s", real);
		break;
	case PFS_STATAT:
		if (fstatat(dfd, q.path, &st, (q.flags & PFS_FOLLOW) ? 0 : AT_SYMLINK_NOFOLLOW) == -1)
			rep->err = errno;
		else
			pfs_stat_fill(&rep->st, &st);
		break;
	case PFS_OPENAT:
		rep->err = pfs_open(&q, dfd, rep, rfd);
		break;
	}
	for (int i = 0; i < nfd; i++)
		close(fds[i]);
}

/* The file server: a child of the parent's that stays in the parent's
 * code (no exec), takes owner o's groups, gid and uid for good (root's
 * own runs: the parent's ids), and answers requests on s until the daemon
 * closes its end. A process that changed its uid from root without an
 * exec is not dumpable (and is made so explicitly): the owner cannot
 * ptrace it, nor read its memory, so what it answers is the server's
 * own, not the owner's word. It opens only read-only, regular files and
 * directories, and hashes nothing. */
static void __attribute__((noreturn))
files_serve(const struct priv_owner *o, int s)
{
	gid_t g[PRIV_NGROUPS];
	sigset_t none;
	uid_t ru, eu, su;
	for (uint32_t i = 0; i < o->ngroups; i++)
		g[i] = o->groups[i];
	sigemptyset(&none);
	int user = o->kind == PRIV_OWNER_USER, null = open("/dev/null", O_RDWR | O_CLOEXEC);
	/* Nothing of the parent's but its socket: not even its standard
	 * output and error (the log). */
	if (null == -1 || dup2(null, 0) == -1 || dup2(null, 1) == -1 || dup2(null, 2) == -1 ||
	    dup2(s, 3) == -1 || close_range(4, ~0U, 0) == -1 || chdir("/") == -1 ||
	    sigprocmask(SIG_SETMASK, &none, NULL) == -1 ||
	    (user && (o->uid == 0 || setgroups(o->ngroups, g) == -1 ||
	    setresgid(o->gid, o->gid, o->gid) == -1 ||
	    setresuid(o->uid, o->uid, o->uid) == -1 || setresuid(0, 0, 0) != -1 ||
	    getresuid(&ru, &eu, &su) == -1 || ru != o->uid || eu != o->uid || su != o->uid)) ||
	    prctl(PR_SET_DUMPABLE, 0) == -1 || prctl(PR_GET_DUMPABLE) != 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL) == -1)
		_exit(126);
	for (;;) {
		struct pfs_req q;
		struct pfs_rep rep;
		int fds[PRIV_MAXFD], nfd, rfd;
		ssize_t n = chan_recv(3, &q, sizeof(q), fds, &nfd);
		if (n <= 0)
			_exit(n == 0 ? 0 : 1);
		pfs_handle(&q, (size_t)n, fds, nfd, &rep, &rfd);
		int sent = chan_send(3, &rep, sizeof(rep), &rfd, rfd >= 0);
		if (rfd != -1)
			close(rfd);
		if (sent == -1)
			_exit(1);
	}
}

/* A file server as the owner (owner_check(): the shim's rule): its
 * socket goes back; the loop reaps it with the shims. */
static int
act_files(struct priv_rules *r, const struct priv_files *m, struct priv_reply *rep, int *rfd)
{
	char pin[PIN_MAX];
	int sv[2];
	if (owner_check(r, &m->owner, pin, rep) != 0)
		return EPERM;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		return errno;
	pid_t pid = fork();
	if (pid == 0)
		files_serve(&m->owner, sv[1]);
	int e = errno;
	close(sv[1]);
	if (pid == -1) {
		close(sv[0]);
		return e;
	}
	rep->pid = pid;
	*rfd = sv[0];
	return 0;
}

/* ---- the parent -------------------------------------------------------- */

/* Slurm's commands take up to SLURM_TIMEOUT_MS, and gc's removal of a
 * tree as long as the tree takes: each PRIV_SBATCH, PRIV_SCANCEL and
 * PRIV_RMTREE is served by a helper, a child of the parent's that acts
 * as the parent would (priv_handle()) and writes the reply to a pipe the
 * loop polls, so the parent serves the requests that come meanwhile; the
 * reply, once read, is sent with the request's id (the daemon's side
 * matches replies to requests by id), the job id remembered by the
 * parent first. Past PRIV_HELPERS at a time, the loop serves a Slurm
 * request itself; a removal past PRIV_RMTREES at a time (or with no
 * helper to be had) is refused, EAGAIN, never done in the loop: gc,
 * which asks for one at a time from the daemon's loop thread, says so
 * among its errors as for any removal that failed. */
#define PRIV_HELPERS 16
#define PRIV_RMTREES 4
static struct helper {
	pid_t pid;
	int fd;
	uint32_t id, type, uid;
} helpers[PRIV_HELPERS];
static int nhelpers;

/* The removals running in helpers. */
static int
helpers_rmtree(void)
{
	int n = 0;
	for (int k = 0; k < nhelpers; k++)
		n += helpers[k].type == PRIV_RMTREE;
	return n;
}

static int
helper_start(struct priv_rules *r, int s, int sfd, const union priv_msg *m, size_t n,
    int *fds, int nfd)
{
	int p[2];
	if (nhelpers == PRIV_HELPERS || (m->h.type == PRIV_RMTREE &&
	    helpers_rmtree() == PRIV_RMTREES) || pipe2(p, O_CLOEXEC) == -1)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		struct priv_reply rep;
		int rfd;
		close(s);
		close(sfd);
		close(p[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		in_helper = 1;
		priv_handle(r, m, n, fds, nfd, &rep, &rfd);
		_exit(write(p[1], &rep, sizeof(rep)) == (ssize_t)sizeof(rep) ? 0 : 1);
	}
	close(p[1]);
	if (pid == -1) {
		close(p[0]);
		return -1;
	}
	for (int i = 0; i < nfd; i++)
		close(fds[i]);
	helpers[nhelpers++] = (struct helper){ .pid = pid, .fd = p[0], .id = m->h.id,
		.type = m->h.type, .uid = m->h.type == PRIV_SBATCH ? m->sbatch.owner.uid : 0 };
	return 0;
}

/* Helper k's reply, read (its end: EIO); a job id its sbatch answered
 * remembered. The helper itself is reaped with the shims. */
static void
helper_done(struct priv_rules *r, int k, struct priv_reply *rep)
{
	struct helper h = helpers[k];
	helpers[k] = helpers[--nhelpers];
	ssize_t n;
	while ((n = read(h.fd, rep, sizeof(*rep))) == -1 && errno == EINTR)
		;
	close(h.fd);
	if (n != (ssize_t)sizeof(*rep)) {
		memset(rep, 0, sizeof(*rep));
		rep->h = (struct priv_hdr){ .type = h.type, .len = sizeof(*rep), .id = h.id };
		rep->err = EIO;
		snprintf(rep->why, sizeof(rep->why), "the parent's helper ended with no answer");
	} else if (h.type == PRIV_SBATCH && rep->err == 0)
		sjob_record(r, rep->why, h.uid);
}

/* A reply sent, a refusal logged: 0, or -1 when the daemon is gone. */
static int
reply(int s, const struct priv_reply *rep, int rfd)
{
	if (rep->err != 0 && rep->err != ENOENT)
		log_warnx("privileged parent: refused: %s", rep->why[0] ? rep->why :
		    strerror(rep->err));
	int sent = chan_send(s, rep, sizeof(*rep), &rfd, rfd >= 0);
	if (rfd != -1)
		close(rfd);
	return sent;
}

static void __attribute__((noreturn))
parent_loop(const struct conf *c, int s, pid_t daemon, int (*reload)(struct priv_rules *))
{
	static struct priv_rules rules;
	priv_rules_load(&rules, c);
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	int status = 0;
	for (;;) {
		struct pollfd pf[2 + PRIV_HELPERS] = { { .fd = sfd, .events = POLLIN },
			{ .fd = s, .events = POLLIN } };
		for (int k = 0; k < nhelpers; k++)
			pf[2 + k] = (struct pollfd){ .fd = helpers[k].fd, .events = POLLIN };
		if (poll(pf, 2 + (nfds_t)nhelpers, -1) == -1 && errno != EINTR)
			break;
		if (pf[0].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGCHLD)
					continue;
				if (si.ssi_signo == SIGHUP) {
					reload(&rules);
				}
				kill(daemon, (int)si.ssi_signo);
			}
			/* The shims it started, and the daemon process. */
			pid_t pid;
			int st;
			while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
				if (pid == daemon) {
					status = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
					_exit(status);
				}
		}
		/* Downwards: helper_done() moves the last helper to k. */
		struct priv_reply rep;
		int gone = 0;
		for (int k = nhelpers - 1; k >= 0 && !gone; k--)
			if (pf[2 + k].revents) {
				helper_done(&rules, k, &rep);
				gone = reply(s, &rep, -1) == -1;
			}
		if (gone)
			break;
		if (!(pf[1].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		union priv_msg m;
		int fds[PRIV_MAXFD], nfd, rfd;
		ssize_t n = chan_recv(s, &m, sizeof(m), fds, &nfd);
		if (n == 0 || (n == -1 && errno != EAGAIN))
			break;	/* the daemon process is gone */
		if (n == -1)
			continue;
		int t = priv_decode(&m, (size_t)n, nfd, rep.why, sizeof(rep.why));
		if ((t == PRIV_SBATCH || t == PRIV_SCANCEL || t == PRIV_RMTREE) &&
		    helper_start(&rules, s, sfd, &m, (size_t)n, fds, nfd) == 0)
			continue;
		if (t == PRIV_RMTREE) {
			memset(&rep, 0, sizeof(rep));
			rep.h = (struct priv_hdr){ .type = PRIV_RMTREE, .len = sizeof(rep),
				.id = m.h.id };
			rep.err = EAGAIN;
			snprintf(rep.why, sizeof(rep.why), "%s: the parent's removals are all "
			    "busy (%d at a time)", m.rmtree.path,
			    PRIV_RMTREES);
			for (int i = 0; i < nfd; i++)
				close(fds[i]);
			if (reply(s, &rep, -1) == -1)
				break;
			continue;
		}
		priv_handle(&rules, &m, (size_t)n, fds, nfd, &rep, &rfd);
		if (reply(s, &rep, rfd) == -1)
			break;
	}
	/* The daemon process ended (or its socket broke): wait for it, its
	 * status the parent's. */
	int st;
	kill(daemon, SIGKILL);
	while (waitpid(daemon, &st, 0) == -1 && errno == EINTR)
		;
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

static int chan = -1;
static pthread_mutex_t chan_mtx = PTHREAD_MUTEX_INITIALIZER;
static uint32_t chan_id;

/* The requests sent and not answered yet, under chan_mtx: the parent
 * answers a slow one (sbatch, scancel) after those that came later, so
 * one thread at a time reads the channel (reading) and hands each reply
 * to the request of its id, waking the others (chan_cv), one of which
 * reads next. */
struct waiter {
	uint32_t id;
	int done, nfd;
	ssize_t n;
	struct priv_reply *rep;
	int fds[PRIV_MAXFD];
	struct waiter *next;
};
static struct waiter *waiting;
static int reading;
static pthread_cond_t chan_cv = PTHREAD_COND_INITIALIZER;

int
priv_active(void)
{
	return chan >= 0;
}

/* The daemon process's watch on its parent: when the parent ends, so
 * does the daemon process, at once. (PR_SET_PDEATHSIG alone does not
 * last: the kernel clears it when the fsuid changes, as a spec's checks
 * change it.) */
static void *
parent_watch(void *arg)
{
	struct pollfd pf = { .fd = (int)(intptr_t)arg, .events = POLLIN };
	while (poll(&pf, 1, -1) == -1 && errno == EINTR)
		;
	_exit(1);
}

int
priv_start(const struct conf *c, int (*reload)(struct priv_rules *), int pidfd,
    int (*drop)(const struct conf *))
{
	if (geteuid() != 0 || (c->gid == (gid_t)-1 && c->admin_gid == (gid_t)-1 &&
	    c->job_uid == (uid_t)-1))
		return 0;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		return -1;
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	if (pid == -1)
		return -1;
	if (pid > 0) {
		close(sv[1]);
		struct flock rest = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 1 };
		fcntl(pidfd, F_SETLK, &rest);
		parent_loop(c, sv[0], pid, reload);
	}
	close(sv[0]);
	int pfd = (int)syscall(SYS_pidfd_open, parent, 0);
	/* The daemon's own user, for good, before any thread (the death
	 * signal after it: a change of credentials clears it). */
	if (drop != NULL && drop(c) == -1)
		_exit(1);
	pthread_t th;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 || pfd == -1 || getppid() != parent ||
	    pthread_create(&th, NULL, parent_watch, (void *)(intptr_t)pfd) != 0)
		_exit(1);
	fcntl(pfd, F_SETFD, FD_CLOEXEC);
	struct flock one = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 1, .l_len = 1 };
	int rc;
	while ((rc = fcntl(pidfd, F_SETLKW, &one)) == -1 && errno == EINTR)
		;
	if (rc == -1)
		_exit(1);
	chan = sv[1];
	return 0;
}

/* A request and its reply: the reply's err (0, or an errno: errno set to
 * it too), its descriptor in *rfd when asked for. */
static int
priv_call(union priv_msg *m, size_t len, const int *sfds, int nsfd, struct priv_reply *rep,
    int *rfd)
{
	struct waiter w = { .rep = rep, .n = -1 }, **pw;
	pthread_mutex_lock(&chan_mtx);
	m->h.len = (uint32_t)len;
	m->h.id = w.id = ++chan_id;
	m->h.zero = 0;
	w.next = waiting;
	waiting = &w;
	pthread_mutex_unlock(&chan_mtx);
	int sent = chan_send(chan, m, len, sfds, nsfd) == 0;
	pthread_mutex_lock(&chan_mtx);
	while (sent && !w.done) {
		if (reading) {
			pthread_cond_wait(&chan_cv, &chan_mtx);
			continue;
		}
		reading = 1;
		pthread_mutex_unlock(&chan_mtx);
		struct priv_reply got;
		int fds[PRIV_MAXFD], nfd;
		memset(&got, 0, sizeof(got));
		ssize_t n = chan_recv(chan, &got, sizeof(got), fds, &nfd);
		pthread_mutex_lock(&chan_mtx);
		reading = 0;
		/* A reply to no request waiting, or none: ours, found bad. */
		struct waiter *to = &w;
		for (struct waiter *x = waiting; n == (ssize_t)sizeof(got) && x; x = x->next)
			if (x->id == got.h.id)
				to = x;
		to->done = 1;
		to->n = n;
		*to->rep = got;
		to->nfd = nfd;
		memcpy(to->fds, fds, sizeof(fds));
		pthread_cond_broadcast(&chan_cv);
	}
	for (pw = &waiting; *pw != &w; pw = &(*pw)->next)
		;
	*pw = w.next;
	pthread_mutex_unlock(&chan_mtx);
	int nfd = w.nfd, *fds = w.fds;
	ssize_t n = w.n;
	int bad = n != (ssize_t)sizeof(*rep) || rep->h.id != m->h.id;
	for (int i = 0; i < nfd; i++) {
		if (i == 0 && rfd != NULL && !bad && rep->err == 0)
			*rfd = fds[0];
		else
			close(fds[i]);
	}
	if (bad) {
		/* The parent is gone: the daemon can start nothing more. */
		log_warnx("privileged parent: no reply; exiting");
		_exit(1);
	}
	if (rep->err != 0 && rep->why[0])
		log_warnx("privileged parent: %s", rep->why);
	errno = rep->err;
	return rep->err;
}

/* Parse "UID:GID[:G1,G2...]" (control.c's run_owner()). */
static int
owner_parse(const char *owner, struct priv_owner *o)
{
	memset(o, 0, sizeof(*o));
	if (owner == NULL) {
		o->kind = PRIV_OWNER_ROOT;
		return 0;
	}
	char *end;
	o->uid = (uint32_t)strtoul(owner, &end, 10);
	if (*end != ':')
		return -1;
	o->gid = (uint32_t)strtoul(end + 1, &end, 10);
	while (*end == ':' || *end == ',') {
		if (o->ngroups == PRIV_NGROUPS)
			return -1;
		o->groups[o->ngroups++] = (uint32_t)strtoul(end + 1, &end, 10);
	}
	return *end == '\0' ? 0 : -1;
}

int
priv_shim_start(const char *shim, const char *owner, const char *cgroup, pid_t *pid,
    uint64_t *start)
{
	int sv[2];
	if (chan < 0) {
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
			return -1;
		*pid = shim_spawn_fd(shim, NULL, "-G", sv[1]);
		int e = errno;
		close(sv[1]);
		if (*pid == -1) {
			close(sv[0]);
			errno = e;
			return -1;
		}
		*start = proc_starttime(*pid);
		return sv[0];
	}
	union priv_msg m;
	memset(&m, 0, sizeof(m));
	m.h.type = PRIV_SHIM_START;
	const char *leaf = cgroup ? strrchr(cgroup, '/') : NULL;
	if (owner_parse(owner, &m.shim.owner) == -1 || (cgroup != NULL && (leaf == NULL ||
	    snprintf(m.shim.cgroup, sizeof(m.shim.cgroup), "%s", leaf + 1) >=
	    (int)sizeof(m.shim.cgroup)))) {
		errno = EINVAL;
		return -1;
	}
	struct priv_reply rep;
	int fd = -1;
	if (priv_call(&m, sizeof(m.shim), NULL, 0, &rep, &fd) != 0)
		return -1;
	*pid = rep.pid;
	*start = rep.start;
	return fd;
}

int
priv_signal(const char *rdir, int mode, int sig)
{
	union priv_msg m;
	struct priv_reply rep;
	memset(&m, 0, sizeof(m));
	m.h.type = PRIV_SIGNAL;
	m.sig.mode = (uint32_t)mode;
	m.sig.sig = sig;
	if (snprintf(m.sig.rdir, sizeof(m.sig.rdir), "%s", rdir) >= (int)sizeof(m.sig.rdir)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return priv_call(&m, sizeof(m.sig), NULL, 0, &rep, NULL) == 0 ? 0 : -1;
}

int
priv_fchown_fds(const int *fds, int nfd, uid_t uid, gid_t gid)
{
	if (nfd < 1 || nfd > PRIV_FCHOWN_FDS) {
		errno = EINVAL;
		return -1;
	}
	if (chan < 0) {
		for (int i = 0; i < nfd; i++)
			if (fchownat(fds[i], "", uid, gid, AT_EMPTY_PATH) == -1)
				return -1;
		return 0;
	}
	union priv_msg m;
	struct priv_reply rep;
	memset(&m, 0, sizeof(m));
	m.h.type = PRIV_FCHOWN;
	m.chown.uid = uid;
	m.chown.gid = gid;
	m.chown.count = (uint32_t)nfd;
	return priv_call(&m, sizeof(m.chown), fds, nfd, &rep, NULL) == 0 ? 0 : -1;
}

int
priv_fchown(int fd, uid_t uid, gid_t gid)
{
	return priv_fchown_fds(&fd, 1, uid, gid);
}

int
priv_rmtree(const char *rel, char *why, size_t whylen)
{
	union priv_msg m;
	struct priv_reply rep;
	memset(&m, 0, sizeof(m));
	m.h.type = PRIV_RMTREE;
	if (snprintf(m.rmtree.path, sizeof(m.rmtree.path), "%s", rel) >=
	    (int)sizeof(m.rmtree.path)) {
		snprintf(why, whylen, "%s: %s", rel, strerror(ENAMETOOLONG));
		errno = ENAMETOOLONG;
		return -1;
	}
	if (priv_call(&m, sizeof(m.rmtree), NULL, 0, &rep, NULL) == 0)
		return 0;
	int e = errno;
	snprintf(why, whylen, "%s: %s", rel, rep.why[0] ? rep.why : strerror(e));
	errno = e;
	return -1;
}

int
priv_cgroup(const char *owner, int64_t bytes, char *dir, size_t dirlen, char *why,
    size_t whylen)
{
	union priv_msg m;
	struct priv_reply rep;
	memset(&m, 0, sizeof(m));
	m.h.type = PRIV_CGROUP;
	m.cgroup.op = PRIV_CG_MAKE;
	m.cgroup.bytes = bytes;
	if (owner == NULL || owner_parse(owner, &m.cgroup.owner) == -1) {
		snprintf(why, whylen, "not a user's run");
		errno = EINVAL;
		return -1;
	}
	if (priv_call(&m, sizeof(m.cgroup), NULL, 0, &rep, NULL) != 0) {
		int e = errno;
		snprintf(why, whylen, "%s", rep.why[0] ? rep.why : strerror(e));
		errno = e;
		return -1;
	}
	snprintf(dir, dirlen, "%s", rep.why);
	return 0;
}

int
priv_cgroup_remove(const char *dir)
{
	union priv_msg m;
	struct priv_reply rep;
	const char *leaf = strrchr(dir, '/');
	memset(&m, 0, sizeof(m));
	m.h.type = PRIV_CGROUP;
	m.cgroup.op = PRIV_CG_REMOVE;
	if (leaf == NULL || snprintf(m.cgroup.name, sizeof(m.cgroup.name), "%s", leaf + 1) >=
	    (int)sizeof(m.cgroup.name)) {
		errno = EINVAL;
		return -1;
	}
	return priv_call(&m, sizeof(m.cgroup), NULL, 0, &rep, NULL) == 0 ? 0 : -1;
}

void
priv_notify(const char *text)
{
	if (chan < 0) {
		sd_notify(0, text);
		return;
	}
	union priv_msg m;
	struct priv_reply rep;
	memset(&m, 0, sizeof(m));
	m.h.type = PRIV_NOTIFY;
	snprintf(m.notify.text, sizeof(m.notify.text), "%s", text);
	priv_call(&m, sizeof(m.notify), NULL, 0, &rep, NULL);
}

void
priv_vouch(int fd)
{
	union priv_msg m;
	struct priv_reply rep;
	memset(&m, 0, sizeof(m));
	m.h.type = PRIV_VOUCH;
	priv_call(&m, sizeof(m.vouch), &fd, 1, &rep, NULL);
}

int
priv_sbatch(const char *owner, int fd, char *id, size_t idlen, char *err, size_t errlen)
{
	union priv_msg m;
	struct priv_reply rep;
	memset(&m, 0, sizeof(m));
	m.h.type = PRIV_SBATCH;
	if (owner_parse(owner, &m.sbatch.owner) == -1) {
		snprintf(err, errlen, "no owner to submit as");
		return -1;
	}
	if (priv_call(&m, sizeof(m.sbatch), &fd, 1, &rep, NULL) != 0) {
		snprintf(err, errlen, "%s", rep.why[0] ? rep.why : strerror(rep.err));
		return -1;
	}
	/* The parent's answer checked as sbatch's own would be. */
	if (slurm_parse_sbatch(rep.why, id, idlen) == -1 || strcmp(id, rep.why) != 0) {
		snprintf(err, errlen, "the parent's sbatch answered no job id: \"%.100s\"", rep.why);
		return -1;
	}
	return 0;
}

int
priv_scancel(const char *owner, const char *id, int sig, char *err, size_t errlen)
{
	union priv_msg m;
	struct priv_reply rep;
	memset(&m, 0, sizeof(m));
	m.h.type = PRIV_SCANCEL;
	m.scancel.sig = sig;
	if (owner_parse(owner, &m.scancel.owner) == -1 ||
	    snprintf(m.scancel.id, sizeof(m.scancel.id), "%s", id) >= (int)sizeof(m.scancel.id)) {
		snprintf(err, errlen, "no owner, or a job id too long");
		return -1;
	}
	int rc = priv_call(&m, sizeof(m.scancel), NULL, 0, &rep, NULL);
	snprintf(err, errlen, "%s", rep.why);
	return rc == 0 ? 0 : -1;
}

int
priv_check(int fd, const char *path, const char *text, size_t len, char *why, size_t whylen)
{
	union priv_msg m;
	struct priv_reply rep;
	memset(&m, 0, sizeof(m));
	m.h.type = PRIV_CHECK;
	if (snprintf(m.check.path, sizeof(m.check.path), "%s", path) >=
	    (int)sizeof(m.check.path)) {
		snprintf(why, whylen, "%s: path too long", path);
		return -1;
	}
	/* The text in a sealed memfd: what the parent hands the check is
	 * what the daemon checked, and cannot change after. */
	int tfd = memfd_create("spec", MFD_CLOEXEC | MFD_ALLOW_SEALING), rfd = -1;
	if (tfd == -1 || plc_write_all(tfd, text, len) == -1 ||
	    fcntl(tfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) == -1) {
		snprintf(why, whylen, "memfd: %s", strerror(errno));
		if (tfd != -1)
			close(tfd);
		return -1;
	}
	int fds[2] = { fd, tfd };
	int rc = priv_call(&m, sizeof(m.check), fds, 2, &rep, &rfd);
	close(tfd);
	if (rc != 0 || rfd < 0) {
		snprintf(why, whylen, "%s", rep.why[0] ? rep.why : strerror(rep.err ? rep.err : EIO));
		if (rfd >= 0)
			close(rfd);
		return -1;
	}
	return rfd;
}

int
priv_files(const char *owner)
{
	union priv_msg m;
	struct priv_reply rep;
	int fd = -1;
	if (chan < 0) {
		errno = ENOSYS;
		return -1;
	}
	memset(&m, 0, sizeof(m));
	m.h.type = PRIV_FILES;
	if (owner_parse(owner, &m.files.owner) == -1) {
		errno = EINVAL;
		return -1;
	}
	if (priv_call(&m, sizeof(m.files), NULL, 0, &rep, &fd) != 0)
		return -1;
	if (fd < 0)
		errno = EIO;
	return fd;
}

/* One request to of's file server and its reply: 0 with rep (and *rfd
 * when asked for and given), or -1 with the server's errno (EIO: no
 * server, a bad reply or none within PFS_TIMEOUT_S; the socket is then
 * shut, so that a late reply is never taken for the next request's and
 * the server ends). A server that answered EIO, or none, is marked
 * failed: never kept idle for another reader (owner_files_close()). */
static int
files_call(struct owner_files *of, uint32_t op, uint32_t flags, int dfd, const char *path,
    struct pfs_rep *rep, int *rfd)
{
	struct pfs_req q;
	int fds[PRIV_MAXFD], nfd = 0, s = of->s;
	memset(&q, 0, sizeof(q));
	q.op = op;
	q.flags = flags | (dfd != AT_FDCWD ? PFS_AT : 0);
	if (snprintf(q.path, sizeof(q.path), "%s", path) >= (int)sizeof(q.path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (chan_send(s, &q, sizeof(q), &dfd, dfd != AT_FDCWD) == -1 ||
	    chan_recv(s, rep, sizeof(*rep), fds, &nfd) != (ssize_t)sizeof(*rep) ||
	    nfd != (rep->err == 0 && rfd != NULL ? 1 : 0) || rep->zero != 0 ||
	    !field_ok(rep->path, sizeof(rep->path))) {
		for (int i = 0; i < nfd; i++)
			close(fds[i]);
		shutdown(s, SHUT_RDWR);
		of->failed = 1;
		errno = EIO;
		return -1;
	}
	if (rep->err != 0) {
		of->failed |= rep->err == EIO;
		errno = rep->err;
		return -1;
	}
	if (rfd != NULL)
		*rfd = fds[0];
	return 0;
}

static void
pfs_stat_get(struct stat *st, const struct pfs_stat *p)
{
	memset(st, 0, sizeof(*st));
	st->st_dev = (dev_t)p->dev;
	st->st_ino = (ino_t)p->ino;
	st->st_size = (off_t)p->size;
	st->st_mode = (mode_t)p->mode;
	st->st_nlink = (nlink_t)p->nlink;
	st->st_uid = (uid_t)p->uid;
	st->st_gid = (gid_t)p->gid;
	st->st_mtim.tv_sec = (time_t)p->mtime_s;
	st->st_mtim.tv_nsec = (long)p->mtime_ns;
	st->st_ctim.tv_sec = (time_t)p->ctime_s;
	st->st_ctim.tv_nsec = (long)p->ctime_ns;
}

/* Idle file servers, kept by the daemon process for the next reader of
 * the same owner's files (a job's events and artifacts, a reuse
 * decision's inputs) instead of a PRIV_FILES fork a job: at most
 * PFS_IDLE_OWNER an owner ("UID:GID[:G1,...]" compared whole, groups
 * too; NULL, root's own runs, apart) and PFS_IDLE_ALL in all, each closed
 * past PFS_IDLE_S unused (owner_files_idle()) or at a reload. A server
 * holds nothing between requests but its owner's ids, and serves one
 * reader at a time (taken out while in use). One that failed (EIO, a
 * timeout: files_call() shuts its socket) or has anything to read while
 * idle (a late reply, its end) is closed, never kept nor taken; so is
 * one asked for before the last reload (idle_gen: the parent's rules
 * may have changed), when its reader is done. */
#define PFS_IDLE_OWNER	4
#define PFS_IDLE_ALL	32
#define PFS_IDLE_S	10
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static struct idle_server {
	char *owner;			/* malloc'd; NULL: root's own runs */
	int s;
	time_t since;
} idle[PFS_IDLE_ALL];
static int nidle;
static unsigned idle_gen;		/* reloads, by owner_files_idle(1) */

static time_t
idle_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static int
idle_same(const char *a, const char *b)
{
	return a == NULL || b == NULL ? a == b : strcmp(a, b) == 0;
}

/* An idle server's socket has nothing to read and no end. */
static int
idle_sound(int s)
{
	struct pollfd p = { .fd = s, .events = POLLIN };
	return poll(&p, 1, 0) == 0;
}

/* idle[i] forgotten, under idle_lock; its socket closed (the server
 * ends at its end of file) unless keep. */
static int
idle_remove(int i, int keep)
{
	int s = idle[i].s;
	if (!keep)
		close(s);
	free(idle[i].owner);
	idle[i] = idle[--nidle];
	return s;
}

/* An idle server of owner's, or -1; *gen, the reloads it belongs after
 * (a new one's, asked for after -1). */
static int
idle_take(const char *owner, unsigned *gen)
{
	int s = -1;
	pthread_mutex_lock(&idle_lock);
	*gen = idle_gen;
	for (int i = nidle - 1; i >= 0 && s == -1; i--) {
		if (!idle_same(idle[i].owner, owner))
			continue;
		if (idle_sound(idle[i].s))
			s = idle_remove(i, 1);
		else
			idle_remove(i, 0);
	}
	pthread_mutex_unlock(&idle_lock);
	return s;
}

/* s, a sound server of owner's asked for after the last reload, kept
 * idle; else closed. */
static void
idle_put(const char *owner, int s, unsigned gen)
{
	int n = 0;
	pthread_mutex_lock(&idle_lock);
	for (int i = 0; i < nidle; i++)
		n += idle_same(idle[i].owner, owner);
	if (gen == idle_gen && n < PFS_IDLE_OWNER && nidle < PFS_IDLE_ALL && idle_sound(s)) {
		idle[nidle].owner = owner != NULL ? xstrdup(owner) : NULL;
		idle[nidle].s = s;
		idle[nidle++].since = idle_now();
		s = -1;
	}
	pthread_mutex_unlock(&idle_lock);
	if (s != -1)
		close(s);
}

void
owner_files_idle(int all)
{
	time_t now = idle_now();
	pthread_mutex_lock(&idle_lock);
	idle_gen += all != 0;
	for (int i = nidle - 1; i >= 0; i--)
		if (all || now - idle[i].since >= PFS_IDLE_S || !idle_sound(idle[i].s))
			idle_remove(i, 0);
	pthread_mutex_unlock(&idle_lock);
}

/* The server's socket, started at the first request (owner_files_open()
 * asks for none: most reuse decisions read no file): an idle one of the
 * owner's, else a new one. 0, or -1 with errno. */
static int
files_ready(struct owner_files *of)
{
	if (of->s >= 0)
		return 0;
	if (!of->lazy) {
		errno = EBADF;
		return -1;
	}
	int s = idle_take(of->owner, &of->gen);
	if (s != -1) {
		of->s = s;
		return 0;
	}
	s = priv_files(of->owner);
	if (s == -1)
		return -1;
	owner_files_use(of, s);
	return 0;
}

static int
files_statat(void *arg, int dfd, const char *name, struct stat *st)
{
	struct owner_files *of = arg;
	struct pfs_rep rep;
	if (files_ready(of) == -1 ||
	    files_call(of, PFS_STATAT, 0, dfd, name, &rep, NULL) == -1)
		return -1;
	pfs_stat_get(st, &rep.st);
	return 0;
}

static int
files_openat(void *arg, int dfd, const char *name, int dir, int beneath)
{
	struct owner_files *of = arg;
	struct pfs_rep rep;
	int fd = -1;
	if (files_ready(of) == -1 || files_call(of, PFS_OPENAT, (dir ? PFS_DIR : 0) |
	    (beneath ? PFS_BENEATH : 0), dfd, name, &rep, &fd) == -1)
		return -1;
	return fd;
}

void
owner_files_use(struct owner_files *of, int s)
{
	/* Its owner may stop the server (SIGSTOP): a thread waits for it
	 * PFS_TIMEOUT_S at most. */
	struct timeval tv = { .tv_sec = PFS_TIMEOUT_S };
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	of->s = s;
	of->as = 0;
	of->ops = (struct plc_fs){ files_statat, files_openat, of };
	of->fs = &of->ops;
}

void
owner_files_move(struct owner_files *to, struct owner_files *from)
{
	*to = *from;
	to->ops.arg = to;
	if (to->fs != NULL)
		to->fs = &to->ops;
	from->owner = NULL;
	from->s = -1;
}

int
owner_files_open(struct owner_files *of, const char *owner)
{
	uid_t uid = 0;
	gid_t gid;
	memset(of, 0, sizeof(*of));
	of->s = -1;
	if (priv_active() && (owner == NULL || owner_ids(owner, &uid, &gid) == 0) &&
	    uid != geteuid()) {
		/* The server is started at the first request (files_ready()). */
		of->lazy = 1;
		of->owner = owner != NULL ? xstrdup(owner) : NULL;
		of->ops = (struct plc_fs){ files_statat, files_openat, of };
		of->fs = &of->ops;
		return 0;
	}
	of->as = owner_fs_enter(owner, &of->save);
	return of->as == -1 ? -1 : 0;
}

void
owner_files_close(struct owner_files *of)
{
	if (of->s >= 0 && of->lazy && !of->failed)
		idle_put(of->owner, of->s, of->gen);
	else if (of->s >= 0)
		close(of->s);
	else if (of->as == 1)
		owner_fs_leave(&of->save);
	free(of->owner);
	of->owner = NULL;
	of->s = -1;
	of->as = 0;
	of->failed = 0;
}

/* path made absolute against the daemon's working directory: the
 * server has none of its own. */
static int
files_abs(const char *path, char *out, size_t len)
{
	char cwd[PATH_MAX];
	if (path[0] == '/')
		return snprintf(out, len, "%s", path) < (int)len ? 0 : -1;
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		return -1;
	return snprintf(out, len, "%s/%s", cwd, path) < (int)len ? 0 : -1;
}

char *
owner_files_realpath(struct owner_files *of, const char *path)
{
	char a[PATH_MAX];
	struct pfs_rep rep;
	if (of->fs == NULL)
		return realpath(path, NULL);
	if (files_abs(path, a, sizeof(a)) == -1) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	if (files_ready(of) == -1 || files_call(of, PFS_REALPATH, 0, AT_FDCWD, a, &rep, NULL) == -1)
		return NULL;
	return xstrdup(rep.path);
}

int
owner_files_stat(struct owner_files *of, const char *path, struct stat *st, int nofollow)
{
	char a[PATH_MAX];
	struct pfs_rep rep;
	if (of->fs == NULL)
		return nofollow ? lstat(path, st) : stat(path, st);
	if (files_abs(path, a, sizeof(a)) == -1) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (files_ready(of) == -1 || files_call(of, PFS_STATAT, nofollow ? 0 : PFS_FOLLOW, AT_FDCWD, a, &rep,
	    NULL) == -1)
		return -1;
	pfs_stat_get(st, &rep.st);
	return 0;
}
