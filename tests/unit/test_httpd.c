/*
 * test_httpd.c: the HTTP listener's checks that need no socket
 * (daemon/http/httpd.c): the token comparison (httpd_equal) answers right and
 * takes a time that does not tell a guess of the token's length from one
 * of another length (it compares HMACs: the old comparison returned early
 * on a length mismatch); the acceptor's header scan; the Host: names.
 * The timing is the thread's CPU time, measured as a ratio of interleaved
 * medians, so the load of the machine cancels out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pld.h"
#include "http.h"
#include "runner.h"

static double
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);	/* not counting preemption */
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int
cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The median over rounds of the time of n comparisons of guess with tok. */
#define ROUNDS 31
static void
time_guesses(const char *tok, const char *const *g, int ng, double *med)
{
	double t[8][ROUNDS];
	volatile int sink = 0;
	for (int r = 0; r < ROUNDS; r++)
		for (int k = 0; k < ng; k++) {
			double t0 = now_ns();
			for (int i = 0; i < 300; i++)
				sink += httpd_equal(tok, g[k]);
			t[k][r] = now_ns() - t0;
		}
	for (int k = 0; k < ng; k++) {
		qsort(t[k], ROUNDS, sizeof(double), cmp_d);
		med[k] = t[k][ROUNDS / 2];
	}
	(void)sink;
}

static void
case_equal(void)
{
	const char *tok = "0123456789abcdef-token!!";	/* 24 characters */
	CHECK(httpd_equal(tok, "0123456789abcdef-token!!") == 1);
	CHECK(httpd_equal(tok, "0123456789abcdef-token!?") == 0);
	CHECK(httpd_equal(tok, "0123456789abcdef-token!") == 0);
	CHECK(httpd_equal(tok, "0123456789abcdef-token!!!") == 0);
	CHECK(httpd_equal(tok, "") == 0);
	CHECK(httpd_equal("", "") == 0, "an empty token matches nothing");
	/* Guesses one shorter, as long, one longer, and as long but wrong in
	 * the first byte: the same time, within noise. */
	const char *g[] = { "0123456789abcdef-token!", "x123456789abcdef-token!!",
	    "0123456789abcdef-token!?", "x123456789abcdef-token!!!" };
	double med[4];
	time_guesses(tok, g, 4, med);
	double lo = med[0], hi = med[0];
	for (int k = 1; k < 4; k++) {
		lo = med[k] < lo ? med[k] : lo;
		hi = med[k] > hi ? med[k] : hi;
	}
	printf("test_httpd: 300 comparisons: %.0f %.0f %.0f %.0f us (len 23, 24 first byte "
	    "wrong, 24 last byte wrong, 25): max/min %.2f\n", med[0] / 1e3, med[1] / 1e3,
	    med[2] / 1e3, med[3] / 1e3, hi / lo);
	CHECK(hi / lo < 1.3, "the comparison's time depends on the guess: max/min %.2f", hi / lo);
}

static int
scan(const char *s)
{
	return httpd_head_scan(s, strlen(s));
}

static void
case_head_scan(void)
{
	CHECK(scan("") == HEAD_MORE);
	CHECK(scan("GET / HTTP/1.1\r\nHost: a\r\n") == HEAD_MORE);
	CHECK(scan("GET / HTTP/1.1\r\nHost: a\r\n\r\n") == HEAD_DONE);
	CHECK(scan("GET / HTTP/1.0\n\n") == HEAD_DONE);
	CHECK(scan("GET / HTTP/1.0\r\n\r\n") == HEAD_DONE);
	char *b = malloc(20000);
	memset(b, 'a', 9000);
	b[9000] = '\0';
	CHECK(scan(b) == HEAD_URI_LONG, "9000 bytes without a line end");
	memcpy(b, "GET /", 5);
	strcpy(b + 8999, "\r\n");
	CHECK(scan(b) == HEAD_URI_LONG, "a 9000-byte request line");
	strcpy(b, "GET / HTTP/1.1\r\n");
	size_t n = strlen(b);
	while (n < 17000) {
		memcpy(b + n, "X-A: bbbbbbbbbbbbbbbbbbbb\r\n", 27);
		n += 27;
	}
	CHECK(httpd_head_scan(b, 16384) == HEAD_TOO_LARGE, "16 KiB of header and no end");
	CHECK(httpd_head_scan(b, 4000) == HEAD_MORE);
	free(b);
}

static void
case_hosts(void)
{
	const char *names = "127.0.0.1 localhost";
	CHECK(httpd_host_allowed("127.0.0.1:9464", names));
	CHECK(httpd_host_allowed("LOCALHOST:9464", names));
	CHECK(httpd_host_allowed("localhost", names));
	CHECK(!httpd_host_allowed("rebound.example:9464", names));
	CHECK(!httpd_host_allowed("localhost.example", names));
	CHECK(!httpd_host_allowed("127.0.0.1:", names), "an empty port");
	CHECK(!httpd_host_allowed("127.0.0.1:80x", names));
	CHECK(!httpd_host_allowed("", names));
	CHECK(!httpd_host_allowed(NULL, names));
	CHECK(httpd_host_allowed("[::1]:9464", "::1 localhost"));
	CHECK(!httpd_host_allowed("[::1", "::1 localhost"));
}

static const struct unit_case cases[] = {
	UNIT_CASE(equal),
	UNIT_CASE(head_scan),
	UNIT_CASE(hosts),
	UNIT_END
};

int
main(int argc, char **argv)
{
	return unit_main(argc, argv, cases);
}
