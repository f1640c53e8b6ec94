/*
 * gate.c: the `gate` stage, the release rule (pipeline-gotchas(7), F17): veto a
 * candidate that breaches a held-out guard the incumbent passes; otherwise
 * rank by accuracy on the fair slice (the cases neither model's corpus
 * holds), refuse when it has fewer than min_fair_cases, and break ties
 * within tie_pp by overall accuracy. Both bakes must come from the same case-set digest: results
 * of different case sets are never compared. With promote = yes and a
 * passing verdict, the candidate's tag is copied to the alias (after the
 * alias is unloaded, HACKING.md: Ollama) and the alias's digest read
 * back. The verdict and every number behind it go to the store and feed.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "plio.h"
#include "ollama.h"
#include "ollama_admin.h"
#include "score.h"

static const struct pl_host *host;

static const struct pl_key gate_keys[] = {
	PL_KEY_STRING(.name = "candidate", .def = "bake",
	    .help = "the candidate's bake: JOB of this run, RUN/JOB, or a results file "
	    "(bake.json); a sweep's gate: every variant's bake, separated by spaces"),
	PL_KEY_STRING(.name = "sweep_values", .flags = PL_KEY_HIDDEN,
	    .help = "set by a sweep: each candidate's values, \"BAKE: k=v ...; ...\""),
	PL_KEY_STRING(.name = "sweep_tags", .flags = PL_KEY_HIDDEN,
	    .help = "set by a sweep whose gate names a tag: each candidate's, \"BAKE: TAG; ...\""),
	PL_KEY_STRING(.name = "incumbent", .def = "bake-incumbent",
	    .help = "the incumbent's bake, as candidate; none: a first release"),
	PL_KEY_FLOAT(.name = "tie_pp", .def = "0.5", .flags = PL_KEY_MIN | PL_KEY_MAX, .min = 0, .max = 100,
	    .help = "fair-slice differences within this many points are ties, broken by "
	    "overall"),
	PL_KEY_INT(.name = "min_fair_cases", .def = "20", .flags = PL_KEY_MIN, .min = 1,
	    .help = "fewest fair-slice cases (held out for both models) a verdict rests on"),
	PL_KEY_BOOL(.name = "promote", .def = "no",
	    .help = "on a passing verdict, copy the candidate's tag to the alias"),
	PL_KEY_STRING(.name = "alias", .help = "the production alias (promote = yes)"),
	PL_KEY_STRING(.name = "tag",
	    .help = "the tag to promote (default: the model the candidate bake served)"),
	PL_KEY_STRING(.name = "url", .flags = PL_KEY_VOLATILE, .help = "Ollama base URL for promote"),
	PL_KEY_END
};

struct side {
	char label[512];
	cJSON *sum;
	struct sc_row *rows;
	int nrows;
	struct sc_agg agg;
};

static int
is_path(const char *v)
{
	struct stat st;
	size_t n = strlen(v);

	return (strchr(v, '/') != NULL && stat(v, &st) == 0 && S_ISREG(st.st_mode)) ||
	    (n > 5 && strcmp(v + n - 5, ".json") == 0);
}

/* A bake's summary from the store (JOB or RUN/JOB) or a results file:
 * 0, or -1 with why in err. */
static int
load_value(pl_job *job, const char *key, const char *v, struct side *s, char *err,
    size_t errlen)
{
	char *text = NULL, perr[256];
	const cJSON *cases, *passes;

	memset(s, 0, sizeof(*s));
	if (v == NULL || *v == '\0') {
		snprintf(err, errlen, "%s: not set", key);
		return -1;
	}
	if (is_path(v)) {
		/* Not host->input(): "bake.json" would read as JOB.ARTIFACT. */
		char *p = realpath(v, NULL);
		if (p == NULL || (text = plc_read_file(p, NULL, 256u << 20)) == NULL) {
			free(p);
			snprintf(err, errlen, "%s: %s: %s", key, v, strerror(errno));
			return -1;
		}
		snprintf(s->label, sizeof(s->label), "%s", p);
		free(p);
	} else {
		const char *slash = strchr(v, '/');
		char run[256] = "";
		const char *jn = v;
		if (slash) {
			snprintf(run, sizeof(run), "%.*s", (int)(slash - v), v);
			jn = slash + 1;
		}
		text = host->value_get(job, slash ? run : NULL, jn, "bake.summary");
		if (text == NULL) {
			snprintf(err, errlen, "%s: no bake.summary stored by job %s of run %s",
			    key, jn, slash ? run : host->run_name(job));
			return -1;
		}
		snprintf(s->label, sizeof(s->label), "%s/%s", slash ? run : host->run_name(job), jn);
	}
	s->sum = cJSON_Parse(text);
	free(text);
	if (!cJSON_IsObject(s->sum)) {
		snprintf(err, errlen, "%s (%s): bake summary is not JSON", key, s->label);
		return -1;
	}
	cases = cJSON_GetObjectItemCaseSensitive(s->sum, "rows");
	passes = cJSON_GetObjectItemCaseSensitive(s->sum, "passes");
	if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(s->sum, "case_set")) ||
	    !cJSON_IsNumber(passes)) {
		snprintf(err, errlen, "%s (%s): bake summary lacks case_set or passes", key,
		    s->label);
		return -1;
	}
	if (sc_rows_parse(cases, &s->rows, &s->nrows, perr, sizeof(perr)) == -1) {
		snprintf(err, errlen, "%s (%s): %s", key, s->label, perr);
		return -1;
	}
	/* Recompute from the rows, so the verdict's numbers are the rule's. */
	if (sc_aggregate(s->rows, s->nrows, (int)passes->valuedouble, &s->agg) == -1) {
		snprintf(err, errlen, "%s (%s): bad passes %g", key, s->label, passes->valuedouble);
		return -1;
	}
	return 0;
}

static int
load_side(pl_job *job, const char *key, struct side *s)
{
	char err[1024];

	if (load_value(job, key, host->get(job, key), s, err, sizeof(err)) == -1)
		return host->fail(job, "%s", err);
	return PL_OK;
}

static void
side_free(struct side *s)
{
	cJSON_Delete(s->sum);
	free(s->rows);
	sc_agg_free(&s->agg);
}

static const char *
sstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static cJSON *
side_json(const struct side *s)
{
	cJSON *o = sc_agg_json(&s->agg);

	cJSON_AddStringToObject(o, "bake", s->label);
	cJSON_AddStringToObject(o, "model", sstr(s->sum, "model"));
	cJSON_AddItemToObject(o, "speed_comparable", cJSON_Duplicate(
	    cJSON_GetObjectItemCaseSensitive(s->sum, "speed_comparable"), 1));
	return o;
}

/*
 * A sweep's gate (pipeline.ini(5) SWEEPS): every variant's bake is
 * ranked by the rule, the best is gated against the incumbent as one
 * candidate is, and the leaderboard says why each other lost.
 */
struct entry {
	char bake[256];          /* as candidate names it */
	char values[256];        /* its sweep values, from sweep_values */
	char tag[256];           /* the tag it registered, from sweep_tags, or "" */
	struct side s;
	int ok;                  /* loaded, complete, on the incumbent's case set */
	int vetoed;
	struct sc_verdict v;     /* against the incumbent (none: unset) */
	double fair, overall;    /* what ranks: fair slice (first release: held-out), overall */
	double p, p_holm;
	char why[600];           /* why it is out or lost */
};

/* "BAKE: k=v k=v; BAKE2: ..." -> each entry's values (tags 0), or
 * "BAKE: TAG; ..." -> each entry's tag (tags 1). */
static void
sweep_map(const char *sv, struct entry *e, int n, int tags)
{
	char *t = strdup(sv ? sv : ""), *save = NULL;
	if (t == NULL)
		return;
	for (char *p = strtok_r(t, ";", &save); p; p = strtok_r(NULL, ";", &save)) {
		p += strspn(p, " ");
		char *c = strstr(p, ": ");
		if (c == NULL)
			continue;
		*c = '\0';
		for (int i = 0; i < n; i++)
			if (strcmp(e[i].bake, p) == 0 && tags)
				snprintf(e[i].tag, sizeof(e[i].tag), "%s", c + 2);
			else if (strcmp(e[i].bake, p) == 0)
				snprintf(e[i].values, sizeof(e[i].values), "%s", c + 2);
	}
	free(t);
}

/* Whether a ranks above b: fair-slice (first release: held-out)
 * accuracy beyond tie_pp, else overall accuracy. */
static int
ranks_above(const struct entry *a, const struct entry *b, double tie)
{
	double d = round((a->fair - b->fair) * 10000) / 100;
	if (fabs(d) > tie)
		return d > 0;
	return a->overall > b->overall;
}

static double entry_tie;

static int
entry_cmp(const void *x, const void *y)
{
	const struct entry *a = *(struct entry *const *)x, *b = *(struct entry *const *)y;
	if (a->ok != b->ok)
		return b->ok - a->ok;
	if (a->vetoed != b->vetoed)
		return a->vetoed - b->vetoed;
	if (!a->ok)
		return 0;
	if (ranks_above(a, b, entry_tie))
		return -1;
	if (ranks_above(b, a, entry_tie))
		return 1;
	return 0;
}

/* Load and rank the candidates; the best is moved into *cand, its
 * verdict into *v and its tag (sweep_tags; "" without) into tag; *board
 * is the leaderboard. PL_OK, or the failure when no variant can be
 * compared. */
static int
sweep_rank(pl_job *job, char **names, int n, int first, const struct side *inc, double tie,
    int min_fair, struct side *cand, struct sc_verdict *v, cJSON **board, char *tag,
    size_t tagsz)
{
	struct entry *e = calloc((size_t)n, sizeof(*e));
	struct entry **ord = calloc((size_t)n, sizeof(*ord));
	char why[1024];
	const char *want = NULL;
	int nok = 0, rc = PL_OK;

	if (e == NULL || ord == NULL) {
		free(e);
		free(ord);
		return host->fail(job, "out of memory");
	}
	for (int i = 0; i < n; i++) {
		snprintf(e[i].bake, sizeof(e[i].bake), "%s", names[i]);
		ord[i] = &e[i];
	}
	sweep_map(host->get(job, "sweep_values"), e, n, 0);
	sweep_map(host->get(job, "sweep_tags"), e, n, 1);
	for (int i = 0; i < n; i++) {
		struct entry *x = &e[i];
		if (load_value(job, "candidate", x->bake, &x->s, why, sizeof(why)) == -1) {
			snprintf(x->why, sizeof(x->why), "not compared: %s", why);
			continue;
		}
		if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x->s.sum, "complete"))) {
			snprintf(x->why, sizeof(x->why), "not compared: its bake is incomplete (%d "
			    "errors)", x->s.agg.errors);
			continue;
		}
		/* A first release: the case set of the first bake compared. */
		if (want == NULL)
			want = first ? sstr(x->s.sum, "case_set") : sstr(inc->sum, "case_set");
		if (strcmp(sstr(x->s.sum, "case_set"), want) != 0) {
			snprintf(x->why, sizeof(x->why), "not compared: case set %.12s, not %.12s",
			    sstr(x->s.sum, "case_set"), want);
			continue;
		}
		x->ok = 1;
		nok++;
		if (first) {
			x->vetoed = x->s.agg.guard_breaches > 0;
			x->fair = x->s.agg.held_out.acc;
			x->overall = x->s.agg.overall.acc;
			x->p = 1;
			if (x->vetoed)
				snprintf(x->why, sizeof(x->why), "veto: %d held-out guard breach%s",
				    x->s.agg.guard_breaches, x->s.agg.guard_breaches == 1 ? "" : "es");
		} else {
			sc_release_rule(x->s.rows, x->s.nrows, &x->s.agg, inc->rows, inc->nrows,
			    &inc->agg, tie, min_fair, &x->v);
			x->vetoed = x->v.code == SC_V_VETO || x->v.code == SC_V_INCOMPLETE;
			x->fair = x->v.fair.a.acc;
			x->overall = x->v.fair.oa.acc;
			x->p = x->v.fair.p_mcnemar;
			if (x->vetoed)
				snprintf(x->why, sizeof(x->why), "%s", x->v.reason);
		}
	}
	if (nok == 0) {
		struct plc_sb sb;
		plc_sb_init(&sb, why, sizeof(why));
		for (int i = 0; i < n; i++) {
			plc_sb_sep(&sb, "; ");
			plc_sb_appendf(&sb, "%s: %s", e[i].bake, e[i].why);
		}
		rc = host->fail(job, "refused: no variant's bake can be compared (%s)", why);
		goto out;
	}
	/* The p-values against the incumbent, corrected for picking the
	 * best of the variants compared (Holm). */
	double *p = calloc((size_t)nok, sizeof(double)), *adj = calloc((size_t)nok, sizeof(double));
	if (p != NULL && adj != NULL) {
		int k = 0;
		for (int i = 0; i < n; i++)
			if (e[i].ok)
				p[k++] = e[i].p;
		sc_holm(p, nok, adj);
		k = 0;
		for (int i = 0; i < n; i++)
			if (e[i].ok)
				e[i].p_holm = adj[k++];
	}
	free(p);
	free(adj);
	entry_tie = tie;
	qsort(ord, (size_t)n, sizeof(*ord), entry_cmp);
	struct entry *best = ord[0];
	if (first) {
		memset(v, 0, sizeof(*v));
		v->pass = !best->vetoed && best->s.agg.errors == 0;
		v->code = v->pass ? SC_V_PROMOTE : SC_V_VETO;
		snprintf(v->reason, sizeof(v->reason), "first release: the best of %d variants, "
		    "%d held-out guard breach%s", n, best->s.agg.guard_breaches,
		    best->s.agg.guard_breaches == 1 ? "" : "es");
	} else {
		*v = best->v;
		char r[sizeof(v->reason)];
		snprintf(r, sizeof(r), "best of %d variants (McNemar p %.3g, Holm-corrected for %d: "
		    "%.3g): %s", n, best->p, nok, best->p_holm, best->v.reason);
		snprintf(v->reason, sizeof(v->reason), "%s", r);
	}
	for (int i = 1; i < n; i++) {
		struct entry *x = ord[i];
		if (!x->ok || x->vetoed)
			continue;
		if (fabs(round((x->fair - best->fair) * 10000) / 100) > tie)
			snprintf(x->why, sizeof(x->why), "ranked below %s: %s %.2f%% vs %.2f%%",
			    best->bake, first ? "held-out" : "fair slice", x->fair * 100,
			    best->fair * 100);
		else
			snprintf(x->why, sizeof(x->why), "ranked below %s: %s tie within %.2f pp, "
			    "overall %.2f%% vs %.2f%%", best->bake, first ? "held-out" : "fair-slice",
			    tie, x->overall * 100, best->overall * 100);
	}
	*board = cJSON_CreateArray();
	for (int i = 0; i < n; i++) {
		struct entry *x = ord[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "rank", i + 1);
		cJSON_AddStringToObject(o, "bake", x->ok ? x->s.label : x->bake);
		cJSON_AddStringToObject(o, "values", x->values);
		if (x->ok) {
			cJSON_AddNumberToObject(o, first ? "held_out_acc" : "fair_acc", x->fair);
			cJSON_AddNumberToObject(o, "overall_acc", x->overall);
			cJSON_AddNumberToObject(o, "guard_breaches", x->s.agg.guard_breaches);
			if (!first) {
				cJSON_AddNumberToObject(o, "new_breaches", x->v.new_breaches);
				cJSON_AddNumberToObject(o, "p_mcnemar", x->p);
				cJSON_AddNumberToObject(o, "p_holm", x->p_holm);
			}
		}
		cJSON_AddBoolToObject(o, "best", i == 0);
		cJSON_AddStringToObject(o, "verdict", i == 0 ? sc_verdict_name(v->code) : "lost");
		cJSON_AddStringToObject(o, "reason", i == 0 ? v->reason : x->why);
		cJSON_AddItemToArray(*board, o);
	}
	*cand = best->s;
	memset(&best->s, 0, sizeof(best->s));
	snprintf(tag, tagsz, "%s", best->tag);
out:
	for (int i = 0; i < n; i++)
		side_free(&e[i].s);
	free(e);
	free(ord);
	return rc;
}

/* Promote: unload the alias (a loaded alias would keep serving the old
 * weights, HACKING.md: Ollama), copy, then read back that the alias's
 * manifest digest is the tag's. */
static int
promote(pl_job *job, const char *tag, const char *alias, cJSON *verdict)
{
	struct ollama o;
	char d_tag[80], d_alias[80];

	if (ollama_init(&o, host->get(job, "url"), 120) == -1)
		return host->fail(job, "url: %s", o.error);
	/* A first promotion has no alias yet: Ollama answers the unload of a
	 * name it does not know with 404, and nothing serves that name. */
	if (ollama_unload_wait(&o, alias, 60, 0.25) == -1 && o.status != 404)
		return host->fail(job, "promote: unloading %s: %s", alias, o.error);
	if (ollama_manifest_digest(&o, tag, d_tag, sizeof(d_tag)) == -1)
		return host->fail(job, "promote: %s", o.error);
	if (ollama_copy(&o, tag, alias) == -1)
		return host->fail(job, "promote: copy %s to %s: %s", tag, alias, o.error);
	if (ollama_manifest_digest(&o, alias, d_alias, sizeof(d_alias)) == -1)
		return host->fail(job, "promote: reading back %s: %s", alias, o.error);
	cJSON_AddStringToObject(verdict, "alias", alias);
	cJSON_AddStringToObject(verdict, "alias_digest", d_alias);
	cJSON_AddStringToObject(verdict, "tag_digest", d_tag);
	if (strcmp(d_tag, d_alias) != 0)
		return host->fail(job, "promote: %s has manifest %.12s after the copy, not "
		    "%s's %.12s", alias, d_alias, tag, d_tag);
	host->value_set(job, "gate.alias_digest", d_alias);
	host->log(job, PL_LOG_INFO, "promoted %s to %s (manifest %.12s)", tag, alias, d_alias);
	return PL_OK;
}

/* The words of s, separated by spaces or commas: a sweep's gate names
 * every variant's bake in candidate. */
static char **
split_words(const char *s, int *n)
{
	char *t = strdup(s ? s : ""), *save = NULL, **w = NULL;
	*n = 0;
	if (t == NULL)
		return NULL;
	for (char *p = strtok_r(t, " ,\t\n", &save); p; p = strtok_r(NULL, " ,\t\n", &save)) {
		char **nw = realloc(w, (size_t)(*n + 2) * sizeof(*w));
		if (nw == NULL)
			break;
		w = nw;
		w[(*n)++] = strdup(p);
		w[*n] = NULL;
	}
	free(t);
	return w;
}

static void
words_free(char **w)
{
	for (int i = 0; w && w[i]; i++)
		free(w[i]);
	free(w);
}

static int
gate_run(pl_job *job)
{
	struct side cand, inc;
	struct sc_verdict v;
	double tie = host->get_double(job, "tie_pp", 0);
	const char *iv = host->get(job, "incumbent");
	int first = iv != NULL && strcmp(iv, "none") == 0;
	int rc;
	cJSON *out = NULL, *board = NULL;
	char best_tag[256] = "";

	memset(&inc, 0, sizeof(inc));
	memset(&cand, 0, sizeof(cand));
	memset(&v, 0, sizeof(v));
	int ncand = 0;
	char **names = split_words(host->get(job, "candidate"), &ncand);
	if (ncand > 1) {
		/* A sweep: the incumbent first, then every variant ranked. */
		if (!first && (rc = load_side(job, "incumbent", &inc)) != PL_OK)
			goto out;
		if (!first && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(inc.sum, "complete"))) {
			rc = host->fail(job, "refused: the incumbent's bake is incomplete (%d "
			    "errors)", inc.agg.errors);
			goto out;
		}
		if ((rc = sweep_rank(job, names, ncand, first, &inc, tie,
		    (int)host->get_int(job, "min_fair_cases", 0), &cand, &v, &board, best_tag,
		    sizeof(best_tag))) != PL_OK)
			goto out;
		goto verdict;
	}
	if ((rc = load_side(job, "candidate", &cand)) != PL_OK) {
		side_free(&cand);
		return rc;
	}
	if (!first && (rc = load_side(job, "incumbent", &inc)) != PL_OK)
		goto out;

	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cand.sum, "complete")) ||
	    (!first && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(inc.sum, "complete")))) {
		rc = host->fail(job, "refused: a bake is incomplete (bake errors: candidate %d, "
		    "incumbent %d)", cand.agg.errors, inc.agg.errors);
		goto out;
	}
	/* Principle 5: nothing is compared across test-set eras. */
	if (!first && strcmp(sstr(cand.sum, "case_set"), sstr(inc.sum, "case_set")) != 0) {
		rc = host->fail(job, "refused: case sets differ (candidate %s: %.12s, incumbent "
		    "%s: %.12s); bake the incumbent on the same cases in this run",
		    cand.label, sstr(cand.sum, "case_set"), inc.label, sstr(inc.sum, "case_set"));
		goto out;
	}

	if (first) {
		v.pass = cand.agg.guard_breaches == 0 && cand.agg.errors == 0;
		v.code = v.pass ? SC_V_PROMOTE : SC_V_VETO;
		snprintf(v.reason, sizeof(v.reason), "first release: %d held-out guard "
		    "breach%s", cand.agg.guard_breaches, cand.agg.guard_breaches == 1 ? "" : "es");
	} else {
		sc_release_rule(cand.rows, cand.nrows, &cand.agg, inc.rows, inc.nrows, &inc.agg,
		    tie, (int)host->get_int(job, "min_fair_cases", 0), &v);
	}

verdict:
	out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "verdict", sc_verdict_name(v.code));
	cJSON_AddBoolToObject(out, "pass", v.pass);
	cJSON_AddStringToObject(out, "reason", v.reason);
	cJSON_AddStringToObject(out, "case_set", sstr(cand.sum, "case_set"));
	cJSON_AddNumberToObject(out, "tie_pp", tie);
	if (!first) {
		/* The fair slice first: it is what the verdict ranks on. */
		cJSON_AddItemToObject(out, "fair_slice", sc_fair_json(&v.fair, "candidate", "incumbent"));
		cJSON_AddNumberToObject(out, "min_fair_cases", v.min_fair);
		cJSON_AddNumberToObject(out, "d_fair_pp", v.d_fair_pp);
		cJSON_AddNumberToObject(out, "d_overall_pp", v.d_overall_pp);
		cJSON_AddNumberToObject(out, "d_held_out_pp", v.d_held_out_pp);
		cJSON_AddBoolToObject(out, "tie", v.tie);
		cJSON_AddNumberToObject(out, "new_breaches", v.new_breaches);
		cJSON_AddStringToObject(out, "breach_ids", v.breach_ids);
	}
	cJSON_AddItemToObject(out, "candidate", side_json(&cand));
	if (!first)
		cJSON_AddItemToObject(out, "incumbent", side_json(&inc));
	if (board != NULL) {
		/* The leaderboard, best first; the verdict is the best's. */
		cJSON *sw = cJSON_AddObjectToObject(out, "sweep");
		cJSON_AddNumberToObject(sw, "variants", cJSON_GetArraySize(board));
		cJSON_AddStringToObject(sw, "correction", first ? "none (first release)" :
		    "holm");
		cJSON_AddItemToObject(sw, "leaderboard", board);
		board = NULL;
	}

	if (v.pass && host->get_bool(job, "promote", 0)) {
		const char *alias = host->get(job, "alias"), *tag = host->get(job, "tag");
		/* A sweep's: the tag the winning variant registered. */
		if (*best_tag != '\0')
			tag = best_tag;
		if (tag == NULL || *tag == '\0')
			tag = sstr(cand.sum, "model");
		if (alias == NULL || *alias == '\0' || *tag == '\0') {
			rc = host->fail(job, "promote: needs an alias and a tag");
			goto out;
		}
		if ((rc = promote(job, tag, alias, out)) != PL_OK) {
			cJSON_AddStringToObject(out, "promote_error", "see the job's failure");
			char *t = cJSON_PrintUnformatted(out);
			host->value_set(job, "gate.verdict", t);
			free(t);
			goto out;
		}
	}

	char *text = cJSON_PrintUnformatted(out);
	host->value_set(job, "gate.verdict", text);
	host->event(job, "verdict", text);
	free(text);
	host->log(job, PL_LOG_INFO, "verdict: %s: %s", sc_verdict_name(v.code), v.reason);
	if (!first)
		host->log(job, PL_LOG_INFO, "fair slice %.2f%% vs %.2f%% of %d (candidate alone "
		    "%d, incumbent alone %d, McNemar p %.3g); overall %.2f%% vs %.2f%% of %d; "
		    "held-out %.2f%% of %d vs %.2f%% of %d; guard breaches %d vs %d",
		    v.fair.a.acc * 100, v.fair.b.acc * 100, v.fair.cases, v.fair.only_a,
		    v.fair.only_b, v.fair.p_mcnemar, v.fair.oa.acc * 100, v.fair.ob.acc * 100,
		    v.fair.common, cand.agg.held_out.acc * 100, cand.agg.held_out_cases,
		    inc.agg.held_out.acc * 100, inc.agg.held_out_cases,
		    cand.agg.guard_breaches, inc.agg.guard_breaches);
	/* A verdict against the candidate is a rejection, not a failure: the
	 * run ends rejected, and the job is not retried. */
	if (!v.pass) {
		host->fail(job, "verdict: %s: %s", sc_verdict_name(v.code), v.reason);
		rc = PL_EREJECTED;
	} else
		rc = PL_OK;
out:
	cJSON_Delete(out);
	cJSON_Delete(board);
	words_free(names);
	side_free(&cand);
	side_free(&inc);
	return rc;
}

static int
gate_check(pl_job *job)
{
	const char *a = host->get(job, "alias");

	if (host->get_bool(job, "promote", 0) && (a == NULL || *a == '\0'))
		host->check_error(job, "alias", "promote = yes needs an alias to copy to");
	return PL_OK;
}

static const struct pl_stage gate_stage = PL_STAGE(
	.name = "gate",
	.summary = "apply the release rule to two bakes; promote the alias",
	.keys = gate_keys,
	.check = gate_check,
	.run = gate_run);

PL_PLUGIN(&host, &gate_stage)
