/*
 * memcap.h: run a spawned process under a host-memory cap (G20: a probe
 * without model.train() spilled every activation into pinned host memory,
 * thrashed the host and later hit a 32 GB cgroup cap; the fix ran probes
 * under `systemd-run --scope -p MemoryMax=12G -p MemorySwapMax=0`).
 *
 * memcap_create() makes a memory cgroup below the caller's own, in the
 * first way that works here:
 *   1. cgroup v2, when the caller's cgroup delegates the memory controller
 *      (memory in its cgroup.subtree_control): a child with memory.max and
 *      memory.swap.max = 0;
 *   2. cgroup v1, when a memory hierarchy is mounted and writable: a child
 *      with memory.limit_in_bytes (and memory.memsw.limit_in_bytes, the
 *      same figure, where swap accounting exists);
 *   3. systemd, when it runs (/run/systemd/system) and systemd-run exists:
 *      a transient scope with MemoryMax and MemorySwapMax=0.
 * memcap_argv() then wraps a command so that the child joins the group
 * before it execs (1, 2: a /bin/sh that writes its own pid into
 * cgroup.procs; 3: systemd-run --scope). After the process ended,
 * memcap_finish() reads the group's peak and whether the kernel's OOM
 * killer acted in it, and removes the group.
 *
 * A run owner's stage process in a split daemon cannot make a cgroup it
 * was not delegated: the daemon asks its privileged parent for one
 * (priv.h: PRIV_CGROUP), which makes it with memcap_make_root() as root
 * below the parent's own cgroup and caps it, moves the shim that starts
 * the stage process into it (memcap_move()), and the daemon hands the
 * stage process its directory in PL_MEMCAP_DIR. memcap_create() takes
 * that group when this process is in it already (its own cgroup, by
 * /proc/self/cgroup), and memcap_argv() then wraps nothing: what the
 * stage spawns is in it too. The owner has no right on the group; the
 * parent removes it after the process ended (memcap_remove_leaf()), not
 * memcap_finish().
 */
#ifndef PL_MEMCAP_H
#define PL_MEMCAP_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum memcap_kind { MEMCAP_NONE = 0, MEMCAP_V2, MEMCAP_V1, MEMCAP_SYSTEMD };

struct memcap {
	int kind;                   /* enum memcap_kind */
	int64_t bytes;
	char dir[PATH_MAX];         /* the cgroup directory (v1, v2) */
	char procs[PATH_MAX];       /* its cgroup.procs */
	char prop[2][64];           /* systemd-run properties */
	int given;                  /* PL_MEMCAP_DIR's, this process in it: left for its
	                               maker to remove, memcap_argv() wraps nothing */
	const char *argv[64];
};

/* Create a group capped at bytes. 0, or -1 with the reasons every way
 * failed in why. name is a [a-z0-9-] label for the group. */
int	memcap_create(struct memcap *mc, int64_t bytes, const char *name,
	    char *why, size_t len);
/* The command wrapped to run inside the group; argv must stay valid while
 * the result is used. NULL when argv is too long. */
const char *const *memcap_argv(struct memcap *mc, const char *const *argv);
/* Read the group's peak (bytes, 0 when unknown) and OOM kills, and remove
 * the group. */
void	memcap_finish(struct memcap *mc, uint64_t *peak, int *oom_kills);
/* As root: a group below the caller's own cgroup (v2, v1; no systemd
 * scope) capped at bytes, root's; memcap_move(): pid moved into the group
 * dir by its cgroup.procs (root needs no delegation, on v1 or v2). 0, or
 * -1 with why or errno. */
int	memcap_make_root(struct memcap *mc, int64_t bytes, char *why, size_t len);
int	memcap_move(const char *dir, pid_t pid);
/* Whether leaf is a name memcap_make_root() gives ("pipelined-probe-"
 * digits "-" digits), and its removal, empty, from below the caller's
 * own cgroup: 0, or -1 with errno. memcap_dir_ok(): whether dir is such
 * a leaf right below the caller's own cgroup (v2 where it delegates
 * memory, v1's memory hierarchy), where memcap_make_root() makes one. */
int	memcap_leaf_ok(const char *leaf);
int	memcap_dir_ok(const char *dir);
int	memcap_remove_leaf(const char *leaf);
/* "cgroup v2", "cgroup v1", "systemd scope". */
const char *memcap_kind_str(int kind);
/* Parse "12G", "512M", "off"; -1 on error, 0 for off. */
int64_t	memcap_parse_size(const char *s);

#endif
