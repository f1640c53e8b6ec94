/* ini.c: the INI line reader under spec.c and conf.c: inih fed from a
 * string, with lines of any length, values whole (a ';' is part of a
 * value) and each line that is no key reported with its number. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "pld.h"

/* inih reader over a string that counts lines. inih (as Debian builds it)
 * takes lines of at most 200 bytes and cuts values at " ;" (an inline
 * comment); a longer line, or one with a ';', reaches it as "key = \001"
 * and the handler takes the whole value from p->longval
 * (ini_reader_value()). */
char *
ini_reader_line(char *str, int num, void *stream)
{
	struct ini_reader *p = stream;
	const char *t = p->text + p->off;
	if (*t == '\0')
		return NULL;
	size_t len = strcspn(t, "\n");
	size_t adv = len + (t[len] == '\n');
	p->off += adv;
	p->line++;
	free(p->longval);
	p->longval = NULL;
	free(p->raw);
	p->raw = strndup(t, len);
	if (p->on_line != NULL)
		p->on_line(p->arg, p->raw);
	/* Lines that fit and hold no ';' go to inih as they are. A ';' is
	 * never a comment inside a value here (shell commands are full of
	 * them), so such lines take the same path as long ones. */
	const char *lead = t + strspn(t, " \t");
	int whole = len + 2 <= (size_t)num && (memchr(t, ';', len) == NULL || *lead == ';' ||
	    *lead == '#' || *lead == '[');
	const char *eq = memchr(t, '=', len);
	int cont = t[0] == ' ' || t[0] == '\t';
	/* A line that is no key (inih also takes ':' for '=' in the lines it
	 * gets whole) is reported here, each with its text, and inih gets an
	 * empty line: inih reports only the first, and without its text. */
	if (!cont && lead < t + len && strchr(";#[\r", *lead) == NULL && (whole ?
	    eq == NULL && memchr(t, ':', len) == NULL :
	    eq == NULL || (size_t)(eq - t) + 8 > (size_t)num)) {
		size_t n = len;
		while (n > 0 && t[n - 1] == '\r')
			n--;
		size_t q = n > 60 ? 60 : n;
		while (q < n && q > 0 && ((unsigned char)t[q] & 0xc0) == 0x80)
			q--;    /* not inside a UTF-8 sequence */
		errs_add(p->errs, p->path, p->line, "-",
		    "syntax error (expected [section] or key = value): %.*s%s",
		    (int)q, t, q < n ? "..." : "");
		p->nerr++;
		str[0] = '\n';
		str[1] = '\0';
		return str;
	}
	if (whole) {
		memcpy(str, t, adv);
		str[adv] = '\0';
		return str;
	}
	if (!cont && (eq == NULL || (size_t)(eq - t) + 8 > (size_t)num)) {
		/* A long comment or section line: its first bytes will do. */
		size_t n = len < (size_t)num - 2 ? len : (size_t)num - 2;
		memcpy(str, t, n);
		str[n] = '\n';
		str[n + 1] = '\0';
		return str;
	}
	const char *v = cont ? t : eq + 1;
	const char *end = t + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		end--;
	p->longval = strndup(v, end > v ? (size_t)(end - v) : 0);
	if (cont)
		snprintf(str, (size_t)num, " \001\n");
	else
		snprintf(str, (size_t)num, "%.*s= \001\n", (int)(eq - t), t);
	return str;
}

const char *
ini_reader_value(const struct ini_reader *r, const char *value)
{
	if (value != NULL && strcmp(value, "\001") == 0 && r->longval != NULL)
		return r->longval;
	return value;
}

void
ini_reader_free(struct ini_reader *r)
{
	free(r->raw);
	free(r->longval);
	r->raw = r->longval = NULL;
}

/* inih over text through ini_reader_line, for pipelined.conf (conf.c):
 * the handler gets every value whole, however long, and *line is the line
 * being handled. */
struct ini_text {
	struct ini_reader p;
	ini_handler h;
	void *user;
	int *line;
};

static int
ini_text_handler(void *user, const char *section, const char *name, const char *value)
{
	struct ini_text *t = user;

	value = ini_reader_value(&t->p, value);
	*t->line = t->p.line;
	return t->h(t->user, section, name, value);
}

int
ini_text_parse(const char *path, const char *text, ini_handler h, void *user, int *line,
    char **errs, int *nerr)
{
	struct ini_text t = { .p = { .text = text, .path = path, .errs = errs }, .h = h,
	    .user = user, .line = line };
	int rc = ini_parse_stream(ini_reader_line, &t.p, ini_text_handler, &t);

	*nerr += t.p.nerr;
	ini_reader_free(&t.p);
	return rc;
}
