/* spec.c: pipeline.ini(5) run specs: parsing with line numbers, and the
 * whole-spec check (common keys, stage keys through the plugins, the DAG).
 * A spec with any error is refused whole; every error is listed as
 * file:line: key: message. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "pipelined.h"

const char *const spec_common_keys[] = {
	"stage", "after", "retries", "retry_backoff", "retry_backoff_max", "timeout",
	"resources", "executor",
	/* slurm executor options (pipeline.ini(5) "SLURM EXECUTOR") */
	"partition", "gres", "time", "mem", "account", "sbatch_options",
	NULL
};
const char *const spec_run_keys[] = { "name", "previous", "description", NULL };

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
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
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

/* A string -> int map (open addressing): section and key lookups while
 * parsing, job lookups while checking, each O(1), so a large spec costs
 * its size, not its size squared. */
struct smap {
	char **keys;
	int *vals;
	size_t cap, n;
};

static size_t
smap_slot(const struct smap *m, const char *k)
{
	uint64_t h = 1469598103934665603ULL;
	for (const unsigned char *p = (const unsigned char *)k; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	size_t i = (size_t)h & (m->cap - 1);
	while (m->keys[i] != NULL && strcmp(m->keys[i], k) != 0)
		i = (i + 1) & (m->cap - 1);
	return i;
}

static int *
smap_get(const struct smap *m, const char *k)
{
	if (m->cap == 0)
		return NULL;
	size_t i = smap_slot(m, k);
	return m->keys[i] ? &m->vals[i] : NULL;
}

static void
smap_put(struct smap *m, const char *k, int v)
{
	if (2 * (m->n + 1) > m->cap) {
		struct smap o = *m;
		m->cap = o.cap ? o.cap * 2 : 64;
		m->keys = xcalloc(m->cap, sizeof(char *));
		m->vals = xcalloc(m->cap, sizeof(int));
		for (size_t j = 0; j < o.cap; j++) {
			if (o.keys[j] == NULL)
				continue;
			size_t i = smap_slot(m, o.keys[j]);
			m->keys[i] = o.keys[j];
			m->vals[i] = o.vals[j];
		}
		free(o.keys);
		free(o.vals);
	}
	size_t i = smap_slot(m, k);
	if (m->keys[i] == NULL) {
		m->keys[i] = xstrdup(k);
		m->n++;
	}
	m->vals[i] = v;
}

static void
smap_free(struct smap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->keys[i]);
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

int
spec_is_common_key(const char *key)
{
	for (int i = 0; spec_common_keys[i]; i++)
		if (strcmp(spec_common_keys[i], key) == 0)
			return 1;
	return 0;
}

struct spec_parse {
	struct spec *s;
	const char *path;        /* for the reader's errors: the spec's or the conf's */
	const char *text;
	size_t off;
	int line;
	char *raw;
	char *longval;
	struct smap headers;     /* section name -> the line of its header */
	struct smap sections;    /* job section name -> index in s->jobs */
	struct smap keys;        /* "INDEX\037key" -> index in that section's kv */
	char **errs;
	int nerr;
	struct spec_section *cur;
	int curidx;              /* cur's index in s->jobs; -1 for [run] */
};

/* A section header seen a second time is an error even when nothing
 * follows it (inih only reports sections through their keys). */
static void
section_seen(struct spec_parse *p, const char *line)
{
	const char *b = line + strspn(line, " \t");
	if (*b != '[')
		return;
	const char *e = strchr(b, ']');
	if (e == NULL)
		return;
	char *name = strndup(b + 1, (size_t)(e - b - 1));
	const int *first = smap_get(&p->headers, name);
	if (first != NULL) {
		errs_add(p->errs, p->s->path, p->line, "-",
		    "section [%s] appears twice (first at line %d)", name, *first);
		p->nerr++;
	} else {
		smap_put(&p->headers, name, p->line);
	}
	free(name);
}

/* inih reader over a string that counts lines. inih (as Debian builds it)
 * takes lines of at most 200 bytes and cuts values at " ;" (an inline
 * comment); a longer line, or one with a ';', reaches it as "key = \001"
 * and the handler takes the whole value from p->longval. */
static char *
spec_reader(char *str, int num, void *stream)
{
	struct spec_parse *p = stream;
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
	if (p->s != NULL)
		section_seen(p, p->raw);
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

/* inih over text through spec_reader, for pipelined.conf (conf.c): the
 * handler gets every value whole, however long, and *line is the line
 * being handled. */
struct ini_text {
	struct spec_parse p;
	ini_handler h;
	void *user;
	int *line;
};

static int
ini_text_handler(void *user, const char *section, const char *name, const char *value)
{
	struct ini_text *t = user;

	if (value != NULL && strcmp(value, "\001") == 0 && t->p.longval != NULL)
		value = t->p.longval;
	*t->line = t->p.line;
	return t->h(t->user, section, name, value);
}

int
spec_ini_parse(const char *path, const char *text, ini_handler h, void *user, int *line,
    char **errs, int *nerr)
{
	struct ini_text t = { .p = { .text = text, .path = path, .errs = errs }, .h = h,
	    .user = user, .line = line };
	int rc = ini_parse_stream(spec_reader, &t.p, ini_text_handler, &t);

	*nerr += t.p.nerr;
	free(t.p.raw);
	free(t.p.longval);
	return rc;
}

/* A section's line is its header's (section_seen() saw it), not that of
 * its first key, where inih first tells of it. */
static struct spec_section *
section_new(struct spec_parse *p, const char *name)
{
	struct spec_section *sec = xcalloc(1, sizeof(*sec));
	sec->name = xstrdup(name);
	const int *hl = smap_get(&p->headers, name);
	sec->line = hl ? *hl : p->line;
	return sec;
}

static int
spec_handler(void *user, const char *section, const char *name, const char *value)
{
	struct spec_parse *p = user;
	struct spec *s = p->s;

	if (p->cur == NULL || strcmp(p->cur->name, section) != 0) {
		/* A new section; a repeated section name is an error. */
		if (strcmp(section, "run") == 0) {
			if (s->run == NULL)
				s->run = section_new(p, section);
			p->cur = s->run;
			p->curidx = -1;
		} else {
			const int *i = smap_get(&p->sections, section);
			if (i != NULL) {
				/* Reported by section_seen(); keys join the first. */
				p->cur = s->jobs[*i];
				p->curidx = *i;
				return spec_handler(user, section, name, value);
			}
			struct spec_section *sec = section_new(p, section);
			if ((s->njobs & (s->njobs - 1)) == 0) /* 0, 1, 2, 4, ...: double */
				s->jobs = realloc(s->jobs, (size_t)(s->njobs ? 2 * s->njobs : 1) *
				    sizeof(*s->jobs));
			smap_put(&p->sections, section, s->njobs);
			p->curidx = s->njobs;
			s->jobs[s->njobs++] = sec;
			p->cur = sec;
		}
	}
	if (name == NULL) /* INI_CALL_HANDLER_ON_NEW_SECTION */
		return 1;
	struct spec_section *sec = p->cur;
	if (strcmp(value, "\001") == 0 && p->longval != NULL)
		value = p->longval;
	char *kk;
	if (asprintf(&kk, "%d\037%s", p->curidx, name) == -1)
		fatal("spec_handler");
	const int *ki = smap_get(&p->keys, kk);
	if (ki != NULL) {
		free(kk);
		int i = *ki;
		if (p->raw && (p->raw[0] == ' ' || p->raw[0] == '\t')) {
			/* A continuation line of a multi-line value. */
			char *n;
			if (asprintf(&n, "%s\n%s", sec->kv[i].value, value) == -1)
				fatal("spec_handler");
			free(sec->kv[i].value);
			sec->kv[i].value = n;
			return 1;
		}
		errs_add(p->errs, s->path, p->line, name, "duplicate key (first at line %d)",
		    sec->kv[i].line);
		p->nerr++;
		return 1;
	}
	smap_put(&p->keys, kk, sec->nkv);
	free(kk);
	if (sec->nkv % 16 == 0)
		sec->kv = realloc(sec->kv, (size_t)(sec->nkv + 16) * sizeof(*sec->kv));
	sec->kv[sec->nkv].key = xstrdup(name);
	sec->kv[sec->nkv].value = xstrdup(value);
	sec->kv[sec->nkv].line = p->line;
	sec->nkv++;
	return 1;
}

struct spec *
spec_parse(const char *path, const char *text, char **errs)
{
	struct spec *s = xcalloc(1, sizeof(*s));
	s->path = xstrdup(path);
	s->text = xstrdup(text);
	s->dir = xstrdup(path);
	char *slash = strrchr(s->dir, '/');
	if (slash) {
		*(slash == s->dir ? slash + 1 : slash) = '\0';
	} else {
		free(s->dir);   /* "." may not fit: the path may be "" */
		s->dir = xstrdup(".");
	}

	struct spec_parse p = { .s = s, .path = s->path, .text = s->text, .errs = errs };
	int rc = ini_parse_stream(spec_reader, &p, spec_handler, &p);
	free(p.raw);
	free(p.longval);
	smap_free(&p.headers);
	smap_free(&p.sections);
	smap_free(&p.keys);
	if (rc > 0) {
		errs_add(errs, path, rc, "-", "syntax error (expected [section] or key = value)");
		p.nerr++;
	} else if (rc < 0) {
		errs_add(errs, path, 0, "-", "cannot parse (out of memory)");
		p.nerr++;
	}
	/* The run name: [run] name, else the file name without .ini. */
	const char *name = s->run ? spec_get(s->run, "name") : NULL;
	if (name != NULL) {
		s->name = xstrdup(name);
	} else {
		const char *b = strrchr(path, '/');
		s->name = xstrdup(b ? b + 1 : path);
		char *dot = strrchr(s->name, '.');
		if (dot && strcmp(dot, ".ini") == 0)
			*dot = '\0';
	}
	const char *prev = s->run ? spec_get(s->run, "previous") : NULL;
	if (prev != NULL && *prev)
		s->previous = xstrdup(prev);
	if (p.nerr) {
		spec_free(s);
		return NULL;
	}
	return s;
}

static void
section_free(struct spec_section *sec)
{
	if (sec == NULL)
		return;
	for (int i = 0; i < sec->nkv; i++) {
		free(sec->kv[i].key);
		free(sec->kv[i].value);
	}
	free(sec->kv);
	free(sec->name);
	free(sec->stage);
	strv_free(sec->after);
	strv_free(sec->res_names);
	free(sec->res_counts);
	free(sec->executor);
	free(sec);
}

void
spec_free(struct spec *s)
{
	if (s == NULL)
		return;
	section_free(s->run);
	for (int i = 0; i < s->njobs; i++)
		section_free(s->jobs[i]);
	free(s->jobs);
	free(s->path);
	free(s->dir);
	free(s->text);
	free(s->name);
	free(s->previous);
	free(s->owner);
	free(s);
}

const struct spec_kv *
spec_find(const struct spec_section *sec, const char *key)
{
	if (sec == NULL)
		return NULL;
	for (int i = 0; i < sec->nkv; i++)
		if (strcmp(sec->kv[i].key, key) == 0)
			return &sec->kv[i];
	return NULL;
}

const char *
spec_get(const struct spec_section *sec, const char *key)
{
	const struct spec_kv *kv = spec_find(sec, key);
	return kv ? kv->value : NULL;
}

static int
key_line(const struct spec_section *sec, const char *key)
{
	const struct spec_kv *kv = spec_find(sec, key);
	return kv ? kv->line : sec->line;
}

static int
find_job(const struct smap *jobs, const char *name)
{
	const int *i = smap_get(jobs, name);
	return i ? *i : -1;
}

/* Depth-first search for a cycle through the after edges, without
 * recursion (a chain of 100,000 jobs would overflow the loop thread's
 * stack); color 0 white, 1 grey, 2 black. The first cycle found is
 * reported. */
static int
find_cycle(const struct spec *s, const struct smap *jobs, char **errs)
{
	int n = s->njobs;
	int *color = xcalloc((size_t)n, sizeof(int));
	int *stack = xcalloc((size_t)n + 1, sizeof(int));
	int *edge = xcalloc((size_t)n + 1, sizeof(int));
	int found = 0;
	for (int root = 0; root < n && !found; root++) {
		if (color[root] != 0)
			continue;
		int depth = 0;
		stack[0] = root;
		edge[0] = 0;
		color[root] = 1;
		while (depth >= 0 && !found) {
			int v = stack[depth];
			const struct spec_section *sec = s->jobs[v];
			if (edge[depth] == sec->nafter) {
				color[v] = 2;
				depth--;
				continue;
			}
			int w = find_job(jobs, sec->after[edge[depth]++]);
			if (w < 0 || color[w] == 2)
				continue;
			if (color[w] == 0) {
				color[w] = 1;
				stack[++depth] = w;
				edge[depth] = 0;
				continue;
			}
			char path[2048] = "";
			int start = 0;
			while (stack[start] != w)
				start++;
			for (int k = start; k <= depth; k++) {
				strncat(path, s->jobs[stack[k]]->name, sizeof(path) - strlen(path) - 5);
				strncat(path, " -> ", sizeof(path) - strlen(path) - 1);
			}
			strncat(path, s->jobs[w]->name, sizeof(path) - strlen(path) - 1);
			errs_add(errs, s->path, key_line(sec, "after"), "after",
			    "dependency cycle: %s", path);
			found = 1;
		}
	}
	free(color);
	free(stack);
	free(edge);
	return found;
}

static int
check_common(struct spec *s, const struct smap *jobs, struct spec_section *sec,
    const struct conf *c, char **errs)
{
	int nerr = 0;
	const char *v;
	double d;
	int64_t i;

#define BAD(key, ...) do { errs_add(errs, s->path, key_line(sec, key), key, __VA_ARGS__); nerr++; } while (0)
	sec->retries = 0;
	sec->backoff = 1;
	sec->backoff_max = 300;
	sec->timeout = 0;
	if ((v = spec_get(sec, "retries")) != NULL) {
		if (parse_int(v, &i) == -1 || i < 0 || i > 1000)
			BAD("retries", "must be an integer from 0 to 1000, not \"%s\"", v);
		else
			sec->retries = (int)i;
	}
	if ((v = spec_get(sec, "retry_backoff")) != NULL) {
		if (parse_duration(v, &d) == -1)
			BAD("retry_backoff", "bad duration \"%s\" (examples: 10, 30s, 5m)", v);
		else
			sec->backoff = d;
	}
	if ((v = spec_get(sec, "retry_backoff_max")) != NULL) {
		if (parse_duration(v, &d) == -1)
			BAD("retry_backoff_max", "bad duration \"%s\"", v);
		else
			sec->backoff_max = d;
	}
	if ((v = spec_get(sec, "timeout")) != NULL) {
		if (parse_duration(v, &d) == -1)
			BAD("timeout", "bad duration \"%s\" (examples: 90s, 2h)", v);
		else
			sec->timeout = d;
	}
	sec->after = split_list(spec_get(sec, "after"), &sec->nafter);
	for (int k = 0; k < sec->nafter; k++) {
		if (strcmp(sec->after[k], sec->name) == 0)
			BAD("after", "job \"%s\" cannot run after itself", sec->name);
		else if (find_job(jobs, sec->after[k]) < 0)
			BAD("after", "names no job: \"%s\" (jobs are the section names)", sec->after[k]);
	}
	char **res = split_list(spec_get(sec, "resources"), &sec->nres);
	sec->res_names = xcalloc((size_t)sec->nres + 1, sizeof(char *));
	sec->res_counts = xcalloc((size_t)sec->nres + 1, sizeof(int));
	for (int k = 0; k < sec->nres; k++) {
		char *colon = strchr(res[k], ':');
		int count = 1;
		if (colon) {
			*colon = '\0';
			/* Bounded before the cast: 4294967296 must not wrap to 0. */
			if (parse_int(colon + 1, &i) == -1 || i < 1 || i > 1000000) {
				BAD("resources", "bad count in \"%s:%s\" (1 to 1000000)", res[k],
				    colon + 1);
				i = 1;
			}
			count = (int)i;
		}
		sec->res_names[k] = xstrdup(res[k]);
		sec->res_counts[k] = count;
		if (c != NULL) {
			struct resource *r = conf_resource((struct conf *)c, res[k]);
			if (r == NULL)
				BAD("resources", "unknown resource \"%s\" (define it in [resources] of %s)",
				    res[k], c->path);
			else if (count > r->capacity)
				BAD("resources", "needs %d of \"%s\" but its capacity is %d",
				    count, res[k], r->capacity);
		}
	}
	strv_free(res);
	v = spec_get(sec, "executor");
	sec->executor = xstrdup(v ? v : "local");
	if (strcmp(sec->executor, "local") != 0 && strcmp(sec->executor, "slurm") != 0)
		BAD("executor", "must be local or slurm, not \"%s\"", sec->executor);
	else if (strcmp(sec->executor, "slurm") == 0 && &exec_slurm == NULL)
		BAD("executor", "this pipelined was built without the slurm executor");
	static const char *const slurm_only[] = { "partition", "gres", "time", "mem",
	    "account", "sbatch_options", NULL };
	if (strcmp(sec->executor, "slurm") != 0)
		for (int k = 0; slurm_only[k]; k++)
			if (spec_find(sec, slurm_only[k]))
				BAD(slurm_only[k], "only applies with executor = slurm");
#undef BAD
	return nerr;
}

int
spec_check(struct spec *s, const struct conf *c, char **errs)
{
	int nerr = 0;
	const struct spec_kv *nkv = spec_find(s->run, "name");
	if (!valid_name(s->name)) {
		/* A name taken from the file name has no line. */
		errs_add(errs, s->path, nkv ? nkv->line : 0, "name",
		    "bad run name \"%s\"%s (letters, digits, '-', '_', '.')", s->name,
		    nkv ? "" : ", taken from the file name: set [run] name");
		nerr++;
	}
	if (s->run != NULL) {
		for (int i = 0; i < s->run->nkv; i++) {
			int ok = 0;
			for (int k = 0; spec_run_keys[k]; k++)
				ok |= strcmp(spec_run_keys[k], s->run->kv[i].key) == 0;
			if (!ok) {
				errs_add(errs, s->path, s->run->kv[i].line, s->run->kv[i].key,
				    "unknown key in [run] (known: name, previous, description)");
				nerr++;
			}
		}
		if (s->previous && !valid_name(s->previous)) {
			errs_add(errs, s->path, key_line(s->run, "previous"), "previous",
			    "bad run name \"%s\"", s->previous);
			nerr++;
		}
	}
	if (s->njobs == 0) {
		errs_add(errs, s->path, 1, "-", "no jobs: add a section per job");
		nerr++;
	}
	struct smap jobs = { 0 };
	for (int j = 0; j < s->njobs; j++)
		smap_put(&jobs, s->jobs[j]->name, j);
	for (int j = 0; j < s->njobs; j++) {
		struct spec_section *sec = s->jobs[j];
		if (!valid_name(sec->name)) {
			errs_add(errs, s->path, sec->line, "-", "bad job name [%s]", sec->name);
			nerr++;
		}
		nerr += check_common(s, &jobs, sec, c, errs);
		const char *stage = spec_get(sec, "stage");
		sec->stage = xstrdup(stage ? stage : sec->name);
		const struct stage_reg *reg = plugin_stage(sec->stage);
		if (reg == NULL) {
			errs_add(errs, s->path, key_line(sec, "stage"), "stage",
			    "unknown stage \"%s\" in [%s] (no plugin provides it)",
			    sec->stage, sec->name);
			nerr++;
			continue;
		}
		nerr += host_check_section(reg, s, sec, errs);
	}
	nerr += find_cycle(s, &jobs, errs);
	smap_free(&jobs);
	return nerr ? -1 : 0;
}
