/*
 * httpd.c: the daemon's HTTP listener (http_listen in pipelined.conf),
 * served by libmicrohttpd with a thread per connection, so a scrape or a
 * page never waits on the loop thread or the scheduler, nor they on it.
 *
 * Routes: GET /metrics, the Prometheus text exposition (metrics.c); the
 * status page and its JSON and event stream (web.c); /login, the one-time
 * link pipelinectl web prints. Everything is read from the store through
 * read-only SQLite connections (WAL: readers do not block the writer), the
 * status feed and counters kept in atomics; nothing here changes anything.
 * On loopback no login is asked; on any other address every request needs
 * http_token, as a bearer header or the cookie /login sets, compared in
 * constant time.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

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

/* What every response says about itself: only our own scripts, styles
 * and connections, no framing, no sniffing, no referrer. */
static void
headers(struct MHD_Response *r, const char *type)
{
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "Content-Security-Policy",
	    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
	    " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
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
	headers(r, type);
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

/* ---- access ------------------------------------------------------------ */

static int need_token;		/* the listener is not on loopback */
static char token[256];
static pthread_mutex_t codes_mtx = PTHREAD_MUTEX_INITIALIZER;
#define NCODES 8
static struct { char code[33]; double until; } codes[NCODES];

static int
equal_const(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la != lb || la == 0)
		return 0;
	return CRYPTO_memcmp(a, b, la) == 0;
}

int
httpd_token_needed(void)
{
	return need_token;
}

/* A one-time login code (pipelinectl web), good for ten minutes. */
int
httpd_login_code(char *out, size_t outsz)
{
	unsigned char r[16];
	if (RAND_bytes(r, sizeof(r)) != 1 || outsz < 33)
		return -1;
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
	pthread_mutex_lock(&codes_mtx);
	int k = 0;
	for (int i = 1; i < NCODES; i++)
		if (codes[i].until < codes[k].until)
			k = i;
	snprintf(codes[k].code, sizeof(codes[k].code), "%s", out);
	codes[k].until = now_wall() + 600;
	pthread_mutex_unlock(&codes_mtx);
	return 0;
}

static int
code_take(const char *code)
{
	int ok = 0;
	double now = now_wall();
	pthread_mutex_lock(&codes_mtx);
	for (int i = 0; i < NCODES; i++)
		if (codes[i].until > now && equal_const(codes[i].code, code)) {
			codes[i].until = 0;	/* once */
			ok = 1;
		}
	pthread_mutex_unlock(&codes_mtx);
	return ok;
}

/* Loopback needs nothing; elsewhere the token, as a bearer header or the
 * cookie /login set. */
static int
allowed(struct MHD_Connection *c)
{
	if (!need_token)
		return 1;
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	if (h != NULL && strncmp(h, "Bearer ", 7) == 0 && equal_const(h + 7, token))
		return 1;
	const char *k = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, "pl_session");
	return k != NULL && equal_const(k, token);
}

static enum MHD_Result
login(struct MHD_Connection *c)
{
	const char *code = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "code");
	if (code == NULL || !code_take(code))
		return reply_text(c, MHD_HTTP_UNAUTHORIZED,
		    "this login link is not valid (used, expired, or never issued): "
		    "run pipelinectl web for a new one\n");
	struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	if (r == NULL)
		return MHD_NO;
	char cookie[400];
	snprintf(cookie, sizeof(cookie), "pl_session=%s; Path=/; HttpOnly; SameSite=Strict",
	    token);
	headers(r, "text/plain; charset=utf-8");
	MHD_add_response_header(r, "Set-Cookie", cookie);
	MHD_add_response_header(r, "Location", "/");
	enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_SEE_OTHER, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---- /api/events ------------------------------------------------------- */

static ssize_t
sse_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
	ssize_t n = web_sse_read(cls, buf, max);
	return n < 0 ? MHD_CONTENT_READER_END_OF_STREAM : n;
}

static void
sse_free(void *cls)
{
	web_sse_close(cls);
}

static enum MHD_Result
events(struct MHD_Connection *c)
{
	const char *run = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "run");
	const char *last = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID");
	const char *since = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "since");
	/* A reconnect resumes after the last event the browser saw. */
	long long from = last ? atoll(last) : since ? atoll(since) : 0;
	struct sse *s = web_sse_open(run, from);
	if (s == NULL)
		return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "the status feed is not reachable\n");
	struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
	    sse_cb, s, sse_free);
	if (r == NULL) {
		web_sse_close(s);
		return MHD_NO;
	}
	headers(r, "text/event-stream; charset=utf-8");
	enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
    const char *version, const char *upload, size_t *upload_size, void **ctx)
{
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		/* Nothing here takes a body or changes anything. */
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n");
	}
	if (strcmp(url, "/login") == 0 && need_token)
		return login(c);
	if (!allowed(c))
		return reply_text(c, MHD_HTTP_UNAUTHORIZED,
		    "a token is needed: run pipelinectl web for a login link\n");
	if (strcmp(url, "/metrics") == 0) {
		size_t len;
		char *body = metrics_render(&len);
		if (body == NULL)
			return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
			    "the store could not be read; see the daemon's log\n");
		return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
		    body, len);
	}
	if (strcmp(url, "/api/events") == 0)
		return events(c);
	if (strncmp(url, "/api/", 5) == 0) {
		size_t len = 0;
		int status;
		char *b = web_api(url, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "run"),
		    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "job"),
		    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset"), &len, &status);
		if (b == NULL)
			return reply_text(c, (unsigned)status, status == 404 ? "not found\n" :
			    "the store could not be read\n");
		return reply(c, MHD_HTTP_OK, "application/json", b, len);
	}
	if (strcmp(url, "/favicon.ico") == 0)	/* none: say so without an error */
		return reply(c, MHD_HTTP_NO_CONTENT, "text/plain", strdup(""), 0);
	const char *type;
	size_t len;
	char *b = web_static(url, &type, &len);
	if (b != NULL)
		return reply(c, MHD_HTTP_OK, type, b, len);
	return reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

static int
is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

int
httpd_start(const struct conf *conf, const char *dbpath)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char err[256];
	const char *listen = conf->http_listen;

	if (listen == NULL || *listen == '\0')
		return 0;
	if (httpd_parse_addr(listen, &ss, &len, err, sizeof(err)) == -1) {
		log_warnx("httpd_start: http_listen %s", err);
		return -1;
	}
	need_token = !is_loopback(&ss);
	snprintf(token, sizeof(token), "%s", conf->http_token);
	if (need_token && strlen(token) < 16) {
		log_warnx("httpd_start: http_listen %s is not a loopback address: it needs an "
		    "http_token of 16 characters or more", listen);
		return -1;
	}
	if (metrics_init(dbpath) == -1)
		return -1;
	web_init(dbpath, conf->feed_socket, conf->state_dir, conf->web_dir);
	unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	    MHD_USE_ERROR_LOG;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* A thread per connection: a page's event stream blocks on the feed
	 * in its own thread; scrapes and page requests are milliseconds. */
	httpd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)60,
	    MHD_OPTION_END);
	if (httpd == NULL) {
		log_warnx("httpd_start: cannot listen on %s (in use, or not an address "
		    "of this machine)", listen);
		return -1;
	}
	log_info("http: listening on http://%s/ (status page, /metrics)%s", listen,
	    need_token ? "; a token is needed" : "");
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
