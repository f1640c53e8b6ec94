/*
 * score_rule.c: the release rule the gate applies to two bakes (score.h,
 * last part), over the statistics of score_stats.c. A pure function.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "score.h"

const char *
sc_verdict_name(int code)
{
	switch (code) {
	case SC_V_PROMOTE:	return "promote";
	case SC_V_VETO:		return "veto";
	case SC_V_FAIR_LOWER:	return "fair slice lower";
	case SC_V_TIE_OVERALL:	return "tie, overall not higher";
	case SC_V_INCOMPLETE:	return "not comparable";
	case SC_V_FAIR_SMALL:	return "fair slice too small";
	}
	return "unknown";
}

int
sc_release_rule(const struct sc_row *cand, int nc, const struct sc_agg *ca,
    const struct sc_row *inc, int ni, const struct sc_agg *ia,
    double tie_pp, int min_fair, struct sc_verdict *v)
{
	size_t off = 0;
	const struct sc_fair *f = &v->fair;
	char paired[200];

	memset(v, 0, sizeof(*v));
	v->code = SC_V_INCOMPLETE;
	v->min_fair = min_fair;
	if (ca->errors > 0 || ia->errors > 0) {
		snprintf(v->reason, sizeof(v->reason), "bake errors (candidate %d, incumbent %d): "
		    "results are incomplete", ca->errors, ia->errors);
		return 0;
	}
	if (ca->runnable == 0 || ia->runnable == 0) {
		snprintf(v->reason, sizeof(v->reason), "no runnable cases");
		return 0;
	}
	/*
	 * The veto first (F17): the overall number ranked the worst router
	 * first until held-out guards the incumbent passes could veto. The
	 * incumbent passes a guard only when it passed every pass. The guard
	 * is held out from the candidate's corpus; the incumbent may have
	 * trained on it.
	 */
	for (int i = 0; i < nc; i++) {
		const struct sc_row *c = &cand[i], *r;
		if (c->kind != SC_GUARD || !c->held_out || !c->runnable)
			continue;
		if (sc_row_passed(c) == c->runs)
			continue;
		r = sc_row_find(inc, ni, c->id);
		if (r == NULL) {
			snprintf(v->reason, sizeof(v->reason), "case %s missing from the "
			    "incumbent's results", c->id);
			return 0;
		}
		if (!r->runnable || r->runs == 0 || sc_row_passed(r) != r->runs)
			continue;
		v->new_breaches++;
		if (off < sizeof(v->breach_ids) - 1) {
			int w = snprintf(v->breach_ids + off, sizeof(v->breach_ids) - off,
			    "%s%s", off ? "," : "", c->id);
			off += w > 0 ? (size_t)w : 0;
		}
	}
	/*
	 * The ranking compares like with like: each model's held-out set is
	 * what its own corpus lacks, and two different sets of cases do not
	 * rank two models. The fair slice is the cases both held out.
	 */
	sc_fair_slice(cand, nc, inc, ni, &v->fair);
	v->d_fair_pp = (f->a.acc - f->b.acc) * 100;
	v->d_held_out_pp = (ca->held_out.acc - ia->held_out.acc) * 100;
	v->d_overall_pp = (f->oa.acc - f->ob.acc) * 100;
	/* Compare in rounded hundredths of a point so that 0.5 means 0.5. */
	v->tie = fabs(round(v->d_fair_pp * 100) / 100) <= tie_pp;
	snprintf(paired, sizeof(paired), "%.2f%% vs %.2f%% of %d cases; candidate alone "
	    "passed %d, incumbent alone %d, McNemar p %.3g", f->a.acc * 100, f->b.acc * 100,
	    f->cases, f->only_a, f->only_b, f->p_mcnemar);
	if (v->new_breaches > 0) {
		v->code = SC_V_VETO;
		snprintf(v->reason, sizeof(v->reason), "veto: %d held-out guard%s the "
		    "incumbent passes breached (%.400s)", v->new_breaches,
		    v->new_breaches == 1 ? "" : "s", v->breach_ids);
	} else if (f->cases < min_fair) {
		v->code = SC_V_FAIR_SMALL;
		snprintf(v->reason, sizeof(v->reason), "fair slice of %d case%s is below "
		    "min_fair_cases %d: no basis for a verdict (fair slice %.2f%% vs "
		    "%.2f%%; held-out %.2f%% of %d vs %.2f%% of %d)", f->cases,
		    f->cases == 1 ? "" : "s", min_fair, f->a.acc * 100, f->b.acc * 100,
		    ca->held_out.acc * 100, ca->held_out_cases, ia->held_out.acc * 100,
		    ia->held_out_cases);
	} else if (!v->tie && v->d_fair_pp > 0) {
		v->code = SC_V_PROMOTE;
		snprintf(v->reason, sizeof(v->reason), "fair slice %+.2f pp beyond the "
		    "%.2f pp tie (%s)", v->d_fair_pp, tie_pp, paired);
	} else if (!v->tie) {
		v->code = SC_V_FAIR_LOWER;
		snprintf(v->reason, sizeof(v->reason), "fair slice %+.2f pp (%s)",
		    v->d_fair_pp, paired);
	} else if (round(v->d_overall_pp * 100) > 0) {
		v->code = SC_V_PROMOTE;
		snprintf(v->reason, sizeof(v->reason), "fair-slice tie (%+.2f pp within "
		    "%.2f; %s), overall %+.2f pp", v->d_fair_pp, tie_pp, paired,
		    v->d_overall_pp);
	} else {
		v->code = SC_V_TIE_OVERALL;
		snprintf(v->reason, sizeof(v->reason), "fair-slice tie (%+.2f pp within "
		    "%.2f; %s), overall %+.2f pp is not higher", v->d_fair_pp, tie_pp,
		    paired, v->d_overall_pp);
	}
	v->pass = v->code == SC_V_PROMOTE;
	return 0;
}
