/* A plugin built against an older header, of ABI 3: the host must refuse
 * it before it calls its init, naming both ABIs. */
#include "pipeline/plugin.h"
#undef PL_ABI_VERSION
#define PL_ABI_VERSION 3
static int run(pl_job *j) { return PL_OK; }
static const struct pl_stage st = PL_STAGE(.name = "old_abi", .run = run);
PL_PLUGIN(NULL, &st)
