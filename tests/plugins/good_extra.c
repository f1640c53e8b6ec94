/* A well-formed plugin (used as the writable-file case: same code, bad mode). */
#include "pipeline/plugin.h"
static int run(pl_job *j) { return PL_OK; }
static const struct pl_stage st = PL_STAGE(.name = "good_extra", .summary = "does nothing",
	.run = run);
PL_PLUGIN(NULL, &st)
