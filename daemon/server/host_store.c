/* host_store.c: host_store, the host backend of the daemon's jobs (see
 * struct host_backend): what a stage reports, and what the events reader
 * reads of its processes, stored in the job's own store (j->store), run,
 * job and attempt, then announced; lookups in the store; spawns under
 * pipeline-shim (host_spawn.c). Only the daemon's scheduler names it
 * (job_new()), so a program that does not (pipelinectl) links neither
 * this file nor the store's writes. */
#include <math.h>
#include <string.h>

#include "pld.h"
#include "server.h"

static int
hs_begin(pl_job *j)
{
	return store_begin(j->store);
}

static int
hs_commit(pl_job *j)
{
	return store_commit(j->store);
}

static void
hs_rollback(pl_job *j)
{
	store_rollback(j->store);
}

static void
hs_undoable(pl_job *j)
{
	store_undoable(j->store);
}

static int
hs_error(pl_job *j, char *msg, size_t len)
{
	return store_error(j->store, msg, len);
}

static void
hs_fail(pl_job *j)
{
	store_fail(j->store);
}

static int
hs_event(pl_job *j, const char *type, cJSON *d)
{
	return store_event(j->store, j->run, j->name, type, d) > 0 ? 0 : -1;
}

/* The job's progress row, and the event in the feed's form: done (the
 * count) and unit ("step" unless the line gives one). The stage's own
 * progress has both already; a job program's line (one with a step, or
 * with no count at all) gets done from its step, last, whatever done it
 * gave. */
static int
hs_progress(pl_job *j, double done, double total, const char *unit, cJSON *d)
{
	int rc = isnan(done) ? 0 : store_job_progress(j->store, j->job_id, done, total, unit);
	if (isnan(done) || cJSON_HasObjectItem(d, "step")) {
		cJSON_DeleteItemFromObject(d, "done");
		cJSON_AddNumberToObject(d, "done", isnan(done) ? 0 : done);
	}
	if (unit != NULL && !cJSON_HasObjectItem(d, "unit"))
		cJSON_AddStringToObject(d, "unit", unit);
	return rc;
}

static int
hs_metric(pl_job *j, const char *name, int64_t step, double value)
{
	return store_metric(j->store, j->job_id, name, step, value);
}

static int
hs_artifact(pl_job *j, const char *name, const char *path, uint64_t size, const char *sha256)
{
	return store_artifact(j->store, j->run_id, j->job_id, name, path, size, sha256);
}

static int
hs_value_set(pl_job *j, const char *key, const char *value)
{
	return store_value_set(j->store, j->run_id, j->job_id, key, value);
}

const char *
hstore_run_named(pl_job *j, const char *run, char *buf, size_t len)
{
	if (run == NULL || strcmp(run, j->run) == 0 || (j->spec != NULL &&
	    j->spec->previous != NULL && strcmp(run, j->spec->previous) == 0))
		return run;
	return store_run_resolve(j->store, run, 1, buf, len) == 0 ? buf : run;
}

static char *
hs_value_get(pl_job *j, const char *run, const char *job, const char *key)
{
	char name[128];
	return store_value_get(j->store, run ? hstore_run_named(j, run, name, sizeof(name)) :
	    j->run, job, key);
}

int64_t
hstore_viewer(struct pl_job *j)
{
	int64_t sub = -1;
	if (store_run_submitter(j->store, j->run, &sub) == -1 || sub < 0)
		return ACCESS_ALL; /* root's or the daemon's user's, from before submitters */
	struct access_peer p = { .uid = (uid_t)sub, .gid = (gid_t)-1 };
	return access_viewer(j->conf, &p);
}

/* Of the runs the submitter may read: a member's stage that runs in the
 * daemon (a daemon with user set) sees no other member's values. */
static char *
hs_value_history(pl_job *j, const char *key, int limit)
{
	return store_value_history(j->store, key, limit, hstore_viewer(j));
}

/* reuse_plan_find(), here below reuse.c, which plans with this backend. */
int
reuse_plan_find(const struct reuse_plan *plan, const char *job, const char *name, char *path,
    size_t pathlen, char *sha256)
{
	for (int i = plan->n - 1; i >= 0; i--) {
		const struct plan_art *a = &plan->a[i];
		if (strcmp(a->name, name) != 0 || (job != NULL && strcmp(a->job, job) != 0))
			continue;
		snprintf(path, pathlen, "%s", a->path);
		if (sha256 != NULL)
			memcpy(sha256, a->sha256, 65);
		return PL_OK;
	}
	return PL_ENOENT;
}

/* A planned job's own run is not in the store: its artifacts are those
 * of the jobs the plan reuses (reuse.c: reuse_plan). */
static int
hs_artifact_find(pl_job *j, const char *run, const char *job, const char *name, char *path,
    size_t pathlen, char *sha256)
{
	if (j->plan != NULL && (run == NULL || strcmp(run, j->run) == 0))
		return reuse_plan_find(j->plan, job, name, path, pathlen, sha256);
	char rname[128];
	return store_artifact_find(j->store, run ? hstore_run_named(j, run, rname, sizeof(rname)) :
	    j->run, job, name, path, pathlen, sha256);
}

static int
hs_proc_find(pl_job *j, const char *name, struct proc_row *row)
{
	return store_proc_find(j->store, j->attempt_id, name, row);
}

static int
hs_proc_insert(pl_job *j, const char *name, const char *executor, const char *dir, int64_t *id)
{
	return store_proc_insert(j->store, j->attempt_id, name, executor, dir, id);
}

static int
hs_proc_update(pl_job *j, struct proc *p, int64_t events_offset)
{
	return store_proc_update(j->store, p, events_offset);
}

static int
hs_job_state(pl_job *j, enum pl_job_state state, const char *message)
{
	return store_job_state(j->store, j->job_id, j->run, j->name, state, j->attempt, message);
}

/* What the daemon hashed to record an artifact, kept for reuse. */
static void
hs_digest_keep(pl_job *j, const char *path, const struct stat *sb, const struct stat *after,
    const char *hex)
{
	if (hs_begin(j) == 0) {
		store_digest_keep(j->store, path, sb, after, hex);
		hs_commit(j);
	}
}

const struct host_backend host_store = {
	.daemon = 1,
	.input = host_input_in_run,
	.spawn = host_spawn_shim,
	.artifact_find = hs_artifact_find,
	.value_get = hs_value_get,
	.value_history = hs_value_history,
	.begin = hs_begin,
	.commit = hs_commit,
	.rollback = hs_rollback,
	.undoable = hs_undoable,
	.error = hs_error,
	.fail = hs_fail,
	.event = hs_event,
	.progress = hs_progress,
	.metric = hs_metric,
	.artifact = hs_artifact,
	.value_set = hs_value_set,
	.proc_find = hs_proc_find,
	.proc_insert = hs_proc_insert,
	.proc_update = hs_proc_update,
	.job_state = hs_job_state,
	.digest_keep = hs_digest_keep,
};
