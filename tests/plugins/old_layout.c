/* A plugin built before struct pl_key grew min and max and struct pl_stage
 * grew key_size: its structs are the first layout (PL_STAGE_SIZE_V1,
 * PL_KEY_SIZE_V1), spelled out here. The host must copy its shorter stage
 * into a zeroed one and read its key table with the first stride. */
#include "pipeline/plugin.h"

struct key_v1 {
	const char *name;
	int type;
	const char *def;
	unsigned flags;
	const char *artifact;
	const char *help;
};
struct stage_v1 {
	uint32_t abi, size;
	const char *name, *summary;
	unsigned flags;
	const struct key_v1 *keys;
	int (*check)(pl_job *job);
	int (*run)(pl_job *job);
};

static int run(pl_job *j) { return PL_OK; }
static const struct key_v1 keys[] = {
	{ "count", PL_KEY_INT, "1", 0, NULL, "a number without bounds" },
	{ "word", PL_KEY_STRING, NULL, PL_KEY_REQUIRED, NULL, "a word" },
	{ "last", PL_KEY_INT, NULL, 0, NULL, "the last key" },
	{ NULL, 0, NULL, 0, NULL, NULL }
};
static const struct stage_v1 st = { .abi = PL_ABI_VERSION, .size = sizeof(struct stage_v1),
	.name = "old_layout", .summary = "a stage of the first layout", .keys = keys,
	.run = run };

PL_PLUGIN(NULL, (const struct pl_stage *)(const void *)&st)
