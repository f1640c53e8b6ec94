/* A plugin whose key table gives a default that is none of its key's
 * choices: the host must refuse it at registration, naming the stage, the
 * key and the choices. */
#include "pipeline/plugin.h"
static int run(pl_job *j) { return PL_OK; }
static const struct pl_key keys[] = {
	PL_KEY_STRING(.name = "mode", .def = "fast", .choices = "auto|yes|no",
	    .help = "a default that is none of the choices"),
	PL_KEY_END
};
static const struct pl_stage st = PL_STAGE(.name = "bad_choice", .keys = keys, .run = run);
PL_PLUGIN(NULL, &st)
