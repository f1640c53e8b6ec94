/*
 * fuzz_http.c: the HTTP listener's own request parsing (daemon/http/httpd.c)
 * on arbitrary bytes: the acceptor's scan of a request's header as it
 * arrives (httpd_head_scan), fed the input and each of its prefixes as a
 * client sending it slowly would, and the Host: check
 * (httpd_host_allowed) with the input as the header and as the names.
 * The scan reads only the bytes it is given (exactly sized copies), says
 * "done" only when an empty line ends the header within the limit, never
 * "more" for what is already over a limit, and once it has an answer for
 * a prefix keeps it for every longer one.
 */
#include "pld.h"
#include "http.h"
#include "fuzz.h"

static int
has_end(const char *b, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		if (b[i] == '\n' && (b[i + 1] == '\n' || (i + 2 < n && b[i + 1] == '\r' &&
		    b[i + 2] == '\n')))
			return 1;
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 40000)
		return 0;
	int last = HEAD_MORE;
	size_t step = size > 64 ? size / 64 : 1;
	for (size_t n = 0; n <= size; n += (n + step > size && n < size) ? size - n : step) {
		char *b = malloc(n ? n : 1);
		memcpy(b, data, n);
		int r = httpd_head_scan(b, n);
		if (r == HEAD_DONE && !has_end(b, n))
			abort();
		if (last != HEAD_MORE && r != last)
			abort();	/* an answer changed as more arrived */
		if (n > 16384 && r == HEAD_MORE)
			abort();	/* over the limit and still waiting */
		last = r;
		free(b);
		if (n == size)
			break;
	}
	/* Host: the input as the header, and as the list of names. */
	char *s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	httpd_host_allowed(s, "127.0.0.1 localhost ::1");
	httpd_host_allowed("localhost:9464", s);
	int plain = size > 0 && strlen(s) == size && strcspn(s, ":[] ,") == size;
	if (plain && !httpd_host_allowed(s, s))
		abort();	/* a plain name is allowed where it is listed */
	free(s);
	return 0;
}
