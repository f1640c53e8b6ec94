/* conf_check.c: what `pipelined -n` and the daemon's start check beyond
 * the syntax: every path the configuration names, as the daemon will use
 * it, and the HTTP address free. Each error is a "file:line: key: message"
 * line (errlist.c), the line being the key's in the file, or 0 for a default.
 * A start that would fail later, in the detached daemon, fails here, in
 * the operator's terminal. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <unistd.h>

#include "pld.h"
#include "server.h"
#include "plio.h"

struct check {
	const struct conf *c;
	char **errs;
	int n;
};

static void PL_PRINTF(3, 4)
bad(struct check *k, const char *sk, const char *fmt, ...)
{
	char msg[PATH_MAX + 256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	const char *key = strchr(sk, '.') + 1;
	errs_add(k->errs, k->c->path, conf_line(k->c, sk), key, "%s", msg);
	k->n++;
}

/* A directory that must exist: stat follows links, as every open of a
 * path below it does. */
static void
want_dir(struct check *k, const char *sk, const char *path, int mode)
{
	struct stat st;
	if (stat(path, &st) == -1)
		bad(k, sk, "%s: %s", path, strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		bad(k, sk, "%s: not a directory", path);
	else if (access(path, mode) == -1)
		bad(k, sk, "%s: %s", path, strerror(errno));
}

/* A directory the daemon creates when missing (plc_mkdirs): it must be a
 * directory if it exists, else its nearest existing ancestor must be a
 * directory the daemon may write. */
static void
want_creatable(struct check *k, const char *sk, const char *path)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", path);
	struct stat st;
	for (;;) {
		if (stat(p, &st) == 0) {
			if (!S_ISDIR(st.st_mode))
				bad(k, sk, "%s: not a directory", p);
			else if (access(p, W_OK | X_OK) == -1 && strcmp(p, path) == 0)
				bad(k, sk, "%s: %s", p, strerror(errno));
			else if (access(p, W_OK | X_OK) == -1)
				bad(k, sk, "%s cannot be created: %s: %s", path, p,
				    strerror(errno));
			return;
		}
		if (errno != ENOENT) {
			bad(k, sk, "%s: %s", p, strerror(errno));
			return;
		}
		char *slash = strrchr(p, '/');
		if (slash == NULL || slash == p)
			return;
		*slash = '\0';
	}
}

/* The directory part of path, in buf. */
static const char *
dir_of(const char *path, char *buf, size_t n)
{
	snprintf(buf, n, "%s", path);
	char *slash = strrchr(buf, '/');
	if (slash == NULL)
		snprintf(buf, n, ".");
	else if (slash == buf)
		buf[1] = '\0';
	else
		*slash = '\0';
	return buf;
}

static void
want_socket_path(struct check *k, const char *sk, const char *path)
{
	struct sockaddr_un sun;
	char d[PATH_MAX];
	if (strlen(path) >= sizeof(sun.sun_path))
		bad(k, sk, "%s: too long for a Unix socket (%zu bytes, at most %zu)", path,
		    strlen(path), sizeof(sun.sun_path) - 1);
	want_creatable(k, sk, dir_of(path, d, sizeof(d)));
}

/* The log file: its directory is not created by the daemon, so it must
 * exist, unless it is the state directory (the default: created before
 * the log is opened); the file, if it exists, must be a regular file it
 * may append to. */
static void
want_log_file(struct check *k, const char *sk, const char *path)
{
	char d[PATH_MAX];
	struct stat st;
	if (strcmp(dir_of(path, d, sizeof(d)), k->c->state_dir) == 0)
		want_creatable(k, sk, d);
	else
		want_dir(k, sk, d, W_OK | X_OK);
	if (stat(path, &st) == 0) {
		if (!S_ISREG(st.st_mode))
			bad(k, sk, "%s: not a regular file", path);
		else if (access(path, W_OK) == -1)
			bad(k, sk, "%s: %s", path, strerror(errno));
	}
}

static void
want_exec(struct check *k, const char *sk, const char *path)
{
	struct stat st;
	if (stat(path, &st) == -1)
		bad(k, sk, "%s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		bad(k, sk, "%s: not a regular file", path);
	else if (access(path, X_OK) == -1)
		bad(k, sk, "%s: not executable", path);
}

/* A program named without a slash is searched in PATH, as the shim does. */
static void
want_program(struct check *k, const char *sk, const char *name)
{
	if (strchr(name, '/') != NULL) {
		want_exec(k, sk, name);
		return;
	}
	const char *path = getenv("PATH");
	char *copy = xstrdup(path && *path ? path : "/usr/bin:/bin");
	char *save = NULL, full[PATH_MAX];
	for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(full, sizeof(full), "%s/%s", *d ? d : ".", name);
		if (access(full, X_OK) == 0) {
			free(copy);
			return;
		}
	}
	free(copy);
	bad(k, sk, "%s: not found in PATH", name);
}

/* The HTTP address must be one of this machine's and free: bound and let go
 * (SO_REUSEADDR, as libmicrohttpd binds it, so a port in TIME_WAIT is
 * free). */
static void
want_free_addr(struct check *k, const char *sk, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char msg[256];
	if (httpd_parse_addr(addr, &ss, &len, msg, sizeof(msg)) == -1) {
		bad(k, sk, "%s", msg);
		return;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd == -1) {
		bad(k, sk, "%s: socket: %s", addr, strerror(errno));
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) == -1)
		bad(k, sk, "%s: %s", addr, errno == EADDRINUSE ?
		    "address in use (another program listens there)" : strerror(errno));
	close(fd);
}

/* http_token as the listener will take it (httpd_start refuses to start
 * otherwise). */
static void
want_token(struct check *k, const struct conf *c)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char msg[256];
	if (httpd_parse_addr(c->http_listen, &ss, &len, msg, sizeof(msg)) == -1)
		return;	/* named under http_listen */
	if (httpd_token_problem(&ss, c->http_token, msg, sizeof(msg)) == -1)
		bad(k, "daemon.http_token", "%s", msg);
}

/* user (become.c): an unprivileged user this daemon (or, split, its
 * daemon process) can become, on a configuration that needs no root in
 * that process after the start. */
static void
want_user(struct check *k, const struct conf *c)
{
	if (c->user[0] == '\0')
		return;
	if (c->user_uid == 0) {
		bad(k, "daemon.user", "\"%s\" is root: name an unprivileged user, or unset "
		    "user and the daemon stays root", c->user);
		return;
	}
	if (geteuid() != 0) {
		if (c->user_uid != geteuid())
			bad(k, "daemon.user", "\"%s\" is uid %u, but pipelined runs as uid %u, "
			    "not root: only root can become another user", c->user,
			    (unsigned)c->user_uid, (unsigned)geteuid());
		return;
	}
	/* Beside group, admin_group or job_user the daemon is split
	 * (priv.c): the privileged parent stays root and starts the jobs as
	 * their submitters, and the daemon process becomes the user. */
	struct sockaddr_storage ss;
	socklen_t len;
	char msg[256];
	if (c->http_listen[0] && httpd_parse_addr(c->http_listen, &ss, &len, msg,
	    sizeof(msg)) == 0) {
		int port = ss.ss_family == AF_INET6 ?
		    ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) :
		    ntohs(((struct sockaddr_in *)&ss)->sin_port);
		if (port < 1024)
			bad(k, "daemon.http_listen", "port %d is below 1024, which only root may "
			    "bind, and user \"%s\" is set: take a port of 1024 or more", port,
			    c->user);
	}
}

int
conf_check(const struct conf *c, int daemon_runs, char **errs)
{
	struct check k = { .c = c, .errs = errs };

	want_user(&k, c);

	want_creatable(&k, "daemon.state_dir", c->state_dir);
	if (!daemon_runs) {
		want_socket_path(&k, "daemon.control_socket", c->control_socket);
		want_socket_path(&k, "daemon.feed_socket", c->feed_socket);
		if (c->http_listen[0])
			want_free_addr(&k, "daemon.http_listen", c->http_listen);
	}
	want_log_file(&k, "daemon.log_file", c->log_file);
	want_dir(&k, "daemon.plugin_dir", c->plugin_dir, R_OK | X_OK);
	want_dir(&k, "daemon.jobs_dir", c->jobs_dir, R_OK | X_OK);
	/* pipeline-stage is found beside the shim: checked once the shim
	 * is there (one error per key). */
	int nshim = k.n;
	want_exec(&k, "daemon.shim", c->shim);
	char stage[PATH_MAX];
	conf_stage_path(c, stage, sizeof(stage));
	if (k.n == nshim)
		want_exec(&k, "daemon.shim", stage);
	want_program(&k, "daemon.python", c->python);
	if (c->http_listen[0]) {
		want_token(&k, c);
		want_dir(&k, "daemon.web_dir", c->web_dir, R_OK | X_OK);
	}
	const char *bin = conf_get(c, "slurm.bin_dir");
	if (bin != NULL)
		want_dir(&k, "slurm.bin_dir", bin, R_OK | X_OK);
	return k.n ? -1 : 0;
}
