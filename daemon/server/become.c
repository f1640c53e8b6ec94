/*
 * become.c: a daemon started as root with `user` set (pipelined.conf(5))
 * gives root up for good before it reads a spec, opens the store or
 * accepts a connection. What root still does first, in this order, is
 * what only root can do for it: the state directory made and handed to
 * the user (and, the first time, everything root left in it), the
 * sockets' directories made and handed over, the log file opened; then
 * the supplementary groups, the gids and the uids are set to the user's,
 * and checked, all three of each, with no way back to uid 0.
 *
 * Alone, this is the single-operator deployment: every run's jobs then
 * run as that user, as under a daemon started by that user. A daemon
 * whose runs run as their submitters (group, admin_group, job_user)
 * starts its jobs as other users, which needs root: it is split
 * (priv.c), and `user` beside those keys makes only its daemon process
 * that user: become_prepare() runs before the fork, become_drop() in the
 * child before any thread, and the parent stays root. The sockets'
 * directory is then also the group's and closed to others: it lets only
 * the group reach the sockets (sock_listen()); the state directory's
 * priv/ and priv.owners are the parent's, never handed over.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pld.h"
#include "server.h"
#include "plio.h"

#define BECOME_DEPTH 64

/* Hand to uid:gid what root owns below the directory dfd (and dfd's
 * directory itself, by the caller), never following a link: a link is
 * itself handed over (AT_SYMLINK_NOFOLLOW), not what it names. A file in
 * a records directory (records: below a .shim directory) is the shim's,
 * root's, which the privileged parent of a split daemon trusts only as
 * root's: it keeps root as its owner and takes the user's group, as a
 * shim started with -o gives it, so that the daemon process reads it.
 * records -1: no parent, every file handed over. */
static int
hand_over_tree(int dfd, uid_t uid, gid_t gid, int depth, const char *path, int records)
{
	if (depth > BECOME_DEPTH) {
		fprintf(stderr, "pipelined: user: %s: more than %d directories deep\n", path,
		    BECOME_DEPTH);
		return -1;
	}
	DIR *d = fdopendir(dup(dfd));
	if (d == NULL) {
		fprintf(stderr, "pipelined: user: %s: %s\n", path, strerror(errno));
		return -1;
	}
	struct dirent *e;
	int rc = 0;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		/* The privileged parent's own, root's for good (priv.c). */
		if (depth == 0 && (strcmp(e->d_name, "priv") == 0 ||
		    strcmp(e->d_name, "priv.owners") == 0))
			continue;
		struct stat st;
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1)
			continue;	/* gone meanwhile */
		int keep = records > 0 && S_ISREG(st.st_mode);
		if (st.st_uid == 0 && fchownat(dfd, e->d_name, keep ? (uid_t)-1 : uid, gid,
		    AT_SYMLINK_NOFOLLOW) == -1) {
			fprintf(stderr, "pipelined: user: %s/%s: %s\n", path, e->d_name,
			    strerror(errno));
			rc = -1;
		}
		if (rc == 0 && S_ISDIR(st.st_mode)) {
			int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
			if (sub == -1)
				continue;
			char p[PATH_MAX];
			snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
			rc = hand_over_tree(sub, uid, gid, depth + 1, p, records < 0 ? -1 :
			    records || strcmp(e->d_name, ".shim") == 0);
			close(sub);
		}
	}
	closedir(d);
	return rc;
}

/* The state directory: the user's (systemd's StateDirectory= and
 * tmpfiles.d make it root's again at each boot). The first start under
 * `user` (the store still root's, or none) hands over everything root
 * left in it, the store and the runs' directories included; later starts
 * only what root made since (the pid file). */
static int
hand_over_state(const char *dir, uid_t uid, gid_t gid, int split)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd == -1 || fstat(fd, &st) == -1) {
		fprintf(stderr, "pipelined: user: state_dir %s: %s\n", dir, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	int rc = 0;
	struct stat db;
	/* The store still root's (or none yet): the first start as the user. */
	int first = fstatat(fd, "pipelined.db", &db, AT_SYMLINK_NOFOLLOW) == -1 || db.st_uid == 0;
	if (st.st_uid == 0 && fchown(fd, uid, gid) == -1) {
		fprintf(stderr, "pipelined: user: state_dir %s: %s\n", dir, strerror(errno));
		rc = -1;
	} else if (first) {
		rc = hand_over_tree(fd, uid, gid, 0, dir, split ? 0 : -1);
	} else if (fchownat(fd, "pipelined.pid", uid, gid, AT_SYMLINK_NOFOLLOW) == -1) {
		fprintf(stderr, "pipelined: user: %s/pipelined.pid: %s\n", dir, strerror(errno));
		rc = -1;
	}
	close(fd);
	return rc;
}

/* Does the directory dfd hold nothing but Unix sockets (a directory of
 * sockets, an earlier start's)? */
static int
only_sockets(int dfd)
{
	DIR *d = fdopendir(dup(dfd));
	if (d == NULL)
		return 0;
	struct dirent *e;
	int only = 1;
	while (only && (e = readdir(d)) != NULL) {
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		only = fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISSOCK(st.st_mode);
	}
	closedir(d);
	return only;
}

/* A socket's directory: made when missing, and handed to the user when
 * root made it (now, or at an earlier start: it holds only sockets). A
 * directory of other files (/run, /tmp) is never handed over: the user
 * must be able to write it already, or the start stops naming it. */
static int
hand_over_socket_dir(const char *key, const char *path, const struct conf *c, uid_t uid,
    gid_t gid)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return 0;
	*slash = '\0';
	const char *state_dir = c->state_dir;
	size_t sl = strlen(state_dir);
	if (strncmp(dir, state_dir, sl) == 0 && (dir[sl] == '\0' || dir[sl] == '/'))
		return 0;	/* below the state directory: handed over with it */
	struct stat st;
	int made = stat(dir, &st) == -1 && errno == ENOENT;
	if (made && plc_mkdirs(dir, 0750) == -1) {
		fprintf(stderr, "pipelined: user: %s: %s: %s\n", key, dir, strerror(errno));
		return -1;
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1 || fstat(fd, &st) == -1) {
		fprintf(stderr, "pipelined: user: %s: %s: %s\n", key, dir, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	int rc = 0;
	if (st.st_uid == uid)
		;
	else if (st.st_uid == 0 && (made || only_sockets(fd))) {
		if (fchown(fd, uid, gid) == -1) {
			fprintf(stderr, "pipelined: user: %s: %s: %s\n", key, dir, strerror(errno));
			rc = -1;
		}
	} else if (c->gid != (gid_t)-1) {
		fprintf(stderr, "pipelined: user: %s: %s is not %s's and holds more than "
		    "sockets: beside group, the sockets' directory must be the user's "
		    "(install -d -o %s %s) or new\n", key, dir, c->user, c->user, dir);
		rc = -1;
	} else if (!((st.st_mode & 0002) || (st.st_gid == gid && (st.st_mode & 0020)))) {
		fprintf(stderr, "pipelined: user: %s: %s is not %s's to write, and holds more "
		    "than sockets: make it %s's (install -d -o %s %s) or move the socket\n",
		    key, dir, c->user, c->user, c->user, dir);
		rc = -1;
	}
	/* Beside group (a split daemon), the daemon process is no member of
	 * it and cannot give its sockets to it: the directory is the group's
	 * and closed to others, the gate to the sockets (sock_listen()). No
	 * set-group-ID bit: the unit's RestrictSUIDSGID= forbids it. */
	if (rc == 0 && c->gid != (gid_t)-1 && (fchown(fd, uid, c->gid) == -1 ||
	    fchmod(fd, 0750) == -1)) {
		fprintf(stderr, "pipelined: user: %s: %s: %s\n", key, dir, strerror(errno));
		rc = -1;
	}
	close(fd);
	return rc;
}

/* A reload of a split daemon that changed group, in the privileged
 * parent, which alone may give a file to a group its daemon process is no
 * member of: a socket's directory, the user's, and the socket in it, the
 * user's, given to gid (the new group, or the user's own group when none
 * is set now), each opened without following a link and checked first;
 * the directory closed to others, as hand_over_socket_dir() left it. A
 * directory below the state directory, or not the user's, is left as
 * the start left it. */
static void
regroup_socket(const char *key, const char *path, const struct conf *c, gid_t gid)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return;
	*slash = '\0';
	size_t sl = strlen(c->state_dir);
	if (strncmp(dir, c->state_dir, sl) == 0 && (dir[sl] == '\0' || dir[sl] == '/'))
		return;
	struct stat st;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), fd = -1;
	if (dfd == -1 || fstat(dfd, &st) == -1 || st.st_uid != c->user_uid)
		goto done;
	if (fchown(dfd, (uid_t)-1, gid) == -1 || fchmod(dfd, 0750) == -1) {
		log_warn("privileged parent: reload: %s: %s", key, dir);
		goto done;
	}
	fd = openat(dfd, slash + 1, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1 || fstat(fd, &st) == -1 || !S_ISSOCK(st.st_mode) ||
	    st.st_uid != c->user_uid)
		goto done;
	if (fchownat(fd, "", (uid_t)-1, gid, AT_EMPTY_PATH) == -1)
		log_warn("privileged parent: reload: %s: %s", key, path);
done:
	if (fd != -1)
		close(fd);
	if (dfd != -1)
		close(dfd);
}

void
become_regroup(const struct conf *c, gid_t gid)
{
	if (c->user_uid == (uid_t)-1 || geteuid() != 0)
		return;
	gid_t g = gid != (gid_t)-1 ? gid : c->user_gid;
	regroup_socket("control_socket", c->control_socket, c, g);
	regroup_socket("feed_socket", c->feed_socket, c, g);
}

/* The user's ids: 0, or -1 naming why not (none, or root). */
static int
user_ids(const struct conf *c, uid_t *uid, gid_t *gid)
{
	struct passwd *pw = getpwnam(c->user);
	if (pw == NULL) {
		fprintf(stderr, "pipelined: user: no such user \"%s\"\n", c->user);
		return -1;
	}
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	if (*uid == 0) {
		fprintf(stderr, "pipelined: user: \"%s\" is root\n", c->user);
		return -1;
	}
	return 0;
}

int
become_prepare(const struct conf *c)
{
	uid_t uid;
	gid_t gid;
	if (user_ids(c, &uid, &gid) == -1)
		return -1;
	int split = c->gid != (gid_t)-1 || c->admin_gid != (gid_t)-1 || c->job_uid != (uid_t)-1;
	if (hand_over_state(c->state_dir, uid, gid, split) == -1 ||
	    hand_over_socket_dir("control_socket", c->control_socket, c, uid, gid) == -1 ||
	    hand_over_socket_dir("feed_socket", c->feed_socket, c, uid, gid) == -1)
		return -1;
	/* The log file, opened by root: the user's, to append to and reopen. */
	struct stat st;
	if (c->log_file[0] && lstat(c->log_file, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == 0 && lchown(c->log_file, uid, gid) == -1)
		log_warn("user: log_file %s", c->log_file);
	return 0;
}

int
become_drop(const struct conf *c)
{
	uid_t uid;
	gid_t gid;
	if (user_ids(c, &uid, &gid) == -1)
		return -1;
	if (initgroups(c->user, gid) == -1 ||
	    setresgid(gid, gid, gid) == -1 || setresuid(uid, uid, uid) == -1) {
		fprintf(stderr, "pipelined: user: cannot become %s (uid %u gid %u): %s\n", c->user,
		    (unsigned)uid, (unsigned)gid, strerror(errno));
		return -1;
	}
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	if (getresuid(&ru, &eu, &su) == -1 || getresgid(&rg, &eg, &sg) == -1 ||
	    ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid ||
	    setresuid(0, 0, 0) != -1) {
		fprintf(stderr, "pipelined: user: became %s, but not for good\n", c->user);
		return -1;
	}
	return 0;
}
