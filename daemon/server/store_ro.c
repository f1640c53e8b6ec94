/*
 * store_ro.c: the read-only handle (store_ro.h) and the status page's
 * reads (web.c). A handle is a connection of its own, opened read-only
 * without SQLite's mutex: one thread uses it at a time, and in WAL mode it
 * neither waits for the scheduler's writes nor makes them wait. The page
 * opens one per request; /metrics keeps one (store_metrics.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include "store_int.h"

struct store_ro *
store_ro_open(const char *path, const char *who)
{
	sqlite3 *db = NULL;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
	    NULL) != SQLITE_OK) {
		log_warnx("%s: cannot open %s read-only: %s", who, path,
		    db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, 2000);
	struct store_ro *ro = xcalloc(1, sizeof(*ro));
	ro->db = db;
	snprintf(ro->who, sizeof(ro->who), "%s", who);
	return ro;
}

void
store_ro_close(struct store_ro *ro)
{
	if (ro == NULL)
		return;
	sqlite3_close(ro->db);
	free(ro);
}

void
store_ro_begin(struct store_ro *ro)
{
	sqlite3_exec(ro->db, "BEGIN", NULL, NULL, NULL);
}

void
store_ro_end(struct store_ro *ro)
{
	sqlite3_exec(ro->db, "COMMIT", NULL, NULL, NULL);
}

sqlite3_stmt *
store_ro_prep(struct store_ro *ro, const char *sql)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(ro->db, sql, -1, &st, NULL) != SQLITE_OK) {
		log_warnx("%s: %s: %s", ro->who, sql, sqlite3_errmsg(ro->db));
		sqlite3_finalize(st);
		return NULL;
	}
	return st;
}

void
store_bind_viewer(sqlite3_stmt *st, int64_t viewer)
{
	int i = sqlite3_bind_parameter_index(st, ":viewer");
	if (i == 0)
		return;
	if (viewer == ACCESS_ALL)
		sqlite3_bind_null(st, i);
	else
		sqlite3_bind_int64(st, i, viewer);
}

/* Rows of a query as an array of objects named by row (store_wire.c);
 * the parameters are strings (NULL binds NULL). */
static cJSON *
rows_as(struct store_ro *ro, const struct wire_row *row, const char *sql, int nparam,
    const char *const *param, int64_t viewer)
{
	sqlite3_stmt *st = store_ro_prep(ro, sql);
	if (st == NULL)
		return cJSON_CreateArray();
	for (int i = 0; i < nparam; i++)
		sqlite3_bind_text(st, i + 1, param[i], -1, SQLITE_TRANSIENT);
	store_bind_viewer(st, viewer);
	cJSON *a = wire_rows(st, row);
	sqlite3_finalize(st);
	return a;
}

static cJSON *
rows(struct store_ro *ro, const struct wire_row *row, const char *sql, const char *run,
    const char *job)
{
	const char *p[] = { run, job };
	return rows_as(ro, row, sql, job != NULL ? 2 : 1, p, ACCESS_ALL);
}

int
store_ro_submitter(struct store_ro *ro, const char *run, int64_t *submitter)
{
	sqlite3_stmt *st;
	int found = 0;
	if (run == NULL || (st = store_ro_prep(ro, "SELECT submitter FROM runs WHERE name = ?")) == NULL)
		return 0;
	sqlite3_bind_text(st, 1, run, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) == SQLITE_ROW) {
		found = 1;
		*submitter = sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 :
		    sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	return found;
}

cJSON *
store_ro_runs(struct store_ro *ro, int64_t viewer)
{
	return rows_as(ro, &wire_run, "SELECT r.name, r.state, r.previous, r.description, r.created,"
	    " r.finished, r.message,"
	    " (SELECT count(*) FROM jobs j WHERE j.run_id = r.id) AS jobs,"
	    " (SELECT count(*) FROM jobs j WHERE j.run_id = r.id AND j.state = 'succeeded')"
	    "   AS succeeded,"
	    " (SELECT v.value FROM vals v WHERE v.run_id = r.id AND v.key = 'gate.verdict'"
	    "   ORDER BY v.id DESC LIMIT 1) AS verdict"
	    " FROM runs r WHERE " ACCESS_SQL("r") " ORDER BY r.id DESC LIMIT 500", 0, NULL, viewer);
}

int64_t
store_ro_last_event(struct store_ro *ro, const char *run)
{
	sqlite3_stmt *st = store_ro_prep(ro, run == NULL ?
	    "SELECT coalesce(max(id), 0) FROM events" :
	    "SELECT coalesce(max(id), 0) FROM events WHERE run = ?");
	int64_t id = 0;
	if (st == NULL)
		return 0;
	if (run != NULL)
		sqlite3_bind_text(st, 1, run, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) == SQLITE_ROW)
		id = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return id;
}

cJSON *
store_ro_run(struct store_ro *ro, const char *run)
{
	return rows(ro, &wire_run, "SELECT name, state, previous, description, spec_text, created,"
	    " finished, message FROM runs WHERE name = ?", run, NULL);
}

cJSON *
store_ro_jobs(struct store_ro *ro, const char *run)
{
	return rows(ro, &wire_job, "SELECT j.name, j.stage, j.state,"
	    " j.attempts, j.started, j.finished, j.message, j.progress_done, j.progress_total,"
	    " j.progress_unit, j.variant, j.deps FROM jobs j JOIN runs r ON r.id = j.run_id"
	    " WHERE r.name = ? ORDER BY j.seq", run, NULL);
}

cJSON *
store_ro_artifacts(struct store_ro *ro, const char *run)
{
	return rows(ro, &wire_artifact, "SELECT j.name AS job_name, a.name, a.path,"
	    " a.size, a.sha256 FROM artifacts a JOIN runs r ON r.id = a.run_id"
	    " JOIN jobs j ON j.id = a.job_id WHERE r.name = ? ORDER BY a.id", run, NULL);
}

cJSON *
store_ro_page_values(struct store_ro *ro, const char *run)
{
	return rows(ro, &wire_value, "SELECT j.name AS job_name, v.key, v.value FROM vals v"
	    " JOIN runs r ON r.id = v.run_id JOIN jobs j ON j.id = v.job_id WHERE r.name = ?"
	    " AND v.key IN ('bake.summary', 'gate.verdict', 'corpus_check.summary',"
	    " 'corpus_check.diff') ORDER BY v.id", run, NULL);
}

cJSON *
store_ro_train_jobs(struct store_ro *ro, const char *run)
{
	return rows(ro, &wire_job, "SELECT j.name FROM jobs j JOIN runs r ON r.id = j.run_id"
	    " WHERE r.name = ? AND j.stage = 'train' ORDER BY j.seq", run, NULL);
}

cJSON *
store_ro_curves(struct store_ro *ro, const char *run, const char *job)
{
	return rows(ro, &wire_metric, "SELECT m.name, m.step, m.value FROM metrics m JOIN jobs j ON"
	    " j.id = m.job_id JOIN runs r ON r.id = j.run_id WHERE r.name = ? AND j.name = ?"
	    " AND m.name IN ('loss', 'lr', 'resumed') ORDER BY m.name, m.step", run, job);
}
