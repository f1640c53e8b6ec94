/* fuzz_slurm.c: the parsers of Slurm's output (daemon/server/slurm.c) and the
 * executor-options parser on arbitrary text: scontrol, squeue, sacct,
 * jobcomp and sbatch output never crash a parser, a parsed job always
 * has an id and a known state, and a parsed option set always yields a
 * batch script. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slurm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	struct slurm_job j;
	if (slurm_parse_scontrol(text, &j) == 0 && (j.id[0] == '\0' || j.state == SLURM_UNKNOWN))
		abort();
	if (slurm_parse_squeue(text, "17", &j) == 0 && strcmp(j.id, "17") != 0)
		abort();
	if (slurm_parse_sacct(text, "17", &j) == 0 && strcmp(j.id, "17") != 0)
		abort();
	if (slurm_parse_jobcomp(text, "12", &j) == 0 && strcmp(j.id, "12") != 0)
		abort();
	char id[64], v[256], err[256];
	if (slurm_parse_sbatch(text, id, sizeof(id)) == 0 && id[0] == '\0')
		abort();
	slurm_parse_config(text, "JobCompLoc", v, sizeof(v));
	struct slurm_opts o;
	if (slurm_opts_parse(text, &o, err, sizeof(err)) == 0) {
		char *argv[] = { "/bin/true", "it's", NULL };
		char *envp[] = { "PL_RUN=r", "PL_JOB=j", NULL };
		char *s = slurm_script(&o, "/tmp/d", "/tmp/.shim/d", "/tmp/d/log", argv, envp, "/tmp", err, sizeof(err));
		if (s == NULL && strstr(err, "memory") != NULL)
			abort();
		free(s);
	}
	free(text);
	return 0;
}
