/*
 * vramcal.h: the probe's VRAM calibration arithmetic (F24, F31), pure
 * functions so a unit test can replay the seed numbers.
 *
 * A one-step probe (one forward and backward on the longest example, no
 * optimizer step) over-estimates a real training run's peak. From each
 * finished run on the same GPU and recipe we keep a pair (probe MB, real
 * MB); the over-estimate is 1 - real/probe, averaged over the newest pairs
 * and rounded to 0.1 percentage point, the precision the calibration was
 * published with. Until there is a pair, the seed's 4.7% stands
 * (anchor: probe 6980.0 MB, real 6653 MB). The prediction is
 * probe x (1 - over-estimate), rounded up to a whole MB.
 */
#ifndef PL_VRAMCAL_H
#define PL_VRAMCAL_H

#include <stddef.h>

#define VRAMCAL_DEFAULT_OVER 0.047   /* the seed's anchor, F24 */
#define VRAMCAL_MB_PER_RANK  15.0    /* probe MB per LoRA rank unit, F31 */

struct vramcal_pair {
	double probe_mb;
	double real_mb;
};

/* The over-estimate of one pair, 1 - real/probe, unrounded. */
double	vramcal_pair_over(const struct vramcal_pair *p);

/* The over-estimate to apply: the mean over the first n pairs (the caller
 * passes the newest first and as many as it wants averaged), rounded to
 * 0.001; def when n is 0. Pairs with a non-positive probe or real are
 * skipped. */
double	vramcal_over_estimate(const struct vramcal_pair *p, size_t n, double def);

/* probe_mb x (1 - over), rounded up to a whole MB. */
double	vramcal_predict(double probe_mb, double over);

/* The highest rank r in [1, rank] whose predicted peak fits limit_mb,
 * assuming the probe falls by mb_per_rank per rank unit; 0 when even rank
 * 1 does not fit. Returns rank when it already fits. */
int	vramcal_max_rank(double probe_mb, double over, int rank,
	    double mb_per_rank, double limit_mb);

/* Pick the pairs for gpu and recipe out of a value history (the JSON
 * array host->value_history() returns, newest first: objects whose
 * "value" is a string holding {"gpu","recipe","probe_mb","real_mb"}).
 * Fills at most max pairs, newest first; returns how many, or -1 when the
 * history is not a JSON array. */
int	vramcal_pairs_from_history(const char *history, const char *gpu,
	    const char *recipe, struct vramcal_pair *out, size_t max);

/* The default recipe name for calibration: "ENGINE:NAME" with NAME the
 * last component of the base model's directory ("hf:gemma-3-4b-it"). The
 * rank is not part of it: the seed's over-estimate, measured at r112,
 * predicted r96 (F24). */
void	vramcal_recipe_name(const char *engine, const char *base, char *buf,
	    size_t len);

#endif
