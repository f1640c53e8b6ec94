/* test_core_spec.c: run-spec parsing (spec.c): names, keys with their
 * lines, long lines past inih's limit, continuation lines, errors. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pld.h"
#include "host.h"
#include "runner.h"

static void
case_parse(void)
{
	char *errs = NULL;
	char longcmd[3000];
	memset(longcmd, 'x', sizeof(longcmd) - 1);
	longcmd[sizeof(longcmd) - 1] = '\0';
	char text[8192];
	snprintf(text, sizeof(text),
	    "# comment\n[run]\nprevious = v17\n\n[train]\nresources = gpu\ncommand = %s\n"
	    "[merge]\nafter = train\nnote = first\n  second line\nx = a ; inline comment\n",
	    longcmd);
	struct spec *s = spec_parse("/specs/v18.ini", text, &errs);
	CHECK(s != NULL && errs == NULL);
	if (s == NULL)
		return;
	CHECK(strcmp(s->name, "v18") == 0);             /* from the file name */
	CHECK(strcmp(s->previous, "v17") == 0);
	CHECK(strcmp(s->dir, "/specs") == 0);
	CHECK(s->njobs == 2);
	const struct spec_kv *kv = spec_find(s->jobs[0], "command");
	CHECK(kv && kv->line == 7 && strcmp(kv->value, longcmd) == 0);
	CHECK(strcmp(spec_get(s->jobs[1], "note"), "first\nsecond line") == 0);
	/* A ';' is part of the value: no inline comments in values. */
	CHECK(strcmp(spec_get(s->jobs[1], "x"), "a ; inline comment") == 0);
	CHECK(spec_find(s->jobs[1], "after")->line == 9);
	spec_free(s);
}

static void
case_comments(void)
{
	char *errs = NULL;
	char longcmd[3000];
	char text[8192];
	struct spec *s;

	memset(longcmd, 'x', sizeof(longcmd) - 1);
	longcmd[sizeof(longcmd) - 1] = '\0';
	/* Long lines with ';' keep it too; comment lines are still comments. */
	snprintf(text, sizeof(text), "[a]\n; a comment\n# another\nk = %s ; tail\nc = make ; make install\n", longcmd);
	s = spec_parse("t.ini", text, &errs);
	char want[3100];
	snprintf(want, sizeof(want), "%s ; tail", longcmd);
	CHECK(s && strcmp(spec_get(s->jobs[0], "k"), want) == 0);
	CHECK(s && strcmp(spec_get(s->jobs[0], "c"), "make ; make install") == 0);
	CHECK(s && s->jobs[0]->nkv == 2);
	spec_free(s);
}

static void
case_errors(void)
{
	char *errs = NULL;
	struct spec *s;

	/* Errors: duplicate key and section, with both lines. */
	s = spec_parse("d.ini", "[a]\nk = 1\nk = 2\n[a]\n", &errs);
	CHECK(s == NULL);
	CHECK(errs && strstr(errs, "d.ini:3: k: duplicate key (first at line 2)"));
	CHECK(errs && strstr(errs, "d.ini:4: -: section [a] appears twice (first at line 1)"));
	free(errs);
	errs = NULL;
	s = spec_parse("e.ini", "[a]\nthis line has no equals sign\n", &errs);
	CHECK(s == NULL && errs && strstr(errs, "e.ini:2: -: syntax error"));
	free(errs);
	errs = NULL;
}

static void
case_bad_lines(void)
{
	char *errs = NULL;
	char text[8192];
	struct spec *s;

	/* Lines that are no key, long, holding a ';' or neither, each reported
	 * on its own line with its own text (a long one cut): the reader once
	 * copied 198 bytes of any such line, gluing the next lines into the
	 * message and reading past the end of the text. */
	char ys[301], ks[251];
	memset(ys, 'y', sizeof(ys) - 1);
	ys[sizeof(ys) - 1] = '\0';
	memset(ks, 'k', sizeof(ks) - 1);
	ks[sizeof(ks) - 1] = '\0';
	snprintf(text, sizeof(text), "[a]\nstage = exec\necho a; echo b\ncommand = true\n%s\n"
	    "%s = v\nplain words\n# a comment; not an error\necho c; echo d", ys, ks);
	s = spec_parse("n.ini", text, &errs);
	char want_errs[2048];
#define SYN "syntax error (expected [section] or key = value): "
	snprintf(want_errs, sizeof(want_errs),
	    "n.ini:3: -: " SYN "echo a; echo b\n"
	    "n.ini:5: -: " SYN "%.60s...\n"
	    "n.ini:6: -: " SYN "%.60s...\n"
	    "n.ini:7: -: " SYN "plain words\n"
	    "n.ini:9: -: " SYN "echo c; echo d\n", ys, ks);
#undef SYN
	CHECK(s == NULL && errs && strcmp(errs, want_errs) == 0);
	if (errs && strcmp(errs, want_errs) != 0)
		fprintf(stderr, "got:\n%swant:\n%s", errs, want_errs);
	free(errs);
	errs = NULL;
}

static void
case_no_dir(void)
{
	char *errs = NULL;
	struct spec *s;

	/* A path without a directory: the spec's directory is ".", also for
	 * an empty path (whose copy had no room for it). */
	s = spec_parse("", "[a]\nk = v\n", &errs);
	CHECK(s != NULL && strcmp(s->dir, ".") == 0);
	spec_free(s);
}

static void
case_check(void)
{
	char *errs = NULL;
	struct spec *s;

	/* The check without plugins: every stage is unknown, cycles found. */
	s = spec_parse("c.ini", "[run]\nname = bad name\n[a]\nafter = b\n[b]\nafter = a\n", &errs);
	CHECK(s != NULL);
	CHECK(spec_check(s, NULL, host_check_section, 0, &errs) == -1);
	CHECK(errs && strstr(errs, "c.ini:2: name: bad run name \"bad name\""));
	CHECK(errs && strstr(errs, "unknown stage \"a\" in [a]"));
	CHECK(errs && strstr(errs, "dependency cycle: a -> b -> a"));
	spec_free(s);
	free(errs);
}

static void
case_errs_cap(void)
{
	char *errs;

	/* Past 100 errors only their number is kept; appending is linear. */
	errs = NULL;
	for (int i = 0; i < 40000; i++)
		errs_add(&errs, "m.ini", i + 1, "k", "error %d", i);
	int nl = 0;
	for (const char *q = errs; *q; q++)
		nl += *q == '\n';
	CHECK(nl == 101);
	CHECK(strstr(errs, "m.ini:100: k: error 99\n... and 39900 more errors\n") != NULL);
	/* A list written elsewhere in between is measured again. */
	char *other = NULL;
	errs_add(&other, "o.ini", 0, NULL, "whole file");
	CHECK(other && strcmp(other, "o.ini: -: whole file\n") == 0);
	errs_add(&errs, "m.ini", 1, "k", "one more");
	CHECK(strstr(errs, "... and 39901 more errors\n") != NULL);
	free(other);
	free(errs);
}

/* Long messages and hints: cut with "..." (plc_sb), each still one line;
 * a did-you-mean of a long word is cut the same way. */
static void
case_long_message(void)
{
	char *errs = NULL;
	char big[3000];
	memset(big, 'v', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	errs_add(&errs, "m.ini", 4, "k", "bad value \"%s\": expected an integer", big);
	CHECK(errs != NULL && strncmp(errs, "m.ini:4: k: bad value \"vvv", 26) == 0);
	size_t n = errs ? strlen(errs) : 0;
	CHECK(n > 4 && n < 1100 && strcmp(errs + n - 4, "...\n") == 0, "got %zu bytes", n);
	free(errs);
	/* A short one is whole. */
	errs = NULL;
	errs_add(&errs, "m.ini", 4, "k", "%s", "short");
	CHECK(errs && strcmp(errs, "m.ini:4: k: short\n") == 0);
	free(errs);
	struct suggest sg = { .word = "abcdefghij" };
	suggest_try(&sg, "abcdefghik");
	char hint[16];
	CHECK(strcmp(suggest_hint(&sg, hint, sizeof(hint)), "; did you me...") == 0, "%s", hint);
	struct suggest none = { .word = "zzz" };
	CHECK(strcmp(suggest_hint(&none, hint, sizeof(hint)), "") == 0);
}

/* spec_load: the size limit before parsing, the job limit after it,
 * each error naming its key; at a limit a spec passes; NULL: defaults. */
static void
case_limits(void)
{
	struct conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.path, sizeof(c.path), "/etc/p.conf");
	c.max_spec_bytes = 64;
	c.max_spec_jobs = 2;
	char *errs = NULL;
	struct spec *s = spec_load("l.ini", "[a]\nk=1\n[b]\nk=1\n", &c, &errs);
	CHECK(s != NULL && s->njobs == 2 && errs == NULL);
	spec_free(s);
	s = spec_load("l.ini", "[a]\nk=1\n[b]\nk=1\n[c]\nk=1\n", &c, &errs);
	CHECK(s == NULL && errs != NULL && strcmp(errs, "l.ini: max_spec_jobs: the spec has 3 jobs, "
	    "more than the limit of 2 (max_spec_jobs: /etc/p.conf; pipelined.conf(5))\n") == 0,
	    "%s", errs);
	free(errs);
	errs = NULL;
	/* Over the size limit, even with a syntax error: not parsed at all. */
	char text[80];
	memset(text, 'x', 65);
	text[65] = '\0';
	s = spec_load("l.ini", text, &c, &errs);
	CHECK(s == NULL && errs != NULL && strstr(errs, "l.ini: max_spec_bytes: the spec is 65 "
	    "bytes, more than the limit of 64") == errs && strchr(errs, '\n')[1] == '\0', "%s", errs);
	free(errs);
	errs = NULL;
	/* The defaults without a configuration. */
	size_t cap = (CONF_MAX_SPEC_JOBS + 1) * 16;
	char *many = malloc(cap), *w = many;
	for (int i = 0; i <= CONF_MAX_SPEC_JOBS; i++)
		w += sprintf(w, "[j%d]\nk=1\n", i);
	s = spec_load("m.ini", many, NULL, &errs);
	CHECK(s == NULL && errs && strstr(errs, "more than the limit of 10000 (max_spec_jobs: "
	    "the default;") != NULL, "%s", errs);
	free(errs);
	free(many);
}

static void
case_chain(void)
{
	char *errs;
	struct spec *s;

	/* A chain of 100,000 jobs is checked without recursion. */
	size_t cap = 100000 * 40;
	char *big = malloc(cap), *w = big;
	for (int i = 0; i < 100000; i++)
		w += sprintf(w, i ? "[j%d]\nafter = j%d\n" : "[j%d]\nx = 1\n", i, i - 1);
	errs = NULL;
	s = spec_parse("chain.ini", big, &errs);
	CHECK(s != NULL && s->njobs == 100000);
	CHECK(spec_check(s, NULL, host_check_section, 0, &errs) == -1);   /* unknown stages, no cycle */
	CHECK(errs && strstr(errs, "cycle") == NULL && strstr(errs, "more errors"));
	spec_free(s);
	free(errs);
	free(big);
}

/* A sweep: the swept job and those on a path from it to the gate's
 * candidate are made once per variant; the jobs before it, the gate and
 * a job after the candidate that only orders on it stay shared. */
static void
case_sweep(void)
{
	char *errs = NULL;
	const char *text =
	    "[tokenize]\nx = 1\n"
	    "[train]\nafter = tokenize\ntokens = tokenize.tokens\nlora_r = 8\n"
	    "sweep = lora_r: 16 64; lora_alpha: 8 32\n"
	    "[register]\nafter = train\nadapter = train.adapter\ntag = router:v2\n"
	    "[bake]\nafter = register\nmodel = router:v2\n"
	    "[bake-incumbent]\nstage = bake\nafter = bake\nmodel = router:v1\n"
	    "[gate]\nafter = bake, bake-incumbent\n";
	struct spec *s = spec_load("sw.ini", text, NULL, &errs);
	CHECK(s != NULL && errs == NULL);
	if (s == NULL) {
		fprintf(stderr, "%s", errs ? errs : "");
		free(errs);
		return;
	}
	/* tokenize, 4 x (train, register, bake), bake-incumbent, gate */
	CHECK(s->njobs == 15);
	CHECK(s->nvariants == 4 && strcmp(s->sweep_job, "train") == 0 && s->sweep_line == 7);
	CHECK(strcmp(s->variant_values[1], "lora_r=16 lora_alpha=32") == 0);
	CHECK(strcmp(s->variant_suffix[1], "r16-alpha32") == 0);
	CHECK(strcmp(s->jobs[0]->name, "tokenize") == 0 && s->jobs[0]->vindex == 0);
	const struct spec_section *t = s->jobs[4];
	CHECK(strcmp(t->name, "train-r16-alpha32") == 0 && t->vindex == 2);
	CHECK(strcmp(t->origin, "train") == 0 && strcmp(t->variant, "lora_r=16 lora_alpha=32") == 0);
	CHECK(strcmp(spec_get(t, "lora_r"), "16") == 0 && spec_find(t, "lora_r")->line == 7);
	CHECK(strcmp(spec_get(t, "lora_alpha"), "32") == 0);
	CHECK(spec_find(t, "sweep") == NULL);
	CHECK(strcmp(spec_get(t, "stage"), "train") == 0);
	CHECK(strcmp(spec_get(t, "tokens"), "tokenize.tokens") == 0);
	const struct spec_section *r = s->jobs[5], *b = s->jobs[6];
	CHECK(strcmp(r->name, "register-r16-alpha32") == 0);
	CHECK(strcmp(spec_get(r, "after"), "train-r16-alpha32") == 0);
	CHECK(strcmp(spec_get(r, "adapter"), "train-r16-alpha32.adapter") == 0);
	CHECK(strcmp(spec_get(r, "tag"), "router:v2-r16-alpha32") == 0);
	CHECK(strcmp(spec_get(b, "model"), "router:v2-r16-alpha32") == 0);
	const struct spec_section *inc = s->jobs[13], *g = s->jobs[14];
	CHECK(strcmp(inc->name, "bake-incumbent") == 0 && inc->vindex == 0);
	CHECK(strcmp(spec_get(inc, "after"), "bake-r16-alpha8, bake-r16-alpha32, bake-r64-alpha8, "
	    "bake-r64-alpha32") == 0);
	CHECK(strcmp(g->name, "gate") == 0);
	CHECK(strcmp(spec_get(g, "candidate"), "bake-r16-alpha8 bake-r16-alpha32 bake-r64-alpha8 "
	    "bake-r64-alpha32") == 0);
	CHECK(strcmp(spec_get(g, "sweep_values"), "bake-r16-alpha8: lora_r=16 lora_alpha=8; "
	    "bake-r16-alpha32: lora_r=16 lora_alpha=32; bake-r64-alpha8: lora_r=64 lora_alpha=8; "
	    "bake-r64-alpha32: lora_r=64 lora_alpha=32") == 0);
	CHECK(spec_get(g, "sweep_tags") == NULL);
	spec_free(s);

	/* A gate that names the register's tag promotes the winner's. */
	s = spec_load("sw.ini", "[train]\nsweep = lora_r: 8 16\n[register]\nafter = train\n"
	    "tag = router:v2\n[bake]\nafter = register\n[gate]\nafter = bake\n"
	    "tag = router:v2\n", NULL, &errs);
	CHECK(s != NULL && s->njobs == 7);
	CHECK(s && strcmp(spec_get(s->jobs[6], "sweep_tags"), "bake-r8: router:v2-r8; "
	    "bake-r16: router:v2-r16") == 0);
	spec_free(s);

	/* Values a name cannot hold: the variants are numbered. */
	s = spec_load("sw.ini", "[train]\nsweep = lora_dropout: 0.05 0.1\n[bake]\nafter = train\n",
	    NULL, &errs);
	CHECK(s != NULL && s->njobs == 4 && strcmp(s->jobs[0]->name, "train-1") == 0 &&
	    strcmp(s->jobs[1]->name, "bake-1") == 0 && strcmp(s->jobs[3]->name, "bake-2") == 0);
	CHECK(s && strcmp(spec_get(s->jobs[3], "after"), "train-2") == 0);
	spec_free(s);
	free(errs);
}

/* A sweep's bad input, each error at its file:line. */
static void
case_sweep_errors(void)
{
	struct conf c;
	char *errs = NULL;
	struct spec *s;
#define REFUSED(text, conf, want) do { \
	errs = NULL; \
	s = spec_load("e.ini", text, conf, &errs); \
	CHECK(s == NULL && errs != NULL && strstr(errs, want) != NULL); \
	if (s != NULL || errs == NULL || strstr(errs, want) == NULL) \
		fprintf(stderr, "want %s\ngot %s\n", want, errs ? errs : "(none)"); \
	spec_free(s); \
	free(errs); \
} while (0)
	REFUSED("[train]\nsweep = lora_r:\n", NULL,
	    "e.ini:2: sweep: lora_r: an empty list of values");
	REFUSED("[train]\n\nsweep = lora_r 16 64\n", NULL,
	    "e.ini:3: sweep: expected KEY: V1 V2 ..., not \"lora_r 16 64\"");
	REFUSED("[train]\nsweep = \n", NULL, "e.ini:2: sweep: an empty sweep");
	REFUSED("[train]\nsweep = after: a b\n", NULL, "e.ini:2: sweep: cannot sweep after");
	REFUSED("[train]\nsweep = lora_r: 1 2; lora_r: 3\n", NULL, "lora_r is swept twice");
	REFUSED("[train]\nsweep = lora_r: 1 2 1\n", NULL, "lora_r: the value 1 appears twice");
	REFUSED("[a]\nsweep = k: 1 2\n[b]\nsweep = k: 1 2\n", NULL,
	    "e.ini:4: sweep: one sweep per spec: [a] sweeps already (line 2)");
	/* 17 variants: over the default max_variants of 16. */
	REFUSED("[train]\nsweep = a: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n", NULL,
	    "e.ini:2: sweep: 17 variants, more than max_variants (16)");
	REFUSED("[run]\nmax_variants = 2\n[train]\nsweep = a: 1 2; b: 1 2\n", NULL,
	    "e.ini:4: sweep: 4 variants, more than max_variants (2)");
	memset(&c, 0, sizeof(c));
	snprintf(c.path, sizeof(c.path), "/etc/p.conf");
	c.max_spec_bytes = CONF_MAX_SPEC_BYTES;
	c.max_spec_jobs = CONF_MAX_SPEC_JOBS;
	c.max_variants = 4;
	REFUSED("[run]\nmax_variants = 5\n[train]\nsweep = a: 1 2\n", &c,
	    "e.ini:2: max_variants: 5 is above the ceiling of 4 (max_variants: /etc/p.conf;");
	/* Under the ceiling, the default is the ceiling. */
	REFUSED("[train]\nsweep = a: 1 2 3 4 5\n", &c, "5 variants, more than max_variants (4)");
	/* The job limit counts the expanded jobs. */
	c.max_variants = 64;
	c.max_spec_jobs = 5;
	REFUSED("[t]\nsweep = a: 1 2 3\n[u]\nafter = t\n", &c,
	    "e.ini: max_spec_jobs: the spec has 6 jobs, more than the limit of 5");
	/* A shared job cannot name one swept job's artifact. */
	REFUSED("[train]\nsweep = a: 1 2\n[bake]\nafter = train\n[gate]\nafter = bake\n"
	    "[report]\nafter = gate\ninput = train.adapter\n", NULL,
	    "e.ini:9: input: names train, which the sweep in [train] makes once per variant");
	/* A gate's tag to promote that no variant registers. */
	REFUSED("[train]\nsweep = a: 1 2\n[register]\nafter = train\ntag = r:v2\n[bake]\n"
	    "after = register\n[gate]\nafter = bake\ntag = r:v1\n", NULL,
	    "e.ini:10: tag: r:v1 is no tag a variant of the sweep in [train] registers");
#undef REFUSED
}

/* A sweep over a memory key after a probe: the probe runs once per
 * distinct value of the memory keys (lora_r), not per variant, with
 * prune = yes; each variant's train runs after its own probe and takes
 * its calibration pair from it; a smaller set's probe after the larger
 * one's (fits_if). */
static void
case_sweep_probe(void)
{
	char *errs = NULL;
	struct spec *s = spec_load("p.ini", "[probe]\nlora_r = 32\nbudget_mb = 64\n"
	    "[train]\nafter = probe\nsweep = lora_r: 8 4096; lora_alpha: 8 16\n"
	    "[bake]\nafter = train\n", NULL, &errs);
	CHECK(s != NULL && errs == NULL);
	if (s == NULL) {
		fprintf(stderr, "%s", errs ? errs : "");
		free(errs);
		return;
	}
	CHECK(s->njobs == 10);
	const struct spec_section *p0 = s->jobs[0], *p1 = s->jobs[1], *t3 = s->jobs[6];
	CHECK(strcmp(p0->name, "probe-r8") == 0 && strcmp(p1->name, "probe-r4096") == 0);
	CHECK(p0->sweep_probe && p0->vindex == 0 && strcmp(p1->variant, "lora_r=4096") == 0);
	CHECK(strcmp(spec_get(p1, "lora_r"), "4096") == 0 && spec_find(p1, "lora_r")->line == 6);
	CHECK(strcmp(spec_get(p1, "prune"), "yes") == 0 && strcmp(spec_get(p1, "budget_mb"), "64") == 0);
	CHECK(strcmp(spec_get(p1, "stage"), "probe") == 0);
	CHECK(strcmp(t3->name, "train-r4096-alpha8") == 0);
	CHECK(strcmp(spec_get(t3, "after"), "probe-r4096") == 0);
	CHECK(strcmp(spec_get(t3, "probe_job"), "probe-r4096") == 0);
	CHECK(strcmp(spec_get(s->jobs[2], "after"), "probe-r8") == 0);
	/* The smaller set's probe runs after the larger's, whose fit is its
	 * own; the largest runs after nothing more. */
	CHECK(spec_get(p0, "after") != NULL && strcmp(spec_get(p0, "after"), "probe-r4096") == 0);
	CHECK(spec_get(p0, "fits_if") != NULL && strcmp(spec_get(p0, "fits_if"), "probe-r4096") == 0);
	CHECK(spec_get(p1, "after") == NULL && spec_get(p1, "fits_if") == NULL);
	for (int j = 0; j < s->njobs; j++)
		CHECK(strcmp(s->jobs[j]->name, "probe") != 0);
	spec_free(s);

	/* Two memory keys: a set is dominated by those with as much or more
	 * of both, not by one with more of one and less of the other. */
	s = spec_load("p.ini", "[probe]\nlora_r = 8\nafter = tok\n[tok]\n[train]\nafter = probe\n"
	    "sweep = lora_r: 8 16; per_device_train_batch_size: 2 1\n", NULL, &errs);
	CHECK(s != NULL);
	int seen = 0;
	for (int j = 0; s != NULL && j < s->njobs; j++) {
		const struct spec_section *p = s->jobs[j];
		const char *a = spec_get(p, "after"), *f = spec_get(p, "fits_if");
		if (!p->sweep_probe)
			continue;
		seen++;
		if (strcmp(p->name, "probe-r8-size2") == 0)
			CHECK(f && strcmp(f, "probe-r16-size2") == 0 &&
			    strcmp(a, "tok, probe-r16-size2") == 0);
		else if (strcmp(p->name, "probe-r8-size1") == 0)
			CHECK(f && strcmp(f, "probe-r8-size2, probe-r16-size2, probe-r16-size1") == 0);
		else if (strcmp(p->name, "probe-r16-size1") == 0)
			CHECK(f && strcmp(f, "probe-r16-size2") == 0);
		else if (strcmp(p->name, "probe-r16-size2") == 0)
			CHECK(f == NULL && strcmp(a, "tok") == 0);
		else
			CHECK(!"an unexpected probe copy");
	}
	CHECK(seen == 4);
	spec_free(s);

	/* A sweep over keys no probe depends on: the probe stays one. */
	s = spec_load("p.ini", "[probe]\nlora_r = 8\n[train]\nafter = probe\nsweep = lora_alpha: 8 16\n",
	    NULL, &errs);
	CHECK(s != NULL && s->njobs == 3 && strcmp(s->jobs[0]->name, "probe") == 0);
	CHECK(s && strcmp(spec_get(s->jobs[1], "after"), "probe") == 0);
	spec_free(s);
	free(errs);
}

/* A check without files (SPEC_CHECK_NOFILES, a restart's) opens no path
 * the spec names, through the real plugins: neither the host's check of a
 * PL_KEY_FILE or PL_KEY_DIR key nor the probes of tokenize's and bake's
 * check hooks (plugins/lib/check, the capability list); the rules that
 * span keys are still checked. With files, each path's problem is told. */
static void
case_check_nofiles(void)
{
	char dir[PATH_MAX], p[PATH_MAX], why[256], text[8192];
	const char *t = getenv("TEST_TMP"), *top = getenv("TOP");
	char *errs = NULL;
	struct spec *s;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/nofiles.XXXXXX", t ? t : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(p, sizeof(p), "%s/empty", dir);
	CHECK(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/bad.jsonl", dir);
	CHECK((f = fopen(p, "w")) != NULL && fputs("not json\n", f) >= 0 && fclose(f) == 0);
	for (int i = 0; i < 2; i++) {
		const char *so[] = { "tokenize", "bake" };
		snprintf(p, sizeof(p), "%s/plugins/%s.so", top ? top : ".", so[i]);
		if (plugin_load(p, &plugin_host, why, sizeof(why)) == -1)
			fprintf(stderr, "%s: %s\n", p, why);
		CHECK(plugin_stage(so[i]) != NULL);
	}
	snprintf(text, sizeof(text),
	    "[tok]\nstage = tokenize\nbase = %s/empty\ncorpus = %s/bad.jsonl\n"
	    "num_ctx = 100\nnum_ctx_margin = 200\n"
	    "[tok2]\nstage = tokenize\nbase = %s/missing\ncorpus = %s/missing.jsonl\n"
	    "[bake]\nstage = bake\nmodel = m\ncases = %s/bad.jsonl\nsystem = %s/bad.jsonl\n"
	    "capabilities = %s/bad.jsonl\n", dir, dir, dir, dir, dir, dir, dir);

	s = spec_parse("nf.ini", text, &errs);
	CHECK(s != NULL && spec_check(s, NULL, host_check_section, 0, &errs) == -1);
	CHECK(errs && strstr(errs, "nf.ini:5: num_ctx: 100 leaves no room"));
	CHECK(errs && strstr(errs, "/empty/config.json: No such file or directory"));
	CHECK(errs && strstr(errs, "/bad.jsonl:1: not a JSON object"));
	CHECK(errs && strstr(errs, "base: ") && strstr(errs, "/missing: No such file or directory"));
	CHECK(errs && strstr(errs, "/missing.jsonl: No such file or directory"));
	CHECK(errs && strstr(errs, "nf.ini:16: capabilities: ") && strstr(errs, "unknown flag"));
	spec_free(s);
	free(errs);
	errs = NULL;

	s = spec_parse("nf.ini", text, &errs);
	CHECK(s != NULL && spec_check(s, NULL, host_check_section, SPEC_CHECK_NOFILES,
	    &errs) == -1);
	CHECK(errs && strstr(errs, "nf.ini:5: num_ctx: 100 leaves no room"));
	CHECK(errs && strstr(errs, dir) == NULL);
	spec_free(s);
	free(errs);
	errs = NULL;

	/* Without files, a spec that breaks no other rule passes whole. */
	snprintf(text, sizeof(text),
	    "[tok2]\nstage = tokenize\nbase = %s/missing\ncorpus = %s/missing.jsonl\n"
	    "[bake]\nstage = bake\nmodel = m\ncases = %s/bad.jsonl\nsystem = %s/bad.jsonl\n"
	    "capabilities = %s/bad.jsonl\nafter = tok2\n", dir, dir, dir, dir, dir);
	s = spec_parse("nf.ini", text, &errs);
	CHECK(s != NULL && spec_check(s, NULL, host_check_section, SPEC_CHECK_NOFILES,
	    &errs) == 0 && errs == NULL);
	spec_free(s);
	free(errs);
	errs = NULL;
	s = spec_parse("nf.ini", text, &errs);
	CHECK(s != NULL && spec_check(s, NULL, host_check_section, 0, &errs) == -1);
	spec_free(s);
	free(errs);
}

static const struct unit_case cases[] = {
	UNIT_CASE(parse),
	UNIT_CASE(comments),
	UNIT_CASE(errors),
	UNIT_CASE(bad_lines),
	UNIT_CASE(no_dir),
	UNIT_CASE(check),
	UNIT_CASE(check_nofiles),
	UNIT_CASE(errs_cap),
	UNIT_CASE(long_message),
	UNIT_CASE(limits),
	UNIT_CASE(chain),
	UNIT_CASE(sweep),
	UNIT_CASE(sweep_errors),
	UNIT_CASE(sweep_probe),
	UNIT_END
};

int
main(int argc, char **argv)
{
	return unit_main(argc, argv, cases);
}
