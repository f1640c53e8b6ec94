/* A plugin that states another ABI version: must be refused. */
#include "pipeline/plugin.h"
static int run(pl_job *j) { return PL_OK; }
/* A stage struct of a future ABI: the host must refuse it. */
static const struct pl_stage st = { .abi = PL_ABI_VERSION + 40, .size = sizeof(struct pl_stage),
	.key_size = sizeof(struct pl_key), .name = "bad_abi", .run = run };
PL_PLUGIN(NULL, &st)
