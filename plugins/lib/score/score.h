/*
 * score.h: the bake's scoring, as pure functions: the case file and the
 * capability list, the model output parser, per-case outcomes, Wilson
 * intervals, aggregates over passes, and the release rule the gate applies.
 *
 * Nothing here talks to a server or to the host; the bake and gate stages
 * and `pipelinectl report` share it so that the numbers they print are the
 * same numbers. Functions that can fail return 0 or -1 and write a message
 * naming the file, line and field into err.
 *
 * Three parts, a file each: the cases (score_cases.c: capabilities, case
 * files, corpus keys, parsing and scoring one output), the statistics
 * (score_stats.c: Wilson intervals, rows, aggregates, the fair slice,
 * McNemar's test) and the release rule (score_rule.c).
 */
#ifndef PL_SCORE_H
#define PL_SCORE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* Longest model output the parser looks at; longer is unparseable. */
#define SC_MAX_OUTPUT	(256 * 1024)
/* Longest capability name, id, group. */
#define SC_NAME_MAX	128
/* Most passes a bake may make (a pass mask is 32 bits). */
#define SC_MAX_PASSES	32

/* ---------------------------------------------------- cases: score_cases.c */

enum sc_kind { SC_ROUTE = 0, SC_GUARD = 1 };

/* The outcome of one pass of one case. SC_ERROR is the bake's fault
 * (truncated prompt, server error), never the model's (G01). */
enum sc_outcome {
	SC_PASS = 0,
	SC_MISS,		/* wrong capability or arguments */
	SC_FORBIDDEN,		/* returned a forbidden capability */
	SC_UNPARSEABLE,		/* not the JSON object the schema asks for */
	SC_ERROR,		/* the bake failed to get an honest answer */
	SC_SKIPPED		/* the case's capability is disabled: not runnable */
};
const char	*sc_outcome_name(int outcome);
/* The outcome a name (sc_outcome_name) stands for, or -1. */
int	sc_outcome_parse(const char *name);

/* The capability list: every capability the router accepts, hidden ones
 * included (G26), and those disabled for this bake. */
struct sc_caps {
	int n;
	char **name;
	unsigned char *hidden;
	unsigned char *disabled;
};
int	sc_caps_load(const char *path, struct sc_caps *caps, char *err, size_t errlen);
/* Mark a capability disabled; -1 when it is not in the list. */
int	sc_caps_disable(struct sc_caps *caps, const char *name);
int	sc_caps_find(const struct sc_caps *caps, const char *name);
void	sc_caps_free(struct sc_caps *caps);
/* The JSON schema for a routing answer: an object with "capability" (an
 * enum of every enabled capability, hidden ones included) and "args". */
cJSON	*sc_schema(const struct sc_caps *caps);

/* One test case from the case file (pipeline-cases(5)). */
struct sc_case {
	char *id;
	int line;		/* line in the case file */
	int kind;		/* enum sc_kind */
	char *channel;		/* the case's channel; setup turns are on it (G25) */
	cJSON *setup;		/* array of {"role","content"}, may be empty */
	char *user;		/* the user turn */
	char *expect;		/* the asserted capability; NULL for a guard without one */
	cJSON *args;		/* asserted arguments (object) or NULL */
	char **forbid;		/* forbidden capabilities */
	int nforbid;
	char *train_key;	/* NULL: no train key at all */
	char group[SC_NAME_MAX];/* per-capability slice: expect, or "guard:<forbid[0]>" */
};
int	sc_cases_load(const char *path, const struct sc_caps *caps,
	    struct sc_case **cases, int *ncases, char *err, size_t errlen);
/* Parse one case line (for the loader and the fuzz target). */
int	sc_case_parse(const char *line, size_t len, const struct sc_caps *caps,
	    struct sc_case *c, char *err, size_t errlen);
void	sc_case_free(struct sc_case *c);
void	sc_cases_free(struct sc_case *cases, int n);
/* 1 when the case cannot run because its capability is disabled. */
int	sc_case_skipped(const struct sc_case *c, const struct sc_caps *caps);

/* A case's canonical form (fields in a fixed order: id, kind, channel,
 * setup, user, expect, args, forbid, train_key), and the sha256 of its
 * text: two cases with the same digest ask the same and pass alike. */
cJSON	*sc_case_canon(const struct sc_case *c);
void	sc_case_digest(const struct sc_case *c, char hex[65]);
/* The capability list as the digests hold it: "NAME[ hidden][ disabled]". */
cJSON	*sc_caps_canon(const struct sc_caps *caps);
/* The case-set digest: sha256 over the canonical form of every case (sorted
 * by id), the system prompt and the capability list with its flags. Bakes
 * with different digests are never compared. */
void	sc_case_set_digest(const struct sc_case *cases, int n, const char *system,
	    const struct sc_caps *caps, char hex[65]);

/* The corpus keys of the tokenize stage's stats artifact ("corpus_keys"). */
struct sc_keys {
	int n;
	char **key;		/* sorted */
};
int	sc_keys_load(const char *stats_path, struct sc_keys *keys, char *err, size_t errlen);
int	sc_keys_parse(const char *json, struct sc_keys *keys, char *err, size_t errlen);
int	sc_keys_has(const struct sc_keys *keys, const char *key);
void	sc_keys_free(struct sc_keys *keys);
/* Held out: no train key, or one that is not among the corpus keys. */
int	sc_held_out(const struct sc_case *c, const struct sc_keys *keys);

/* A parsed model answer. */
struct sc_answer {
	char capability[SC_NAME_MAX];
	cJSON *args;		/* owned; NULL when absent */
};
/* Parse a model's output: one JSON object, optionally fenced in ```;
 * returns 0, or -1 with why filled (never crashes on any input). */
int	sc_parse_answer(const char *text, size_t len, struct sc_answer *a,
	    char *why, size_t whylen);
void	sc_answer_free(struct sc_answer *a);
/* Score one output against a case: an enum sc_outcome. got receives the
 * returned capability (or ""), why a short reason for anything but a pass. */
int	sc_score(const struct sc_case *c, const struct sc_caps *caps,
	    const char *text, size_t len, char *got, size_t gotlen,
	    char *why, size_t whylen);
/* Compare asserted arguments with returned ones: every asserted key must be
 * present with an equal value (strings trimmed and case-folded, numbers
 * numerically, no type coercion). 1 when they match. */
int	sc_args_match(const cJSON *want, const cJSON *got);

/* ------------------------------------------------ statistics: score_stats.c */

/* Wilson score interval for k successes in n trials at normal quantile z
 * (1.959964 for 95%). k may be fractional (a mean over passes). */
void	sc_wilson(double k, double n, double z, double *lo, double *hi);
#define SC_Z95	1.959963984540054

/* One case's results over all passes: the compact row the bake stores in
 * its summary and the gate and report read back. */
struct sc_row {
	char id[SC_NAME_MAX];
	char group[SC_NAME_MAX];
	int kind;
	int held_out;
	int no_key;		/* carries no train key at all */
	int runnable;		/* 0: skipped (disabled capability) */
	int runs;		/* passes made */
	uint32_t pass_mask;	/* bit p: pass p passed */
	int errors;		/* passes that were bake errors */
	double seconds;		/* summed over the passes */
};
int	sc_row_passed(const struct sc_row *r);	/* passes that passed */
/* The row of case id, or NULL. */
const struct sc_row *sc_row_find(const struct sc_row *rows, int n, const char *id);

struct sc_rate {
	double k, n;		/* successes (may be fractional), trials */
	double acc, lo, hi;	/* k/n and its Wilson 95% interval */
};
struct sc_group {
	char name[SC_NAME_MAX];
	int cases;
	struct sc_rate rate;
};
struct sc_agg {
	int cases, runnable, skipped, errors, passes;
	struct sc_rate overall;		/* case-passes pooled over passes */
	struct sc_rate held_out;
	int held_out_cases;
	int guards_held_out;		/* held-out guard cases */
	int guard_breaches;		/* held-out guards failed in any pass */
	int breaches_per_pass[SC_MAX_PASSES];
	double acc_per_pass[SC_MAX_PASSES];
	int passed_per_pass[SC_MAX_PASSES];
	double spread_pp;		/* max - min per-pass accuracy, points */
	double s_per_case;		/* mean seconds per case-pass */
	int ngroups;
	struct sc_group *groups;	/* sorted by name; malloc'd */
};
/* Aggregate rows made with `passes` passes. */
int	sc_aggregate(const struct sc_row *rows, int n, int passes, struct sc_agg *agg);
void	sc_agg_free(struct sc_agg *agg);

/* Rows to and from the summary's "rows" object. */
cJSON	*sc_rows_json(const struct sc_row *rows, int n);
int	sc_rows_parse(const cJSON *cases, struct sc_row **rows, int *n,
	    char *err, size_t errlen);
cJSON	*sc_agg_json(const struct sc_agg *agg);
cJSON	*sc_rate_json(const struct sc_rate *r);

/* The fair slice between two bakes of the same case set: the cases
 * neither model's corpus holds (held out for both; when both held-out
 * sets are the same, that set). Besides the accuracy of each side on it,
 * the paired comparison: a case counts as passed by a model when it
 * passed in every pass, and the cases one model alone passed (only_a,
 * only_b) go to McNemar's exact test. The tie-break's overall accuracy is
 * taken on the cases runnable for both. */
struct sc_fair {
	int cases;
	struct sc_rate a, b;		/* accuracy on the fair slice */
	int only_a, only_b;		/* discordant cases */
	int both, neither;		/* concordant cases */
	double p_mcnemar;		/* two-sided exact p of only_a vs only_b */
	int common;			/* cases runnable for both */
	struct sc_rate oa, ob;		/* overall accuracy on those */
};
int	sc_fair_slice(const struct sc_row *a, int na, const struct sc_row *b, int nb,
	    struct sc_fair *f);
/* McNemar's exact test: the two-sided binomial p of b successes against c
 * at probability 1/2 (1 when b + c is 0). */
double	sc_mcnemar_exact(int b, int c);
/* Holm's correction of n p-values: adj[i] for p[i]. */
void	sc_holm(const double *p, int n, double *adj);
/* The fair slice as the verdict and the report store it, the sides named
 * a and b (the keys a, a_only, a_overall and b's). */
cJSON	*sc_fair_json(const struct sc_fair *f, const char *a, const char *b);

/* ---------------------------------------------- the release rule: score_rule.c */

/* The release rule (pipeline-gotchas(7), F17): veto a candidate that breaches a
 * held-out guard the incumbent passes (every pass); otherwise, with a
 * fair slice of at least min_fair cases, rank by accuracy on the fair
 * slice, and within tie_pp points break the tie by overall accuracy on
 * the cases both ran. Nothing is released on a full tie, nor on a fair
 * slice below min_fair. */
enum sc_verdict_code {
	SC_V_PROMOTE = 0,	/* candidate wins */
	SC_V_VETO,		/* new held-out guard breach */
	SC_V_FAIR_LOWER,	/* lower fair-slice accuracy beyond the tie */
	SC_V_TIE_OVERALL,	/* fair-slice tie, overall not higher */
	SC_V_INCOMPLETE,	/* the rows are not comparable */
	SC_V_FAIR_SMALL		/* fair slice below min_fair: no basis for a verdict */
};
struct sc_verdict {
	int code;
	int pass;			/* 1 when the candidate may be released */
	double d_fair_pp;		/* candidate - incumbent, on the fair slice */
	double d_held_out_pp;		/* each on its own held-out set (not ranked) */
	double d_overall_pp;		/* on the cases both ran */
	int tie;			/* |d_fair_pp| <= tie_pp */
	int min_fair;
	struct sc_fair fair;		/* a: candidate, b: incumbent */
	int new_breaches;
	char breach_ids[512];		/* comma-separated, truncated */
	char reason[512];
};
int	sc_release_rule(const struct sc_row *cand, int nc, const struct sc_agg *ca,
	    const struct sc_row *inc, int ni, const struct sc_agg *ia,
	    double tie_pp, int min_fair, struct sc_verdict *v);
const char	*sc_verdict_name(int code);

#endif
