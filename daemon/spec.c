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
	char *n;
	if (asprintf(&n, "%s%s:%d: %s: %s\n", *errs ? *errs : "", file, line,
	    key ? key : "-", msg) == -1)
		fatal("errs_add");
	free(*errs);
	*errs = n;
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
	const char *text;
	size_t off;
	int line;
	char *raw;
	char *longval;
	char **secnames;
	int *seclines;
	int nsec;
	char **errs;
	int nerr;
	struct spec_section *cur;
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
	for (int i = 0; i < p->nsec; i++) {
		if (strcmp(p->secnames[i], name) == 0) {
			errs_add(p->errs, p->s->path, p->line, "-",
			    "section [%s] appears twice (first at line %d)", name, p->seclines[i]);
			p->nerr++;
			free(name);
			return;
		}
	}
	p->secnames = realloc(p->secnames, (size_t)(p->nsec + 1) * sizeof(char *));
	p->seclines = realloc(p->seclines, (size_t)(p->nsec + 1) * sizeof(int));
	p->secnames[p->nsec] = name;
	p->seclines[p->nsec++] = p->line;
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
	if (len + 2 <= (size_t)num && (memchr(t, ';', len) == NULL || *lead == ';' ||
	    *lead == '#' || *lead == '[')) {
		memcpy(str, t, adv);
		str[adv] = '\0';
		return str;
	}
	const char *eq = memchr(t, '=', len);
	int cont = t[0] == ' ' || t[0] == '\t';
	if (!cont && (eq == NULL || (size_t)(eq - t) + 8 > (size_t)num)) {
		memcpy(str, t, (size_t)num - 2); /* inih will call it an error */
		str[num - 2] = '\n';
		str[num - 1] = '\0';
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
spec_ini_parse(const char *text, ini_handler h, void *user, int *line)
{
	struct ini_text t = { .p = { .text = text }, .h = h, .user = user, .line = line };
	int rc = ini_parse_stream(spec_reader, &t.p, ini_text_handler, &t);

	free(t.p.raw);
	free(t.p.longval);
	return rc;
}

static struct spec_section *
section_new(struct spec *s, const char *name, int line)
{
	struct spec_section *sec = xcalloc(1, sizeof(*sec));
	sec->name = xstrdup(name);
	sec->line = line;
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
				s->run = section_new(s, section, p->line);
			p->cur = s->run;
		} else {
			for (int i = 0; i < s->njobs; i++) {
				if (strcmp(s->jobs[i]->name, section) == 0) {
					/* Reported by section_seen(); keys join the first. */
					p->cur = s->jobs[i];
					return spec_handler(user, section, name, value);
				}
			}
			struct spec_section *sec = section_new(s, section, p->line);
			s->jobs = realloc(s->jobs, (size_t)(s->njobs + 1) * sizeof(*s->jobs));
			s->jobs[s->njobs++] = sec;
			p->cur = sec;
		}
	}
	if (name == NULL) /* INI_CALL_HANDLER_ON_NEW_SECTION */
		return 1;
	struct spec_section *sec = p->cur;
	if (strcmp(value, "\001") == 0 && p->longval != NULL)
		value = p->longval;
	for (int i = 0; i < sec->nkv; i++) {
		if (strcmp(sec->kv[i].key, name) != 0)
			continue;
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
	sec->kv = realloc(sec->kv, (size_t)(sec->nkv + 1) * sizeof(*sec->kv));
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
	if (slash)
		*(slash == s->dir ? slash + 1 : slash) = '\0';
	else
		strcpy(s->dir, ".");

	struct spec_parse p = { .s = s, .text = s->text, .errs = errs };
	int rc = ini_parse_stream(spec_reader, &p, spec_handler, &p);
	free(p.raw);
	free(p.longval);
	for (int i = 0; i < p.nsec; i++)
		free(p.secnames[i]);
	free(p.secnames);
	free(p.seclines);
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
find_job(const struct spec *s, const char *name)
{
	for (int i = 0; i < s->njobs; i++)
		if (strcmp(s->jobs[i]->name, name) == 0)
			return i;
	return -1;
}

/* Depth-first search for cycles; color 0 white, 1 grey, 2 black. */
static int
dfs_cycle(const struct spec *s, int v, int *color, int *stack, int depth, char **errs)
{
	color[v] = 1;
	stack[depth] = v;
	const struct spec_section *sec = s->jobs[v];
	for (int i = 0; i < sec->nafter; i++) {
		int w = find_job(s, sec->after[i]);
		if (w < 0)
			continue;
		if (color[w] == 1) {
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
			return 1;
		}
		if (color[w] == 0 && dfs_cycle(s, w, color, stack, depth + 1, errs))
			return 1;
	}
	color[v] = 2;
	return 0;
}

static int
check_common(struct spec *s, struct spec_section *sec, const struct conf *c, char **errs)
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
		else if (find_job(s, sec->after[k]) < 0)
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
			if (parse_int(colon + 1, &i) == -1 || i < 1) {
				BAD("resources", "bad count in \"%s:%s\"", res[k], colon + 1);
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
	if (!valid_name(s->name)) {
		errs_add(errs, s->path, s->run ? key_line(s->run, "name") : 0, "name",
		    "bad run name \"%s\" (letters, digits, '-', '_', '.')", s->name);
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
	for (int j = 0; j < s->njobs; j++) {
		struct spec_section *sec = s->jobs[j];
		if (!valid_name(sec->name)) {
			errs_add(errs, s->path, sec->line, "-", "bad job name [%s]", sec->name);
			nerr++;
		}
		nerr += check_common(s, sec, c, errs);
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
	/* Cycles. */
	int *color = xcalloc((size_t)s->njobs, sizeof(int));
	int *stack = xcalloc((size_t)s->njobs + 1, sizeof(int));
	for (int j = 0; j < s->njobs; j++)
		if (color[j] == 0 && dfs_cycle(s, j, color, stack, 0, errs)) {
			nerr++;
			break;
		}
	free(color);
	free(stack);
	return nerr ? -1 : 0;
}
