/*
 * access.h: who may see and act on which run (access.c). The control
 * socket, the feed, the store's queries and the HTTP side (daemon/http)
 * decide from these numbers.
 */
#ifndef PL_ACCESS_H
#define PL_ACCESS_H

#include <stdint.h>
#include <sys/types.h>

#include "exec.h"

/* access.c: who may see and act on which run (pipelined(8) SECURITY) */
struct conf;
struct access_peer {          /* a peer's credentials (SO_PEERCRED, SO_PEERGROUPS) */
	uid_t uid;
	gid_t gid;
	gid_t groups[SHIM_NGROUPS];	/* exec.h */
	int ngroups;
};
/* A viewer: ACCESS_ALL (root, the daemon's user, admin_group), or the
 * uid whose runs it sees. */
#define ACCESS_ALL ((int64_t)-1)
/* The credentials of a Unix socket's peer (and its pid, if pid): 0, -1,
 * or -2 when it carries more than SHIM_NGROUPS supplementary groups
 * (p->ngroups how many: refused, never cut; access_too_many()). */
int	access_peer_of(int fd, struct access_peer *p, pid_t *pid);
int	access_in_group(const struct access_peer *p, gid_t g);
/* The refusal of a peer of too many groups (access_peer_of's -2), in
 * words for its client. */
void	access_too_many(const struct access_peer *p, char *msg, size_t len);
/* May the peer check, submit, cancel and retry at all (group, admin_group)? */
int	access_may_write(const struct conf *conf, const struct access_peer *p);
int64_t	access_viewer(const struct conf *conf, const struct access_peer *p);
/* May viewer see and act on a run submitted by submitter (-1: unknown)? */
int	access_run(int64_t viewer, int64_t submitter);
/* "no run RUN", in buf: the answer for a run that does not exist and for
 * one viewer may not see alike (code ENOENT, HTTP 404). */
const char *access_no_run(int64_t viewer, const char *run, char *buf, size_t len);

#endif
