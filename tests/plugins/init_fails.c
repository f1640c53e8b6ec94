/* A plugin whose init registers a stage, then fails: the registration
 * must be undone and the plugin refused. */
#include "pipeline/plugin.h"
PL_EXPORT int pl_plugin_init(const struct pl_host *h, void *plugin);
static int run(pl_job *j) { return PL_OK; }
static const struct pl_stage st = PL_STAGE(.name = "half_registered", .run = run);
PL_EXPORT int
pl_plugin_init(const struct pl_host *h, void *plugin)
{
	h->register_stage(plugin, &st);
	return PL_EIO;
}
