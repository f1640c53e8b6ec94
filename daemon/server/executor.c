/* executor.c: the executors by name. A job section's `executor` key, a stored
 * process's `procs.executor` and the scheduler's choices all go through
 * exec_find(): the one place that knows which executors there are. */
#include <stddef.h>
#include <string.h>

#include "executor.h"

/* Every executor of the tree, each always built in. */
static const struct {
	const char *name;
	const struct executor *ex;
} executors[] = {
	{ "local", &exec_local },
	{ "slurm", &exec_slurm },
};

const struct executor *
exec_find(const char *name)
{
	for (size_t i = 0; i < sizeof(executors) / sizeof(executors[0]); i++)
		if (strcmp(executors[i].name, name) == 0)
			return executors[i].ex;
	return NULL;
}
