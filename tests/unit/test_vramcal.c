/*
 * test_vramcal.c: the probe's calibration arithmetic (vramcal.c) replays the
 * seed's numbers (pipeline-gotchas(7), F24, F31): the anchor
 * 6980 -> 6653 MB is a 4.7% over-estimate, and a 7127.6 MB probe then
 * predicts 6793 MB.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vramcal.h"
#include "runner.h"

static void
case_seed(void)
{
	struct vramcal_pair anchor = { 6980.0, 6653.0 };
	double raw = vramcal_pair_over(&anchor);
	CHECK(fabs(raw - 0.046848) < 1e-5, "raw over-estimate %f", raw);

	double over = vramcal_over_estimate(&anchor, 1, 0.5);
	CHECK(fabs(over - 0.047) < 1e-12, "over-estimate %.6f, want 0.047", over);

	double pred = vramcal_predict(7127.6, over);
	CHECK(pred == 6793.0, "prediction %.1f, want 6793", pred);

	/* With no pairs the seed's 4.7% stands and gives the same answer. */
	double def = vramcal_over_estimate(NULL, 0, VRAMCAL_DEFAULT_OVER);
	CHECK(def == VRAMCAL_DEFAULT_OVER, "default %f", def);
	CHECK(vramcal_predict(7127.6, def) == 6793.0, "default prediction %.1f",
	    vramcal_predict(7127.6, def));
	/* The derivation note: 6980 x (1 - 0.047) = 6652. */
	CHECK(vramcal_predict(6980.0, def) == 6652.0, "anchor prediction %.1f",
	    vramcal_predict(6980.0, def));
	/* The real r96 run peaked at 6629 MB: the prediction erred by 2.5%. */
	double err = (pred - 6629.0) / 6629.0 * 100.0;
	CHECK(fabs(err - 2.5) < 0.05, "error %.2f%%", err);
}

static void
case_mean_and_skip(void)
{
	struct vramcal_pair p[] = {
		{ 7000.0, 6650.0 },   /* 5.0% */
		{ 7000.0, 6720.0 },   /* 4.0% */
		{ 0.0, 6000.0 },      /* skipped: no probe */
	};
	double over = vramcal_over_estimate(p, 3, 0.047);
	CHECK(fabs(over - 0.045) < 1e-12, "mean over-estimate %.4f, want 0.045", over);
	/* A probe that under-estimated gives a negative over-estimate: the
	 * prediction rises above the probe. */
	struct vramcal_pair under = { 6000.0, 6300.0 };
	over = vramcal_over_estimate(&under, 1, 0.047);
	CHECK(fabs(over + 0.05) < 1e-12, "negative over-estimate %.4f", over);
	CHECK(vramcal_predict(6000.0, over) == 6300.0, "prediction %.1f",
	    vramcal_predict(6000.0, over));
}

static void
case_max_rank(void)
{
	/* r96 at 7127.6 MB predicts 6793: fits 6800, not 6700. */
	CHECK(vramcal_max_rank(7127.6, 0.047, 96, 15.0, 6800.0) == 96, "fits");
	int r = vramcal_max_rank(7127.6, 0.047, 96, 15.0, 6700.0);
	/* 7 ranks less: 7022.6 x 0.953 = 6692.5 -> 6693 <= 6700; 6 ranks
	 * less: 7037.6 x 0.953 = 6706.8 -> 6707 > 6700. */
	CHECK(r == 89, "max rank %d, want 89", r);
	CHECK(vramcal_predict(7127.6 - 7 * 15.0, 0.047) <= 6700.0, "r89 fits");
	CHECK(vramcal_predict(7127.6 - 6 * 15.0, 0.047) > 6700.0, "r90 does not");
	/* Nothing fits a budget below the base model's own weights. */
	CHECK(vramcal_max_rank(7127.6, 0.047, 96, 15.0, 3000.0) == 0, "none fits");
}

static void
case_history(void)
{
	const char *h =
	    "[{\"run\":\"v18\",\"job\":\"train\",\"ts\":3,"
	    "\"value\":\"{\\\"gpu\\\":\\\"RTX 3070 Ti\\\",\\\"recipe\\\":\\\"hf:r\\\","
	    "\\\"probe_mb\\\":6980,\\\"real_mb\\\":6653}\"},"
	    " {\"run\":\"v17\",\"job\":\"train\",\"ts\":2,"
	    "\"value\":\"{\\\"gpu\\\":\\\"other\\\",\\\"recipe\\\":\\\"hf:r\\\","
	    "\\\"probe_mb\\\":7000,\\\"real_mb\\\":5000}\"},"
	    " {\"run\":\"v16\",\"job\":\"train\",\"ts\":1,\"value\":\"not json\"},"
	    " {\"run\":\"v15\",\"job\":\"train\",\"ts\":0,"
	    "\"value\":\"{\\\"gpu\\\":\\\"RTX 3070 Ti\\\",\\\"recipe\\\":\\\"hf:r\\\","
	    "\\\"probe_mb\\\":7000,\\\"real_mb\\\":6720}\"}]";
	struct vramcal_pair p[8];
	int n = vramcal_pairs_from_history(h, "RTX 3070 Ti", "hf:r", p, 8);
	CHECK(n == 2, "pairs %d, want 2", n);
	if (n == 2) {
		CHECK(p[0].probe_mb == 6980 && p[0].real_mb == 6653, "newest first");
		CHECK(p[1].real_mb == 6720, "second pair");
	}
	n = vramcal_pairs_from_history(h, "RTX 3070 Ti", "hf:r", p, 1);
	CHECK(n == 1, "limit: %d", n);
	n = vramcal_pairs_from_history(h, "RTX 3070 Ti", "tiny:x", p, 8);
	CHECK(n == 0, "other recipe: %d", n);
	CHECK(vramcal_pairs_from_history("{}", "a", "b", p, 8) == -1, "not an array");
}

static void
case_recipe_name(void)
{
	char b[256];
	vramcal_recipe_name("tiny", "/srv/models/gemma-3-4b-it/", b, sizeof(b));
	CHECK(strcmp(b, "tiny:gemma-3-4b-it") == 0, "%s", b);
	vramcal_recipe_name(NULL, "base", b, sizeof(b));
	CHECK(strcmp(b, "hf:base") == 0, "%s", b);
	vramcal_recipe_name("hf", NULL, b, sizeof(b));
	CHECK(strcmp(b, "hf:?") == 0, "%s", b);
}

static const struct unit_case cases[] = {
	UNIT_CASE(seed),
	UNIT_CASE(mean_and_skip),
	UNIT_CASE(max_rank),
	UNIT_CASE(history),
	UNIT_CASE(recipe_name),
	UNIT_END
};

int
main(int argc, char **argv)
{
	return unit_main(argc, argv, cases);
}
