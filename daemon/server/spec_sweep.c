/* spec_sweep.c: a sweep in a run spec (pipeline.ini(5) "SWEEPS"): a job's
 * `sweep = KEY: V1 V2 ...; KEY2: ...` makes one copy of that job, and of
 * every job on a path from it to the gate's candidate, per element of the
 * keys' cross product; the jobs before it stay shared, and the gate (and
 * what follows it) is shared too, its candidate and the `after` lists of
 * the shared jobs naming every variant. Done on the parsed spec, before
 * any check, so every later step (the checks, the store, the scheduler,
 * a restart that parses the stored text again) sees the expanded jobs.
 * spec_load() is here too: the parse, the expansion and the submit
 * limits, so that spec.c below calls nothing of this file.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pld.h"
#include "host.h"
#include "plio.h"

/* Where a limit comes from, for its message. */
static const char *
limit_from(const struct conf *c)
{
	if (c == NULL || c->path[0] == '\0' || strcmp(c->path, "/dev/null") == 0)
		return "the default";
	return c->path;
}

struct sweep_key {
	char *key;
	char **vals;
	int nvals;
};

/* Append s to the growing string *buf (NULL at first). */
static void
cat(char **buf, const char *s)
{
	size_t a = *buf ? strlen(*buf) : 0, b = strlen(s);
	*buf = xrealloc(*buf, a + b + 1, 1);
	memcpy(*buf + a, s, b + 1);
}

static const char *
stage_of(const struct spec_section *sec)
{
	const char *st = spec_get(sec, "stage");
	return st ? st : sec->name;
}

/* A variant's suffix holds only name characters, and never a '.'
 * (it splits JOB.ARTIFACT) nor a ',' (it splits `after`). */
static int
suffix_ok(const char *s)
{
	if (*s == '\0')
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
			return 0;
	return 1;
}

/* A key's short form in a variant's name: what follows its last '_'
 * (lora_r: r, lora_alpha: alpha). */
static const char *
key_short(const char *k)
{
	const char *u = strrchr(k, '_');
	return u && u[1] ? u + 1 : k;
}

static void
keys_free(struct sweep_key *k, int n)
{
	for (int i = 0; i < n; i++) {
		free(k[i].key);
		strv_free(k[i].vals);
	}
	free(k);
}

/* Parse "KEY: V1 V2; KEY2: V3" into keys; errors at the sweep's line. */
static int
sweep_parse(const struct spec *s, const struct spec_kv *kv, struct sweep_key **out, int *nout,
    char **errs)
{
	int nerr = 0, n = 0;
	struct sweep_key *k = NULL;
	char *text = xstrdup(kv->value), *save = NULL;

	for (char *part = strtok_r(text, ";", &save); part; part = strtok_r(NULL, ";", &save)) {
		part += strspn(part, " \t\n");
		if (*part == '\0')
			continue;
		char *colon = strchr(part, ':');
		if (colon == NULL) {
			errs_add(errs, s->path, kv->line, "sweep", "expected KEY: V1 V2 ..., not "
			    "\"%s\"", part);
			nerr++;
			continue;
		}
		char *e = colon;
		while (e > part && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		*e = '\0';
		if (*part == '\0') {
			errs_add(errs, s->path, kv->line, "sweep", "a key is missing before \":%s\"",
			    colon + 1);
			nerr++;
			continue;
		}
		if (spec_is_common_key(part)) {
			errs_add(errs, s->path, kv->line, "sweep", "cannot sweep %s: a sweep is over "
			    "the stage's own keys", part);
			nerr++;
			continue;
		}
		int dup = 0;
		for (int i = 0; i < n; i++)
			dup |= strcmp(k[i].key, part) == 0;
		if (dup) {
			errs_add(errs, s->path, kv->line, "sweep", "%s is swept twice", part);
			nerr++;
			continue;
		}
		int nv;
		char **vals = split_list(colon + 1, &nv);
		if (nv == 0) {
			errs_add(errs, s->path, kv->line, "sweep", "%s: an empty list of values "
			    "(expected %s: V1 V2 ...)", part, part);
			nerr++;
			strv_free(vals);
			continue;
		}
		for (int a = 0; a < nv; a++)
			for (int b = 0; b < a; b++)
				if (strcmp(vals[a], vals[b]) == 0 && !dup) {
					errs_add(errs, s->path, kv->line, "sweep", "%s: the value %s "
					    "appears twice", part, vals[a]);
					nerr++;
					dup = 1;
				}
		if (dup) {
			strv_free(vals);
			continue;
		}
		k = xrealloc(k, (size_t)n + 1, sizeof(*k));
		k[n].key = xstrdup(part);
		k[n].vals = vals;
		k[n].nvals = nv;
		n++;
	}
	free(text);
	if (n == 0 && nerr == 0) {
		errs_add(errs, s->path, kv->line, "sweep", "an empty sweep (expected KEY: V1 V2 ...)");
		nerr++;
	}
	*out = k;
	*nout = n;
	return nerr;
}

/* The spec's max_variants ([run]), within the configuration's ceiling;
 * -1 after an error. */
static int
variants_limit(const struct spec *s, const struct conf *c, char **errs)
{
	int ceiling = c ? c->max_variants : CONF_MAX_VARIANTS;
	const struct spec_kv *kv = s->run ? spec_find(s->run, "max_variants") : NULL;
	int64_t i;

	if (kv == NULL)
		return SPEC_MAX_VARIANTS < ceiling ? SPEC_MAX_VARIANTS : ceiling;
	if (parse_int(kv->value, &i) == -1 || i < 1 || i > 100000) {
		errs_add(errs, s->path, kv->line, "max_variants", "must be an integer from 1 to "
		    "100000, not \"%s\"", kv->value);
		return -1;
	}
	if (i > ceiling) {
		errs_add(errs, s->path, kv->line, "max_variants", "%lld is above the ceiling of %d "
		    "(max_variants: %s; pipelined.conf(5))", (long long)i, ceiling,
		    limit_from(c));
		return -1;
	}
	return (int)i;
}

/* mark[j] = 1 for every job reached from `from` along `after` edges
 * (down: the jobs that name it in their after; up: those it names),
 * `from` included; a gate is not entered going down. */
static void
walk(const struct spec *s, int **dep, int *ndep, int from, int down, char *mark)
{
	int *stack = xcalloc((size_t)s->njobs + 1, sizeof(int)), top = 0;
	mark[from] = 1;
	stack[top++] = from;
	while (top > 0) {
		int v = stack[--top];
		for (int j = 0; j < s->njobs; j++) {
			if (mark[j])
				continue;
			int edge = 0;
			if (down) {
				for (int k = 0; k < ndep[j] && !edge; k++)
					edge = dep[j][k] == v;
				if (edge && strcmp(stage_of(s->jobs[j]), "gate") == 0)
					continue;
			} else {
				for (int k = 0; k < ndep[v] && !edge; k++)
					edge = dep[v][k] == j;
			}
			if (edge) {
				mark[j] = 1;
				stack[top++] = j;
			}
		}
	}
	free(stack);
}

static int
job_index(const struct spec *s, const char *name)
{
	for (int j = 0; j < s->njobs; j++)
		if (strcmp(s->jobs[j]->name, name) == 0)
			return j;
	return -1;
}

/* The swept job a value names as JOB.ARTIFACT: its index, and where its
 * name ends in v; -1 when it names none. */
static int
names_swept(const struct spec *s, const char *swept, const char *v, size_t *len)
{
	size_t n = strcspn(v, ".");
	if (n == 0 || n >= 256 || v[0] == '/' || v[n] != '.')
		return -1;
	char jn[256];
	memcpy(jn, v, n);
	jn[n] = '\0';
	int j = job_index(s, jn);
	if (j < 0 || !swept[j])
		return -1;
	*len = n;
	return j;
}

static void
kv_push(struct spec_section *sec, const char *key, const char *value, int line)
{
	if (sec->nkv % 16 == 0)
		sec->kv = xrealloc(sec->kv, (size_t)sec->nkv + 16, sizeof(*sec->kv));
	sec->kv[sec->nkv].key = xstrdup(key);
	sec->kv[sec->nkv].value = xstrdup(value);
	sec->kv[sec->nkv].line = line;
	sec->nkv++;
}

/* The `after` list of a job, its swept names replaced: by the one of
 * variant suffix (a copy), or by every variant's (suffix NULL: a shared
 * job). */
static char *
after_rewrite(const struct spec *s, const char *swept, const char *value, char **suffix,
    int nvar, const char *one)
{
	int n;
	char **a = split_list(value, &n), *out = NULL;
	for (int i = 0; i < n; i++) {
		int j = job_index(s, a[i]);
		if (j >= 0 && swept[j]) {
			for (int v = 0; v < nvar; v++) {
				if (one != NULL && v > 0)
					break;
				if (out)
					cat(&out, ", ");
				cat(&out, a[i]);
				cat(&out, "-");
				cat(&out, one ? one : suffix[v]);
			}
		} else {
			if (out)
				cat(&out, ", ");
			cat(&out, a[i]);
		}
	}
	strv_free(a);
	return out ? out : xstrdup("");
}

static struct spec_section *
section_copy(const struct spec *s, const struct spec_section *o, const char *swept,
    const char *suffix, const struct sweep_key *keys, int nkeys, const int *pick, int sweep_line,
    char **tags_old, char **tags_new, int ntags)
{
	struct spec_section *c = xcalloc(1, sizeof(*c));
	if (asprintf(&c->name, "%s-%s", o->name, suffix) == -1)
		fatal("section_copy");
	c->line = o->line;
	c->origin = xstrdup(o->name);
	/* A section's stage defaults to its name, which the copy's is not. */
	if (spec_find(o, "stage") == NULL)
		kv_push(c, "stage", o->name, o->line);
	for (int i = 0; i < o->nkv; i++) {
		const struct spec_kv *kv = &o->kv[i];
		char *nv = NULL;
		int skip = strcmp(kv->key, "sweep") == 0;
		for (int k = 0; k < nkeys; k++)
			skip |= spec_find(o, "sweep") != NULL && strcmp(kv->key, keys[k].key) == 0;
		if (skip)
			continue;
		size_t len;
		if (strcmp(kv->key, "after") == 0) {
			nv = after_rewrite(s, swept, kv->value, NULL, 1, suffix);
		} else if (names_swept(s, swept, kv->value, &len) >= 0) {
			if (asprintf(&nv, "%.*s-%s%s", (int)len, kv->value, suffix,
			    kv->value + len) == -1)
				fatal("section_copy");
		} else if (strcmp(stage_of(o), "register") == 0 && strcmp(kv->key, "tag") == 0) {
			if (asprintf(&nv, "%s-%s", kv->value, suffix) == -1)
				fatal("section_copy");
		} else {
			for (int t = 0; t < ntags && nv == NULL; t++)
				if (strcmp(kv->value, tags_old[t]) == 0)
					nv = xstrdup(tags_new[t]);
		}
		kv_push(c, kv->key, nv ? nv : kv->value, kv->line);
		free(nv);
	}
	/* The swept keys, in the swept job alone, at the sweep's line. */
	if (spec_find(o, "sweep") != NULL)
		for (int k = 0; k < nkeys; k++)
			kv_push(c, keys[k].key, keys[k].vals[pick[k]], sweep_line);
	return c;
}

/* The variants' suffixes: the keys' short forms and values ("r64",
 * "r64-alpha32"), or the variants' numbers where a value holds what a
 * name cannot or two names would be the same. */
static char **
suffixes(const struct spec *s, const char *swept, const struct sweep_key *keys, int nkeys,
    int nvar)
{
	char **sfx = xcalloc((size_t)nvar + 1, sizeof(char *));
	int ok = 1;
	for (int v = 0; v < nvar; v++) {
		int rest = v;
		char *b = NULL;
		for (int k = nkeys - 1; k >= 0; k--) {
			const char *val = keys[k].vals[rest % keys[k].nvals];
			rest /= keys[k].nvals;
			char *part;
			if (asprintf(&part, "%s%s%s%s", key_short(keys[k].key), val, b ? "-" : "",
			    b ? b : "") == -1)
				fatal("suffixes");
			ok &= suffix_ok(val);
			free(b);
			b = part;
		}
		sfx[v] = b;
	}
	for (int v = 0; v < nvar && ok; v++)
		for (int w = 0; w < v && ok; w++)
			ok = strcmp(sfx[v], sfx[w]) != 0;
	for (int v = 0; v < nvar && ok; v++)
		for (int j = 0; j < s->njobs && ok; j++) {
			if (!swept[j])
				continue;
			char *nm;
			if (asprintf(&nm, "%s-%s", s->jobs[j]->name, sfx[v]) == -1)
				fatal("suffixes");
			ok = job_index(s, nm) < 0;
			free(nm);
		}
	if (!ok)
		for (int v = 0; v < nvar; v++) {
			free(sfx[v]);
			if (asprintf(&sfx[v], "%d", v + 1) == -1)
				fatal("suffixes");
		}
	return sfx;
}

/* The keys a probe's figure depends on (pipeline.ini(5) SWEEPS): a
 * sweep over one of them probes each distinct set of their values. */
static const char *const memory_keys[] = { "lora_r", "per_device_train_batch_size", NULL };

/* In sec's after, the job old becomes new. */
static void
after_swap(struct spec_section *sec, const char *old, const char *new)
{
	struct spec_kv *kv = (struct spec_kv *)spec_find(sec, "after");
	if (kv == NULL)
		return;
	int n;
	char **a = split_list(kv->value, &n), *out = NULL;
	for (int i = 0; i < n; i++) {
		if (out)
			cat(&out, ", ");
		cat(&out, strcmp(a[i], old) == 0 ? new : a[i]);
	}
	strv_free(a);
	free(kv->value);
	kv->value = out ? out : xstrdup("");
}

/*
 * The probes of the sets that dominate set t (as much or more of every
 * memory key's value, the values integers, tv[u * nmk + m]): memory only
 * grows with each of them, so when one of those fits, so does t. Their
 * names ("probe-r32, probe-r64"), or NULL when none does.
 */
static char *
probe_dominators(const char *probe, char **tsfx, const long long *tv, int ntup, int nmk, int t)
{
	char *out = NULL;
	for (int u = 0; u < ntup; u++) {
		int ge = u != t;
		for (int m = 0; ge && m < nmk; m++)
			ge = tv[u * nmk + m] >= tv[t * nmk + m];
		if (!ge)
			continue;
		cat(&out, out ? ", " : "");
		cat(&out, probe);
		cat(&out, "-");
		cat(&out, tsfx[u]);
	}
	return out;
}

/* The probe a swept train job runs after, when the sweep is over one of
 * memory_keys and every job after the probe is swept: its index, else
 * -1. mk[] gets the indices of those keys among keys. */
static int
prune_probe(const struct spec *s, int sj, const char *swept, const struct sweep_key *keys,
    int nkeys, int *mk, int *nmk)
{
	int pj = -1, n;
	*nmk = 0;
	for (int k = 0; k < nkeys; k++)
		for (int m = 0; memory_keys[m]; m++)
			if (strcmp(keys[k].key, memory_keys[m]) == 0)
				mk[(*nmk)++] = k;
	if (*nmk == 0 || strcmp(stage_of(s->jobs[sj]), "train") != 0)
		return -1;
	char **a = split_list(spec_get(s->jobs[sj], "after"), &n);
	for (int i = 0; i < n && pj < 0; i++) {
		int j = job_index(s, a[i]);
		if (j >= 0 && !swept[j] && strcmp(stage_of(s->jobs[j]), "probe") == 0)
			pj = j;
	}
	strv_free(a);
	for (int j = 0; j < s->njobs && pj >= 0; j++) {
		char **b = split_list(spec_get(s->jobs[j], "after"), &n);
		for (int i = 0; i < n; i++)
			if (strcmp(b[i], s->jobs[pj]->name) == 0 && !swept[j])
				pj = -1;
		strv_free(b);
	}
	return pj;
}

int
spec_expand(struct spec *s, const struct conf *c, char **errs)
{
	int sj = -1, nerr = 0;
	for (int j = 0; j < s->njobs; j++) {
		const struct spec_kv *kv = spec_find(s->jobs[j], "sweep");
		if (kv == NULL)
			continue;
		if (sj >= 0) {
			errs_add(errs, s->path, kv->line, "sweep", "one sweep per spec: [%s] sweeps "
			    "already (line %d)", s->jobs[sj]->name,
			    spec_find(s->jobs[sj], "sweep")->line);
			nerr++;
			continue;
		}
		sj = j;
	}
	if (sj < 0)
		return nerr || (s->run && spec_find(s->run, "max_variants") &&
		    variants_limit(s, c, errs) < 0) ? -1 : 0;
	const struct spec_kv *skv = spec_find(s->jobs[sj], "sweep");
	struct sweep_key *keys = NULL;
	int nkeys = 0;
	nerr += sweep_parse(s, skv, &keys, &nkeys, errs);
	int limit = variants_limit(s, c, errs);
	nerr += limit < 0;
	long long nvar = 1;
	for (int k = 0; k < nkeys; k++) {
		nvar *= keys[k].nvals;
		if (nvar > 100000)
			nvar = 100001;
	}
	if (nerr == 0 && nvar > limit) {
		errs_add(errs, s->path, skv->line, "sweep", "%lld variants, more than max_variants "
		    "(%d)", nvar, limit);
		nerr++;
	}
	if (nerr) {
		keys_free(keys, nkeys);
		return -1;
	}

	/* The swept part: every job on a path from the swept job to the
	 * gate's candidate (without a gate: everything after it). */
	int **dep = xcalloc((size_t)s->njobs, sizeof(int *));
	int *ndep = xcalloc((size_t)s->njobs, sizeof(int));
	for (int j = 0; j < s->njobs; j++) {
		char **a = split_list(spec_get(s->jobs[j], "after"), &ndep[j]);
		dep[j] = xcalloc((size_t)ndep[j] + 1, sizeof(int));
		for (int k = 0; k < ndep[j]; k++)
			dep[j][k] = job_index(s, a[k]);
		strv_free(a);
	}
	char *swept = xcalloc((size_t)s->njobs, 1), *up = xcalloc((size_t)s->njobs, 1);
	walk(s, dep, ndep, sj, 1, swept);
	int gate = -1;
	for (int j = 0; j < s->njobs && gate < 0; j++) {
		if (strcmp(stage_of(s->jobs[j]), "gate") != 0)
			continue;
		for (int k = 0; k < ndep[j]; k++)
			if (dep[j][k] >= 0 && swept[dep[j][k]])
				gate = j;
	}
	if (gate >= 0) {
		const char *cv = spec_get(s->jobs[gate], "candidate");
		int cj = job_index(s, cv ? cv : "bake");
		if (cj >= 0 && swept[cj]) {
			walk(s, dep, ndep, cj, 0, up);
			for (int j = 0; j < s->njobs; j++)
				swept[j] &= up[j];
		}
	}
	for (int j = 0; j < s->njobs; j++)
		free(dep[j]);
	free(dep);
	free(ndep);
	free(up);

	int nv = (int)nvar;
	char **sfx = suffixes(s, swept, keys, nkeys, nv);
	/* Register's tags, per variant: a value in the swept part equal to
	 * one (bake's model) follows it. */
	int ntags = 0;
	char **tags_old = xcalloc((size_t)s->njobs + 1, sizeof(char *));
	for (int j = 0; j < s->njobs; j++)
		if (swept[j] && strcmp(stage_of(s->jobs[j]), "register") == 0 &&
		    spec_get(s->jobs[j], "tag") != NULL)
			tags_old[ntags++] = xstrdup(spec_get(s->jobs[j], "tag"));
	char **tags_new = xcalloc((size_t)ntags + 1, sizeof(char *));
	/* The gate's tag to promote, when it is one of those: the winning
	 * variant's (sweep_tags); another it could not follow. */
	int gtag = -1;
	if (gate >= 0) {
		const char *cv = spec_get(s->jobs[gate], "candidate");
		int cj = job_index(s, cv ? cv : "bake");
		const struct spec_kv *tk = spec_find(s->jobs[gate], "tag");
		for (int t = 0; t < ntags && tk != NULL && gtag < 0; t++)
			if (strcmp(tk->value, tags_old[t]) == 0)
				gtag = t;
		if (cj >= 0 && swept[cj] && tk != NULL && gtag < 0) {
			errs_add(errs, s->path, tk->line, "tag", "%s is no tag a variant of the "
			    "sweep in [%s] registers: a sweep's gate promotes the winning "
			    "variant's (name the swept register's tag, or leave tag out for the "
			    "model the winning bake served)", tk->value, s->jobs[sj]->name);
			nerr++;
		}
	}

	/* Shared jobs that name a swept job's artifact cannot say which. */
	for (int j = 0; j < s->njobs; j++) {
		if (swept[j])
			continue;
		const struct spec_section *o = s->jobs[j];
		for (int i = 0; i < o->nkv; i++) {
			size_t len;
			int w = names_swept(s, swept, o->kv[i].value, &len);
			if (w < 0 || strcmp(o->kv[i].key, "after") == 0 || (j == gate &&
			    strcmp(o->kv[i].key, "candidate") == 0))
				continue;
			errs_add(errs, s->path, o->kv[i].line, o->kv[i].key, "names %s, which the "
			    "sweep in [%s] makes once per variant: [%s] is shared (only the gate "
			    "may name the swept jobs)", s->jobs[w]->name, s->jobs[sj]->name, o->name);
			nerr++;
		}
	}
	if (nerr) {
		for (int t = 0; t < ntags; t++)
			free(tags_old[t]);
		free(tags_old);
		free(tags_new);
		strv_free(sfx);
		free(swept);
		keys_free(keys, nkeys);
		return -1;
	}

	struct spec_section **jobs = xcalloc((size_t)s->njobs * (size_t)nv + 1, sizeof(*jobs));
	int n = 0;
	s->sweep_job = xstrdup(s->jobs[sj]->name);
	s->sweep_line = skv->line;
	s->nvariants = nv;
	s->variant_suffix = xcalloc((size_t)nv + 1, sizeof(char *));
	s->variant_values = xcalloc((size_t)nv + 1, sizeof(char *));
	int *pick = xcalloc((size_t)nkeys, sizeof(int));
	/* The probe prunes: once per distinct set of the memory keys' values
	 * (probe-r64), with prune = yes, each variant's train after its
	 * own; a variant its probe says will not fit is skipped. */
	int *mk = xcalloc((size_t)nkeys + 1, sizeof(int)), nmk = 0;
	int pj = prune_probe(s, sj, swept, keys, nkeys, mk, &nmk);
	int *vprobe = xcalloc((size_t)nv, sizeof(int)), ntup = 0;
	char **tup = xcalloc((size_t)nv + 1, sizeof(char *));      /* "lora_r=64" */
	char **tsfx = xcalloc((size_t)nv + 1, sizeof(char *));     /* "r64" */
	int *tfirst = xcalloc((size_t)nv + 1, sizeof(int));        /* a variant of it */
	/* Each set's values as integers, for probe_dominators (mono: all
	 * are). */
	long long *tval = xcalloc(((size_t)nv + 1) * ((size_t)nmk + 1), sizeof(long long));
	int tok = 1, mono = 1;
	for (int v = 0; pj >= 0 && v < nv; v++) {
		int rest = v;
		for (int k = nkeys - 1; k >= 0; k--) {
			pick[k] = rest % keys[k].nvals;
			rest /= keys[k].nvals;
		}
		char *tv = NULL, *ts = NULL;
		for (int m = 0; m < nmk; m++) {
			const struct sweep_key *k = &keys[mk[m]];
			cat(&tv, m ? " " : "");
			cat(&tv, k->key);
			cat(&tv, "=");
			cat(&tv, k->vals[pick[mk[m]]]);
			cat(&ts, m ? "-" : "");
			cat(&ts, key_short(k->key));
			cat(&ts, k->vals[pick[mk[m]]]);
			tok &= suffix_ok(k->vals[pick[mk[m]]]);
		}
		int t;
		for (t = 0; t < ntup && strcmp(tup[t], tv) != 0; t++)
			;
		if (t == ntup) {
			for (int m = 0; m < nmk; m++) {
				const char *x = keys[mk[m]].vals[pick[mk[m]]];
				char *end;
				errno = 0;
				tval[ntup * nmk + m] = strtoll(x, &end, 10);
				mono &= errno == 0 && end != x && *end == '\0';
			}
			tup[ntup] = tv;
			tsfx[ntup] = ts;
			tfirst[ntup++] = v;
		} else {
			free(tv);
			free(ts);
		}
		vprobe[v] = t;
	}
	for (int t = 0; t < ntup && !tok; t++) {
		free(tsfx[t]);
		if (asprintf(&tsfx[t], "m%d", t + 1) == -1)
			fatal("spec_expand");
	}
	for (int j = 0; j < s->njobs; j++) {
		struct spec_section *o = s->jobs[j];
		if (j == pj) {
			for (int t = 0; t < ntup; t++) {
				int rest = tfirst[t];
				for (int k = nkeys - 1; k >= 0; k--) {
					pick[k] = rest % keys[k].nvals;
					rest /= keys[k].nvals;
				}
				struct spec_section *cp = section_copy(s, o, swept, tsfx[t], keys, 0,
				    pick, skv->line, tags_old, tags_new, 0);
				for (int m = 0; m < nmk; m++) {
					const struct sweep_key *k = &keys[mk[m]];
					struct spec_kv *kv = (struct spec_kv *)spec_find(cp, k->key);
					if (kv != NULL) {
						free(kv->value);
						kv->value = xstrdup(k->vals[pick[mk[m]]]);
						kv->line = skv->line;
					} else
						kv_push(cp, k->key, k->vals[pick[mk[m]]], skv->line);
				}
				kv_push(cp, "prune", "yes", skv->line);
				/* After the probes of the sets that dominate its own,
				 * whose fit is its own (fits_if; sched.c runs it when
				 * they end, fit or not). */
				char *dom = mono ? probe_dominators(o->name, tsfx, tval, ntup, nmk,
				    t) : NULL;
				if (dom != NULL) {
					struct spec_kv *ak = (struct spec_kv *)spec_find(cp, "after");
					if (ak != NULL && *ak->value != '\0') {
						cat(&ak->value, ", ");
						cat(&ak->value, dom);
					} else if (ak != NULL) {
						free(ak->value);
						ak->value = xstrdup(dom);
					} else
						kv_push(cp, "after", dom, skv->line);
					kv_push(cp, "fits_if", dom, skv->line);
					free(dom);
				}
				cp->variant = xstrdup(tup[t]);
				cp->sweep_probe = 1;
				jobs[n++] = cp;
			}
			continue;
		}
		if (j == sj) {
			for (int v = 0; v < nv; v++) {
				int rest = v;
				char *vals = NULL;
				for (int k = nkeys - 1; k >= 0; k--) {
					pick[k] = rest % keys[k].nvals;
					rest /= keys[k].nvals;
				}
				for (int k = 0; k < nkeys; k++) {
					if (vals)
						cat(&vals, " ");
					cat(&vals, keys[k].key);
					cat(&vals, "=");
					cat(&vals, keys[k].vals[pick[k]]);
				}
				for (int t = 0; t < ntags; t++) {
					free(tags_new[t]);
					if (asprintf(&tags_new[t], "%s-%s", tags_old[t], sfx[v]) == -1)
						fatal("spec_expand");
				}
				s->variant_suffix[v] = xstrdup(sfx[v]);
				s->variant_values[v] = vals;
				for (int w = sj; w < s->njobs; w++) {
					if (!swept[w])
						continue;
					struct spec_section *cp = section_copy(s, s->jobs[w], swept,
					    sfx[v], keys, nkeys, pick, skv->line, tags_old, tags_new,
					    ntags);
					cp->variant = xstrdup(vals);
					cp->vindex = v + 1;
					if (w == sj && pj >= 0) {
						char *pn;
						if (asprintf(&pn, "%s-%s", s->jobs[pj]->name,
						    tsfx[vprobe[v]]) == -1)
							fatal("spec_expand");
						after_swap(cp, s->jobs[pj]->name, pn);
						/* Its calibration pair is its own probe's. */
						struct spec_kv *pk = (struct spec_kv *)spec_find(cp,
						    "probe_job");
						if (pk == NULL)
							kv_push(cp, "probe_job", pn, skv->line);
						else if (strcmp(pk->value, s->jobs[pj]->name) == 0) {
							free(pk->value);
							pk->value = xstrdup(pn);
						}
						free(pn);
					}
					jobs[n++] = cp;
				}
			}
			continue;
		}
		if (swept[j])
			continue;
		/* A shared job: its after names every variant; the gate's
		 * candidate names every variant's bake, and its sweep_values
		 * their values. */
		for (int i = 0; i < o->nkv; i++)
			if (strcmp(o->kv[i].key, "after") == 0) {
				char *a = after_rewrite(s, swept, o->kv[i].value, sfx, nv, NULL);
				/* After the swept part: once every variant ended and
				 * one worked (sched.c: dep_met). */
				o->sweep_any |= strcmp(a, o->kv[i].value) != 0;
				free(o->kv[i].value);
				o->kv[i].value = a;
			}
		if (j == gate) {
			const char *cv = spec_get(o, "candidate");
			int cj = job_index(s, cv ? cv : "bake");
			if (cj >= 0 && swept[cj]) {
				char *list = NULL, *vals = NULL;
				for (int v = 0; v < nv; v++) {
					char *one;
					if (asprintf(&one, "%s%s-%s", v ? " " : "", s->jobs[cj]->name,
					    sfx[v]) == -1)
						fatal("spec_expand");
					cat(&list, one);
					cat(&vals, one + (v ? 1 : 0));
					cat(&vals, ": ");
					cat(&vals, s->variant_values[v]);
					cat(&vals, v + 1 < nv ? "; " : "");
					free(one);
				}
				struct spec_kv *ckv = (struct spec_kv *)spec_find(o, "candidate");
				if (ckv) {
					free(ckv->value);
					ckv->value = list;
				} else {
					kv_push(o, "candidate", list, o->line);
					free(list);
				}
				kv_push(o, "sweep_values", vals, s->sweep_line);
				free(vals);
				/* Each bake's tag, as its variant's register has it. */
				char *tl = NULL;
				for (int v = 0; v < nv && gtag >= 0; v++) {
					char *one;
					if (asprintf(&one, "%s-%s: %s-%s%s", s->jobs[cj]->name,
					    sfx[v], tags_old[gtag], sfx[v], v + 1 < nv ? "; " : "") == -1)
						fatal("spec_expand");
					cat(&tl, one);
					free(one);
				}
				if (tl != NULL)
					kv_push(o, "sweep_tags", tl, spec_find(o, "tag")->line);
				free(tl);
				o->sweep_any = 1;
			}
		}
		jobs[n++] = o;
	}
	free(pick);
	for (int j = 0; j < s->njobs; j++)
		if (swept[j] || j == pj)
			spec_section_free(s->jobs[j]);
	free(mk);
	free(vprobe);
	free(tval);
	strv_free(tup);
	strv_free(tsfx);
	free(tfirst);
	free(s->jobs);
	s->jobs = jobs;
	s->njobs = n;
	for (int t = 0; t < ntags; t++) {
		free(tags_old[t]);
		free(tags_new[t]);
	}
	free(tags_old);
	free(tags_new);
	strv_free(sfx);
	free(swept);
	keys_free(keys, nkeys);
	return 0;
}

struct spec *
spec_load(const char *path, const char *text, const struct conf *c, char **errs)
{
	int max_bytes = c ? c->max_spec_bytes : CONF_MAX_SPEC_BYTES;
	int max_jobs = c ? c->max_spec_jobs : CONF_MAX_SPEC_JOBS;
	size_t len = strlen(text);
	if (len > (size_t)max_bytes) {
		errs_add(errs, path, 0, "max_spec_bytes", "the spec is %zu bytes, more than the "
		    "limit of %d (max_spec_bytes: %s; pipelined.conf(5))", len, max_bytes,
		    limit_from(c));
		return NULL;
	}
	struct spec *s = spec_parse(path, text, errs);
	if (s != NULL && spec_expand(s, c, errs) == -1) {
		spec_free(s);
		return NULL;
	}
	/* A sweep's jobs, once expanded here, count against the limit. */
	if (s != NULL && s->njobs > max_jobs) {
		errs_add(errs, path, 0, "max_spec_jobs", "the spec has %d jobs, more than the "
		    "limit of %d (max_spec_jobs: %s; pipelined.conf(5))", s->njobs, max_jobs,
		    limit_from(c));
		spec_free(s);
		return NULL;
	}
	return s;
}
