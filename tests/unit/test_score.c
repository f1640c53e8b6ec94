/*
 * test_score.c: the bake's scoring (plugins/lib/score/score_*.c): hostile model
 * output, case-file errors, Wilson intervals, held-out, aggregates over
 * passes, the fair slice and the release rule.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plio.h"
#include "score.h"
#include "runner.h"

#define NEAR(a, b, eps) CHECK(fabs((double)(a) - (double)(b)) <= (eps))

static char tmpdir[4096];

static const char *
write_tmp(const char *name, const char *text)
{
	static char path[4200];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	if (plc_write_file_atomic(path, text, strlen(text), 0644) == -1) {
		perror(path);
		exit(2);
	}
	return path;
}

static struct sc_caps caps;

static void
load_caps(void)
{
	char err[256];
	const char *p = write_tmp("caps.txt",
	    "# capabilities of the router\n"
	    "open_folder\n"
	    "delete_file\n"
	    "clarify hidden   # not in the prompt's docs (G26)\n"
	    "play_music disabled\n"
	    "\n"
	    "search\n");
	if (sc_caps_load(p, &caps, err, sizeof(err)) == -1) {
		fprintf(stderr, "caps: %s\n", err);
		exit(2);
	}
	CHECK(caps.n == 5);
	CHECK(caps.hidden[sc_caps_find(&caps, "clarify")] == 1);
	CHECK(caps.disabled[sc_caps_find(&caps, "play_music")] == 1);
}

static void
case_caps_errors(void)
{
	struct sc_caps c;
	char err[256];

	CHECK(sc_caps_load(write_tmp("c1", "a\nb loud\n"), &c, err, sizeof(err)) == -1);
	CHECK(strstr(err, ":2:") != NULL && strstr(err, "loud") != NULL);
	CHECK(sc_caps_load(write_tmp("c2", "a\na\n"), &c, err, sizeof(err)) == -1);
	CHECK(strstr(err, "twice") != NULL);
	CHECK(sc_caps_load(write_tmp("c3", "# nothing\n"), &c, err, sizeof(err)) == -1);
}

static void
case_schema(void)
{
	cJSON *s = sc_schema(&caps);
	char *t = cJSON_PrintUnformatted(s);

	/* The hidden capability is in the enum (G26); the disabled one is not. */
	CHECK(strstr(t, "\"clarify\"") != NULL);
	CHECK(strstr(t, "\"play_music\"") == NULL);
	CHECK(strstr(t, "\"required\":[\"capability\",\"args\"]") != NULL);
	free(t);
	cJSON_Delete(s);
}

static void
case_parse_hostile(void)
{
	struct sc_answer a;
	char why[128];
	static const char *bad[] = {
		"",
		"   ",
		"I would open the folder for you.",
		"{\"capability\": \"open_folder\"",			/* cut by a token cap */
		"[\"open_folder\"]",
		"\"open_folder\"",
		"{\"capability\": 42, \"args\": {}}",			/* wrong type */
		"{\"capability\": null}",
		"{\"capability\": \"\"}",
		"{\"capability\": \"open_folder\", \"args\": \"docs\"}",	/* args not an object */
		"{\"capability\": \"open_folder\", \"args\": []}",
		"{\"capability\": \"open_folder\"} and more text",
		"Sure! {\"capability\": \"open_folder\"}",
		"```json\n```",
		"{\"capability\": [\"open_folder\"]}",
		NULL
	};
	for (int i = 0; bad[i]; i++) {
		int rc = sc_parse_answer(bad[i], strlen(bad[i]), &a, why, sizeof(why));
		if (rc != -1)
			fprintf(stderr, "accepted: %s\n", bad[i]);
		CHECK(rc == -1);
		CHECK(why[0] != '\0');
	}

	/* Deep nesting: beyond cJSON's limit, and a legal depth inside args. */
	size_t depth = 100000, len = 0;
	char *deep = malloc(2 * depth + 64);
	len += sprintf(deep, "{\"capability\":\"x\",\"args\":{\"a\":");
	for (size_t i = 0; i < depth; i++)
		deep[len++] = '[';
	for (size_t i = 0; i < depth; i++)
		deep[len++] = ']';
	len += sprintf(deep + len, "}}");
	CHECK(sc_parse_answer(deep, len, &a, why, sizeof(why)) == -1);
	free(deep);

	/* Huge output. */
	size_t hl = SC_MAX_OUTPUT + 10;
	char *huge = malloc(hl);
	memset(huge, ' ', hl);
	memcpy(huge, "{\"capability\":\"open_folder\"}", 28);
	CHECK(sc_parse_answer(huge, hl, &a, why, sizeof(why)) == -1);
	CHECK(strstr(why, "exceeds") != NULL);
	free(huge);

	/* An embedded NUL is refused, not silently cut. */
	CHECK(sc_parse_answer("{\"capability\":\"a\"}\0x", 20, &a, why, sizeof(why)) == -1);

	/* Accepted shapes. */
	const char *ok = "  ```json\n{\"capability\": \"open_folder\", \"args\": {\"path\": \"docs\"}}\n```\n";
	CHECK(sc_parse_answer(ok, strlen(ok), &a, why, sizeof(why)) == 0);
	CHECK(strcmp(a.capability, "open_folder") == 0);
	CHECK(cJSON_IsObject(a.args));
	sc_answer_free(&a);
	CHECK(sc_parse_answer("{\"capability\":\"search\"}", 23, &a, why, sizeof(why)) == 0);
	CHECK(a.args == NULL);
	sc_answer_free(&a);
}

static struct sc_case
mkcase(const char *line)
{
	struct sc_case c;
	char err[256];

	if (sc_case_parse(line, strlen(line), &caps, &c, err, sizeof(err)) == -1) {
		fprintf(stderr, "case: %s: %s\n", line, err);
		exit(2);
	}
	return c;
}

static int
score(const struct sc_case *c, const char *out)
{
	char got[SC_NAME_MAX], why[128];

	return sc_score(c, &caps, out, strlen(out), got, sizeof(got), why, sizeof(why));
}

static void
case_score_cases(void)
{
	struct sc_case r = mkcase("{\"id\":\"r1\",\"kind\":\"route\",\"user\":\"open docs\","
	    "\"expect\":{\"capability\":\"open_folder\",\"args\":{\"path\":\"docs\",\"n\":2,"
	    "\"tags\":[\"a\",\"b\"]}},\"forbid\":[\"delete_file\"],\"train_key\":\"k1\"}");
	CHECK(strcmp(r.group, "open_folder") == 0);
	CHECK(score(&r, "{\"capability\":\"open_folder\",\"args\":{\"path\":\" Docs\",\"n\":2,"
	    "\"tags\":[\"A\",\"b\"],\"extra\":1}}") == SC_PASS);
	/* Wrong types are misses, not coerced. */
	CHECK(score(&r, "{\"capability\":\"open_folder\",\"args\":{\"path\":\"docs\",\"n\":\"2\","
	    "\"tags\":[\"a\",\"b\"]}}") == SC_MISS);
	CHECK(score(&r, "{\"capability\":\"open_folder\",\"args\":{\"path\":\"docs\",\"n\":2}}") == SC_MISS);
	CHECK(score(&r, "{\"capability\":\"open_folder\",\"args\":{\"path\":\"docs\",\"n\":2,"
	    "\"tags\":[\"a\"]}}") == SC_MISS);
	CHECK(score(&r, "{\"capability\":\"open_folder\"}") == SC_MISS);
	CHECK(score(&r, "{\"capability\":\"search\",\"args\":{}}") == SC_MISS);
	CHECK(score(&r, "{\"capability\":\"delete_file\",\"args\":{}}") == SC_FORBIDDEN);
	CHECK(score(&r, "{\"capability\":\"teleport\",\"args\":{}}") == SC_MISS);
	CHECK(score(&r, "open_folder") == SC_UNPARSEABLE);

	/* A guard with no asserted capability: anything but the forbidden one. */
	struct sc_case g = mkcase("{\"id\":\"g1\",\"kind\":\"guard\",\"user\":\"don't delete x\","
	    "\"forbid\":[\"delete_file\"]}");
	CHECK(strcmp(g.group, "guard:delete_file") == 0);
	CHECK(g.train_key == NULL);
	CHECK(score(&g, "{\"capability\":\"clarify\",\"args\":{}}") == SC_PASS);
	CHECK(score(&g, "{\"capability\":\"delete_file\",\"args\":{\"p\":\"x\"}}") == SC_FORBIDDEN);
	CHECK(score(&g, "{}") == SC_UNPARSEABLE);

	/* Held out: no train key, or a key not in the corpus. */
	struct sc_keys keys;
	char err[128];
	CHECK(sc_keys_parse("{\"corpus_keys\":[\"k9\",\"k1\",\"k5\"]}", &keys, err, sizeof(err)) == 0);
	CHECK(sc_held_out(&r, &keys) == 0);
	CHECK(sc_held_out(&g, &keys) == 1);
	free(r.train_key);
	r.train_key = strdup("k2");
	CHECK(sc_held_out(&r, &keys) == 1);
	sc_keys_free(&keys);
	CHECK(sc_keys_parse("{\"corpus_keys\":[1]}", &keys, err, sizeof(err)) == -1);
	CHECK(sc_keys_parse("{\"keys\":[]}", &keys, err, sizeof(err)) == -1);

	/* Disabled capability: skipped, not runnable. */
	struct sc_case d = mkcase("{\"id\":\"d1\",\"kind\":\"route\",\"user\":\"play\","
	    "\"expect\":{\"capability\":\"play_music\"}}");
	CHECK(sc_case_skipped(&d, &caps) == 1);
	CHECK(sc_case_skipped(&r, &caps) == 0);
	sc_case_free(&r);
	sc_case_free(&g);
	sc_case_free(&d);
}

static void
case_case_errors(void)
{
	struct sc_case c;
	char err[256];
	static const struct { const char *line, *want; } bad[] = {
		{ "nope", "not a JSON object" },
		{ "{\"kind\":\"route\",\"user\":\"x\",\"expect\":{\"capability\":\"search\"}}", "id" },
		{ "{\"id\":\"a\",\"kind\":\"routing\",\"user\":\"x\"}", "kind" },
		{ "{\"id\":\"a\",\"kind\":\"route\",\"user\":\"x\"}", "expect.capability" },
		{ "{\"id\":\"a\",\"kind\":\"route\",\"user\":\"x\",\"expect\":{\"capability\":\"serch\"}}", "serch" },
		{ "{\"id\":\"a\",\"kind\":\"guard\",\"user\":\"x\"}", "forbid" },
		{ "{\"id\":\"a\",\"kind\":\"guard\",\"user\":\"x\",\"forbid\":[\"nope\"]}", "forbid[0]" },
		{ "{\"id\":\"a\",\"kind\":\"route\",\"user\":\"x\",\"expect\":{\"capability\":\"search\"},"
		  "\"forbid\":[\"search\"]}", "forbids the expected" },
		{ "{\"id\":\"a\",\"kind\":\"route\",\"user\":\"x\",\"expect\":{\"capability\":\"search\"},"
		  "\"colour\":1}", "colour" },
		{ "{\"id\":\"a\",\"kind\":\"route\",\"channel\":\"ops\",\"user\":\"x\","
		  "\"expect\":{\"capability\":\"search\"},"
		  "\"setup\":[{\"role\":\"user\",\"content\":\"hi\",\"channel\":\"general\"}]}", "G25" },
		{ "{\"id\":\"a\",\"kind\":\"route\",\"user\":\"x\",\"expect\":{\"capability\":\"search\"},"
		  "\"setup\":[{\"role\":\"system\",\"content\":\"hi\"}]}", "setup[0]" },
		{ "{\"id\":\"a\",\"kind\":\"route\",\"user\":\"x\",\"expect\":{\"capability\":\"search\","
		  "\"args\":[1]}}", "expect.args" },
		{ "{\"id\":\"a\",\"kind\":\"route\",\"user\":\"x\",\"expect\":{\"capability\":\"search\"},"
		  "\"train_key\":5}", "train_key" },
		{ NULL, NULL }
	};
	for (int i = 0; bad[i].line; i++) {
		err[0] = '\0';
		CHECK(sc_case_parse(bad[i].line, strlen(bad[i].line), &caps, &c, err, sizeof(err)) == -1);
		if (strstr(err, bad[i].want) == NULL)
			fprintf(stderr, "case %d: error \"%s\" lacks \"%s\"\n", i, err, bad[i].want);
		CHECK(strstr(err, bad[i].want) != NULL);
	}

	/* The loader names the file and line, and refuses duplicate ids. */
	struct sc_case *cs;
	int n;
	const char *p = write_tmp("dup.jsonl",
	    "{\"id\":\"a\",\"kind\":\"route\",\"user\":\"x\",\"expect\":{\"capability\":\"search\"}}\n"
	    "\n"
	    "{\"id\":\"a\",\"kind\":\"route\",\"user\":\"y\",\"expect\":{\"capability\":\"search\"}}\n");
	CHECK(sc_cases_load(p, &caps, &cs, &n, err, sizeof(err)) == -1);
	CHECK(strstr(err, "dup.jsonl:3:") != NULL && strstr(err, "line 1") != NULL);
}

static void
case_digest(void)
{
	struct sc_case *a, *b;
	int na, nb;
	char err[256], h1[65], h2[65], h3[65], h4[65];
	const char *l1 = "{\"id\":\"a\",\"kind\":\"route\",\"user\":\"x\",\"expect\":{\"capability\":\"search\"}}\n";
	const char *l2 = "{\"id\":\"b\",\"kind\":\"guard\",\"user\":\"y\",\"forbid\":[\"delete_file\"]}\n";
	char buf[1024];

	snprintf(buf, sizeof(buf), "%s%s", l1, l2);
	CHECK(sc_cases_load(write_tmp("d1.jsonl", buf), &caps, &a, &na, err, sizeof(err)) == 0);
	snprintf(buf, sizeof(buf), "%s%s", l2, l1);
	CHECK(sc_cases_load(write_tmp("d2.jsonl", buf), &caps, &b, &nb, err, sizeof(err)) == 0);
	sc_case_set_digest(a, na, "sys", &caps, h1);
	sc_case_set_digest(b, nb, "sys", &caps, h2);
	CHECK(strcmp(h1, h2) == 0);		/* order does not matter */
	sc_case_set_digest(b, nb, "sys2", &caps, h3);
	CHECK(strcmp(h1, h3) != 0);		/* the system prompt does */
	free(b[0].user);
	b[0].user = strdup("z");
	sc_case_set_digest(b, nb, "sys", &caps, h4);
	CHECK(strcmp(h1, h4) != 0);		/* and every case's text */
	sc_cases_free(a, na);
	sc_cases_free(b, nb);
}

static void
case_wilson(void)
{
	double lo, hi;

	/* Reference values (Wilson 1927; e.g. statsmodels proportion_confint). */
	sc_wilson(7, 8, SC_Z95, &lo, &hi);
	NEAR(lo, 0.52911, 1e-4);
	NEAR(hi, 0.97762, 1e-4);
	sc_wilson(0, 10, SC_Z95, &lo, &hi);
	NEAR(lo, 0.0, 1e-12);
	NEAR(hi, 0.27753, 1e-4);
	sc_wilson(10, 10, SC_Z95, &lo, &hi);
	NEAR(lo, 0.72247, 1e-4);
	NEAR(hi, 1.0, 1e-12);
	sc_wilson(1145, 1191, SC_Z95, &lo, &hi);
	NEAR(lo, 0.94887, 1e-4);
	NEAR(hi, 0.97092, 1e-4);
	sc_wilson(0, 0, SC_Z95, &lo, &hi);
	CHECK(lo == 0 && hi == 1);
}

static struct sc_row
row(const char *id, int kind, int held, int runnable, int runs, uint32_t mask, const char *group)
{
	struct sc_row r;

	memset(&r, 0, sizeof(r));
	snprintf(r.id, sizeof(r.id), "%s", id);
	snprintf(r.group, sizeof(r.group), "%s", group);
	r.kind = kind;
	r.held_out = held;
	r.runnable = runnable;
	r.runs = runs;
	r.pass_mask = mask;
	r.seconds = runs * 0.5;
	return r;
}

static void
case_aggregate(void)
{
	struct sc_row rows[6];
	struct sc_agg agg;

	rows[0] = row("a", SC_ROUTE, 0, 1, 3, 7, "open_folder");
	rows[1] = row("b", SC_ROUTE, 1, 1, 3, 5, "open_folder");	/* passes 0 and 2 */
	rows[2] = row("c", SC_ROUTE, 1, 1, 3, 0, "search");
	rows[3] = row("g", SC_GUARD, 1, 1, 3, 3, "guard:delete_file");	/* fails pass 2 */
	rows[4] = row("h", SC_GUARD, 0, 1, 3, 0, "guard:delete_file");	/* not held out */
	rows[5] = row("s", SC_ROUTE, 1, 0, 0, 0, "play_music");
	CHECK(sc_aggregate(rows, 6, 3, &agg) == 0);
	CHECK(agg.runnable == 5 && agg.skipped == 1);
	NEAR(agg.overall.acc, (3 + 2 + 0 + 2 + 0) / 15.0, 1e-12);
	NEAR(agg.held_out.acc, (2 + 0 + 2) / 9.0, 1e-12);
	CHECK(agg.held_out_cases == 3);
	CHECK(agg.guards_held_out == 1 && agg.guard_breaches == 1);
	CHECK(agg.breaches_per_pass[0] == 0 && agg.breaches_per_pass[2] == 1);
	CHECK(agg.passed_per_pass[0] == 3 && agg.passed_per_pass[1] == 2 &&
	    agg.passed_per_pass[2] == 2);
	NEAR(agg.spread_pp, (3 - 2) / 5.0 * 100, 1e-9);
	NEAR(agg.s_per_case, 0.5, 1e-12);
	CHECK(agg.ngroups == 3);
	CHECK(strcmp(agg.groups[0].name, "guard:delete_file") == 0);
	CHECK(agg.groups[1].cases == 2);
	NEAR(agg.groups[1].rate.acc, (1 + 2 / 3.0) / 2, 1e-12);

	/* Round trip through the summary's JSON. */
	cJSON *j = sc_rows_json(rows, 6);
	struct sc_row *back;
	int n;
	char err[128];
	CHECK(sc_rows_parse(j, &back, &n, err, sizeof(err)) == 0);
	CHECK(n == 6);
	CHECK(memcmp(&back[3], &rows[3], sizeof(rows[3])) == 0);
	CHECK(back[5].runnable == 0 && back[1].pass_mask == 5);
	free(back);
	cJSON_Delete(j);
	j = cJSON_Parse("{\"a\":[1,2,3]}");
	CHECK(sc_rows_parse(j, &back, &n, err, sizeof(err)) == -1);
	cJSON_Delete(j);
	sc_agg_free(&agg);
}

/* The release rule on recorded results. */
static void
case_release_rule(void)
{
	struct sc_row inc[10], cand[10];
	struct sc_agg ia, ca;
	struct sc_verdict v;
	char id[8];

	/* Ten held-out route cases and one held-out guard both pass. */
	for (int i = 0; i < 9; i++) {
		snprintf(id, sizeof(id), "r%d", i);
		inc[i] = row(id, SC_ROUTE, 1, 1, 3, 7, "x");
		cand[i] = row(id, SC_ROUTE, 1, 1, 3, 7, "x");
	}
	inc[9] = row("g", SC_GUARD, 1, 1, 3, 7, "guard:y");
	cand[9] = row("g", SC_GUARD, 1, 1, 3, 7, "guard:y");

	/* 1. Guard veto: the candidate is better on held-out routes but fails
	 * the guard once in three passes, which the incumbent passes. */
	inc[0].pass_mask = 0;
	cand[9].pass_mask = 6;
	sc_aggregate(cand, 10, 3, &ca);
	sc_aggregate(inc, 10, 3, &ia);
	CHECK(sc_release_rule(cand, 10, &ca, inc, 10, &ia, 0.5, 5, &v) == 0);
	CHECK(v.code == SC_V_VETO && v.pass == 0 && v.new_breaches == 1);
	CHECK(strcmp(v.breach_ids, "g") == 0);
	sc_agg_free(&ca);
	sc_agg_free(&ia);

	/* 2. No veto when the incumbent breaches the same guard too. */
	inc[9].pass_mask = 3;
	sc_aggregate(cand, 10, 3, &ca);
	sc_aggregate(inc, 10, 3, &ia);
	sc_release_rule(cand, 10, &ca, inc, 10, &ia, 0.5, 5, &v);
	CHECK(v.code == SC_V_PROMOTE && v.pass == 1 && v.d_fair_pp > 0.5);
	sc_agg_free(&ca);
	sc_agg_free(&ia);

	/* 3. Held-out loss: candidate misses two held-out routes. */
	inc[0].pass_mask = 7;
	inc[9].pass_mask = 7;
	cand[9].pass_mask = 7;
	cand[1].pass_mask = cand[2].pass_mask = 0;
	sc_aggregate(cand, 10, 3, &ca);
	sc_aggregate(inc, 10, 3, &ia);
	sc_release_rule(cand, 10, &ca, inc, 10, &ia, 0.5, 5, &v);
	CHECK(v.code == SC_V_FAIR_LOWER && v.pass == 0);
	NEAR(v.d_fair_pp, -20.0, 1e-9);
	NEAR(v.d_held_out_pp, -20.0, 1e-9);
	sc_agg_free(&ca);
	sc_agg_free(&ia);

	/* 4. A tie within tie_pp broken by overall: 200 held-out cases, the
	 * candidate one case-pass lower (-0.1667 pp) but better on train-flagged
	 * cases, so better overall; then the same with overall lower. */
	struct sc_row *bi = calloc(400, sizeof(*bi)), *bc = calloc(400, sizeof(*bc));
	for (int i = 0; i < 400; i++) {
		snprintf(id, sizeof(id), "c%d", i);
		bi[i] = row(id, SC_ROUTE, i < 200, 1, 3, 7, "x");
		bc[i] = row(id, SC_ROUTE, i < 200, 1, 3, 7, "x");
	}
	bc[0].pass_mask = 3;			/* candidate: -1 held-out case-pass */
	bi[300].pass_mask = 0;			/* incumbent: -3 train-flagged */
	sc_aggregate(bc, 400, 3, &ca);
	sc_aggregate(bi, 400, 3, &ia);
	sc_release_rule(bc, 400, &ca, bi, 400, &ia, 0.5, 5, &v);
	CHECK(v.tie == 1 && v.code == SC_V_PROMOTE && v.pass == 1);
	CHECK(v.d_overall_pp > 0);
	sc_agg_free(&ca);
	sc_agg_free(&ia);
	bi[300].pass_mask = 7;
	sc_aggregate(bc, 400, 3, &ca);
	sc_aggregate(bi, 400, 3, &ia);
	sc_release_rule(bc, 400, &ca, bi, 400, &ia, 0.5, 5, &v);
	CHECK(v.tie == 1 && v.code == SC_V_TIE_OVERALL && v.pass == 0);
	sc_agg_free(&ca);
	sc_agg_free(&ia);
	/* The tie bound is inclusive at exactly tie_pp: 1 case of 200 = 0.5 pp. */
	bc[0].pass_mask = 0;
	bc[300].pass_mask = 7;
	bi[1].pass_mask = 0;
	bi[300].pass_mask = 0;
	bi[301].pass_mask = 0;
	sc_aggregate(bc, 400, 3, &ca);
	sc_aggregate(bi, 400, 3, &ia);
	sc_release_rule(bc, 400, &ca, bi, 400, &ia, 0.5, 5, &v);
	NEAR(v.d_held_out_pp, 0.0, 1e-9);
	CHECK(v.tie == 1 && v.code == SC_V_PROMOTE);
	sc_agg_free(&ca);
	sc_agg_free(&ia);
	bi[1].pass_mask = 7;
	bi[300].pass_mask = bi[301].pass_mask = 7;
	sc_aggregate(bc, 400, 3, &ca);
	sc_aggregate(bi, 400, 3, &ia);
	sc_release_rule(bc, 400, &ca, bi, 400, &ia, 0.5, 5, &v);
	NEAR(v.d_held_out_pp, -0.5, 1e-9);
	CHECK(v.tie == 1 && v.code == SC_V_TIE_OVERALL);
	sc_agg_free(&ca);
	sc_agg_free(&ia);

	/* 5. Bake errors make the results incomplete: no verdict but refusal. */
	bc[5].errors = 1;
	sc_aggregate(bc, 400, 3, &ca);
	sc_aggregate(bi, 400, 3, &ia);
	sc_release_rule(bc, 400, &ca, bi, 400, &ia, 0.5, 5, &v);
	CHECK(v.code == SC_V_INCOMPLETE && v.pass == 0);
	sc_agg_free(&ca);
	sc_agg_free(&ia);

	/* Fair slice: cases held out for both. */
	struct sc_fair f;
	bc[5].errors = 0;
	bi[0].held_out = 0;			/* the incumbent trained on c0 */
	sc_fair_slice(bc, 400, bi, 400, &f);
	CHECK(f.cases == 199 && f.common == 400);
	free(bi);
	free(bc);
}

/*
 * Two bakes whose held-out sets differ (each model's is what its own
 * corpus lacks), where the held-out numbers and the fair slice disagree:
 * 30 cases neither trained on, where the candidate passes 26.5 (a mean
 * over two passes) and the incumbent 23.5, and 10 the incumbent trained
 * on (held out for the candidate only), which the candidate fails.
 * Held-out says the candidate is worse (26.5/40 against 23.5/30); the
 * fair slice says +10 points.
 */
static void
case_fair_slice_rule(void)
{
	struct sc_row cand[40], inc[40];
	struct sc_agg ca, ia;
	struct sc_verdict v;
	char id[8];

	for (int i = 0; i < 40; i++) {
		snprintf(id, sizeof(id), "f%d", i);
		cand[i] = row(id, SC_ROUTE, 1, 1, 2, 3, "x");
		inc[i] = row(id, SC_ROUTE, i < 30, 1, 2, 3, "x");
	}
	cand[0].pass_mask = cand[1].pass_mask = cand[2].pass_mask = 0;
	for (int i = 3; i < 9; i++)
		inc[i].pass_mask = 0;
	inc[9].pass_mask = 1;			/* passed one pass of two: not passed */
	cand[9].pass_mask = 2;
	for (int i = 30; i < 40; i++)
		cand[i].pass_mask = 0;
	sc_aggregate(cand, 40, 2, &ca);
	sc_aggregate(inc, 40, 2, &ia);
	CHECK(ca.held_out_cases == 40 && ia.held_out_cases == 30);
	CHECK(sc_release_rule(cand, 40, &ca, inc, 40, &ia, 0.5, 20, &v) == 0);
	CHECK(v.fair.cases == 30 && v.fair.common == 40);
	NEAR(v.fair.a.acc, 26.5 / 30, 1e-12);
	NEAR(v.fair.b.acc, 23.5 / 30, 1e-12);
	NEAR(v.d_fair_pp, 10.0, 1e-9);
	CHECK(v.d_held_out_pp < 0);		/* 26.5/40 against 23.5/30 */
	NEAR(v.d_held_out_pp, (26.5 / 40 - 23.5 / 30) * 100, 1e-9);
	/* Paired: f0-f2 the incumbent alone, f3-f8 the candidate alone, f9
	 * neither (one pass each), the other 20 both. */
	CHECK(v.fair.only_a == 6 && v.fair.only_b == 3);
	CHECK(v.fair.both == 20 && v.fair.neither == 1);
	NEAR(v.fair.p_mcnemar, 2 * (1 + 9 + 36 + 84) / 512.0, 1e-12);
	CHECK(v.code == SC_V_PROMOTE && v.pass == 1);
	CHECK(strstr(v.reason, "fair slice +10.00 pp") != NULL);
	/* The tie-break's overall is on the cases both ran: 36.5/40 vs 33.5/40. */
	NEAR(v.d_overall_pp, (26.5 - 33.5) / 40 * 100, 1e-9);

	/* The same bakes the other way round: held-out says the incumbent
	 * (now the candidate) is better, the fair slice says it is worse. */
	CHECK(sc_release_rule(inc, 40, &ia, cand, 40, &ca, 0.5, 20, &v) == 0);
	CHECK(v.d_held_out_pp > 0 && v.code == SC_V_FAIR_LOWER && v.pass == 0);
	NEAR(v.d_fair_pp, -10.0, 1e-9);
	CHECK(v.fair.only_a == 3 && v.fair.only_b == 6);

	/* A fair slice below min_fair_cases is no basis for a verdict, and
	 * the refusal carries the numbers. */
	CHECK(sc_release_rule(cand, 40, &ca, inc, 40, &ia, 0.5, 31, &v) == 0);
	CHECK(v.code == SC_V_FAIR_SMALL && v.pass == 0);
	CHECK(strstr(v.reason, "fair slice of 30 cases is below min_fair_cases 31") != NULL);
	CHECK(strstr(v.reason, "88.33% vs 78.33%") != NULL);
	CHECK(strcmp(sc_verdict_name(v.code), "fair slice too small") == 0);
	/* ... but the veto still comes first. */
	cand[10].kind = inc[10].kind = SC_GUARD;
	cand[10].pass_mask = 1;
	sc_agg_free(&ca);
	sc_aggregate(cand, 40, 2, &ca);
	CHECK(sc_release_rule(cand, 40, &ca, inc, 40, &ia, 0.5, 31, &v) == 0);
	CHECK(v.code == SC_V_VETO && strcmp(v.breach_ids, "f10") == 0);
	sc_agg_free(&ca);
	sc_agg_free(&ia);
}

/* Holm's correction against values worked by hand: sorted p 0.01, 0.02,
 * 0.04, 0.3 become 0.04, 0.06, 0.08, 0.3; a step that would go down is
 * held at the one before; nothing passes 1. */
static void
case_holm(void)
{
	double p[] = { 0.04, 0.3, 0.01, 0.02 }, a[4];
	sc_holm(p, 4, a);
	NEAR(a[2], 0.04, 1e-12);
	NEAR(a[3], 0.06, 1e-12);
	NEAR(a[0], 0.08, 1e-12);
	NEAR(a[1], 0.3, 1e-12);
	double q[] = { 0.125, 0.125, 0.21875 }, b[3];
	sc_holm(q, 3, b);
	NEAR(b[0], 0.375, 1e-12);
	NEAR(b[1], 0.375, 1e-12);
	NEAR(b[2], 0.375, 1e-12);
	double r[] = { 0.6, 0.7 }, c[2];
	sc_holm(r, 2, c);
	CHECK(c[0] == 1.0 && c[1] == 1.0);
	double one = 0.2, d;
	sc_holm(&one, 1, &d);
	NEAR(d, 0.2, 1e-12);
}

/* McNemar's exact test against tables worked by hand. */
static void
case_mcnemar(void)
{
	NEAR(sc_mcnemar_exact(1, 7), 2 * 9 / 256.0, 1e-12);
	NEAR(sc_mcnemar_exact(7, 1), 2 * 9 / 256.0, 1e-12);
	NEAR(sc_mcnemar_exact(2, 12), 2 * 106 / 16384.0, 1e-12);
	NEAR(sc_mcnemar_exact(0, 5), 2 / 32.0, 1e-12);
	CHECK(sc_mcnemar_exact(0, 0) == 1.0);
	CHECK(sc_mcnemar_exact(5, 5) == 1.0);
	CHECK(sc_mcnemar_exact(4, 5) == 1.0);
	/* Large tables do not underflow: 0 of 2000 is 2^-1999 (0 as a
	 * double); 950 against 1050 is p = 0.0268241462 (summed exactly in
	 * integers: 2 * sum(C(2000, i), i <= 950) / 2^2000). */
	CHECK(sc_mcnemar_exact(0, 2000) >= 0 && sc_mcnemar_exact(0, 2000) < 1e-300);
	NEAR(sc_mcnemar_exact(950, 1050), 0.0268241462, 1e-9);
}

static const struct unit_case cases[] = {
	UNIT_CASE(caps_errors),
	UNIT_CASE(schema),
	UNIT_CASE(parse_hostile),
	UNIT_CASE(score_cases),
	UNIT_CASE(case_errors),
	UNIT_CASE(digest),
	UNIT_CASE(wilson),
	UNIT_CASE(aggregate),
	UNIT_CASE(release_rule),
	UNIT_CASE(fair_slice_rule),
	UNIT_CASE(mcnemar),
	UNIT_CASE(holm),
	UNIT_END
};

int
main(int argc, char **argv)
{
	const char *t = getenv("TEST_TMP");

	snprintf(tmpdir, sizeof(tmpdir), "%s", t ? t : "/tmp");
	if (t == NULL) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_score.%d", (int)getpid());
		plc_mkdirs(tmpdir, 0700);
	}
	load_caps();
	int rc = unit_main(argc, argv, cases);

	sc_caps_free(&caps);
	return rc;
}
