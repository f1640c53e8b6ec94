/* host_store.c: the store-backed half of the plugin host (host.c,
 * host_spawn.c): the store writes and reads of a job the daemon runs,
 * each on the job's own store, run, job and attempt. A job has a store
 * only through hstore_bind(), which only the daemon's scheduler calls:
 * a program that never calls it (pipelinectl, whose `check` and `stage`
 * run the same host table with no store) links neither this file nor the
 * store's writes, and host.c's weak references to it are NULL there,
 * every one behind a test of j->store. */
#include <string.h>

#include "pipelined.h"

void
hstore_bind(pl_job *j, struct store *s)
{
	j->store = s;
}

int
hstore_begin(pl_job *j)
{
	return store_begin(j->store);
}

int
hstore_commit(pl_job *j)
{
	return store_commit(j->store);
}

void
hstore_rollback(pl_job *j)
{
	store_rollback(j->store);
}

void
hstore_undoable(pl_job *j)
{
	store_undoable(j->store);
}

int
hstore_error(pl_job *j, char *msg, size_t len)
{
	return store_error(j->store, msg, len);
}

void
hstore_fail(pl_job *j)
{
	store_fail(j->store);
}

int64_t
hstore_event(pl_job *j, const char *run, const char *job, const char *type, cJSON *data)
{
	return store_event(j->store, run, job, type, data);
}

int
hstore_job_state(pl_job *j, const char *run, const char *job, enum pl_job_state state, int attempt, const char *message)
{
	return store_job_state(j->store, j->job_id, run, job, state, attempt, message);
}

int
hstore_job_progress(pl_job *j, double done, double total, const char *unit)
{
	return store_job_progress(j->store, j->job_id, done, total, unit);
}

int
hstore_metric(pl_job *j, const char *name, int64_t step, double value)
{
	return store_metric(j->store, j->job_id, name, step, value);
}

int
hstore_artifact(pl_job *j, const char *name, const char *path, uint64_t size, const char *sha256)
{
	return store_artifact(j->store, j->run_id, j->job_id, name, path, size, sha256);
}

int
hstore_value_set(pl_job *j, const char *key, const char *value)
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

char *
hstore_value_get(pl_job *j, const char *run, const char *job, const char *key)
{
	char name[128];
	return store_value_get(j->store, hstore_run_named(j, run, name, sizeof(name)), job,
	    key);
}

char *
hstore_value_history(pl_job *j, const char *key, int limit)
{
	return store_value_history(j->store, key, limit);
}

int
hstore_artifact_find(pl_job *j, const char *run, const char *job, const char *name, char *path, size_t pathlen, char *sha256)
{
	char rname[128];
	return store_artifact_find(j->store, hstore_run_named(j, run, rname, sizeof(rname)),
	    job, name, path, pathlen, sha256);
}

int
hstore_proc_find(pl_job *j, const char *name, struct proc_row *row)
{
	return store_proc_find(j->store, j->attempt_id, name, row);
}

int
hstore_proc_insert(pl_job *j, const char *name, const char *executor, const char *dir, int64_t *id)
{
	return store_proc_insert(j->store, j->attempt_id, name, executor, dir, id);
}

int
hstore_proc_update(pl_job *j, struct proc *p, int64_t events_offset)
{
	return store_proc_update(j->store, p, events_offset);
}
