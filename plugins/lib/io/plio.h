/*
 * plio.h: the io subject of the plugins' library (plugins/lib, libpl.a), the
 * code both sides of the plugin ABI link: every stage plugin and the
 * daemon's host. Hashing, atomic files, HTTP, guarded reads of mapped
 * files; format libraries (safetensors.h, gguf.h) and service clients
 * (ollama.h) have headers of their own beside it.
 * It sits on the ABI (include/pipeline) and under everything else: its
 * files include only their own headers and include/pipeline, and call
 * nothing of daemon/ (HACKING.md: Layers; tests/tools/check-layers.sh).
 * Internal functions return 0 or -1 with errno set, unless stated.
 */
#ifndef PLIO_H
#define PLIO_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

/* errbuf.c */
/* Format a message into err (errlen bytes; nothing when err is NULL): the
 * "err, errlen" arguments of the library's parsers. */
void	plc_seterr(char *err, size_t errlen, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

/* strbuf.c: the bounded string builder, for every message or list built
 * piece by piece (a cycle's path, a list of known keys, an error line).
 * It appends into the caller's buffer of cap bytes (stack or heap) and
 * never writes past it; the text is always NUL-terminated. What does not
 * fit is cut at a character's boundary and the text ends in PLC_SB_MORE
 * ("..."); trunc is then set and later appends do nothing.
 *
 *	char buf[256];
 *	struct plc_sb sb;
 *	plc_sb_init(&sb, buf, sizeof(buf));
 *	for (...) { plc_sb_sep(&sb, ", "); plc_sb_append(&sb, name); }
 *	... "known: %s", buf ...
 */
#define PLC_SB_MORE "..."
struct plc_sb {
	char	*buf;
	size_t	 cap;     /* bytes of buf, with the NUL */
	size_t	 len;     /* bytes of text */
	int	 trunc;   /* something was cut: the text ends in PLC_SB_MORE */
};
void	plc_sb_init(struct plc_sb *sb, char *buf, size_t cap);
void	plc_sb_append(struct plc_sb *sb, const char *s);
void	plc_sb_appendn(struct plc_sb *sb, const char *s, size_t n);
void	plc_sb_appendf(struct plc_sb *sb, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
void	plc_sb_vappendf(struct plc_sb *sb, const char *fmt, va_list ap)
	    __attribute__((format(printf, 2, 0)));
/* Appends sep unless the text is empty: "a, b, c" from a loop. */
void	plc_sb_sep(struct plc_sb *sb, const char *sep);

/* strmap.c: a string -> int hash map (open addressing), for lookups by
 * name that must cost O(1): a spec's sections, keys and jobs (spec.c), a
 * corpus's capabilities (corpus_check). Zero-initialised is empty; the
 * map copies its keys. get returns the value's slot or NULL when absent
 * (the slot moves when the map grows: use it before the next add); add
 * inserts k with v when absent (*added, when not NULL, says whether it
 * did) and returns the slot of k's value either way, NULL when out of
 * memory; put sets k to v, -1 when out of memory. */
struct plc_strmap {
	char	**keys;
	int	 *vals;
	size_t	  cap, n;
};
int	*plc_strmap_get(const struct plc_strmap *m, const char *k);
int	*plc_strmap_add(struct plc_strmap *m, const char *k, int v, int *added);
int	 plc_strmap_put(struct plc_strmap *m, const char *k, int v);
void	 plc_strmap_free(struct plc_strmap *m);

/* rate.c */
/* Monotonic seconds, for timing and deadlines. */
double	plc_mono_secs(void);

/* hash.c */
/* sha256 of a whole file, streamed (OpenSSL EVP); hex is 65 bytes. */
int	plc_sha256_file(const char *path, char hex[65]);
/* sha256 of a buffer. */
void	plc_sha256_buf(const void *buf, size_t len, char hex[65]);
/* sha256 of a directory: every regular file below it, sorted by relative
 * name, hashed as "<sha256>  <relative name>\n" lines (sha256sum format);
 * *bytes gets the total size. */
int	plc_sha256_dir(const char *path, char hex[65], uint64_t *bytes);
/* The same digest when the caller already knows some files' digests (it
 * wrote them): known(arg, relname, size, hex) fills hex and returns 1, or
 * returns 0 to have the file hashed here, or -1 (errno set) to fail; known
 * may be NULL. One definition, so the values are always the same. */
int	plc_sha256_dir_known(const char *path, char hex[65], uint64_t *bytes,
	    int (*known)(void *arg, const char *rel, uint64_t size, char hex[65]),
	    void *arg);
/* The total size of the regular files below path (plc_sha256_dir's *bytes). */
int	plc_tree_bytes(const char *path, uint64_t *bytes);
struct stat;
typedef void plc_hashed_fn(void *arg, const char *path, const struct stat *sb,
    const struct stat *after, const char hex[65]);
/* How a hash of a path someone else names looks an entry up and opens
 * it, when not with the caller's own rights (the daemon's: a run owner's
 * file server, priv.h): statat is fstatat(2) with AT_SYMLINK_NOFOLLOW;
 * openat opens O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC, with O_DIRECTORY
 * when dir, beneath dfd with no link on the way when beneath, and
 * refuses anything but a regular file or (dir) a directory. dfd is a
 * descriptor the same openat gave, or AT_FDCWD with an absolute name.
 * Both return 0 (statat) or a descriptor (openat), else -1 with errno. */
struct plc_fs {
	int	(*statat)(void *arg, int dfd, const char *name, struct stat *st);
	int	(*openat)(void *arg, int dfd, const char *name, int dir, int beneath);
	void	*arg;
};
/* The bounds of a hash of a path someone else names (a job program's
 * artifact): at most max bytes read (0: no cap), stop(arg) polled before
 * every chunk of 1 MiB and every file (non-zero: give up), and why, the
 * reason of a failure in words, naming the path or the entry below it. */
struct plc_hash_ctl {
	uint64_t	 max;
	int		(*stop)(void *arg);
	void		*arg;
	/* When set: called with hashed_arg for each regular file hashed
	 * whole, with its path (path, or path/REL below a directory), what
	 * fstat said of it before it was read and after (of the descriptor
	 * read, so the caller never looks the path up again), and its
	 * digest. */
	plc_hashed_fn	*hashed;
	void		*hashed_arg;
	/* NULL: the caller's own system calls. */
	const struct plc_fs *fs;
	/* When set, asked first for each file below a directory (path/REL):
	 * 1 with its size and digest (the caller knows it), 0 to hash it
	 * here, -1 (errno set) to fail. */
	int		(*known)(void *arg, const char *path, uint64_t *size, char hex[65]);
	void		*known_arg;
	char		 why[768];
};
/* sha256 of a regular file, or of a directory by plc_sha256_dir's
 * definition, that blocks on nothing and follows no link: every entry is
 * looked at with lstat first, opened O_RDONLY|O_NONBLOCK|O_NOFOLLOW|
 * O_CLOEXEC and fstat'd, and a directory's files are opened beneath it
 * (RESOLVE_NO_SYMLINKS where the kernel has openat2). A FIFO, device,
 * socket or link, at path or below it, is refused (EINVAL, or ELOOP for a
 * link); more than ctl->max bytes is EFBIG; stop() is ECANCELED. *bytes
 * gets the size hashed. ctl->why says what happened, in every case. */
int	plc_sha256_path_ctl(const char *path, char hex[65], uint64_t *bytes,
	    struct plc_hash_ctl *ctl);
/* plc_tree_bytes of a path someone else names, by plc_sha256_path_ctl's
 * rules (nothing followed, nothing but regular files and directories,
 * stop() asked, ctl->fs used); a regular file's size for a file. */
int	plc_tree_bytes_ctl(const char *path, uint64_t *bytes, struct plc_hash_ctl *ctl);
/* Streaming sha256 for large data. With the CPU's SHA extensions (x86
 * SHA-NI) these hash directly, prefetching ahead, and update2 hashes two
 * independent streams in one interleaved pass (~1.4x the throughput of
 * two update calls); elsewhere they use OpenSSL's EVP. init returns -1
 * (ENOMEM) only in the EVP case; final (or discard, to drop a context
 * without a digest) releases it. */
struct plc_sha256 {
	uint32_t	 h[8];
	uint64_t	 len;
	unsigned char	 buf[64];
	size_t		 nbuf;
	void		*evp;          /* EVP_MD_CTX without SHA-NI */
};
int	plc_sha256_init(struct plc_sha256 *c);
void	plc_sha256_update(struct plc_sha256 *c, const void *p, size_t n);
void	plc_sha256_update2(struct plc_sha256 *a, const void *pa, size_t na,
	    struct plc_sha256 *b, const void *pb, size_t nb);
void	plc_sha256_final(struct plc_sha256 *c, char hex[65]);
void	plc_sha256_discard(struct plc_sha256 *c);
/* Tests: 0 makes contexts initialised later use EVP, 1 SHA-NI where the
 * CPU has it; returns 1 when SHA-NI is in use. */
int	plc_sha256_use_shani(int on);

/* atomic.c */
/* An output file that appears under its final name only when whole:
 * written to "<dir>/.<name>.tmp.<pid>" (a leftover of that name removed,
 * then made anew with O_EXCL and O_NOFOLLOW: a link planted there is not
 * written through), fsync'd, renamed over the final name (a link there
 * is replaced, not followed), directory fsync'd. */
struct plc_atomic {
	int fd;
	char path[4096];
	char tmp[4096];
};
int	plc_atomic_open(struct plc_atomic *a, const char *path, mode_t mode);
int	plc_atomic_commit(struct plc_atomic *a);   /* fsync, rename, fsync dir; closes */
void	plc_atomic_abort(struct plc_atomic *a);    /* close and unlink the temporary */
/* Whole-buffer helpers. */
int	plc_write_all(int fd, const void *buf, size_t len);
int	plc_pwrite_all(int fd, const void *buf, size_t len, off_t off);
int	plc_read_all(int fd, void *buf, size_t len, off_t off);
/* Write a whole file atomically. */
int	plc_write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode);
/* Read a whole (small) file; malloc'd, NUL-terminated; *len may be NULL. */
char	*plc_read_file(const char *path, size_t *len, size_t max);
/* The same from an open descriptor (read from where it is, not closed). */
char	*plc_read_fd(int fd, size_t *len, size_t max);
/* Copy len bytes between descriptors through the kernel (copy_file_range,
 * falling back to sendfile, then read/write). */
int	plc_copy_range(int in, off_t in_off, int out, off_t out_off, uint64_t len);
/* Start the writeback of a range just written (sync_file_range), so that
 * the fsync at the end has little left. It waits when the device's queue
 * is full: a writer that must not wait hands ranges to a writeback thread
 * instead, which merges consecutive ones (and drops what does not fit in
 * its queue: the fsync writes it). Stop it before closing the files. */
void	plc_writeback(int fd, uint64_t off, uint64_t len);
#define PLC_WBQ 32
struct plc_wbthread {
	pthread_t	 t;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	struct { int fd; uint64_t off, len; } q[PLC_WBQ];
	unsigned	 head, n;
	int		 quit, started;
};
int	plc_wbthread_start(struct plc_wbthread *wb);   /* -1: none, add() writes back itself */
void	plc_wbthread_add(struct plc_wbthread *wb, int fd, uint64_t off, uint64_t len);
void	plc_wbthread_stop(struct plc_wbthread *wb);   /* after the queued ranges */
/* Open a path a spec names for reading (flags: O_RDONLY, with
 * O_DIRECTORY or O_NONBLOCK as wanted) without following a link planted
 * in its last component: a symbolic link there is followed only when its
 * owner owns what it points at (who could copy that file anyway) or is
 * the caller's own (root's links for root; Apache's SymLinksIfOwnerMatch,
 * the kernel's protected_symlinks). A link of one user to another's file
 * (notes.txt -> /etc/shadow) fails with ELOOP, which plc_open_strerror()
 * words. The descriptor is O_CLOEXEC. */
int	plc_open_in(const char *path, int flags);
/* plc_open_in() as a stdio stream for reading; NULL with errno set. */
FILE	*plc_fopen_in(const char *path);
/* strerror(e), with ELOOP as plc_open_in() means it. */
const char *plc_open_strerror(int e);
#define PLC_LINK_REFUSED "a symbolic link to a file of another owner, not followed"
/* fsync a directory. */
int	plc_fsync_dir(const char *dir);
/* mkdir -p */
int	plc_mkdirs(const char *path, mode_t mode);
/* Remove name in dfd (AT_FDCWD: a path) and, when it is a directory,
 * everything below it, through descriptors and never through a link (a
 * link is unlinked itself; a directory swapped for one meanwhile is not
 * followed: O_NOFOLLOW), so nothing outside the tree goes. Directories
 * deeper than maxdepth below name are refused (ELOOP). It goes on past a
 * failure and returns -1 with the first one's errno, else 0; a name
 * already gone is 0. */
int	plc_rmtree_at(int dfd, const char *name, int maxdepth);

/* mapguard.c: reading mapped files. Touching a page of a mapping that is
 * past the file's end (the file shrank: truncated, overwritten) or that
 * cannot be read raises SIGBUS, which would kill the daemon and every job.
 * Around the code that touches a mapping:
 *
 *	sigjmp_buf jb;
 *	if (sigsetjmp(jb, 1)) {
 *		... "%s: " PLC_MAP_CHANGED, path: fail the job, unmap ...
 *	}
 *	plc_guard_begin(&jb);
 *	... read the mapping ...
 *	plc_guard_end();
 *
 * A fault in this thread while the guard is set returns from sigsetjmp a
 * second time, with the guard cleared; a fault in another thread, or one
 * with no guard, crashes as before. The jump abandons whatever was under
 * way, so between begin and end the thread only reads the mapping and
 * computes: no locks, no allocation, no host calls while it may fault
 * (a hash context or buffer it was filling is discarded). Variables the
 * function changes after sigsetjmp and reads after the jump must be
 * volatile; keep the guarded part in a small function of its own. Guards
 * do not nest. A pwrite/write/copy from a mapping fails with EFAULT
 * instead, a copy_file_range from the file comes back short. */
#define PLC_MAP_CHANGED \
	"the file changed size or could not be read while it was being read (SIGBUS)"
void	plc_guard_begin(sigjmp_buf *jb);
void	plc_guard_end(void);

/* http.c: a small blocking libcurl client for JSON services. */
struct plc_http_resp {
	long status;        /* HTTP status, 0 when no response */
	char *body;         /* malloc'd, NUL-terminated */
	size_t len;
	char error[256];    /* curl's error when status is 0 */
};
/* method "GET", "POST", "DELETE", "HEAD"; body may be NULL; content_type
 * defaults to application/json; timeout in seconds (0: none). Returns 0
 * when a response arrived (any status), -1 on a transport error. */
int	plc_http(const char *method, const char *url, const void *body, size_t len,
	    const char *content_type, double timeout, struct plc_http_resp *r);
/* A kept connection: one libcurl handle that serves request after request
 * on the same keep-alive connection (no connect, no new handle per
 * request), for a client that sends many; one thread at a time.
 * plc_http_conn_new returns NULL when out of memory. */
struct plc_http_conn;
struct plc_http_conn *plc_http_conn_new(void);
int	plc_http_conn_do(struct plc_http_conn *k, const char *method, const char *url,
	    const void *body, size_t len, const char *content_type, double timeout,
	    struct plc_http_resp *r);
void	plc_http_conn_free(struct plc_http_conn *k);
/* POST a file's bytes (streamed, not loaded). */
int	plc_http_post_file(const char *url, const char *path, double timeout,
	    struct plc_http_resp *r);
void	plc_http_free(struct plc_http_resp *r);

/* npz.c: one one-dimensional array of an np.savez archive (stored, not
 * compressed): dtype '<i4' or '<U<n>'. npz_read returns 0, or -1 with
 * err set naming the file and the array. */
struct npz_array {
	char descr[16];     /* "<i4", "<U12" */
	size_t n;           /* items */
	size_t itemsize;    /* bytes per item */
	void *data;
};
int	npz_read(const char *path, const char *array, struct npz_array *a, char *err,
	    size_t errlen);
int32_t	npz_int(const struct npz_array *a, size_t i);
int	npz_str(const struct npz_array *a, size_t i, char *buf, size_t len);
void	npz_free(struct npz_array *a);

#endif
