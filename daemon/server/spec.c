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

#include "pld.h"
#include "host.h"
#include "plio.h"
#include "slurm.h"

const char *const spec_common_keys[] = {
	"stage", "after", "retries", "retry_backoff", "retry_backoff_max", "timeout",
	"resources", "executor", "reuse", "sweep",
	/* slurm executor options (pipeline.ini(5) "SLURM EXECUTOR") */
	"partition", "gres", "time", "mem", "account", "sbatch_options",
	NULL
};
const char *const spec_run_keys[] = { "name", "previous", "description", "reuse",
	"max_variants", NULL };

/* Whether a stage's jobs may be reused, and how: its descriptor says
 * (PL_STAGE_REUSE, PL_STAGE_REUSE_ASKED in pipeline/plugin.h); an unknown
 * stage never. */
static unsigned
stage_reuse(const char *stage)
{
	const struct stage_reg *reg = stage ? plugin_stage(stage) : NULL;
	return reg ? reg->st->flags & (PL_STAGE_REUSE | PL_STAGE_REUSE_ASKED) : 0;
}

int
spec_reuse_never(const char *stage)
{
	return stage_reuse(stage) == 0;
}

const char *
spec_reuse_off(const struct spec *s, const struct spec_section *sec, char *buf, size_t len)
{
	int run_on = 1, job_on = 0;
	const char *rv = s->run ? spec_get(s->run, "reuse") : NULL;
	const char *v = spec_get(sec, "reuse");
	int job_set = v != NULL && parse_bool(v, &job_on) == 0;
	unsigned how = stage_reuse(sec->stage);
	if (rv != NULL && parse_bool(rv, &run_on) == 0 && !run_on)
		snprintf(buf, len, "reuse = no in [run]");
	else if (how == 0)
		snprintf(buf, len, "stage %s never reuses", sec->stage ? sec->stage : "?");
	else if (job_set && !job_on)
		snprintf(buf, len, "reuse = no on the job");
	else if (!job_set && !(how & PL_STAGE_REUSE))
		snprintf(buf, len, "stage %s reuses only with reuse = yes", sec->stage);
	else
		return NULL;
	return buf;
}

int
spec_reuse_allowed(const struct spec *s, const struct spec_section *sec)
{
	char buf[160];
	return spec_reuse_off(s, sec, buf, sizeof(buf)) == NULL;
}

/* Sections, keys and jobs are looked up through plc_strmap (plio.h), each
 * in O(1), so a large spec costs its size, not its size squared. */
static void
map_put(struct plc_strmap *m, const char *k, int v)
{
	if (plc_strmap_put(m, k, v) == -1)
		fatal("spec: map");
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
	struct ini_reader r;        /* the line reader (ini.c): line, raw line, errors */
	struct spec *s;
	struct plc_strmap headers;  /* section name -> the line of its header */
	struct plc_strmap sections; /* job section name -> index in s->jobs */
	struct plc_strmap keys;     /* "INDEX\037key" -> index in that section's kv */
	struct spec_section *cur;
	int curidx;                 /* cur's index in s->jobs; -1 for [run] */
};

/* A section header seen a second time is an error even when nothing
 * follows it (inih only reports sections through their keys). */
static void
section_seen(void *arg, const char *line)
{
	struct spec_parse *p = arg;
	const char *b = line + strspn(line, " \t");
	if (*b != '[')
		return;
	const char *e = strchr(b, ']');
	if (e == NULL)
		return;
	char *name = strndup(b + 1, (size_t)(e - b - 1));
	const int *first = plc_strmap_get(&p->headers, name);
	if (first != NULL) {
		errs_add(p->r.errs, p->s->path, p->r.line, "-",
		    "section [%s] appears twice (first at line %d)", name, *first);
		p->r.nerr++;
	} else {
		map_put(&p->headers, name, p->r.line);
	}
	free(name);
}

/* A section's line is its header's (section_seen() saw it), not that of
 * its first key, where inih first tells of it. */
static struct spec_section *
section_new(struct spec_parse *p, const char *name)
{
	struct spec_section *sec = xcalloc(1, sizeof(*sec));
	sec->name = xstrdup(name);
	const int *hl = plc_strmap_get(&p->headers, name);
	sec->line = hl ? *hl : p->r.line;
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
			const int *i = plc_strmap_get(&p->sections, section);
			if (i != NULL) {
				/* Reported by section_seen(); keys join the first. */
				p->cur = s->jobs[*i];
				p->curidx = *i;
				return spec_handler(user, section, name, value);
			}
			struct spec_section *sec = section_new(p, section);
			if ((s->njobs & (s->njobs - 1)) == 0) /* 0, 1, 2, 4, ...: double */
				s->jobs = xrealloc(s->jobs, (size_t)(s->njobs ? 2 * s->njobs : 1),
				    sizeof(*s->jobs));
			map_put(&p->sections, section, s->njobs);
			p->curidx = s->njobs;
			s->jobs[s->njobs++] = sec;
			p->cur = sec;
		}
	}
	if (name == NULL) /* INI_CALL_HANDLER_ON_NEW_SECTION */
		return 1;
	struct spec_section *sec = p->cur;
	value = ini_reader_value(&p->r, value);
	char *kk;
	if (asprintf(&kk, "%d\037%s", p->curidx, name) == -1)
		fatal("spec_handler");
	const int *ki = plc_strmap_get(&p->keys, kk);
	if (ki != NULL) {
		free(kk);
		int i = *ki;
		if (p->r.raw && (p->r.raw[0] == ' ' || p->r.raw[0] == '\t')) {
			/* A continuation line of a multi-line value. */
			char *n;
			if (asprintf(&n, "%s\n%s", sec->kv[i].value, value) == -1)
				fatal("spec_handler");
			free(sec->kv[i].value);
			sec->kv[i].value = n;
			return 1;
		}
		errs_add(p->r.errs, s->path, p->r.line, name, "duplicate key (first at line %d)",
		    sec->kv[i].line);
		p->r.nerr++;
		return 1;
	}
	map_put(&p->keys, kk, sec->nkv);
	free(kk);
	if (sec->nkv % 16 == 0)
		sec->kv = xrealloc(sec->kv, (size_t)sec->nkv + 16, sizeof(*sec->kv));
	sec->kv[sec->nkv].key = xstrdup(name);
	sec->kv[sec->nkv].value = xstrdup(value);
	sec->kv[sec->nkv].line = p->r.line;
	sec->nkv++;
	return 1;
}

struct spec *
spec_parse(const char *path, const char *text, char **errs)
{
	struct spec *s = xcalloc(1, sizeof(*s));
	s->submitter = -1;
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

	struct spec_parse p = { .r = { .path = s->path, .text = s->text, .errs = errs,
	    .on_line = section_seen }, .s = s };
	p.r.arg = &p;
	int rc = ini_parse_stream(ini_reader_line, &p.r, spec_handler, &p);
	ini_reader_free(&p.r);
	plc_strmap_free(&p.headers);
	plc_strmap_free(&p.sections);
	plc_strmap_free(&p.keys);
	if (rc > 0) {
		errs_add(errs, path, rc, "-", "syntax error (expected [section] or key = value)");
		p.r.nerr++;
	} else if (rc < 0) {
		errs_add(errs, path, 0, "-", "cannot parse (out of memory)");
		p.r.nerr++;
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
	if (p.r.nerr) {
		spec_free(s);
		return NULL;
	}
	return s;
}

void
spec_section_free(struct spec_section *sec)
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
	free(sec->variant);
	free(sec->origin);
	free(sec);
}

void
spec_free(struct spec *s)
{
	if (s == NULL)
		return;
	spec_section_free(s->run);
	for (int i = 0; i < s->njobs; i++)
		spec_section_free(s->jobs[i]);
	free(s->jobs);
	free(s->path);
	free(s->dir);
	free(s->text);
	free(s->name);
	free(s->previous);
	free(s->owner);
	free(s->sweep_job);
	strv_free(s->variant_suffix);
	strv_free(s->variant_values);
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
find_job(const struct plc_strmap *jobs, const char *name)
{
	const int *i = plc_strmap_get(jobs, name);
	return i ? *i : -1;
}

void
spec_after_index(const struct spec *s, int **dep)
{
	struct plc_strmap jobs = { 0 };
	for (int j = 0; j < s->njobs; j++)
		map_put(&jobs, s->jobs[j]->name, j);
	for (int j = 0; j < s->njobs; j++)
		for (int k = 0; k < s->jobs[j]->nafter; k++)
			dep[j][k] = find_job(&jobs, s->jobs[j]->after[k]);
	plc_strmap_free(&jobs);
}

/* Depth-first search for a cycle through the after edges, without
 * recursion (a chain of 100,000 jobs would overflow the loop thread's
 * stack); color 0 white, 1 grey, 2 black. The first cycle found is
 * reported. */
static int
find_cycle(const struct spec *s, const struct plc_strmap *jobs, char **errs)
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
			/* The path, cut to a readable length (a cycle may hold
			 * every job of the spec). */
			char path[512];
			struct plc_sb sb;
			plc_sb_init(&sb, path, sizeof(path));
			int start = 0;
			while (stack[start] != w)
				start++;
			for (int k = start; k <= depth && !sb.trunc; k++) {
				plc_sb_append(&sb, s->jobs[stack[k]]->name);
				plc_sb_append(&sb, " -> ");
			}
			plc_sb_append(&sb, s->jobs[w]->name);
			if (sb.trunc)
				errs_add(errs, s->path, key_line(sec, "after"), "after",
				    "dependency cycle of %d jobs: %s (and back to %s)", depth - start + 1,
				    path, s->jobs[w]->name);
			else
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
check_common(struct spec *s, const struct plc_strmap *jobs, struct spec_section *sec,
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
	if ((v = spec_get(sec, "reuse")) != NULL) {
		const char *stage = spec_get(sec, "stage") ? spec_get(sec, "stage") : sec->name;
		int b;
		if (parse_bool(v, &b) == -1)
			BAD("reuse", "must be yes or no, not \"%s\"", v);
		else if (b && plugin_stage(stage) != NULL && spec_reuse_never(stage))
			BAD("reuse", "stage %s is never reused (its plugin says so: see"
			    " pipeline.ini(5) reuse); remove the key or set it to no", stage);
	}
	sec->after = split_list(spec_get(sec, "after"), &sec->nafter);
	for (int k = 0; k < sec->nafter; k++) {
		if (strcmp(sec->after[k], sec->name) == 0)
			BAD("after", "job \"%s\" cannot run after itself", sec->name);
		else if (find_job(jobs, sec->after[k]) < 0) {
			struct suggest sg = { .word = sec->after[k] };
			char hint[128];
			for (int j = 0; j < s->njobs; j++)
				suggest_try(&sg, s->jobs[j]->name);
			BAD("after", "names no job: \"%s\"%s (jobs are the section names)",
			    sec->after[k], suggest_hint(&sg, hint, sizeof(hint)));
		}
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
			if (r == NULL) {
				struct suggest sg = { .word = res[k] };
				char hint[128];
				for (int q = 0; q < c->nres; q++)
					suggest_try(&sg, c->res[q].name);
				BAD("resources", "unknown resource \"%s\"%s (define it in [resources] "
				    "of %s)", res[k], suggest_hint(&sg, hint, sizeof(hint)), c->path);
			}
			else if (count > r->capacity)
				BAD("resources", "needs %d of \"%s\" but its capacity is %d",
				    count, res[k], r->capacity);
		}
	}
	strv_free(res);
	v = spec_get(sec, "executor");
	sec->executor = xstrdup(v ? v : "local");
	sec->ex = exec_find(sec->executor);
	if (sec->ex == NULL)
		BAD("executor", "must be " EXEC_NAMES ", not \"%s\"", sec->executor);
	static const char *const slurm_only[] = { "partition", "gres", "time", "mem",
	    "account", "sbatch_options", NULL };
	if (sec->ex == NULL || !sec->ex->batch)
		for (int k = 0; slurm_only[k]; k++)
			if (spec_find(sec, slurm_only[k]))
				BAD(slurm_only[k], "only applies with executor = slurm");
	char serr[512];
	if ((v = spec_get(sec, "sbatch_options")) != NULL &&
	    slurm_spec_options_check(v, serr, sizeof(serr)) == -1)
		BAD("sbatch_options", "%s", serr);
#undef BAD
	return nerr;
}

int
spec_check(struct spec *s, const struct conf *c, spec_stage_check *stage_check, int flags,
    char **errs)
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
				struct suggest sg = { .word = s->run->kv[i].key };
				char hint[128];
				for (int k = 0; spec_run_keys[k]; k++)
					suggest_try(&sg, spec_run_keys[k]);
				errs_add(errs, s->path, s->run->kv[i].line, s->run->kv[i].key,
				    "unknown key in [run]%s (known: name, previous, description, reuse, "
				    "max_variants)",
				    suggest_hint(&sg, hint, sizeof(hint)));
				nerr++;
			}
		}
		const char *rv = spec_get(s->run, "reuse");
		int rb;
		if (rv != NULL && (parse_bool(rv, &rb) == -1 || rb)) {
			errs_add(errs, s->path, key_line(s->run, "reuse"), "reuse",
			    "must be no (turns reuse off for every job), not \"%s\"", rv);
			nerr++;
		}
		if (s->previous && !valid_run_ref(s->previous)) {
			errs_add(errs, s->path, key_line(s->run, "previous"), "previous",
			    "bad run name \"%s\" (NAME, or NAME@N for revision N)", s->previous);
			nerr++;
		}
	}
	if (s->njobs == 0) {
		errs_add(errs, s->path, 1, "-", "no jobs: add a section per job");
		nerr++;
	}
	struct plc_strmap jobs = { 0 };
	for (int j = 0; j < s->njobs; j++)
		map_put(&jobs, s->jobs[j]->name, j);
	for (int j = 0; j < s->njobs; j++) {
		struct spec_section *sec = s->jobs[j];
		if (!valid_name(sec->name)) {
			errs_add(errs, s->path, sec->line, "-", "bad job name [%s]", sec->name);
			nerr++;
		}
		/* The copies of a swept job share its lines: an error they
		 * share is told once. */
		char *mine = NULL, **e = sec->vindex > 0 ? &mine : errs;
		nerr += check_common(s, &jobs, sec, c, e);
		const char *stage = spec_get(sec, "stage");
		sec->stage = xstrdup(stage ? stage : sec->name);
		const struct stage_reg *reg = plugin_stage(sec->stage);
		if (reg == NULL) {
			struct suggest sg = { .word = sec->stage };
			char hint[128];
			for (int q = 0; q < plugin_nstages(); q++)
				suggest_try(&sg, plugin_stage_at(q)->st->name);
			errs_add(e, s->path, key_line(sec, "stage"), "stage",
			    "unknown stage \"%s\" in [%s]%s (no plugin provides it; "
			    "`pipelinectl stage --list` lists the stages)", sec->stage,
			    sec->origin ? sec->origin : sec->name,
			    suggest_hint(&sg, hint, sizeof(hint)));
			nerr++;
		} else if (stage_check != NULL)
			nerr += stage_check(reg, s, sec, flags, e);
		if (mine != NULL) {
			errs_merge(errs, mine);
			free(mine);
		}
	}
	nerr += find_cycle(s, &jobs, errs);
	plc_strmap_free(&jobs);
	return nerr ? -1 : 0;
}
