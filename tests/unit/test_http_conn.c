/*
 * test_http_conn.c: the kept connection of plugins/lib/io/http.c
 * (plc_http_conn), against a small HTTP/1.1 server of this test's own on a
 * loopback port (a stand-in that counts the connections it accepts): the
 * requests of one kept handle share one connection, a connection the server
 * closes (with "Connection: close" or without a word) is replaced without
 * an error, and plc_http still opens one per request.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plio.h"
#include "runner.h"

enum { KEEP, CLOSE_SAID, CLOSE_SILENT };

static int lfd;
static int mode;		/* how the server ends a response */
static int accepts;		/* connections accepted */
static int served;		/* requests answered */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Read one request (headers, then Content-Length bytes of body); 0 at EOF. */
static int
read_request(int fd, char *buf, size_t len)
{
	size_t n = 0;
	char *end = NULL;

	while (end == NULL) {
		ssize_t r = read(fd, buf + n, len - 1 - n);
		if (r <= 0)
			return 0;
		n += (size_t)r;
		buf[n] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	const char *cl = strcasestr(buf, "Content-Length:");
	size_t want = (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
	while (n < want) {
		ssize_t r = read(fd, buf + n, len - 1 - n);
		if (r <= 0)
			return 0;
		n += (size_t)r;
	}
	buf[n] = '\0';
	return 1;
}

static void *
server(void *arg)
{
	char buf[65536], out[256], body[64];

	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd == -1)
			return NULL;
		pthread_mutex_lock(&mu);
		accepts++;
		pthread_mutex_unlock(&mu);
		while (read_request(fd, buf, sizeof(buf))) {
			pthread_mutex_lock(&mu);
			int m = mode, k = ++served;
			pthread_mutex_unlock(&mu);
			int bl = snprintf(body, sizeof(body), "{\"n\":%d}", k);
			int ol = snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Type: "
			    "application/json\r\nContent-Length: %d\r\n%s\r\n%s", bl,
			    m == CLOSE_SAID ? "Connection: close\r\n" : "", body);
			if (write(fd, out, (size_t)ol) != ol || m != KEEP)
				break;
		}
		close(fd);
	}
}

static int
count(int *v)
{
	pthread_mutex_lock(&mu);
	int n = *v;
	pthread_mutex_unlock(&mu);
	return n;
}

/* n requests through the kept handle k (or plc_http when k is NULL): each
 * must come back whole, in order. */
static void
requests(struct plc_http_conn *k, const char *url, int n)
{
	for (int i = 0; i < n; i++) {
		struct plc_http_resp r;
		char want[64];
		int rc = k ? plc_http_conn_do(k, "POST", url, "{\"q\":1}", 7, NULL, 5, &r) :
		    plc_http("POST", url, "{\"q\":1}", 7, NULL, 5, &r);
		CHECK(rc == 0);
		CHECK(r.status == 200);
		snprintf(want, sizeof(want), "{\"n\":%d}", count(&served));
		CHECK(r.body != NULL && strcmp(r.body, want) == 0);
		if (rc != 0)
			fprintf(stderr, "request %d: %s\n", i, r.error);
		plc_http_free(&r);
	}
}

/* This case's server: a loopback listener and the thread that serves it
 * (a thread does not survive the fork, so each case starts its own); the
 * URL to post to. 0, or -1 when there is no socket. */
static int
start_server(char *url, size_t len)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	pthread_t th;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((lfd = socket(AF_INET, SOCK_STREAM, 0)) == -1 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == -1 || listen(lfd, 8) == -1 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) == -1) {
		perror("start_server: loopback socket");
		return -1;
	}
	snprintf(url, len, "http://127.0.0.1:%d/api/chat", ntohs(sa.sin_port));
	pthread_create(&th, NULL, server, NULL);
	return 0;
}

static void
stop_server(void)
{
	shutdown(lfd, SHUT_RDWR);
	close(lfd);
}

static void
case_kept(void)
{
	char url[64];

	CHECK(start_server(url, sizeof(url)) == 0);
	if (check_failures)
		return;
	/* One kept handle: five requests, one connection. */
	struct plc_http_conn *k = plc_http_conn_new();
	CHECK(k != NULL);
	requests(k, url, 5);
	CHECK(count(&accepts) == 1);

	/* A GET after POSTs on the same handle is a GET (the options of the
	 * last request are gone), still on the same connection. */
	struct plc_http_resp r;
	CHECK(plc_http_conn_do(k, "GET", url, NULL, 0, NULL, 5, &r) == 0);
	CHECK(r.status == 200);
	plc_http_free(&r);
	CHECK(count(&accepts) == 1);

	/* The server closes after each answer, saying so or not: the handle
	 * opens a new connection for each request after the first (which goes
	 * on the kept one), and no request fails. */
	pthread_mutex_lock(&mu);
	mode = CLOSE_SAID;
	pthread_mutex_unlock(&mu);
	requests(k, url, 3);
	CHECK(count(&accepts) == 1 + 2);
	pthread_mutex_lock(&mu);
	mode = CLOSE_SILENT;
	pthread_mutex_unlock(&mu);
	requests(k, url, 3);
	CHECK(count(&accepts) == 1 + 2 + 3);
	pthread_mutex_lock(&mu);
	mode = KEEP;
	pthread_mutex_unlock(&mu);
	requests(k, url, 2);	/* one new connection, kept again */
	CHECK(count(&accepts) == 1 + 2 + 3 + 1);
	plc_http_conn_free(k);
	stop_server();
}

/* plc_http: a connection per request. */
static void
case_per_request(void)
{
	char url[64];

	CHECK(start_server(url, sizeof(url)) == 0);
	if (check_failures)
		return;
	requests(NULL, url, 3);
	CHECK(count(&accepts) == 3);
	stop_server();
}

/* A refused connection is an error with curl's words, not a crash. */
static void
case_refused(void)
{
	struct plc_http_resp r;
	struct plc_http_conn *k = plc_http_conn_new();

	CHECK(plc_http_conn_do(k, "GET", "http://127.0.0.1:1/", NULL, 0, NULL, 5, &r) == -1);
	CHECK(r.status == 0 && r.error[0] != '\0');
	plc_http_free(&r);
	plc_http_conn_free(k);
}

static const struct unit_case cases[] = {
	UNIT_CASE(kept),
	UNIT_CASE(per_request),
	UNIT_CASE(refused),
	UNIT_END
};

int
main(int argc, char **argv)
{
	return unit_main(argc, argv, cases);
}
