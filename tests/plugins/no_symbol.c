/* A plugin without pl_plugin_init: must be refused. */
#include "pipeline/plugin.h"
PL_EXPORT int not_the_entry(void);
PL_EXPORT int not_the_entry(void) { return 0; }
