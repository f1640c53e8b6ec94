/*
 * pipelinectl: the operator's tool for pipelined.
 *
 *   pipelinectl [-f conf] [-s control.sock] [-F feed.sock] [--json] VERB ...
 *
 * The verbs are in the table cmds[] below: those of the protocol named by
 * the wire vocabulary in include/pipeline/proto.h, shared with the daemon,
 * and pipelinectl's own (stage, in-process, no daemon; gguf, report, plot,
 * doctor). An error is printed once, by ctl_fail() (on standard error, or
 * with --json as one JSON shape on standard output) and exits with its
 * code from ctl.h (pipelinectl(1) EXIT STATUS).
 */
#include <err.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pld.h"
#include "host.h"
#include "ctl.h"
#include "plio.h"

int ctl_json;
const char *ctl_verb = "pipelinectl";
static const char *conf_path;
static char control_path[PATH_MAX];
static char feed_path[PATH_MAX];
static struct conf conf;
static int have_conf;

static void usage(void) __attribute__((noreturn));
static void usage_to(FILE *f);

/* The parsed arguments of the verb being run: positionals in order, each
 * option's value ("" for a flag given, NULL when absent). */
static struct {
	const char **pos;
	int npos;
	const char *opt[8];
} A;

struct cmd;
static const struct cmd *cmd_find(const char *name);
static const char *opt_val(const struct cmd *c, const char *name);

/* ---- errors ---------------------------------------------------------- */

/* One error, printed once: "pipelinectl: VERB: message" on standard
 * error, or with --json {"ok":false,"verb":...,"code":...,"exit":N,
 * "error":"...","errors":[lines]} on standard output. A trailing newline
 * of msg is dropped; the code follows a one-line message. */
void
ctl_error(int rc, const char *code, const char *msg)
{
	size_t n = strlen(msg);
	while (n > 0 && msg[n - 1] == '\n')
		n--;
	char *m = xcalloc(n + 1, 1);
	memcpy(m, msg, n);
	if (ctl_json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddBoolToObject(o, "ok", 0);
		cJSON_AddStringToObject(o, "verb", ctl_verb);
		cJSON_AddStringToObject(o, "code", code);
		cJSON_AddNumberToObject(o, "exit", rc);
		cJSON_AddStringToObject(o, "error", m);
		cJSON *a = cJSON_AddArrayToObject(o, "errors");
		char *save = NULL;
		for (char *l = strtok_r(m, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
			cJSON_AddItemToArray(a, cJSON_CreateString(l));
		char *t = cJSON_PrintUnformatted(o);
		printf("%s\n", t);
		fflush(stdout);
		free(t);
		cJSON_Delete(o);
	} else {
		/* The daemon's code follows a one-line message; pipelinectl's
		 * own codes are said by the exit status. */
		int proto = 0;
		for (int e = PLP_OK + 1; e < PLP_COUNT; e++)
			proto |= strcmp(code, pl_proto_err_name((enum pl_proto_err)e)) == 0;
		int top = strcmp(ctl_verb, "pipelinectl") == 0;
		fprintf(stderr, "pipelinectl: %s%s%s%s%s%s\n", top ? "" : ctl_verb, top ? "" : ": ", m,
		    proto && strchr(m, '\n') == NULL ? " (" : "",
		    proto && strchr(m, '\n') == NULL ? code : "",
		    proto && strchr(m, '\n') == NULL ? ")" : "");
	}
	free(m);
}

void
ctl_fail(int rc, const char *code, const char *fmt, ...)
{
	char msg[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ctl_error(rc, code, msg);
	exit(rc);
}

/* The exit status of an error code of the daemon's. */
static int
code_exit(const char *code)
{
	return strcmp(code, pl_proto_err_name(PLP_ENOENT)) == 0 ? CTL_ENOENT : CTL_ERROR;
}

/* ---- colour ---------------------------------------------------------- */

/* Colour on a terminal only: not when piped, not with NO_COLOR set (to
 * anything but ""), not on TERM=dumb. */
static int
color_on(void)
{
	static int on = -1;
	if (on == -1) {
		const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");
		on = isatty(1) && !ctl_json && (nc == NULL || *nc == '\0') &&
		    (term == NULL || strcmp(term, "dumb") != 0);
	}
	return on;
}

/* The colour of a run's or job's state word, or "" for none. */
static const char *
state_color(const char *st)
{
	if (!color_on())
		return "";
	int js = pl_job_state_find(st);
	if (js == PLJ_succeeded)
		return "\033[32m";
	if (js == PLJ_reused)
		return "\033[36m";
	if (js == PLJ_failed)
		return "\033[1;31m";
	if (js == PLJ_running || js == PLJ_retrying)
		return "\033[33m";
	if (js == PLJ_cancelled || js == PLJ_rejected)
		return "\033[35m";
	return "";
}

static const char *
color_end(const char *c)
{
	return *c ? "\033[0m" : "";
}

/* ---- tables ---------------------------------------------------------- */

/* The columns of the terminal standard output is, or 0 when it is none. */
static int
term_cols(void)
{
	struct winsize ws;
	if (isatty(1) && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 0;
}

/* The characters (UTF-8 code points) of s, or of its first n bytes. */
static int
u8_len(const char *s, size_t n)
{
	int w = 0;
	for (size_t i = 0; i < n && s[i]; i++)
		w += ((unsigned char)s[i] & 0xc0) != 0x80;
	return w;
}

/* The bytes of s that hold its first w characters. */
static size_t
u8_bytes(const char *s, int w)
{
	size_t i = 0;
	int c = 0;
	for (; s[i]; i++) {
		if (((unsigned char)s[i] & 0xc0) != 0x80 && c++ == w)
			break;
	}
	return i;
}

/*
 * A table: a header row and rows of cells, each column as wide as its
 * widest cell, the last one not padded and, on a terminal, cut to its
 * width. Column state (or -1) is coloured by state_color().
 */
#define TAB_MAXCOL 8
struct tab {
	int ncol, nrow, state, right;	/* right: a bit per right-aligned column */
	char **cell;			/* nrow * ncol, row 0 the header */
};

static void
tab_row(struct tab *t, ...)
{
	va_list ap;
	va_start(ap, t);
	t->cell = xrealloc(t->cell, (size_t)(t->nrow + 1) * (size_t)t->ncol, sizeof(char *));
	for (int c = 0; c < t->ncol; c++) {
		const char *v = va_arg(ap, const char *);
		t->cell[t->nrow * t->ncol + c] = xstrdup(v ? v : "");
	}
	t->nrow++;
	va_end(ap);
}

static void
tab_print(struct tab *t)
{
	int w[TAB_MAXCOL] = { 0 }, cols = term_cols();
	for (int r = 0; r < t->nrow; r++)
		for (int c = 0; c < t->ncol; c++) {
			const char *v = t->cell[r * t->ncol + c];
			int l = u8_len(v, strlen(v));
			if (l > w[c])
				w[c] = l;
		}
	for (int r = 0; r < t->nrow; r++) {
		int used = 0;
		for (int c = 0; c < t->ncol; c++) {
			const char *v = t->cell[r * t->ncol + c];
			int l = u8_len(v, strlen(v)), last = c == t->ncol - 1;
			const char *col = r > 0 && c == t->state ? state_color(v) : "";
			if (last && cols > 0 && used + l > cols - 1) {
				/* Cut the last column to the terminal. */
				int room = cols - 1 - used;
				printf("%.*s\n", (int)u8_bytes(v, room > 0 ? room : 0), v);
				break;
			}
			int pad = last ? 0 : w[c] - l;
			if (t->right & (1 << c))
				printf("%*s%s%s%s", pad, "", col, v, color_end(col));
			else
				printf("%s%s%s%*s", col, v, color_end(col), pad, "");
			used += (last ? l : w[c]) + 2;
			printf(last ? "\n" : "  ");
		}
	}
	for (int i = 0; i < t->nrow * t->ncol; i++)
		free(t->cell[i]);
	free(t->cell);
	t->cell = NULL;
	t->nrow = 0;
}

/* ---- units ----------------------------------------------------------- */

/* A duration as status, list and watch print it: 42s, 2m07s, 1h05m. */
static void
fmt_secs(char *buf, size_t sz, double s)
{
	long t = (long)(s + 0.5);
	if (t >= 3600)
		snprintf(buf, sz, "%ldh%02ldm", t / 3600, t / 60 % 60);
	else if (t >= 60)
		snprintf(buf, sz, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, sz, "%lds", t);
}

/* The time from t0 to t1 (now, when t1 is 0), or "-" before t0. */
static void
fmt_span(char *buf, size_t sz, double t0, double t1)
{
	if (t0 <= 0) {
		snprintf(buf, sz, "-");
		return;
	}
	if (t1 <= 0)
		t1 = (double)time(NULL);
	fmt_secs(buf, sz, t1 > t0 ? t1 - t0 : 0);
}

/* A size in binary units, one word: 512B, 4.0KiB, 1.3GiB. */
static void
fmt_size(char *buf, size_t sz, double b)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int i = 0;
	while (b >= 1024 && i < 5) {
		b /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, sz, "%.0f%s", b, u[i]);
	else
		snprintf(buf, sz, "%.*f%s", b < 10 ? 1 : 0, b, u[i]);
}

/* ---- configuration and sockets -------------------------------------- */

static void
load_conf(void)
{
	char buf[PATH_MAX];
	const char *path = conf_path;
	if (path == NULL)
		path = getenv("PIPELINED_CONF");
	if (path == NULL) {
		snprintf(buf, sizeof(buf), "%s/../etc/pipelined.conf", self_dir());
		if (access(buf, R_OK) == 0)
			path = buf;
		else if (access("/etc/pipelined.conf", R_OK) == 0)
			path = "/etc/pipelined.conf";
	}
	if (path != NULL) {
		char *errs = NULL;
		if (conf_load(&conf, path, &errs) == -1) {
			if (conf_path != NULL)
				ctl_fail(CTL_ERROR, "EINVAL", "%s", errs ? errs : path);
			warnx("ignoring %s:\n%s", path, errs ? errs : "");
		}
		free(errs);
		have_conf = 1;
	} else {
		char *errs = NULL;
		conf_load(&conf, "/dev/null", &errs);
		free(errs);
	}
	if (control_path[0] == '\0') {
		const char *e = getenv("PIPELINED_SOCKET");
		snprintf(control_path, sizeof(control_path), "%s", e ? e : conf.control_socket);
	}
	if (feed_path[0] == '\0') {
		const char *e = getenv("PIPELINED_FEED");
		snprintf(feed_path, sizeof(feed_path), "%s", e ? e : conf.feed_socket);
	}
}

const struct conf *
ctl_conf(void)
{
	static int loaded;

	if (!loaded) {
		load_conf();
		loaded = 1;
	}
	return &conf;
}

/* Connect to a socket of the daemon's: the descriptor, or -1 with errno
 * set. */
static int
sock_connect_soft(const char *path)
{
	struct sockaddr_un sun;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path))
		ctl_fail(CTL_ERROR, "ELOCAL", "%s: socket path too long", path);
	strcpy(sun.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd == -1)
		ctl_fail(CTL_ERROR, "ELOCAL", "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int
sock_connect(const char *path)
{
	int fd = sock_connect_soft(path);
	if (fd == -1) {
		if (errno == ENOENT || errno == ECONNREFUSED)
			ctl_fail(CTL_ENODAEMON, "ENODAEMON", "pipelined is not running (no daemon at %s)",
			    path);
		if (errno == EACCES)
			ctl_fail(CTL_ENODAEMON, "EPERM",
			    "%s: permission denied (are you in the daemon's group?)", path);
		ctl_fail(CTL_ENODAEMON, "ENODAEMON", "connect %s: %s", path, strerror(errno));
	}
	return fd;
}

/*
 * Text from the store (event messages, progress units, descriptions, job
 * messages, logs) is the daemon's to pass on, not ours to trust: a job
 * program writes what it likes. Before it reaches a terminal, every
 * control character in it is shown escaped (ESC as \x1b, a C1 control
 * as \u009b), so no title, colour, cursor move or screen clear gets
 * through; a log keeps its newlines and tabs (logs --raw keeps all).
 * --json output is JSON, whose strings escape them already.
 */
static char *
defang(const char *s, int keep_lines)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		n += (*p < 0x20 || *p == 0x7f) ? 4 : (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) ? 5 : 1;
	char *out = xcalloc(n + 1, 1), *o = out;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (keep_lines && (*p == '\n' || *p == '\t'))
			*o++ = (char)*p;
		else if (*p < 0x20 || *p == 0x7f)
			o += sprintf(o, "\\x%02x", *p);
		else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
			o += sprintf(o, "\\u%04x", *++p);
		else
			*o++ = (char)*p;
	}
	*o = '\0';
	return out;
}

/* defang() every string (and key) of a reply, in place. */
static void
defang_json(cJSON *o, int keep_lines)
{
	for (cJSON *c = o ? o->child : NULL; c; c = c->next) {
		if (c->string != NULL && !(c->type & cJSON_StringIsConst)) {
			char *k = defang(c->string, 0);
			free(c->string);
			c->string = k;
		}
		if (cJSON_IsString(c) && !(c->type & cJSON_IsReference)) {
			char *v = defang(c->valuestring, keep_lines);
			free(c->valuestring);
			c->valuestring = v;
		}
		defang_json(c, keep_lines);
	}
}

static int logs_raw;	/* logs --raw: the log's bytes as they are */

struct conn {
	int fd;
	const char *path;
	char *buf;
	size_t len, cap;
};

/* A whole line the buffer holds (without its newline), or NULL. A line
 * over PL_PROTO_MAX_REPLY bytes ends pipelinectl with one error line. */
static char *
conn_take(struct conn *c)
{
	char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
	if (nl != NULL) {
		size_t n = (size_t)(nl - c->buf);
		char *line = strndup(c->buf, n);
		memmove(c->buf, nl + 1, c->len - n - 1);
		c->len -= n + 1;
		return line;
	}
	if (c->len >= PL_PROTO_MAX_REPLY)
		ctl_fail(CTL_ERROR, "ETOOLONG", "pipelined sent a line of over %d MiB without "
		    "its end: is %s pipelined's socket?", PL_PROTO_MAX_REPLY >> 20, c->path);
	return NULL;
}

/* One read into the buffer: the bytes read, 0 at EOF, -1 on an error. */
static ssize_t
conn_fill(struct conn *c)
{
	if (c->cap - c->len < 65536) {
		c->cap = c->cap ? c->cap * 2 : 131072;
		c->buf = xrealloc(c->buf, c->cap, 1);
	}
	ssize_t r;
	while ((r = read(c->fd, c->buf + c->len, c->cap - c->len)) < 0 && errno == EINTR)
		;
	if (r > 0)
		c->len += (size_t)r;
	return r;
}

/* Read one line (without the newline); NULL at EOF. */
static char *
conn_line(struct conn *c)
{
	char *line;
	while ((line = conn_take(c)) == NULL)
		if (conn_fill(c) <= 0)
			return NULL;
	return line;
}

/* Send one request line: 0, or -1 when the daemon is gone. */
static int
conn_send_soft(struct conn *c, cJSON *req)
{
	char *t = cJSON_PrintUnformatted(req);
	size_t n = strlen(t);
	t[n] = '\n';
	int rc = plc_write_all(c->fd, t, n + 1);
	free(t);
	return rc;
}

static struct conn ctl_conn = { .fd = -1 };

/* request()'s quiet: data lines not printed (Q_DATA); an error reply
 * returned as -1 without a word (Q_ERR), else printed and exited on; a
 * daemon that is gone returned as -1 too (Q_SOFT: watch, which waits for
 * it to come back), else an error that ends pipelinectl. */
#define Q_DATA	1
#define Q_ERR	2
#define Q_SOFT	4

/* The control connection is gone: the next request opens another. */
static void
ctl_conn_reset(void)
{
	if (ctl_conn.fd != -1)
		close(ctl_conn.fd);
	ctl_conn.fd = -1;
	ctl_conn.len = 0;
}

/* One request on the shared control connection (hello first). */
static int
request(enum pl_verb verb, cJSON *args, cJSON **result, int quiet)
{
	cJSON *req = args ? args : cJSON_CreateObject();
	if (ctl_conn.fd == -1) {
		load_conf();
		ctl_conn.fd = (quiet & Q_SOFT) ? sock_connect_soft(control_path) :
		    sock_connect(control_path);
		ctl_conn.path = control_path;
		if (ctl_conn.fd == -1) {
			cJSON_Delete(req);
			return -1;
		}
		cJSON *h = cJSON_CreateObject();
		cJSON_AddStringToObject(h, "verb", pl_verb_name(PLV_hello));
		cJSON_AddNumberToObject(h, "version", PL_PROTO_VERSION);
		int sent = conn_send_soft(&ctl_conn, h);
		cJSON_Delete(h);
		char *line = sent == 0 ? conn_line(&ctl_conn) : NULL;
		if (line == NULL && (quiet & Q_SOFT)) {
			ctl_conn_reset();
			cJSON_Delete(req);
			return -1;
		}
		if (line == NULL)
			ctl_fail(CTL_ENODAEMON, "ENODAEMON",
			    "pipelined closed the connection during the handshake");
		cJSON *r = cJSON_Parse(line);
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "status");
		if (!cJSON_IsString(st) || strcmp(st->valuestring, "ok") != 0) {
			const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
			ctl_fail(CTL_ENODAEMON, *jstr(r, "code") ? jstr(r, "code") : "EPROTO",
			    "pipelined refused the handshake: %s",
			    cJSON_IsString(e) ? e->valuestring : line);
		}
		cJSON_Delete(r);
		free(line);
	}
	cJSON_AddStringToObject(req, "verb", pl_verb_name(verb));
	int sent = conn_send_soft(&ctl_conn, req);
	cJSON_Delete(req);
	if (sent == -1 && !(quiet & Q_SOFT))
		ctl_fail(CTL_ENODAEMON, "ENODAEMON", "write to pipelined: %s", strerror(errno));
	for (;;) {
		char *line = sent == 0 ? conn_line(&ctl_conn) : NULL;
		if (line == NULL && (quiet & Q_SOFT)) {
			ctl_conn_reset();
			return -1;
		}
		if (line == NULL)
			ctl_fail(CTL_ENODAEMON, "ENODAEMON", "pipelined closed the connection");
		cJSON *r = cJSON_Parse(line);
		if (r == NULL) {
			line[strnlen(line, 200)] = '\0';
			ctl_fail(CTL_ERROR, "EPROTO", "pipelined sent a malformed line: %s",
			    defang(line, 0));
		}
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "status");
		if (!cJSON_IsString(st)) { /* a data line */
			if (!(quiet & Q_DATA))
				printf("%s\n", line);
			cJSON_Delete(r);
			free(line);
			continue;
		}
		free(line);
		/* A log and an error (a spec's, one a line, as check prints
		 * them) keep their lines. */
		int ok = strcmp(st->valuestring, "ok") == 0;
		if (!ctl_json && !(verb == PLV_logs && logs_raw))
			defang_json(r, verb == PLV_logs || !ok);
		if (ok) {
			if (result)
				*result = cJSON_DetachItemFromObject(r, "result");
			cJSON_Delete(r);
			return 0;
		}
		if (quiet & Q_ERR) {
			cJSON_Delete(r);
			return -1;
		}
		const char *code = *jstr(r, "code") ? jstr(r, "code") : "EINTERNAL";
		ctl_error(code_exit(code), code, *jstr(r, "error") ? jstr(r, "error") : "error");
		exit(code_exit(code));
	}
}

int
ctl_request(enum pl_verb verb, cJSON *args, cJSON **result)
{
	return request(verb, args, result, Q_DATA);
}

static void
print_json(const cJSON *o)
{
	char *t = cJSON_PrintUnformatted(o);
	printf("%s\n", t);
	free(t);
}

const char *
jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : "";
}

double
jnum(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void
fmt_time(double t, char *buf, size_t len)
{
	if (t <= 0) {
		snprintf(buf, len, "-");
		return;
	}
	time_t s = (time_t)t;
	struct tm tm;
	localtime_r(&s, &tm);
	strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

static char *
read_spec(const char *path, char *abs, size_t abslen)
{
	size_t len;
	char *text = plc_read_file(path, &len, 4 << 20);
	if (text == NULL)
		ctl_fail(CTL_ERROR, "ELOCAL", "%s: %s", path, strerror(errno));
	int nul = nul_line(text, len);
	if (nul)
		ctl_fail(CTL_ERROR, "EINVAL", "%s:%d: -: a NUL byte (a spec is text)", path, nul);
	char *r = realpath(path, NULL);
	snprintf(abs, abslen, "%s", r ? r : path);
	free(r);
	return text;
}

/* ---- verbs ---------------------------------------------------------- */

/* The verbs below read their arguments from A (parse_args checked them). */

/*
 * --plan (submit, check): the daemon, which has the store, checks the spec
 * and says what each job would do, and submits nothing. One line a job,
 * in the order the jobs could run:
 *   tokenize: reuse r1/tokenize (the same key as job tokenize of run r1, ...)
 *   train: run (key lr: 0.0002 -> 0.0003)
 *   merge: run (runs after train, which runs: ...)
 */
static int
plan_request(enum pl_verb verb, const char *name)
{
	const char *file = A.pos[0];
	char abs[PATH_MAX];
	char *text = read_spec(file, abs, sizeof(abs));
	cJSON *a = cJSON_CreateObject(), *r = NULL;
	cJSON_AddStringToObject(a, "path", abs);
	cJSON_AddStringToObject(a, "text", text);
	if (name)
		cJSON_AddStringToObject(a, "name", name);
	cJSON_AddBoolToObject(a, "plan", 1);
	free(text);
	request(verb, a, &r, 0);
	if (ctl_json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddBoolToObject(o, "ok", 1);
		cJSON_AddStringToObject(o, "verb", ctl_verb);
		for (cJSON *x = r ? r->child : NULL; x; x = x->next)
			cJSON_AddItemToObject(o, x->string, cJSON_Duplicate(x, 1));
		print_json(o);
		cJSON_Delete(o);
		cJSON_Delete(r);
		return CTL_OK;
	}
	const cJSON *e;
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(r, "plan")) {
		const char *act = jstr(e, "action");
		printf("%s: %s", jstr(e, "job"), act);
		if (strcmp(act, "reuse") == 0)
			printf(" %s/%s", jstr(e, "from_run"), jstr(e, "from_job"));
		const cJSON *w;
		int i = 0;
		cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(e, "why"))
			if (cJSON_IsString(w))
				printf("%s%s", i++ ? "; " : " (", w->valuestring);
		printf("%s\n", i ? ")" : "");
	}
	cJSON_Delete(r);
	return CTL_OK;
}

static int
cmd_check(int argc, char **argv)
{
	const char *file = A.pos[0];
	if (opt_val(cmd_find("check"), "--plan") != NULL)
		return plan_request(PLV_check, NULL);
	load_conf();
	plugin_load_dir(conf.plugin_dir, &plugin_host);
	char abs[PATH_MAX];
	char *text = read_spec(file, abs, sizeof(abs));
	char *errs = NULL;
	/* Messages name the file as the operator typed it. */
	struct spec *s = spec_load(file, text, &conf, &errs);
	int ok = s != NULL && spec_check(s, have_conf ? &conf : NULL, host_check_section, 0,
	    &errs) == 0;
	if (!ok) {
		ctl_error(CTL_ERROR, pl_proto_err_name(PLP_EINVAL), errs ? errs : "invalid spec");
	} else if (ctl_json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddBoolToObject(o, "ok", 1);
		cJSON_AddStringToObject(o, "verb", ctl_verb);
		cJSON_AddStringToObject(o, "run", s->name);
		cJSON_AddNumberToObject(o, "jobs", s->njobs);
		cJSON_AddArrayToObject(o, "errors");
		if (s->nvariants > 0) {
			cJSON *va = cJSON_AddArrayToObject(o, "variants");
			for (int v = 0; v < s->nvariants; v++) {
				cJSON *x = cJSON_CreateObject();
				cJSON_AddNumberToObject(x, "variant", v + 1);
				cJSON_AddStringToObject(x, "values", s->variant_values[v]);
				cJSON *jl = cJSON_AddArrayToObject(x, "jobs");
				for (int j = 0; j < s->njobs; j++)
					if (s->jobs[j]->vindex == v + 1)
						cJSON_AddItemToArray(jl, cJSON_CreateString(s->jobs[j]->name));
				cJSON_AddItemToArray(va, x);
			}
		}
		print_json(o);
		cJSON_Delete(o);
	} else {
		printf("%s: OK (run %s, %d jobs)\n", file, s->name, s->njobs);
		/* A sweep's variants, a line each: values, then jobs. */
		if (s->nvariants > 0)
			printf("sweep of [%s] (line %d): %d variants\n", s->sweep_job, s->sweep_line,
			    s->nvariants);
		for (int v = 0; v < s->nvariants; v++) {
			printf("  %-24s", s->variant_values[v]);
			for (int j = 0; j < s->njobs; j++)
				if (s->jobs[j]->vindex == v + 1)
					printf(" %s", s->jobs[j]->name);
			printf("\n");
		}
	}
	free(errs);
	free(text);
	spec_free(s);
	return ok ? CTL_OK : CTL_ERROR;
}

static int
cmd_submit(int argc, char **argv)
{
	const struct cmd *c = cmd_find("submit");
	const char *name = opt_val(c, "--name"), *file = A.pos[0];
	if (opt_val(c, "--plan") != NULL)
		return plan_request(PLV_submit, name);
	char abs[PATH_MAX];
	char *text = read_spec(file, abs, sizeof(abs));
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "path", abs);
	cJSON_AddStringToObject(a, "text", text);
	if (name)
		cJSON_AddStringToObject(a, "name", name);
	free(text);
	cJSON *r = NULL;
	request(PLV_submit, a, &r, 0);
	if (ctl_json)
		print_json(r);
	else
		printf("%s\n", jstr(r, "run"));
	cJSON_Delete(r);
	return CTL_OK;
}

/* A job's progress: "120/400 optimizer-steps", the stage's own unit. */
static void
fmt_progress(char *buf, size_t sz, double done, double total, const char *unit)
{
	buf[0] = '\0';
	if (total > 0)
		snprintf(buf, sz, "%.0f/%.0f %s", done, total, unit);
}

/* 1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st. */
static const char *
ordinal(int n)
{
	int t = n % 100;
	return t >= 11 && t <= 13 ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" :
	    n % 10 == 3 ? "rd" : "th";
}

/*
 * Why an open job waits (its "wait" in status's reply), in words, shorter
 * as level grows, until only the resource is left:
 *   0  waits for gpu (1 of 1 in use): held by run a (train); 1st in line
 *   1  waits for gpu, held by a/train; 1st in line
 * (a sweep's job may wait for what the sweep keeps for an earlier
 * variant: "waits for gpu (0 of 1 in use): kept for bake-r8; 1st in
 * line")
 *   2  waits for gpu, 1st in line
 *   3  waits for gpu
 * "" when it does not wait (or waits for a job of its own run at level 3
 * and more, which its line shows anyway).
 */
static void
wait_words(const cJSON *wt, int level, double now, char *buf, size_t sz)
{
	const char *why = jstr(wt, "reason");
	char what[160], held[512] = "", t[32];
	buf[0] = '\0';
	if (strcmp(why, "after") == 0) {
		snprintf(buf, sz, "waits for job %s", jstr(wt, "job"));
		return;
	}
	if (strcmp(why, "backoff") == 0) {
		fmt_secs(t, sizeof(t), jnum(wt, "until") > now ? jnum(wt, "until") - now : 0);
		snprintf(buf, sz, "retries in %s", t);
		return;
	}
	if (strcmp(why, "stopping") == 0) {
		snprintf(buf, sz, "waits: pipelined is stopping");
		return;
	}
	int slots = strcmp(why, "slots") == 0;
	if (!slots && strcmp(why, "resource") != 0)
		return;
	if (slots)
		snprintf(what, sizeof(what), "a job slot");
	else
		snprintf(what, sizeof(what), "%s", jstr(wt, "resource"));
	int place = (int)jnum(wt, "place"), n = 0, nh = (int)jnum(wt, "holders");
	const cJSON *h;
	size_t o = 0;
	cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(wt, "held_by")) {
		if (!cJSON_IsString(h) || o >= sizeof(held))
			continue;
		const char *slash = strchr(h->valuestring, '/');
		if (level == 0 && slash != NULL)
			o += (size_t)snprintf(held + o, sizeof(held) - o, "%srun %.*s (%s)", n ? ", " : "",
			    (int)(slash - h->valuestring), h->valuestring, slash + 1);
		else
			o += (size_t)snprintf(held + o, sizeof(held) - o, "%s%s", n ? ", " : "",
			    h->valuestring);
		n++;
	}
	if (nh > n && o < sizeof(held))
		snprintf(held + o, sizeof(held) - o, " and %d more", nh - n);
	/* Who holds it, and the earlier variant's job of the same run that
	 * a sweep keeps it for: "held by a/train, kept for bake-r8". */
	char who[700] = "";
	const char *kf = jstr(wt, "kept_for");
	snprintf(who, sizeof(who), "%s%s%s%s%s", *held ? "held by " : "", held,
	    *held && *kf ? ", " : "", *kf ? "kept for " : "", kf);
	if (level == 0 && slots)
		snprintf(buf, sz, "waits for %s (%.0f of max_jobs %.0f running)%s%s; %d%s in line",
		    what, jnum(wt, "used"), jnum(wt, "capacity"), *held ? ": " : "", held, place,
		    ordinal(place));
	else if (level == 0)
		snprintf(buf, sz, "waits for %s (%.0f of %.0f in use)%s%s; %d%s in line", what,
		    jnum(wt, "used"), jnum(wt, "capacity"), *who ? ": " : "", who, place,
		    ordinal(place));
	else if (level == 1)
		snprintf(buf, sz, "waits for %s%s%s; %d%s in line", what, *who ? ", " : "", who,
		    place, ordinal(place));
	else if (level == 2)
		snprintf(buf, sz, "waits for %s, %d%s in line", what, place, ordinal(place));
	else
		snprintf(buf, sz, "waits for %s", what);
}

static void
print_jobs_table(const cJSON *jobs)
{
	struct tab t = { .ncol = 7, .state = 2, .right = 1 << 3 };
	tab_row(&t, "JOB", "STAGE", "STATE", "TRY", "DURATION", "PROGRESS", "MESSAGE");
	const cJSON *j;
	cJSON_ArrayForEach(j, jobs) {
		char prog[96], tries[16], dur[32];
		fmt_progress(prog, sizeof(prog), jnum(j, "progress_done"), jnum(j, "progress_total"),
		    jstr(j, "progress_unit"));
		snprintf(tries, sizeof(tries), "%.0f", jnum(j, "attempts"));
		fmt_span(dur, sizeof(dur), jnum(j, "started"), jnum(j, "finished"));
		/* A job that waits says why, before its last message. */
		char msg[1024];
		wait_words(cJSON_GetObjectItemCaseSensitive(j, "wait"), 0, (double)time(NULL), msg,
		    sizeof(msg));
		if (*jstr(j, "message"))
			snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "%s%s", *msg ? "; " : "",
			    jstr(j, "message"));
		/* A sweep's job: its values beside its stage. */
		char stage[256];
		snprintf(stage, sizeof(stage), "%s%s%s%s", jstr(j, "stage"), *jstr(j, "variant") ?
		    " (" : "", jstr(j, "variant"), *jstr(j, "variant") ? ")" : "");
		tab_row(&t, jstr(j, "name"), stage, jstr(j, "state"), tries, dur, prog, msg);
	}
	tab_print(&t);
}

static int run_exit(const char *s);
static int run_final(const char *s);

/* An artifact's file gc removed: "removed TIME by uid N" in buf; 0 when
 * it is held. */
static int
fmt_removed(const cJSON *a, char *buf, size_t len)
{
	const cJSON *rm = cJSON_GetObjectItemCaseSensitive(a, "removed");
	if (!cJSON_IsNumber(rm))
		return 0;
	char t[64];
	fmt_time(rm->valuedouble, t, sizeof(t));
	snprintf(buf, len, "removed %s by uid %.0f", t, jnum(a, "removed_by"));
	return 1;
}

/* status RUN's line on artifacts gc removed: how many, when, by whom. */
static void
status_removed(const char *run)
{
	cJSON *a = cJSON_CreateObject(), *r = NULL;
	cJSON_AddStringToObject(a, "run", run);
	if (request(PLV_artifacts, a, &r, Q_DATA | Q_ERR) == -1)
		return;
	const cJSON *x;
	int n = 0;
	double bytes = 0;
	char last[160] = "";
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "artifacts"))
		if (fmt_removed(x, last, sizeof(last))) {
			n++;
			bytes += jnum(x, "size");
		}
	if (n > 0) {
		char sz[32];
		fmt_size(sz, sizeof(sz), bytes);
		printf("artifacts: %d removed (%s), the last %s\n", n, sz, last);
	}
	cJSON_Delete(r);
}

static int
cmd_status(int argc, char **argv)
{
	const char *run = A.npos > 0 ? A.pos[0] : NULL;
	cJSON *a = cJSON_CreateObject();
	if (run != NULL)
		cJSON_AddStringToObject(a, "run", run);
	cJSON *r = NULL;
	request(PLV_status, a, &r, 0);
	int rc = run ? run_exit(jstr(cJSON_GetObjectItemCaseSensitive(r, "run"), "state")) : 0;
	if (ctl_json) {
		print_json(r);
	} else if (run != NULL) {
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(r, "run");
		char t[64], dur[32];
		const char *st = jstr(x, "state"), *col = state_color(st);
		fmt_time(jnum(x, "created"), t, sizeof(t));
		fmt_span(dur, sizeof(dur), jnum(x, "created"), jnum(x, "finished"));
		printf("run %s: %s%s%s (submitted %s, %s %s%s%s)\n", jstr(x, "name"), col, st,
		    color_end(col), t, dur, run_final(st) ? "in all" : "so far",
		    *jstr(x, "previous") ? ", previous " : "", jstr(x, "previous"));
		if (*jstr(x, "message"))
			printf("  %s\n", jstr(x, "message"));
		print_jobs_table(cJSON_GetObjectItemCaseSensitive(r, "jobs"));
		status_removed(run);
	} else {
		struct tab t = { .ncol = 7, .state = 1, .right = 1 << 5 };
		tab_row(&t, "RUN", "STATE", "JOBS", "SUBMITTED", "DURATION", "SIZE", "PREVIOUS");
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "runs")) {
			char tm[64], jobs[32], dur[32], size[32];
			fmt_time(jnum(x, "created"), tm, sizeof(tm));
			fmt_span(dur, sizeof(dur), jnum(x, "created"), jnum(x, "finished"));
			snprintf(jobs, sizeof(jobs), "%.0f/%.0f", jnum(x, "succeeded"), jnum(x, "jobs"));
			fmt_size(size, sizeof(size), jnum(x, "bytes"));
			tab_row(&t, jstr(x, "name"), jstr(x, "state"), jobs, tm, dur, size,
			    jstr(x, "previous"));
		}
		tab_print(&t);
	}
	cJSON_Delete(r);
	return rc;
}

/* A job the user named must be one of the run's (values and metrics of a
 * misspelt job would otherwise be an empty answer): else exit 4 with a
 * did-you-mean. */
static void
known_job(const char *run, const char *job)
{
	cJSON *a = cJSON_CreateObject(), *r = NULL;
	cJSON_AddStringToObject(a, "run", run);
	request(PLV_status, a, &r, Q_DATA);
	const cJSON *x;
	struct suggest sg = { .word = job };
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "jobs")) {
		if (strcmp(jstr(x, "name"), job) == 0) {
			cJSON_Delete(r);
			return;
		}
		suggest_try(&sg, jstr(x, "name"));
	}
	char hint[256];
	suggest_hint(&sg, hint, sizeof(hint));
	ctl_fail(CTL_ENOENT, pl_proto_err_name(PLP_ENOENT), "no job %s in run %s%s", job, run, hint);
}

static int
cmd_logs(int argc, char **argv)
{
	int follow = opt_val(cmd_find("logs"), "-f") != NULL;
	logs_raw = opt_val(cmd_find("logs"), "--raw") != NULL;
	const char *run = A.pos[0], *job = A.pos[1];
	double offset = 0;
	known_job(run, job);
	for (;;) {
		cJSON *a = cJSON_CreateObject();
		cJSON_AddStringToObject(a, "run", run);
		cJSON_AddStringToObject(a, "job", job);
		cJSON_AddNumberToObject(a, "offset", offset);
		cJSON *r = NULL;
		request(PLV_logs, a, &r, 0);
		const char *data = jstr(r, "data");
		if (ctl_json)
			print_json(r);
		else
			fputs(data, stdout);
		fflush(stdout);
		offset = jnum(r, "offset");
		int more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "more"));
		const char *state = jstr(r, "state");
		int st = pl_job_state_find(state);
		int active = st == PLJ_running || st == PLJ_pending || st == PLJ_retrying;
		cJSON_Delete(r);
		if (more)
			continue;
		if (!follow || !active)
			break;
		usleep(300000);
	}
	return CTL_OK;
}

static int
cmd_simple(enum pl_verb verb)
{
	cJSON *a = cJSON_CreateObject();
	if (A.npos > 0)
		cJSON_AddStringToObject(a, "run", A.pos[0]);
	if (A.npos > 1) {
		if (verb == PLV_values || verb == PLV_metrics)
			known_job(A.pos[0], A.pos[1]);
		cJSON_AddStringToObject(a, "job", A.pos[1]);
	}
	if (A.npos > 2)
		cJSON_AddStringToObject(a, "name", A.pos[2]);
	cJSON *r = NULL;
	request(verb, a, &r, 0);
	if (ctl_json) {
		print_json(r);
	} else if (verb == PLV_values) {
		struct tab t = { .ncol = 3 };
		tab_row(&t, "JOB", "KEY", "VALUE");
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "values"))
			tab_row(&t, jstr(x, "job"), jstr(x, "key"), jstr(x, "value"));
		tab_print(&t);
	} else if (verb == PLV_artifacts) {
		int bytes = opt_val(cmd_find("artifacts"), "--bytes") != NULL;
		struct tab t = { .ncol = 5, .right = 1 << 2 };
		tab_row(&t, "JOB", "NAME", "SIZE", "SHA256", "PATH");
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "artifacts")) {
			char size[32];
			if (bytes)
				snprintf(size, sizeof(size), "%.0f", jnum(x, "size"));
			else
				fmt_size(size, sizeof(size), jnum(x, "size"));
			char path[PATH_MAX + 200], rm[160];
			if (fmt_removed(x, rm, sizeof(rm)))
				snprintf(path, sizeof(path), "%s (%s)", jstr(x, "path"), rm);
			else
				snprintf(path, sizeof(path), "%s", jstr(x, "path"));
			tab_row(&t, jstr(x, "job"), jstr(x, "name"), size, jstr(x, "sha256"), path);
		}
		tab_print(&t);
	} else if (verb == PLV_metrics) {
		struct tab t = { .ncol = 3, .right = 1 << 1 | 1 << 2 };
		tab_row(&t, "NAME", "STEP", "VALUE");
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "metrics")) {
			char step[32], val[32];
			snprintf(step, sizeof(step), "%.0f", jnum(x, "step"));
			snprintf(val, sizeof(val), "%.6g", jnum(x, "value"));
			tab_row(&t, jstr(x, "name"), step, val);
		}
		tab_print(&t);
	} else {
		printf("%s\n", jstr(r, "message"));
	}
	cJSON_Delete(r);
	return CTL_OK;
}

/* ---- du and gc ------------------------------------------------------- */

static void
size_word(char *buf, size_t len, double b, int bytes)
{
	if (bytes)
		snprintf(buf, len, "%.0f", b);
	else
		fmt_size(buf, len, b);
}

/* The bytes each run holds (its artifact files, its directory on disk),
 * or one run's per job and artifact. */
static int
cmd_du(int argc, char **argv)
{
	int bytes = opt_val(cmd_find("du"), "--bytes") != NULL;
	const char *run = A.npos > 0 ? A.pos[0] : NULL;
	cJSON *a = cJSON_CreateObject(), *r = NULL;
	if (run != NULL)
		cJSON_AddStringToObject(a, "run", run);
	request(PLV_du, a, &r, 0);
	if (ctl_json) {
		print_json(r);
		cJSON_Delete(r);
		return CTL_OK;
	}
	char b1[32], b2[32], b3[32];
	const cJSON *x;
	if (run == NULL) {
		struct tab t = { .ncol = 6, .state = 1, .right = 1 << 2 | 1 << 3 | 1 << 4 | 1 << 5 };
		tab_row(&t, "RUN", "STATE", "FILES", "SIZE", "REMOVED", "DISK");
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "runs")) {
			char files[32];
			snprintf(files, sizeof(files), "%.0f", jnum(x, "artifacts"));
			size_word(b1, sizeof(b1), jnum(x, "bytes"), bytes);
			size_word(b2, sizeof(b2), jnum(x, "removed_bytes"), bytes);
			size_word(b3, sizeof(b3), jnum(x, "disk"), bytes);
			tab_row(&t, jstr(x, "run"), jstr(x, "state"), files, b1, b2, b3);
		}
		size_word(b1, sizeof(b1), jnum(r, "bytes"), bytes);
		size_word(b3, sizeof(b3), jnum(r, "disk"), bytes);
		tab_row(&t, "total", "", "", b1, "", b3);
		tab_print(&t);
		cJSON_Delete(r);
		return CTL_OK;
	}
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(r, "run");
	size_word(b1, sizeof(b1), jnum(u, "bytes"), bytes);
	size_word(b2, sizeof(b2), jnum(u, "removed_bytes"), bytes);
	size_word(b3, sizeof(b3), jnum(u, "disk"), bytes);
	printf("run %s: %s in %.0f artifact file%s, %s removed by gc, %s on disk\n", run, b1,
	    jnum(u, "artifacts"), jnum(u, "artifacts") == 1 ? "" : "s", b2, b3);
	struct tab t = { .ncol = 2, .right = 1 << 1 };
	tab_row(&t, "JOB", "DISK");
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "jobs")) {
		size_word(b1, sizeof(b1), jnum(x, "disk"), bytes);
		tab_row(&t, jstr(x, "job"), b1);
	}
	tab_print(&t);
	struct tab ta = { .ncol = 5, .right = 1 << 2 };
	tab_row(&ta, "JOB", "NAME", "SIZE", "FILE", "PATH");
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "artifacts")) {
		char rm[160];
		size_word(b1, sizeof(b1), jnum(x, "size"), bytes);
		tab_row(&ta, jstr(x, "job"), jstr(x, "name"), b1, fmt_removed(x, rm, sizeof(rm)) ?
		    rm : "held", jstr(x, "path"));
	}
	printf("\n");
	tab_print(&ta);
	cJSON_Delete(r);
	return CTL_OK;
}

/* Remove the artifact files the retention lets go (or RUN's), or with
 * --dry-run say which. */
static int
cmd_gc(int argc, char **argv)
{
	int dry = opt_val(cmd_find("gc"), "--dry-run") != NULL;
	int bytes = opt_val(cmd_find("gc"), "--bytes") != NULL;
	cJSON *a = cJSON_CreateObject(), *r = NULL;
	if (A.npos > 0)
		cJSON_AddStringToObject(a, "run", A.pos[0]);
	cJSON_AddBoolToObject(a, "dry_run", dry);
	request(PLV_gc, a, &r, 0);
	if (ctl_json) {
		print_json(r);
		cJSON_Delete(r);
		return CTL_OK;
	}
	const cJSON *x;
	char b[32];
	int n = 0;
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "kept"))
		printf("keep %s: %s\n", jstr(x, "run"), jstr(x, "why"));
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "skipped"))
		printf("keep %s %s %s: %s\n", jstr(x, "run"), jstr(x, "job"), jstr(x, "name"),
		    jstr(x, "why"));
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "removed")) {
		size_word(b, sizeof(b), jnum(x, "size"), bytes);
		printf("%s %s %s %s %s %s\n", dry ? "would remove" : "removed", jstr(x, "run"),
		    jstr(x, "job"), jstr(x, "name"), b, jstr(x, "path"));
		n++;
	}
	int nerr = 0;
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "errors")) {
		fprintf(stderr, "pipelinectl: gc: %s\n", cJSON_IsString(x) ? x->valuestring : "?");
		nerr++;
	}
	size_word(b, sizeof(b), jnum(r, "bytes"), bytes);
	printf("%s %d artifact file%s, %s\n", dry ? "would remove" : "removed", n,
	    n == 1 ? "" : "s", b);
	cJSON_Delete(r);
	return nerr ? CTL_ERROR : CTL_OK;
}

/* ---- web ------------------------------------------------------------- */

/* A one-time login link to the status page, whose session sees the runs
 * this user may (pipelined(8) SECURITY). */
static int
cmd_web(int argc, char **argv)
{
	const char *run = A.npos > 0 ? A.pos[0] : NULL;
	cJSON *r = NULL, *st = NULL;
	/* The page names a run by its stored name: RUN is its newest
	 * revision, RUN@N (NAME@1: NAME) as the daemon resolves it. */
	if (run != NULL) {
		cJSON *a = cJSON_CreateObject();
		cJSON_AddStringToObject(a, "run", run);
		if (request(PLV_status, a, &st, Q_DATA | Q_ERR) == 0)
			run = jstr(cJSON_GetObjectItemCaseSensitive(st, "run"), "name");
	}
	request(PLV_web, NULL, &r, 0);
	const char *listen = jstr(r, "listen"), *code = jstr(r, "code");
	if (*listen == '\0') {
		cJSON_Delete(r);
		ctl_fail(CTL_ERROR, "ENOWEB", "the daemon serves no page (set http_listen in pipelined.conf)");
	}
	char url[1024];
	if (*code)
		snprintf(url, sizeof(url), "http://%s/login?code=%s%s%s", listen, code,
		    run ? "&run=" : "", run ? run : "");
	else
		snprintf(url, sizeof(url), "http://%s/%s%s", listen, run ? "#run=" : "",
		    run ? run : "");
	if (ctl_json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "url", url);
		print_json(o);
		cJSON_Delete(o);
	} else {
		printf("%s\n", url);
		if (*code)
			fprintf(stderr, "pipelinectl: the link logs in once, within ten minutes\n");
	}
	cJSON_Delete(r);
	cJSON_Delete(st);
	return 0;
}

/* ---- watch ----------------------------------------------------------- */

/* Progress samples kept per job for its rate: the last RATE_N, of which
 * those in the newest RATE_WINDOW seconds count. */
#define RATE_N		32
#define RATE_WINDOW	60.0
/* How long watch tries to reach a daemon that went away (once a second),
 * and how often it asks the daemon why the open jobs wait. */
#define RECONNECT_S	120
#define WAIT_POLL_S	2
/* How long the terminal view says that the daemon is back. */
#define BACK_SHOWN_S	10

struct wjob {
	char name[128];
	char stage[32];
	char variant[96];       /* a sweep's job's values, or "" */
	char origin[128];	/* the spec's job a sweep's job copies, or "" */
	char state[16];
	double done, total;
	char unit[48];
	int attempt;
	char msg[160];
	char note[160];		/* a stage's figures (corpus_check's counts) */
	double t0;		/* when it began running (feed time), or 0 */
	double t1;		/* when it succeeded (feed time), or 0 */
	double loss;		/* the newest loss metric, if has_loss */
	int has_loss;
	double speedup;		/* the newest prefix_speedup metric, or 0 */
	double hist;		/* median seconds in earlier runs, or -1 */
	double rts[RATE_N], rdone[RATE_N];
	int rn, rpos;
	cJSON *wait;		/* why it waits (status's "wait"), or NULL */
};

struct watch {
	char run[128];		/* the revision watched, as the daemon names it */
	char ref[136];		/* a ref that stays on it (run@1 for the first) */
	struct wjob *jobs;
	int njobs;
	int tty;
	int drawn;
	int nhist;		/* earlier runs the durations came from */
	double now;		/* the newest event's time, the clock's while live */
	char run_state[16];
	char run_msg[256];
	/* The daemon: gone since (0: reachable) and why, tried until; back
	 * since, after how long gone. */
	double gone, give_up, back, gone_for;
	char gone_why[160];
};

static struct wjob *
wjob_find(struct watch *w, const char *name)
{
	for (int i = 0; i < w->njobs; i++)
		if (strcmp(w->jobs[i].name, name) == 0)
			return &w->jobs[i];
	w->jobs = xrealloc(w->jobs, (size_t)w->njobs + 1, sizeof(*w->jobs));
	struct wjob *j = &w->jobs[w->njobs++];
	memset(j, 0, sizeof(*j));
	snprintf(j->name, sizeof(j->name), "%s", name);
	snprintf(j->state, sizeof(j->state), "%s", pl_job_state_name(PLJ_pending));
	j->hist = -1;
	return j;
}

/* Final (proto.h's lists say which states are): nothing more happens to
 * the run or job. A word of neither list is not final. */
static int
run_final(const char *s)
{
	return pl_run_state_final(pl_run_state_find(s));
}

/* The exit status a run's state gives watch and status: 0 succeeded (or
 * still running, for status), CTL_FAILED, CTL_CANCELLED, CTL_REJECTED
 * (every job worked and the gate said no). */
static int
run_exit(const char *s)
{
	int st = pl_run_state_find(s);
	return st == PLR_rejected ? CTL_REJECTED : st == PLR_failed ? CTL_FAILED :
	    st == PLR_cancelled ? CTL_CANCELLED : CTL_OK;
}

static int
job_final(const char *s)
{
	return pl_job_state_final(pl_job_state_find(s));
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The median of n (> 0) durations, sorted in place. */
static double
median(double *d, int n)
{
	qsort(d, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2;
}

/*
 * Durations from history: for each job of the run, the median seconds a
 * job of the same name and stage took in the newest (at most five)
 * earlier runs in which it succeeded; for a sweep's job that none did,
 * those of the job it copies (train for train-r64). These estimate the
 * jobs still to come; a job without history has hist -1.
 */
static void
watch_history(struct watch *w, const char *run)
{
	cJSON *runs = NULL;
	double *d[64], *od[64];
	int nd[64], no[64];
	int nj = w->njobs < 64 ? w->njobs : 64;

	for (int i = 0; i < w->njobs; i++)
		w->jobs[i].hist = -1;
	if (request(PLV_status, NULL, &runs, Q_DATA | Q_ERR) == -1)
		return;
	memset(nd, 0, sizeof(nd));
	memset(no, 0, sizeof(no));
	for (int i = 0; i < nj; i++) {
		d[i] = calloc(5, sizeof(double));
		od[i] = calloc(5, sizeof(double));
	}
	const cJSON *r;
	cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(runs, "runs")) {
		if (w->nhist >= 5)
			break;
		if (strcmp(jstr(r, "name"), run) == 0)
			continue;
		cJSON *a = cJSON_CreateObject(), *st = NULL;
		cJSON_AddStringToObject(a, "run", jstr(r, "name"));
		if (request(PLV_status, a, &st, Q_DATA | Q_ERR) == -1)
			continue;
		int used = 0;
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(st, "jobs")) {
			double secs = jnum(x, "finished") - jnum(x, "started");
			if (pl_job_state_find(jstr(x, "state")) != PLJ_succeeded || jnum(x, "started") <= 0 ||
			    secs < 0)
				continue;
			for (int i = 0; i < nj; i++) {
				if (strcmp(w->jobs[i].stage, jstr(x, "stage")) != 0)
					continue;
				if (nd[i] < 5 && strcmp(w->jobs[i].name, jstr(x, "name")) == 0) {
					d[i][nd[i]++] = secs;
					used = 1;
				} else if (no[i] < 5 && *w->jobs[i].origin &&
				    strcmp(w->jobs[i].origin, jstr(x, "name")) == 0) {
					od[i][no[i]++] = secs;
					used = 1;
				}
			}
		}
		cJSON_Delete(st);
		w->nhist += used;
	}
	cJSON_Delete(runs);
	for (int i = 0; i < nj; i++) {
		if (nd[i] > 0 && d[i] != NULL)
			w->jobs[i].hist = median(d[i], nd[i]);
		else if (no[i] > 0 && od[i] != NULL)
			w->jobs[i].hist = median(od[i], no[i]);
		free(d[i]);
		free(od[i]);
	}
}

/* A progress sample; a step going back (a relaunch resumed from an older
 * checkpoint) starts the rate afresh. */
static void
rate_add(struct wjob *j, double ts, double done)
{
	int last = (j->rpos + RATE_N - 1) % RATE_N;
	if (j->rn > 0 && done < j->rdone[last])
		j->rn = 0;
	j->rts[j->rpos] = ts;
	j->rdone[j->rpos] = done;
	j->rpos = (j->rpos + 1) % RATE_N;
	if (j->rn < RATE_N)
		j->rn++;
}

/* Units per second over the newest RATE_WINDOW seconds, or -1. */
static double
rate_get(const struct wjob *j)
{
	if (j->rn < 2)
		return -1;
	int newest = (j->rpos + RATE_N - 1) % RATE_N, oldest = newest;
	for (int k = 1; k < j->rn; k++) {
		int i = (newest + RATE_N - k) % RATE_N;
		if (j->rts[newest] - j->rts[i] > RATE_WINDOW)
			break;
		oldest = i;
	}
	double dt = j->rts[newest] - j->rts[oldest];
	double dd = j->rdone[newest] - j->rdone[oldest];
	return dt > 0 && dd > 0 ? dd / dt : -1;
}

/* Whether every holder a wait names is a job of the watched run (a
 * sweep's next training waits for the gpu its previous one holds, or
 * keeps for its bake). */
static int
held_by_own(const struct watch *w, const cJSON *wait)
{
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(wait, "held_by"), *x;
	size_t n = strlen(w->run);
	int seen = 0;
	if (n == 0 || !cJSON_IsArray(h))
		return 0;
	cJSON_ArrayForEach(x, h) {
		if (!cJSON_IsString(x) || strncmp(x->valuestring, w->run, n) != 0 ||
		    x->valuestring[n] != '/')
			return 0;
		seen++;
	}
	/* What a sweep keeps for an earlier variant's job is its own run's
	 * too, held by nobody while that job waits for its after. */
	return (seen > 0 || *jstr(wait, "kept_for") != '\0') && seen == (int)jnum(wait, "holders");
}

/* Whether an open job waits for what another run's jobs hold (a
 * resource, a job slot): nothing says how long, so neither its time left
 * nor its run's is known while it waits. What its own run's jobs hold
 * they give back as the run goes on, which its time left counts. */
static int
job_blocked(const struct watch *w, const struct wjob *j)
{
	const char *why = jstr(j->wait, "reason");
	if (job_final(j->state) || pl_job_state_find(j->state) == PLJ_running)
		return 0;
	if (strcmp(why, "resource") == 0 || strcmp(why, "slots") == 0)
		return !held_by_own(w, j->wait);
	return strcmp(why, "stopping") == 0;
}

/* A sweep's job without history: the median of its variants' of this
 * run that succeeded (the same job of the spec, another value), or -1. */
static double
sibling_secs(const struct watch *w, const struct wjob *j)
{
	double d[64];
	int n = 0;
	if (*j->origin == '\0')
		return -1;
	for (int i = 0; i < w->njobs && n < 64; i++) {
		const struct wjob *s = &w->jobs[i];
		if (s != j && strcmp(s->origin, j->origin) == 0 && s->t0 > 0 && s->t1 >= s->t0)
			d[n++] = s->t1 - s->t0;
	}
	return n > 0 ? median(d, n) : -1;
}

/* Seconds left of a job: from its rate while it reports progress, else
 * from its history (its backoff's wait added); -1 when neither says, or
 * while it waits for another run, or once it has run longer than its
 * history. */
static double
job_left(const struct watch *w, const struct wjob *j)
{
	if (job_final(j->state))
		return 0;
	if (job_blocked(w, j))
		return -1;
	int running = pl_job_state_find(j->state) == PLJ_running;
	double r = running ? rate_get(j) : -1;
	if (r > 0 && j->total > 0)
		return (j->total - j->done) / r;
	double hist = j->hist >= 0 ? j->hist : sibling_secs(w, j);
	if (hist < 0)
		return -1;
	if (running && j->t0 > 0) {
		double left = hist - (w->now - j->t0);
		return left > 0 ? left : -1;
	}
	double until = strcmp(jstr(j->wait, "reason"), "backoff") == 0 ? jnum(j->wait, "until") : 0;
	return hist + (until > w->now ? until - w->now : 0);
}

/* The run's time left, assuming its jobs run one after another as the
 * release chain does; *unknown counts the jobs nothing estimates, and
 * *blocked is the first job that waits for another run (or NULL). */
static double
run_left(const struct watch *w, int *unknown, const struct wjob **blocked)
{
	double sum = 0;
	*unknown = 0;
	*blocked = NULL;
	for (int i = 0; i < w->njobs; i++) {
		const struct wjob *j = &w->jobs[i];
		if (*blocked == NULL && job_blocked(w, j))
			*blocked = j;
		double l = job_left(w, j);
		if (l < 0)
			(*unknown)++;
		else
			sum += l;
	}
	return sum;
}

/* The widest a duration (fmt_secs) and a rate (%.3g) are printed: a line
 * is laid out for these, so that it does not move as the figures do. */
#define SECS_W	6
#define RATE_W	6

/*
 * A job's words, at a level of detail from 0 (all) to 5 (its time left
 * alone): "120/400 step, loss 1.234, 2.1 step/s, 2m13s left" at 0, then
 * without the prefix's speed-up and the rate's unit, without the count's
 * unit, without the rate, without the loss, and at 5 "2m13s left" (a job
 * not running keeps its count). A job that waits says why instead, less
 * as the level grows. *width is the length laid out for: the words' with
 * the time left and the rate counted at their widest.
 */
static void
job_words(const struct watch *w, const struct wjob *j, int level, char *buf, size_t sz,
    int *width)
{
	char left[32] = "", rate[32] = "", loss[48] = "", unit[64] = "";
	buf[0] = '\0';
	*width = 0;
	if (j->total <= 0) {
		if (j->wait != NULL && !job_final(j->state))
			wait_words(j->wait, level > 3 ? 3 : level, w->now, buf, sz);
		*width = u8_len(buf, strlen(buf));
		return;
	}
	double r = rate_get(j);
	int eta = r > 0 && pl_job_state_find(j->state) == PLJ_running;
	if (eta) {
		fmt_secs(left, sizeof(left), job_left(w, j));
		snprintf(rate, sizeof(rate), "%.3g", r);
	}
	if (j->has_loss)
		snprintf(loss, sizeof(loss), "loss %.4g", j->loss);
	if (level <= 1)
		snprintf(unit, sizeof(unit), " %s", j->unit);
	size_t n = 0;
	if (level < 5 || !eta)
		n += (size_t)snprintf(buf + n, sz - n, "%.0f/%.0f%s", j->done, j->total, unit);
	if (*loss && level < 4 && n < sz)
		n += (size_t)snprintf(buf + n, sz - n, ", %s", loss);
	if (j->speedup > 0 && level == 0 && n < sz)
		n += (size_t)snprintf(buf + n, sz - n, ", shared prefix %.2fx", j->speedup);
	if (eta && level < 3 && n < sz)
		n += (size_t)snprintf(buf + n, sz - n, ", %s %s/s", rate, level == 0 ? j->unit : "");
	if (eta && n < sz)
		snprintf(buf + n, sz - n, "%s%s left", n ? ", " : "", left);
	/* "%s %s/s" with no unit leaves "2.1 /s": close it up. */
	char *sp = strstr(buf, " /s");
	if (sp != NULL)
		memmove(sp, sp + 1, strlen(sp));
	*width = u8_len(buf, strlen(buf));
	if (eta)
		*width += SECS_W - (int)strlen(left) + (level < 3 ? RATE_W - (int)strlen(rate) : 0);
}

/*
 * The run's words while it runs, at a level of detail from 0 to 2: its
 * time left and expected end, "at least" with how many jobs nothing
 * estimates (0), without them (1), without the end (2); or that the time
 * left is unknown, and why: the job that waits for another run and what
 * for. *width as for job_words().
 */
static void
run_words(const struct watch *w, int level, char *buf, size_t sz, int *width)
{
	int unknown;
	const struct wjob *b;
	double left = run_left(w, &unknown, &b);
	char l[32], end[16], why[512];
	buf[0] = '\0';
	*width = 0;
	if (run_final(w->run_state))
		return;
	if (b != NULL || (left <= 0 && unknown > 0)) {
		why[0] = '\0';
		if (b != NULL && level < 2)
			wait_words(b->wait, level == 0 ? 2 : 3, w->now, why, sizeof(why));
		snprintf(buf, sz, "time left unknown%s%s%s%s", *why ? " while " : "",
		    *why ? b->name : "", *why ? " " : "", why);
		*width = u8_len(buf, strlen(buf));
		return;
	}
	fmt_secs(l, sizeof(l), left);
	time_t t = (time_t)(w->now + left);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(end, sizeof(end), "%H:%M", &tm);
	char more[96] = "";
	if (unknown && level == 0)
		snprintf(more, sizeof(more), " (%d job%s without an estimate)", unknown,
		    unknown == 1 ? "" : "s");
	snprintf(buf, sz, "%s%s left%s%s%s", unknown ? "at least " : "", l,
	    level < 2 ? ", ends about " : "", level < 2 ? end : "", more);
	*width = u8_len(buf, strlen(buf)) + SECS_W - (int)strlen(l);
}

/* --json: the estimates as a line of their own after a progress event. */
static void
eta_json(const struct watch *w, const struct wjob *j)
{
	int unknown;
	const struct wjob *b;
	double left = run_left(w, &unknown, &b);
	double r = rate_get(j);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", "watch.eta");
	cJSON_AddStringToObject(o, "job", j->name);
	cJSON_AddNumberToObject(o, "ts", w->now);
	cJSON_AddNumberToObject(o, "done", j->done);
	cJSON_AddNumberToObject(o, "total", j->total);
	cJSON_AddStringToObject(o, "unit", j->unit);
	if (j->has_loss)
		cJSON_AddNumberToObject(o, "loss", j->loss);
	if (j->speedup > 0)
		cJSON_AddNumberToObject(o, "prefix_speedup", j->speedup);
	if (r > 0) {
		cJSON_AddNumberToObject(o, "per_second", r);
		cJSON_AddNumberToObject(o, "eta_s", job_left(w, j));
	}
	cJSON_AddNumberToObject(o, "run_left_s", left);
	cJSON_AddNumberToObject(o, "run_end", w->now + left);
	cJSON_AddNumberToObject(o, "run_unknown_jobs", unknown);
	if (b != NULL)
		cJSON_AddStringToObject(o, "run_waiting_job", b->name);
	cJSON_AddNumberToObject(o, "history_runs", w->nhist);
	print_json(o);
	cJSON_Delete(o);
}

/* One line of the live view, cut to the terminal's cols - 1 characters
 * so that it never wraps (a wrapped line would break the redraw's count
 * of lines to go up); the state word, the first after byte skip, coloured. */
static void
draw_line(int cols, const char *state, size_t skip, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	size_t n = u8_bytes(line, cols - 1);
	line[n] = '\0';
	const char *col = state ? state_color(state) : "";
	char *at = *col && skip < n ? strstr(line + skip, state) : NULL;
	if (at == NULL) {
		printf("\033[2K%s\n", line);
		return;
	}
	size_t sl = strlen(state), pre = (size_t)(at - line);
	printf("\033[2K%.*s%s%s%s%s\n", (int)pre, line, col, state, color_end(col), at + sl);
}

/* The failed jobs' messages and the command that shows their logs. */
static int
failed_lines(const struct watch *w, const char *run, int cols, int tty)
{
	int n = 0;
	for (int i = 0; i < w->njobs; i++) {
		const struct wjob *j = &w->jobs[i];
		if (pl_job_state_find(j->state) != PLJ_failed)
			continue;
		if (tty) {
			draw_line(cols, NULL, 0, "  %s: %s", j->name, *j->msg ? j->msg : "failed");
			draw_line(cols, NULL, 0, "    pipelinectl logs %s %s", run, j->name);
		} else {
			printf("  %s: %s\n    pipelinectl logs %s %s\n", j->name,
			    *j->msg ? j->msg : "failed", run, j->name);
		}
		n += 2;
	}
	return n;
}

/* The daemon's line of the live view: gone, and until when watch tries;
 * or back. Returns the lines drawn. */
static int
daemon_line(const struct watch *w, int cols)
{
	char t[16], left[32], since[32];
	struct tm tm;
	if (w->gone > 0) {
		time_t g = (time_t)w->give_up;
		localtime_r(&g, &tm);
		strftime(t, sizeof(t), "%H:%M:%S", &tm);
		fmt_secs(left, sizeof(left), w->give_up > w->now ? w->give_up - w->now : 0);
		/* The reason last: what a narrow terminal cuts. */
		draw_line(cols, NULL, 0, "pipelined is gone; reconnecting until %s, %s left (%s)", t,
		    left, w->gone_why);
		return 1;
	}
	if (w->back > 0 && w->now - w->back < BACK_SHOWN_S && !run_final(w->run_state)) {
		fmt_secs(since, sizeof(since), w->gone_for);
		draw_line(cols, NULL, 0, "pipelined is back after %s; following the run again", since);
		return 1;
	}
	return 0;
}

static void
watch_draw(struct watch *w, const char *run)
{
	struct winsize ws;
	int cols = ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20 ? ws.ws_col : 80;
	if (w->drawn)
		printf("\033[%dA", w->drawn);
	int namew = 0;
	for (int i = 0; i < w->njobs; i++) {
		int l = u8_len(w->jobs[i].name, strlen(w->jobs[i].name));
		if (l > namew)
			namew = l;
	}
	if (namew > 32)
		namew = 32;
	/*
	 * "NAME STATE [BAR] WORDS": the words at their fullest that fit
	 * beside a bar of at least 10 (the time left stays longest), the bar
	 * as wide as the widest words leave room for, 10 to 40.
	 */
	int room = cols - 1 - (namew + 1 + 10 + 1) - 3, widest = 0, wd;
	char words[512];
	for (int i = 0; i < w->njobs; i++) {
		int level = 0;
		do
			job_words(w, &w->jobs[i], level, words, sizeof(words), &wd);
		while (wd > room - 10 && ++level <= 5);
		if (wd > widest)
			widest = wd;
	}
	int barw = room - (widest ? widest + 1 : 0);
	barw = barw > 40 ? 40 : barw < 10 ? 10 : barw;
	int lines = 0;
	for (int i = 0; i < w->njobs; i++) {
		struct wjob *j = &w->jobs[i];
		char bar[64];
		double frac = j->total > 0 ? j->done / j->total : 0;
		if (pl_job_state_find(j->state) == PLJ_succeeded)
			frac = 1;
		if (frac > 1)
			frac = 1;
		int fill = (int)(frac * barw);
		for (int k = 0; k < barw; k++)
			bar[k] = k < fill ? '#' : (k == fill && pl_job_state_find(j->state) == PLJ_running ? '>' : '.');
		bar[barw] = '\0';
		int level = 0;
		do
			job_words(w, j, level, words, sizeof(words), &wd);
		while (wd > room - barw - 1 && ++level <= 5);
		char name[128];
		size_t nb = u8_bytes(j->name, namew);
		snprintf(name, sizeof(name), "%.*s", (int)nb, j->name);
		int pad = namew - u8_len(name, strlen(name));
		draw_line(cols, j->state, strlen(name) + (size_t)pad, "%s%*s %-10s [%s] %s%s%s%s%s",
		    name, pad, "", j->state, bar, *j->variant ? j->variant : "", *j->variant &&
		    *words ? "; " : "", words, *words && *j->note ? "; " : "", j->note);
		lines++;
	}
	/* The run's line: its time left stays longest. */
	char rw[512];
	int level = 0, head = (int)strlen(run) + 6 + (int)strlen(w->run_state) + 2;
	do
		run_words(w, level, rw, sizeof(rw), &wd);
	while (head + wd > cols - 1 && ++level <= 2);
	draw_line(cols, w->run_state, strlen(run) + 5, "run %s: %s%s%s%s%s", run, w->run_state,
	    *rw ? ", " : "", rw, *w->run_msg ? ": " : "", w->run_msg);
	lines++;
	lines += daemon_line(w, cols);
	if (run_final(w->run_state))
		lines += failed_lines(w, run, cols, 1);
	/* Lines of an earlier, taller draw are cleared. */
	int extra = w->drawn - lines;
	for (int k = 0; k < extra; k++)
		printf("\033[2K\n");
	if (extra > 0)
		printf("\033[%dA", extra);
	w->drawn = lines;
	fflush(stdout);
}

/* A corpus_check event in words: "corpus: warn, 36 examples; guards 1". */
static void
corpus_words(const cJSON *ev, char *buf, size_t len)
{
	const cJSON *c;
	size_t o = (size_t)snprintf(buf, len, "corpus: %s, %.0f examples", jstr(ev, "result"),
	    jnum(ev, "examples"));
	int first = 1;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(ev, "counts")) {
		if (o >= len)
			break;
		o += (size_t)snprintf(buf + o, len - o, "%s%s %.0f", first ? "; " : ", ",
		    c->string, c->valuedouble);
		first = 0;
	}
}

/* "HH:MM:SS" of a time, for the plain lines. */
static void
fmt_clock(double t, char *buf, size_t sz)
{
	time_t s = (time_t)t;
	struct tm tm;
	localtime_r(&s, &tm);
	strftime(buf, sz, "%H:%M:%S", &tm);
}

/*
 * Why the open jobs wait, from the daemon (status's "wait"): kept with
 * each job for the view and the estimates; with --plain a line and with
 * --json a "watch.wait" object when a job's reason changes (waiting for
 * a job of its own run is the DAG's, and not said). 0, or -1 when the
 * daemon is gone.
 */
static int
watch_waits(struct watch *w, const char *run)
{
	cJSON *r = NULL, *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "run", run);
	if (request(PLV_status, a, &r, Q_DATA | Q_ERR | Q_SOFT) == -1)
		return ctl_conn.fd == -1 ? -1 : 0;
	const cJSON *x;
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "jobs")) {
		struct wjob *j = wjob_find(w, jstr(x, "name"));
		const cJSON *wt = cJSON_GetObjectItemCaseSensitive(x, "wait");
		char was[512] = "", now[512] = "";
		wait_words(j->wait, 0, w->now, was, sizeof(was));
		wait_words(wt, 0, w->now, now, sizeof(now));
		int same = strcmp(jstr(j->wait, "reason"), jstr(wt, "reason")) == 0 &&
		    (strcmp(jstr(wt, "reason"), "backoff") == 0 || strcmp(was, now) == 0);
		cJSON_Delete(j->wait);
		j->wait = wt ? cJSON_Duplicate(wt, 1) : NULL;
		if (same || wt == NULL || strcmp(jstr(wt, "reason"), "after") == 0)
			continue;
		if (ctl_json) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "type", "watch.wait");
			cJSON_AddStringToObject(o, "job", j->name);
			cJSON_AddNumberToObject(o, "ts", now_wall());
			cJSON_AddItemToObject(o, "wait", cJSON_Duplicate(wt, 1));
			print_json(o);
			cJSON_Delete(o);
		} else if (!w->tty) {
			char ts[16];
			fmt_clock(now_wall(), ts, sizeof(ts));
			printf("%s %s %s\n", ts, j->name, now);
		}
	}
	cJSON_Delete(r);
	fflush(stdout);
	return 0;
}

/* A final run.state event (id) ends the watch unless a later state
 * superseded it (a retry): the run's newest run.state event says. */
static int
state_superseded(const char *run, int64_t id)
{
	cJSON *a = cJSON_CreateObject(), *r = NULL;
	cJSON_AddStringToObject(a, "run", run);
	if (request(PLV_status, a, &r, Q_DATA | Q_ERR | Q_SOFT) == -1)
		return 0;
	int later = jnum(cJSON_GetObjectItemCaseSensitive(r, "run"), "state_event") > (double)id;
	cJSON_Delete(r);
	return later;
}

/* The daemon went away (gone: when, why) or came back: said at once, in
 * the live view (watch_draw), a plain line or a "watch.daemon" object. */
static void
daemon_news(struct watch *w, const char *run, int64_t last_id)
{
	char ts[16], until[16], span[32];
	fmt_clock(w->now, ts, sizeof(ts));
	if (ctl_json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "type", "watch.daemon");
		cJSON_AddStringToObject(o, "state", w->gone > 0 ? "gone" : "back");
		cJSON_AddNumberToObject(o, "ts", w->now);
		if (w->gone > 0) {
			cJSON_AddStringToObject(o, "why", w->gone_why);
			cJSON_AddNumberToObject(o, "retry_until", w->give_up);
			cJSON_AddNumberToObject(o, "retry_s", RECONNECT_S);
		} else {
			cJSON_AddNumberToObject(o, "gone_s", w->gone_for);
			cJSON_AddNumberToObject(o, "since", (double)last_id);
		}
		print_json(o);
	} else if (!w->tty && w->gone > 0) {
		fmt_clock(w->give_up, until, sizeof(until));
		fmt_secs(span, sizeof(span), RECONNECT_S);
		printf("%s pipelined is gone (%s); reconnecting every second until %s (%s)\n", ts,
		    w->gone_why, until, span);
	} else if (!w->tty) {
		fmt_secs(span, sizeof(span), w->gone_for);
		printf("%s pipelined is back after %s; following run %s again after event %lld\n", ts,
		    span, run, (long long)last_id);
	}
	fflush(stdout);
}

/* Open the feed and ask for the run's events after since: the
 * connection, or -1 with why (the daemon is not there). */
static int
feed_open(const char *run, int64_t since, char *why, size_t sz)
{
	int fd = sock_connect_soft(feed_path);
	if (fd == -1) {
		snprintf(why, sz, "%s", errno == ENOENT ? "no feed socket" :
		    errno == ECONNREFUSED ? "connection refused" : strerror(errno));
		return -1;
	}
	struct conn c = { .fd = fd, .path = feed_path };
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "verb", pl_verb_name(PLV_watch));
	cJSON_AddNumberToObject(req, "version", PL_PROTO_VERSION);
	cJSON_AddNumberToObject(req, "since", (double)since);
	cJSON_AddStringToObject(req, "run", run);
	int rc = conn_send_soft(&c, req);
	cJSON_Delete(req);
	if (rc == -1) {
		snprintf(why, sz, "%s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* One line of the feed: the watch's state, and a plain line or the line
 * itself. 1 when the run has ended (a final state no retry superseded). */
static int
watch_event(struct watch *w, char *line, int64_t *last_id, int *dropped)
{
	const char *run = w->run;
	cJSON *ev = cJSON_Parse(line);
	if (ev == NULL)
		return 0;
	defang_json(ev, 0);
	if (cJSON_GetObjectItemCaseSensitive(ev, "status") != NULL) {
		/* An error from the feed (unknown run, bad request). */
		const char *e = jstr(ev, "error");
		if (*e)
			ctl_fail(code_exit(jstr(ev, "code")), *jstr(ev, "code") ? jstr(ev, "code") :
			    "EINTERNAL", "%s", e);
		cJSON_Delete(ev);
		return 0;
	}
	int64_t id = (int64_t)jnum(ev, "id");
	if (id > *last_id)
		*last_id = id;
	const char *type = jstr(ev, "type"), *job = jstr(ev, "job");
	if (strcmp(type, "feed.dropped") == 0)
		*dropped = 1;
	if (ctl_json) {
		printf("%s\n", line);
		fflush(stdout);
	}
	if (jnum(ev, "ts") > w->now)
		w->now = jnum(ev, "ts");
	if (strcmp(type, "job.state") == 0) {
		struct wjob *j = wjob_find(w, job);
		snprintf(j->state, sizeof(j->state), "%s", jstr(ev, "state"));
		snprintf(j->msg, sizeof(j->msg), "%s", jstr(ev, "message"));
		j->attempt = (int)jnum(ev, "attempt");
		if (pl_job_state_find(j->state) == PLJ_succeeded)
			j->t1 = jnum(ev, "ts");
		if (pl_job_state_find(j->state) == PLJ_running) {
			if (j->t0 == 0)
				j->t0 = jnum(ev, "ts");
			cJSON_Delete(j->wait); /* it waits no more */
			j->wait = NULL;
		}
	} else if (strcmp(type, "job.progress") == 0) {
		struct wjob *j = wjob_find(w, job);
		j->done = jnum(ev, "done");
		j->total = jnum(ev, "total");
		snprintf(j->unit, sizeof(j->unit), "%s", jstr(ev, "unit"));
		rate_add(j, jnum(ev, "ts"), j->done);
		if (ctl_json)
			eta_json(w, j);
	} else if (strcmp(type, "job.corpus_check") == 0) {
		struct wjob *j = wjob_find(w, job);
		corpus_words(ev, j->note, sizeof(j->note));
	} else if (strcmp(type, "job.metric") == 0 && strcmp(jstr(ev, "name"), "loss") == 0) {
		struct wjob *j = wjob_find(w, job);
		j->loss = jnum(ev, "value");
		j->has_loss = 1;
	} else if (strcmp(type, "job.metric") == 0 &&
	    strcmp(jstr(ev, "name"), "prefix_speedup") == 0) {
		wjob_find(w, job)->speedup = jnum(ev, "value");
	} else if (strcmp(type, "run.state") == 0) {
		snprintf(w->run_state, sizeof(w->run_state), "%s", jstr(ev, "state"));
		snprintf(w->run_msg, sizeof(w->run_msg), "%s", jstr(ev, "message"));
	}
	if (!ctl_json && !w->tty) {
		/* Plain lines: states, progress at whole steps, the rest. */
		char ts[16];
		fmt_clock(jnum(ev, "ts"), ts, sizeof(ts));
		if (strcmp(type, "job.state") == 0)
			printf("%s %s %s%s%s\n", ts, job, jstr(ev, "state"),
			    *jstr(ev, "message") ? ": " : "", jstr(ev, "message"));
		else if (strcmp(type, "job.progress") == 0) {
			char words[512], rw[512];
			int wd;
			job_words(w, wjob_find(w, job), 0, words, sizeof(words), &wd);
			run_words(w, 0, rw, sizeof(rw), &wd);
			printf("%s %s progress %s%s%s\n", ts, job, words, *rw ? "; run " : "", rw);
		} else if (strcmp(type, "run.state") == 0)
			printf("%s run %s %s%s%s\n", ts, run, jstr(ev, "state"),
			    *jstr(ev, "message") ? ": " : "", jstr(ev, "message"));
		else if (strcmp(type, "job.artifact") == 0)
			printf("%s %s artifact %s %s %s\n", ts, job, jstr(ev, "name"),
			    jstr(ev, "sha256"), jstr(ev, "path"));
		else if (strcmp(type, "job.error") == 0)
			printf("%s %s error: %s\n", ts, job, jstr(ev, "message"));
		else if (strcmp(type, "job.verdict") == 0 || strcmp(type, "job.verify") == 0)
			printf("%s %s %s\n", ts, job, line);
		else if (strcmp(type, "job.corpus_check") == 0) {
			char words[160];
			corpus_words(ev, words, sizeof(words));
			printf("%s %s %s\n", ts, job, words);
		}
		fflush(stdout);
	}
	/* An ended state a later retry superseded (replayed from before
	 * the retry) is not the end. */
	int done = strcmp(type, "run.state") == 0 && run_final(w->run_state) &&
	    !state_superseded(w->ref, id);
	cJSON_Delete(ev);
	return done;
}

/* The ref of a run's stored name that stays on its revision: "r" is
 * r@1 (a bare name is the newest revision). */
static void
pin_ref(const char *name, char *buf, size_t sz)
{
	snprintf(buf, sz, strchr(name, '@') != NULL ? "%s" : "%s@1", name);
}

/* One revision of a run, ref its name (or a bare name: the newest), from
 * its job list to its end: the exit status its state gives. */
static int
watch_revision(struct watch *w, const char *ref)
{
	/* The job list first (this also says whether the run exists). */
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "run", ref);
	cJSON *r = NULL;
	request(PLV_status, a, &r, Q_DATA);
	const cJSON *x;
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "jobs")) {
		struct wjob *j = wjob_find(w, jstr(x, "name"));
		snprintf(j->stage, sizeof(j->stage), "%s", jstr(x, "stage"));
		snprintf(j->variant, sizeof(j->variant), "%s", jstr(x, "variant"));
		snprintf(j->origin, sizeof(j->origin), "%s", jstr(x, "origin"));
	}
	snprintf(w->run, sizeof(w->run), "%s", jstr(cJSON_GetObjectItemCaseSensitive(r, "run"), "name"));
	pin_ref(w->run, w->ref, sizeof(w->ref));
	cJSON_Delete(r);
	snprintf(w->run_state, sizeof(w->run_state), "%s", pl_run_state_name(PLR_running));
	watch_history(w, w->run);

	char why[160];
	int64_t last_id = 0;
	struct conn fc = { .fd = feed_open(w->ref, 0, why, sizeof(why)), .path = feed_path };
	if (fc.fd == -1)
		close(sock_connect(feed_path)); /* says why and exits 5, or is back */
	int replayed = 0, dropped = 0, done = 0;
	double next_poll = 0;
	while (!done) {
		char *line;
		while (!done && fc.fd != -1 && (line = conn_take(&fc)) != NULL) {
			done = watch_event(w, line, &last_id, &dropped);
			free(line);
			if (w->tty && !done)
				watch_draw(w, w->run);
		}
		if (done)
			break;
		double t = now_wall();
		if (fc.fd == -1) {
			/* The feed closed: a watcher dropped for reading slowly
			 * reconnects at once; a daemon gone is said at once, and
			 * tried for every second until RECONNECT_S have passed. */
			fc.fd = feed_open(w->ref, last_id, why, sizeof(why));
			fc.len = 0;
			if (fc.fd != -1) {
				dropped = 0;
				if (w->gone > 0) {
					w->now = t > w->now ? t : w->now;
					w->back = w->now;
					w->gone_for = t - w->gone;
					w->gone = 0;
					daemon_news(w, w->run, last_id);
					next_poll = 0;
				}
				continue;
			}
			if (w->gone == 0) {
				w->gone = t;
				w->give_up = t + RECONNECT_S;
				snprintf(w->gone_why, sizeof(w->gone_why), "%s", why);
				w->now = t > w->now ? t : w->now;
				daemon_news(w, w->run, last_id);
				ctl_conn_reset();
			}
			if (t >= w->give_up) {
				char since[16], span[32];
				fmt_clock(w->gone, since, sizeof(since));
				fmt_secs(span, sizeof(span), RECONNECT_S);
				if (w->tty)
					watch_draw(w, w->run);
				ctl_fail(CTL_ENODAEMON, "ENODAEMON", "pipelined did not come back within %s "
				    "(gone since %s: %s)", span, since, w->gone_why);
			}
		}
		/* Why the open jobs wait: once the stored events are read (the
		 * feed is quiet), then every WAIT_POLL_S while the run runs and
		 * the daemon is up. */
		if (replayed && fc.fd != -1 && t >= next_poll && !run_final(w->run_state)) {
			int open = 0;
			for (int i = 0; i < w->njobs; i++)
				open |= !job_final(w->jobs[i].state) &&
				    pl_job_state_find(w->jobs[i].state) != PLJ_running;
			if (open && watch_waits(w, w->ref) == 0 && w->tty)
				watch_draw(w, w->run);
			next_poll = t + WAIT_POLL_S;
		}
		struct pollfd pfd = { .fd = fc.fd, .events = POLLIN };
		int n = poll(&pfd, fc.fd != -1 ? 1 : 0, 1000);
		if (n == -1 && errno != EINTR)
			ctl_fail(CTL_ERROR, "ELOCAL", "poll: %s", strerror(errno));
		if (n > 0 && conn_fill(&fc) <= 0) {
			close(fc.fd);
			fc.fd = -1;
			continue;
		}
		if (n == 0) {
			/* Quiet: the estimates and countdowns go by the clock. */
			t = now_wall();
			if (t > w->now)
				w->now = t;
			if (!replayed)
				next_poll = 0;
			replayed = 1;
			if (w->tty)
				watch_draw(w, w->run);
		}
	}
	if (fc.fd != -1)
		close(fc.fd);
	free(fc.buf);
	if (w->tty)
		watch_draw(w, w->run);
	else if (!ctl_json)
		failed_lines(w, w->run, 0, 0);
	return run_exit(w->run_state);
}


/* The name of the run's revision after the one w watched, once one is
 * submitted: asked every second, through the daemon's absences. */
static void
next_revision(const struct watch *w, const char *run, char *next, size_t sz)
{
	for (;;) {
		cJSON *a = cJSON_CreateObject(), *r = NULL;
		cJSON_AddStringToObject(a, "run", run);
		if (request(PLV_status, a, &r, Q_DATA | Q_ERR | Q_SOFT) == 0) {
			const char *n = jstr(cJSON_GetObjectItemCaseSensitive(r, "run"), "name");
			int newer = *n && strcmp(n, w->run) != 0;
			if (newer)
				snprintf(next, sz, "%s", n);
			cJSON_Delete(r);
			if (newer)
				return;
		} else
			ctl_conn_reset();
		sleep(1);
	}
}

static void
watch_reset(struct watch *w)
{
	for (int i = 0; i < w->njobs; i++)
		cJSON_Delete(w->jobs[i].wait);
	free(w->jobs);
	int tty = w->tty;
	memset(w, 0, sizeof(*w));
	w->tty = tty;
}

static int
cmd_watch(int argc, char **argv)
{
	const struct cmd *c = cmd_find("watch");
	int plain = opt_val(c, "--plain") != NULL, follow = opt_val(c, "--follow") != NULL;
	const char *run = A.pos[0];
	if (follow && strchr(run, '@') != NULL)
		ctl_fail(CTL_EUSAGE, "EUSAGE", "--follow follows a run's newest revisions: name the "
		    "run without @N");
	struct watch w = { .tty = !plain && !ctl_json && isatty(1) };
	int rc = watch_revision(&w, run);
	/* --follow: on to each revision a resubmit makes, until killed. */
	while (follow) {
		char next[128];
		next_revision(&w, run, next, sizeof(next));
		watch_reset(&w);
		const char *at = strchr(next, '@');
		int rev = at != NULL ? atoi(at + 1) : 1;
		if (ctl_json) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "type", "watch.revision");
			cJSON_AddStringToObject(o, "run", next);
			cJSON_AddNumberToObject(o, "revision", rev);
			cJSON_AddNumberToObject(o, "ts", now_wall());
			print_json(o);
			cJSON_Delete(o);
		} else {
			char ts[16];
			fmt_clock(now_wall(), ts, sizeof(ts));
			printf("%s following run %s (revision %d)\n", ts, next, rev);
		}
		fflush(stdout);
		rc = watch_revision(&w, next);
	}
	watch_reset(&w);
	return rc;
}

/* ---- stage: one stage by hand, in-process --------------------------- */

static void
stage_help(const struct stage_reg *reg)
{
	const struct pl_stage *st = reg->st;
	const struct pl_key *k;
	if (ctl_json) {
		cJSON *o = cJSON_CreateObject(), *a;
		cJSON_AddBoolToObject(o, "ok", 1);
		cJSON_AddStringToObject(o, "verb", ctl_verb);
		cJSON_AddStringToObject(o, "stage", st->name);
		cJSON_AddStringToObject(o, "summary", st->summary ? st->summary : "");
		a = cJSON_AddArrayToObject(o, "keys");
		for (int i = 0; (k = host_key(reg, i)) != NULL; i++) {
			if (k->flags & PL_KEY_HIDDEN)
				continue;
			cJSON *x = cJSON_CreateObject();
			cJSON_AddStringToObject(x, "name", k->name);
			cJSON_AddStringToObject(x, "help", k->help ? k->help : "");
			if (k->def != NULL)
				cJSON_AddStringToObject(x, "default", k->def);
			if (k->choices != NULL)
				cJSON_AddStringToObject(x, "choices", k->choices);
			cJSON_AddBoolToObject(x, "required", (k->flags & PL_KEY_REQUIRED) != 0);
			cJSON_AddBoolToObject(x, "input", k->artifact != NULL);
			cJSON_AddItemToArray(a, x);
		}
		print_json(o);
		cJSON_Delete(o);
		return;
	}
	printf("stage %s: %s\n", st->name, st->summary ? st->summary : "");
	for (int i = 0; (k = host_key(reg, i)) != NULL; i++) {
		if (k->flags & PL_KEY_HIDDEN)
			continue;
		printf("  %-22s %s%s%s%s%s%s%s%s%s\n", k->name, k->help ? k->help : "",
		    k->choices ? " (" : "", k->choices ? k->choices : "", k->choices ? ")" : "",
		    k->def ? " (default: " : "", k->def ? k->def : "", k->def ? ")" : "",
		    (k->flags & PL_KEY_REQUIRED) ? " (required)" : "",
		    k->artifact ? " (input)" : "");
	}
}

static int
cmd_stage(int argc, char **argv)
{
	const struct cmd *c = cmd_find("stage");
	load_conf();
	plugin_load_dir(conf.plugin_dir, &plugin_host);
	if (opt_val(c, "--list") != NULL) {
		if (ctl_json) {
			cJSON *o = cJSON_CreateArray();
			for (int i = 0; i < plugin_nstages(); i++) {
				const struct stage_reg *r = plugin_stage_at(i);
				cJSON *x = cJSON_CreateObject();
				cJSON_AddStringToObject(x, "name", r->st->name);
				cJSON_AddStringToObject(x, "summary", r->st->summary ? r->st->summary : "");
				cJSON_AddItemToArray(o, x);
			}
			cJSON *top = cJSON_CreateObject();
			cJSON_AddItemToObject(top, "stages", o);
			print_json(top);
			cJSON_Delete(top);
			return CTL_OK;
		}
		struct tab t = { .ncol = 2, .state = -1 };
		tab_row(&t, "STAGE", "SUMMARY");
		for (int i = 0; i < plugin_nstages(); i++) {
			const struct stage_reg *r = plugin_stage_at(i);
			tab_row(&t, r->st->name, r->st->summary ? r->st->summary : "");
		}
		tab_print(&t);
		return CTL_OK;
	}
	const struct stage_reg *reg = plugin_stage(A.pos[0]);
	if (reg == NULL) {
		char hint[256];
		struct suggest sg = { .word = A.pos[0] };
		for (int i = 0; i < plugin_nstages(); i++)
			suggest_try(&sg, plugin_stage_at(i)->st->name);
		suggest_hint(&sg, hint, sizeof(hint));
		ctl_fail(CTL_EUSAGE, "EUSAGE", "no stage \"%s\"%s (pipelinectl stage --list shows them)",
		    A.pos[0], hint);
	}
	const char *workdir = opt_val(c, "-w");
	struct spec_section *sec = xcalloc(1, sizeof(*sec));
	sec->name = xstrdup(A.pos[0]);
	sec->line = 1;
	for (int i = 1; i < A.npos; i++) {
		const char *arg = A.pos[i];
		if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
			stage_help(reg);
			return CTL_OK;
		}
		if (strcmp(arg, "-w") == 0 && i + 1 < A.npos) {
			workdir = A.pos[++i];
			continue;
		}
		char *eq = strchr(arg, '=');
		if (eq == NULL || eq == arg)
			ctl_fail(CTL_EUSAGE, "EUSAGE", "argument %d: \"%s\" is not key=value", i, arg);
		sec->kv = xrealloc(sec->kv, (size_t)sec->nkv + 1, sizeof(*sec->kv));
		sec->kv[sec->nkv].key = strndup(arg, (size_t)(eq - arg));
		sec->kv[sec->nkv].value = xstrdup(eq + 1);
		sec->kv[sec->nkv].line = i;
		sec->nkv++;
	}
	/* A one-job spec named after the command line, so messages read
	 * "command line:N: key: ..." with N the argument's position. */
	struct spec spec;
	memset(&spec, 0, sizeof(spec));
	spec.path = "command line";
	char cwd[PATH_MAX];
	spec.dir = getcwd(cwd, sizeof(cwd)) ? cwd : ".";
	spec.name = "by-hand";
	spec.jobs = &sec;
	spec.njobs = 1;
	char *errs = NULL;
	if (host_check_section(reg, &spec, sec, 0, &errs) != 0)
		ctl_fail(CTL_EUSAGE, pl_proto_err_name(PLP_EINVAL), "%s", errs ? errs : "invalid keys");
	struct pl_job *j = job_new(JOB_MODE_RUN, &host_by_hand, reg, &spec, sec);
	j->conf = have_conf ? &conf : NULL;
	j->json_out = ctl_json;
	char tmpl[] = "/tmp/pipelinectl-stage.XXXXXX";
	if (workdir == NULL) {
		workdir = mkdtemp(tmpl);
		if (workdir == NULL)
			ctl_fail(CTL_ERROR, "ELOCAL", "mkdtemp: %s", strerror(errno));
	} else if (plc_mkdirs(workdir, 0755) == -1) {
		ctl_fail(CTL_ERROR, "ELOCAL", "%s: %s", workdir, strerror(errno));
	}
	char *wabs = realpath(workdir, NULL);
	snprintf(j->workdir, sizeof(j->workdir), "%s", wabs ? wabs : workdir);
	free(wabs);
	if (!ctl_json)
		fprintf(stderr, "pipelinectl: stage %s, work directory %s\n", reg->st->name, j->workdir);
	signal(SIGPIPE, SIG_IGN);
	double t0 = plc_mono_secs();
	int rc = reg->st->run(j);
	double secs = plc_mono_secs() - t0;
	if (ctl_json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "type", "result");
		cJSON_AddStringToObject(o, "stage", reg->st->name);
		cJSON_AddBoolToObject(o, "ok", rc == PL_OK);
		cJSON_AddNumberToObject(o, "seconds", secs);
		if (rc != PL_OK)
			cJSON_AddStringToObject(o, "error", j->failmsg[0] ? j->failmsg :
			    plugin_host.strerror(rc));
		print_json(o);
		cJSON_Delete(o);
	} else if (rc == PL_OK) {
		printf("stage %s: succeeded in %.2fs\n", reg->st->name, secs);
	} else {
		printf("stage %s: failed: %s\n", reg->st->name,
		    j->failmsg[0] ? j->failmsg : plugin_host.strerror(rc));
	}
	job_free(j);
	return rc == PL_OK ? 0 : 1;
}

/* ---- the verbs ------------------------------------------------------ */

static int
cmd_list(int argc, char **argv)
{
	return cmd_status(argc, argv);
}

static int
cmd_cancel(int argc, char **argv)
{
	return cmd_simple(PLV_cancel);
}

static int
cmd_retry(int argc, char **argv)
{
	return cmd_simple(PLV_retry);
}

static int
cmd_values(int argc, char **argv)
{
	return cmd_simple(PLV_values);
}

static int
cmd_explain(int argc, char **argv)
{
	const char *run = A.pos[0], *job = A.pos[1];
	known_job(run, job);
	cJSON *a = cJSON_CreateObject(), *r = NULL;
	cJSON_AddStringToObject(a, "run", run);
	cJSON_AddStringToObject(a, "job", job);
	request(PLV_explain, a, &r, 0);
	if (ctl_json)
		print_json(r);
	else {
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "lines"))
			if (cJSON_IsString(x))
				printf("%s\n", x->valuestring);
	}
	cJSON_Delete(r);
	return CTL_OK;
}

static int
cmd_artifacts(int argc, char **argv)
{
	return cmd_simple(PLV_artifacts);
}

static int
cmd_metrics(int argc, char **argv)
{
	return cmd_simple(PLV_metrics);
}

/*
 * pipelinectl's verbs, in the order of its usage. A verb that is a verb of
 * the protocol is named by proto.h's list (verb); one of pipelinectl's own
 * (no daemon, or several requests) has its name here (own) and verb
 * PLV_COUNT. fn NULL: a verb of a file this pipelinectl was built without.
 * args are the positional arguments (a word in brackets optional, "..."
 * any number more), opts the options; both are checked before fn runs,
 * and the usage, the help of each verb and the completion come from here.
 */
struct copt {
	const char *name;	/* "-f", "--vs" */
	const char *arg;	/* its value's name, or NULL for a flag */
	const char *help;
	int required;
};

static const struct copt no_opts[] = { { NULL, NULL, NULL, 0 } };
static const struct copt check_opts[] = {
	{ "--plan", NULL, "ask pipelined what each job would do: run, or reuse which job, and why",
	    0 },
	{ NULL, NULL, NULL, 0 } };
static const struct copt submit_opts[] = {
	{ "--name", "RUN", "the run's name instead of the spec's [run] name", 0 },
	{ "--plan", NULL, "say what each job would do (run, or reuse which job, and why); submit"
	    " nothing", 0 },
	{ NULL, NULL, NULL, 0 } };
static const struct copt watch_opts[] = {
	{ "--plain", NULL, "a line per event instead of the live view (also when not on a terminal)",
	    0 },
	{ "--follow", NULL, "after the run ends, follow each new revision of it (a resubmit)", 0 },
	{ NULL, NULL, NULL, 0 } };
static const struct copt logs_opts[] = {
	{ "-f", NULL, "follow the log while the job runs", 0 },
	{ "--raw", NULL, "the log's bytes as they are, control characters too", 0 },
	{ NULL, NULL, NULL, 0 } };
static const struct copt artifacts_opts[] = {
	{ "--bytes", NULL, "sizes in bytes instead of KiB, MiB, GiB", 0 },
	{ NULL, NULL, NULL, 0 } };
static const struct copt du_opts[] = {
	{ "--bytes", NULL, "sizes in bytes instead of KiB, MiB, GiB", 0 },
	{ NULL, NULL, NULL, 0 } };
static const struct copt gc_opts[] = {
	{ "--dry-run", NULL, "say what would be removed, and remove nothing", 0 },
	{ "--bytes", NULL, "sizes in bytes instead of KiB, MiB, GiB", 0 },
	{ NULL, NULL, NULL, 0 } };
static const struct copt stage_opts[] = {
	{ "--list", NULL, "the stages the plugins offer", 0 },
	{ "-w", "DIR", "the work directory (default: a new one under /tmp)", 0 },
	{ NULL, NULL, NULL, 0 } };
static const struct copt report_opts[] = {
	{ "--vs", "RUN", "a second run side by side", 0 },
	{ NULL, NULL, NULL, 0 } };
static const struct copt plot_opts[] = {
	{ "-o", "FILE", "the picture to write, FILE.png or FILE.svg", 1 },
	{ "--vs", "RUN", "a second run on the same axes", 0 },
	{ "--job", "JOB", "the train job to plot (default: the run's first)", 0 },
	{ "--size", "WxH", "the picture's size in pixels (default: 1000x600)", 0 },
	{ NULL, NULL, NULL, 0 } };

static int cmd_help(int, char **);
static int cmd_complete(int, char **);

static const struct cmd {
	enum pl_verb verb;
	const char *own;
	int (*fn)(int, char **);
	const char *args, *help;
	const struct copt *opts;
	const char *more;       /* a second synopsis, or NULL */
} cmds[] = {
	{ PLV_check, NULL, cmd_check, "SPEC", "validate a run spec", check_opts, NULL },
	{ PLV_submit, NULL, cmd_submit, "SPEC", "submit a run; prints its name", submit_opts, NULL },
	{ PLV_watch, NULL, cmd_watch, "RUN", "follow a run live; exit 0 only if it succeeds",
	    watch_opts, NULL },
	{ PLV_status, NULL, cmd_status, "[RUN]", "runs, or one run's jobs", no_opts, NULL },
	{ PLV_list, NULL, cmd_list, "", "runs, newest first", no_opts, NULL },
	{ PLV_logs, NULL, cmd_logs, "RUN JOB", "a job's log (control characters escaped)", logs_opts,
	    NULL },
	{ PLV_cancel, NULL, cmd_cancel, "RUN", "cancel a run", no_opts, NULL },
	{ PLV_retry, NULL, cmd_retry, "RUN [JOB]",
	    "re-run what did not succeed (or JOB and what follows it)", no_opts, NULL },
	{ PLV_values, NULL, cmd_values, "RUN [JOB]", "values stored by a run's jobs", no_opts, NULL },
	{ PLV_artifacts, NULL, cmd_artifacts, "RUN", "a run's artifacts with size and sha256",
	    artifacts_opts, NULL },
	{ PLV_explain, NULL, cmd_explain, "RUN JOB",
	    "why a job ran instead of being reused, or what it reused", no_opts, NULL },
	{ PLV_metrics, NULL, cmd_metrics, "RUN JOB [NAME]", "a job's metrics", no_opts, NULL },
	{ PLV_du, NULL, cmd_du, "[RUN]", "the bytes each run holds, or RUN's per job and artifact",
	    du_opts, NULL },
	{ PLV_gc, NULL, cmd_gc, "[RUN]",
	    "remove the artifact files [retention] lets go (or RUN's)", gc_opts, NULL },
	{ PLV_COUNT, "stage", cmd_stage, "STAGE [key=value ...]",
	    "run one stage by hand, without a daemon", stage_opts, "--list | STAGE --help" },
	{ PLV_COUNT, "gguf", ctl_gguf, "FILE", "list a GGUF file's keys and tensors", no_opts, NULL },
	{ PLV_COUNT, "report", ctl_report, "RUN",
	    "bake results side by side, and the verdict", report_opts, NULL },
	{ PLV_web, NULL, cmd_web, "[RUN]",
	    "a one-time login link to the status page (your runs)", no_opts, NULL },
	{ PLV_COUNT, "plot", ctl_plot, "RUN",
	    "a train job's loss and learning rate per step", plot_opts, NULL },
	{ PLV_COUNT, "doctor", ctl_doctor, "[SPEC]",
	    "may a training run start with its Python stack?", no_opts, NULL },
	{ PLV_COUNT, "help", cmd_help, "[VERB]", "this list, or one verb's arguments and options",
	    no_opts, NULL },
	/* Not in the usage: the names the shell completion offers. */
	{ PLV_COUNT, "_complete", cmd_complete, "[WHAT] [ARG ...]", NULL, no_opts, NULL },
};
#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

static const char *
cmd_name(const struct cmd *c)
{
	return c->verb == PLV_COUNT ? c->own : pl_verb_name(c->verb);
}

static const struct cmd *
cmd_find(const char *name)
{
	for (size_t i = 0; i < NCMDS; i++)
		if (strcmp(name, cmd_name(&cmds[i])) == 0)
			return &cmds[i];
	return NULL;
}

/* A verb's synopsis: "logs RUN JOB [-f]", "plot RUN -o FILE [--vs RUN]". */
static void
cmd_synopsis(const struct cmd *c, char *buf, size_t sz)
{
	/* Options after fixed arguments, before a list of any length. */
	int before = strstr(c->args, "...") != NULL;
	size_t n = (size_t)snprintf(buf, sz, "%s%s%s", cmd_name(c), *c->args && !before ? " " : "",
	    before ? "" : c->args);
	for (const struct copt *o = c->opts; o->name && n < sz; o++)
		n += (size_t)snprintf(buf + n, sz - n, " %s%s%s%s%s", o->required ? "" : "[", o->name,
		    o->arg ? " " : "", o->arg ? o->arg : "", o->required ? "" : "]");
	if (before && n < sz)
		snprintf(buf + n, sz - n, " %s", c->args);
}

/* A verb's entry for --json help: its name, synopsis, help and options. */
static cJSON *
cmd_json(const struct cmd *c)
{
	char syn[256];
	cJSON *o = cJSON_CreateObject(), *opts;
	cmd_synopsis(c, syn, sizeof(syn));
	cJSON_AddStringToObject(o, "name", cmd_name(c));
	cJSON_AddStringToObject(o, "synopsis", syn);
	cJSON_AddStringToObject(o, "help", c->help ? c->help : "");
	if (c->more != NULL) {
		char more[256];
		snprintf(more, sizeof(more), "%s %s", cmd_name(c), c->more);
		cJSON_AddStringToObject(o, "synopsis2", more);
	}
	opts = cJSON_AddArrayToObject(o, "options");
	for (const struct copt *p = c->opts; p->name; p++) {
		cJSON *x = cJSON_CreateObject();
		cJSON_AddStringToObject(x, "name", p->name);
		if (p->arg != NULL)
			cJSON_AddStringToObject(x, "arg", p->arg);
		cJSON_AddStringToObject(x, "help", p->help);
		cJSON_AddBoolToObject(x, "required", p->required);
		cJSON_AddItemToArray(opts, x);
	}
	return o;
}

/* --json help [VERB]: {"ok":true,"verb":"help","verbs":[...]}, every
 * verb of the usage, or the one asked for. */
static void
help_json(const struct cmd *one)
{
	cJSON *o = cJSON_CreateObject(), *a;
	cJSON_AddBoolToObject(o, "ok", 1);
	cJSON_AddStringToObject(o, "verb", "help");
	cJSON_AddStringToObject(o, "usage", "pipelinectl [-f conf] [-s socket] [-F feed] [--json] "
	    "verb [args]");
	a = cJSON_AddArrayToObject(o, "verbs");
	for (size_t i = 0; i < NCMDS; i++)
		if (one == &cmds[i] || (one == NULL && cmds[i].help != NULL))
			cJSON_AddItemToArray(a, cmd_json(&cmds[i]));
	print_json(o);
	cJSON_Delete(o);
}

/* The usage, from the table: a synopsis wider than its column puts the
 * help on a line of its own. */
static void
usage_to(FILE *f)
{
	if (ctl_json && f == stdout) {
		help_json(NULL);
		return;
	}
	fprintf(f, "usage: pipelinectl [-f conf] [-s socket] [-F feed] [--json] verb [args]\n"
	    "       pipelinectl -h | --help | --version | help VERB | VERB --help\n"
	    "verbs:\n");
	for (size_t i = 0; i < NCMDS; i++) {
		const struct cmd *c = &cmds[i];
		char syn[256];
		if (c->help == NULL)
			continue;
		cmd_synopsis(c, syn, sizeof(syn));
		if (strlen(syn) <= 26)
			fprintf(f, "  %-26s %s\n", syn, c->help);
		else
			fprintf(f, "  %s\n  %-26s %s\n", syn, "", c->help);
		if (c->more != NULL)
			fprintf(f, "  %s %s\n", cmd_name(c), c->more);
	}
}

static void
usage(void)
{
	usage_to(stderr);
	exit(CTL_EUSAGE);
}

/* One verb's help: its synopsis, what it does, its options. */
static void
cmd_usage(const struct cmd *c, FILE *f)
{
	char syn[256];
	if (ctl_json && f == stdout) {
		help_json(c);
		return;
	}
	cmd_synopsis(c, syn, sizeof(syn));
	fprintf(f, "usage: pipelinectl [-f conf] [-s socket] [-F feed] [--json] %s\n", syn);
	if (c->more != NULL)
		fprintf(f, "       pipelinectl %s %s\n", cmd_name(c), c->more);
	fprintf(f, "%s.\noptions:\n", c->help ? c->help : "names for the shell's completion");
	for (const struct copt *o = c->opts; o->name; o++) {
		char n[64];
		snprintf(n, sizeof(n), "%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(f, "  %-14s %s\n", n, o->help);
	}
	fprintf(f, "  %-14s %s\n  %-14s %s\n", "--json", "JSON on standard output, errors too",
	    "-h, --help", "this help");
	fprintf(f, "See pipelinectl(1).\n");
}

static int
cmd_help(int argc, char **argv)
{
	if (argc < 2) {
		usage_to(stdout);
		return CTL_OK;
	}
	const struct cmd *c = cmd_find(argv[1]);
	if (c == NULL)
		ctl_fail(CTL_EUSAGE, "EUSAGE", "no verb \"%s\" (pipelinectl --help lists them)", argv[1]);
	cmd_usage(c, stdout);
	return CTL_OK;
}

static const char *
opt_val(const struct cmd *c, const char *name)
{
	for (int i = 0; c->opts[i].name; i++)
		if (strcmp(c->opts[i].name, name) == 0)
			return A.opt[i];
	return NULL;
}

/* Names the user may mean, one a line, for a missing argument: the runs,
 * or the jobs of run. Nothing when the daemon does not answer. */
static void
candidates(const char *what, const char *run, char *buf, size_t sz)
{
	cJSON *a = NULL, *r = NULL;
	buf[0] = '\0';
	if (run != NULL) {
		a = cJSON_CreateObject();
		cJSON_AddStringToObject(a, "run", run);
	}
	load_conf();
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (ctl_conn.fd == -1) {
		/* Do not fail on a daemon that is down: only name the missing. */
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", control_path);
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int up = fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
		if (fd >= 0)
			close(fd);
		if (!up) {
			cJSON_Delete(a);
			return;
		}
	}
	if (request(PLV_status, a, &r, Q_DATA | Q_ERR) == -1)
		return;
	size_t n = (size_t)snprintf(buf, sz, "; %s%s%s: ", what, run ? " of run " : "", run ? run : "");
	const cJSON *x;
	int k = 0;
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, run ? "jobs" : "runs")) {
		if (k++ == 12) {
			n += (size_t)snprintf(buf + n, n < sz ? sz - n : 0, ", ...");
			break;
		}
		if (n < sz)
			n += (size_t)snprintf(buf + n, sz - n, "%s%s", k > 1 ? ", " : "", jstr(x, "name"));
	}
	if (k == 0)
		buf[0] = '\0';
	cJSON_Delete(r);
}

/*
 * Check a verb's arguments against its table entry into A: an unknown
 * option, a missing value or argument, or one too many is a usage error
 * naming it; -h or --help prints the verb's help and exits 0 (for stage,
 * only in the place of STAGE: "stage train --help" is the stage's own).
 */
static void
parse_args(const struct cmd *c, int argc, char **argv)
{
	int minpos = 0, maxpos = 0, nopt = 0;
	const char *names[16];
	char words[256];

	snprintf(words, sizeof(words), "%s", c->args);
	char *save = NULL;
	for (char *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		if (strstr(w, "...") != NULL) {
			maxpos = 1 << 20;
			continue;
		}
		if (*w == '[')
			w++;
		else
			minpos++;
		w[strcspn(w, "]")] = '\0';
		if (maxpos < 16)
			names[maxpos] = w;
		maxpos++;
	}
	while (c->opts[nopt].name)
		nopt++;
	A.pos = xcalloc((size_t)argc + 1, sizeof(char *));
	A.npos = 0;
	int dashdash = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (dashdash || a[0] != '-' || a[1] == '\0') {
			A.pos[A.npos++] = a;
			if (strcmp(cmd_name(c), "stage") == 0 && A.npos == 1)
				dashdash = 1; /* the stage's own arguments follow */
			continue;
		}
		if (strcmp(a, "--") == 0) {
			dashdash = 1;
			continue;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			cmd_usage(c, stdout);
			exit(CTL_OK);
		}
		const char *eq = strchr(a, '=');
		size_t len = eq && a[1] == '-' ? (size_t)(eq - a) : strlen(a);
		int k;
		for (k = 0; k < nopt; k++)
			if (strlen(c->opts[k].name) == len && strncmp(c->opts[k].name, a, len) == 0)
				break;
		if (k == nopt)
			ctl_fail(CTL_EUSAGE, "EUSAGE", "unknown option %.*s (pipelinectl %s --help lists them)",
			    (int)len, a, cmd_name(c));
		if (c->opts[k].arg == NULL) {
			if (eq && a[1] == '-')
				ctl_fail(CTL_EUSAGE, "EUSAGE", "option %s takes no value", c->opts[k].name);
			A.opt[k] = "";
		} else if (eq && a[1] == '-') {
			A.opt[k] = eq + 1;
		} else if (i + 1 < argc) {
			A.opt[k] = argv[++i];
		} else {
			ctl_fail(CTL_EUSAGE, "EUSAGE", "option %s wants a value: %s %s", a, a, c->opts[k].arg);
		}
	}
	int listing = strcmp(cmd_name(c), "stage") == 0 && opt_val(c, "--list") != NULL;
	if (A.npos < minpos && !listing) {
		char cand[1024] = "";
		const char *miss = names[A.npos];
		if (strcmp(miss, "RUN") == 0)
			candidates("runs", NULL, cand, sizeof(cand));
		else if (strcmp(miss, "JOB") == 0 && A.npos >= 1)
			candidates("the jobs", A.pos[0], cand, sizeof(cand));
		ctl_fail(CTL_EUSAGE, "EUSAGE", "missing %s (usage: pipelinectl %s %s)%s", miss, cmd_name(c),
		    c->args, cand);
	}
	if (A.npos > maxpos)
		ctl_fail(CTL_EUSAGE, "EUSAGE", "unexpected argument \"%s\" (usage: pipelinectl %s %s)",
		    A.pos[maxpos], cmd_name(c), c->args);
	for (int k = 0; k < nopt; k++)
		if (c->opts[k].required && A.opt[k] == NULL && !listing)
			ctl_fail(CTL_EUSAGE, "EUSAGE", "missing option %s %s", c->opts[k].name,
			    c->opts[k].arg);
}

/* The names the shell completion offers: the verbs; the runs; a run's
 * jobs; a verb's options. One a line. */
static int
cmd_complete(int argc, char **argv)
{
	if (argc < 2) {
		for (size_t i = 0; i < NCMDS; i++)
			if (cmds[i].help != NULL)
				printf("%s\n", cmd_name(&cmds[i]));
		return CTL_OK;
	}
	if (strcmp(argv[1], "opts") == 0 && argc > 2) {
		const struct cmd *c = cmd_find(argv[2]);
		for (int k = 0; c && c->opts[k].name; k++)
			printf("%s\n", c->opts[k].name);
		if (c)
			printf("--json\n--help\n");
		return CTL_OK;
	}
	if (strcmp(argv[1], "pos") == 0 && argc > 3) {
		/* The name of a verb's Nth argument (from 1): RUN, JOB, SPEC... */
		const struct cmd *c = cmd_find(argv[2]);
		char words[256];
		int n = atoi(argv[3]), k = 0;
		snprintf(words, sizeof(words), "%s", c ? c->args : "");
		char *save = NULL, *last = NULL;
		for (char *w = strtok_r(words, " []", &save); w; w = strtok_r(NULL, " []", &save)) {
			if (strstr(w, "...") != NULL)
				break;
			last = w;
			if (++k == n)
				break;
		}
		if (last != NULL && (k == n || strstr(c->args, "...") != NULL))
			printf("%s\n", k == n ? last : "key=value");
		return CTL_OK;
	}
	if (strcmp(argv[1], "stages") == 0) {
		load_conf();
		plugin_load_dir(conf.plugin_dir, &plugin_host);
		for (int i = 0; i < plugin_nstages(); i++)
			printf("%s\n", plugin_stage_at(i)->st->name);
		return CTL_OK;
	}
	cJSON *a = NULL, *r = NULL;
	int jobs = strcmp(argv[1], "jobs") == 0 && argc > 2;
	if (jobs) {
		a = cJSON_CreateObject();
		cJSON_AddStringToObject(a, "run", argv[2]);
	}
	if (request(PLV_status, a, &r, Q_DATA | Q_ERR) == -1)
		return CTL_ENOENT;
	const cJSON *x;
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, jobs ? "jobs" : "runs"))
		printf("%s\n", jstr(x, "name"));
	cJSON_Delete(r);
	return CTL_OK;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	int ch, want_help = 0, want_version = 0;
	log_init(1, LOG_LVL_WARN, NULL);
	plugin_host.host_name = "pipelinectl"; /* plugins may tell by-hand runs apart */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+:f:s:F:jh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'f': conf_path = optarg; break;
		case 's': snprintf(control_path, sizeof(control_path), "%s", optarg); break;
		case 'F': snprintf(feed_path, sizeof(feed_path), "%s", optarg); break;
		case 'j': ctl_json = 1; break;
		case 'h':
			want_help = 1;
			break;
		case 'V':
			want_version = 1;
			break;
		case ':':
			ctl_fail(CTL_EUSAGE, "EUSAGE", "option %s wants a value", argv[optind - 1]);
		default:
			if (optopt)
				ctl_fail(CTL_EUSAGE, "EUSAGE", "unknown option -%c (pipelinectl --help lists them)",
				    optopt);
			ctl_fail(CTL_EUSAGE, "EUSAGE", "unknown option %s (pipelinectl --help lists them)",
			    argv[optind - 1]);
		}
	}
	/* Acted on once every option is read: --json may come after them. */
	if (want_version) {
		if (ctl_json) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddBoolToObject(o, "ok", 1);
			cJSON_AddStringToObject(o, "verb", "version");
			cJSON_AddStringToObject(o, "version", PL_VERSION);
			cJSON_AddNumberToObject(o, "protocol", PL_PROTO_VERSION);
			print_json(o);
			cJSON_Delete(o);
		} else
			printf("pipelinectl %s (protocol %d)\n", PL_VERSION, PL_PROTO_VERSION);
		return CTL_OK;
	}
	if (want_help) {
		usage_to(stdout);
		return CTL_OK;
	}
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		if (ctl_json)
			ctl_fail(CTL_EUSAGE, "EUSAGE", "no verb given (pipelinectl --help lists them)");
		usage();
	}
	/* --json may also follow the verb. */
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "--json") == 0) {
			ctl_json = 1;
			memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof(char *));
			argc--;
			i--;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	const struct cmd *c = cmd_find(argv[0]);
	if (c == NULL) {
		char hint[128];
		struct suggest sg = { .word = argv[0] };
		for (size_t i = 0; i < NCMDS; i++)
			if (cmds[i].help != NULL)
				suggest_try(&sg, cmd_name(&cmds[i]));
		suggest_hint(&sg, hint, sizeof(hint));
		ctl_fail(CTL_EUSAGE, "EUSAGE", "unknown verb \"%s\"%s (pipelinectl --help lists them)",
		    argv[0], hint);
	}
	ctl_verb = cmd_name(c);
	if (c->fn == NULL)
		ctl_fail(CTL_EUSAGE, "EUSAGE", "this pipelinectl was built without the %s verb",
		    cmd_name(c));
	parse_args(c, argc, argv);
	return c->fn(argc, argv);
}
