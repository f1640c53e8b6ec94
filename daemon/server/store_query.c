/* store_query.c: the store's reads (store.c has the schema, the
 * connection, transactions and the writes): the runs, jobs, values,
 * artifacts, metrics and events the control socket, the feed and the
 * scheduler ask for, and the outbox rows due. Each takes the store's
 * mutex; rows go out in JSON named by wire.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "pld.h"
#include "store_int.h"
#include "wire.h"

cJSON *
store_outbox_due(struct store *s, double now, int limit)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT id, kind, run, job, target, key, body, attempts"
	    " FROM outbox WHERE state = 'pending' AND next_at <= ? ORDER BY id LIMIT ?");
	cJSON *a = NULL;
	if (st) {
		sqlite3_bind_double(st, 1, now);
		sqlite3_bind_int(st, 2, limit);
		a = store_rows(s, st, &wire_outbox);
	}
	pthread_mutex_unlock(&s->mtx);
	return a;
}

double
store_outbox_next(struct store *s)
{
	double next = 0;
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT min(next_at) FROM outbox WHERE state = 'pending'");
	if (st && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
		next = sqlite3_column_double(st, 0);
	store_unprep(s, st);
	pthread_mutex_unlock(&s->mtx);
	return next;
}

double
store_attempt_deadline(struct store *s, int64_t attempt_id)
{
	double d = 0;

	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT deadline FROM attempts WHERE id = ?");
	if (st) {
		sqlite3_bind_int64(st, 1, attempt_id);
		if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
			d = sqlite3_column_double(st, 0);
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return d;
}

char *
store_value_get(struct store *s, const char *run, const char *job, const char *key)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT v.value FROM vals v JOIN runs r ON r.id = v.run_id"
	    " JOIN jobs j ON j.id = v.job_id WHERE r.name = ? AND (?2 IS NULL OR j.name = ?2)"
	    " AND v.key = ? ORDER BY v.id DESC LIMIT 1");
	char *r = NULL;
	if (st) {
		sqlite3_bind_text(st, 1, run, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 2, job, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 3, key, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
			r = xstrdup((const char *)sqlite3_column_text(st, 0));
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return r;
}

char *
store_value_history(struct store *s, const char *key, int limit, int64_t viewer)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT r.name, j.name, v.value, v.ts FROM vals v"
	    " JOIN runs r ON r.id = v.run_id JOIN jobs j ON j.id = v.job_id"
	    " WHERE v.key = ? AND " ACCESS_SQL("r") " ORDER BY v.ts DESC, v.id DESC LIMIT :limit");
	cJSON *a = cJSON_CreateArray();
	if (st) {
		sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int(st, sqlite3_bind_parameter_index(st, ":limit"),
		    limit > 0 ? limit : 1000000);
		store_bind_viewer(st, viewer);
		while (sqlite3_step(st) == SQLITE_ROW) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "run", (const char *)sqlite3_column_text(st, 0));
			cJSON_AddStringToObject(o, "job", (const char *)sqlite3_column_text(st, 1));
			cJSON_AddStringToObject(o, "value", sqlite3_column_text(st, 2) ?
			    (const char *)sqlite3_column_text(st, 2) : "");
			cJSON_AddNumberToObject(o, "ts", sqlite3_column_double(st, 3));
			cJSON_AddItemToArray(a, o);
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	char *r = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	return r;
}

static const char *
col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	return t ? (const char *)t : "";
}

cJSON *
store_run_snapshot(struct store *s, const char *run)
{
	int64_t id = store_run_id(s, run);
	if (id <= 0)
		return NULL;
	cJSON *o = cJSON_CreateObject(), *va = cJSON_AddArrayToObject(o, "values"),
	    *aa = cJSON_AddArrayToObject(o, "artifacts");
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT j.name, v.key, v.value, v.ts FROM vals v"
	    " JOIN jobs j ON j.id = v.job_id WHERE v.run_id = ? ORDER BY v.id DESC");
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		while (sqlite3_step(st) == SQLITE_ROW) {
			cJSON *v = cJSON_CreateObject();
			cJSON_AddStringToObject(v, "job", col_text(st, 0));
			cJSON_AddStringToObject(v, "key", col_text(st, 1));
			cJSON_AddStringToObject(v, "value", col_text(st, 2));
			cJSON_AddNumberToObject(v, "ts", sqlite3_column_double(st, 3));
			cJSON_AddItemToArray(va, v);
		}
		store_unprep(s, st);
	}
	st = store_prep(s, "SELECT j.name, a.name, a.path, a.sha256 FROM artifacts a"
	    " JOIN jobs j ON j.id = a.job_id WHERE a.run_id = ? ORDER BY a.id DESC");
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		while (sqlite3_step(st) == SQLITE_ROW) {
			cJSON *a = cJSON_CreateObject();
			cJSON_AddStringToObject(a, "job", col_text(st, 0));
			cJSON_AddStringToObject(a, "name", col_text(st, 1));
			cJSON_AddStringToObject(a, "path", col_text(st, 2));
			cJSON_AddStringToObject(a, "sha256", col_text(st, 3));
			cJSON_AddItemToArray(aa, a);
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return o;
}

cJSON *
store_values_recent(struct store *s, const char *uid, int limit)
{
	cJSON *a = cJSON_CreateArray();
	char like[32];
	snprintf(like, sizeof(like), "%s:%%", uid ? uid : "");
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT r.name, j.name, v.key, v.value, v.ts FROM vals v"
	    " JOIN runs r ON r.id = v.run_id JOIN jobs j ON j.id = v.job_id"
	    " WHERE ?1 IS NULL OR r.owner LIKE ?2 ORDER BY v.ts DESC, v.id DESC LIMIT ?3");
	if (st) {
		if (uid != NULL)
			sqlite3_bind_int(st, 1, 1);
		sqlite3_bind_text(st, 2, like, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int(st, 3, limit);
		while (sqlite3_step(st) == SQLITE_ROW) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "run", col_text(st, 0));
			cJSON_AddStringToObject(o, "job", col_text(st, 1));
			cJSON_AddStringToObject(o, "key", col_text(st, 2));
			cJSON_AddStringToObject(o, "value", col_text(st, 3));
			cJSON_AddNumberToObject(o, "ts", sqlite3_column_double(st, 4));
			cJSON_AddItemToArray(a, o);
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return a;
}

int
store_artifact_find(struct store *s, const char *run, const char *job, const char *name,
    char *path, size_t pathlen, char *sha256)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT a.path, a.sha256 FROM artifacts a"
	    " JOIN runs r ON r.id = a.run_id JOIN jobs j ON j.id = a.job_id"
	    " WHERE r.name = ? AND (?2 IS NULL OR j.name = ?2) AND a.name = ?"
	    " ORDER BY a.id DESC LIMIT 1");
	int rc = PL_ENOENT;
	if (st) {
		sqlite3_bind_text(st, 1, run, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 2, job, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 3, name, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(st) == SQLITE_ROW) {
			snprintf(path, pathlen, "%s", (const char *)sqlite3_column_text(st, 0));
			if (sha256)
				snprintf(sha256, 65, "%s", sqlite3_column_text(st, 1) ?
				    (const char *)sqlite3_column_text(st, 1) : "");
			rc = PL_OK;
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return rc;
}

static void
proc_row_read(sqlite3_stmt *st, struct proc_row *r)
{
	memset(r, 0, sizeof(*r));
	r->id = sqlite3_column_int64(st, 0);
	snprintf(r->dir, sizeof(r->dir), "%s", sqlite3_column_text(st, 1) ?
	    (const char *)sqlite3_column_text(st, 1) : "");
	r->pid = (pid_t)sqlite3_column_int(st, 2);
	r->starttime = (uint64_t)sqlite3_column_int64(st, 3);
	snprintf(r->ext_id, sizeof(r->ext_id), "%s", sqlite3_column_text(st, 4) ?
	    (const char *)sqlite3_column_text(st, 4) : "");
	snprintf(r->executor, sizeof(r->executor), "%s", sqlite3_column_text(st, 5) ?
	    (const char *)sqlite3_column_text(st, 5) : "local");
	r->state = sqlite3_column_int(st, 6);
	r->events_offset = sqlite3_column_int64(st, 7);
	r->exited = sqlite3_column_int(st, 8);
	r->status = sqlite3_column_int(st, 9);
	r->sig = sqlite3_column_int(st, 10);
	snprintf(r->end_class, sizeof(r->end_class), "%s", sqlite3_column_text(st, 11) ?
	    (const char *)sqlite3_column_text(st, 11) : "");
}

#define PROC_COLS "id, dir, pid, starttime, ext_id, executor, state, events_offset," \
	" exited, status, signal, end_class"

int
store_proc_find(struct store *s, int64_t attempt_id, const char *name, struct proc_row *row)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT " PROC_COLS " FROM procs WHERE attempt_id = ? AND name = ?");
	int rc = -1;
	if (st) {
		sqlite3_bind_int64(st, 1, attempt_id);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(st) == SQLITE_ROW) {
			proc_row_read(st, row);
			rc = 0;
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return rc;
}

int
store_attempt_procs(struct store *s, int64_t attempt_id, struct proc_row **rows, int *n)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT " PROC_COLS " FROM procs WHERE attempt_id = ? ORDER BY id");
	*rows = NULL;
	*n = 0;
	if (st) {
		sqlite3_bind_int64(st, 1, attempt_id);
		while (sqlite3_step(st) == SQLITE_ROW) {
			*rows = xrealloc(*rows, (size_t)*n + 1, sizeof(**rows));
			proc_row_read(st, &(*rows)[(*n)++]);
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return st ? 0 : -1;
}

/* The rows of st as JSON, named by row (wire.c); gives st back. */
cJSON *
store_rows(struct store *s, sqlite3_stmt *st, const struct wire_row *row)
{
	cJSON *a = wire_rows(st, row);
	store_unprep(s, st);
	return a;
}

/* The bytes of the files run r's artifact records hold: each path once,
 * those gc removed left out (pipelinectl list's SIZE, du). */
#define RUN_BYTES_SQL "(SELECT coalesce(sum(size), 0) FROM (SELECT max(a.size) AS size" \
	" FROM artifacts a WHERE a.run_id = r.id AND a.removed IS NULL GROUP BY a.path))"

cJSON *
store_q_runs(struct store *s, int64_t viewer)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT r.name, r.state, r.previous, r.created, r.finished,"
	    " r.message, (SELECT count(*) FROM jobs j WHERE j.run_id = r.id) AS jobs,"
	    " (SELECT count(*) FROM jobs j WHERE j.run_id = r.id AND j.state IN ('succeeded', 'reused')) AS succeeded,"
	    " " RUN_BYTES_SQL " AS bytes"
	    " FROM runs r WHERE " ACCESS_SQL("r") " ORDER BY r.id DESC");
	if (st)
		store_bind_viewer(st, viewer);
	cJSON *a = st ? store_rows(s, st, &wire_run) : NULL;
	pthread_mutex_unlock(&s->mtx);
	return a;
}

cJSON *
store_q_run(struct store *s, const char *run)
{
	pthread_mutex_lock(&s->mtx);
	cJSON *res = NULL;
	/* state_event: the event of the run's newest state, newest first
	 * (the last event of a run that ended), so that a watcher knows an
	 * ended state a retry superseded. */
	sqlite3_stmt *st = store_prep(s, "SELECT name, state, previous, description, spec_path, created,"
	    " finished, message, (SELECT e.id FROM events e WHERE e.run = r.name AND"
	    " e.type = 'run.state' ORDER BY e.id DESC LIMIT 1) AS state_event, " RUN_BYTES_SQL " AS bytes"
	    " FROM runs r WHERE name = ?");
	if (st == NULL)
		goto out;
	sqlite3_bind_text(st, 1, run, -1, SQLITE_TRANSIENT);
	cJSON *runs = store_rows(s, st, &wire_run);
	if (cJSON_GetArraySize(runs) != 1) {
		cJSON_Delete(runs);
		goto out;
	}
	res = cJSON_CreateObject();
	cJSON_AddItemToObject(res, "run", cJSON_DetachItemFromArray(runs, 0));
	cJSON_Delete(runs);
	st = store_prep(s, "SELECT j.name, j.stage, j.state, j.attempts, j.started, j.finished, j.message,"
	    " j.progress_done, j.progress_total, j.progress_unit, j.next_at FROM jobs j"
	    " JOIN runs r ON r.id = j.run_id WHERE r.name = ? ORDER BY j.seq");
	if (st) {
		sqlite3_bind_text(st, 1, run, -1, SQLITE_TRANSIENT);
		cJSON_AddItemToObject(res, "jobs", store_rows(s, st, &wire_job));
	}
out:
	pthread_mutex_unlock(&s->mtx);
	return res;
}

cJSON *
store_q_values(struct store *s, const char *run, const char *job)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT j.name AS job_name, v.key, v.value, v.ts FROM vals v"
	    " JOIN runs r ON r.id = v.run_id JOIN jobs j ON j.id = v.job_id"
	    " WHERE r.name = ? AND (?2 IS NULL OR j.name = ?2) ORDER BY v.id");
	cJSON *a = NULL;
	if (st) {
		sqlite3_bind_text(st, 1, run, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 2, job, -1, SQLITE_TRANSIENT);
		a = store_rows(s, st, &wire_value);
	}
	pthread_mutex_unlock(&s->mtx);
	return a;
}

cJSON *
store_q_artifacts(struct store *s, const char *run)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT j.name AS job_name, a.name, a.path, a.size, a.sha256,"
	    " a.created, a.removed, a.removed_by"
	    " FROM artifacts a JOIN runs r ON r.id = a.run_id JOIN jobs j ON j.id = a.job_id"
	    " WHERE r.name = ? ORDER BY a.id");
	cJSON *a = NULL;
	if (st) {
		sqlite3_bind_text(st, 1, run, -1, SQLITE_TRANSIENT);
		a = store_rows(s, st, &wire_artifact);
	}
	pthread_mutex_unlock(&s->mtx);
	return a;
}

cJSON *
store_q_metrics(struct store *s, const char *run, const char *job, const char *name)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT m.name, m.step, m.value FROM metrics m"
	    " JOIN jobs j ON j.id = m.job_id JOIN runs r ON r.id = j.run_id"
	    " WHERE r.name = ? AND j.name = ? AND (?3 IS NULL OR m.name = ?3)"
	    " ORDER BY m.name, m.step");
	cJSON *a = NULL;
	if (st) {
		sqlite3_bind_text(st, 1, run, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 2, job, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 3, name, -1, SQLITE_TRANSIENT);
		a = store_rows(s, st, &wire_metric);
	}
	pthread_mutex_unlock(&s->mtx);
	return a;
}

int
store_q_events(struct store *s, int64_t since, const char *run, int64_t viewer, int limit,
    void (*fn)(void *arg, int64_t id, const char *line), void *arg)
{
	pthread_mutex_lock(&s->mtx);
	/* The daemon's own events (no run) are everyone's. */
	sqlite3_stmt *st = store_prep(s, "SELECT id, ts, run, job, type, data FROM events"
	    " WHERE id > :since AND (:run IS NULL OR run = :run) AND (:viewer IS NULL OR"
	    " run IS NULL OR run IN (SELECT r.name FROM runs r WHERE " ACCESS_SQL("r") "))"
	    " ORDER BY id LIMIT :limit");
	int n = 0;
	if (st) {
		/* Named, every one: a name takes the slot after the highest
		 * number seen before it, so ":viewer ... ?3" would share one. */
		sqlite3_bind_int64(st, sqlite3_bind_parameter_index(st, ":since"), since);
		sqlite3_bind_text(st, sqlite3_bind_parameter_index(st, ":run"), run, -1,
		    SQLITE_TRANSIENT);
		sqlite3_bind_int(st, sqlite3_bind_parameter_index(st, ":limit"), limit);
		store_bind_viewer(st, viewer);
		while (sqlite3_step(st) == SQLITE_ROW) {
			const char *dt = (const char *)sqlite3_column_text(st, 5);
			cJSON *d = dt ? cJSON_Parse(dt) : NULL;
			int64_t id = sqlite3_column_int64(st, 0);
			char *line = wire_event_line(id, sqlite3_column_double(st, 1),
			    (const char *)sqlite3_column_text(st, 2),
			    (const char *)sqlite3_column_text(st, 3),
			    (const char *)sqlite3_column_text(st, 4), d);
			cJSON_Delete(d);
			fn(arg, id, line);
			free(line);
			n++;
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return st ? n : -1;
}

int
store_q_unfinished(struct store *s, void (*fn)(void *arg, int64_t id, const char *name,
    const char *path, const char *text, enum pl_run_state state), void *arg)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT id, name, spec_path, spec_text, state FROM runs"
	    " ORDER BY id");
	if (st) {
		while (sqlite3_step(st) == SQLITE_ROW) {
			const char *name = (const char *)sqlite3_column_text(st, 1);
			const char *word = (const char *)sqlite3_column_text(st, 4);
			int rs = pl_run_state_find(word);
			if (rs == -1) {
				log_warnx("%s: run %s: state \"%s\" in the store is not a run's"
				    " state; left out", __func__, name, word ? word : "(null)");
				continue;
			}
			fn(arg, sqlite3_column_int64(st, 0), name,
			    (const char *)sqlite3_column_text(st, 2),
			    (const char *)sqlite3_column_text(st, 3), (enum pl_run_state)rs);
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return st ? 0 : -1;
}

int
store_job_get(struct store *s, int64_t run_id, const char *name, struct job_row *r)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT j.id, j.state, j.attempts, j.lost, coalesce(j.next_at, 0), j.retry_base,"
	    " coalesce(a.id, 0), coalesce(j.message, '') FROM jobs j"
	    " LEFT JOIN attempts a ON a.job_id = j.id AND a.n = (SELECT max(n) FROM attempts"
	    " WHERE job_id = j.id) WHERE j.run_id = ? AND j.name = ?");
	int rc = -1;
	if (st) {
		sqlite3_bind_int64(st, 1, run_id);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
		int js = -1;
		if (sqlite3_step(st) == SQLITE_ROW &&
		    (js = pl_job_state_find((const char *)sqlite3_column_text(st, 1))) == -1)
			log_warnx("%s: job %s: state \"%s\" in the store is not a job's state",
			    __func__, name, col_text(st, 1));
		if (js != -1) {
			memset(r, 0, sizeof(*r));
			r->id = sqlite3_column_int64(st, 0);
			r->state = (enum pl_job_state)js;
			r->attempts = sqlite3_column_int(st, 2);
			r->lost = sqlite3_column_int(st, 3);
			r->next_at = sqlite3_column_double(st, 4);
			r->retry_base = sqlite3_column_int(st, 5);
			r->attempt_id = sqlite3_column_int64(st, 6);
			snprintf(r->message, sizeof(r->message), "%s", sqlite3_column_text(st, 7));
			rc = 0;
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return rc;
}

int64_t
store_run_id(struct store *s, const char *name)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT id FROM runs WHERE name = ?");
	int64_t id = 0;
	if (st) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(st) == SQLITE_ROW)
			id = sqlite3_column_int64(st, 0);
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return id;
}

/* One text column of the run named name: malloc'd, NULL when absent. */
static char *
run_text(struct store *s, const char *sql, const char *name)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, sql);
	char *r = NULL;
	if (st) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
			r = xstrdup((const char *)sqlite3_column_text(st, 0));
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return r;
}

int
store_run_state_get(struct store *s, const char *name)
{
	char *word = run_text(s, "SELECT state FROM runs WHERE name = ?", name);
	int rs = pl_run_state_find(word);
	if (word != NULL && rs == -1)
		log_warnx("%s: run %s: state \"%s\" in the store is not a run's state", __func__,
		    name, word);
	free(word);
	return rs;
}

int
store_run_submitter(struct store *s, const char *name, int64_t *submitter)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT submitter FROM runs WHERE name = ?");
	int rc = -1;
	if (st) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(st) == SQLITE_ROW) {
			*submitter = sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 :
			    sqlite3_column_int64(st, 0);
			rc = 0;
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return rc;
}

char *
store_run_owner_get(struct store *s, const char *name)
{
	return run_text(s, "SELECT owner FROM runs WHERE name = ?", name);
}

char *
store_run_previous_get(struct store *s, const char *name)
{
	return run_text(s, "SELECT previous FROM runs WHERE name = ?", name);
}

int
store_run_latest(struct store *s, const char *base, struct run_rev *rr)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT name, revision, state, submitter FROM runs"
	    " WHERE base = ? ORDER BY revision DESC LIMIT 1");
	int rc = -1;
	if (st) {
		sqlite3_bind_text(st, 1, base, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(st) == SQLITE_ROW) {
			snprintf(rr->name, sizeof(rr->name), "%s", col_text(st, 0));
			rr->revision = sqlite3_column_int(st, 1);
			rr->state = pl_run_state_find(col_text(st, 2));
			rr->submitter = sqlite3_column_type(st, 3) == SQLITE_NULL ? -1 :
			    sqlite3_column_int64(st, 3);
			rc = 0;
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return rc;
}

int
store_run_resolve(struct store *s, const char *ref, int succeeded, char *name, size_t len)
{
	char base[128];
	int rev;
	if (run_ref_split(ref, base, sizeof(base), &rev) == -1)
		return -1;
	const char *sql = rev > 0 ? "SELECT name FROM runs WHERE base = ? AND revision = ?" :
	    succeeded ? "SELECT name FROM runs WHERE base = ?"
	    " ORDER BY state = 'succeeded' DESC, revision DESC LIMIT 1" :
	    "SELECT name FROM runs WHERE base = ? ORDER BY revision DESC LIMIT 1";
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, sql);
	int rc = -1;
	if (st) {
		sqlite3_bind_text(st, 1, base, -1, SQLITE_TRANSIENT);
		if (rev > 0)
			sqlite3_bind_int(st, 2, rev);
		if (sqlite3_step(st) == SQLITE_ROW) {
			snprintf(name, len, "%s", col_text(st, 0));
			rc = 0;
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return rc;
}
