/* A plugin that states another ABI version: must be refused. */
#include "pipeline/plugin.h"
PL_EXPORT int pl_plugin_init(const struct pl_host *h, void *plugin);
static int run(pl_job *j) { return PL_OK; }
static const struct pl_stage st = { .abi = PL_ABI_VERSION + 41, .size = sizeof(struct pl_stage),
	.name = "bad_abi", .run = run };
PL_EXPORT int
pl_plugin_init(const struct pl_host *h, void *plugin)
{
	/* Registers a stage struct of a future ABI: the host must refuse. */
	return h->register_stage(plugin, &st);
}
