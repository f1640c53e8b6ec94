/*
 * http.h: daemon/http, the HTTP side of pipelined (libplhttp.a): the
 * listener and the status page. Only pipelined.c, which runs it, and the
 * HTTP side itself include it; of the server it sees the read-only store
 * (store_ro.h), access.h and metrics.h (daemon/http/README).
 */
#ifndef PL_HTTP_H
#define PL_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pld.h"

/* httpd.c: the HTTP listener (http_listen): /metrics, the status page */
int	httpd_start(const struct conf *conf, const char *dbpath);
/* A reload: the new http_token, http_host, http_max_streams,
 * http_header_timeout and per-session and per-user bounds, in force at
 * once. A value it cannot use (a token
 * too short, streams not below the running connection limit) is kept at
 * its running one in conf and named in kept (", "-separated); -1 then. */
int	httpd_reconf(struct conf *conf, char *kept, size_t len);
/* A one-time login code of uid for the page (32 hex digits into out),
 * whose session sees what viewer may (access.c): 0, or -1. */
int	httpd_login_code(char *out, size_t outsz, int64_t viewer, uid_t uid);
/* Are a and b the same non-empty string? Compared as HMACs: the time says
 * nothing of where they differ, nor of their lengths. */
int	httpd_equal(const char *a, const char *b);
/* Is a Host: header one of names (space-separated, without ports)? */
int	httpd_host_allowed(const char *host, const char *names);
/* Where a request's header stands in the first len bytes of a connection. */
enum { HEAD_MORE, HEAD_DONE, HEAD_URI_LONG, HEAD_TOO_LARGE };
int	httpd_head_scan(const char *buf, size_t len);

/* web.c: the status page's JSON, files and event stream (HTTP threads) */
struct sse;
void	web_init(const char *dbpath, const char *feed_socket, const char *state_dir,
	    const char *web_dir);
char	*web_static(const char *url, const char **type, size_t *len);
/* A JSON document for viewer (access.c); NULL with *status 404 or 503
 * and the answer's text in err (a run viewer may not see is answered as
 * one that does not exist). */
char	*web_api(const char *url, const char *run, const char *job, const char *off,
	    int64_t viewer, size_t *len, int *status, char *err, size_t errlen);
struct sse *web_sse_open(const char *run, long long since, int64_t viewer);
ssize_t	web_sse_read(struct sse *s, char *dst, size_t max);
void	web_sse_close(struct sse *s);

#endif
