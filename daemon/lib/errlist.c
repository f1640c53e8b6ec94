/* errlist.c: error lists, "file:line: key: message" lines appended to a
 * string, as spec.c, conf.c and the host's checks report them. Below
 * every module that reports errors; calls nothing but util.c's fatal()
 * (and plio.h's string builder, below every layer of the daemon).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pld.h"
#include "plio.h"

/* The list errs_add() wrote last on this thread: appending costs the new
 * line, not the list (a copy per error made 40,000 errors take 43 s). A
 * list it did not write last (another list, or one written elsewhere) is
 * measured once. Past ERRS_MAX errors only their number is kept, in a
 * last line "... and N more errors". */
#define ERRS_MAX 100
#define ERRS_MORE "... and "
static __thread struct {
	char *buf;
	size_t len, cap, body;   /* body: where the "and N more" line starts */
	int n, more;
} acc;

static void
errs_measure(char *t)
{
	acc.buf = t;
	acc.len = t ? strlen(t) : 0;
	acc.cap = acc.len + 1;
	acc.body = acc.len;
	acc.n = acc.more = 0;
	for (size_t i = 0; i < acc.len; i++)
		acc.n += t[i] == '\n';
	char *last = acc.len ? memrchr(t, '\n', acc.len - 1) : NULL;
	last = last ? last + 1 : t;
	if (t && strncmp(last, ERRS_MORE, strlen(ERRS_MORE)) == 0) {
		acc.more = atoi(last + strlen(ERRS_MORE));
		acc.body = (size_t)(last - t);
		acc.n--;
	}
}

static void
errs_put(size_t at, const char *line, size_t n)
{
	if (at + n + 1 > acc.cap) {
		size_t ncap = acc.cap * 2 > at + n + 1 ? acc.cap * 2 : at + n + 1024;
		char *nb = realloc(acc.buf, ncap);
		if (nb == NULL)
			fatal("errs_add");
		acc.buf = nb;
		acc.cap = ncap;
	}
	memcpy(acc.buf + at, line, n + 1);
	acc.len = at + n;
}

void
errs_add(char **errs, const char *file, int line, const char *key, const char *fmt, ...)
{
	/* A message too long for a line ends in "..." (plc_sb). */
	char msg[ERRS_MSG_MAX];
	struct plc_sb sb;
	va_list ap;
	plc_sb_init(&sb, msg, sizeof(msg));
	va_start(ap, fmt);
	plc_sb_vappendf(&sb, fmt, ap);
	va_end(ap);
	if (errs == NULL)
		return;
	if (*errs == NULL || *errs != acc.buf)
		errs_measure(*errs);
	char *t;
	int n;
	if (acc.n >= ERRS_MAX) {
		acc.more++;
		n = asprintf(&t, ERRS_MORE "%d more error%s\n", acc.more, acc.more == 1 ? "" : "s");
		if (n == -1)
			fatal("errs_add");
		errs_put(acc.body, t, (size_t)n);
	} else {
		/* A line of 0 or less: the error concerns the whole file. */
		char where[16] = "";
		if (line > 0)
			snprintf(where, sizeof(where), "%d:", line);
		n = asprintf(&t, "%s:%s %s: %s\n", file, where, key ? key : "-", msg);
		if (n == -1)
			fatal("errs_add");
		errs_put(acc.body, t, (size_t)n);
		acc.n++;
		acc.body = acc.len;
	}
	free(t);
	*errs = acc.buf;
}

/* Append the lines of more that *errs does not hold yet: the copies of a
 * swept job (spec_sweep.c) share their lines, so their errors repeat. */
void
errs_merge(char **errs, const char *more)
{
	if (errs == NULL || more == NULL)
		return;
	while (*more) {
		size_t n = strcspn(more, "\n");
		char *line = strndup(more, n + (more[n] == '\n'));
		if (line == NULL)
			fatal("errs_merge");
		more += n + (more[n] == '\n');
		if (*errs != NULL && strstr(*errs, line) != NULL) {
			free(line);
			continue;
		}
		if (*errs == NULL || *errs != acc.buf)
			errs_measure(*errs);
		if (acc.n >= ERRS_MAX) {
			acc.more++;
			char *t;
			int k = asprintf(&t, ERRS_MORE "%d more error%s\n", acc.more,
			    acc.more == 1 ? "" : "s");
			if (k == -1)
				fatal("errs_merge");
			errs_put(acc.body, t, (size_t)k);
			free(t);
		} else {
			errs_put(acc.body, line, strlen(line));
			acc.n++;
			acc.body = acc.len;
		}
		free(line);
		*errs = acc.buf;
	}
}
