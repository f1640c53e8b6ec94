/* A plugin built against a newer header whose struct pl_stage is longer
 * than this host's: the host must refuse it, naming the plugin, rather
 * than ignore what it cannot read. */
#include "pipeline/plugin.h"
struct stage_next {
	struct pl_stage cur;
	uint64_t member_of_a_newer_host;
};
static int run(pl_job *j) { return PL_OK; }
static const struct stage_next st = { .cur = { .abi = PL_ABI_VERSION,
	.size = sizeof(struct stage_next), .name = "big_stage", .run = run },
	.member_of_a_newer_host = 1 };
PL_PLUGIN(NULL, &st.cur)
