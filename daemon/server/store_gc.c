/* store_gc.c: the store's side of disk accounting and gc (gc.c): the
 * runs and artifact records gc decides on, the bytes du reports, the
 * removals marked before their files are unlinked, and the files a
 * restart still has to unlink. An artifact's file lives as long as the
 * last record that references it: a record marked removed no longer
 * holds it, a record not marked does, whichever run it is of. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "pld.h"
#include "store_int.h"
#include "wire.h"

static void *
grow(void *p, size_t n, size_t sz)
{
	void *q = reallocarray(p, n, sz);
	if (q == NULL)
		fatal("reallocarray");
	return q;
}

static char *
col_dup(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	return t ? xstrdup((const char *)t) : NULL;
}

void
store_gc_free(struct gc_set *g)
{
	for (int i = 0; i < g->nruns; i++) {
		free(g->runs[i].name);
		free(g->runs[i].previous);
		free(g->runs[i].spec_text);
		free(g->runs[i].alias);
	}
	for (int i = 0; i < g->narts; i++) {
		free(g->arts[i].job);
		free(g->arts[i].name);
		free(g->arts[i].path);
	}
	free(g->runs);
	free(g->arts);
	memset(g, 0, sizeof(*g));
}

static struct gc_run *
gc_run_by_id(struct gc_set *g, int64_t id)
{
	for (int i = 0; i < g->nruns; i++)
		if (g->runs[i].id == id)
			return &g->runs[i];
	return NULL;
}

/*
 * Every run and every artifact record, for gc's plan: the runs oldest
 * first, with their state, submitter, previous run and spec text, and
 * when a gate of theirs promoted (the value gate.alias_digest, which the
 * gate stores only after the alias was copied and read back) to which
 * alias (gate.verdict's "alias"). A state not of PL_RUN_STATES is kept
 * as -1: gc keeps such a run.
 */
int
store_gc_load(struct store *s, struct gc_set *g)
{
	memset(g, 0, sizeof(*g));
	pthread_mutex_lock(&s->mtx);
	int rc = -1;
	sqlite3_stmt *st = store_prep(s, "SELECT id, name, state, submitter, created, previous,"
	    " spec_text FROM runs ORDER BY id");
	if (st == NULL)
		goto out;
	while (sqlite3_step(st) == SQLITE_ROW) {
		g->runs = grow(g->runs, (size_t)g->nruns + 1, sizeof(*g->runs));
		struct gc_run *r = &g->runs[g->nruns++];
		memset(r, 0, sizeof(*r));
		r->id = sqlite3_column_int64(st, 0);
		r->name = col_dup(st, 1);
		const char *w = (const char *)sqlite3_column_text(st, 2);
		r->state = w ? pl_run_state_find(w) : -1;
		r->submitter = sqlite3_column_type(st, 3) == SQLITE_NULL ? -1 :
		    sqlite3_column_int64(st, 3);
		r->created = sqlite3_column_double(st, 4);
		r->previous = col_dup(st, 5);
		r->spec_text = col_dup(st, 6);
		if (r->name == NULL)
			r->name = xstrdup("");
	}
	store_unprep(s, st);
	st = store_prep(s, "SELECT v.run_id, max(v.ts), (SELECT json_extract(w.value, '$.alias')"
	    " FROM vals w WHERE w.job_id = v.job_id AND w.key = 'gate.verdict'"
	    " AND json_valid(w.value)) FROM vals v WHERE v.key = 'gate.alias_digest'"
	    " GROUP BY v.run_id");
	if (st == NULL)
		goto out;
	while (sqlite3_step(st) == SQLITE_ROW) {
		struct gc_run *r = gc_run_by_id(g, sqlite3_column_int64(st, 0));
		if (r == NULL)
			continue;
		r->promoted = sqlite3_column_double(st, 1);
		r->alias = col_dup(st, 2);
		if (r->alias == NULL)
			r->alias = xstrdup("");
	}
	store_unprep(s, st);
	st = store_prep(s, "SELECT a.id, a.run_id, j.name, a.name, a.path, a.size,"
	    " a.removed IS NOT NULL FROM artifacts a LEFT JOIN jobs j ON j.id = a.job_id"
	    " ORDER BY a.id");
	if (st == NULL)
		goto out;
	while (sqlite3_step(st) == SQLITE_ROW) {
		g->arts = grow(g->arts, (size_t)g->narts + 1, sizeof(*g->arts));
		struct gc_art *a = &g->arts[g->narts++];
		memset(a, 0, sizeof(*a));
		a->id = sqlite3_column_int64(st, 0);
		a->run_id = sqlite3_column_int64(st, 1);
		a->job = col_dup(st, 2);
		a->name = col_dup(st, 3);
		a->path = col_dup(st, 4);
		a->size = sqlite3_column_int64(st, 5);
		a->removed = sqlite3_column_int(st, 6);
		if (a->job == NULL)
			a->job = xstrdup("");
		if (a->name == NULL)
			a->name = xstrdup("");
		if (a->path == NULL)
			a->path = xstrdup("");
	}
	store_unprep(s, st);
	rc = 0;
out:
	pthread_mutex_unlock(&s->mtx);
	if (rc == -1)
		store_gc_free(g);
	return rc;
}

/* Mark the records ids removed at ts by uid, in one transaction of its
 * own: committed before gc unlinks a file of theirs. The digest cache's
 * rows of the files no record holds any more go in the same one. */
int
store_gc_mark(struct store *s, const int64_t *ids, int n, double ts, int64_t uid)
{
	if (store_begin(s) == -1)
		return -1;
	store_undoable(s);
	sqlite3_stmt *st = store_prep(s, "UPDATE artifacts SET removed = ?, removed_by = ?"
	    " WHERE id = ? AND removed IS NULL");
	int rc = st == NULL ? -1 : 0;
	for (int i = 0; rc == 0 && i < n; i++) {
		sqlite3_bind_double(st, 1, ts);
		sqlite3_bind_int64(st, 2, uid);
		sqlite3_bind_int64(st, 3, ids[i]);
		if (sqlite3_step(st) != SQLITE_DONE) {
			log_warnx("%s: %s", __func__, sqlite3_errmsg(s->db));
			rc = -1;
		}
		sqlite3_reset(st);
	}
	store_unprep(s, st);
	/* The digests kept for a file no record holds any more (the file,
	 * or under a directory, its files) go with the mark: the cache
	 * would otherwise grow with every artifact ever hashed. */
	st = rc == -1 ? NULL : store_prep(s, "DELETE FROM digests WHERE EXISTS (SELECT 1"
	    " FROM artifacts a WHERE a.id = ? AND (digests.path = a.path OR"
	    " substr(digests.path, 1, length(a.path) + 1) = a.path || '/') AND NOT EXISTS"
	    " (SELECT 1 FROM artifacts b WHERE b.path = a.path AND b.removed IS NULL))");
	if (rc == 0 && st == NULL)
		rc = -1;
	for (int i = 0; rc == 0 && i < n; i++) {
		sqlite3_bind_int64(st, 1, ids[i]);
		if (sqlite3_step(st) != SQLITE_DONE) {
			log_warnx("%s: %s", __func__, sqlite3_errmsg(s->db));
			rc = -1;
		}
		sqlite3_reset(st);
	}
	if (st != NULL)
		store_unprep(s, st);
	if (rc == -1) {
		store_rollback(s);
		return -1;
	}
	return store_commit(s);
}

/* The paths of records marked removed that no record not marked
 * references: the files a gc marked and may not have unlinked yet (it
 * was killed), which a restart unlinks; with the time of the first mark
 * of each in *marked. NULL-terminated, strv_free(); free(*marked). */
char **
store_gc_pending(struct store *s, double **marked)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT a.path, min(a.removed) FROM artifacts a"
	    " WHERE a.removed IS NOT NULL AND NOT EXISTS (SELECT 1 FROM artifacts b"
	    " WHERE b.path = a.path AND b.removed IS NULL) GROUP BY a.path ORDER BY a.path");
	char **v = xcalloc(1, sizeof(*v));
	double *t = xcalloc(1, sizeof(*t));
	int n = 0;
	if (st != NULL) {
		while (sqlite3_step(st) == SQLITE_ROW) {
			v = grow(v, (size_t)n + 2, sizeof(*v));
			t = grow(t, (size_t)n + 1, sizeof(*t));
			t[n] = sqlite3_column_double(st, 1);
			v[n++] = col_dup(st, 0);
			v[n] = NULL;
		}
		store_unprep(s, st);
	}
	*marked = t;
	pthread_mutex_unlock(&s->mtx);
	return v;
}

/* Does a record not marked removed reference path? 1, 0, or -1. */
int
store_gc_path_held(struct store *s, const char *path)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, "SELECT count(*) FROM artifacts WHERE path = ?"
	    " AND removed IS NULL");
	int rc = -1;
	if (st != NULL) {
		sqlite3_bind_text(st, 1, path, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(st) == SQLITE_ROW)
			rc = sqlite3_column_int64(st, 0) > 0;
		store_unprep(s, st);
	}
	pthread_mutex_unlock(&s->mtx);
	return rc;
}

/*
 * The bytes of each run the viewer may see, newest first: the files its
 * artifact records hold (each path once, however many records of the
 * run name it), and those removed by gc. What the directories hold on
 * disk gc.c adds.
 */
#define DU_SQL \
	"WITH f AS (SELECT run_id, path, max(size) AS size, min(removed IS NOT NULL) AS gone" \
	"  FROM artifacts GROUP BY run_id, path)," \
	" t AS (SELECT run_id, sum(1 - gone) AS files, sum(CASE WHEN gone THEN 0 ELSE size END)" \
	"  AS bytes, sum(CASE WHEN gone THEN size ELSE 0 END) AS removed_bytes, sum(gone) AS removed" \
	"  FROM f GROUP BY run_id)" \
	" SELECT r.name, r.state, coalesce(t.files, 0) AS artifacts, coalesce(t.bytes, 0) AS bytes," \
	" coalesce(t.removed, 0) AS removed, coalesce(t.removed_bytes, 0) AS removed_bytes" \
	" FROM runs r LEFT JOIN t ON t.run_id = r.id"

cJSON *
store_q_du(struct store *s, int64_t viewer, const char *run)
{
	pthread_mutex_lock(&s->mtx);
	sqlite3_stmt *st = store_prep(s, DU_SQL " WHERE " ACCESS_SQL("r")
	    " AND (:run IS NULL OR r.name = :run) ORDER BY r.id DESC");
	cJSON *a = NULL;
	if (st) {
		store_bind_viewer(st, viewer);
		sqlite3_bind_text(st, sqlite3_bind_parameter_index(st, ":run"), run, -1,
		    SQLITE_TRANSIENT);
		a = store_rows(s, st, &wire_du);
	}
	pthread_mutex_unlock(&s->mtx);
	return a;
}
