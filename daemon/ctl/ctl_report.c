/*
 * ctl_report.c: `pipelinectl report RUN [--vs RUN]`: the bake results of a
 * run (and of another) side by side: the fair slice first (what the gate
 * ranks on, with the paired comparison), then overall, held-out, guard
 * breaches, per capability with Wilson intervals, seconds per case, and
 * the gate's verdict. The numbers are recomputed from the stored rows
 * with the same functions the gate uses (plugins/lib/score/score_*.c), so the
 * report and the verdict cannot disagree. Bakes of different case sets
 * are shown, but never compared (no fair slice, a warning).
 *
 * Beside them, the corpus_check results of the runs: the counts per check,
 * and with a previous version the examples added, removed and changed per
 * capability (a column of the per-capability table when there are bakes)
 * and the cases added, removed and changed, so that a capability's change
 * in accuracy reads against the change in its data.
 *
 * Last, the ML stack each train job of the runs trained on (its value
 * "stack": the lock and its digest, the package versions), so that two
 * versions trained on different stacks say so.
 */
#include <err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ctl.h"
#include "score.h"

#define MAX_COLS 8

struct col {
	char label[256];
	cJSON *sum;		/* the bake.summary object */
	struct sc_row *rows;
	int nrows;
	struct sc_agg agg;
	int ok;
};

/* A corpus_check job's summary and its changes since the previous run. */
struct corp {
	char label[256];
	cJSON *sum;
	cJSON *diff;
};

static struct corp *
corp_find(struct corp *cs, int *n, const char *label)
{
	for (int i = 0; i < *n; i++)
		if (strcmp(cs[i].label, label) == 0)
			return &cs[i];
	if (*n == MAX_COLS * 2)
		return NULL;
	memset(&cs[*n], 0, sizeof(cs[*n]));
	snprintf(cs[*n].label, sizeof(cs[*n].label), "%s", label);
	return &cs[(*n)++];
}

/* Every bake.summary, gate.verdict, corpus_check and stack value of a
 * run, from the `values` verb. */
static int
fetch(const char *run, struct col *cols, int *ncols, cJSON **verdicts, struct corp *cs,
    int *ncs, cJSON *stacks)
{
	cJSON *args = cJSON_CreateObject(), *res = NULL, *v;
	const cJSON *vals;

	cJSON_AddStringToObject(args, "run", run);
	/* ctl_request takes args (pipelinectl.c frees them with the request). */
	if (ctl_request(PLV_values, args, &res) == -1)
		return -1;
	vals = cJSON_GetObjectItemCaseSensitive(res, "values");
	cJSON_ArrayForEach(v, vals) {
		const char *key = jstr(v, "key"), *job = jstr(v, "job"), *val = jstr(v, "value");
		if (strcmp(key, "gate.verdict") == 0) {
			cJSON *g = cJSON_Parse(val);
			if (g != NULL) {
				cJSON_AddStringToObject(g, "run", run);
				cJSON_AddStringToObject(g, "job", job);
				cJSON_AddItemToArray(*verdicts, g);
			}
			continue;
		}
		if (strcmp(key, "stack") == 0) {
			cJSON *st = cJSON_Parse(val);
			if (cJSON_IsObject(st)) {
				char label[256];
				snprintf(label, sizeof(label), "%s/%s", run, job);
				cJSON_AddStringToObject(st, "job", label);
				cJSON_AddItemToArray(stacks, st);
			} else
				cJSON_Delete(st);
			continue;
		}
		if (strcmp(key, "corpus_check.summary") == 0 ||
		    strcmp(key, "corpus_check.diff") == 0) {
			char label[256];
			snprintf(label, sizeof(label), "%s/%s", run, job);
			struct corp *c = corp_find(cs, ncs, label);
			cJSON **slot = c == NULL ? NULL :
			    strcmp(key, "corpus_check.summary") == 0 ? &c->sum : &c->diff;
			if (slot != NULL) {
				cJSON_Delete(*slot);
				*slot = cJSON_Parse(val);
			}
			continue;
		}
		if (strcmp(key, "bake.summary") != 0)
			continue;
		/* A retried job stores a newer summary: keep the last one. */
		int i;
		char label[256];
		snprintf(label, sizeof(label), "%s/%s", run, job);
		for (i = 0; i < *ncols; i++)
			if (strcmp(cols[i].label, label) == 0)
				break;
		if (i == *ncols) {
			if (*ncols == MAX_COLS) {
				warnx("run %s: more than %d bakes; the rest are not shown", run, MAX_COLS);
				continue;
			}
			(*ncols)++;
		} else {
			cJSON_Delete(cols[i].sum);
			free(cols[i].rows);
			sc_agg_free(&cols[i].agg);
		}
		struct col *c = &cols[i];
		char e[256];
		memset(c, 0, sizeof(*c));
		snprintf(c->label, sizeof(c->label), "%s", label);
		c->sum = cJSON_Parse(val);
		if (c->sum == NULL) {
			warnx("%s: bake.summary is not JSON", label);
			continue;
		}
		if (sc_rows_parse(cJSON_GetObjectItemCaseSensitive(c->sum, "rows"), &c->rows,
		    &c->nrows, e, sizeof(e)) == -1) {
			warnx("%s: %s", label, e);
			continue;
		}
		if (sc_aggregate(c->rows, c->nrows, (int)jnum(c->sum, "passes"), &c->agg) == -1) {
			warnx("%s: bad passes", label);
			continue;
		}
		c->ok = 1;
	}
	cJSON_Delete(res);
	return 0;
}

/* One line per train job's stack: "stack RUN/JOB: recipe
 * (jobs/requirements.lock sha256 848dbb3fd108); torch 2.6.0, ...", or "no
 * lock" for an interpreter of the operator's own. */
static void
stack_print(const cJSON *stacks)
{
	static const char *pkgs[] = { "torch", "transformers", "peft", "bitsandbytes",
	    "accelerate" };
	const cJSON *st;

	cJSON_ArrayForEach(st, stacks) {
		printf("stack %s: ", jstr(st, "job"));
		if (*jstr(st, "lock"))
			printf("%s (%s sha256 %.12s);", *jstr(st, "stack") ? jstr(st, "stack") : "?",
			    jstr(st, "lock"), jstr(st, "lock_sha256"));
		else
			printf("no lock (the interpreter's own packages);");
		for (size_t i = 0; i < sizeof(pkgs) / sizeof(pkgs[0]); i++)
			printf("%s %s %s", i ? "," : "", pkgs[i],
			    *jstr(st, pkgs[i]) ? jstr(st, pkgs[i]) : "missing");
		printf("\n");
	}
}

static void
pct(char *buf, size_t len, const struct sc_rate *r)
{
	if (r->n <= 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.2f [%.1f,%.1f]", r->acc * 100, r->lo * 100, r->hi * 100);
}

static void
row(const char *name, char cells[][64], int n)
{
	printf("%-24s", name);
	for (int i = 0; i < n; i++)
		printf(" %22s", cells[i]);
	printf("\n");
}

/* The changes of one capability since the previous corpus, "+a -r ~c",
 * or "-" when the diff does not name it. */
static void
corp_cap(const struct corp *c, const char *cap, char *buf, size_t len)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(c ? c->diff : NULL, "capabilities"), cap);
	if (x == NULL)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "+%.0f -%.0f ~%.0f", jnum(x, "added"), jnum(x, "removed"),
		    jnum(x, "changed"));
}

/* The corpus section: per corpus_check job, its result and counts, and
 * its changes since the previous version (per capability unless the
 * bake table shows them). */
static void
corp_print(const struct corp *cs, int n, int per_cap)
{
	for (int i = 0; i < n; i++) {
		const struct corp *c = &cs[i];
		const cJSON *ck, *x;
		if (c->sum != NULL) {
			printf("%-24s %s: %s, %.0f examples\n", "corpus", c->label,
			    jstr(c->sum, "result"), jnum(c->sum, "examples"));
			ck = cJSON_GetObjectItemCaseSensitive(c->sum, "checks");
			cJSON_ArrayForEach(x, ck)
				if (jnum(x, "count") > 0)
					printf("  %-22s %.0f (%s)\n", x->string, jnum(x, "count"),
					    jstr(x, "policy"));
			x = cJSON_GetObjectItemCaseSensitive(c->sum, "leakage");
			if (x != NULL)
				printf("  cases held by train key %.0f of %.0f (leave the fair slice), "
				    "trained without one %.0f\n", jnum(x, "by_train_key"), jnum(x, "cases"),
				    jnum(x, "undeclared"));
		}
		if (c->diff == NULL)
			continue;
		const char *prev = jstr(c->diff, "previous");
		if (*jstr(c->diff, "error")) {
			printf("corpus since %s: %s\n", prev, jstr(c->diff, "error"));
			continue;
		}
		x = cJSON_GetObjectItemCaseSensitive(c->diff, "examples");
		printf("corpus since %s: +%.0f -%.0f ~%.0f examples (added, removed, changed)\n",
		    prev, jnum(x, "added"), jnum(x, "removed"), jnum(x, "changed"));
		if (per_cap)
			cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(c->diff, "capabilities"))
				printf("  %-22s +%.0f -%.0f ~%.0f\n", x->string, jnum(x, "added"),
				    jnum(x, "removed"), jnum(x, "changed"));
		x = cJSON_GetObjectItemCaseSensitive(c->diff, "cases");
		if (x != NULL)
			printf("cases since %s: +%.0f -%.0f ~%.0f\n", prev, jnum(x, "added"),
			    jnum(x, "removed"), jnum(x, "changed"));
	}
}


/* A sweep's gate: its leaderboard, a row a variant, best first. */
static void
leaderboard_print(const cJSON *g)
{
	const cJSON *sw = cJSON_GetObjectItemCaseSensitive(g, "sweep"), *x;
	if (sw == NULL)
		return;
	int first = strcmp(jstr(sw, "correction"), "holm") != 0;
	printf("leaderboard %s/%s: %.0f variants, ranked by %s accuracy (ties within %g pp "
	    "by overall)%s\n", jstr(g, "run"), jstr(g, "job"), jnum(sw, "variants"),
	    first ? "held-out" : "fair-slice", jnum(g, "tie_pp"), first ? "" :
	    "; p: McNemar against the incumbent, Holm-corrected for the variants compared");
	printf("  %-4s %-24s %-22s %8s %8s %8s %8s %8s  %s\n", "RANK", "BAKE", "VALUES",
	    first ? "HELDOUT%" : "FAIR%", "OVERALL%", "BREACHES", "P", "P-HOLM", "VERDICT");
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(sw, "leaderboard")) {
		char fair[16] = "-", all[16] = "-", br[16] = "-", p[16] = "-", ph[16] = "-";
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(x, first ? "held_out_acc" :
		    "fair_acc");
		if (cJSON_IsNumber(f)) {
			snprintf(fair, sizeof(fair), "%.2f", f->valuedouble * 100);
			snprintf(all, sizeof(all), "%.2f", jnum(x, "overall_acc") * 100);
			snprintf(br, sizeof(br), "%.0f", jnum(x, "guard_breaches"));
		}
		if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(x, "p_mcnemar"))) {
			snprintf(p, sizeof(p), "%.3g", jnum(x, "p_mcnemar"));
			snprintf(ph, sizeof(ph), "%.3g", jnum(x, "p_holm"));
		}
		printf("  %-4.0f %-24s %-22s %8s %8s %8s %8s %8s  %s: %s\n", jnum(x, "rank"),
		    jstr(x, "bake"), jstr(x, "values"), fair, all, br, p, ph, jstr(x, "verdict"),
		    jstr(x, "reason"));
	}
}

/* Each gate's verdict, and a sweep's leaderboard. */
static void
verdicts_print(const cJSON *verdicts)
{
	const cJSON *g;
	cJSON_ArrayForEach(g, verdicts) {
		printf("verdict %s/%s: %s: %s\n", jstr(g, "run"), jstr(g, "job"),
		    jstr(g, "verdict"), jstr(g, "reason"));
		leaderboard_print(g);
	}
}

int
ctl_report(int argc, char **argv)
{
	const char *runs[2] = { NULL, NULL };
	struct col cols[MAX_COLS * 2];
	int ncols = 0, n0, json = ctl_json;
	cJSON *verdicts = cJSON_CreateArray(), *stacks = cJSON_CreateArray();
	char cells[MAX_COLS * 2 + 1][64];
	struct corp cs[MAX_COLS * 2];
	int ncs = 0;

	memset(cols, 0, sizeof(cols));
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--vs") == 0 && i + 1 < argc)
			runs[1] = argv[++i];
		else if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (argv[i][0] != '-' && runs[0] == NULL)
			runs[0] = argv[i];
		else
			ctl_fail(CTL_EUSAGE, "EUSAGE", "usage: pipelinectl report RUN [--vs RUN] [--json]");
	}
	if (runs[0] == NULL)
		ctl_fail(CTL_EUSAGE, "EUSAGE", "usage: pipelinectl report RUN [--vs RUN] [--json]");
	if (fetch(runs[0], cols, &ncols, &verdicts, cs, &ncs, stacks) == -1)
		return 1;
	n0 = ncols;
	if (runs[1] != NULL) {
		int n1 = 0;
		if (fetch(runs[1], cols + n0, &n1, &verdicts, cs, &ncs, stacks) == -1)
			return 1;
		ncols += n1;
	}
	if (ncols == 0 && ncs == 0 && cJSON_GetArraySize(stacks) == 0 &&
	    cJSON_GetArraySize(verdicts) == 0) {
		cJSON_Delete(verdicts);
		cJSON_Delete(stacks);
		ctl_fail(CTL_ERROR, "ENODATA", "run %s%s%s has no bake, corpus_check or train results", runs[0],
		    runs[1] ? " or " : "", runs[1] ? runs[1] : "");
	}

	/* Comparable only within one case set: the fair slice of the first
	 * two columns that share the first column's digest. */
	int same = 1, other = -1;
	struct sc_fair fair;
	memset(&fair, 0, sizeof(fair));
	for (int i = 1; i < ncols; i++) {
		if (!cols[i].ok || strcmp(jstr(cols[i].sum, "case_set"),
		    jstr(cols[0].sum, "case_set")) != 0)
			same = 0;
		else if (other < 0)
			other = i;
	}
	if (cols[0].ok && other > 0)
		sc_fair_slice(cols[0].rows, cols[0].nrows, cols[other].rows, cols[other].nrows,
		    &fair);

	if (json) {
		cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "bakes");
		cJSON_AddStringToObject(o, "run", runs[0]);
		if (runs[1])
			cJSON_AddStringToObject(o, "vs", runs[1]);
		for (int i = 0; i < ncols; i++) {
			if (!cols[i].ok)
				continue;
			cJSON *b = sc_agg_json(&cols[i].agg);
			cJSON_AddStringToObject(b, "bake", cols[i].label);
			cJSON_AddStringToObject(b, "model", jstr(cols[i].sum, "model"));
			cJSON_AddStringToObject(b, "case_set", jstr(cols[i].sum, "case_set"));
			cJSON_AddItemToObject(b, "speed_comparable", cJSON_Duplicate(
			    cJSON_GetObjectItemCaseSensitive(cols[i].sum, "speed_comparable"), 1));
			cJSON_AddItemToObject(b, "complete", cJSON_Duplicate(
			    cJSON_GetObjectItemCaseSensitive(cols[i].sum, "complete"), 1));
			cJSON_AddItemToArray(a, b);
		}
		cJSON_AddBoolToObject(o, "same_case_set", same);
		if (other > 0) {
			cJSON *f = sc_fair_json(&fair, "a", "b");
			cJSON_AddStringToObject(f, "a_bake", cols[0].label);
			cJSON_AddStringToObject(f, "b_bake", cols[other].label);
			cJSON_AddItemToObject(o, "fair_slice", f);
		}
		cJSON_AddItemToObject(o, "verdicts", verdicts);
		verdicts = NULL;
		cJSON *ca = cJSON_AddArrayToObject(o, "corpus");
		for (int i = 0; i < ncs; i++) {
			cJSON *c = cJSON_CreateObject();
			cJSON_AddStringToObject(c, "job", cs[i].label);
			if (cs[i].sum)
				cJSON_AddItemToObject(c, "summary", cJSON_Duplicate(cs[i].sum, 1));
			if (cs[i].diff)
				cJSON_AddItemToObject(c, "diff", cJSON_Duplicate(cs[i].diff, 1));
			cJSON_AddItemToArray(ca, c);
		}
		cJSON_AddItemToObject(o, "stacks", stacks);
		stacks = NULL;
		char *t = cJSON_PrintUnformatted(o);
		printf("%s\n", t);
		free(t);
		cJSON_Delete(o);
		goto out;
	}
	if (ncols == 0) {
		/* A gate on results files: its verdict alone. */
		verdicts_print(verdicts);
		corp_print(cs, ncs, 1);
		stack_print(stacks);
		goto out;
	}
	/* The per-capability table gets a column of the first run's corpus
	 * changes, when it has them. */
	const struct corp *dc = NULL;
	for (int i = 0; i < ncs && dc == NULL; i++)
		if (cs[i].diff != NULL && !*jstr(cs[i].diff, "error") &&
		    strncmp(cs[i].label, runs[0], strlen(runs[0])) == 0 &&
		    cs[i].label[strlen(runs[0])] == '/')
			dc = &cs[i];

	for (int i = 0; i < ncols; i++)
		snprintf(cells[i], sizeof(cells[i]), "%.22s", cols[i].label);
	row("", cells, ncols);
	for (int i = 0; i < ncols; i++)
		snprintf(cells[i], sizeof(cells[i]), "%.22s", jstr(cols[i].sum, "model"));
	row("model", cells, ncols);
	for (int i = 0; i < ncols; i++)
		snprintf(cells[i], sizeof(cells[i]), "%.12s", jstr(cols[i].sum, "case_set"));
	row("case set", cells, ncols);
	for (int i = 0; i < ncols; i++)
		snprintf(cells[i], sizeof(cells[i]), "%d x %d (%d not run)", cols[i].agg.runnable,
		    cols[i].agg.passes, cols[i].agg.skipped);
	row("cases x passes", cells, ncols);
	/* The fair slice first: the cases both models held out, what the
	 * gate ranks on; then the paired comparison on it. */
	for (int i = 0; i < ncols; i++) {
		if (other > 0 && i == 0)
			pct(cells[i], sizeof(cells[i]), &fair.a);
		else if (other > 0 && i == other)
			pct(cells[i], sizeof(cells[i]), &fair.b);
		else
			snprintf(cells[i], sizeof(cells[i]), "-");
	}
	char fl[64];
	snprintf(fl, sizeof(fl), "fair slice (%d) %%", fair.cases);
	row(fl, cells, ncols);
	for (int i = 0; i < ncols; i++) {
		if (other > 0 && i == 0)
			snprintf(cells[i], sizeof(cells[i]), "%d", fair.only_a);
		else if (other > 0 && i == other)
			snprintf(cells[i], sizeof(cells[i]), "%d", fair.only_b);
		else
			snprintf(cells[i], sizeof(cells[i]), "-");
	}
	row("  passed by it alone", cells, ncols);
	if (other > 0)
		printf("  McNemar exact p %.3g (%d discordant of %d)\n", fair.p_mcnemar,
		    fair.only_a + fair.only_b, fair.cases);
	for (int i = 0; i < ncols; i++)
		pct(cells[i], sizeof(cells[i]), &cols[i].agg.overall);
	row("overall %", cells, ncols);
	for (int i = 0; i < ncols; i++) {
		char b[48];
		pct(b, sizeof(b), &cols[i].agg.held_out);
		snprintf(cells[i], sizeof(cells[i]), "%s n=%d", b, cols[i].agg.held_out_cases);
	}
	row("held-out %", cells, ncols);
	for (int i = 0; i < ncols; i++)
		snprintf(cells[i], sizeof(cells[i]), "%d of %d", cols[i].agg.guard_breaches,
		    cols[i].agg.guards_held_out);
	row("held-out guard breaches", cells, ncols);
	for (int i = 0; i < ncols; i++)
		snprintf(cells[i], sizeof(cells[i]), "%.2f", cols[i].agg.spread_pp);
	row("spread pp", cells, ncols);
	for (int i = 0; i < ncols; i++)
		snprintf(cells[i], sizeof(cells[i]), "%.3f%s", cols[i].agg.s_per_case,
		    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cols[i].sum,
		    "speed_comparable")) ? "" : " (n/c)");
	row("s per case", cells, ncols);
	for (int i = 0; i < ncols; i++)
		snprintf(cells[i], sizeof(cells[i]), "%d", cols[i].agg.errors);
	row("bake errors", cells, ncols);

	/* Per capability: the union of the groups, in name order. */
	if (dc != NULL) {
		for (int i = 0; i < ncols; i++)
			snprintf(cells[i], sizeof(cells[i]), "%s", "");
		snprintf(cells[ncols], sizeof(cells[ncols]), "data since %.11s",
		    jstr(dc->diff, "previous"));
		row("per capability %", cells, ncols + 1);
	} else {
		printf("per capability %%\n");
	}
	for (int i = 0; i < ncols; i++)
		for (int g = 0; g < cols[i].agg.ngroups; g++) {
			const char *name = cols[i].agg.groups[g].name;
			int seen = 0;
			for (int j = 0; j < i && !seen; j++)
				for (int h = 0; h < cols[j].agg.ngroups; h++)
					if (strcmp(cols[j].agg.groups[h].name, name) == 0)
						seen = 1;
			if (seen)
				continue;
			for (int j = 0; j < ncols; j++) {
				snprintf(cells[j], sizeof(cells[j]), "-");
				for (int h = 0; h < cols[j].agg.ngroups; h++)
					if (strcmp(cols[j].agg.groups[h].name, name) == 0) {
						char b[48];
						pct(b, sizeof(b), &cols[j].agg.groups[h].rate);
						snprintf(cells[j], sizeof(cells[j]), "%s n=%d", b,
						    cols[j].agg.groups[h].cases);
					}
			}
			char lbl[64];
			snprintf(lbl, sizeof(lbl), "  %.22s", name);
			if (dc != NULL)
				corp_cap(dc, name, cells[ncols], sizeof(cells[ncols]));
			row(lbl, cells, ncols + (dc != NULL));
		}
	verdicts_print(verdicts);
	if (!same)
		printf("warning: the bakes come from different case sets; their numbers do not "
		    "compare\n");
	corp_print(cs, ncs, dc == NULL);
	stack_print(stacks);
out:
	for (int i = 0; i < ncs; i++) {
		cJSON_Delete(cs[i].sum);
		cJSON_Delete(cs[i].diff);
	}
	cJSON_Delete(verdicts);
	cJSON_Delete(stacks);
	for (int i = 0; i < ncols; i++) {
		cJSON_Delete(cols[i].sum);
		free(cols[i].rows);
		sc_agg_free(&cols[i].agg);
	}
	return 0;
}
