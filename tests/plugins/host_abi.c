/* A plugin with an init of its own and no pl_plugin_abi, which checks the
 * host's ABI and wants a newer one: refused, naming the host's ABI and
 * saying that the plugin states none. */
#include "pipeline/plugin.h"
PL_EXPORT int pl_plugin_init(const struct pl_host *h, void *plugin);
PL_EXPORT int
pl_plugin_init(const struct pl_host *h, void *plugin)
{
	if (h->abi != PL_ABI_VERSION + 1)
		return PL_EABI;
	return PL_OK;
}
