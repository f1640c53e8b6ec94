/* A plugin whose key table gives choices to a key that is not a string:
 * the host must refuse it at registration, naming the stage and the key. */
#include "pipeline/plugin.h"
static int run(pl_job *j) { return PL_OK; }
static const struct pl_key keys[] = {
	PL_KEY_INT(.name = "level", .def = "1", .choices = "1|2", .help = "choices on an integer"),
	PL_KEY_END
};
static const struct pl_stage st = PL_STAGE(.name = "choice_type", .keys = keys, .run = run);
PL_PLUGIN(NULL, &st)
