/*
 * ctl_doctor.c: `pipelinectl doctor [SPEC]`: may a training run start?
 * The checks are jobs/doctor.py's, run with the interpreter the jobs will
 * use: without SPEC, daemon.python and daemon.jobs_dir on the device this
 * machine has (CUDA device 0 where an NVIDIA driver is, else the CPU);
 * with SPEC, once for every distinct (python, jobs_dir, device,
 * cuda_device) of its probe and train jobs with engine hf. The exit
 * status is 0 when every check run allows the run, 1 when one does not
 * (or an interpreter cannot be run, or the spec does not check).
 */
#include <err.h>
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pld.h"
#include "host.h"
#include "ctl.h"
#include "plio.h"

extern char **environ;

#define MAX_CHECKS 16

struct dcheck {
	char python[PATH_MAX];
	char jobs[PATH_MAX];
	char device[16];
	char cuda[16];
	char label[256];	/* the jobs it covers */
};

/* Run one check; 0 when the run may start, -1 when not. */
static int
run_check(const struct dcheck *d)
{
	char script[PATH_MAX + 16];
	const char *argv[12];
	int n = 0;
	pid_t pid;
	int st;

	snprintf(script, sizeof(script), "%s/doctor.py", d->jobs);
	if (!ctl_json)
		printf("== %s: %s (device %s, cuda_device %s)\n", d->label, d->python,
		    d->device, d->cuda);
	fflush(stdout);
	if (access(script, R_OK) == -1) {
		warnx("%s: %s: %s (set daemon.jobs_dir or the job's jobs_dir)",
		    d->label, script, strerror(errno));
		return -1;
	}
	argv[n++] = d->python;
	argv[n++] = script;
	argv[n++] = "--device";
	argv[n++] = d->device;
	argv[n++] = "--cuda-device";
	argv[n++] = d->cuda;
	argv[n++] = "--label";
	argv[n++] = d->label;
	if (ctl_json)
		argv[n++] = "--json";
	argv[n] = NULL;
	int rc = posix_spawnp(&pid, d->python, NULL, NULL, (char *const *)argv, environ);
	if (rc != 0) {
		warnx("%s: python %s: cannot run it: %s", d->label, d->python, strerror(rc));
		return -1;
	}
	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR)
			ctl_fail(CTL_ERROR, "ELOCAL", "waitpid: %s", strerror(errno));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
		return -1;
	if (WIFEXITED(st))
		warnx("%s: %s %s exited with status %d", d->label, d->python, script,
		    WEXITSTATUS(st));
	else
		warnx("%s: %s %s killed by signal %d", d->label, d->python, script,
		    WTERMSIG(st));
	return -1;
}

/* Add the job's check, or its name to an identical one's label. */
static void
add_check(struct dcheck *v, int *n, const struct dcheck *d)
{
	for (int i = 0; i < *n; i++) {
		if (strcmp(v[i].python, d->python) == 0 && strcmp(v[i].jobs, d->jobs) == 0 &&
		    strcmp(v[i].device, d->device) == 0 && strcmp(v[i].cuda, d->cuda) == 0) {
			size_t l = strlen(v[i].label);
			snprintf(v[i].label + l, sizeof(v[i].label) - l, ", %s", d->label);
			return;
		}
	}
	if (*n == MAX_CHECKS)
		ctl_fail(CTL_EUSAGE, "EUSAGE", "more than %d distinct interpreters", MAX_CHECKS);
	v[(*n)++] = *d;
}

static const char *
or_default(const char *s, const char *def)
{
	return s != NULL && *s != '\0' ? s : def;
}

int
ctl_doctor(int argc, char **argv)
{
	struct dcheck v[MAX_CHECKS], d;
	int n = 0, bad = 0;

	if (argc > 2) {
		fprintf(stderr, "usage: pipelinectl doctor [SPEC]\n");
		return 2;
	}
	const struct conf *c = ctl_conf();
	if (argc == 1) {
		memset(&d, 0, sizeof(d));
		snprintf(d.python, sizeof(d.python), "%s", c->python);
		snprintf(d.jobs, sizeof(d.jobs), "%s", c->jobs_dir);
		/* No spec: the device this machine has (doctor.py --device
		 * auto: CUDA where an NVIDIA driver is, else the CPU). */
		snprintf(d.device, sizeof(d.device), "auto");
		snprintf(d.cuda, sizeof(d.cuda), "0");
		snprintf(d.label, sizeof(d.label), "daemon.python");
		add_check(v, &n, &d);
	} else {
		plugin_load_dir(c->plugin_dir, &plugin_host);
		char *text = plc_read_file(argv[1], NULL, 4 << 20), *errs = NULL;
		/* A spec that cannot be read or does not check is an error
		 * (1), as for check, not a usage error. */
		if (text == NULL)
			ctl_fail(CTL_ERROR, "ELOCAL", "%s: %s", argv[1], strerror(errno));
		struct spec *s = spec_load(argv[1], text, c, &errs);
		if (s == NULL || spec_check(s, c, host_check_section, 0, &errs) == -1)
			ctl_fail(CTL_ERROR, "EINVAL", "%s", errs ? errs : "invalid spec");
		for (int i = 0; i < s->njobs; i++) {
			const struct spec_section *j = s->jobs[i];
			if (j->stage == NULL || (strcmp(j->stage, "probe") != 0 &&
			    strcmp(j->stage, "train") != 0))
				continue;
			if (strcmp(or_default(spec_get(j, "engine"), "hf"), "hf") != 0)
				continue;
			memset(&d, 0, sizeof(d));
			snprintf(d.python, sizeof(d.python), "%s",
			    or_default(spec_get(j, "python"), c->python));
			const char *jd = spec_get(j, "jobs_dir");
			if (jd != NULL && *jd != '\0' && *jd != '/')
				snprintf(d.jobs, sizeof(d.jobs), "%s/%s", s->dir, jd);
			else
				snprintf(d.jobs, sizeof(d.jobs), "%s", or_default(jd, c->jobs_dir));
			snprintf(d.device, sizeof(d.device), "%s",
			    or_default(spec_get(j, "device"), "cuda"));
			snprintf(d.cuda, sizeof(d.cuda), "%s",
			    or_default(spec_get(j, "cuda_device"), "0"));
			snprintf(d.label, sizeof(d.label), "%s", j->name);
			add_check(v, &n, &d);
		}
		if (n == 0 && !ctl_json)
			printf("%s: no probe or train job with engine hf; nothing to check\n", argv[1]);
		spec_free(s);
		free(text);
		free(errs);
	}
	for (int i = 0; i < n; i++)
		if (run_check(&v[i]) == -1)
			bad++;
	if (!ctl_json && n > 1)
		printf("doctor: %d of %d checks allow the run\n", n - bad, n);
	return bad ? 1 : 0;
}
