/* A plugin whose key table gives a default that is not a value of its key:
 * the host must refuse it at registration, naming the stage and the key,
 * so that no getter ever falls back to its def argument. */
#include "pipeline/plugin.h"
static int run(pl_job *j) { return PL_OK; }
static const struct pl_key keys[] = {
	PL_KEY_INT(.name = "fine", .def = "3", .flags = PL_KEY_MIN, .min = 1, .help = "a good key"),
	PL_KEY_INT(.name = "count", .def = "many", .help = "a default that is no integer"),
	PL_KEY_END
};
static const struct pl_stage st = PL_STAGE(.name = "bad_default", .keys = keys, .run = run);
PL_PLUGIN(NULL, &st)
