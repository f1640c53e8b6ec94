/*
 * corpus_check.c: the corpus_check stage. Reads the training corpus as data,
 * one line at a time, before 12 hours of training are spent on it, and
 * reports the mistakes the reference paid for (pipeline-gotchas(7)), each
 * with the example's key and line:
 *
 *   structure       lines that are not an example, duplicate keys, roles
 *                   out of order, targets that are not the routing call
 *   system_prompt   examples whose system prompt is not the one most share
 *   conflicts       one request (normalised) with different target calls (F14)
 *   near_conflicts  near-identical requests with different capabilities
 *   duplicates      one request with the same call more than once
 *   near_duplicates near-identical requests with the same capability
 *   coverage        capabilities of the enum without examples or with fewer
 *                   than min_examples (F27)
 *   unknown_capability  targets naming a capability outside the enum (F19)
 *   guards          the share of guard targets, counterweights per surface
 *                   form (F13), guard cases without guard targets (F12)
 *   leakage         bake cases the corpus holds: by train key (they leave
 *                   the fair slice) and by text without one (F11)
 *
 * Each check has a policy key: fail, warn or off. Near-identical is the
 * Jaccard similarity of the requests' normalised word sets at or above
 * near_threshold, searched among LSH candidates (corpus.h): bounded work
 * per example, memory per example and not per byte of prompt.
 *
 * With a previous version (the run's previous, or the key), the corpus is
 * compared with that run's index: examples added, removed and changed per
 * capability, bake cases added, removed and changed.
 *
 * Artifacts: "corpus" (the file checked, for tokenize), "findings"
 * (findings.jsonl), "index" (index.jsonl: key, capability and content
 * hash of every example, id and hash of every case, what the next version
 * compares with). Values: corpus_check.summary and corpus_check.diff; the
 * event job.corpus_check carries the counts.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "plio.h"
#include "corpus.h"
#include "score.h"

static const struct pl_host *host;

/* The checks, in report order; each has a policy key of its name. */
enum {
	CK_STRUCTURE, CK_SYSTEM, CK_CONFLICTS, CK_NEAR_CONFLICTS, CK_DUPLICATES,
	CK_NEAR_DUPLICATES, CK_COVERAGE, CK_UNKNOWN, CK_GUARDS, CK_LEAKAGE, CK_N
};
static const char *const ck_name[CK_N] = {
	"structure", "system_prompt", "conflicts", "near_conflicts", "duplicates",
	"near_duplicates", "coverage", "unknown_capability", "guards", "leakage"
};
enum { POL_OFF, POL_WARN, POL_FAIL };
static const char *const pol_name[] = { "off", "warn", "fail" };

/* Candidates one example is compared with per LSH band: what bounds the
 * near-duplicate search on a corpus of templated requests. */
#define NEAR_CAP	32
/* Findings written to findings.jsonl per check; the rest are counted. */
#define FINDINGS_MAX	100000

static const struct pl_key cc_keys[] = {
	PL_KEY_INPUT(.name = "corpus", .flags = PL_KEY_REQUIRED | PL_KEY_FILE, .artifact = "corpus",
	    .help = "the training corpus, JSONL: {\"key\", \"messages\": [...]} per line"),
	PL_KEY_PATH(.name = "cases", .flags = PL_KEY_FILE,
	    .help = "the bake's case file (pipeline-cases(5)): leakage, the enum, guard cases"),
	PL_KEY_PATH(.name = "capabilities", .flags = PL_KEY_FILE,
	    .help = "the capability list (pipeline-cases(5)): the enum the coverage checks"),
	PL_KEY_INT(.name = "min_examples", .def = "3", .flags = PL_KEY_MIN, .min = 1,
	    .help = "fewest examples a capability of the enum should have"),
	PL_KEY_FLOAT(.name = "near_threshold", .def = "0.8",
	    .help = "word-set Jaccard similarity from which two requests are near-identical"),
	PL_KEY_LIST(.name = "guard_capabilities", .def = "clarify refuse",
	    .help = "capabilities whose targets do not act (guard targets)"),
	PL_KEY_FLOAT(.name = "max_guard_share", .def = "0.5",
	    .help = "largest share of guard targets before over-refusal is reported (F13)"),
	PL_KEY_FLOAT(.name = "min_counterweights", .def = "0.25",
	    .help = "acting examples per guard example of the same surface form (F13)"),
	PL_KEY_INT(.name = "vague_words", .def = "3", .flags = PL_KEY_MIN, .min = 1,
	    .help = "requests of at most this many words have the vague surface form"),
	PL_KEY_STRING(.name = "previous",
	    .help = "the version to compare with: a run, an index.jsonl, or none (default: "
	    "[run] previous)"),
	PL_KEY_INT(.name = "max_listed", .def = "20", .flags = PL_KEY_MIN, .min = 0,
	    .help = "findings per check named in the job's log (all are in findings.jsonl)"),
	PL_KEY_STRING(.name = "structure", .def = "fail", .help = "policy: fail, warn or off"),
	PL_KEY_STRING(.name = "system_prompt", .def = "warn",
	    .help = "policy: fail, warn or off"),
	PL_KEY_STRING(.name = "conflicts", .def = "fail", .help = "policy: fail, warn or off"),
	PL_KEY_STRING(.name = "near_conflicts", .def = "warn",
	    .help = "policy: fail, warn or off"),
	PL_KEY_STRING(.name = "duplicates", .def = "warn", .help = "policy: fail, warn or off"),
	PL_KEY_STRING(.name = "near_duplicates", .def = "warn",
	    .help = "policy: fail, warn or off"),
	PL_KEY_STRING(.name = "coverage", .def = "warn", .help = "policy: fail, warn or off"),
	PL_KEY_STRING(.name = "unknown_capability", .def = "fail",
	    .help = "policy: fail, warn or off"),
	PL_KEY_STRING(.name = "guards", .def = "warn", .help = "policy: fail, warn or off"),
	PL_KEY_STRING(.name = "leakage", .def = "warn", .help = "policy: fail, warn or off"),
	PL_KEY_END
};

/* One example, as much as the checks need and no more (about 200 bytes
 * and its key, whatever the prompt's size). */
struct ex {
	char *key;
	int line;
	int cap;		/* index in caps, -1 for none */
	unsigned char bad;	/* a structure problem: out of the content checks */
	unsigned char guard;	/* its target does not act */
	unsigned char fam;	/* CX_FAM_* */
	unsigned char rep;	/* first of its request group */
	unsigned char has_sys;
	unsigned char nsk;
	uint64_t req, tgt, sys, content;
	uint32_t sk[CX_SKETCH];
};

struct band {
	uint64_t key;
	int idx;		/* example, or nex + case */
};

struct pair {
	int a, b;
};

struct cc {
	pl_job *job;
	int pol[CK_N];
	int count[CK_N];
	int listed[CK_N];
	int written[CK_N];
	int max_listed;
	FILE *findings;
	const char *corpus;
	struct ex *ex;
	int nex, capex;
	int lines;
	/* capabilities seen in targets, with counts */
	struct plc_strmap caps;	/* capability name -> index */
	char **capname;
	int *capcount;
	int ncap;
	/* the enum, the cases */
	struct sc_caps en;
	int has_enum;
	struct sc_case *cases;
	int ncases;
	const char *cases_path;
	uint64_t *case_req;
	uint32_t (*case_sk)[CX_SKETCH];
	unsigned char *case_nsk;
	unsigned char *case_leak;	/* 1 equal, 2 near */
	int *case_with;			/* the example it equals or nears */
	double thr;
	/* figures */
	int sys_prompts, sys_major_count;
	int conflict_groups, conflict_examples, dup_groups, dup_examples;
	int near_dup_pairs, near_conflict_pairs;
	int guard_examples, fam_guards[CX_NFAM], fam_counter[CX_NFAM];
	int leak_by_key, leak_equal, leak_near, leak_undeclared;
	char **guard_caps;
	int nguard_caps;
};

static int
policy(const char *v)
{
	for (int i = 0; i < 3; i++)
		if (v != NULL && strcmp(v, pol_name[i]) == 0)
			return i;
	return -1;
}

/* Record a finding of check ck about an example (key and line; key NULL
 * and line 0 for the corpus as a whole): counted, written to
 * findings.jsonl, and named in the log up to max_listed per check. */
static void PL_PRINTF(5, 6)
finding(struct cc *cc, int ck, const char *key, int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (cc->pol[ck] == POL_OFF)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cc->count[ck]++;
	if (cc->listed[ck] < cc->max_listed) {
		char where[256] = "";
		if (key && line)
			snprintf(where, sizeof(where), "example %s (line %d): ", key, line);
		else if (key)
			snprintf(where, sizeof(where), "example %s: ", key);
		else if (line)
			snprintf(where, sizeof(where), "line %d: ", line);
		host->log(cc->job, cc->pol[ck] == POL_FAIL ? PL_LOG_ERROR : PL_LOG_WARN,
		    "corpus_check: %s: %s%s", ck_name[ck], where, msg);
	} else if (cc->listed[ck] == cc->max_listed) {
		host->log(cc->job, PL_LOG_WARN, "corpus_check: %s: more findings in "
		    "findings.jsonl", ck_name[ck]);
	}
	cc->listed[ck]++;
	if (cc->findings != NULL && cc->written[ck] < FINDINGS_MAX) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "check", ck_name[ck]);
		cJSON_AddStringToObject(o, "severity", pol_name[cc->pol[ck]]);
		if (key)
			cJSON_AddStringToObject(o, "key", key);
		if (line)
			cJSON_AddNumberToObject(o, "line", line);
		cJSON_AddStringToObject(o, "message", msg);
		char *t = cJSON_PrintUnformatted(o);
		if (t)
			fprintf(cc->findings, "%s\n", t);
		free(t);
		cJSON_Delete(o);
		cc->written[ck]++;
	}
}

static const char *
capname(const struct cc *cc, int cap)
{
	return cap >= 0 ? cc->capname[cap] : "(none)";
}

static int
is_guard_cap(const struct cc *cc, const char *cap)
{
	for (int i = 0; i < cc->nguard_caps; i++)
		if (strcmp(cc->guard_caps[i], cap) == 0)
			return 1;
	return 0;
}

static int
cc_check(pl_job *job)
{
	double t = host->get_double(job, "near_threshold", 0);
	double s = host->get_double(job, "max_guard_share", 0);
	double w = host->get_double(job, "min_counterweights", 0);

	for (int i = 0; i < CK_N; i++) {
		const char *v = host->get(job, ck_name[i]);
		if (policy(v) < 0)
			host->check_error(job, ck_name[i], "\"%s\" is not fail, warn or off",
			    v ? v : "");
	}
	if (!(t > 0 && t <= 1))
		host->check_error(job, "near_threshold", "%g is not above 0 and at most 1", t);
	if (!(s >= 0 && s <= 1))
		host->check_error(job, "max_guard_share", "%g is not a share (0 to 1)", s);
	if (!(w >= 0))
		host->check_error(job, "min_counterweights", "%g is negative", w);
	return PL_OK;
}

/* ---- reading ---------------------------------------------------------- */

static int
add_example(struct cc *cc, const struct cx_example *x, int line, int bad,
    const char *cap, uint64_t tgt, int vague)
{
	if (cc->nex == cc->capex) {
		int nc = cc->capex ? cc->capex * 2 : 1024;
		struct ex *ne = realloc(cc->ex, (size_t)nc * sizeof(*ne));
		if (ne == NULL)
			return -1;
		cc->ex = ne;
		cc->capex = nc;
	}
	struct ex *e = &cc->ex[cc->nex];
	memset(e, 0, sizeof(*e));
	e->key = x->key ? strdup(x->key) : NULL;
	e->line = line;
	e->bad = (unsigned char)bad;
	e->cap = -1;
	e->sys = x->system_hash;
	e->has_sys = (unsigned char)x->has_system;
	e->content = x->content_hash;
	if (!bad) {
		int added, *slot = plc_strmap_add(&cc->caps, cap, cc->ncap, &added);
		if (slot == NULL)
			return -1;
		int i = *slot;
		if (added) {
			char **nn = realloc(cc->capname, (size_t)(cc->ncap + 1) * sizeof(*nn));
			int *nc = realloc(cc->capcount, (size_t)(cc->ncap + 1) * sizeof(*nc));
			if (nn)
				cc->capname = nn;
			if (nc)
				cc->capcount = nc;
			if (nn == NULL || nc == NULL)
				return -1;
			cc->capname[i] = strdup(cap);
			cc->capcount[i] = 0;
			cc->ncap++;
		}
		cc->capcount[i]++;
		e->cap = i;
		e->tgt = tgt;
		e->req = cx_hash64(x->request, strlen(x->request), 5);
		e->nsk = (unsigned char)cx_sketch(x->request, e->sk);
		e->guard = (unsigned char)is_guard_cap(cc, cap);
		e->fam = (unsigned char)cx_families(x->user, vague);
	}
	cc->nex++;
	return 0;
}

static int
read_corpus(struct cc *cc)
{
	FILE *f = plc_fopen_in(cc->corpus);
	char *line = NULL;
	size_t lcap = 0;
	ssize_t n;
	struct stat st;
	int vague = (int)host->get_int(cc->job, "vague_words", 0), rc = -1;
	off_t done = 0;

	if (f == NULL)
		return host->fail(cc->job, "corpus_check: %s: %s", cc->corpus,
		    plc_open_strerror(errno)),
		    -1;
	if (fstat(fileno(f), &st) == -1)
		st.st_size = 0;
	while ((n = getline(&line, &lcap, f)) != -1) {
		struct cx_example x;
		char cap[SC_NAME_MAX], why[192];
		uint64_t tgt = 0;
		int bad = 0;

		cc->lines++;
		done += n;
		if ((cc->lines & 4095) == 0) {
			if (host->cancelled(cc->job))
				goto out;
			host->progress(cc->job, (double)done, (double)st.st_size, "bytes");
		}
		if (line[strspn(line, " \t\r\n")] == '\0')
			continue;
		if (cx_parse_line(line, (size_t)n, &x) == -1) {
			finding(cc, CK_STRUCTURE, NULL, cc->lines, "%s", x.why);
			cx_example_free(&x);
			continue;
		}
		if (x.why[0] != '\0') {
			finding(cc, CK_STRUCTURE, x.key, cc->lines, "%s", x.why);
			bad = 1;
		} else if (cx_target(x.target, cap, sizeof(cap), &tgt, why, sizeof(why)) == -1) {
			finding(cc, CK_STRUCTURE, x.key, cc->lines, "%s", why);
			bad = 1;
		}
		int r = add_example(cc, &x, cc->lines, bad, cap, tgt, vague);
		cx_example_free(&x);
		if (r == -1) {
			host->fail(cc->job, "corpus_check: %s:%d: out of memory", cc->corpus,
			    cc->lines);
			goto out;
		}
	}
	if (ferror(f)) {
		host->fail(cc->job, "corpus_check: reading %s: %s", cc->corpus, strerror(errno));
		goto out;
	}
	host->progress(cc->job, (double)st.st_size, (double)st.st_size, "bytes");
	rc = 0;
out:
	free(line);
	fclose(f);
	return rc;
}

/* ---- the checks ---------------------------------------------------------- */

static struct cc *sort_cc;

static int
cmp_key(const void *a, const void *b)
{
	const struct ex *x = &sort_cc->ex[*(const int *)a], *y = &sort_cc->ex[*(const int *)b];
	int c = strcmp(x->key, y->key);
	return c ? c : x->line - y->line;
}

static int
cmp_req(const void *a, const void *b)
{
	const struct ex *x = &sort_cc->ex[*(const int *)a], *y = &sort_cc->ex[*(const int *)b];
	if (x->req != y->req)
		return x->req < y->req ? -1 : 1;
	if (x->tgt != y->tgt)
		return x->tgt < y->tgt ? -1 : 1;
	return x->line - y->line;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int
cmp_band(const void *a, const void *b)
{
	const struct band *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->idx - y->idx;
}

static int
cmp_pair(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	return x->a != y->a ? x->a - y->a : x->b - y->b;
}

/* Keys must be unique: they name the example everywhere after. The
 * sorted order is returned for the comparison with the previous index. */
static int *
check_keys(struct cc *cc, int *nkeyed)
{
	int *ord = malloc(sizeof(int) * (size_t)(cc->nex + 1)), n = 0;
	if (ord == NULL)
		return NULL;
	for (int i = 0; i < cc->nex; i++)
		if (cc->ex[i].key)
			ord[n++] = i;
	sort_cc = cc;
	qsort(ord, (size_t)n, sizeof(int), cmp_key);
	for (int i = 1; i < n; i++) {
		const struct ex *a = &cc->ex[ord[i - 1]], *b = &cc->ex[ord[i]];
		if (strcmp(a->key, b->key) == 0)
			finding(cc, CK_STRUCTURE, b->key, b->line, "duplicate key (first on line %d)",
			    a->line);
	}
	*nkeyed = n;
	return ord;
}

/* The system prompt most examples start with; the others break the
 * shared prefix and teach a prompt the router is not served with. */
static int
check_system(struct cc *cc)
{
	uint64_t *h = malloc(sizeof(*h) * (size_t)(cc->nex + 1));
	int n = 0, best = 0, run = 0;
	uint64_t major = 0;

	if (h == NULL)
		return -1;
	for (int i = 0; i < cc->nex; i++)
		if (!cc->ex[i].bad)
			h[n++] = cc->ex[i].has_sys ? cc->ex[i].sys : 0;
	qsort(h, (size_t)n, sizeof(*h), cmp_u64);
	for (int i = 0; i < n; i++) {
		run = i > 0 && h[i] == h[i - 1] ? run + 1 : 1;
		if (run == 1)
			cc->sys_prompts++;
		if (run > best) {
			best = run;
			major = h[i];
		}
	}
	free(h);
	cc->sys_major_count = best;
	for (int i = 0; i < cc->nex; i++) {
		const struct ex *e = &cc->ex[i];
		uint64_t s = e->has_sys ? e->sys : 0;
		if (!e->bad && s != major)
			finding(cc, CK_SYSTEM, e->key, e->line, "%s (%d of %d examples share "
			    "another)", e->has_sys ? "its system prompt differs from the others'" :
			    "it has no system prompt", best, n);
	}
	return 0;
}

/* Exact groups: one request with different calls is a label conflict
 * (F14), with the same call a duplicate. Marks each group's first
 * example as the group's representative for the near search. */
static int *
check_exact(struct cc *cc, int *nord)
{
	int *ord = malloc(sizeof(int) * (size_t)(cc->nex + 1)), n = 0;
	if (ord == NULL)
		return NULL;
	for (int i = 0; i < cc->nex; i++)
		if (!cc->ex[i].bad)
			ord[n++] = i;
	sort_cc = cc;
	qsort(ord, (size_t)n, sizeof(int), cmp_req);
	for (int i = 0; i < n;) {
		int j = i + 1, calls = 1;
		while (j < n && cc->ex[ord[j]].req == cc->ex[ord[i]].req) {
			if (cc->ex[ord[j]].tgt != cc->ex[ord[j - 1]].tgt)
				calls++;
			j++;
		}
		/* The group is named by its earliest example. */
		int f0 = i;
		for (int k = i + 1; k < j; k++)
			if (cc->ex[ord[k]].line < cc->ex[ord[f0]].line)
				f0 = k;
		struct ex *first = &cc->ex[ord[f0]];
		first->rep = 1;
		if (calls > 1) {
			char list[640];
			size_t o = 0;
			list[0] = '\0';
			for (int k = i; k < j && o < sizeof(list) - 80; k++) {
				const struct ex *e = &cc->ex[ord[k]];
				if (k == f0)
					continue;
				o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s (line %d) -> %s",
				    o ? ", " : "", e->key, e->line, capname(cc, e->cap));
			}
			cc->conflict_groups++;
			cc->conflict_examples += j - i;
			finding(cc, CK_CONFLICTS, first->key, first->line, "-> %s; the same request "
			    "with %d different calls: %s%s", capname(cc, first->cap), calls, list,
			    o >= sizeof(list) - 80 ? ", ..." : "");
		} else if (j - i > 1) {
			cc->dup_groups++;
			cc->dup_examples += j - i - 1;
			for (int k = i; k < j; k++) {
				const struct ex *e = &cc->ex[ord[k]];
				if (k == f0)
					continue;
				finding(cc, CK_DUPLICATES, e->key, e->line, "duplicates example %s "
				    "(line %d): the same request and call", first->key, first->line);
			}
		}
		i = j;
	}
	*nord = n;
	return ord;
}

static int
band_add(struct band **b, size_t *n, size_t *cap, const uint32_t *sk, int nsk, int idx)
{
	uint32_t mh[CX_MINHASH];

	if (nsk == 0)
		return 0;
	if (*n + CX_BANDS > *cap) {
		size_t nc = *cap ? *cap * 2 : 8192;
		struct band *nb = realloc(*b, nc * sizeof(*nb));
		if (nb == NULL)
			return -1;
		*b = nb;
		*cap = nc;
	}
	cx_minhash(sk, nsk, mh);
	for (int i = 0; i < CX_BANDS; i++) {
		uint32_t v[CX_ROWS + 1];
		v[0] = (uint32_t)i;
		memcpy(v + 1, mh + i * CX_ROWS, CX_ROWS * sizeof(uint32_t));
		(*b)[*n].key = cx_hash64(v, sizeof(v), 13);
		(*b)[*n].idx = idx;
		(*n)++;
	}
	return 0;
}

/* Near-identical requests: LSH candidates (examples sharing a band of
 * MinHash values), each compared with at most NEAR_CAP others per band,
 * kept at a word-set Jaccard of near_threshold or more. Pairs of
 * examples are near duplicates (same capability) or near conflicts;
 * pairs of an example and a case are near leakage. */
static int
check_near(struct cc *cc)
{
	struct band *b = NULL;
	struct pair *p = NULL;
	size_t nb = 0, bcap = 0, np = 0, pcap = 0;
	int rc = -1;
	int want_ex = cc->pol[CK_NEAR_CONFLICTS] != POL_OFF ||
	    cc->pol[CK_NEAR_DUPLICATES] != POL_OFF;

	for (int i = 0; i < cc->nex; i++)
		if (cc->ex[i].rep && band_add(&b, &nb, &bcap, cc->ex[i].sk, cc->ex[i].nsk, i) == -1)
			goto out;
	for (int c = 0; c < cc->ncases; c++)
		if (!cc->case_leak[c] && band_add(&b, &nb, &bcap, cc->case_sk[c],
		    cc->case_nsk[c], cc->nex + c) == -1)
			goto out;
	qsort(b, nb, sizeof(*b), cmp_band);
	for (size_t i = 0; i < nb;) {
		size_t j = i + 1;
		while (j < nb && b[j].key == b[i].key)
			j++;
		for (size_t x = i; x < j; x++)
			for (size_t y = x + 1; y < j && y <= x + NEAR_CAP; y++) {
				int a = b[x].idx, c = b[y].idx;	/* a < c */
				if (a >= cc->nex || (c < cc->nex && !want_ex))
					continue;
				const uint32_t *ska = cc->ex[a].sk, *skc;
				int na = cc->ex[a].nsk, nc;
				if (c < cc->nex) {
					skc = cc->ex[c].sk;
					nc = cc->ex[c].nsk;
				} else {
					skc = cc->case_sk[c - cc->nex];
					nc = cc->case_nsk[c - cc->nex];
				}
				if (cx_jaccard(ska, na, skc, nc) < cc->thr)
					continue;
				if (np == pcap) {
					size_t ncap = pcap ? pcap * 2 : 1024;
					struct pair *q = realloc(p, ncap * sizeof(*q));
					if (q == NULL)
						goto out;
					p = q;
					pcap = ncap;
				}
				p[np].a = a;
				p[np].b = c;
				np++;
			}
		i = j;
	}
	qsort(p, np, sizeof(*p), cmp_pair);
	for (size_t i = 0; i < np; i++) {
		if (i > 0 && p[i].a == p[i - 1].a && p[i].b == p[i - 1].b)
			continue;
		const struct ex *x = &cc->ex[p[i].a];
		if (p[i].b >= cc->nex) {
			int c = p[i].b - cc->nex;
			if (!cc->case_leak[c]) {
				cc->case_leak[c] = 2;
				cc->case_with[c] = p[i].a;
			}
			continue;
		}
		const struct ex *y = &cc->ex[p[i].b];
		double jac = cx_jaccard(x->sk, x->nsk, y->sk, y->nsk);
		if (x->cap != y->cap) {
			cc->near_conflict_pairs++;
			finding(cc, CK_NEAR_CONFLICTS, y->key, y->line, "-> %s; near-identical to "
			    "example %s (line %d) -> %s (similarity %.2f)", capname(cc, y->cap),
			    x->key, x->line, capname(cc, x->cap), jac);
		} else {
			cc->near_dup_pairs++;
			finding(cc, CK_NEAR_DUPLICATES, y->key, y->line, "near-identical to example "
			    "%s (line %d), both -> %s (similarity %.2f)", x->key, x->line,
			    capname(cc, x->cap), jac);
		}
	}
	rc = 0;
out:
	free(b);
	free(p);
	if (rc == -1)
		host->fail(cc->job, "corpus_check: the near-duplicate search: out of memory");
	return rc;
}

/* The cases: their requests, exact matches against the examples'. */
static int
load_cases(struct cc *cc, const int *byreq, int nbyreq)
{
	char err[512];

	if (cc->cases_path == NULL)
		return 0;
	if (sc_cases_load(cc->cases_path, cc->has_enum ? &cc->en : NULL, &cc->cases,
	    &cc->ncases, err, sizeof(err)) == -1)
		return host->fail(cc->job, "corpus_check: %s", err), -1;
	size_t n = (size_t)cc->ncases + 1;
	cc->case_req = calloc(n, sizeof(*cc->case_req));
	cc->case_sk = calloc(n, sizeof(*cc->case_sk));
	cc->case_nsk = calloc(n, 1);
	cc->case_leak = calloc(n, 1);
	cc->case_with = calloc(n, sizeof(int));
	if (!cc->case_req || !cc->case_sk || !cc->case_nsk || !cc->case_leak || !cc->case_with)
		return host->fail(cc->job, "corpus_check: out of memory"), -1;
	for (int c = 0; c < cc->ncases; c++) {
		char *rq = cx_case_request(cc->cases[c].setup, cc->cases[c].user);
		if (rq == NULL)
			return host->fail(cc->job, "corpus_check: out of memory"), -1;
		cc->case_req[c] = cx_hash64(rq, strlen(rq), 5);
		cc->case_nsk[c] = (unsigned char)cx_sketch(rq, cc->case_sk[c]);
		free(rq);
		int lo = 0, hi = nbyreq;
		while (lo < hi) {
			int mid = (lo + hi) / 2;
			if (cc->ex[byreq[mid]].req < cc->case_req[c])
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < nbyreq && cc->ex[byreq[lo]].req == cc->case_req[c]) {
			cc->case_leak[c] = 1;
			cc->case_with[c] = byreq[lo];
		}
	}
	return 0;
}

static int
has_key(const struct cc *cc, const int *bykey, int n, const char *key)
{
	int lo = 0, hi = n;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		int c = strcmp(cc->ex[bykey[mid]].key, key);
		if (c == 0)
			return 1;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* Leakage (F11): a case whose train key the corpus holds leaves the fair
 * slice, as the bake will count it (said here, before the run); a case
 * held out by its key whose request the corpus holds anyway, equal or
 * near, would be scored as held out while trained: the finding. */
static void
check_leakage(struct cc *cc, const int *bykey, int nkeyed)
{
	for (int c = 0; c < cc->ncases; c++) {
		const struct sc_case *k = &cc->cases[c];
		int in = k->train_key && has_key(cc, bykey, nkeyed, k->train_key);
		if (in)
			cc->leak_by_key++;
		if (cc->case_leak[c] == 1)
			cc->leak_equal++;
		else if (cc->case_leak[c] == 2)
			cc->leak_near++;
		if (cc->case_leak[c] && !in) {
			const struct ex *e = &cc->ex[cc->case_with[c]];
			cc->leak_undeclared++;
			finding(cc, CK_LEAKAGE, e->key, e->line, "%s case %s (%s line %d), which "
			    "%s and would be scored as held out", cc->case_leak[c] == 1 ?
			    "the same request as" : "near-identical to", k->id, cc->cases_path,
			    k->line, k->train_key ? "names a train key the corpus lacks" :
			    "carries no train key");
		}
	}
}

static int
enum_find(const struct cc *cc, const char *cap)
{
	return cc->has_enum ? sc_caps_find(&cc->en, cap) : -1;
}

/* Coverage against the enum: the capability list, else every capability
 * the cases name. */
static void
check_coverage(struct cc *cc, int min)
{
	if (!cc->has_enum)
		return;
	for (int i = 0; i < cc->en.n; i++) {
		const char *name = cc->en.name[i];
		const int *k = plc_strmap_get(&cc->caps, name);
		int n = k != NULL ? cc->capcount[*k] : 0;
		if (cc->en.disabled[i])
			continue;
		if (n == 0)
			finding(cc, CK_COVERAGE, NULL, 0, "capability %s has no examples "
			    "(F27: it may route without any; its cases show whether it does)", name);
		else if (n < min)
			finding(cc, CK_COVERAGE, NULL, 0, "capability %s has %d example%s, fewer "
			    "than min_examples %d", name, n, n == 1 ? "" : "s", min);
	}
	for (int c = 0; c < cc->ncap; c++) {
		if (enum_find(cc, cc->capname[c]) >= 0)
			continue;
		const struct ex *first = NULL;
		for (int i = 0; i < cc->nex && first == NULL; i++)
			if (cc->ex[i].cap == c)
				first = &cc->ex[i];
		if (first != NULL)
			finding(cc, CK_UNKNOWN, first->key, first->line, "-> %s, which is not in "
			    "the enum (%d example%s): the bake's schema leaves it out (F19)",
			    cc->capname[c], cc->capcount[c], cc->capcount[c] == 1 ? "" : "s");
	}
}

/* Guards: the share of targets that do not act, and for each surface
 * form the guards have, the acting examples of that form (counterweights,
 * F13); bake guard cases with no guard target in the corpus (F12). */
static void
check_guards(struct cc *cc, double max_share, double ratio)
{
	const struct ex *first[CX_NFAM] = { NULL };
	const struct ex *g0 = NULL;
	int valid = 0;

	for (int i = 0; i < cc->nex; i++) {
		const struct ex *e = &cc->ex[i];
		if (e->bad)
			continue;
		valid++;
		if (e->guard) {
			cc->guard_examples++;
			if (g0 == NULL)
				g0 = e;
		}
		for (int f = 0; f < CX_NFAM; f++) {
			if (!(e->fam & (1 << f)))
				continue;
			if (e->guard) {
				cc->fam_guards[f]++;
				if (first[f] == NULL)
					first[f] = e;
			} else {
				cc->fam_counter[f]++;
			}
		}
	}
	if (valid > 0 && (double)cc->guard_examples / valid > max_share)
		finding(cc, CK_GUARDS, g0->key, g0->line, "%d of %d examples (%.0f%%) are guard "
		    "targets, more than max_guard_share %.0f%%: over-refusal (F13)",
		    cc->guard_examples, valid, 100.0 * cc->guard_examples / valid, max_share * 100);
	for (int f = 0; f < CX_NFAM; f++)
		if (cc->fam_guards[f] > 0 && cc->fam_counter[f] < ratio * cc->fam_guards[f])
			finding(cc, CK_GUARDS, first[f]->key, first[f]->line, "%d guard example%s "
			    "of the %s form and %d counterweight%s (acting examples of that form), "
			    "fewer than min_counterweights %.2f per guard (F13)", cc->fam_guards[f],
			    cc->fam_guards[f] == 1 ? "" : "s", cx_family_name(f), cc->fam_counter[f],
			    cc->fam_counter[f] == 1 ? "" : "s", ratio);
	if (cc->guard_examples == 0)
		for (int c = 0; c < cc->ncases; c++)
			if (cc->cases[c].kind == SC_GUARD) {
				finding(cc, CK_GUARDS, NULL, 0, "the case file has guard cases (%s "
				    "first, line %d) and the corpus no guard target (%s): nothing "
				    "teaches them (F12)", cc->cases[c].id, cc->cases[c].line,
				    host->get(cc->job, "guard_capabilities"));
				break;
			}
}

/* ---- the comparison with the previous version --------------------------- */

static void
hex16(uint64_t h, char out[17])
{
	snprintf(out, 17, "%016" PRIx64, h);
}

static uint64_t
case_hash(const struct sc_case *k)
{
	uint64_t h = cx_hash64(k->id, strlen(k->id), 17);
	h = cx_hash64(&k->kind, sizeof(k->kind), h);
	h = cx_hash64(k->channel ? k->channel : "", k->channel ? strlen(k->channel) : 0, h);
	h = cx_hash64(k->user, strlen(k->user), h);
	h = cx_hash64(k->expect ? k->expect : "", k->expect ? strlen(k->expect) + 1 : 0, h);
	for (int f = 0; f < k->nforbid; f++)
		h = cx_hash64(k->forbid[f], strlen(k->forbid[f]) + 1, h);
	char *t = k->args ? cJSON_PrintUnformatted(k->args) : NULL;
	if (t)
		h = cx_hash64(t, strlen(t), h);
	free(t);
	t = k->setup ? cJSON_PrintUnformatted(k->setup) : NULL;
	if (t)
		h = cx_hash64(t, strlen(t), h);
	free(t);
	return cx_hash64(k->train_key ? k->train_key : "", k->train_key ?
	    strlen(k->train_key) + 1 : 0, h);
}

static int
write_index(struct cc *cc, const char *path, const int *bykey, int nkeyed)
{
	struct plc_atomic a;
	char h[17];

	if (plc_atomic_open(&a, path, 0644) == -1)
		return -1;
	FILE *f = fdopen(dup(a.fd), "w");
	if (f == NULL) {
		plc_atomic_abort(&a);
		return -1;
	}
	for (int i = 0; i < nkeyed; i++) {
		const struct ex *e = &cc->ex[bykey[i]];
		if (i > 0 && strcmp(e->key, cc->ex[bykey[i - 1]].key) == 0)
			continue;
		cJSON *o = cJSON_CreateObject();
		hex16(e->content, h);
		cJSON_AddStringToObject(o, "key", e->key);
		cJSON_AddStringToObject(o, "capability", capname(cc, e->cap));
		cJSON_AddStringToObject(o, "hash", h);
		char *t = cJSON_PrintUnformatted(o);
		fprintf(f, "%s\n", t ? t : "{}");
		free(t);
		cJSON_Delete(o);
	}
	for (int c = 0; c < cc->ncases; c++) {
		cJSON *o = cJSON_CreateObject();
		hex16(case_hash(&cc->cases[c]), h);
		cJSON_AddStringToObject(o, "case", cc->cases[c].id);
		cJSON_AddStringToObject(o, "hash", h);
		char *t = cJSON_PrintUnformatted(o);
		fprintf(f, "%s\n", t ? t : "{}");
		free(t);
		cJSON_Delete(o);
	}
	if (fclose(f) != 0) {
		plc_atomic_abort(&a);
		return -1;
	}
	return plc_atomic_commit(&a);
}

struct prev_ent {
	char *name;		/* key or case id */
	char *cap;		/* capability ("" for a case) */
	char hash[17];
	int is_case;
};

static int
cmp_prev(const void *a, const void *b)
{
	const struct prev_ent *x = a, *y = b;
	if (x->is_case != y->is_case)
		return x->is_case - y->is_case;
	return strcmp(x->name, y->name);
}

static int
prev_load(const char *path, struct prev_ent **out, int *nout, char *err, size_t errlen)
{
	FILE *f = plc_fopen_in(path);
	char *line = NULL;
	size_t lcap = 0;
	int n = 0, cap = 0, lineno = 0;
	struct prev_ent *p = NULL;

	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, plc_open_strerror(errno));
		return -1;
	}
	while (getline(&line, &lcap, f) != -1) {
		lineno++;
		cJSON *o = cJSON_Parse(line);
		const char *k = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "key"));
		const char *c = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "case"));
		const char *cp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o,
		    "capability"));
		const char *h = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "hash"));
		if ((k == NULL) == (c == NULL) || h == NULL || (k && cp == NULL)) {
			snprintf(err, errlen, "%s:%d: not a corpus_check index line", path, lineno);
			cJSON_Delete(o);
			goto fail;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			struct prev_ent *q = realloc(p, (size_t)cap * sizeof(*q));
			if (q == NULL) {
				snprintf(err, errlen, "%s: out of memory", path);
				cJSON_Delete(o);
				goto fail;
			}
			p = q;
		}
		p[n].name = strdup(k ? k : c);
		p[n].cap = strdup(k ? cp : "");
		snprintf(p[n].hash, sizeof(p[n].hash), "%s", h);
		p[n].is_case = c != NULL;
		n++;
		cJSON_Delete(o);
	}
	free(line);
	fclose(f);
	qsort(p, (size_t)n, sizeof(*p), cmp_prev);
	*out = p;
	*nout = n;
	return 0;
fail:
	free(line);
	fclose(f);
	for (int i = 0; i < n; i++) {
		free(p[i].name);
		free(p[i].cap);
	}
	free(p);
	return -1;
}

static void
diff_count(cJSON *caps, const char *cap, const char *what)
{
	cJSON *c = cJSON_GetObjectItemCaseSensitive(caps, cap);
	if (c == NULL) {
		c = cJSON_AddObjectToObject(caps, cap);
		cJSON_AddNumberToObject(c, "added", 0);
		cJSON_AddNumberToObject(c, "removed", 0);
		cJSON_AddNumberToObject(c, "changed", 0);
	}
	cJSON *v = cJSON_GetObjectItemCaseSensitive(c, what);
	cJSON_SetNumberValue(v, v->valuedouble + 1);
}

static void
id_list_add(cJSON *o, const char *list, const char *id)
{
	cJSON *a = cJSON_GetObjectItemCaseSensitive(o, list);
	if (a == NULL)
		a = cJSON_AddArrayToObject(o, list);
	if (cJSON_GetArraySize(a) < 20)
		cJSON_AddItemToArray(a, cJSON_CreateString(id));
}

static int
cmp_case_id(const void *a, const void *b)
{
	return strcmp(((const struct sc_case *)a)->id, ((const struct sc_case *)b)->id);
}

/* The comparison with the previous version's index: examples by key,
 * cases by id. An example whose capability changed counts as changed
 * under both. */
static cJSON *
diff_previous(struct cc *cc, const char *prev, const char *path, const int *bykey,
    int nkeyed)
{
	struct prev_ent *p = NULL;
	int np = 0, added = 0, removed = 0, changed = 0, same = 0;
	char err[512], h[17];
	cJSON *d = cJSON_CreateObject();

	cJSON_AddStringToObject(d, "previous", prev);
	if (prev_load(path, &p, &np, err, sizeof(err)) == -1) {
		host->log(cc->job, PL_LOG_WARN, "corpus_check: the previous index: %s", err);
		cJSON_AddStringToObject(d, "error", err);
		return d;
	}
	cJSON *caps = cJSON_AddObjectToObject(d, "capabilities");
	int i = 0, j = 0, npe = 0;
	while (npe < np && !p[npe].is_case)
		npe++;
	while (i < nkeyed || j < npe) {
		const struct ex *e = i < nkeyed ? &cc->ex[bykey[i]] : NULL;
		if (e && i > 0 && strcmp(e->key, cc->ex[bykey[i - 1]].key) == 0) {
			i++;
			continue;
		}
		int c = e == NULL ? 1 : j >= npe ? -1 : strcmp(e->key, p[j].name);
		if (c < 0) {
			added++;
			diff_count(caps, capname(cc, e->cap), "added");
			i++;
		} else if (c > 0) {
			removed++;
			diff_count(caps, p[j].cap, "removed");
			j++;
		} else {
			hex16(e->content, h);
			if (strcmp(h, p[j].hash) != 0) {
				changed++;
				diff_count(caps, capname(cc, e->cap), "changed");
				if (strcmp(capname(cc, e->cap), p[j].cap) != 0)
					diff_count(caps, p[j].cap, "changed");
			} else {
				same++;
			}
			i++;
			j++;
		}
	}
	cJSON *ex = cJSON_AddObjectToObject(d, "examples");
	cJSON_AddNumberToObject(ex, "added", added);
	cJSON_AddNumberToObject(ex, "removed", removed);
	cJSON_AddNumberToObject(ex, "changed", changed);
	cJSON_AddNumberToObject(ex, "unchanged", same);
	/* Cases, by id, when this run has a case file. */
	if (cc->cases_path != NULL) {
		struct sc_case *cs = malloc(sizeof(*cs) * (size_t)(cc->ncases + 1));
		int ca = 0, cr = 0, cch = 0;
		cJSON *co = cJSON_AddObjectToObject(d, "cases");
		if (cs != NULL) {
			memcpy(cs, cc->cases, sizeof(*cs) * (size_t)cc->ncases);
			qsort(cs, (size_t)cc->ncases, sizeof(*cs), cmp_case_id);
			i = 0;
			j = npe;
			while (i < cc->ncases || j < np) {
				int c = i >= cc->ncases ? 1 : j >= np ? -1 : strcmp(cs[i].id, p[j].name);
				if (c < 0) {
					ca++;
					id_list_add(co, "added_ids", cs[i++].id);
				} else if (c > 0) {
					cr++;
					id_list_add(co, "removed_ids", p[j++].name);
				} else {
					hex16(case_hash(&cs[i]), h);
					if (strcmp(h, p[j].hash) != 0) {
						cch++;
						id_list_add(co, "changed_ids", cs[i].id);
					}
					i++;
					j++;
				}
			}
			free(cs);
		}
		cJSON_AddNumberToObject(co, "added", ca);
		cJSON_AddNumberToObject(co, "removed", cr);
		cJSON_AddNumberToObject(co, "changed", cch);
	}
	host->log(cc->job, PL_LOG_INFO, "corpus_check: since %s: %d examples added, %d "
	    "removed, %d changed", prev, added, removed, changed);
	for (i = 0; i < np; i++) {
		free(p[i].name);
		free(p[i].cap);
	}
	free(p);
	return d;
}

/* The previous version's index: a path as given, a run's index artifact,
 * or nothing ("none", or no previous run). */
static cJSON *
previous(struct cc *cc, const int *bykey, int nkeyed)
{
	const char *prev = host->get(cc->job, "previous");
	char path[PATH_MAX];

	if (prev == NULL)
		prev = host->run_get(cc->job, "previous");
	if (prev == NULL || *prev == '\0' || strcmp(prev, "none") == 0)
		return NULL;
	if (strchr(prev, '/') != NULL) {
		snprintf(path, sizeof(path), "%s", prev);
	} else if (host->artifact_find(cc->job, prev, NULL, "index", path, sizeof(path),
	    NULL) != PL_OK) {
		host->log(cc->job, PL_LOG_WARN, "corpus_check: run %s has no corpus_check index: "
		    "nothing to compare with", prev);
		cJSON *d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, "previous", prev);
		cJSON_AddStringToObject(d, "error", "no corpus_check index in that run");
		return d;
	}
	return diff_previous(cc, prev, path, bykey, nkeyed);
}

/* ---- results ---------------------------------------------------------------- */

static cJSON *
summary(struct cc *cc, int *fails, int *warns)
{
	cJSON *s = cJSON_CreateObject();
	int valid = 0;

	for (int i = 0; i < cc->nex; i++)
		valid += !cc->ex[i].bad;
	cJSON_AddNumberToObject(s, "examples", cc->nex);
	cJSON_AddNumberToObject(s, "valid", valid);
	cJSON_AddNumberToObject(s, "lines", cc->lines);
	cJSON_AddNumberToObject(s, "near_threshold", cc->thr);
	cJSON *ck = cJSON_AddObjectToObject(s, "checks");
	*fails = *warns = 0;
	for (int i = 0; i < CK_N; i++) {
		cJSON *c = cJSON_AddObjectToObject(ck, ck_name[i]);
		cJSON_AddStringToObject(c, "policy", pol_name[cc->pol[i]]);
		cJSON_AddNumberToObject(c, "count", cc->count[i]);
		if (cc->count[i] > 0 && cc->pol[i] == POL_FAIL)
			(*fails) += cc->count[i];
		else if (cc->count[i] > 0)
			(*warns) += cc->count[i];
	}
	cJSON_AddStringToObject(s, "result", *fails ? "fail" : *warns ? "warn" : "ok");
	cJSON *caps = cJSON_AddObjectToObject(s, "capabilities");
	for (int i = 0; i < cc->ncap; i++)
		cJSON_AddNumberToObject(caps, cc->capname[i], cc->capcount[i]);
	cJSON_AddNumberToObject(s, "system_prompts", cc->sys_prompts);
	cJSON *x = cJSON_AddObjectToObject(s, "conflicts");
	cJSON_AddNumberToObject(x, "requests", cc->conflict_groups);
	cJSON_AddNumberToObject(x, "examples", cc->conflict_examples);
	cJSON_AddNumberToObject(x, "near_pairs", cc->near_conflict_pairs);
	x = cJSON_AddObjectToObject(s, "duplicates");
	cJSON_AddNumberToObject(x, "exact", cc->dup_examples);
	cJSON_AddNumberToObject(x, "exact_groups", cc->dup_groups);
	cJSON_AddNumberToObject(x, "near_pairs", cc->near_dup_pairs);
	x = cJSON_AddObjectToObject(s, "guards");
	cJSON_AddNumberToObject(x, "examples", cc->guard_examples);
	cJSON_AddNumberToObject(x, "share", valid ? (double)cc->guard_examples / valid : 0);
	cJSON *fam = cJSON_AddObjectToObject(x, "forms");
	for (int f = 0; f < CX_NFAM; f++) {
		cJSON *o = cJSON_AddObjectToObject(fam, cx_family_name(f));
		cJSON_AddNumberToObject(o, "guards", cc->fam_guards[f]);
		cJSON_AddNumberToObject(o, "counterweights", cc->fam_counter[f]);
	}
	if (cc->cases_path != NULL) {
		x = cJSON_AddObjectToObject(s, "leakage");
		cJSON_AddNumberToObject(x, "cases", cc->ncases);
		cJSON_AddNumberToObject(x, "by_train_key", cc->leak_by_key);
		cJSON_AddNumberToObject(x, "equal", cc->leak_equal);
		cJSON_AddNumberToObject(x, "near", cc->leak_near);
		cJSON_AddNumberToObject(x, "undeclared", cc->leak_undeclared);
	}
	return s;
}

static int
store_json(struct cc *cc, const char *key, cJSON *o)
{
	char *t = cJSON_PrintUnformatted(o);
	int rc = t ? host->value_set(cc->job, key, t) : PL_ENOMEM;
	free(t);
	if (rc != PL_OK)
		host->fail(cc->job, "corpus_check: storing the value %s: %s", key,
		    host->strerror(rc));
	return rc;
}

static void
cc_free(struct cc *cc)
{
	for (int i = 0; i < cc->nex; i++)
		free(cc->ex[i].key);
	free(cc->ex);
	for (int i = 0; i < cc->ncap; i++)
		free(cc->capname[i]);
	free(cc->capname);
	free(cc->capcount);
	plc_strmap_free(&cc->caps);
	if (cc->has_enum)
		sc_caps_free(&cc->en);
	sc_cases_free(cc->cases, cc->ncases);
	free(cc->case_req);
	free(cc->case_sk);
	free(cc->case_nsk);
	free(cc->case_leak);
	free(cc->case_with);
	for (int i = 0; i < cc->nguard_caps; i++)
		free(cc->guard_caps[i]);
	free(cc->guard_caps);
}

/* The enum: the capability list, else the capabilities the cases name. */
static int
load_enum(struct cc *cc)
{
	const char *path = host->get(cc->job, "capabilities");
	char err[512];

	if (path != NULL) {
		if (sc_caps_load(host->input(cc->job, "capabilities"), &cc->en, err,
		    sizeof(err)) == -1)
			return host->fail(cc->job, "corpus_check: %s", err), -1;
		cc->has_enum = 1;
	}
	return 0;
}

static int
enum_from_cases(struct cc *cc)
{
	if (cc->has_enum || cc->ncases == 0)
		return 0;
	memset(&cc->en, 0, sizeof(cc->en));
	for (int c = 0; c < cc->ncases; c++) {
		const struct sc_case *k = &cc->cases[c];
		for (int f = -1; f < k->nforbid; f++) {
			const char *name = f < 0 ? k->expect : k->forbid[f];
			if (name == NULL || sc_caps_find(&cc->en, name) >= 0)
				continue;
			int n = cc->en.n + 1;
			char **nn = realloc(cc->en.name, (size_t)n * sizeof(*nn));
			if (nn)
				cc->en.name = nn;
			unsigned char *h = realloc(cc->en.hidden, (size_t)n);
			if (h)
				cc->en.hidden = h;
			unsigned char *d = realloc(cc->en.disabled, (size_t)n);
			if (d)
				cc->en.disabled = d;
			if (!nn || !h || !d || (nn[n - 1] = strdup(name)) == NULL)
				return host->fail(cc->job, "corpus_check: out of memory"), -1;
			h[n - 1] = d[n - 1] = 0;
			cc->en.n = n;
		}
	}
	cc->has_enum = 1;
	return 0;
}

static int
guard_list(struct cc *cc)
{
	const char *v = host->get(cc->job, "guard_capabilities");
	char *s = strdup(v ? v : ""), *save = NULL;

	if (s == NULL)
		return -1;
	for (char *w = strtok_r(s, ", \t", &save); w; w = strtok_r(NULL, ", \t", &save)) {
		char **g = realloc(cc->guard_caps, (size_t)(cc->nguard_caps + 1) * sizeof(*g));
		if (g == NULL)
			break;
		cc->guard_caps = g;
		g[cc->nguard_caps++] = strdup(w);
	}
	free(s);
	return 0;
}

static int
cc_run(pl_job *job)
{
	struct cc cc;
	struct plc_atomic fa;
	char fpath[PATH_MAX], ipath[PATH_MAX];
	int *bykey = NULL, *byreq = NULL, nkeyed = 0, nbyreq = 0, rc = PL_EFAIL;
	int fails = 0, warns = 0;
	cJSON *sum = NULL, *diff = NULL;
	double t0 = plc_mono_secs();

	memset(&cc, 0, sizeof(cc));
	cc.job = job;
	for (int i = 0; i < CK_N; i++)
		cc.pol[i] = policy(host->get(job, ck_name[i]));
	cc.max_listed = (int)host->get_int(job, "max_listed", 0);
	cc.thr = host->get_double(job, "near_threshold", 0);
	cc.corpus = host->input(job, "corpus");
	cc.cases_path = host->get(job, "cases") ? host->input(job, "cases") : NULL;
	if (cc.corpus == NULL)
		return host->fail(job, "corpus_check: the corpus is not resolved");
	if (host->get(job, "cases") && cc.cases_path == NULL)
		return host->fail(job, "corpus_check: cases %s cannot be used", host->get(job, "cases"));
	if (guard_list(&cc) == -1 || load_enum(&cc) == -1)
		goto out;
	snprintf(fpath, sizeof(fpath), "%s/findings.jsonl", host->workdir(job));
	snprintf(ipath, sizeof(ipath), "%s/index.jsonl", host->workdir(job));
	if (plc_atomic_open(&fa, fpath, 0644) == -1) {
		host->fail(job, "corpus_check: %s: %s", fpath, strerror(errno));
		goto out;
	}
	if ((cc.findings = fdopen(dup(fa.fd), "w")) == NULL) {
		plc_atomic_abort(&fa);
		host->fail(job, "corpus_check: %s: %s", fpath, strerror(errno));
		goto out;
	}
	if (read_corpus(&cc) == -1)
		goto abort;
	if (host->cancelled(job)) {
		rc = PL_ECANCELED;
		goto abort;
	}
	if (cc.nex == 0) {
		host->fail(job, "corpus_check: %s has no examples", cc.corpus);
		goto abort;
	}
	if ((bykey = check_keys(&cc, &nkeyed)) == NULL || check_system(&cc) == -1 ||
	    (byreq = check_exact(&cc, &nbyreq)) == NULL) {
		host->fail(job, "corpus_check: out of memory");
		goto abort;
	}
	if (load_cases(&cc, byreq, nbyreq) == -1 || enum_from_cases(&cc) == -1)
		goto abort;
	if (check_near(&cc) == -1)
		goto abort;
	check_leakage(&cc, bykey, nkeyed);
	check_coverage(&cc, (int)host->get_int(job, "min_examples", 0));
	if (cc.pol[CK_GUARDS] != POL_OFF)
		check_guards(&cc, host->get_double(job, "max_guard_share", 0),
		    host->get_double(job, "min_counterweights", 0));
	diff = previous(&cc, bykey, nkeyed);
	if (fclose(cc.findings) != 0) {
		cc.findings = NULL;
		plc_atomic_abort(&fa);
		host->fail(job, "corpus_check: writing %s: %s", fpath, strerror(errno));
		goto out;
	}
	cc.findings = NULL;
	if (plc_atomic_commit(&fa) == -1) {
		host->fail(job, "corpus_check: %s: %s", fpath, strerror(errno));
		goto out;
	}
	if (write_index(&cc, ipath, bykey, nkeyed) == -1) {
		host->fail(job, "corpus_check: %s: %s", ipath, strerror(errno));
		goto out;
	}
	if (host->artifact(job, "corpus", cc.corpus) != PL_OK ||
	    host->artifact(job, "findings", fpath) != PL_OK ||
	    host->artifact(job, "index", ipath) != PL_OK) {
		host->fail(job, "corpus_check: registering the artifacts");
		goto out;
	}
	sum = summary(&cc, &fails, &warns);
	cJSON_AddNumberToObject(sum, "seconds", plc_mono_secs() - t0);
	if (store_json(&cc, "corpus_check.summary", sum) != PL_OK ||
	    (diff && store_json(&cc, "corpus_check.diff", diff) != PL_OK))
		goto out;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddNumberToObject(ev, "examples", cc.nex);
	cJSON_AddStringToObject(ev, "result", fails ? "fail" : warns ? "warn" : "ok");
	cJSON *cn = cJSON_AddObjectToObject(ev, "counts");
	for (int i = 0; i < CK_N; i++)
		if (cc.count[i] > 0)
			cJSON_AddNumberToObject(cn, ck_name[i], cc.count[i]);
	char *et = cJSON_PrintUnformatted(ev);
	cJSON_Delete(ev);
	if (et)
		host->event(job, "corpus_check", et);
	free(et);
	host->log(job, PL_LOG_INFO, "corpus_check: %d examples in %.2f s: %d finding%s "
	    "that fail, %d that warn", cc.nex, plc_mono_secs() - t0, fails, fails == 1 ? "" : "s",
	    warns);
	if (fails) {
		char what[256];
		size_t o = 0;
		what[0] = '\0';
		for (int i = 0; i < CK_N; i++)
			if (cc.count[i] > 0 && cc.pol[i] == POL_FAIL && o < sizeof(what) - 40)
				o += (size_t)snprintf(what + o, sizeof(what) - o, "%s%d %s",
				    o ? ", " : "", cc.count[i], ck_name[i]);
		host->fail(job, "corpus_check: %s (findings.jsonl names each example)", what);
		goto out;
	}
	rc = PL_OK;
	goto out;
abort:
	if (cc.findings != NULL)
		fclose(cc.findings);
	cc.findings = NULL;
	plc_atomic_abort(&fa);
out:
	cJSON_Delete(sum);
	cJSON_Delete(diff);
	free(bykey);
	free(byreq);
	cc_free(&cc);
	return rc;
}

static const struct pl_stage cc_stage = PL_STAGE(
	.name = "corpus_check",
	.summary = "check a training corpus as data: conflicts, duplicates, coverage, guards, leakage",
	.flags = PL_STAGE_REUSE,
	.keys = cc_keys,
	.check = cc_check,
	.run = cc_run);

PL_PLUGIN(&host, &cc_stage)
