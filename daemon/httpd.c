/*
 * httpd.c: the daemon's HTTP listener (metrics_listen in pipelined.conf),
 * served by libmicrohttpd on a thread of its own, so a scrape never waits
 * on the loop thread or the scheduler, nor they on it.
 *
 * Routes: GET /metrics, the Prometheus text exposition (metrics.c). The
 * listener reads the store through a read-only SQLite connection of its
 * own (WAL: readers do not block the writer) and counters the daemon keeps
 * in atomics; it changes nothing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "pipelined.h"

static struct MHD_Daemon *httpd;

/*
 * Parse "ADDRESS:PORT" ("127.0.0.1:9464", "[::1]:9464") into ss. Returns 0,
 * or -1 with a message in err.
 */
int
httpd_parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len,
    char *err, size_t errsz)
{
	char host[128];
	const char *colon, *h = s;
	size_t hl;

	memset(ss, 0, sizeof(*ss));
	if (*s == '[') {
		const char *rb = strchr(s, ']');
		if (rb == NULL || rb[1] != ':') {
			snprintf(err, errsz, "\"%s\": an IPv6 address is written [ADDRESS]:PORT", s);
			return -1;
		}
		h = s + 1;
		hl = (size_t)(rb - h);
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL) {
			snprintf(err, errsz, "\"%s\": expected ADDRESS:PORT", s);
			return -1;
		}
		hl = (size_t)(colon - s);
	}
	if (hl == 0 || hl >= sizeof(host)) {
		snprintf(err, errsz, "\"%s\": expected ADDRESS:PORT", s);
		return -1;
	}
	memcpy(host, h, hl);
	host[hl] = '\0';
	char *end;
	errno = 0;
	long port = strtol(colon + 1, &end, 10);
	if (errno != 0 || end == colon + 1 || *end != '\0' || port < 1 || port > 65535) {
		snprintf(err, errsz, "\"%s\": the port must be 1 to 65535", s);
		return -1;
	}
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		*len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
	} else {
		snprintf(err, errsz, "\"%s\": \"%s\" is not a numeric IPv4 or IPv6 address",
		    s, host);
		return -1;
	}
	return 0;
}

static enum MHD_Result
reply(struct MHD_Connection *c, unsigned int status, const char *type, char *body,
    size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body,
	    MHD_RESPMEM_MUST_FREE);
	if (r == NULL) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
reply_text(struct MHD_Connection *c, unsigned int status, const char *text)
{
	char *b = strdup(text);
	return b ? reply(c, status, "text/plain; charset=utf-8", b, strlen(b)) : MHD_NO;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
    const char *version, const char *upload, size_t *upload_size, void **ctx)
{
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		/* Nothing here takes a body; refuse before reading one. */
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n");
	}
	if (strcmp(url, "/metrics") == 0) {
		size_t len;
		char *body = metrics_render(&len);
		if (body == NULL)
			return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
			    "the store could not be read; see the daemon's log\n");
		return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
		    body, len);
	}
	if (strcmp(url, "/") == 0)
		return reply_text(c, MHD_HTTP_OK, "pipelined: /metrics\n");
	return reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

int
httpd_start(const char *listen, const char *dbpath)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char err[256];

	if (listen == NULL || *listen == '\0')
		return 0;
	if (httpd_parse_addr(listen, &ss, &len, err, sizeof(err)) == -1) {
		log_warnx("httpd_start: metrics_listen %s", err);
		return -1;
	}
	if (metrics_init(dbpath) == -1)
		return -1;
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* One thread serves every connection: a scrape is milliseconds of
	 * SQLite reads, and Prometheus scrapes one at a time. */
	httpd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)30,
	    MHD_OPTION_END);
	if (httpd == NULL) {
		log_warnx("httpd_start: cannot listen on %s (in use, or not an address "
		    "of this machine)", listen);
		return -1;
	}
	log_info("metrics: listening on http://%s/metrics", listen);
	return 0;
}

void
httpd_stop(void)
{
	if (httpd != NULL) {
		MHD_stop_daemon(httpd);
		httpd = NULL;
	}
}
