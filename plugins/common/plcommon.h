/*
 * plcommon.h: code shared by the stage plugins (and the daemon's host):
 * hashing, atomic files, HTTP. Format libraries (safetensors.h, gguf.h)
 * and service clients (ollama.h) have headers of their own beside it.
 * Internal functions return 0 or -1 with errno set, unless stated.
 */
#ifndef PLCOMMON_H
#define PLCOMMON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* rate.c */
/* Monotonic seconds, for timing and deadlines. */
double	plc_now(void);

/* hash.c */
/* sha256 of a whole file, streamed (OpenSSL EVP); hex is 65 bytes. */
int	plc_sha256_file(const char *path, char hex[65]);
/* sha256 of a buffer. */
void	plc_sha256_buf(const void *buf, size_t len, char hex[65]);
/* sha256 of a directory: every regular file below it, sorted by relative
 * name, hashed as "<sha256>  <relative name>\n" lines (sha256sum format);
 * *bytes gets the total size. */
int	plc_sha256_dir(const char *path, char hex[65], uint64_t *bytes);

/* atomic.c */
/* An output file that appears under its final name only when whole:
 * written to "<dir>/.<name>.tmp.<pid>", fsync'd, renamed, directory fsync'd. */
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
/* Copy len bytes between descriptors through the kernel (copy_file_range,
 * falling back to sendfile, then read/write). */
int	plc_copy_range(int in, off_t in_off, int out, off_t out_off, uint64_t len);
/* fsync a directory. */
int	plc_fsync_dir(const char *dir);
/* mkdir -p */
int	plc_mkdirs(const char *path, mode_t mode);

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
/* POST a file's bytes (streamed, not loaded). */
int	plc_http_post_file(const char *url, const char *path, double timeout,
	    struct plc_http_resp *r);
void	plc_http_free(struct plc_http_resp *r);

#endif
