/* store.c: the SQLite store, the truth of pipelined: opening, the schema
 * and its migrations, transactions, events and every write. The reads are
 * in store_query.c; what both share (struct store, the statement cache)
 * in store_int.h.
 *
 * One connection in WAL mode behind one mutex. Writers bracket their
 * changes with store_begin()/store_commit(); events inserted inside are
 * announced (to the feed) only after the COMMIT succeeded, still under the
 * lock so announcements leave in id order. Event ids are assigned here,
 * last + 1, so they are monotonic without gaps: a rolled-back transaction
 * gives its ids back.
 *
 * A transaction is whole or not at all: a write inside it that fails (the
 * disk full: SQLITE_FULL) fails the commit, which rolls back. The callers
 * have changed the scheduler's memory by then, so a failed commit calls
 * the failure hook (the daemon stops, and its restart reconciles memory
 * with the store); only a transaction whose caller changes nothing in
 * memory before the commit (a submit: store_undoable()) is given back to
 * its caller, with the error (store_error()).
 *
 * synchronous=NORMAL: in WAL mode a commit survives the death of the
 * process (kill -9) but the last commits may be lost to a power failure.
 *
 * Checkpoints run on a thread of their own, with a connection of their
 * own: a checkpoint syncs the WAL and then the database file (two fsyncs,
 * milliseconds each on a journaled file system), and on the writer's
 * thread that stalled the scheduler every thousand pages or so. The
 * writer's commit hook wakes the checkpointer once the WAL holds
 * CKPT_PAGES (16 MB: a quarter of the syncs SQLite's default of 1000
 * pages would make); past CKPT_INLINE (the checkpointer fell behind, or could
 * not start) the writer checkpoints itself, as SQLite's own automatic
 * checkpoint would.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "host.h"
#include "store_int.h"
#include "wire.h"

#define CKPT_PAGES 4000
#define CKPT_INLINE 20000

static int
wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct store *s = arg;
	if (pages < CKPT_PAGES)
		return SQLITE_OK;
	pthread_mutex_lock(&s->ckpt_mtx);
	int on = s->ckpt_on;
	if (on) {
		s->ckpt_want = 1;
		pthread_cond_signal(&s->ckpt_cv);
	}
	pthread_mutex_unlock(&s->ckpt_mtx);
	if (!on || pages >= CKPT_INLINE)
		sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	return SQLITE_OK;
}

static void *
ckpt_thread(void *arg)
{
	struct store *s = arg;
	sqlite3 *db = NULL;
	int ok = sqlite3_open_v2(s->path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
	    NULL) == SQLITE_OK &&
	    sqlite3_exec(db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) == SQLITE_OK;
	if (!ok) {
		log_warnx("%s: %s: %s; checkpoints stay with the writer", __func__, s->path,
		    db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		db = NULL;
	}
	pthread_mutex_lock(&s->ckpt_mtx);
	s->ckpt_on = ok;
	s->ckpt_ready = 1;
	pthread_cond_broadcast(&s->ckpt_cv);
	while (ok && !s->ckpt_stop) {
		if (!s->ckpt_want) {
			pthread_cond_wait(&s->ckpt_cv, &s->ckpt_mtx);
			continue;
		}
		s->ckpt_want = 0;
		pthread_mutex_unlock(&s->ckpt_mtx);
		/* PASSIVE: copies what it can, never waits for the writer. */
		int rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		if (rc != SQLITE_OK && rc != SQLITE_BUSY)
			log_warnx("%s: checkpoint: %s", __func__, sqlite3_errmsg(db));
		pthread_mutex_lock(&s->ckpt_mtx);
	}
	pthread_mutex_unlock(&s->ckpt_mtx);
	sqlite3_close(db);
	return NULL;
}

/* Start the checkpointer; without it the writer checkpoints (wal_hook). */
static void
ckpt_start(struct store *s)
{
	pthread_mutex_init(&s->ckpt_mtx, NULL);
	pthread_cond_init(&s->ckpt_cv, NULL);
	s->ckpt_on = 1;
	if (pthread_create(&s->ckpt_thr, NULL, ckpt_thread, s) != 0) {
		log_warn("%s: pthread_create; checkpoints stay with the writer", __func__);
		s->ckpt_on = 0;
		s->ckpt_stop = -1; /* no thread to join */
	} else {
		/* Its connection is open (or it gave up) before the store is
		 * used: nothing of its start races the first writes. */
		pthread_mutex_lock(&s->ckpt_mtx);
		while (!s->ckpt_ready)
			pthread_cond_wait(&s->ckpt_cv, &s->ckpt_mtx);
		pthread_mutex_unlock(&s->ckpt_mtx);
	}
	sqlite3_wal_hook(s->db, wal_hook, s);
}

static void
ckpt_stop(struct store *s)
{
	pthread_mutex_lock(&s->ckpt_mtx);
	int joinable = s->ckpt_stop == 0;
	s->ckpt_stop = 1;
	pthread_cond_signal(&s->ckpt_cv);
	pthread_mutex_unlock(&s->ckpt_mtx);
	if (joinable)
		pthread_join(s->ckpt_thr, NULL);
	pthread_cond_destroy(&s->ckpt_cv);
	pthread_mutex_destroy(&s->ckpt_mtx);
}

/* Migrations: migrations[i] takes the schema from version i to i + 1. */
static const char *const migrations[] = {
	/* 0 -> 1 */
	"CREATE TABLE runs(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL,"
	"  state TEXT NOT NULL, spec_path TEXT, spec_text TEXT, previous TEXT,"
	"  description TEXT, created REAL, finished REAL, message TEXT);"
	"CREATE TABLE jobs(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),"
	"  name TEXT NOT NULL, stage TEXT NOT NULL, seq INTEGER, state TEXT NOT NULL,"
	"  attempts INTEGER NOT NULL DEFAULT 0, lost INTEGER NOT NULL DEFAULT 0,"
	"  retry_base INTEGER NOT NULL DEFAULT 0,"
	"  next_at REAL, started REAL, finished REAL, message TEXT,"
	"  progress_done REAL, progress_total REAL, progress_unit TEXT,"
	"  UNIQUE(run_id, name));"
	"CREATE TABLE attempts(id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES jobs(id),"
	"  n INTEGER NOT NULL, state TEXT NOT NULL, started REAL, finished REAL,"
	"  result INTEGER, message TEXT, UNIQUE(job_id, n));"
	"CREATE TABLE procs(id INTEGER PRIMARY KEY, attempt_id INTEGER NOT NULL REFERENCES attempts(id),"
	"  name TEXT NOT NULL, executor TEXT, dir TEXT, pid INTEGER, starttime INTEGER,"
	"  ext_id TEXT, state INTEGER NOT NULL DEFAULT 0, events_offset INTEGER NOT NULL DEFAULT 0,"
	"  exited INTEGER, status INTEGER, signal INTEGER, end_class TEXT, reason TEXT,"
	"  started REAL, finished REAL, UNIQUE(attempt_id, name));"
	"CREATE TABLE events(id INTEGER PRIMARY KEY, ts REAL NOT NULL, run TEXT, job TEXT,"
	"  type TEXT NOT NULL, data TEXT);"
	"CREATE INDEX events_run ON events(run, id);"
	"CREATE TABLE artifacts(id INTEGER PRIMARY KEY, run_id INTEGER, job_id INTEGER,"
	"  name TEXT NOT NULL, path TEXT NOT NULL, size INTEGER, sha256 TEXT, created REAL);"
	"CREATE INDEX artifacts_run ON artifacts(run_id, name);"
	"CREATE TABLE metrics(job_id INTEGER NOT NULL, name TEXT NOT NULL, step INTEGER NOT NULL,"
	"  value REAL, ts REAL, PRIMARY KEY(job_id, name, step));"
	"CREATE TABLE vals(id INTEGER PRIMARY KEY, run_id INTEGER, job_id INTEGER,"
	"  key TEXT NOT NULL, value TEXT, ts REAL, UNIQUE(job_id, key));"
	"CREATE INDEX vals_key ON vals(key, id);",
	/* 1 -> 2: the notification outbox (notify.c), and the store's own
	 * random name, the first part of every idempotency key. */
	"CREATE TABLE outbox(id INTEGER PRIMARY KEY, event_id INTEGER, kind TEXT NOT NULL,"
	"  run TEXT, job TEXT, target TEXT NOT NULL, key TEXT UNIQUE NOT NULL, body TEXT NOT NULL,"
	"  attempts INTEGER NOT NULL DEFAULT 0, next_at REAL NOT NULL, state TEXT NOT NULL,"
	"  error TEXT, created REAL, delivered REAL);"
	"CREATE INDEX outbox_due ON outbox(state, next_at);"
	"CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT);"
	"INSERT INTO meta(k, v) VALUES('instance', lower(hex(randomblob(8))));",
	/* 2 -> 3: who a run's jobs run as (pipelined(8) USERS); NULL for the
	 * runs before, which ran as the daemon's user. */
	"ALTER TABLE runs ADD COLUMN owner TEXT;",
	/* 3 -> 4: an attempt's deadline (wall clock), stored when it starts, so
	 * that a restarted daemon keeps the job's timeout instead of counting
	 * it from the restart. */
	"ALTER TABLE attempts ADD COLUMN deadline REAL;",
	/* 4 -> 5: who submitted a run (SO_PEERCRED's uid), whose run it is
	 * (access.c). The runs before take their owner's uid; those without
	 * an owner were root's or the daemon's user's, and stay NULL: only
	 * those who see every run see them. */
	"ALTER TABLE runs ADD COLUMN submitter INTEGER;"
	"UPDATE runs SET submitter = CAST(substr(owner, 1, instr(owner, ':') - 1) AS INTEGER)"
	"  WHERE owner IS NOT NULL AND instr(owner, ':') > 1;",
	/* 5 -> 6: an artifact's file removed by gc (gc.c): when it was marked
	 * (before its file was unlinked, so a restart finishes the removal)
	 * and by whose uid. The record, its size and its digest stay. The
	 * path's index finds the other records of a file: it lives as long
	 * as the last record that references it. */
	"ALTER TABLE artifacts ADD COLUMN removed REAL;"
	"ALTER TABLE artifacts ADD COLUMN removed_by INTEGER;"
	"CREATE INDEX artifacts_path ON artifacts(path);",
	/* 6 -> 7: reuse (reuse.c). A job's key, the sha256 of the canonical
	 * text of its parts (kept as JSON for explain), why an earlier job of
	 * the same key was not taken, and the job whose work a reused one
	 * took. digests: a file's sha256 with what it was computed for
	 * (device, inode, size, times), so that an unchanged file is not
	 * read again. */
	"ALTER TABLE jobs ADD COLUMN key TEXT;"
	"ALTER TABLE jobs ADD COLUMN key_parts TEXT;"
	"ALTER TABLE jobs ADD COLUMN reuse_note TEXT;"
	"ALTER TABLE jobs ADD COLUMN reused_from INTEGER;"
	"CREATE INDEX jobs_key ON jobs(key);"
	"CREATE TABLE digests(path TEXT PRIMARY KEY, dev INTEGER, ino INTEGER, size INTEGER,"
	"  mtime INTEGER, ctime INTEGER, sha256 TEXT NOT NULL);",
	/* 7 -> 8: revisions. A spec submitted again under a run's name makes
	 * the run's next revision: a row of its own, named NAME@N (the first
	 * keeps the bare NAME, so the names events, the outbox, directories
	 * and the other tables hold stay as they are), with base NAME and
	 * revision N; the runs before are revision 1 of their own names. */
	"ALTER TABLE runs ADD COLUMN base TEXT;"
	"ALTER TABLE runs ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;"
	"UPDATE runs SET base = name;"
	"CREATE UNIQUE INDEX runs_revision ON runs(base, revision);",
	/* 8 -> 9: a sweep's jobs (spec_sweep.c): a variant job's values
	 * ("lora_r=64"), and every job's expanded after list, which the
	 * status page draws the DAG from (the stored spec text has the
	 * sweep unexpanded). NULL for the jobs of a run without a sweep. */
	"ALTER TABLE jobs ADD COLUMN variant TEXT; ALTER TABLE jobs ADD COLUMN deps TEXT;",
};
#define NMIGRATIONS ((int)(sizeof(migrations) / sizeof(migrations[0])))

/* A statement failed: inside a transaction, the transaction fails. */
static void
failed(struct store *s)
{
	s->err = sqlite3_errcode(s->db);
	snprintf(s->errmsg, sizeof(s->errmsg), "%s", sqlite3_errmsg(s->db));
	if (s->in_txn)
		s->txn_failed = 1;
}

static int
exec_sql(struct store *s, const char *sql)
{
	char *err = NULL;
	if (sqlite3_exec(s->db, sql, NULL, NULL, &err) != SQLITE_OK) {
		log_warnx("%s: %s", __func__, err ? err : "?");
		sqlite3_free(err);
		return -1;
	}
	return 0;
}

/* A statement for sql, from the cache when it is there and idle; give it
 * back with store_unprep(). Callers hold s->mtx. */
sqlite3_stmt *
store_prep(struct store *s, const char *sql)
{
	for (int i = 0; i < s->ncache; i++)
		if (s->cache[i].sql == sql && !sqlite3_stmt_busy(s->cache[i].st) &&
		    strcmp(sqlite3_sql(s->cache[i].st), sql) == 0)
			return s->cache[i].st;
	int keep = s->ncache < (int)(sizeof(s->cache) / sizeof(s->cache[0]));
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v3(s->db, sql, -1, keep ? SQLITE_PREPARE_PERSISTENT : 0, &st,
	    NULL) != SQLITE_OK) {
		log_warnx("%s: %s: %s", __func__, sqlite3_errmsg(s->db), sql);
		return NULL;
	}
	if (keep) {
		s->cache[s->ncache].sql = sql;
		s->cache[s->ncache++].st = st;
	}
	return st;
}

void
store_unprep(struct store *s, sqlite3_stmt *st)
{
	if (st == NULL)
		return;
	for (int i = 0; i < s->ncache; i++) {
		if (s->cache[i].st == st) {
			sqlite3_reset(st);
			sqlite3_clear_bindings(st);
			return;
		}
	}
	sqlite3_finalize(st);
}

/* Run one cached statement that returns no rows (BEGIN, COMMIT, ...). */
static int
exec_cached(struct store *s, const char *sql)
{
	sqlite3_stmt *st = store_prep(s, sql);
	if (st == NULL)
		return -1;
	int rc = sqlite3_step(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		log_warnx("%s: %s: %s", __func__, sql, sqlite3_errmsg(s->db));
	store_unprep(s, st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -1;
}

static int
user_version(struct store *s)
{
	sqlite3_stmt *st = store_prep(s, "PRAGMA user_version");
	int v = -1;
	if (st && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	store_unprep(s, st);
	return v;
}

int
store_open(struct store **sp, const char *path)
{
	struct store *s = xcalloc(1, sizeof(*s));
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&s->mtx, &a);
	pthread_mutexattr_destroy(&a);
	s->pending_tail = &s->pending;
	if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
		log_warnx("%s: %s: %s", __func__, path, s->db ? sqlite3_errmsg(s->db) : "?");
		sqlite3_close(s->db);
		free(s);
		return -1;
	}
	/* Only the daemon reads the store (its state directory is searchable
	 * by the users jobs run as): 0600, which SQLite gives its -wal and
	 * -shm files too. */
	static const char *const sfx[] = { "", "-wal", "-shm" };
	for (int i = 0; i < 3; i++) {
		char f[PATH_MAX + 8];
		snprintf(f, sizeof(f), "%s%s", path, sfx[i]);
		if (chmod(f, 0600) == -1 && errno != ENOENT)
			log_warn("%s: chmod %s", __func__, f);
	}
	sqlite3_busy_timeout(s->db, 10000);
	if (exec_sql(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
	    " PRAGMA foreign_keys=ON;") == -1)
		goto fail;
	int v = user_version(s);
	if (v < 0)
		goto fail;
	if (v > NMIGRATIONS) {
		log_warnx("%s: %s has schema version %d, newer than this pipelined (%d)",
		    __func__, path, v, NMIGRATIONS);
		goto fail;
	}
	for (; v < NMIGRATIONS; v++) {
		char pragma[64];
		snprintf(pragma, sizeof(pragma), "PRAGMA user_version=%d;", v + 1);
		if (exec_sql(s, "BEGIN IMMEDIATE") == -1)
			goto fail;
		if (exec_sql(s, migrations[v]) == -1 || exec_sql(s, pragma) == -1) {
			exec_sql(s, "ROLLBACK");
			goto fail;
		}
		if (exec_sql(s, "COMMIT") == -1)
			goto fail;
		log_info("%s: %s migrated to schema version %d", __func__, path, v + 1);
	}
	sqlite3_stmt *st = store_prep(s, "SELECT coalesce(max(id), 0) FROM events");
	if (st == NULL || sqlite3_step(st) != SQLITE_ROW) {
		store_unprep(s, st);
		goto fail;
	}
	s->last_event = sqlite3_column_int64(st, 0);
	store_unprep(s, st);
	st = store_prep(s, "SELECT v FROM meta WHERE k = 'instance'");
	if (st == NULL || sqlite3_step(st) != SQLITE_ROW) {
		store_unprep(s, st);
		goto fail;
	}
	snprintf(s->instance, sizeof(s->instance), "%s", (const char *)sqlite3_column_text(st, 0));
	store_unprep(s, st);
	s->path = xstrdup(path);
	ckpt_start(s);
	*sp = s;
	return 0;
fail:
	sqlite3_close(s->db);
	free(s);
	return -1;
}

void
store_close(struct store *s)
{
	if (s == NULL)
		return;
	ckpt_stop(s);
	free(s->path);
	for (int i = 0; i < s->ncache; i++)
		sqlite3_finalize(s->cache[i].st);
	sqlite3_close(s->db);
	pthread_mutex_destroy(&s->mtx);
	free(s);
}

void *
store_db(struct store *s)
{
	return s->db;
}

int
store_integrity_ok(struct store *s)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "PRAGMA integrity_check");
	int ok = st && sqlite3_step(st) == SQLITE_ROW &&
	    strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
	store_unprep(s, st);
	pthread_mutex_unlock(&s->mtx);
	return ok;
}

int64_t
store_last_event(struct store *s)
{
	pthread_mutex_lock(&s->mtx);
	int64_t v = s->last_event;
	pthread_mutex_unlock(&s->mtx);
	return v;
}

void
store_set_announce(struct store *s, store_announce_fn fn)
{
	s->announce = fn;
}

int
store_begin(struct store *s)
{
	pthread_mutex_lock(&s->mtx);
	if (s->in_txn++ > 0)
		return 0; /* nested: joins the outer transaction */
	s->txn_first_event = s->last_event;
	s->txn_failed = s->txn_undoable = 0;
	/* A ROLLBACK that itself failed (out of memory, I/O error) can leave
	 * a transaction open: end it before starting ours. */
	if (!sqlite3_get_autocommit(s->db))
		exec_sql(s, "ROLLBACK");
	if (exec_cached(s, "BEGIN IMMEDIATE") == -1) {
		s->in_txn--;
		pthread_mutex_unlock(&s->mtx);
		return -1;
	}
	return 0;
}

static void
pending_free(struct store *s, int announce)
{
	struct ann *a = s->pending, *n;
	for (; a; a = n) {
		n = a->next;
		if (announce && s->announce)
			s->announce(a->id, a->run, a->line);
		free(a->run);
		free(a->line);
		free(a);
	}
	s->pending = NULL;
	s->pending_tail = &s->pending;
}

void
store_set_fail(struct store *s, store_fail_fn fn)
{
	s->fail = fn;
}

void
store_fail(struct store *s)
{
	if (s->fail != NULL)
		s->fail(s->errmsg);
}

void
store_undoable(struct store *s)
{
	s->txn_undoable = 1;
}

int
store_error(struct store *s, char *msg, size_t len)
{
	snprintf(msg, len, "%s", s->errmsg[0] ? s->errmsg : "store error");
	return s->err == SQLITE_FULL ? ENOSPC : EIO;
}

int
store_commit(struct store *s)
{
	if (--s->in_txn > 0) {
		pthread_mutex_unlock(&s->mtx);
		return 0;
	}
	if (s->txn_failed || exec_cached(s, "COMMIT") == -1) {
		if (!s->txn_failed)
			failed(s);
		/* SQLite may have rolled back already (SQLITE_FULL at COMMIT). */
		if (!sqlite3_get_autocommit(s->db))
			exec_sql(s, "ROLLBACK");
		s->last_event = s->txn_first_event;
		pending_free(s, 0);
		s->outbox_new = 0;
		if (!s->txn_undoable && s->fail != NULL)
			s->fail(s->errmsg);
		pthread_mutex_unlock(&s->mtx);
		return -1;
	}
	pending_free(s, 1);
	int wake = s->outbox_new && s->outbox_wake != NULL;
	s->outbox_new = 0;
	pthread_mutex_unlock(&s->mtx);
	if (wake)
		s->outbox_wake();
	return 0;
}

void
store_rollback(struct store *s)
{
	if (--s->in_txn > 0) {
		pthread_mutex_unlock(&s->mtx);
		return;
	}
	if (!sqlite3_get_autocommit(s->db))
		exec_sql(s, "ROLLBACK");
	s->last_event = s->txn_first_event;
	pending_free(s, 0);
	s->outbox_new = 0;
	pthread_mutex_unlock(&s->mtx);
}

/*
 * The outbox rows of one event, one per target, in the event's
 * transaction. The body is what a receiver gets (wire.c builds it); the
 * key, the store's instance, the event id and the target's index, is the
 * same on every try.
 */
static int
outbox_add(struct store *s, int64_t id, double ts, const char *kind, const char *run,
    const char *job, const cJSON *data, const char *const *targets)
{
	sqlite3_stmt *st = store_prep(s, "INSERT INTO outbox(event_id, kind, run, job, target, key,"
	    " body, next_at, state, created) VALUES(?,?,?,?,?,?,?,?,'pending',?)");
	if (st == NULL)
		return -1;
	int rc = 0;
	for (int i = 0; targets && targets[i] && rc == 0; i++) {
		char key[96];
		snprintf(key, sizeof(key), "%s-%lld-%d", s->instance, (long long)id, i);
		char *body = wire_outbox_body(kind, key, id, ts, run, job, data);
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_text(st, 2, kind, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 3, run, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 4, job, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 5, targets[i], -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 6, key, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 7, body, -1, SQLITE_TRANSIENT);
		sqlite3_bind_double(st, 8, ts);
		sqlite3_bind_double(st, 9, ts);
		if (sqlite3_step(st) != SQLITE_DONE) {
			log_warnx("%s: %s", __func__, sqlite3_errmsg(s->db));
			failed(s);
			rc = -1;
		}
		sqlite3_reset(st);
		free(body);
	}
	store_unprep(s, st);
	if (rc == 0)
		s->outbox_new = 1;
	return rc;
}

void
store_set_outbox(struct store *s, store_outbox_fn fn, void (*wake)(void))
{
	s->outbox_fn = fn;
	s->outbox_wake = wake;
}

int
store_outbox_result(struct store *s, int64_t id, int delivered, int attempts,
    const char *error, double next_at, int give_up)
{
	if (store_begin(s) == -1)
		return -1;
	sqlite3_stmt *st = store_prep(s, "UPDATE outbox SET state = ?, attempts = ?, error = ?,"
	    " next_at = ?, delivered = ? WHERE id = ?");
	if (st == NULL) {
		store_rollback(s);
		return -1;
	}
	sqlite3_bind_text(st, 1, delivered ? "delivered" : give_up ? "failed" : "pending", -1,
	    SQLITE_STATIC);
	sqlite3_bind_int(st, 2, attempts);
	if (delivered)
		sqlite3_bind_null(st, 3);
	else
		sqlite3_bind_text(st, 3, error, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(st, 4, next_at);
	if (delivered)
		sqlite3_bind_double(st, 5, now_wall());
	else
		sqlite3_bind_null(st, 5);
	sqlite3_bind_int64(st, 6, id);
	int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
	if (rc == -1)
		log_warnx("%s: %s", __func__, sqlite3_errmsg(s->db));
	store_unprep(s, st);
	if (rc == -1) {
		store_rollback(s);
		return -1;
	}
	return store_commit(s);
}

int64_t
store_event(struct store *s, const char *run, const char *job, const char *type, cJSON *data)
{
	double ts = now_wall();
	char *dtext = data ? cJSON_PrintUnformatted(data) : NULL;
	int64_t id = s->last_event + 1;
	sqlite3_stmt *st = store_prep(s, "INSERT INTO events(id, ts, run, job, type, data) VALUES(?,?,?,?,?,?)");
	int rc = -1;
	if (st) {
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_double(st, 2, ts);
		sqlite3_bind_text(st, 3, run, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 4, job, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 5, type, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 6, dtext, -1, SQLITE_TRANSIENT);
		rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
		if (rc == -1) {
			log_warnx("%s: %s", __func__, sqlite3_errmsg(s->db));
			failed(s);
		}
		store_unprep(s, st);
	}
	const char *const *targets = NULL;
	const char *kind = rc == 0 && s->outbox_fn ? s->outbox_fn(type, data, &targets) : NULL;
	if (kind != NULL && outbox_add(s, id, ts, kind, run, job, data, targets) == -1)
		rc = -1;
	if (rc == 0) {
		s->last_event = id;
		struct ann *a = xcalloc(1, sizeof(*a));
		a->id = id;
		a->run = run ? xstrdup(run) : NULL;
		a->line = wire_event_line(id, ts, run, job, type, data);
		*s->pending_tail = a;
		s->pending_tail = &a->next;
	}
	free(dtext);
	cJSON_Delete(data);
	return rc == 0 ? id : -1;
}

/* Bind helpers: b(st, "ssi", ...) would be neater but these are few. */
static int
step_done(struct store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		log_warnx("store: %s", sqlite3_errmsg(s->db));
		failed(s);
		store_unprep(s, st);
		return -1;
	}
	store_unprep(s, st);
	return 0;
}

int
store_run_create(struct store *s, const struct spec *spec, const char *base, int revision,
    int64_t *id)
{
	sqlite3_stmt *st = store_prep(s, "INSERT INTO runs(name, state, spec_path, spec_text, previous,"
	    " description, created, owner, submitter, base, revision)"
	    " VALUES(?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?)");
	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, spec->name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, spec->path, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, spec->text, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, spec->previous, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 5, spec->run ? spec_get(spec->run, "description") : NULL, -1,
	    SQLITE_TRANSIENT);
	sqlite3_bind_double(st, 6, now_wall());
	sqlite3_bind_text(st, 7, spec->owner, -1, SQLITE_TRANSIENT);
	if (spec->submitter >= 0)
		sqlite3_bind_int64(st, 8, spec->submitter);
	else
		sqlite3_bind_null(st, 8);
	sqlite3_bind_text(st, 9, base, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 10, revision);
	if (step_done(s, st) == -1)
		return -1;
	*id = sqlite3_last_insert_rowid(s->db);
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "spec", spec->path);
	cJSON_AddNumberToObject(d, "jobs", spec->njobs);
	if (revision > 1)
		cJSON_AddNumberToObject(d, "revision", revision);
	if (spec->previous)
		cJSON_AddStringToObject(d, "previous", spec->previous);
	return store_event(s, spec->name, NULL, "run.submitted", d) < 0 ? -1 : 0;
}

int
store_run_state(struct store *s, int64_t run_id, const char *run, enum pl_run_state rs,
    const char *message)
{
	const char *state = pl_run_state_name(rs);
	int final = pl_run_state_final(rs);
	sqlite3_stmt *st = store_prep(s, "UPDATE runs SET state = ?, message = ?, finished = ? WHERE id = ?");
	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, state, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, message, -1, SQLITE_TRANSIENT);
	if (final)
		sqlite3_bind_double(st, 3, now_wall());
	else
		sqlite3_bind_null(st, 3);
	sqlite3_bind_int64(st, 4, run_id);
	if (step_done(s, st) == -1)
		return -1;
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "state", state);
	if (message)
		cJSON_AddStringToObject(d, "message", message);
	return store_event(s, run, NULL, "run.state", d) < 0 ? -1 : 0;
}

int
store_job_create(struct store *s, int64_t run_id, const char *name, const char *stage,
    int seq, const char *variant, const char *deps, int64_t *id)
{
	sqlite3_stmt *st = store_prep(s, "INSERT INTO jobs(run_id, name, stage, seq, state,"
	    " variant, deps) VALUES(?, ?, ?, ?, 'pending', ?, ?)");
	if (st == NULL)
		return -1;
	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, stage, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 4, seq);
	if (variant)
		sqlite3_bind_text(st, 5, variant, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, 5);
	if (deps)
		sqlite3_bind_text(st, 6, deps, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, 6);
	if (step_done(s, st) == -1)
		return -1;
	*id = sqlite3_last_insert_rowid(s->db);
	return 0;
}

int
store_job_state(struct store *s, int64_t job_id, const char *run, const char *job,
    enum pl_job_state js, int attempt, const char *message)
{
	const char *sql, *state = pl_job_state_name(js);
	if (js == PLJ_running)
		sql = "UPDATE jobs SET state = ?, message = ?, started = coalesce(started, ?),"
		    " finished = NULL WHERE id = ?";
	else if (js == PLJ_pending || js == PLJ_retrying)
		sql = "UPDATE jobs SET state = ?, message = ?, finished = NULL, started = started + 0 * ? WHERE id = ?";
	else
		sql = "UPDATE jobs SET state = ?, message = ?, finished = ? WHERE id = ?";
	sqlite3_stmt *st = store_prep(s, sql);
	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, state, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, message, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(st, 3, now_wall());
	sqlite3_bind_int64(st, 4, job_id);
	if (step_done(s, st) == -1)
		return -1;
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "state", state);
	if (attempt > 0)
		cJSON_AddNumberToObject(d, "attempt", attempt);
	if (message)
		cJSON_AddStringToObject(d, "message", message);
	return store_event(s, run, job, "job.state", d) < 0 ? -1 : 0;
}

int
store_job_progress(struct store *s, int64_t job_id, double done, double total, const char *unit)
{
	sqlite3_stmt *st = store_prep(s, "UPDATE jobs SET progress_done = ?, progress_total = ?,"
	    " progress_unit = ? WHERE id = ?");
	if (st == NULL)
		return -1;
	sqlite3_bind_double(st, 1, done);
	sqlite3_bind_double(st, 2, total);
	sqlite3_bind_text(st, 3, unit, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, job_id);
	return step_done(s, st);
}

int
store_job_next_at(struct store *s, int64_t job_id, double at)
{
	sqlite3_stmt *st = store_prep(s, "UPDATE jobs SET next_at = ? WHERE id = ?");
	if (st == NULL)
		return -1;
	sqlite3_bind_double(st, 1, at);
	sqlite3_bind_int64(st, 2, job_id);
	return step_done(s, st);
}

int
store_job_counters(struct store *s, int64_t job_id, int attempts, int lost, int retry_base)
{
	sqlite3_stmt *st = store_prep(s, "UPDATE jobs SET attempts = ?, lost = ?, retry_base = ? WHERE id = ?");
	if (st == NULL)
		return -1;
	sqlite3_bind_int(st, 1, attempts);
	sqlite3_bind_int(st, 2, lost);
	sqlite3_bind_int(st, 3, retry_base);
	sqlite3_bind_int64(st, 4, job_id);
	return step_done(s, st);
}

int
store_attempt_start(struct store *s, int64_t job_id, int n, double deadline, int64_t *id)
{
	sqlite3_stmt *st = store_prep(s, "INSERT INTO attempts(job_id, n, state, started, deadline)"
	    " VALUES(?, ?, 'running', ?, ?)");
	if (st == NULL)
		return -1;
	sqlite3_bind_int64(st, 1, job_id);
	sqlite3_bind_int(st, 2, n);
	sqlite3_bind_double(st, 3, now_wall());
	if (deadline > 0)
		sqlite3_bind_double(st, 4, deadline);
	else
		sqlite3_bind_null(st, 4);
	if (step_done(s, st) == -1)
		return -1;
	*id = sqlite3_last_insert_rowid(s->db);
	return 0;
}

/* An attempt's end under the word state. */
static int
attempt_end(struct store *s, int64_t attempt_id, const char *state, int result,
    const char *message)
{
	sqlite3_stmt *st = store_prep(s, "UPDATE attempts SET state = ?, result = ?, message = ?,"
	    " finished = ? WHERE id = ?");
	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, state, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, result);
	sqlite3_bind_text(st, 3, message, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(st, 4, now_wall());
	sqlite3_bind_int64(st, 5, attempt_id);
	return step_done(s, st);
}

int
store_attempt_end(struct store *s, int64_t attempt_id, enum pl_job_state state, int result,
    const char *message)
{
	return attempt_end(s, attempt_id, pl_job_state_name(state), result, message);
}

int
store_attempt_lost(struct store *s, int64_t attempt_id, int result, const char *message)
{
	return attempt_end(s, attempt_id, "lost", result, message);
}

int
store_metric(struct store *s, int64_t job_id, const char *name, int64_t step, double value)
{
	/* One row per (job, name, step): a step replayed after a resume
	 * replaces its earlier value, so the curve has every step once (G30). */
	sqlite3_stmt *st = store_prep(s, "INSERT OR REPLACE INTO metrics(job_id, name, step, value, ts)"
	    " VALUES(?, ?, ?, ?, ?)");
	if (st == NULL)
		return -1;
	sqlite3_bind_int64(st, 1, job_id);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, step);
	sqlite3_bind_double(st, 4, value);
	sqlite3_bind_double(st, 5, now_wall());
	return step_done(s, st);
}

int
store_artifact(struct store *s, int64_t run_id, int64_t job_id, const char *name,
    const char *path, uint64_t size, const char *sha256)
{
	sqlite3_stmt *st = store_prep(s, "INSERT INTO artifacts(run_id, job_id, name, path, size,"
	    " sha256, created) VALUES(?, ?, ?, ?, ?, ?, ?)");
	if (st == NULL)
		return -1;
	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_int64(st, 2, job_id);
	sqlite3_bind_text(st, 3, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, path, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)size);
	sqlite3_bind_text(st, 6, sha256, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(st, 7, now_wall());
	return step_done(s, st);
}

int
store_value_set(struct store *s, int64_t run_id, int64_t job_id, const char *key,
    const char *value)
{
	sqlite3_stmt *st = store_prep(s, "INSERT INTO vals(run_id, job_id, key, value, ts)"
	    " VALUES(?, ?, ?, ?, ?) ON CONFLICT(job_id, key) DO UPDATE SET"
	    " value = excluded.value, ts = excluded.ts");
	if (st == NULL)
		return -1;
	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_int64(st, 2, job_id);
	sqlite3_bind_text(st, 3, key, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, value, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(st, 5, now_wall());
	return step_done(s, st);
}

static int
proc_insert(struct store *s, int64_t attempt_id, const char *name, const char *executor,
    const char *dir, double started, int64_t *id)
{
	sqlite3_stmt *st = store_prep(s, "INSERT INTO procs(attempt_id, name, executor, dir, state, started)"
	    " VALUES(?, ?, ?, ?, 0, ?)");
	if (st == NULL)
		return -1;
	sqlite3_bind_int64(st, 1, attempt_id);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, executor, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, dir, -1, SQLITE_TRANSIENT);
	sqlite3_bind_double(st, 5, started);
	if (step_done(s, st) == -1)
		return -1;
	*id = sqlite3_last_insert_rowid(s->db);
	return 0;
}

int
store_proc_insert(struct store *s, int64_t attempt_id, const char *name, const char *executor,
    const char *dir, int64_t *id)
{
	return proc_insert(s, attempt_id, name, executor, dir, now_wall(), id);
}

int
store_proc_update(struct store *s, struct proc *p, int64_t events_offset)
{
	/* A process started by a run's shim gets its row with its first
	 * events or its end (its shim.json is the record until then):
	 * inserted here, then updated like any other. */
	if (p->id == 0 && proc_insert(s, p->attempt_id, p->name, p->ex ? p->ex->name : "local",
	    p->dir, p->started, &p->id) == -1)
		return -1;
	sqlite3_stmt *st = store_prep(s, "UPDATE procs SET pid = ?, starttime = ?, ext_id = ?, state = ?,"
	    " events_offset = ?, exited = ?, status = ?, signal = ?, end_class = ?, reason = ?,"
	    " finished = CASE WHEN ? >= 3 THEN ? ELSE finished END WHERE id = ?");
	if (st == NULL)
		return -1;
	sqlite3_bind_int(st, 1, p->pid);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)p->starttime);
	sqlite3_bind_text(st, 3, p->ext_id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 4, p->state);
	sqlite3_bind_int64(st, 5, events_offset);
	sqlite3_bind_int(st, 6, p->exited);
	sqlite3_bind_int(st, 7, p->status);
	sqlite3_bind_int(st, 8, p->sig);
	sqlite3_bind_text(st, 9, p->end_class, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 10, p->reason, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 11, p->state);
	sqlite3_bind_double(st, 12, now_wall());
	sqlite3_bind_int64(st, 13, p->id);
	return step_done(s, st);
}
