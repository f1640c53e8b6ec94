/* pipeline-stage: one job's run hook in a process of its own, as the run's
 * owner. pipelined starts it through host->spawn() (under the run's shim,
 * like a job program: it survives a daemon restart and is killed with the
 * shim's process group) as
 *
 *     pipeline-stage CONTEXT.json
 *
 * where the context file, written by the daemon (stagerun.c), holds the
 * stage's plugin, its section and the [run] section, its inputs
 * resolved, the values and artifacts it may look up and the
 * configuration without secrets. The plugin is loaded here and handed
 * the host's table (host.c) with the job's context: what it reports goes
 * to its events descriptor (3, PL_EVENTS_FD: a file of the daemon's records
 * directory its shim opened; by hand the file $PL_EVENTS; stagectx.c); it
 * makes itself not dumpable first. Its log goes to standard error
 * (the job log). Exit status: 0 when the run hook returned PL_OK, else
 * the negated code (1 for PL_EINVAL ... 14 for PL_EREJECTED), after an
 * error event with the failure message.
 *
 *     pipeline-stage --check CONF PLUGIN_DIR MAX_SPEC_BYTES MAX_SPEC_JOBS
 *         MAX_VARIANTS PATH
 *
 * is the file part of a submitter's spec check instead (check_main()),
 * started by the privileged parent as the submitter (priv.c). */
#include <err.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "pld.h"
#include "host.h"
#include "plio.h"

static struct pl_job *job;

/* The shim's SIGTERM (cancel, timeout): host->cancelled() says 1; the
 * programs the stage spawned got it too (one process group). */
static void
on_term(int sig)
{
	(void)sig;
	if (job != NULL)
		job->cancel = 1;
}

static struct spec_section *
section_of(const char *name, const cJSON *kv)
{
	struct spec_section *s = xcalloc(1, sizeof(*s));
	s->name = xstrdup(name);
	s->line = 1;
	s->nkv = cJSON_GetArraySize(kv);
	s->kv = xcalloc((size_t)s->nkv + 1, sizeof(*s->kv));
	int i = 0;
	const cJSON *p;
	cJSON_ArrayForEach(p, kv) {
		const cJSON *k = cJSON_GetArrayItem(p, 0), *v = cJSON_GetArrayItem(p, 1);
		if (!cJSON_IsString(k) || !cJSON_IsString(v) || i >= s->nkv)
			errx(125, "context: a malformed key of [%s]", name);
		s->kv[i].key = xstrdup(k->valuestring);
		s->kv[i].value = xstrdup(v->valuestring);
		s->kv[i].line = i + 1;
		i++;
	}
	return s;
}

static const char *
ctx_str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!cJSON_IsString(v))
		errx(125, "context: no %s", k);
	return v->valuestring;
}

/* A spec's check with its files, as whoever runs it:
 *
 *     pipeline-stage --check CONF PLUGIN_DIR MAX_SPEC_BYTES MAX_SPEC_JOBS
 *         MAX_VARIANTS PATH
 *
 * The privileged parent starts it as the submitter, with the spec's text
 * on standard input and PATH its path (the errors' file, the directory
 * of its relative paths), and what it needs of the configuration as
 * arguments, since a member may not read the file (0640, root's, and it
 * may hold secrets): its path CONF, named in messages only, plugin_dir
 * and the spec limits. The plugins are loaded as pipelined loads them,
 * the spec loaded (a sweep expanded within the limits) and checked whole,
 * its files opened with this process's rights; resources are the
 * daemon's to check. One JSON line on standard output, {"ok":true} or
 * {"ok":false,"errors":"..."}, and exit status 0; 125 when it cannot
 * answer. Its answer is the submitter's own word about the submitter's
 * own files: the daemon, which has checked everything else itself,
 * takes it for nothing more. */
static int
check_main(char **argv)
{
	static struct conf conf;
	char *errs = NULL, *text, *end;
	int *lim[3] = { &conf.max_spec_bytes, &conf.max_spec_jobs, &conf.max_variants };
	size_t len;

	snprintf(conf.path, sizeof(conf.path), "%s", argv[2]);
	snprintf(conf.plugin_dir, sizeof(conf.plugin_dir), "%s", argv[3]);
	for (int i = 0; i < 3; i++) {
		long v = strtol(argv[4 + i], &end, 10);
		if (*end != '\0' || v <= 0 || v > INT_MAX)
			errx(125, "--check: %s: not a limit", argv[4 + i]);
		*lim[i] = (int)v;
	}
	if ((text = plc_read_fd(0, &len, PL_PROTO_MAX_LINE)) == NULL)
		err(125, "standard input");
	plugin_host.host_name = "pipelined";
	plugin_load_dir(conf.plugin_dir, &plugin_host);
	struct spec *spec = spec_load(argv[7], text, &conf, &errs);
	int ok = spec != NULL && spec_check(spec, NULL, host_check_section, 0, &errs) == 0;
	cJSON *r = cJSON_CreateObject();
	cJSON_AddBoolToObject(r, "ok", ok);
	if (!ok)
		cJSON_AddStringToObject(r, "errors", errs ? errs : "the spec could not be checked");
	char *line = cJSON_PrintUnformatted(r);
	if (line == NULL || printf("%s\n", line) < 0 || fflush(stdout) == EOF)
		err(125, "standard output");
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 8 && strcmp(argv[1], "--check") == 0)
		return check_main(argv);
	if (argc != 2)
		errx(125, "usage: pipeline-stage CONTEXT.json | --check CONF PLUGIN_DIR "
		    "MAX_SPEC_BYTES MAX_SPEC_JOBS MAX_VARIANTS PATH");
	/* Not dumpable: its owner, whose uid it runs as, can neither
	 * ptrace it nor reach its descriptors through /proc, so what it
	 * writes to its events descriptor is the stage's own. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1)
		err(125, "prctl(PR_SET_DUMPABLE)");
	signal(SIGPIPE, SIG_IGN);
	char *text = plc_read_file(argv[1], NULL, 64u << 20);
	if (text == NULL)
		err(125, "%s", argv[1]);
	cJSON *ctx = cJSON_Parse(text);
	free(text);
	if (!cJSON_IsObject(ctx))
		errx(125, "%s: not a JSON object", argv[1]);
	const char *events = getenv("PL_EVENTS");
	if (events == NULL)
		errx(125, "PL_EVENTS is not set");

	char why[512];
	plugin_host.host_name = "pipelined";
	if (plugin_load(ctx_str(ctx, "plugin"), &plugin_host, why, sizeof(why)) == -1)
		errx(125, "%s: %s", ctx_str(ctx, "plugin"), why);
	const struct stage_reg *reg = plugin_stage(ctx_str(ctx, "stage"));
	if (reg == NULL)
		errx(125, "%s: no stage %s", ctx_str(ctx, "plugin"), ctx_str(ctx, "stage"));

	static struct conf conf;
	conf.all = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(ctx, "conf"), 1);
	struct spec spec;
	memset(&spec, 0, sizeof(spec));
	spec.path = xstrdup(ctx_str(ctx, "spec_path"));
	spec.dir = xstrdup(ctx_str(ctx, "spec_dir"));
	spec.name = xstrdup(ctx_str(ctx, "run"));
	const cJSON *prev = cJSON_GetObjectItemCaseSensitive(ctx, "previous");
	spec.previous = cJSON_IsString(prev) ? xstrdup(prev->valuestring) : NULL;
	spec.run = section_of("run", cJSON_GetObjectItemCaseSensitive(ctx, "run_section"));
	struct spec_section *sec = section_of(ctx_str(ctx, "job"),
	    cJSON_GetObjectItemCaseSensitive(ctx, "section"));
	spec.jobs = &sec;
	spec.njobs = 1;

	struct pl_job *j = job_new(JOB_MODE_RUN, &host_stage_proc, reg, &spec, sec);
	j->conf = &conf;
	const cJSON *at = cJSON_GetObjectItemCaseSensitive(ctx, "attempt");
	j->attempt = cJSON_IsNumber(at) ? at->valueint : 1;
	snprintf(j->workdir, sizeof(j->workdir), "%s", ctx_str(ctx, "workdir"));
	/* A batch executor's job: its programs are batch jobs this
	 * process submits (stagectx.c), with the daemon's shim. */
	const cJSON *ex = cJSON_GetObjectItemCaseSensitive(ctx, "executor");
	const cJSON *exo = cJSON_GetObjectItemCaseSensitive(ctx, "executor_opts");
	const cJSON *shim = cJSON_GetObjectItemCaseSensitive(ctx, "shim");
	if (cJSON_IsString(ex)) {
		const struct executor *e = exec_find(ex->valuestring);
		if (e == NULL || !e->batch)
			errx(125, "context: no batch executor %s", ex->valuestring);
		j->ex = e;
		j->ex_opts = xstrdup(cJSON_IsString(exo) ? exo->valuestring : "");
	}
	if (cJSON_IsString(shim))
		snprintf(conf.shim, sizeof(conf.shim), "%s", shim->valuestring);
	const cJSON *left = cJSON_GetObjectItemCaseSensitive(ctx, "seconds_left");
	if (cJSON_IsNumber(left))
		j->deadline = plc_mono_secs() + left->valuedouble;
	/* The log: standard error, which the shim appends to the job log. */
	snprintf(j->logpath, sizeof(j->logpath), "(standard error)");
	j->logfd = dup(2);
	/* Under the daemon: descriptor 3, the events file its shim opened
	 * in the daemon's records directory (PL_EVENTS_FD); by hand, the
	 * file PL_EVENTS names. */
	const char *evfd = getenv("PL_EVENTS_FD");
	if (evfd != NULL) {
		struct stat st;
		int fl;
		if (strcmp(evfd, "3") != 0 || fstat(3, &st) == -1 || !S_ISREG(st.st_mode) ||
		    (fl = fcntl(3, F_GETFL)) == -1 || (fl & O_ACCMODE) == O_RDONLY ||
		    !(fl & O_APPEND))
			errx(125, "PL_EVENTS_FD=%s: not descriptor 3 open to append to an events file",
			    evfd);
		fcntl(3, F_SETFD, FD_CLOEXEC);
		j->evfd = 3;
	} else {
		j->evfd = open(events, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0640);
		if (j->evfd == -1)
			err(125, "%s", events);
	}
	j->ctx = ctx;
	job = j;
	struct sigaction sa = { .sa_handler = on_term };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	int rc = reg->st->run(j);
	if (rc != PL_OK) {
		cJSON *d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, "message", j->failmsg[0] ? j->failmsg :
		    plugin_host.strerror(rc));
		stagectx_emit(j, "error", d);
	}
	return rc == PL_OK ? 0 : rc < 0 && rc >= PL_EREJECTED ? -rc : -PL_EFAIL;
}
