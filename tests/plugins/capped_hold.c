/* A stage that can be re-entered after a restart (PL_STAGE_ADOPTABLE)
 * and has a host_mem_cap key, as the probe has: a member's run of it in
 * a split daemon runs in a memory cgroup the privileged parent made
 * (stagerun.c). Its run hook writes its own memory cgroup (the v1
 * memory line of /proc/self/cgroup, or v2's) to cg.txt in its work
 * directory, then waits while the file `hold` names is there, so that a
 * test can restart the daemon meanwhile (probe/member-cgroup). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "pipeline/plugin.h"

static const struct pl_host *host;

static int
run(pl_job *job)
{
	const char *hold = host->get(job, "hold");
	char line[4096], cg[4096] = "", path[4096];
	FILE *f = fopen("/proc/self/cgroup", "r");
	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, ":memory:") != NULL || (strncmp(line, "0::", 3) == 0 && !cg[0]))
			snprintf(cg, sizeof(cg), "%s", line);
	if (f != NULL)
		fclose(f);
	snprintf(path, sizeof(path), "%s/cg.txt", host->workdir(job));
	if ((f = fopen(path, "w")) == NULL)
		return host->fail(job, "%s: cannot write it", path);
	fputs(cg, f);
	fclose(f);
	while (hold != NULL && hold[0] && access(hold, F_OK) == 0 && !host->cancelled(job))
		usleep(100000);
	return PL_OK;
}

static const struct pl_key keys[] = {
	PL_KEY_STRING(.name = "host_mem_cap", .def = "off",
	    .help = "the memory cgroup's cap (a size, or off)"),
	PL_KEY_STRING(.name = "hold", .def = "", .help = "waits while this file is there"),
	PL_KEY_END
};
static const struct pl_stage st = PL_STAGE(.name = "capped_hold",
	.summary = "writes its memory cgroup, then waits while a file is there",
	.flags = PL_STAGE_ADOPTABLE, .keys = keys, .run = run);
PL_PLUGIN(&host, &st)
