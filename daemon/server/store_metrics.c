/*
 * store_metrics.c: GET /metrics' reads (store_ro.h), on metrics.c's
 * read-only handle. Each query gives rows of up to four labels and a
 * number; metrics.c names the series and renders them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

static const struct { const char *sql; int nl; } mq[SMQ_COUNT] = {
	[SMQ_RUN_STATES] = { "SELECT state, count(*) FROM runs GROUP BY state", 1 },
	[SMQ_JOB_STATES] = { "SELECT stage, state, count(*) FROM jobs GROUP BY stage, state"
	    " ORDER BY stage, state", 2 },
	[SMQ_JOB_SECONDS] = { "SELECT stage, finished - started FROM jobs WHERE started IS NOT NULL"
	    " AND finished IS NOT NULL AND state IN ('succeeded', 'failed')", 1 },
	[SMQ_ATTEMPT_SECONDS] = { "SELECT j.stage, a.finished - a.started FROM attempts a JOIN jobs j"
	    " ON j.id = a.job_id WHERE a.started IS NOT NULL AND a.finished IS NOT NULL", 1 },
	[SMQ_RETRIES] = { "SELECT j.stage, count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id"
	    " WHERE a.n > 1 GROUP BY j.stage ORDER BY j.stage", 1 },
	[SMQ_TRAIN_RESUMES] = { "SELECT r.name, j.name, j.stage, count(m.step) FROM jobs j JOIN runs r"
	    " ON r.id = j.run_id JOIN metrics m ON m.job_id = j.id AND m.name = 'resumed'"
	    " WHERE j.stage = 'train' GROUP BY j.id ORDER BY j.id", 3 },
	[SMQ_BAKE_ACCURACY] = { "SELECT r.name, j.name, j.stage, CASE m.name WHEN 'accuracy' THEN"
	    " 'overall' ELSE 'held_out' END, m.value FROM jobs j JOIN runs r ON r.id = j.run_id"
	    " JOIN metrics m ON m.job_id = j.id AND m.name IN ('accuracy', 'held_out_accuracy')"
	    " WHERE j.stage = 'bake' ORDER BY j.id, m.name", 4 },
	[SMQ_BAKE_BREACHES] = { "SELECT r.name, j.name, j.stage, m.value FROM jobs j JOIN runs r ON"
	    " r.id = j.run_id JOIN metrics m ON m.job_id = j.id AND m.name = 'guard_breaches'"
	    " WHERE j.stage = 'bake' ORDER BY j.id", 3 },
	[SMQ_VERDICTS] = { "SELECT r.name, j.name, v.value, 0 FROM vals v JOIN jobs j ON"
	    " j.id = v.job_id JOIN runs r ON r.id = j.run_id WHERE v.key = 'gate.verdict'"
	    " ORDER BY v.id", 3 },
	[SMQ_ARTIFACT_BYTES] = { "SELECT coalesce(sum(size), 0) FROM (SELECT max(size) AS size"
	    " FROM artifacts WHERE removed IS NULL GROUP BY path)", 0 },
	[SMQ_RUN_ARTIFACT_BYTES] = { "SELECT r.name, sum(a.size) FROM runs r JOIN (SELECT run_id,"
	    " max(size) AS size FROM artifacts WHERE removed IS NULL GROUP BY run_id, path) a ON"
	    " a.run_id = r.id GROUP BY r.id ORDER BY r.id", 1 },
	[SMQ_OUTBOX_STATES] = { "SELECT state, count(*) FROM outbox GROUP BY state", 1 },
	[SMQ_LAST_EVENT] = { "SELECT coalesce(max(id), 0) FROM events", 0 },
};

static const char *
col(sqlite3_stmt *st, int i)
{
	const char *s = (const char *)sqlite3_column_text(st, i);
	return s ? s : "";
}

int
store_ro_mrows(struct store_ro *ro, enum store_mq q, struct store_mrow **rows)
{
	sqlite3_stmt *st = store_ro_prep(ro, mq[q].sql);
	int n = 0;
	*rows = NULL;
	if (st == NULL)
		return -1;
	while (sqlite3_step(st) == SQLITE_ROW) {
		*rows = xrealloc(*rows, (size_t)n + 1, sizeof(**rows));
		struct store_mrow *r = &(*rows)[n++];
		memset(r, 0, sizeof(*r));
		for (int i = 0; i < mq[q].nl; i++)
			r->label[i] = xstrdup(col(st, i));
		r->v = sqlite3_column_double(st, mq[q].nl);
	}
	sqlite3_finalize(st);
	return n;
}

void
store_mrows_free(struct store_mrow *rows, int n)
{
	for (int k = 0; k < n; k++)
		for (int i = 0; i < 4; i++)
			free(rows[k].label[i]);
	free(rows);
}

int
store_ro_training(struct store_ro *ro, struct store_train **rows)
{
	static const char *const metric[3] = { "loss", "lr", "peak_mb" };
	sqlite3_stmt *jobs = store_ro_prep(ro, "SELECT r.name, j.name, j.id FROM jobs j JOIN runs r ON"
	    " r.id = j.run_id WHERE j.stage = 'train' AND j.state = 'running' ORDER BY j.id");
	sqlite3_stmt *last = store_ro_prep(ro, "SELECT step, value FROM metrics WHERE job_id = ? AND"
	    " name = ? ORDER BY step DESC LIMIT 1");
	sqlite3_stmt *rate = store_ro_prep(ro, "SELECT min(step), max(step), min(ts), max(ts) FROM"
	    " metrics WHERE job_id = ?1 AND name = 'loss' AND ts >= (SELECT max(ts) FROM metrics"
	    " WHERE job_id = ?1 AND name = 'loss') - 60");
	int nr = -1;
	*rows = NULL;
	if (jobs == NULL || last == NULL || rate == NULL)
		goto out;
	nr = 0;
	while (sqlite3_step(jobs) == SQLITE_ROW) {
		*rows = xrealloc(*rows, (size_t)nr + 1, sizeof(**rows));
		struct store_train *r = &(*rows)[nr++];
		memset(r, 0, sizeof(*r));
		snprintf(r->run, sizeof(r->run), "%s", col(jobs, 0));
		snprintf(r->job, sizeof(r->job), "%s", col(jobs, 1));
		sqlite3_int64 id = sqlite3_column_int64(jobs, 2);
		for (int i = 0; i < 3; i++) {
			sqlite3_reset(last);
			sqlite3_bind_int64(last, 1, id);
			sqlite3_bind_text(last, 2, metric[i], -1, SQLITE_STATIC);
			if (sqlite3_step(last) == SQLITE_ROW) {
				r->v[i] = sqlite3_column_double(last, 1);
				r->has[i] = 1;
				if (i == 0) {
					r->v[3] = sqlite3_column_double(last, 0);
					r->has[3] = 1;
				}
			}
		}
		sqlite3_reset(rate);
		sqlite3_bind_int64(rate, 1, id);
		r->sps = -1;
		if (sqlite3_step(rate) == SQLITE_ROW && sqlite3_column_type(rate, 0) != SQLITE_NULL) {
			double ds = sqlite3_column_double(rate, 1) - sqlite3_column_double(rate, 0);
			double dt = sqlite3_column_double(rate, 3) - sqlite3_column_double(rate, 2);
			if (dt > 0)
				r->sps = ds / dt;
		}
	}
out:
	sqlite3_finalize(jobs);
	sqlite3_finalize(last);
	sqlite3_finalize(rate);
	return nr;
}
