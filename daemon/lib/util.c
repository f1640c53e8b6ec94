/* util.c: small parsers and helpers shared by the daemon and pipelinectl. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pld.h"
#include "plio.h"

double
now_wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int
parse_double(const char *s, double *out)
{
	char *end;
	if (s == NULL || *s == '\0')
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end != '\0' || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

int
parse_int(const char *s, int64_t *out)
{
	char *end;
	if (s == NULL || *s == '\0')
		return -1;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

/* "90", "90s", "1.5m", "2h", "1d". */
int
parse_duration(const char *s, double *out)
{
	char *end;
	if (s == NULL || *s == '\0')
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0 || !isfinite(v))
		return -1;
	double mul = 1;
	if (strcmp(end, "") == 0 || strcmp(end, "s") == 0)
		mul = 1;
	else if (strcmp(end, "ms") == 0)
		mul = 0.001;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		mul = 60;
	else if (strcmp(end, "h") == 0)
		mul = 3600;
	else if (strcmp(end, "d") == 0)
		mul = 86400;
	else
		return -1;
	*out = v * mul;
	return 0;
}

/* "512", "8K", "100M", "2G", "1T" (powers of 1024; a trailing B or iB is accepted). */
int
parse_size(const char *s, int64_t *out)
{
	char *end;
	if (s == NULL || *s == '\0')
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	double mul = 1;
	switch (toupper((unsigned char)*end)) {
	case '\0': break;
	case 'B': if (end[1] != '\0') return -1; break;
	case 'K': mul = 1024.0; end++; break;
	case 'M': mul = 1024.0 * 1024; end++; break;
	case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
	case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
	default: return -1;
	}
	if (mul > 1 && *end != '\0' && strcasecmp(end, "B") != 0 && strcasecmp(end, "iB") != 0)
		return -1;
	if (!(v * mul < 0x1p63))
		return -1;   /* no int64_t holds it */
	*out = (int64_t)(v * mul);
	return 0;
}

int
parse_bool(const char *s, int *out)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };
	if (s == NULL)
		return -1;
	for (int i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

int
valid_name(const char *s)
{
	if (s == NULL || *s == '\0' || *s == '.' || strlen(s) > 100)
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' && *s != '.')
			return 0;
	return 1;
}

/*
 * A reference to a run: NAME (its latest revision, or as `previous` its
 * latest that succeeded) or NAME@N (revision N, 1 or more, without
 * leading zeros). Splits ref into its name, in base, and its revision, 0
 * when none is given. -1: not a reference (a bad name or number).
 */
int
run_ref_split(const char *ref, char *base, size_t len, int *rev)
{
	const char *at = ref ? strchr(ref, '@') : NULL;
	*rev = 0;
	if (ref == NULL || (at ? (size_t)(at - ref) : strlen(ref)) >= len)
		return -1;
	snprintf(base, len, "%.*s", at ? (int)(at - ref) : (int)strlen(ref), ref);
	if (!valid_name(base))
		return -1;
	if (at == NULL)
		return 0;
	const char *p = at + 1;
	long n = 0;
	if (*p < '1' || *p > '9')
		return -1;
	for (; *p; p++) {
		if (!isdigit((unsigned char)*p) || n > 100000000)
			return -1;
		n = n * 10 + (*p - '0');
	}
	*rev = (int)n;
	return 0;
}

/* The name of revision rev of run base: base itself for the first. */
void
run_rev_name(const char *base, int rev, char *buf, size_t len)
{
	if (rev <= 1)
		snprintf(buf, len, "%s", base);
	else
		snprintf(buf, len, "%s@%d", base, rev);
}

int
valid_run_ref(const char *s)
{
	char base[128];
	int rev;
	return run_ref_split(s, base, sizeof(base), &rev) == 0;
}

char **
split_list(const char *s, int *count)
{
	int n = 0, cap = 4;
	char **v = xcalloc((size_t)cap + 1, sizeof(*v));
	const char *p = s ? s : "";
	while (*p) {
		while (*p == ',' || isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		const char *b = p;
		while (*p && *p != ',' && !isspace((unsigned char)*p))
			p++;
		if (n == cap) {
			cap *= 2;
			v = xrealloc(v, (size_t)cap + 1, sizeof(*v));
		}
		v[n++] = strndup(b, (size_t)(p - b));
	}
	v[n] = NULL;
	if (count)
		*count = n;
	return v;
}

void
strv_free(char **v)
{
	if (v == NULL)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

/* Remove "." and "dir/.." components lexically (no symlinks are read). */
static void
path_clean(char *p)
{
	int abs = p[0] == '/';
	char *parts[512];
	int n = 0;
	char *save = NULL;
	char *copy = xstrdup(p);
	for (char *t = strtok_r(copy, "/", &save); t && n < 512; t = strtok_r(NULL, "/", &save)) {
		if (strcmp(t, ".") == 0)
			continue;
		if (strcmp(t, "..") == 0 && n > 0 && strcmp(parts[n - 1], "..") != 0) {
			n--;
			continue;
		}
		if (strcmp(t, "..") == 0 && abs)
			continue;
		parts[n++] = t;
	}
	char *w = p;
	if (abs)
		*w++ = '/';
	for (int i = 0; i < n; i++) {
		size_t l = strlen(parts[i]);
		memmove(w, parts[i], l);
		w += l;
		if (i + 1 < n)
			*w++ = '/';
	}
	if (w == p)
		*w++ = '.';
	*w = '\0';
	free(copy);
}

char *
path_resolve(const char *dir, const char *path)
{
	char *r;
	if (path[0] == '/' || dir == NULL || *dir == '\0')
		r = xstrdup(path);
	else if (asprintf(&r, "%s/%s", dir, path) == -1)
		fatal("path_resolve");
	path_clean(r);
	return r;
}

/*
 * A path that a process with the daemon's rights may use on a
 * submitter's behalf (OpenSSH's safe_path, for every component): walked
 * from "/" one component at a time with lstat, links resolved here (at
 * most 40), every directory it passes through owned by root or by
 * trusted and writable by no one else, root's group aside (unless
 * sticky, as /tmp is: there
 * only an entry's owner can swap it, and the entry must be root's or
 * trusted's), every link owned by root or trusted, or by the owner of
 * what it points at. Nothing on such a path can be swapped by another
 * user between this check and its use. Components that do not exist yet
 * (an output to be made) end the walk, in a directory no one else may
 * write; in a sticky one that others may (/tmp) only the last component
 * may be missing (the stages make it with O_EXCL and rename, which
 * replace nothing another user put there): a missing directory above it
 * could be made by another user after this check, and the stage would
 * write below it. Returns the resolved path (no links, no "." or "..";
 * malloc'd), or NULL with why set. The walk is the check of one moment:
 * a path used again later (a job's artifact as a later job's input) is
 * walked again then.
 *
 * path_trusted_below() trusts trusted's directories and links only at
 * below or under it (a split daemon's state directory, its daemon
 * process's user's, for root's own runs): elsewhere only root's count,
 * and a path that a link of trusted's led to must end below it too, so
 * that user's links lead nowhere outside its own tree.
 */
struct trust {
	uid_t uid;
	const char *below;	/* NULL: everywhere */
	size_t belowlen;
};

static int
path_is_below(const char *p, const struct trust *t)
{
	return t->below == NULL || (strncmp(p, t->below, t->belowlen) == 0 &&
	    (p[t->belowlen] == '\0' || p[t->belowlen] == '/' || t->belowlen == 1));
}

static int
path_trusted_uid(uid_t u, const struct trust *t, const char *at)
{
	return u == 0 || (u == t->uid && path_is_below(at, t));
}

/* A directory others may write: its group (not root's) or anyone. */
static int
path_dir_open(const struct stat *st)
{
	return (st->st_mode & (S_IWOTH | (st->st_gid == 0 ? 0 : S_IWGRP))) != 0;
}

char *
path_trusted(const char *path, uid_t trusted, char *why, size_t whylen)
{
	return path_trusted_below(path, trusted, NULL, why, whylen);
}

/* The end of a walk: res, unless a link of the confined user's led
 * out of its tree. */
static char *
path_trusted_end(const char *res, int confined, const struct trust *t, char *why, size_t whylen)
{
	if (confined && !path_is_below(res, t)) {
		snprintf(why, whylen, "%s: led to by a link of uid %ld's, out of %s, where only "
		    "root's links are followed", res, (long)t->uid, t->below);
		return NULL;
	}
	return xstrdup(res);
}

char *
path_trusted_below(const char *path, uid_t trusted, const char *below, char *why, size_t whylen)
{
	char res[PATH_MAX] = "", todo[2 * PATH_MAX], link[PATH_MAX];
	struct stat st;
	int links = 0, confined = 0;
	struct trust t = { trusted, below, below != NULL ? strlen(below) : 0 };

	why[0] = '\0';
	if (path[0] != '/' || strlen(path) >= sizeof(todo)) {
		snprintf(why, whylen, "not an absolute path");
		return NULL;
	}
	if (lstat("/", &st) == -1 || !path_trusted_uid(st.st_uid, &t, "/") ||
	    (st.st_mode & (S_IWGRP | S_IWOTH))) {
		snprintf(why, whylen, "/ is not root's, or is writable by others");
		return NULL;
	}
	snprintf(todo, sizeof(todo), "%s", path);
	char *rest = todo;
	int open_dir = 0;	/* res is a sticky directory others may write */
	while (*rest != '\0') {
		while (*rest == '/')
			rest++;
		if (*rest == '\0')
			break;
		char *end = strchr(rest, '/');
		size_t n = end ? (size_t)(end - rest) : strlen(rest);
		char comp[NAME_MAX + 1];
		if (n > NAME_MAX) {
			errno = ENAMETOOLONG;
			snprintf(why, whylen, "%s", strerror(errno));
			return NULL;
		}
		memcpy(comp, rest, n);
		comp[n] = '\0';
		rest += n;
		if (strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) {
			char *sl = strrchr(res, '/');
			if (sl != NULL)
				*sl = '\0';
			open_dir = lstat(res[0] ? res : "/", &st) == 0 && path_dir_open(&st);
			continue;
		}
		char cand[PATH_MAX];
		if ((size_t)snprintf(cand, sizeof(cand), "%s/%s", res, comp) >= sizeof(cand)) {
			snprintf(why, whylen, "%s", strerror(ENAMETOOLONG));
			return NULL;
		}
		if (lstat(cand, &st) == -1) {
			if (errno != ENOENT) {
				snprintf(why, whylen, "%s: %s", cand, strerror(errno));
				return NULL;
			}
			/* Not there yet: made later in a directory checked above,
			 * unless others may write that one and more is to
			 * come below this component. */
			if (open_dir && rest[strspn(rest, "/")] != '\0') {
				snprintf(why, whylen, "%s: not there yet, in %s, a directory others may "
				    "write (sticky): another user could make it after this check and "
				    "the stage would work below it; make it first", cand,
				    res[0] ? res : "/");
				return NULL;
			}
			if ((size_t)snprintf(res, sizeof(res), "%s%s", cand, rest) >= sizeof(res)) {
				snprintf(why, whylen, "%s", strerror(ENAMETOOLONG));
				return NULL;
			}
			path_clean(res);
			return path_trusted_end(res, confined, &t, why, whylen);
		}
		if (S_ISLNK(st.st_mode)) {
			struct stat tst;
			ssize_t ln = readlink(cand, link, sizeof(link) - 1);
			if (++links > 40 || ln <= 0) {
				snprintf(why, whylen, "%s: %s", cand, strerror(ln <= 0 ? errno : ELOOP));
				return NULL;
			}
			link[ln] = '\0';
			if (!path_trusted_uid(st.st_uid, &t, cand) &&
			    (stat(cand, &tst) == -1 || tst.st_uid != st.st_uid)) {
				snprintf(why, whylen, "%s: a symbolic link of uid %ld to what another owns, "
				    "not followed with the daemon's rights", cand, (long)st.st_uid);
				return NULL;
			}
			if (st.st_uid != 0 && t.below != NULL && st.st_uid == t.uid)
				confined = 1;
			char next[2 * PATH_MAX];
			if ((size_t)snprintf(next, sizeof(next), "%s%s", link, rest) >= sizeof(todo)) {
				snprintf(why, whylen, "%s", strerror(ENAMETOOLONG));
				return NULL;
			}
			if (link[0] == '/') {
				res[0] = '\0';
				open_dir = 0;
			}
			memcpy(todo, next, strlen(next) + 1);
			rest = todo;
			continue;
		}
		/* Writable by its group is allowed when that is root's group
		 * (gid 0: administrators; a umask of 002 makes such
		 * directories). */
		if (S_ISDIR(st.st_mode) && (!path_trusted_uid(st.st_uid, &t, cand) ||
		    (path_dir_open(&st) && !(st.st_mode & S_ISVTX)))) {
			snprintf(why, whylen, "%s: a directory %s, where another user could swap what "
			    "a run with the daemon's rights reads or writes (such runs use directories "
			    "of root%s writable by no one else; a run owned by that user works as it)",
			    cand, path_trusted_uid(st.st_uid, &t, cand) ? "writable by its group or others" :
			    "of another owner", trusted == 0 ? "" : below != NULL ?
			    " or, in the state directory, the daemon's user" : " or the daemon's user");
			return NULL;
		}
		if (!S_ISDIR(st.st_mode) && *rest != '\0') {
			snprintf(why, whylen, "%s: %s", cand, strerror(ENOTDIR));
			return NULL;
		}
		memcpy(res, cand, strlen(cand) + 1);
		open_dir = S_ISDIR(st.st_mode) && path_dir_open(&st);
	}
	return path_trusted_end(res[0] ? res : "/", confined, &t, why, whylen);
}

/* The types a job program publishes (pipeline-job(7)). Any other line of
 * a job program reaches its stage's on_event only: not stored, not on the
 * feed, so never a notification. verdict, state, resumed, value, proc and
 * whatever notify or the gate act on come only from the stages' own host
 * calls (in the daemon, or a stage process's own lines). */
int
event_program_type(const char *type)
{
	static const char *const types[] = { "started", "progress", "metric", "log",
	    "checkpoint", "artifact", "done", "error", NULL };
	for (int i = 0; types[i]; i++)
		if (strcmp(type, types[i]) == 0)
			return 1;
	return 0;
}

char *
xstrdup(const char *s)
{
	char *r = strdup(s ? s : "");
	if (r == NULL)
		fatal("strdup");
	return r;
}

void *
xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);
	if (p == NULL)
		fatal("calloc");
	return p;
}

void *
xrealloc(void *p, size_t n, size_t sz)
{
	void *q = reallocarray(p, n ? n : 1, sz ? sz : 1);
	if (q == NULL)
		fatal("realloc");
	return q;
}

const char *
self_dir(void)
{
	static char dir[PATH_MAX];
	if (dir[0] == '\0') {
		ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
		if (n <= 0) {
			strcpy(dir, ".");
		} else {
			dir[n] = '\0';
			char *slash = strrchr(dir, '/');
			if (slash)
				*slash = '\0';
		}
	}
	return dir;
}

int
proc_stat(pid_t pid, char *state, pid_t *pgrp, uint64_t *start)
{
	struct proc_stat ps;
	if (proc_stat_read(pid, &ps) == -1)
		return -1;
	if (state)
		*state = ps.state;
	if (pgrp)
		*pgrp = ps.pgrp;
	if (start)
		*start = ps.start;
	return 0;
}

uint64_t
proc_starttime(pid_t pid)
{
	uint64_t t;
	return proc_stat(pid, NULL, NULL, &t) == 0 ? t : 0;
}

int
dirs_make_at(int dirfd, const char *rel, mode_t mode)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	/* fd is dirfd until the first component is open: the caller's is
	 * never closed, and none is copied (this runs for every job). */
	int fd = dirfd, e;
	char *save = NULL;
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (mkdirat(fd, c, mode) == -1 && errno != EEXIST)
			goto fail;
		int next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (next == -1 && errno == ENOTDIR && fstatat(fd, c, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISLNK(st.st_mode))
			errno = ELOOP; /* say so: a link to a directory is ENOTDIR */
		if (next == -1)
			goto fail;
		if (fd != dirfd)
			close(fd);
		fd = next;
	}
	if (fd == dirfd && (fd = dup(dirfd)) == -1) /* rel named no directory */
		return -1;
	return fd;
fail:
	e = errno;
	if (fd != dirfd)
		close(fd);
	errno = e;
	return -1;
}

int
file_open_at(int dirfd, const char *name, int flags, mode_t mode)
{
	int fd = openat(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
	struct stat st;
	if (fd == -1 || fstat(fd, &st) == -1)
		goto fail;
	/* Not a device or a FIFO, and not another name of a file elsewhere. */
	if (!S_ISREG(st.st_mode) || st.st_nlink > 1) {
		close(fd);
		errno = !S_ISREG(st.st_mode) ? EINVAL : EMLINK;
		return -1;
	}
	return fd; /* O_NONBLOCK (not to hang on a FIFO) means nothing to a file */
fail:
	if (fd >= 0) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return -1;
}

int
owner_ids(const char *owner, uid_t *uid, gid_t *gid)
{
	unsigned u, g;
	if (owner == NULL || sscanf(owner, "%u:%u", &u, &g) != 2)
		return -1;
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return 0;
}

/* The groups of an owner string (after "UID:GID:"): their count, at most max. */
static int
owner_groups(const char *owner, gid_t *g, int max)
{
	const char *p = strchr(owner, ':');
	p = p != NULL ? strchr(p + 1, ':') : NULL;
	int n = 0;
	while (p != NULL && n < max) {
		char *end;
		unsigned long x = strtoul(p + 1, &end, 10);
		if (end == p + 1)
			break;
		g[n++] = (gid_t)x;
		p = *end == ',' ? end : NULL;
	}
	return n;
}

int
owner_fs_enter(const char *owner, struct owner_fs *save)
{
	uid_t uid;
	gid_t gid, groups[256];
	if (geteuid() != 0 || owner_ids(owner, &uid, &gid) == -1 || uid == geteuid())
		return 0;
	int ng = owner_groups(owner, groups, 256);
	long n = syscall(SYS_getgroups, 256, save->groups);
	if (n < 0) {
		log_warn("owner_fs_enter: getgroups");
		return -1;
	}
	save->ngroups = (int)n;
	/* setfsuid() reports the previous id, not an error: read back. */
	if (syscall(SYS_setgroups, (size_t)ng, groups) == -1) {
		log_warn("owner_fs_enter: setgroups for %s", owner);
		return -1;
	}
	syscall(SYS_setfsgid, gid);
	syscall(SYS_setfsuid, uid);
	if ((uid_t)syscall(SYS_setfsuid, (uid_t)-1) != uid ||
	    (gid_t)syscall(SYS_setfsgid, (gid_t)-1) != gid) {
		owner_fs_leave(save);
		log_warnx("owner_fs_enter: cannot take the file-system ids of %s", owner);
		errno = EPERM;
		return -1;
	}
	return 1;
}

void
owner_fs_leave(const struct owner_fs *save)
{
	int e = errno;
	syscall(SYS_setfsuid, geteuid());
	syscall(SYS_setfsgid, getegid());
	if (syscall(SYS_setgroups, (size_t)save->ngroups, save->groups) == -1 ||
	    (uid_t)syscall(SYS_setfsuid, (uid_t)-1) != geteuid())
		fatal("owner_fs_leave: cannot take the daemon's rights back");
	errno = e;
}

/* The length of the valid UTF-8 sequence at p (1 to 4), or 0: overlong
 * forms, surrogates and code points past U+10FFFF are invalid. */
static int
utf8_seq(const unsigned char *p)
{
	if (p[0] < 0x80)
		return 1;
	int n;
	unsigned cp;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		n = 2;
		cp = p[0] & 0x1f;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
		cp = p[0] & 0x0f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		cp = p[0] & 0x07;
	} else {
		return 0;
	}
	for (int i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

char *
utf8_clean(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t bad = 0, len = 0;
	while (p[len]) {
		int n = utf8_seq(p + len);
		bad += n == 0;
		len += n ? (size_t)n : 1;
	}
	if (bad == 0)
		return NULL;
	char *out = malloc(len + 2 * bad + 1), *o = out;
	if (out == NULL)
		fatal("utf8_clean");
	for (size_t i = 0; i < len;) {
		int n = utf8_seq(p + i);
		if (n == 0) {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		} else {
			memcpy(o, p + i, (size_t)n);
			o += n;
			i += (size_t)n;
		}
	}
	*o = '\0';
	return out;
}

int
nul_line(const char *text, size_t len)
{
	const char *z = memchr(text, '\0', len);
	if (z == NULL)
		return 0;
	int line = 1;
	for (const char *q = text; q < z; q++)
		line += *q == '\n';
	return line;
}

int
json_has_nul(const char *json)
{
	for (const char *q = json; *q; q++) {
		if (*q != '\\')
			continue;
		if (q[1] == 'u' && strncmp(q + 2, "0000", 4) == 0)
			return 1;
		if (q[1] != '\0')
			q++;	/* the escaped character */
	}
	return 0;
}

int
dirs_make_leaf(int dirfd, const char *rel)
{
	char up[PATH_MAX];
	const char *leaf = strrchr(rel, '/');
	int pfd = dirfd;
	if (leaf != NULL) {
		snprintf(up, sizeof(up), "%.*s", (int)(leaf - rel), rel);
		if ((pfd = dirs_make_at(dirfd, up, 0711)) == -1)
			return -1;
		leaf++;
	} else
		leaf = rel;
	int fd = dirs_make_at(pfd, leaf, 0750), e = errno;
	/* A leaf already given to its owner, which a daemon process that is
	 * not root cannot read: a path descriptor, which the privileged
	 * parent's PRIV_FCHOWN takes too. No such leaf: the EACCES was
	 * mkdirat's, in a directory the daemon may not write, and says so. */
	if (fd == -1 && e == EACCES && (fd = openat(pfd, leaf, O_PATH | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) == -1 && errno != ENOENT)
		e = errno;
	if (pfd != dirfd)
		close(pfd);
	errno = e;
	return fd;
}

/* Optimal string alignment distance (Levenshtein with a swap of two
 * neighbours counting one: "retires" is one from "retries"), case-blind,
 * on words of up to 63 bytes. */
static int
osa_distance(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);
	if (n > 63 || m > 63)
		return 64;
	int d[64][64];
	for (size_t i = 0; i <= n; i++)
		d[i][0] = (int)i;
	for (size_t j = 0; j <= m; j++)
		d[0][j] = (int)j;
	for (size_t i = 1; i <= n; i++)
		for (size_t j = 1; j <= m; j++) {
			int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
			int v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < v)
				v = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[n][m];
}

void
suggest_try(struct suggest *s, const char *cand)
{
	size_t len = strlen(s->word);
	int limit = len <= 3 ? 1 : len <= 8 ? 2 : 3;
	int dist = osa_distance(s->word, cand);
	if (dist <= limit && (s->best == NULL || dist < s->dist)) {
		s->best = cand;
		s->dist = dist;
	}
}

const char *
suggest_hint(const struct suggest *s, char *buf, size_t n)
{
	struct plc_sb sb;
	plc_sb_init(&sb, buf, n);
	if (s->best != NULL)
		plc_sb_appendf(&sb, "; did you mean \"%s\"?", s->best);
	return buf;
}
