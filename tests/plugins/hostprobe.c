/* A stage that asks the host table everything a stage may ask and writes
 * the answers to the JSON file `report` names, so that a test can hold
 * the table in a stage process (pipeline-stage, as the run's owner) to
 * what the daemon's own does: values and artifacts stored and found
 * again (its own, an upstream job's, another run's: `peer`), an input
 * defaulting to the upstream artifact, progress, a metric, a custom
 * event, a spawned program (its events handed to on_event, the user it
 * runs as, the artifacts it reports: its own file and /etc/shadow),
 * configuration lookups, identity and the process's own user. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pipeline/plugin.h"

static const struct pl_host *host;

struct pings {
	int n;
};

static int
on_event(void *arg, const char *type, const char *line)
{
	struct pings *p = arg;
	(void)line;
	if (strcmp(type, "ping") == 0)
		p->n++;
	return 0;
}

/* A JSON string member, or null. */
static void
jstr(FILE *f, const char *k, const char *v, int comma)
{
	fprintf(f, "\"%s\":", k);
	if (v == NULL)
		fputs("null", f);
	else {
		fputc('"', f);
		for (const char *c = v; *c; c++)
			if (*c == '"' || *c == '\\')
				fprintf(f, "\\%c", *c);
			else if ((unsigned char)*c < 0x20)
				fprintf(f, "\\u%04x", *c);
			else
				fputc(*c, f);
		fputc('"', f);
	}
	if (comma)
		fputc(',', f);
}

static int
run(pl_job *job)
{
	const char *report = host->get(job, "report"), *peer = host->get(job, "peer");
	const char *wd = host->workdir(job);
	char val[256], path[4096], apath[4096], hex[65] = "", peerpath[4096];
	snprintf(val, sizeof(val), "v-%s-%s", host->run_name(job), host->job_name(job));
	if (host->value_set(job, "probe.k", val) != PL_OK)
		return host->fail(job, "value_set");
	char *own = host->value_get(job, NULL, host->job_name(job), "probe.k");
	char *up = host->value_get(job, NULL, "first", "probe.k");
	char *pv = peer ? host->value_get(job, peer, NULL, "probe.k") : NULL;
	char *hist = host->value_history(job, "probe.k", 10);

	snprintf(path, sizeof(path), "%s/out.txt", wd);
	FILE *o = fopen(path, "w");
	if (o == NULL)
		return host->fail(job, "%s: cannot write", path);
	fprintf(o, "made by %s\n", host->job_name(job));
	fclose(o);
	if (host->artifact(job, "probed", path) != PL_OK)
		return host->fail(job, "artifact");
	int afound = host->artifact_find(job, NULL, host->job_name(job), "probed", apath,
	    sizeof(apath), hex);
	int pfound = peer ? host->artifact_find(job, peer, NULL, "probed", peerpath,
	    sizeof(peerpath), NULL) : PL_ENOENT;
	const char *in = host->input(job, "in");

	host->progress(job, 1, 2, "things");
	host->metric(job, "probe.m", 3, 0.5);
	host->event(job, "probe_custom", "{\"x\":1}");

	static const char *const argv[] = { "sh", "-c",
		"echo '{\"type\":\"ping\",\"n\":7}' >> \"$PL_EVENTS\"; "
		"echo '{\"type\":\"ping\",\"n\":8}' >> \"$PL_EVENTS\"; id -u > child.uid; "
		"echo '{\"type\":\"artifact\",\"name\":\"childart\",\"path\":\"child.uid\"}' >> \"$PL_EVENTS\"; "
		"echo '{\"type\":\"artifact\",\"name\":\"secret\",\"path\":\"/etc/shadow\"}' >> \"$PL_EVENTS\"; "
		"exit 3", NULL };
	struct pings pings = { 0 };
	struct pl_spawn sp = { .abi = PL_ABI_VERSION, .size = sizeof(sp), .name = "child",
		.argv = argv, .on_event = on_event, .arg = &pings };
	struct pl_exit ex = PL_EXIT_INIT;
	int src = host->spawn(job, &sp, &ex);
	char cuid[32] = "";
	snprintf(path, sizeof(path), "%s/child.uid", wd);
	FILE *cu = fopen(path, "r");
	if (cu != NULL) {
		if (fgets(cuid, sizeof(cuid), cu) != NULL)
			cuid[strcspn(cuid, "\n")] = '\0';
		fclose(cu);
	}

	FILE *f = fopen(report, "w");
	if (f == NULL)
		return host->fail(job, "%s: cannot write the report", report);
	fputc('{', f);
	jstr(f, "own_value", own, 1);
	jstr(f, "upstream_value", up, 1);
	jstr(f, "peer_value", pv, 1);
	fprintf(f, "\"history\":%s,", hist ? hist : "null");
	fprintf(f, "\"artifact_found\":%d,", afound == PL_OK);
	jstr(f, "artifact_path", afound == PL_OK ? apath : NULL, 1);
	jstr(f, "artifact_sha256", afound == PL_OK ? hex : NULL, 1);
	fprintf(f, "\"peer_artifact_found\":%d,", pfound == PL_OK);
	jstr(f, "input", in, 1);
	fprintf(f, "\"spawn_rc\":%d,\"exited\":%d,\"status\":%d,\"pings\":%d,", src, ex.exited,
	    ex.status, pings.n);
	jstr(f, "child_uid", cuid, 1);
	jstr(f, "kill_grace", host->conf_get(job, "daemon.kill_grace"), 1);
	jstr(f, "run_name", host->run_get(job, "name"), 1);
	jstr(f, "run_description", host->run_get(job, "description"), 1);
	fprintf(f, "\"attempt\":%d,\"adopted\":%d,\"uid\":%u,\"cancelled\":%d}\n",
	    host->attempt(job), host->adopted(job), (unsigned)geteuid(), host->cancelled(job));
	fclose(f);
	free(own);
	free(up);
	free(pv);
	free(hist);
	return PL_OK;
}

static const struct pl_key keys[] = {
	PL_KEY_PATH(.name = "report", .flags = PL_KEY_REQUIRED, .help = "where the answers go"),
	PL_KEY_STRING(.name = "peer", .help = "another run to look values up in"),
	PL_KEY_INPUT(.name = "in", .artifact = "probed",
	    .help = "an input (default: the upstream probed)"),
	PL_KEY_END
};

static const struct pl_stage stage = PL_STAGE(.name = "hostprobe",
	.summary = "asks the host table everything (tests)", .keys = keys, .run = run);

PL_PLUGIN(&host, &stage)
