/* A plugin that checks the host's ABI and wants a newer one: refused with
 * both versions named. */
#include "pipeline/plugin.h"
PL_EXPORT int pl_plugin_init(const struct pl_host *h, void *plugin);
PL_EXPORT int
pl_plugin_init(const struct pl_host *h, void *plugin)
{
	if (h->abi != PL_ABI_VERSION + 1)
		return PL_EABI;
	return PL_OK;
}
