/* stagectx.c: host_stage_proc, the host backend in a stage process. A
 * job whose stage runs out of the daemon (stagerun.c) runs its run hook
 * in pipeline-stage, as the run's owner, under the run's shim; the host
 * table there is the daemon's (host.c), and what the daemon would have
 * looked up or stored goes through here instead: inputs, values and
 * artifacts from the context file the daemon wrote before the start
 * (j->ctx), and everything the stage reports appended to the process's
 * events file (j->evfd), which the daemon reads and stores as it does a
 * job program's (host_spawn.c): the file is the record, so a
 * transaction and a process's row are nothing here. Programs the stage
 * spawns are started directly: the process already is the owner, in the
 * shim's process group. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pld.h"
#include "host.h"
#include "plio.h"
#include "executor.h"
#include "slurm.h"

extern char **environ;

static int
emit_line(pl_job *j, const char *type, cJSON *d, int own)
{
	if (strncmp(type, "job.", 4) == 0)
		type += 4;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", type);
	for (cJSON *c = d ? d->child : NULL; c; c = c->next)
		if (strcmp(c->string, "type") != 0 && strcmp(c->string, "pl_stage") != 0)
			cJSON_AddItemToObject(o, c->string, cJSON_Duplicate(c, 1));
	cJSON_Delete(d);
	/* The mark of the stage's own lines (host_spawn.c takes values and
	 * digests only from them); relayed lines lose theirs above. */
	if (own)
		cJSON_AddTrueToObject(o, "pl_stage");
	char *t = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (t == NULL)
		return -1;
	/* One write of one whole line (pipeline-job(7)). */
	size_t n = strlen(t);
	t[n] = '\n';
	int rc = plc_write_all(j->evfd, t, n + 1);
	free(t);
	return rc;
}

int
stagectx_emit(pl_job *j, const char *type, cJSON *d)
{
	return emit_line(j, type, d, 1);
}

/* An input key as the daemon resolved it: the path, or NULL with the
 * daemon's reason ("" when already reported), which is then the job's
 * message too, as in the daemon (j->refused, h_fail()). */
static const char *
ctx_input(pl_job *j, const char *key, char *why, size_t whylen)
{
	const cJSON *in = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j->ctx, "inputs"), key);
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(in, "path");
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(in, "error");
	if (cJSON_IsString(p))
		return p->valuestring;
	snprintf(why, whylen, "%s", cJSON_IsString(e) ? e->valuestring : in ? "" :
	    "not a path or input key");
	if (cJSON_IsString(e) && e->valuestring[0] != '\0')
		snprintf(j->refused, sizeof(j->refused), "%s", e->valuestring);
	return NULL;
}

/* What the stage stores itself is found by its own later lookups, as in
 * the daemon: put first (newest) in this run's snapshot. */
static cJSON *
own_list(pl_job *j, const char *list)
{
	cJSON *runs = cJSON_GetObjectItemCaseSensitive(j->ctx, "runs");
	if (runs == NULL)
		runs = cJSON_AddObjectToObject(j->ctx, "runs");
	cJSON *r = cJSON_GetObjectItemCaseSensitive(runs, j->run);
	if (r == NULL)
		r = cJSON_AddObjectToObject(runs, j->run);
	cJSON *l = cJSON_GetObjectItemCaseSensitive(r, list);
	if (l == NULL)
		l = cJSON_AddArrayToObject(r, list);
	return l;
}

/* host->value_set(): the value kept for the stage's own later lookups,
 * and its line. */
static int
ctx_value_set(pl_job *j, const char *key, const char *value)
{
	cJSON *v = cJSON_CreateObject();
	cJSON_AddStringToObject(v, "job", j->name);
	cJSON_AddStringToObject(v, "key", key);
	cJSON_AddStringToObject(v, "value", value ? value : "");
	cJSON_AddNumberToObject(v, "ts", now_wall());
	cJSON_AddTrueToObject(v, "new");
	cJSON_InsertItemInArray(own_list(j, "values"), 0, v);
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "key", key);
	cJSON_AddStringToObject(d, "value", value ? value : "");
	return stagectx_emit(j, "value", d);
}

/* An artifact (its digest computed here, as the owner: the daemon
 * takes it), kept for the stage's own later lookups; its job.artifact
 * line follows. */
static int
ctx_artifact(pl_job *j, const char *name, const char *path, uint64_t size, const char *hex)
{
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "job", j->name);
	cJSON_AddStringToObject(a, "name", name);
	cJSON_AddStringToObject(a, "path", path);
	cJSON_AddStringToObject(a, "sha256", hex);
	cJSON_InsertItemInArray(own_list(j, "artifacts"), 0, a);
	return 0;
}

/* A job program's progress line names its count "step". */
static int
ctx_progress(pl_job *j, double done, double total, const char *unit, cJSON *d)
{
	cJSON_AddNumberToObject(d, "step", done);
	return 0;
}

/* The snapshot of run (NULL: this one), or NULL when the daemon handed
 * none over. */
static const cJSON *
ctx_run(pl_job *j, const char *run)
{
	return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j->ctx,
	    "runs"), run ? run : j->run);
}

static const char *
str_of(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static char *
ctx_value_get(pl_job *j, const char *run, const char *jobname, const char *key)
{
	const cJSON *v;
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(ctx_run(j, run), "values"))
		if (strcmp(str_of(v, "key"), key) == 0 &&
		    (jobname == NULL || strcmp(str_of(v, "job"), jobname) == 0))
			return xstrdup(str_of(v, "value"));
	return NULL;
}

/* From the history the daemon handed over (the newest values of the
 * runs of the same owner) and what the stage stored since, newest first. */
static char *
ctx_value_history(pl_job *j, const char *key, int limit)
{
	cJSON *a = cJSON_CreateArray();
	const cJSON *v;
	int n = 0;
	cJSON_ArrayForEach(v, own_list(j, "values"))
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "new")) &&
		    strcmp(str_of(v, "key"), key) == 0 && (limit <= 0 || n < limit)) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "run", j->run);
			cJSON_AddStringToObject(o, "job", str_of(v, "job"));
			cJSON_AddStringToObject(o, "value", str_of(v, "value"));
			cJSON_AddItemToObject(o, "ts", cJSON_Duplicate(
			    cJSON_GetObjectItemCaseSensitive(v, "ts"), 1));
			cJSON_AddItemToArray(a, o);
			n++;
		}
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(j->ctx, "history"))
		if (strcmp(str_of(v, "key"), key) == 0 && (limit <= 0 || n < limit)) {
			cJSON *o = cJSON_Duplicate(v, 1);
			cJSON_DeleteItemFromObject(o, "key");
			cJSON_AddItemToArray(a, o);
			n++;
		}
	char *t = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	return t;
}

static int
ctx_artifact_find(pl_job *j, const char *run, const char *jobname, const char *name,
    char *path, size_t pathlen, char *sha256)
{
	const cJSON *a;
	cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(ctx_run(j, run), "artifacts"))
		if (strcmp(str_of(a, "name"), name) == 0 &&
		    (jobname == NULL || strcmp(str_of(a, "job"), jobname) == 0)) {
			snprintf(path, pathlen, "%s", str_of(a, "path"));
			if (sha256)
				snprintf(sha256, 65, "%s", str_of(a, "sha256"));
			return PL_OK;
		}
	return PL_ENOENT;
}

/* ---- spawn: a program of the stage, started directly ------------------ */

struct relay {
	pl_job *j;
	const struct pl_spawn *spec;
	struct pl_exit *out;
	char events[PATH_MAX];
	char cwd[PATH_MAX];
	off_t offset;
	int stop;
	int refused;           /* an artifact refused: the program is stopped, the job fails */
	long unpublished;      /* lines of the stage's own types, not relayed */
	char first[64];        /* the first of them */
};

/* The child's complete new lines: artifacts hashed here, their paths
 * made absolute (they are relative to its cwd), appended to the stage's
 * events file, then handed to on_event. */
static void
relay_read(struct relay *r)
{
	int fd = open(r->events, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1)
		return;
	for (;;) {
		char buf[65536];
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, r->offset);
		if (n <= 0)
			break;
		buf[n] = '\0';
		char *last = memrchr(buf, '\n', (size_t)n);
		if (last == NULL) {
			if (n == sizeof(buf) - 1)
				r->offset += n;   /* a line over 64 KiB: skipped, as the daemon does */
			else
				break;
			continue;
		}
		*last = '\0';
		r->offset += (last - buf) + 1;
		for (char *save = NULL, *ln = strtok_r(buf, "\n", &save); ln;
		    ln = strtok_r(NULL, "\n", &save)) {
			cJSON *o = cJSON_Parse(ln);
			const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
			if (!cJSON_IsObject(o) || !cJSON_IsString(t)) {
				/* Passed on as it is: the daemon logs it as malformed. */
				char *line;
				if (asprintf(&line, "%s\n", ln) >= 0) {
					plc_write_all(r->j->evfd, line, strlen(line));
					free(line);
				}
				cJSON_Delete(o);
				continue;
			}
			char type[128];
			snprintf(type, sizeof(type), "%s", t->valuestring);
			const cJSON *pa = cJSON_GetObjectItemCaseSensitive(o, "path");
			const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name");
			int own = 0;
			if (!event_program_type(type)) {
				/* The stage's own vocabulary with its program: to
				 * on_event only, never to the daemon (which would
				 * not publish it either: host_spawn.c). */
				if (r->unpublished++ == 0) {
					snprintf(r->first, sizeof(r->first), "%s", type);
					job_log(r->j, PL_LOG_INFO, "events: %s's \"%s\" lines go to "
					    "its stage only, not stored or published", r->spec->name, type);
				}
				if (r->spec->on_event && !r->stop &&
				    r->spec->on_event(r->spec->arg, type, ln) != 0)
					r->stop = 1;
				cJSON_Delete(o);
				continue;
			}
			if (strcmp(type, "artifact") == 0 && cJSON_IsString(pa) && cJSON_IsString(nm)) {
				/* Hashed here, as the owner, bounded and interruptible,
				 * and passed on with its digest as the stage's own: the
				 * daemon never reads a path a program names with its
				 * own rights. */
				char *abs, hex[65], why[1024];
				uint64_t size;
				if (job_artifact_as(r->j, r->cwd, pa->valuestring,
				    JOB_ARTIFACT_MAX(r->j), &abs, &size, hex, why,
				    sizeof(why)) == -1) {
					int e = errno;
					if (job_artifact_refused(e) && !r->refused) {
						/* Refused: the program is stopped, the
						 * job fails naming the artifact. */
						r->refused = 1;
						snprintf(r->j->refused, sizeof(r->j->refused), "artifact %s: %s",
						    nm->valuestring, why);
						job_log(r->j, PL_LOG_ERROR, "%s", r->j->refused);
					} else if (!job_artifact_refused(e) && e != ECANCELED)
						job_log(r->j, PL_LOG_ERROR, "artifact %s: %s", nm->valuestring,
						    why);
					cJSON_Delete(o);
					continue;
				}
				cJSON_ReplaceItemInObject(o, "path", cJSON_CreateString(abs));
				cJSON_DeleteItemFromObject(o, "sha256");
				cJSON_AddStringToObject(o, "sha256", hex);
				free(abs);
				own = 1;
			}
			if (strcmp(type, "error") == 0) {
				const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "message");
				if (cJSON_IsString(m))
					snprintf(r->out->error, sizeof(r->out->error), "%s",
					    m->valuestring);
			}
			cJSON_DeleteItemFromObject(o, "type");
			emit_line(r->j, type, o, own);
			if (r->spec->on_event && !r->stop &&
			    r->spec->on_event(r->spec->arg, type, ln) != 0)
				r->stop = 1;
		}
	}
	close(fd);
}

static char **
child_env(pl_job *j, const struct pl_spawn *spec, const char *dir)
{
	int n = 0, k = 0;
	for (char **e = environ; *e; e++)
		n++;
	for (const char *const *e = spec->env; e && *e; e++)
		n++;
	char **env = xcalloc((size_t)n + 8, sizeof(char *));
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "PL_EVENTS=", 10) != 0 && strncmp(*e, "PL_JOB_DIR=", 11) != 0 &&
		    strncmp(*e, "PL_RESUME_FROM=", 15) != 0 && strncmp(*e, "PL_EVENTS_FD=", 13) != 0)
			env[k++] = xstrdup(*e);
	if (asprintf(&env[k++], "PL_EVENTS=%s/events", dir) < 0 ||
	    asprintf(&env[k++], "PL_JOB_DIR=%s", dir) < 0 ||
	    (spec->resume_from && asprintf(&env[k++], "PL_RESUME_FROM=%s", spec->resume_from) < 0))
		fatal("child_env");
	for (const char *const *e = spec->env; e && *e; e++)
		env[k++] = xstrdup(*e);
	env[k] = NULL;
	(void)j;
	return env;
}

/* A spawn's end, the same for both ways of running it: the lines kept
 * from the daemon counted in the log; an artifact refused fails the job
 * (j->refused names it) unless the spawn already ended otherwise. */
static int
finish_relay(pl_job *j, const struct pl_spawn *spec, const struct relay *r, int rc)
{
	if (r->unpublished > 0)
		job_logf(j, "events: %ld line%s of %s not stored or published (types a job "
		    "program does not publish, handed to its stage only; the first \"%s\")",
		    r->unpublished, r->unpublished == 1 ? "" : "s", spec->name, r->first);
	if (rc == PL_OK && r->refused) {
		j->ev_refused = 1;
		return PL_EFAIL;
	}
	return rc;
}

/* ---- spawn under a batch executor: the job's executor = slurm -------- */

/* Earlier attempts' launches of this name that a stage process killed
 * outright (SIGKILL: it had no time to cancel them) left running:
 * cancelled as the owner, and marked ended, so that a requeue of one runs
 * nothing, before this attempt submits its own. Their records are where
 * this process keeps its own (batch_spawn), in the earlier attempts'
 * stage process directories: ATTEMPTS/attempt-K/pl-stage/.shim/NAME. */
static void
batch_orphans(pl_job *j, const struct pl_spawn *spec, const char *pdir)
{
	char root[PATH_MAX], f[PATH_MAX + 64], err[256];
	snprintf(root, sizeof(root), "%s", pdir);
	for (int up = 0; up < 2; up++) {
		char *slash = strrchr(root, '/');
		if (slash == NULL || slash == root)
			return;
		*slash = '\0';
	}
	for (int k = 1; k < j->attempt; k++) {
		char rec[PATH_MAX];
		snprintf(rec, sizeof(rec), "%s/attempt-%d/%s/.shim/%s", root, k, STAGE_PROC_NAME,
		    spec->name);
		snprintf(f, sizeof(f), "%s/slurm.ended", rec);
		if (access(f, F_OK) == 0)
			continue;
		snprintf(f, sizeof(f), "%s/slurm.jobid", rec);
		char *id = plc_read_file(f, NULL, 128);
		if (id == NULL)
			continue;
		id[strcspn(id, "\r\n")] = '\0';
		if (id[0] != '\0' && slurm_cancel(id, 0, err, sizeof(err)) == 0)
			job_logf(j, "cancelled Slurm job %s, %s of attempt %d, left by its stage "
			    "process", id, spec->name, k);
		snprintf(f, sizeof(f), "%s/slurm.ended", rec);
		char text[160];
		snprintf(text, sizeof(text), "%s cancelled\n", id);
		plc_write_file_atomic(f, text, strlen(text), 0640);
		free(id);
	}
}

/* What the program's job log gained (Slurm's --output and the shim's
 * lines, the owner's file in its directory), copied to the stage's own
 * log: the job log, standard error. */
static void
log_relay(const char *path, off_t *off)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1)
		return;
	char buf[65536];
	ssize_t n;
	while ((n = pread(fd, buf, sizeof(buf), *off)) > 0) {
		plc_write_all(2, buf, (size_t)n);
		*off += n;
	}
	close(fd);
}

/* A batch system's queue state of the program, as the daemon reports
 * its own launches' (host_spawn.c): a "proc" line, which the daemon
 * makes the job's message ("launch-1 queued as slurm job 12: Priority"),
 * and the job log. */
static void
batch_state(pl_job *j, const struct pl_spawn *spec, const struct proc *p)
{
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "proc", spec->name);
	cJSON_AddStringToObject(d, "state", p->state == PROC_QUEUED ? "queued" : "running");
	if (p->ext_id[0]) {
		char id[96];
		snprintf(id, sizeof(id), "%s job %s", p->ex->name, p->ext_id);
		cJSON_AddStringToObject(d, "id", id);
	}
	if (p->reason[0])
		cJSON_AddStringToObject(d, "reason", p->reason);
	stagectx_emit(j, "proc", d);
	job_logf(j, "%s: %s as %s job %s%s%s", spec->name, p->state == PROC_QUEUED ? "queued" :
	    "running", p->ex->name, p->ext_id, p->reason[0] ? ": " : "", p->reason);
}

/* The program as a batch job of the job's executor (Slurm), submitted
 * by this process, which is the owner, as the daemon submits a job
 * program's: a batch script that runs pipeline-shim (no -u: the step is
 * the owner's) on a node, in the program's directory, which is on the
 * file system the nodes share, and keeps its records there (exec.h);
 * the executor's own files (job id, cancel) in the directory's .shim
 * sibling, this process's. Waited for here with its events relayed and
 * its log copied; cancel, timeout and on_event stop it through the
 * batch system. This process stays on the daemon's host under its run's
 * shim, so a daemon restart leaves it waiting. */
static int
batch_spawn(pl_job *j, const struct pl_spawn *spec, struct relay *r, const char *dir,
    char **env, struct pl_exit *out)
{
	struct proc p;
	memset(&p, 0, sizeof(p));
	p.ex = j->ex;
	p.pidfd = -1;
	p.opts = j->ex_opts;
	p.started = now_wall();
	snprintf(p.name, sizeof(p.name), "%s", spec->name);
	snprintf(p.dir, sizeof(p.dir), "%s", dir);
	snprintf(p.log, sizeof(p.log), "%s/job.log", dir);
	off_t logoff = 0;
	char shim[PATH_MAX];
	conf_shim_path(j->conf, shim, sizeof(shim));
	int na = 0;
	while (spec->argv[na])
		na++;
	const char **argv = xcalloc((size_t)na + 10, sizeof(char *));
	int k = 0;
	argv[k++] = shim;
	argv[k++] = "-d";
	argv[k++] = p.dir;
	argv[k++] = "-l";
	argv[k++] = p.log;
	argv[k++] = "-c";
	argv[k++] = r->cwd;
	argv[k++] = "--";
	for (int i = 0; i < na; i++)
		argv[k++] = spec->argv[i];
	unlink(p.log);
	static const char *const stale[] = { "exit.json", "shim.json", NULL };
	for (int i = 0; stale[i]; i++) {
		char f[PATH_MAX + 16];
		snprintf(f, sizeof(f), "%s/%s", dir, stale[i]);
		unlink(f);
	}
	int rc = p.ex->start(&p, (char *const *)argv, env, r->cwd);
	free(argv);
	if (rc == -1) {
		log_relay(p.log, &logoff);
		job_log(j, PL_LOG_ERROR, "spawn %s: %s refused it: %s", spec->name, p.ex->name,
		    p.reason);
		snprintf(out->error, sizeof(out->error), "%s: %s", p.ex->name, p.reason);
		return PL_ECHILD;
	}
	double t0 = plc_mono_secs(), own = spec->timeout > 0 ? t0 + spec->timeout : 0;
	double term_at = 0, grace = 10;
	int killed = 0, last_state = -1;
	char last_reason[sizeof(p.reason)] = "";
	for (;;) {
		int w = p.ex->wait(&p, 200);
		relay_read(r);
		log_relay(p.log, &logoff);
		if (w != 0)
			break;
		if (p.state != last_state || strcmp(p.reason, last_reason) != 0) {
			batch_state(j, spec, &p);
			last_state = p.state;
			snprintf(last_reason, sizeof(last_reason), "%s", p.reason);
		}
		int stop = job_cancelled(j) || r->stop || r->refused ||
		    (own > 0 && plc_mono_secs() > own);
		if (stop && term_at == 0 && job_cancelled(j)) {
			/* The job's cancel or timeout: this process has its
			 * shim's kill_grace left, maybe less than the program
			 * needs to stop. The batch job is cancelled outright,
			 * and Slurm stops it (SIGTERM, then SIGKILL after its
			 * KillWait) whether or not this process is still here. */
			job_logf(j, "cancelling %s (%s job %s)", spec->name, p.ex->name, p.ext_id);
			p.ex->signal(&p, SIGKILL);
			term_at = plc_mono_secs();
			killed = 1;
		} else if (stop && term_at == 0) {
			job_logf(j, "stopping %s (SIGTERM, %s job %s)", spec->name, p.ex->name,
			    p.ext_id);
			p.ex->signal(&p, SIGTERM);
			term_at = plc_mono_secs();
		} else if (stop && !killed && plc_mono_secs() - term_at > grace) {
			job_logf(j, "killing %s (SIGKILL after %gs)", spec->name, grace);
			p.ex->signal(&p, SIGKILL);
			killed = 1;
		}
	}
	relay_read(r);
	log_relay(p.log, &logoff);
	p.ex->release(&p);
	out->adopted = 0;
	out->seconds = plc_mono_secs() - t0;
	return job_proc_result(j, spec, &p, own, term_at, out);
}

/* host->spawn() in a stage process: the program started directly (the
 * process already runs as the owner, in the shim's process group), or
 * as a batch job of the job's executor (batch_spawn()), its events
 * relayed to the stage's events file and handed to on_event. */
static int
ctx_spawn(pl_job *j, const struct pl_spawn *spec, struct pl_exit *out)
{
	if (spec->argv == NULL || spec->argv[0] == NULL || !valid_name(spec->name)) {
		job_log(j, PL_LOG_ERROR, "spawn: bad pl_spawn (name or argv)");
		return PL_EINVAL;
	}
	if (job_cancelled(j))
		return PL_ECANCELED;
	/* The program's directory below the stage process's own (the
	 * owner's), emptied of an earlier spawn's events. */
	const char *pdir = getenv("PL_JOB_DIR");
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/%s", pdir ? pdir : j->workdir, spec->name);
	if (mkdir(dir, 0750) == -1 && errno != EEXIST) {
		job_log(j, PL_LOG_ERROR, "spawn %s: cannot make %s: %s", spec->name, dir,
		    strerror(errno));
		return PL_EIO;
	}
	struct relay r = { .j = j, .spec = spec, .out = out };
	snprintf(r.events, sizeof(r.events), "%s/events", dir);
	snprintf(r.cwd, sizeof(r.cwd), "%s", spec->cwd ? spec->cwd : j->workdir);
	unlink(r.events);
	char **env = child_env(j, spec, dir);
	job_logf(j, "spawn %s: %s%s", spec->name, spec->argv[0],
	    spec->resume_from ? " (resuming)" : "");
	if (j->ex != NULL && j->ex->batch) {
		batch_orphans(j, spec, pdir ? pdir : j->workdir);
		int rc = batch_spawn(j, spec, &r, dir, env, out);
		for (char **e = env; *e; e++)
			free(*e);
		free(env);
		return finish_relay(j, spec, &r, rc);
	}
	double t0 = plc_mono_secs();
	pid_t pid = fork();
	if (pid == 0) {
		/* In the stage process's group: the shim's signals reach it. */
		signal(SIGTERM, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		if (chdir(r.cwd) == -1) {
			dprintf(2, "spawn %s: chdir %s: %s\n", spec->name, r.cwd, strerror(errno));
			_exit(126);
		}
		environ = env;
		execvp(spec->argv[0], (char *const *)spec->argv);
		dprintf(2, "spawn %s: %s: %s\n", spec->name, spec->argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	for (char **e = env; *e; e++)
		free(*e);
	free(env);
	if (pid == -1) {
		job_log(j, PL_LOG_ERROR, "spawn %s: fork: %s", spec->name, strerror(errno));
		return PL_ECHILD;
	}
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0), status = 0;
	double own = spec->timeout > 0 ? t0 + spec->timeout : 0, term_at = 0;
	double grace = 10;
	for (;;) {
		if (pfd >= 0) {
			struct pollfd pf = { .fd = pfd, .events = POLLIN };
			poll(&pf, 1, 100);
		} else {
			struct timespec ts = { 0, 100000000 };
			nanosleep(&ts, NULL);
		}
		pid_t w = waitpid(pid, &status, WNOHANG);
		relay_read(&r);
		if (w == pid)
			break;
		int stop = job_cancelled(j) || r.stop || r.refused || (own > 0 && plc_mono_secs() > own);
		if (stop && term_at == 0) {
			job_logf(j, "stopping %s (SIGTERM)", spec->name);
			kill(pid, SIGTERM);
			term_at = plc_mono_secs();
		} else if (stop && term_at > 0 && plc_mono_secs() - term_at > grace) {
			job_logf(j, "killing %s (SIGKILL after %gs)", spec->name, grace);
			kill(pid, SIGKILL);
			term_at = plc_mono_secs() + 1e9;
		}
	}
	if (pfd >= 0)
		close(pfd);
	out->exited = WIFEXITED(status);
	out->status = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
	out->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	out->adopted = 0;
	out->seconds = plc_mono_secs() - t0;
	int rc = PL_OK;
	if (own > 0 && term_at > 0 && plc_mono_secs() > own)
		rc = PL_ETIMEDOUT;
	else if (job_cancelled(j) && term_at > 0)
		rc = PL_ECANCELED;
	return finish_relay(j, spec, &r, rc);
}

const struct host_backend host_stage_proc = {
	.daemon = 0,
	.input = ctx_input,
	.spawn = ctx_spawn,
	.artifact_find = ctx_artifact_find,
	.value_get = ctx_value_get,
	.value_history = ctx_value_history,
	HOST_NOTHING_STORED,
	.event = stagectx_emit,
	.progress = ctx_progress,
	.artifact = ctx_artifact,
	.value_set = ctx_value_set,
};
