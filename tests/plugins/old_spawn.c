/* A stage of a plugin built against an older, shorter struct pl_spawn and
 * struct pl_exit: it hands host->spawn() structs whose size covers only
 * the first members (PL_SPAWN_SIZE_MIN, PL_EXIT_SIZE_MIN) and fills what
 * lies past them with values that would show if the host read or wrote
 * there (a missing cwd, a timeout of a nanosecond, an environment entry,
 * a marker in error). The keys spawn_size and exit_size set other sizes,
 * to see the host refuse them. */
#include <stdio.h>
#include <string.h>
#include "pipeline/plugin.h"

static const struct pl_host *host;

static const char *const poison_env[] = { "OLD_SPAWN_POISON=1", NULL };
static const char *const argv[] = { "sh", "-c", "[ -z \"$OLD_SPAWN_POISON\" ] && exit 7; exit 1",
	NULL };

static int
run(pl_job *job)
{
	struct pl_spawn sp = { .abi = PL_ABI_VERSION, .name = "old", .argv = argv,
		.env = poison_env, .cwd = "/nonexistent/old_spawn", .timeout = 1e-9 };
	struct pl_exit ex = { .abi = PL_ABI_VERSION, .seconds = -1 };
	int64_t ss = host->get_int(job, "spawn_size", 0), es = host->get_int(job, "exit_size", 0);

	sp.size = ss ? (uint32_t)ss : (uint32_t)PL_SPAWN_SIZE_MIN;
	ex.size = es ? (uint32_t)es : (uint32_t)PL_EXIT_SIZE_MIN;
	snprintf(ex.error, sizeof(ex.error), "untouched");
	int rc = host->spawn(job, &sp, &ex);
	if (rc != PL_OK)
		return host->fail(job, "spawn: %s", host->strerror(rc));
	if (!ex.exited || ex.status != 7)
		return host->fail(job, "the child saw members past the struct's size "
		    "(exited %d, status %d)", ex.exited, ex.status);
	if (ex.seconds != -1 || strcmp(ex.error, "untouched") != 0)
		return host->fail(job, "the host wrote past the struct pl_exit's size");
	return PL_OK;
}

static const struct pl_key keys[] = {
	{ "spawn_size", PL_KEY_INT, NULL, 0, NULL, "struct pl_spawn's size (unset: the shortest)" },
	{ "exit_size", PL_KEY_INT, NULL, 0, NULL, "struct pl_exit's size (unset: the shortest)" },
	{ NULL, 0, NULL, 0, NULL, NULL }
};
static const struct pl_stage st = { .abi = PL_ABI_VERSION, .size = sizeof(struct pl_stage),
	.name = "old_spawn", .summary = "spawns with the shortest pl_spawn and pl_exit",
	.keys = keys, .run = run };
PL_PLUGIN(&host, &st)
