/* addr.c: a listening address as pipelined.conf writes it, checked by the
 * configuration (conf.c, conf_check.c) and used by the HTTP listener
 * (httpd.c). Calls nothing of the daemon. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "pld.h"

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

/* Is ss a loopback address (127/8, ::1)? */
static int
is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

/*
 * Can a listener on ss take token as its http_token? It must be 16
 * characters or more, and off loopback it must be set. 0, or -1 with the
 * reason in err.
 */
int
httpd_token_problem(const struct sockaddr_storage *ss, const char *token, char *err,
    size_t errsz)
{
	if ((is_loopback(ss) && token[0] == '\0') || strlen(token) >= 16)
		return 0;
	snprintf(err, errsz, "http_listen%s needs an http_token of 16 characters or more",
	    is_loopback(ss) ? "" : " is not a loopback address: it");
	return -1;
}
