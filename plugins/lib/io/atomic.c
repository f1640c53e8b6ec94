/* atomic.c: files that appear under their final name only when whole. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plio.h"

int
plc_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1)
		return -1;
	int rc = fsync(fd);
	int save = errno;
	close(fd);
	errno = save;
	return rc;
}

int
plc_open_in(const char *path, int flags)
{
	int fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC);
	if (fd != -1 || errno != ELOOP)
		return fd;
	/* The last component is a link. What it points at is opened, then
	 * the link looked at and the name resolved again: a link swapped in
	 * between is caught by the second resolution. */
	struct stat t, l, again;
	if ((fd = open(path, flags | O_CLOEXEC)) == -1)
		return -1;
	if (fstat(fd, &t) == 0 && lstat(path, &l) == 0 && S_ISLNK(l.st_mode) &&
	    (l.st_uid == t.st_uid || l.st_uid == geteuid()) && stat(path, &again) == 0 &&
	    again.st_dev == t.st_dev && again.st_ino == t.st_ino)
		return fd;
	close(fd);
	errno = ELOOP;
	return -1;
}

FILE *
plc_fopen_in(const char *path)
{
	int fd = plc_open_in(path, O_RDONLY);
	FILE *f = fd == -1 ? NULL : fdopen(fd, "r");
	if (f == NULL && fd != -1) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return f;
}

const char *
plc_open_strerror(int e)
{
	return e == ELOOP ? PLC_LINK_REFUSED : strerror(e);
}

/* mkdir -p, from the leaf up: the common case (the parent exists) is one
 * mkdir, not one per component of the path. */
int
plc_mkdirs(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	if (strlen(path) >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(buf, path);
	size_t n = strlen(buf);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	if (mkdir(buf, mode) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return -1;
	char *slash = strrchr(buf, '/');
	if (slash == NULL || slash == buf)
		return -1;
	*slash = '\0';
	if (plc_mkdirs(buf, mode) == -1)
		return -1;
	*slash = '/';
	if (mkdir(buf, mode) == -1 && errno != EEXIST)
		return -1;
	return 0;
}

int
plc_atomic_open(struct plc_atomic *a, const char *path, mode_t mode)
{
	char copy[4096];
	if (strlen(path) >= sizeof(a->path) - 64) {
		errno = ENAMETOOLONG;
		return -1;
	}
	snprintf(a->path, sizeof(a->path), "%s", path);
	snprintf(copy, sizeof(copy), "%s", path);
	char *base = basename(copy);
	char dcopy[4096];
	snprintf(dcopy, sizeof(dcopy), "%s", path);
	char *dir = dirname(dcopy);
	snprintf(a->tmp, sizeof(a->tmp), "%s/.%s.tmp.%ld", dir, base, (long)getpid());
	unlink(a->tmp);
	a->fd = open(a->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	return a->fd == -1 ? -1 : 0;
}

int
plc_atomic_commit(struct plc_atomic *a)
{
	if (fsync(a->fd) == -1) {
		plc_atomic_abort(a);
		return -1;
	}
	if (close(a->fd) == -1) {
		a->fd = -1;
		unlink(a->tmp);
		return -1;
	}
	a->fd = -1;
	if (rename(a->tmp, a->path) == -1) {
		int save = errno;
		unlink(a->tmp);
		errno = save;
		return -1;
	}
	char dcopy[4096];
	snprintf(dcopy, sizeof(dcopy), "%s", a->path);
	return plc_fsync_dir(dirname(dcopy));
}

void
plc_atomic_abort(struct plc_atomic *a)
{
	int save = errno;
	if (a->fd != -1)
		close(a->fd);
	a->fd = -1;
	unlink(a->tmp);
	errno = save;
}

int
plc_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
plc_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

int
plc_read_all(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = pread(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0) {
			errno = EIO; /* short file */
			return -1;
		}
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

int
plc_write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode)
{
	struct plc_atomic a;
	if (plc_atomic_open(&a, path, mode) == -1)
		return -1;
	if (plc_write_all(a.fd, buf, len) == -1) {
		plc_atomic_abort(&a);
		return -1;
	}
	return plc_atomic_commit(&a);
}

char *
plc_read_file(const char *path, size_t *lenp, size_t max)
{
	int fd = plc_open_in(path, O_RDONLY);
	if (fd == -1)
		return NULL;
	char *buf = plc_read_fd(fd, lenp, max);
	int e = errno;
	close(fd);
	errno = e;
	return buf;
}

char *
plc_read_fd(int fd, size_t *lenp, size_t max)
{
	struct stat st;
	if (fstat(fd, &st) == -1)
		return NULL;
	if (max && (size_t)st.st_size > max) {
		errno = EFBIG;
		return NULL;
	}
	size_t cap = (size_t)st.st_size + 1, len = 0;
	char *buf = malloc(cap);
	if (buf == NULL)
		return NULL;
	for (;;) {
		if (len + 1 >= cap) {
			cap *= 2;
			char *nb = realloc(buf, cap);
			if (nb == NULL) {
				free(buf);
				return NULL;
			}
			buf = nb;
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			free(buf);
			return NULL;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	if (lenp)
		*lenp = len;
	return buf;
}

void
plc_writeback(int fd, uint64_t off, uint64_t len)
{
	/* Errors (ESPIPE, EINVAL on odd files, ENOSYS) only mean the fsync
	 * will have more to do. */
	if (len > 0)
		(void)sync_file_range(fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
}

static void *
wbthread_main(void *arg)
{
	struct plc_wbthread *wb = arg;
	pthread_mutex_lock(&wb->mu);
	for (;;) {
		while (wb->n == 0 && !wb->quit)
			pthread_cond_wait(&wb->cv, &wb->mu);
		if (wb->n == 0)
			break;
		int fd = wb->q[wb->head].fd;
		uint64_t off = wb->q[wb->head].off, len = wb->q[wb->head].len;
		wb->head = (wb->head + 1) % PLC_WBQ;
		wb->n--;
		pthread_mutex_unlock(&wb->mu);
		plc_writeback(fd, off, len);
		pthread_mutex_lock(&wb->mu);
	}
	pthread_mutex_unlock(&wb->mu);
	return NULL;
}

int
plc_wbthread_start(struct plc_wbthread *wb)
{
	memset(wb, 0, sizeof(*wb));
	if (pthread_mutex_init(&wb->mu, NULL) != 0)
		return -1;
	if (pthread_cond_init(&wb->cv, NULL) != 0) {
		pthread_mutex_destroy(&wb->mu);
		return -1;
	}
	if (pthread_create(&wb->t, NULL, wbthread_main, wb) != 0) {
		pthread_cond_destroy(&wb->cv);
		pthread_mutex_destroy(&wb->mu);
		return -1;
	}
	wb->started = 1;
	return 0;
}

void
plc_wbthread_add(struct plc_wbthread *wb, int fd, uint64_t off, uint64_t len)
{
	if (!wb->started) {
		plc_writeback(fd, off, len);
		return;
	}
	pthread_mutex_lock(&wb->mu);
	unsigned last = (wb->head + wb->n + PLC_WBQ - 1) % PLC_WBQ;
	if (wb->n > 0 && wb->q[last].fd == fd && wb->q[last].off + wb->q[last].len == off) {
		wb->q[last].len += len;    /* the range written next: one call */
	} else if (wb->n < PLC_WBQ) {
		unsigned i = (wb->head + wb->n) % PLC_WBQ;
		wb->q[i].fd = fd;
		wb->q[i].off = off;
		wb->q[i].len = len;
		wb->n++;
	}                                  /* else dropped: the fsync writes it */
	pthread_cond_signal(&wb->cv);
	pthread_mutex_unlock(&wb->mu);
}

void
plc_wbthread_stop(struct plc_wbthread *wb)
{
	if (!wb->started)
		return;
	pthread_mutex_lock(&wb->mu);
	wb->quit = 1;
	pthread_cond_signal(&wb->cv);
	pthread_mutex_unlock(&wb->mu);
	pthread_join(wb->t, NULL);
	pthread_cond_destroy(&wb->cv);
	pthread_mutex_destroy(&wb->mu);
	wb->started = 0;
}

int
plc_copy_range(int in, off_t in_off, int out, off_t out_off, uint64_t len)
{
	while (len > 0) {
		size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
		ssize_t n = copy_file_range(in, &in_off, out, &out_off, chunk, 0);
		if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP ||
		    errno == EINVAL)) {
			/* Fall back to a user-space copy in 1 MiB pieces. */
			char *buf = malloc(1 << 20);
			if (buf == NULL)
				return -1;
			while (len > 0) {
				size_t c = len > (1u << 20) ? (1u << 20) : (size_t)len;
				if (plc_read_all(in, buf, c, in_off) == -1 ||
				    plc_pwrite_all(out, buf, c, out_off) == -1) {
					free(buf);
					return -1;
				}
				in_off += (off_t)c;
				out_off += (off_t)c;
				len -= c;
			}
			free(buf);
			return 0;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0) {
			errno = EIO;
			return -1;
		}
		len -= (uint64_t)n;
	}
	return 0;
}

int
plc_rmtree_at(int dfd, const char *name, int maxdepth)
{
	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	int why = errno;
	if (why != EISDIR && why != EPERM)
		return -1;
	if (maxdepth <= 0) {
		errno = ELOOP;
		return -1;
	}
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1) {
		/* Not a directory (or a link): the unlink's own refusal. */
		if (errno == ENOTDIR || errno == ELOOP)
			errno = why;
		return -1;
	}
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return -1;
	}
	int rc = 0, first = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    plc_rmtree_at(fd, de->d_name, maxdepth - 1) == -1 && rc == 0) {
			rc = -1;
			first = errno;
		}
	closedir(d);
	if (rc == 0 && unlinkat(dfd, name, AT_REMOVEDIR) == -1 && errno != ENOENT) {
		rc = -1;
		first = errno;
	}
	if (rc == -1)
		errno = first;
	return rc;
}
