/*
 * score_stats.c: the bake's statistics (score.h, second part): Wilson
 * intervals, a case's row over its passes, aggregates, the rows' JSON, the
 * fair slice between two bakes and McNemar's exact test. Pure functions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "plio.h"
#include "score.h"

void
sc_wilson(double k, double n, double z, double *lo, double *hi)
{
	double p, z2, den, mid, half;

	if (n <= 0) {
		*lo = 0;
		*hi = 1;
		return;
	}
	p = k / n;
	z2 = z * z;
	den = 1 + z2 / n;
	mid = (p + z2 / (2 * n)) / den;
	half = z * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / den;
	*lo = fmax(0, mid - half);
	*hi = fmin(1, mid + half);
}

static void
rate_set(struct sc_rate *r, double k, double n)
{
	r->k = k;
	r->n = n;
	r->acc = n > 0 ? k / n : 0;
	sc_wilson(k, n, SC_Z95, &r->lo, &r->hi);
}

int
sc_row_passed(const struct sc_row *r)
{
	return __builtin_popcount(r->pass_mask);
}

static int
group_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sc_group *)a)->name, ((const struct sc_group *)b)->name);
}

/*
 * Accuracy pools case-passes (passed passes over runnable cases x passes),
 * which is the mean of the per-pass accuracies. Intervals use the number
 * of cases, not case-passes, as n: at temperature 0 the passes of one case
 * are far from independent, and counting them as trials would narrow the
 * interval three times over (F16: slices of about 8 cases need intervals).
 * A held-out guard is breached when any pass failed it (F15: one pass
 * overstated a margin; every pass counts).
 */
int
sc_aggregate(const struct sc_row *rows, int n, int passes, struct sc_agg *agg)
{
	double ok = 0, hok = 0, secs = 0;
	int runs = 0;

	memset(agg, 0, sizeof(*agg));
	if (passes < 1 || passes > SC_MAX_PASSES)
		return -1;
	agg->passes = passes;
	agg->cases = n;
	agg->groups = calloc(n ? n : 1, sizeof(*agg->groups));
	if (agg->groups == NULL)
		return -1;
	for (int i = 0; i < n; i++) {
		const struct sc_row *r = &rows[i];
		int p = sc_row_passed(r), g;

		agg->errors += r->errors;
		if (!r->runnable) {
			agg->skipped++;
			continue;
		}
		agg->runnable++;
		ok += p;
		runs += r->runs;
		secs += r->seconds;
		for (int j = 0; j < passes; j++)
			if (r->pass_mask & (1u << j))
				agg->passed_per_pass[j]++;
		if (r->held_out) {
			agg->held_out_cases++;
			hok += p;
			if (r->kind == SC_GUARD) {
				agg->guards_held_out++;
				if (p < passes)
					agg->guard_breaches++;
				for (int j = 0; j < passes; j++)
					if (!(r->pass_mask & (1u << j)))
						agg->breaches_per_pass[j]++;
			}
		}
		for (g = 0; g < agg->ngroups; g++)
			if (strcmp(agg->groups[g].name, r->group) == 0)
				break;
		if (g == agg->ngroups) {
			snprintf(agg->groups[g].name, sizeof(agg->groups[g].name), "%s", r->group);
			agg->ngroups++;
		}
		agg->groups[g].cases++;
		agg->groups[g].rate.k += (double)p / passes;
	}
	rate_set(&agg->overall, ok / passes, agg->runnable);
	rate_set(&agg->held_out, hok / passes, agg->held_out_cases);
	for (int g = 0; g < agg->ngroups; g++)
		rate_set(&agg->groups[g].rate, agg->groups[g].rate.k, agg->groups[g].cases);
	qsort(agg->groups, agg->ngroups, sizeof(*agg->groups), group_cmp);
	double lo = 1, hi = 0;
	for (int j = 0; j < passes; j++) {
		agg->acc_per_pass[j] = agg->runnable ?
		    (double)agg->passed_per_pass[j] / agg->runnable : 0;
		lo = fmin(lo, agg->acc_per_pass[j]);
		hi = fmax(hi, agg->acc_per_pass[j]);
	}
	agg->spread_pp = agg->runnable ? (hi - lo) * 100 : 0;
	agg->s_per_case = runs ? secs / runs : 0;
	return 0;
}

void
sc_agg_free(struct sc_agg *agg)
{
	free(agg->groups);
	agg->groups = NULL;
}

cJSON *
sc_rate_json(const struct sc_rate *r)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "k", r->k);
	cJSON_AddNumberToObject(o, "n", r->n);
	cJSON_AddNumberToObject(o, "acc", r->acc);
	cJSON_AddNumberToObject(o, "lo", r->lo);
	cJSON_AddNumberToObject(o, "hi", r->hi);
	return o;
}

cJSON *
sc_agg_json(const struct sc_agg *agg)
{
	cJSON *o = cJSON_CreateObject(), *a, *g;

	cJSON_AddNumberToObject(o, "cases", agg->cases);
	cJSON_AddNumberToObject(o, "runnable", agg->runnable);
	cJSON_AddNumberToObject(o, "not_runnable", agg->skipped);
	cJSON_AddNumberToObject(o, "errors", agg->errors);
	cJSON_AddNumberToObject(o, "passes", agg->passes);
	cJSON_AddItemToObject(o, "overall", sc_rate_json(&agg->overall));
	cJSON_AddItemToObject(o, "held_out", sc_rate_json(&agg->held_out));
	cJSON_AddNumberToObject(o, "held_out_cases", agg->held_out_cases);
	cJSON_AddNumberToObject(o, "held_out_guards", agg->guards_held_out);
	cJSON_AddNumberToObject(o, "guard_breaches", agg->guard_breaches);
	a = cJSON_AddArrayToObject(o, "breaches_per_pass");
	for (int j = 0; j < agg->passes; j++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(agg->breaches_per_pass[j]));
	a = cJSON_AddArrayToObject(o, "passed_per_pass");
	for (int j = 0; j < agg->passes; j++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(agg->passed_per_pass[j]));
	cJSON_AddNumberToObject(o, "spread_pp", agg->spread_pp);
	cJSON_AddNumberToObject(o, "s_per_case", agg->s_per_case);
	g = cJSON_AddObjectToObject(o, "per_capability");
	for (int i = 0; i < agg->ngroups; i++) {
		cJSON *r = sc_rate_json(&agg->groups[i].rate);
		cJSON_AddNumberToObject(r, "cases", agg->groups[i].cases);
		cJSON_AddItemToObject(g, agg->groups[i].name, r);
	}
	return o;
}

/* Rows as {"id": [flags, runs, pass_mask, errors, seconds, "group"]}, where
 * flags is 1 guard | 2 held out | 4 no train key | 8 runnable. */
cJSON *
sc_rows_json(const struct sc_row *rows, int n)
{
	cJSON *o = cJSON_CreateObject();

	for (int i = 0; i < n; i++) {
		const struct sc_row *r = &rows[i];
		cJSON *a = cJSON_CreateArray();
		int flags = (r->kind == SC_GUARD) | r->held_out << 1 | r->no_key << 2 |
		    r->runnable << 3;
		cJSON_AddItemToArray(a, cJSON_CreateNumber(flags));
		cJSON_AddItemToArray(a, cJSON_CreateNumber(r->runs));
		cJSON_AddItemToArray(a, cJSON_CreateNumber(r->pass_mask));
		cJSON_AddItemToArray(a, cJSON_CreateNumber(r->errors));
		cJSON_AddItemToArray(a, cJSON_CreateNumber(round(r->seconds * 1000) / 1000));
		cJSON_AddItemToArray(a, cJSON_CreateString(r->group));
		cJSON_AddItemToObject(o, r->id, a);
	}
	return o;
}

int
sc_rows_parse(const cJSON *cases, struct sc_row **rows, int *n, char *err, size_t errlen)
{
	const cJSON *e;
	struct sc_row *rs;
	int i = 0;

	*rows = NULL;
	*n = 0;
	if (!cJSON_IsObject(cases)) {
		plc_seterr(err, errlen, "cases: not an object");
		return -1;
	}
	rs = calloc(cJSON_GetArraySize(cases) + 1, sizeof(*rs));
	if (rs == NULL) {
		plc_seterr(err, errlen, "out of memory");
		return -1;
	}
	cJSON_ArrayForEach(e, cases) {
		const cJSON *f[6];
		int j = 0;
		const cJSON *x;
		struct sc_row *r = &rs[i];

		if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 6 || e->string == NULL ||
		    strlen(e->string) >= SC_NAME_MAX)
			goto bad;
		cJSON_ArrayForEach(x, e)
			f[j++] = x;
		for (j = 0; j < 5; j++)
			if (!cJSON_IsNumber(f[j]))
				goto bad;
		if (!cJSON_IsString(f[5]) || strlen(f[5]->valuestring) >= SC_NAME_MAX)
			goto bad;
		snprintf(r->id, sizeof(r->id), "%s", e->string);
		int flags = (int)f[0]->valuedouble;
		r->kind = flags & 1 ? SC_GUARD : SC_ROUTE;
		r->held_out = !!(flags & 2);
		r->no_key = !!(flags & 4);
		r->runnable = !!(flags & 8);
		r->runs = (int)f[1]->valuedouble;
		r->pass_mask = (uint32_t)f[2]->valuedouble;
		r->errors = (int)f[3]->valuedouble;
		r->seconds = f[4]->valuedouble;
		snprintf(r->group, sizeof(r->group), "%s", f[5]->valuestring);
		if (r->runs < 0 || r->runs > SC_MAX_PASSES)
			goto bad;
		i++;
		continue;
bad:
		plc_seterr(err, errlen, "cases.%.60s: not a result row", e->string ? e->string : "?");
		free(rs);
		return -1;
	}
	*rows = rs;
	*n = i;
	return 0;
}

const struct sc_row *
sc_row_find(const struct sc_row *rows, int n, const char *id)
{
	for (int i = 0; i < n; i++)
		if (strcmp(rows[i].id, id) == 0)
			return &rows[i];
	return NULL;
}

/* A case a model passed in every pass it made. */
static int
row_all_passed(const struct sc_row *r)
{
	return r->runs > 0 && sc_row_passed(r) == r->runs;
}

int
sc_fair_slice(const struct sc_row *a, int na, const struct sc_row *b, int nb,
    struct sc_fair *f)
{
	double ka = 0, kb = 0, oa = 0, ob = 0;

	memset(f, 0, sizeof(*f));
	for (int i = 0; i < na; i++) {
		const struct sc_row *y = sc_row_find(b, nb, a[i].id);
		if (y == NULL || !a[i].runnable || !y->runnable || a[i].runs == 0 ||
		    y->runs == 0)
			continue;
		double pa = (double)sc_row_passed(&a[i]) / a[i].runs;
		double pb = (double)sc_row_passed(y) / y->runs;
		f->common++;
		oa += pa;
		ob += pb;
		if (!a[i].held_out || !y->held_out)
			continue;
		f->cases++;
		ka += pa;
		kb += pb;
		int xa = row_all_passed(&a[i]), xb = row_all_passed(y);
		if (xa && xb)
			f->both++;
		else if (xa)
			f->only_a++;
		else if (xb)
			f->only_b++;
		else
			f->neither++;
	}
	rate_set(&f->a, ka, f->cases);
	rate_set(&f->b, kb, f->cases);
	rate_set(&f->oa, oa, f->common);
	rate_set(&f->ob, ob, f->common);
	f->p_mcnemar = sc_mcnemar_exact(f->only_a, f->only_b);
	return 0;
}

/*
 * Under the null hypothesis each discordant case is the candidate's with
 * probability 1/2: p = 2 P(X <= min(b, c)) for X ~ Binomial(b + c, 1/2),
 * at most 1. The terms are summed in logs (lgamma), so large n does not
 * underflow 0.5^n.
 */
double
sc_mcnemar_exact(int b, int c)
{
	int n = b + c, k = b < c ? b : c;
	double sum = 0, ln2 = log(2.0);

	if (b < 0 || c < 0 || n == 0)
		return 1.0;
	for (int i = 0; i <= k; i++)
		sum += exp(lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0) - n * ln2);
	return fmin(1.0, 2 * sum);
}

/* Keys are named for the two sides: A, A_only, A_overall and B's. */
cJSON *
sc_fair_json(const struct sc_fair *f, const char *a, const char *b)
{
	cJSON *o = cJSON_CreateObject();
	char k[SC_NAME_MAX + 16];

	cJSON_AddNumberToObject(o, "cases", f->cases);
	cJSON_AddItemToObject(o, a, sc_rate_json(&f->a));
	cJSON_AddItemToObject(o, b, sc_rate_json(&f->b));
	snprintf(k, sizeof(k), "%s_only", a);
	cJSON_AddNumberToObject(o, k, f->only_a);
	snprintf(k, sizeof(k), "%s_only", b);
	cJSON_AddNumberToObject(o, k, f->only_b);
	cJSON_AddNumberToObject(o, "both", f->both);
	cJSON_AddNumberToObject(o, "neither", f->neither);
	cJSON_AddNumberToObject(o, "mcnemar_p", f->p_mcnemar);
	cJSON_AddNumberToObject(o, "common_cases", f->common);
	snprintf(k, sizeof(k), "%s_overall", a);
	cJSON_AddItemToObject(o, k, sc_rate_json(&f->oa));
	snprintf(k, sizeof(k), "%s_overall", b);
	cJSON_AddItemToObject(o, k, sc_rate_json(&f->ob));
	return o;
}

/*
 * Holm's step-down correction of n p-values for having tested n
 * hypotheses (a sweep's gate picks the best of n variants): the k-th
 * smallest p, from 0, is multiplied by n - k, made no smaller than the
 * one before it, and capped at 1.
 */
void
sc_holm(const double *p, int n, double *adj)
{
	int *ord = calloc((size_t)(n > 0 ? n : 1), sizeof(int));
	if (ord == NULL) {
		for (int i = 0; i < n; i++)
			adj[i] = 1.0;
		return;
	}
	for (int i = 0; i < n; i++)
		ord[i] = i;
	/* Insertion sort by p: a sweep has tens of variants at most. */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && p[ord[j]] < p[ord[j - 1]]; j--) {
			int t = ord[j];
			ord[j] = ord[j - 1];
			ord[j - 1] = t;
		}
	double run = 0;
	for (int k = 0; k < n; k++) {
		double a = fmin(1.0, (n - k) * p[ord[k]]);
		run = fmax(run, a);
		adj[ord[k]] = run;
	}
	free(ord);
}
