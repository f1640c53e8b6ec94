/*
 * fuzz_events.c: the events-file reader (daemon/server/host.c: events_read, the
 * job event lines of pipeline-job(7)) on arbitrary bytes, with a real
 * store in a temporary directory holding a run, a job and an attempt:
 * each input is written as the process's events file and read from
 * offset 0 as spawn() reads it (progress, metrics and artifacts stored,
 * job.TYPE events stored, then on_event). The offset comes back just past
 * the last whole line, on_event sees only valid types, nothing crashes.
 * Inputs that could name a path outside the job's work directory ('/',
 * "..", \u escapes) are skipped: an artifact line makes the reader hash
 * what it names, and "/" is the whole file system.
 */
#include <unistd.h>
#include <sys/stat.h>

#include "pld.h"
#include "server.h"
#include "plio.h"
#include "fuzz.h"

static char dbpath[PATH_MAX], evpath[PATH_MAX];
static struct store *st;
static struct spec *spec;
static struct pl_job *job;
static struct proc proc;
static struct pl_spawn sp;

static int
on_event(void *arg, const char *type, const char *line)
{
	if (type == NULL || line == NULL || !valid_name(type))
		abort();
	return 0;
}

/* A fresh store with the run, its job and its attempt. */
static void
store_setup(void)
{
	int64_t run_id, job_id, attempt_id;
	static const char *const suf[] = { "", "-wal", "-shm" };
	char p[PATH_MAX + 8];

	if (st != NULL)
		store_close(st);
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", dbpath, suf[i]);
		unlink(p);
	}
	if (store_open(&st, dbpath) == -1 || store_begin(st) == -1 ||
	    store_run_create(st, spec, spec->name, 1, &run_id) == -1 ||
	    store_job_create(st, run_id, "j", "exec", 0, NULL, NULL, &job_id) == -1 ||
	    store_attempt_start(st, job_id, 1, 0, &attempt_id) == -1 || store_commit(st) == -1)
		abort();
	job->store = st;
	job->run_id = run_id;
	job->job_id = job_id;
	job->attempt_id = attempt_id;
	memset(&proc, 0, sizeof(proc));
	proc.ex = job->ex;
	proc.pidfd = -1;
	proc.attempt_id = attempt_id;
	proc.run = job->run;
	snprintf(proc.name, sizeof(proc.name), "main");
	snprintf(proc.dir, sizeof(proc.dir), "%s/proc", fz_dir);
	snprintf(proc.log, sizeof(proc.log), "/dev/null");
}

static void
setup(void)
{
	static const char *const argv[] = { "true", NULL };
	const char *dir = fz_tmpdir("fuzz_events");
	char p[PATH_MAX], *errs = NULL;

	log_init(1, LOG_LVL_ERR, NULL);
	spec = spec_parse("r.ini", "[run]\nname = r\n[j]\nstage = exec\n", &errs);
	if (spec == NULL)
		abort();
	job = job_new(JOB_MODE_RUN, &host_store, NULL, spec, spec->jobs[0]);
	snprintf(job->workdir, sizeof(job->workdir), "%s/work", dir);
	snprintf(job->jobdir, sizeof(job->jobdir), "%s", dir);
	snprintf(job->logpath, sizeof(job->logpath), "/dev/null");
	/* What artifact lines may name: a file and a directory. */
	snprintf(p, sizeof(p), "%s/work/adapter", dir);
	if (plc_mkdirs(p, 0755) == -1)
		abort();
	snprintf(p, sizeof(p), "%s/work/adapter/adapter_config.json", dir);
	fz_write(p, (const uint8_t *)"{}\n", 3);
	snprintf(p, sizeof(p), "%s/work/model.gguf", dir);
	fz_write(p, (const uint8_t *)"GGUF", 4);
	snprintf(p, sizeof(p), "%s/proc", dir);
	if (mkdir(p, 0755) == -1)
		abort();
	snprintf(evpath, sizeof(evpath), "%s/proc/events", dir);
	snprintf(dbpath, sizeof(dbpath), "%s/pipelined.db", dir);
	sp = (struct pl_spawn){ .abi = PL_ABI_VERSION, .size = sizeof(sp), .name = "main",
	    .argv = argv, .on_event = on_event };
	store_setup();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready, runs;
	if (!ready) {
		setup();
		ready = 1;
	}
	if (memchr(data, '/', size) != NULL || memmem(data, size, "..", 2) != NULL ||
	    memmem(data, size, "\\u", 2) != NULL)
		return -1;   /* not kept in the corpus */
	/* The store grows with every event: start a new one now and then. */
	if (++runs % 20000 == 0)
		store_setup();
	fz_write(evpath, data, size);
	/* Each input is an attempt of its own: its events quota afresh. */
	job->ev_lines = job->ev_bytes = 0;
	job->ev_refused = 0;
	job->refused[0] = '\0';
	struct pl_exit out;
	memset(&out, 0, sizeof(out));
	int64_t off = host_events_read(job, &proc, &sp, 0, &out);
	const uint8_t *nl = size ? memrchr(data, '\n', size) : NULL;
	int64_t want = nl ? nl - data + 1 : 0;
	if (size < 65535 && off != want)
		abort();
	if (memchr(out.error, '\0', sizeof(out.error)) == NULL)
		abort();
	return 0;
}
