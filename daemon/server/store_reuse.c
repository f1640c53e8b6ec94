/* store_reuse.c: the store's side of reuse (reuse.c): a job's key and
 * its parts, the earlier jobs of the same key, the copy of a reused job's
 * artifact and value records, the digests of files kept with what they
 * were computed for, and what explain reads. The copies point at the same
 * files as their originals: a file lives as long as the last record that
 * references it (store_gc.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "pld.h"
#include "store_int.h"

static int
done(struct store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		log_warnx("%s: %s", __func__, sqlite3_errmsg(s->db));
		s->err = sqlite3_errcode(s->db);
		if (s->in_txn)
			s->txn_failed = 1;
	}
	store_unprep(s, st);
	return rc == SQLITE_DONE ? 0 : -1;
}

static void
col_copy(sqlite3_stmt *st, int i, char *buf, size_t len)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	snprintf(buf, len, "%s", t ? (const char *)t : "");
}

int
store_digest_get(struct store *s, const struct store_digest *d, char hex[65])
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT sha256 FROM digests WHERE path = ? AND"
	    " dev = ? AND ino = ? AND size = ? AND mtime = ? AND ctime = ?");
	int rc = -1;
	if (st != NULL) {
		sqlite3_bind_text(st, 1, d->path, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 2, d->dev);
		sqlite3_bind_int64(st, 3, d->ino);
		sqlite3_bind_int64(st, 4, d->size);
		sqlite3_bind_int64(st, 5, d->mtime);
		sqlite3_bind_int64(st, 6, d->ctime);
		if (sqlite3_step(st) == SQLITE_ROW) {
			col_copy(st, 0, hex, 65);
			rc = strlen(hex) == 64 ? 0 : -1;
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return rc;
}

int
store_digest_put(struct store *s, const struct store_digest *d, const char *hex)
{
	sqlite3_stmt *st = store_prep(s, "INSERT OR REPLACE INTO digests(path, dev, ino, size,"
	    " mtime, ctime, sha256) VALUES(?, ?, ?, ?, ?, ?, ?)");
	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, d->path, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, d->dev);
	sqlite3_bind_int64(st, 3, d->ino);
	sqlite3_bind_int64(st, 4, d->size);
	sqlite3_bind_int64(st, 5, d->mtime);
	sqlite3_bind_int64(st, 6, d->ctime);
	sqlite3_bind_text(st, 7, hex, -1, SQLITE_TRANSIENT);
	return done(s, st);
}

void
store_digest_of(struct store_digest *d, const char *path, const struct stat *sb)
{
	d->path = path;
	d->dev = (int64_t)sb->st_dev;
	d->ino = (int64_t)sb->st_ino;
	d->size = (int64_t)sb->st_size;
	d->mtime = (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
	d->ctime = (int64_t)sb->st_ctim.tv_sec * 1000000000 + sb->st_ctim.tv_nsec;
}

void
store_digest_keep(struct store *s, const char *path, const struct stat *sb,
    const struct stat *after, const char hex[65])
{
	/* The caller's stat after the read (of the descriptor it read, or
	 * through the owner's file server): the daemon never looks up an
	 * owner's path itself, which its own user may not reach. */
	if (after == NULL || after->st_dev != sb->st_dev || after->st_ino != sb->st_ino ||
	    after->st_size != sb->st_size || after->st_mtim.tv_sec != sb->st_mtim.tv_sec ||
	    after->st_mtim.tv_nsec != sb->st_mtim.tv_nsec ||
	    after->st_ctim.tv_sec != sb->st_ctim.tv_sec ||
	    after->st_ctim.tv_nsec != sb->st_ctim.tv_nsec)
		return;
	struct store_digest d;
	store_digest_of(&d, path, sb);
	store_digest_put(s, &d, hex);
}

/* The records a reuse gave job_id (when it has them), but those gc marked:
 * the file of one stays pending until gc unlinks it. */
static int
copies_drop(struct store *s, int64_t job_id)
{
	static const char *const sql[] = {
		"DELETE FROM artifacts WHERE job_id = ?1 AND removed IS NULL AND"
		" (SELECT reused_from FROM jobs WHERE id = ?1) IS NOT NULL",
		"DELETE FROM vals WHERE job_id = ?1 AND"
		" (SELECT reused_from FROM jobs WHERE id = ?1) IS NOT NULL",
	};
	for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]); i++) {
		sqlite3_stmt *st = store_prep(s, sql[i]);
		if (st == NULL)
			return -1;
		sqlite3_bind_int64(st, 1, job_id);
		if (done(s, st) == -1)
			return -1;
	}
	return 0;
}

int
store_job_key_set(struct store *s, int64_t job_id, const char *key, const char *parts,
    const char *note)
{
	if (copies_drop(s, job_id) == -1)
		return -1;
	sqlite3_stmt *st = store_prep(s, "UPDATE jobs SET key = ?, key_parts = ?, reuse_note = ?,"
	    " reused_from = NULL WHERE id = ?");
	if (st == NULL)
		return -1;
	sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, parts, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, note, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, job_id);
	return done(s, st);
}

int
store_artifact_digest_in_run(struct store *s, int64_t run_id, const char *path, char hex[65])
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT sha256 FROM artifacts WHERE run_id = ? AND"
	    " path = ? AND removed IS NULL ORDER BY id DESC LIMIT 1");
	int rc = -1;
	if (st != NULL) {
		sqlite3_bind_int64(st, 1, run_id);
		sqlite3_bind_text(st, 2, path, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(st) == SQLITE_ROW) {
			col_copy(st, 0, hex, 65);
			rc = strlen(hex) == 64 ? 0 : -1;
		}
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return rc;
}

int
store_reuse_candidates(struct store *s, const char *key, int64_t job_id,
    struct reuse_cand **out, int *n)
{
	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT j.id, r.name, j.name, r.submitter FROM jobs j"
	    " JOIN runs r ON r.id = j.run_id WHERE j.key = ? AND j.id != ? AND"
	    " j.state IN ('succeeded', 'reused') ORDER BY j.finished DESC, j.id DESC LIMIT 32");
	if (st == NULL) {
		pthread_mutex_unlock(&s->mtx);
		return -1;
	}
	sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, job_id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		*out = reallocarray(*out, (size_t)*n + 1, sizeof(**out));
		if (*out == NULL)
			fatal("reallocarray");
		struct reuse_cand *c = &(*out)[(*n)++];
		c->job_id = sqlite3_column_int64(st, 0);
		col_copy(st, 1, c->run, sizeof(c->run));
		col_copy(st, 2, c->job, sizeof(c->job));
		c->submitter = sqlite3_column_type(st, 3) == SQLITE_NULL ? -1 :
		    sqlite3_column_int64(st, 3);
	}
	store_unprep(s, st);
	pthread_mutex_unlock(&s->mtx);
	return 0;
}

int
store_job_artifact_rows(struct store *s, int64_t job_id, struct reuse_art **out, int *n)
{
	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT name, path, size, sha256, removed IS NOT NULL"
	    " FROM artifacts WHERE job_id = ? ORDER BY id");
	if (st == NULL) {
		pthread_mutex_unlock(&s->mtx);
		return -1;
	}
	sqlite3_bind_int64(st, 1, job_id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		*out = reallocarray(*out, (size_t)*n + 1, sizeof(**out));
		if (*out == NULL)
			fatal("reallocarray");
		struct reuse_art *a = &(*out)[(*n)++];
		col_copy(st, 0, a->name, sizeof(a->name));
		col_copy(st, 1, a->path, sizeof(a->path));
		a->size = sqlite3_column_int64(st, 2);
		col_copy(st, 3, a->sha256, sizeof(a->sha256));
		a->removed = sqlite3_column_int(st, 4);
	}
	store_unprep(s, st);
	pthread_mutex_unlock(&s->mtx);
	return 0;
}

int
store_reuse_copy(struct store *s, int64_t src_job, int64_t run_id, int64_t job_id)
{
	/* A copy left by an attempt the daemon did not finish goes first. */
	static const char *const sql[] = {
		"DELETE FROM artifacts WHERE job_id = ?3 AND removed IS NULL",
		"INSERT INTO artifacts(run_id, job_id, name, path, size, sha256, created)"
		" SELECT ?2, ?3, name, path, size, sha256, ?4 FROM artifacts WHERE job_id = ?1"
		" AND removed IS NULL ORDER BY id",
		"INSERT INTO vals(run_id, job_id, key, value, ts) SELECT ?2, ?3, key, value, ?4"
		" FROM vals WHERE job_id = ?1 ORDER BY id ON CONFLICT(job_id, key) DO UPDATE SET"
		" value = excluded.value, ts = excluded.ts",
		"UPDATE jobs SET reused_from = ?1 WHERE id = ?3",
	};
	for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]); i++) {
		sqlite3_stmt *st = store_prep(s, sql[i]);
		if (st == NULL)
			return -1;
		int np = sqlite3_bind_parameter_count(st);
		sqlite3_bind_int64(st, 1, src_job);
		if (np >= 2)
			sqlite3_bind_int64(st, 2, run_id);
		if (np >= 3)
			sqlite3_bind_int64(st, 3, job_id);
		if (np >= 4)
			sqlite3_bind_double(st, 4, now_wall());
		if (done(s, st) == -1)
			return -1;
	}
	return 0;
}

/* One job's row for explain: {run, job, stage, state, key, parts, note,
 * from: {run, job}}, or NULL. */
static cJSON *
job_json(struct store *s, sqlite3_stmt *st)
{
	cJSON *o = cJSON_CreateObject();
	static const char *const names[] = { "id", "run", "job", "stage", "state", "key",
	    "parts", "note", "from_run", "from_job", "submitter" };
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++) {
		if (sqlite3_column_type(st, i) == SQLITE_NULL)
			continue;
		if (i == 0 || i == 10)
			cJSON_AddNumberToObject(o, names[i], (double)sqlite3_column_int64(st, i));
		else if (i == 6) {
			cJSON *p = cJSON_Parse((const char *)sqlite3_column_text(st, i));
			if (p != NULL)
				cJSON_AddItemToObject(o, names[i], p);
		} else
			cJSON_AddStringToObject(o, names[i], (const char *)sqlite3_column_text(st, i));
	}
	return o;
}

#define EXPLAIN_COLS "j.id, r.name, j.name, j.stage, j.state, j.key, j.key_parts," \
	" j.reuse_note, fr.name, f.name, r.submitter FROM jobs j JOIN runs r ON r.id = j.run_id" \
	" LEFT JOIN jobs f ON f.id = j.reused_from LEFT JOIN runs fr ON fr.id = f.run_id"

/* The nearest earlier job of stage (see store_q_nearest); the caller
 * holds the store's lock. */
static cJSON *
nearest_locked(struct store *s, const char *stage, const char *job, int64_t not_id,
    int64_t viewer)
{
	cJSON *near = NULL;
	sqlite3_stmt *st = store_prep(s, "SELECT " EXPLAIN_COLS " WHERE j.stage = ? AND j.id != ? AND"
	    " j.key IS NOT NULL AND j.state IN ('succeeded', 'reused') AND j.finished <="
	    " coalesce((SELECT started FROM jobs WHERE id = ?), 1e300) AND " ACCESS_SQL("r")
	    " ORDER BY (j.name = :job) DESC, j.finished DESC, j.id DESC LIMIT 1");
	if (st == NULL)
		return NULL;
	sqlite3_bind_text(st, 1, stage, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, not_id);
	sqlite3_bind_int64(st, 3, not_id);
	sqlite3_bind_text(st, sqlite3_bind_parameter_index(st, ":job"), job, -1, SQLITE_TRANSIENT);
	store_bind_viewer(st, viewer);
	if (sqlite3_step(st) == SQLITE_ROW)
		near = job_json(s, st);
	store_unprep(s, st);
	return near;
}

cJSON *
store_q_nearest(struct store *s, const char *stage, const char *job, int64_t not_id,
    int64_t viewer)
{
	pthread_mutex_lock(&s->mtx);
	cJSON *near = nearest_locked(s, stage, job, not_id, viewer);
	pthread_mutex_unlock(&s->mtx);
	return near;
}

cJSON *
store_q_explain(struct store *s, const char *run, const char *job, int64_t viewer)
{
	pthread_mutex_lock(&s->mtx);
	cJSON *me = NULL, *near = NULL;
	sqlite3_stmt *st = store_prep(s, "SELECT " EXPLAIN_COLS
	    " WHERE r.name = ? AND j.name = ? AND " ACCESS_SQL("r"));
	if (st != NULL) {
		sqlite3_bind_text(st, 1, run, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 2, job, -1, SQLITE_TRANSIENT);
		store_bind_viewer(st, viewer);
		if (sqlite3_step(st) == SQLITE_ROW)
			me = job_json(s, st);
		store_unprep(s, st);
	}
	if (me == NULL) {
		pthread_mutex_unlock(&s->mtx);
		return NULL;
	}
	/* The nearest earlier job of the stage whose key is known, that the
	 * viewer may read and that did its work. */
	cJSON *id = cJSON_GetObjectItemCaseSensitive(me, "id");
	cJSON *stage = cJSON_GetObjectItemCaseSensitive(me, "stage");
	if (cJSON_IsNumber(id) && cJSON_IsString(stage))
		near = nearest_locked(s, stage->valuestring, job, (int64_t)id->valuedouble, viewer);
	pthread_mutex_unlock(&s->mtx);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "job", me);
	if (near != NULL)
		cJSON_AddItemToObject(o, "nearest", near);
	return o;
}
