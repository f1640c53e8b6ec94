/*
 * access.c: who may see and act on which run, one rule for every door
 * (the control socket, the status feed, the HTTP listener; pipelined(8)
 * SECURITY).
 *
 * A run belongs to the uid that submitted it (SO_PEERCRED at submit,
 * runs.submitter). Root, the daemon's own user and the members of
 * admin_group see and act on every run; anyone else sees and acts on the
 * runs it submitted, and no other: a member of the daemon's group who did
 * not submit a run does not see it in list or status, cannot read its
 * logs, values, artifacts or metrics, does not get its lines from the
 * feed, and cannot cancel, retry or gc it (gc.c). A viewer is reduced to one number:
 * ACCESS_ALL, or the uid whose runs it sees; the store's queries take it
 * as a number (store_int.h's ACCESS_SQL), and this file decides from
 * numbers only (access_run()). A run the viewer may not see is answered
 * as a run that does not exist (access_no_run()).
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pld.h"
#include "access.h"

int
access_peer_of(int fd, struct access_peer *p, pid_t *pid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	memset(p, 0, sizeof(*p));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
		log_warn("access_peer_of: SO_PEERCRED");
		return -1;
	}
	p->uid = cred.uid;
	p->gid = cred.gid;
	if (pid != NULL)
		*pid = cred.pid;
#ifdef SO_PEERGROUPS
	socklen_t glen = sizeof(p->groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, p->groups, &glen) == 0)
		p->ngroups = (int)(glen / sizeof(gid_t));
	else if (errno == ERANGE) {
		/* More than a run's owner carries: refused whole, never cut
		 * (its jobs would run without the groups it has). */
		log_warnx("access: uid %u connected with %u supplementary groups, more than "
		    "%d: refused", (unsigned)p->uid, (unsigned)(glen / sizeof(gid_t)),
		    SHIM_NGROUPS);
		p->ngroups = (int)(glen / sizeof(gid_t));
		return -2;
	}
#endif
	return 0;
}

void
access_too_many(const struct access_peer *p, char *msg, size_t len)
{
	snprintf(msg, len, "uid %u connected with %d supplementary groups, more than the %d "
	    "pipelined takes (its jobs would run without the rest): connect with fewer, as "
	    "from a login in fewer groups or through sg(1)", (unsigned)p->uid, p->ngroups,
	    SHIM_NGROUPS);
}

/* Is the peer in group g: its primary group, the supplementary groups it
 * connected with, or the groups of its user in the group database (a
 * member added since it logged in)? */
int
access_in_group(const struct access_peer *p, gid_t g)
{
	if (g == (gid_t)-1)
		return 0;
	if (p->gid == g)
		return 1;
	for (int i = 0; i < p->ngroups; i++)
		if (p->groups[i] == g)
			return 1;
	struct passwd *pw = getpwuid(p->uid);
	if (pw == NULL)
		return 0;
	gid_t groups[256];
	int n = 256;
	if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) == -1)
		return 0;
	for (int i = 0; i < n; i++)
		if (groups[i] == g)
			return 1;
	return 0;
}

int
access_may_write(const struct conf *conf, const struct access_peer *p)
{
	return p->uid == 0 || p->uid == geteuid() || access_in_group(p, conf->gid) ||
	    access_in_group(p, conf->admin_gid);
}

int64_t
access_viewer(const struct conf *conf, const struct access_peer *p)
{
	if (p->uid == 0 || p->uid == geteuid() || access_in_group(p, conf->admin_gid))
		return ACCESS_ALL;
	return (int64_t)p->uid;
}

int
access_run(int64_t viewer, int64_t submitter)
{
	return viewer == ACCESS_ALL || (submitter >= 0 && submitter == viewer);
}

/*
 * The one answer for a run the viewer may not see and for a run that does
 * not exist: the same words, code (ENOENT) and exit status on every door,
 * so an answer never tells a user which names another user's runs have.
 */
const char *
access_no_run(int64_t viewer, const char *run, char *buf, size_t len)
{
	snprintf(buf, len, "no run %s%s", run, viewer == ACCESS_ALL ? "" :
	    " (or not yours: a user sees and acts on its own runs only)");
	return buf;
}
