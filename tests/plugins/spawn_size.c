/* A stage that hands host->spawn() a struct pl_spawn and a struct pl_exit
 * of the sizes its keys set (unset: this header's). The host takes only
 * structs of exactly its own size: a larger one (a newer header's), or a
 * shorter one (the first struct pl_spawn, through argv, is 24 bytes), is
 * refused naming the plugin and both ABIs. */
#include <stdio.h>
#include <string.h>
#include "pipeline/plugin.h"

static const struct pl_host *host;

static const char *const argv[] = { "sh", "-c", "exit 7", NULL };

static int
run(pl_job *job)
{
	struct pl_spawn sp = { .abi = PL_ABI_VERSION, .size = sizeof(sp), .name = "sized",
		.argv = argv };
	struct pl_exit ex = PL_EXIT_INIT;
	int64_t ss = host->get_int(job, "spawn_size", 0), es = host->get_int(job, "exit_size", 0);

	if (ss != 0)
		sp.size = (uint32_t)ss;
	if (es != 0)
		ex.size = (uint32_t)es;
	int rc = host->spawn(job, &sp, &ex);
	if (rc != PL_OK)
		return host->fail(job, "spawn: %s", host->strerror(rc));
	if (!ex.exited || ex.status != 7)
		return host->fail(job, "the child's ending was not reported (exited %d, status %d)",
		    ex.exited, ex.status);
	return PL_OK;
}

static const struct pl_key keys[] = {
	PL_KEY_INT(.name = "spawn_size", .def = "0",
	    .help = "struct pl_spawn's size (0: sizeof(struct pl_spawn))"),
	PL_KEY_INT(.name = "exit_size", .def = "0",
	    .help = "struct pl_exit's size (0: sizeof(struct pl_exit))"),
	PL_KEY_END
};
static const struct pl_stage st = PL_STAGE(.name = "spawn_size",
	.summary = "spawns with structs of the sizes its keys set", .keys = keys, .run = run);
PL_PLUGIN(&host, &st)
