/* sock.c: the daemon's listening Unix sockets (control.c, feed.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "pld.h"
#include "server.h"
#include "plio.h"

/* Is pid on its way out: a zombie, or exiting (PF_EXITING), or gone? */
static int
pid_leaving(pid_t pid)
{
	struct proc_stat ps;
	if (proc_stat_read(pid, &ps) == -1)
		return 1;
	return ps.state == 'Z' || ps.state == 'X' || (ps.flags & 0x4) != 0; /* PF_EXITING */
}

/* Does a live process listen on sun? A listener whose process is on its
 * way out is a daemon that follows its killed half (a split daemon's
 * process after its parent: the kernel releases the pid file's lock
 * before the exit's last work closes the sockets): waited for, up to
 * 5 s, then taken as gone. */
static int
live_listener(const struct sockaddr_un *sun)
{
	for (int i = 0; i < 50; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd == -1)
			return 0;
		if (connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) == -1) {
			close(fd);
			return 0;
		}
		struct ucred uc;
		socklen_t ul = sizeof(uc);
		int peer = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0 && uc.pid > 0;
		close(fd);
		if (!peer || !pid_leaving(uc.pid))
			return 1;
		usleep(100000);
	}
	return 0;
}

/* Is dir the group gid's and closed to others? A daemon process of its
 * own user, no member of gid, cannot give a socket to it (become.c gives
 * it the directory instead): the directory lets only the group reach the
 * socket, which is then open to all who reach it. */
static int
gated(const char *dir, gid_t gid)
{
	struct stat st;
	return stat(dir, &st) == 0 && st.st_gid == gid && !(st.st_mode & 0007);
}

/* Create a listening Unix socket: its directory 0750, the socket itself
 * created under a umask giving `mode`, both given to group gid (the
 * configured group; (gid_t)-1: none); a live old socket (another daemon)
 * is detected by connecting first. */
int
sock_listen(uv_loop_t *loop, uv_pipe_t *srv, const char *path, int mode, gid_t gid,
    uv_connection_cb cb)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (plc_mkdirs(dir, 0750) == -1) {
			log_warn("%s: mkdir %s", __func__, dir);
			return -1;
		}
		if (gid != (gid_t)-1 && chown(dir, (uid_t)-1, gid) == -1)
			log_warn("%s: chown %s", __func__, dir);
	}
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sun.sun_path)) {
		log_warnx("%s: %s: path too long for a Unix socket", __func__, path);
		return -1;
	}
	strcpy(sun.sun_path, path);
	if (live_listener(&sun)) {
		log_warnx("%s: %s: another pipelined is listening there", __func__, path);
		errno = EADDRINUSE;
		return -1;
	}
	unlink(path);
	uv_pipe_init(loop, srv, 0);
	mode_t old = umask((mode_t)(0777 & ~mode));
	int rc = uv_pipe_bind(srv, path);
	umask(old);
	if (rc != 0) {
		log_warnx("%s: bind %s: %s", __func__, path, uv_strerror(rc));
		return -1;
	}
	if (gid != (gid_t)-1 && chown(path, (uid_t)-1, gid) == -1 &&
	    !(errno == EPERM && slash && gated(dir, gid) && chmod(path, 0666) == 0))
		log_warn("%s: chown %s", __func__, path);
	if ((rc = uv_listen((uv_stream_t *)srv, 256, cb)) != 0) {
		log_warnx("%s: listen %s: %s", __func__, path, uv_strerror(rc));
		return -1;
	}
	return 0;
}

/* A reload that changed the configured group: give the socket and its
 * directory, as sock_listen() did, to the new group, or back to the
 * daemon's own when none is set now. */
void
sock_regroup(const char *path, gid_t gid)
{
	char dir[PATH_MAX];
	gid_t g = gid != (gid_t)-1 ? gid : getegid();
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (chown(dir, (uid_t)-1, g) == -1)
			log_warn("%s: chown %s", __func__, dir);
	}
	if (chown(path, (uid_t)-1, g) == -1)
		log_warn("%s: chown %s", __func__, path);
}
