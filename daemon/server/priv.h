/*
 * priv.h: the privileged parent of a multi-user daemon and its channel
 * (priv.c, pipelined(8) SECURITY, HACKING.md: Processes and threads).
 *
 * Started as root with group, admin_group or job_user set, pipelined
 * forks once, before it opens the store: the parent keeps root and does
 * only the acts below, each asked for by one message over a
 * SOCK_SEQPACKET socketpair and checked by the parent by rules of its
 * own; the child, the daemon process, is everything else. A message is a
 * fixed header and a fixed body for its type: no pointer, no length but
 * the header's, every string NUL-terminated inside its field,
 * descriptors attached with SCM_RIGHTS, as many as the type takes. The
 * reply has the request's id and type.
 */
#ifndef PL_PRIV_H
#define PL_PRIV_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "exec.h"
#include "pld.h"
#include "plio.h"

#define PRIV_NGROUPS SHIM_NGROUPS	/* exec.h: the shim's, the control socket's */

/* The parent's Slurm jobs it remembers (for PRIV_SCANCEL): the newest
 * PRIV_SJOBS, also in state_dir/priv.owners, which it writes again with
 * only those (and the owners it vouched for) at start and when the file
 * holds twice as many. */
#define PRIV_SJOBS 4096

enum priv_type {
	PRIV_SHIM_START = 1,	/* a run's shim, pinned to one owner; reply: its socket */
	PRIV_SIGNAL,		/* a signal to a process a shim started */
	PRIV_FCHOWN,		/* a descriptor of the daemon's given to an owner */
	PRIV_NOTIFY,		/* a line for the service manager (sd_notify) */
	PRIV_VOUCH,		/* a submitter's connection: its credentials */
	PRIV_SBATCH,		/* a batch script, submitted as its owner; reply: the job id */
	PRIV_SCANCEL,		/* a job of the parent's sbatch, cancelled as its owner */
	PRIV_CHECK,		/* a spec's file checks, as its submitter; reply: their answer */
	PRIV_FILES,		/* a file server as a run's owner; reply: its socket */
	PRIV_RMTREE,		/* a run's directory below state_dir/runs, removed */
	PRIV_CGROUP,		/* a memory cgroup for an owner's job; reply: its directory */
	PRIV_NTYPES
};

struct priv_hdr {
	uint32_t type;		/* enum priv_type */
	uint32_t len;		/* the whole message, header included */
	uint32_t id;		/* the request's, echoed by its reply */
	uint32_t zero;		/* 0 */
};

/* Who a shim's processes (or Slurm's commands) run as: uid, gid and the
 * supplementary groups. PRIV_OWNER_ROOT: root's own run without job_user
 * (no -u at all), all ids 0, which the parent serves only when its own
 * configuration has no job_user and root vouched for itself. */
#define PRIV_OWNER_USER 0
#define PRIV_OWNER_ROOT 1
struct priv_owner {
	uint32_t kind;		/* PRIV_OWNER_* */
	uint32_t uid, gid;
	uint32_t ngroups;	/* <= PRIV_NGROUPS */
	uint32_t groups[PRIV_NGROUPS];
};

/* PRIV_SHIM_START: cgroup, "" or the last component of a directory a
 * PRIV_CG_MAKE answered for the same owner (memcap_leaf_ok()), which the
 * parent, root, moves the shim into before its socket goes back: the
 * shim, and the stage process and programs it starts, run in that
 * memory cgroup without a right of the owner's. */
struct priv_shim_start {
	struct priv_hdr h;
	struct priv_owner owner;
	char cgroup[64];
};

/* PRIV_SIGNAL: the process a shim started, named by its records
 * directory (exec.h: STATE/.../.shim/NAME), which the parent reads
 * itself. PRIV_SIG_CHILD: the child, and its group while it leads it;
 * PRIV_SIG_ORPHANS: the group of a child whose shim is gone. */
#define PRIV_SIG_CHILD 0
#define PRIV_SIG_ORPHANS 1
struct priv_signal {
	struct priv_hdr h;
	uint32_t mode;
	int32_t sig;
	char rdir[PATH_MAX];
};

/* PRIV_FCHOWN: count descriptors attached, 1 to PRIV_FCHOWN_FDS (a job's
 * work directory, a stage process's context file and its process
 * directory go in one message: job_chown_later()). */
#define PRIV_FCHOWN_FDS 3
struct priv_fchown {
	struct priv_hdr h;
	uint32_t uid, gid;
	uint32_t count;
};

struct priv_notify {
	struct priv_hdr h;
	char text[256];
};

/* Every reply: err 0 or an errno; PRIV_SHIM_START's carries the shim's
 * pid and start time, and its socket attached when err is 0. */
struct priv_reply {
	struct priv_hdr h;
	int32_t err;
	int32_t pid;
	uint64_t start;
	char why[160];		/* the parent's reason for a refusal */
};

/* PRIV_VOUCH: the submitter's connection attached; the parent reads its
 * credentials (SO_PEERCRED, SO_PEERGROUPS) and, for root, group's or
 * admin_group's member, vouches for the owner its runs run as. */
struct priv_vouch {
	struct priv_hdr h;
};

/* PRIV_SBATCH: the batch script attached, a regular file, sbatch's
 * standard input; the owner as for a shim, a user of no id 0 or
 * PRIV_OWNER_ROOT. The reply's why holds the job id when err is 0
 * (digits), else Slurm's words. PRIV_SCANCEL: a job id the parent's own
 * sbatch answered for the same uid (0: root's), and the signal as
 * slurm_cancel() takes it (0: cancel). */
struct priv_sbatch {
	struct priv_hdr h;
	struct priv_owner owner;
};

struct priv_scancel {
	struct priv_hdr h;
	struct priv_owner owner;
	int32_t sig;
	char id[32];
};

/* PRIV_CHECK: the submitter's connection and the spec's text attached,
 * in that order; the text a memfd sealed against writes, growth and
 * shrinking, of at most max_spec_bytes (pipelined.conf(5)); path, the
 * spec's path as the client named it (the errors' file, the directory
 * of its relative paths). The parent reads the peer's credentials
 * itself, refuses root (whose checks the daemon makes as before) and a
 * peer it would not vouch for, and starts `pipeline-stage --check CONF
 * PLUGIN_DIR MAX_SPEC_BYTES MAX_SPEC_JOBS MAX_VARIANTS PATH` as the peer,
 * the text on its standard input; the reply carries the read end of its
 * standard output, one JSON line. */
struct priv_check {
	struct priv_hdr h;
	char path[PATH_MAX];
};
/* How long a check may take: the parent's helper is ended past it, and
 * the daemon stops waiting for its answer. */
#define PRIV_CHECK_TIMEOUT_S 10

/* PRIV_FILES: a file server as owner o (owner_check(), the shim's
 * rule): a process of the parent's, forked and not exec'd, that takes
 * the owner's groups, gid and uid for good and answers PFS_* requests on
 * the socket the reply carries, one at a time, until the daemon closes
 * it. The daemon reads a run owner's files through it: what the owner
 * could not open, it cannot either. */
struct priv_files {
	struct priv_hdr h;
	struct priv_owner owner;
};

/* The file server's requests: a fixed layout, the path NUL-terminated
 * inside its field and nothing but NULs after it; with PFS_AT one
 * descriptor attached (a directory the server opened), without it none
 * and an absolute path.
 *   PFS_REALPATH  realpath(3) of path (no PFS_AT): reply's path.
 *   PFS_STATAT    fstatat(2) of path, AT_SYMLINK_NOFOLLOW unless
 *                 PFS_FOLLOW: reply's st.
 *   PFS_OPENAT    path opened O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC
 *                 (PFS_DIR: O_DIRECTORY; PFS_BENEATH: no link on the
 *                 way and nothing above the directory attached), refused
 *                 (EINVAL, ELOOP for a link) unless a regular file or,
 *                 with PFS_DIR, a directory, by lstat before it is
 *                 opened and fstat after; the reply carries it.
 * Every reply: err 0 or an errno, as the owner would have met it. */
enum pfs_op {
	PFS_REALPATH = 1,
	PFS_STATAT,
	PFS_OPENAT,
	PFS_NOPS
};
#define PFS_AT		0x1
#define PFS_DIR		0x2
#define PFS_BENEATH	0x4
#define PFS_FOLLOW	0x8
/* How long the daemon waits for a reply: the server's requests block on
 * nothing, but its owner may stop it. */
#define PFS_TIMEOUT_S	10
struct pfs_req {
	uint32_t op;
	uint32_t flags;
	char path[PATH_MAX];
};
struct pfs_stat {
	uint64_t dev, ino, size;
	uint32_t mode, nlink, uid, gid;
	int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
};
struct pfs_rep {
	int32_t err;
	uint32_t zero;
	struct pfs_stat st;
	char path[PATH_MAX];
};
/* A file server's request of n bytes with nfd descriptors: its op, or -1
 * with why. */
int	pfs_decode(const void *buf, size_t n, int nfd, char *why, size_t whylen);
/* One request served (fds, the nfd descriptors with it, closed here):
 * rep filled, *rfd a descriptor to send with it or -1. Split from the
 * server's loop for the unit test; run with the owner's ids. */
void	pfs_handle(const void *buf, size_t n, int *fds, int nfd, struct pfs_rep *rep, int *rfd);

/* PRIV_RMTREE: gc's removal of a file or directory below state_dir/runs
 * that the daemon's user cannot remove (a member's 0750 work directory):
 * path relative to that directory, NUL-terminated inside its field, of
 * two components or more (a run's job's), none empty, "." or "..". The
 * parent opens state_dir/runs and each directory on the way with
 * O_DIRECTORY|O_NOFOLLOW from the one before, and removes the last name
 * relative to its parent, nothing followed, at most PRIV_RMTREE_DEPTH
 * directories deep: nothing outside the runs tree. It does so in a
 * helper, a child of its own (as sbatch's), at most a few at a time
 * (EAGAIN past them), and answers when the helper ends: its loop serves
 * the other requests meanwhile. */
#define PRIV_RMTREE_DEPTH 64
struct priv_rmtree {
	struct priv_hdr h;
	char path[PATH_MAX];
};

/* PRIV_CGROUP: a memory cgroup for a run owner's stage process and its
 * programs (the probe's host_mem_cap, memcap.h), which the owner could
 * not make. PRIV_CG_MAKE: for owner o (the shim's rule, a user of no id
 * 0, never PRIV_OWNER_ROOT), the parent makes, as root, a group below its
 * own cgroup (memcap_make_root(): cgroup v2 where its cgroup delegates
 * the memory controller, else v1's memory hierarchy; never a path the
 * daemon names) capped at bytes, PRIV_CG_MIN to PRIV_CG_MAX, with no
 * swap, all of it root's (nothing given to o: the parent itself moves
 * the shim of o's job into it, PRIV_SHIM_START's cgroup); the reply's
 * why holds the directory, which the daemon hands the stage process in
 * PL_MEMCAP_DIR. PRIV_CG_REMOVE: name, the last
 * component of a directory a PRIV_CG_MAKE answered ("pipelined-probe-"
 * digits "-" digits, memcap_leaf_ok()), removed from below the parent's
 * own cgroup once empty; bytes and owner all 0. */
#define PRIV_CG_MAKE	0
#define PRIV_CG_REMOVE	1
#define PRIV_CG_MIN	(16LL << 20)
#define PRIV_CG_MAX	(1LL << 50)
struct priv_cgroup {
	struct priv_hdr h;
	struct priv_owner owner;
	uint32_t op;		/* PRIV_CG_* */
	uint32_t zero;
	int64_t bytes;
	char name[64];
};

union priv_msg {
	struct priv_hdr h;
	struct priv_shim_start shim;
	struct priv_signal sig;
	struct priv_fchown chown;
	struct priv_notify notify;
	struct priv_vouch vouch;
	struct priv_sbatch sbatch;
	struct priv_scancel scancel;
	struct priv_check check;
	struct priv_files files;
	struct priv_rmtree rmtree;
	struct priv_cgroup cgroup;
};

/* The parent's rules: what it read itself, at start and on SIGHUP. */
struct priv_rules {
	gid_t group, admin_group;	/* (gid_t)-1: unset */
	uid_t job_uid;			/* (uid_t)-1: unset */
	uid_t daemon_uid;		/* who owns what the daemon makes */
	char shim[PATH_MAX];		/* the pipeline-shim it starts */
	char slurm_bin[256];		/* [slurm] bin_dir: sbatch's; "": PATH */
	char state_dir[PATH_MAX];	/* real path: records lie below it */
	/* PRIV_CHECK's: the pipeline-stage it starts, and what it hands it
	 * of the configuration (a member may not read the file, which may
	 * hold secrets): the file's path (for messages), plugin_dir and the
	 * spec limits; max_spec_bytes also bounds the text it takes. */
	char stage[PATH_MAX];
	char conf_path[PATH_MAX];
	char plugin_dir[PATH_MAX];
	int max_spec_bytes, max_spec_jobs, max_variants;
	uint64_t since;			/* its own start time (/proc) */
	int vouchfd;			/* state_dir/priv.owners, appended; -1: none */
};

/* The decoder: a message of n bytes with nfd descriptors is one the
 * parent may act on (its type, exact length, zero, strings, numbers and
 * descriptors): its type, or -1 with why filled in. */
int	priv_decode(const void *buf, size_t n, int nfd, char *why, size_t whylen);

/* The parent's handling of one message already received (fds: the nfd
 * descriptors that came with it, closed here): fills rep and, for a shim
 * started, *rfd (else -1). Split from the loop for the unit test. */
struct conf;
void	priv_rules_load(struct priv_rules *r, const struct conf *c);
void	priv_handle(struct priv_rules *r, const void *buf, size_t n, int *fds, int nfd,
	    struct priv_reply *rep, int *rfd);
/* Did this parent start the shim pid with start time t (or was it
 * started before this parent, by an earlier one)? */
int	priv_shim_known(const struct priv_rules *r, pid_t pid, uint64_t t);

/* In main: fork the parent and the daemon process when c asks for it
 * (root, and any of group, admin_group, job_user): returns in the daemon
 * process (0) and never in the parent; -1 when the fork failed. The
 * parent reads its rules again on SIGHUP with reload (conf_load() of the
 * same file, then priv_rules_load(); the old rules kept when it fails).
 * pidfd, the pid file whose whole length this process has locked: the
 * parent keeps byte 0, the daemon process takes byte 1 (pipelined.c). */
int	priv_start(const struct conf *c, int (*reload)(struct priv_rules *), int pidfd,
	    int (*drop)(const struct conf *));
/* Whether a parent acts for this process. */
int	priv_active(void);

/* The daemon's side. Each blocks its thread for its reply (any thread,
 * several at a time: replies are matched to requests by id, and the
 * parent answers a shim start while an sbatch runs). Without a parent
 * they do the act themselves, as before. priv_shim_start()'s cgroup:
 * NULL, or a directory priv_cgroup() answered for owner, which the shim
 * starts in (ignored without a parent, which makes none). */
int	priv_shim_start(const char *shim, const char *owner, const char *cgroup, pid_t *pid,
	    uint64_t *start);
int	priv_signal(const char *rdir, int mode, int sig);
int	priv_fchown(int fd, uid_t uid, gid_t gid);
/* The same for nfd descriptors (1 to PRIV_FCHOWN_FDS) in one message:
 * 0, or -1 with errno when any was refused (those before it given). */
int	priv_fchown_fds(const int *fds, int nfd, uid_t uid, gid_t gid);
void	priv_notify(const char *text);
void	priv_vouch(int fd);
/* Slurm as a run's owner ("UID:GID[:G1,G2...]"; NULL for root's own
 * run, which the parent serves as root only by its rule for root's
 * shims): the script fd submitted (sbatch --parsable), its job id in id;
 * job id signalled or cancelled (slurm_cancel()). 0, or -1 with the
 * parent's or Slurm's words in err. Only where a parent acts
 * (priv_active()). */
int	priv_sbatch(const char *owner, int fd, char *id, size_t idlen, char *err, size_t errlen);
int	priv_scancel(const char *owner, const char *id, int sig, char *err, size_t errlen);
/* A spec's file checks as the submitter of connection fd (not root), by
 * pipeline-stage --check, which the parent starts as the peer: the read
 * end of its output (one JSON line, {"ok":true} or {"ok":false,
 * "errors":"..."}), or -1 with the parent's words in why. Only where a
 * parent acts (priv_active()). The answer is the submitter's own word
 * about its own files: the daemon takes it for nothing else. */
int	priv_check(int fd, const char *path, const char *text, size_t len, char *why,
	    size_t whylen);
/* A run owner's files ("UID:GID[:G1,G2...]"; NULL: root's own runs'),
 * read as the owner would: where a parent acts and the owner is not the
 * daemon's own user, by a file server of the parent's (PRIV_FILES) that
 * opens them and passes the descriptors, so the daemon process never
 * takes another user's rights; else by the daemon's own system calls
 * with owner_fs_enter() on the calling thread, as before. fs is NULL in
 * the second case (plc_hash_ctl's fs: the caller's own calls). The
 * server is asked for at the first request, not by owner_files_open(),
 * since most reuse decisions read no file. One thread uses one at a
 * time. owner_files_open: 0, or -1 (errno set). */
struct owner_files {
	int s;				/* the server's socket, or -1 */
	int lazy;			/* started at the first request, for owner */
	char *owner;			/* malloc'd; NULL: root's own run */
	int failed;			/* the server answered EIO or none */
	unsigned gen;			/* the reloads it was asked for after */
	int as;				/* owner_fs_enter()'s answer */
	struct owner_fs save;
	struct plc_fs ops;
	const struct plc_fs *fs;	/* &ops, or NULL */
};
int	owner_files_open(struct owner_files *of, const char *owner);
/* of made to read through the file server on socket s (owner_files_open()
 * does this with PRIV_FILES's socket; the unit test with its own). */
void	owner_files_use(struct owner_files *of, int s);
/* from's server (started or not) moved to to, which is to serve from
 * now on; from is left closed. */
void	owner_files_move(struct owner_files *to, struct owner_files *from);
/* of closed: a server of PRIV_FILES's that did not fail is kept idle for
 * the owner's next owner_files_open() (at most a few an owner, for a few
 * seconds: priv.c), else ended. */
void	owner_files_close(struct owner_files *of);
/* The idle servers past their time closed (all: every one, as at a
 * reload, when the parent's rules may have changed). */
void	owner_files_idle(int all);
/* realpath(3) as the owner: malloc'd, or NULL with errno. */
char	*owner_files_realpath(struct owner_files *of, const char *path);
/* lstat(2) (nofollow) or stat(2) of an absolute path as the owner. */
int	owner_files_stat(struct owner_files *of, const char *path, struct stat *st, int nofollow);
/* The file server's socket for owner (PRIV_FILES), or -1 with errno; only
 * where a parent acts. */
int	priv_files(const char *owner);
/* rel, below state_dir/runs, removed by the parent (PRIV_RMTREE): 0, or
 * -1 with errno and why (the parent's words); only where a parent acts. */
int	priv_rmtree(const char *rel, char *why, size_t whylen);

/* A memory cgroup capped at bytes for owner ("UID:GID[:G1,G2...]", not
 * root), made by the parent (PRIV_CGROUP): its directory in dir, 0; or
 * -1 with errno and why. priv_cgroup_remove(): that directory removed
 * (its last component sent). Only where a parent acts. */
int	priv_cgroup(const char *owner, int64_t bytes, char *dir, size_t dirlen, char *why,
	    size_t whylen);
int	priv_cgroup_remove(const char *dir);


#endif
