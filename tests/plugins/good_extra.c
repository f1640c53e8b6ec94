/* A well-formed plugin (used as the writable-file case: same code, bad mode). */
#include "pipeline/plugin.h"
PL_EXPORT int pl_plugin_init(const struct pl_host *h, void *plugin);
static int run(pl_job *j) { return PL_OK; }
static const struct pl_stage st = { .abi = PL_ABI_VERSION, .size = sizeof(struct pl_stage),
	.name = "good_extra", .summary = "does nothing", .run = run };
PL_EXPORT int
pl_plugin_init(const struct pl_host *h, void *plugin)
{
	if (h->abi != PL_ABI_VERSION)
		return PL_EABI;
	return h->register_stage(plugin, &st);
}
