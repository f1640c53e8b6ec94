/* test_core_store.c: the store (store.c). Schema and migrations, event ids
 * gapless through rollbacks, and fault injection: SQLite's allocator
 * replaced by a countdown allocator that fails the Nth allocation, and a
 * file-size limit standing in for a full disk. After every injected
 * failure the store must be consistent: integrity_check ok, event ids
 * 1..N without a gap, and every committed event announced exactly once.
 * The wire layer (wire.c, store_wire.c): a row's fields are named by its
 * row type, not by its columns. States cross the store's boundary as
 * proto.h's enums. The read-only handle (store_ro.h) the page and
 * /metrics read through. */
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "pld.h"
#include "server.h"
#include "metrics.h"
#include "store_int.h"
#include "runner.h"

static int64_t announced, last_announced;
static int out_of_order;
static char last_line[1024];    /* the newest feed line announced */

static void
on_announce(int64_t id, const char *run, const char *line)
{
	if (id != last_announced + 1)
		out_of_order++;
	last_announced = id;
	announced++;
	snprintf(last_line, sizeof(last_line), "%s", line);
}

/* The countdown allocator: after `countdown` allocations, fail. */
static sqlite3_mem_methods real;
static volatile long countdown = -1;

static void *
c_malloc(int n)
{
	if (countdown == 0)
		return NULL;
	if (countdown > 0)
		countdown--;
	return real.xMalloc(n);
}

static void *
c_realloc(void *p, int n)
{
	if (countdown == 0)
		return NULL;
	if (countdown > 0)
		countdown--;
	return real.xRealloc(p, n);
}

static int64_t
count_events(struct store *s)
{
	sqlite3_stmt *st;
	int64_t n = -1;
	if (sqlite3_prepare_v2(store_db(s), "SELECT count(*) - coalesce(max(id),0) FROM events",
	    -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return n; /* 0 when gapless */
}

static int
txn(struct store *s, int nevents)
{
	if (store_begin(s) == -1)
		return -1;
	for (int i = 0; i < nevents; i++) {
		cJSON *d = cJSON_CreateObject();
		cJSON_AddNumberToObject(d, "i", i);
		if (store_event(s, "r", "j", "job.test", d) < 0) {
			store_rollback(s);
			return -1;
		}
	}
	return store_commit(s);
}

/* The directory of the cases' stores (made in main). */
static char dir[] = "/tmp/test_store.XXXXXX";

/* A new store of the case's own, dir/NAME.db, announcing to on_announce;
 * its path in path. */
static struct store *
open_store(const char *name, char *path, size_t len)
{
	struct store *s;

	snprintf(path, len, "%s/%s.db", dir, name);
	if (store_open(&s, path) != 0)
		return NULL;
	store_set_announce(s, on_announce);
	return s;
}

/* The store's schema version (PRAGMA user_version). */
static int
schema_of(struct store *s)
{
	sqlite3_stmt *st;
	int v = -1;
	if (sqlite3_prepare_v2(store_db(s), "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* s closed and its file, path, opened again by this build (migrated):
 * the new store, or NULL. */
static struct store *
reopen(struct store *s, const char *path)
{
	store_close(s);
	return store_open(&s, path) == 0 ? s : NULL;
}

/* A new store is migrated to the schema this build writes. */
static void
case_migrations(void)
{
	char path[256];
	struct store *s = open_store("migrations", path, sizeof(path));

	CHECK(s != NULL);
	if (s == NULL)
		return;
	CHECK(schema_of(s) == STORE_SCHEMA_VERSION);
	store_close(s);
}

/* What schema 8 -> 9 added, undone. */
#define BACK_TO_8 "ALTER TABLE jobs DROP COLUMN variant; ALTER TABLE jobs DROP COLUMN deps;"

/* What schema 7 -> 8 added, undone too: a store as the build before wrote it. */
#define BACK_TO_7 BACK_TO_8 " DROP INDEX runs_revision; ALTER TABLE runs DROP COLUMN base;" \
	" ALTER TABLE runs DROP COLUMN revision;"

/* What schema 6 -> 7 added, undone too. */
#define BACK_TO_6 BACK_TO_7 " DROP INDEX jobs_key; ALTER TABLE jobs DROP COLUMN key;" \
	" ALTER TABLE jobs DROP COLUMN key_parts; ALTER TABLE jobs DROP COLUMN reuse_note;" \
	" ALTER TABLE jobs DROP COLUMN reused_from; DROP TABLE digests;"

/* Schema 6 -> 7: a store of version 6 with a succeeded job opens
 * migrated, the job without a key; then a key recorded finds it, a
 * digest kept is found only for the same device, inode, size and times,
 * and a reuse copies the job's artifact records that are not removed and
 * its values to another job, noting where they came from; that job's
 * next key drops the copies. */
static void
case_migration_reuse(void)
{
	char path[256];
	struct store *s = open_store("migration_reuse", path, sizeof(path));
	sqlite3_stmt *st;

	CHECK(s != NULL);
	if (s == NULL)
		return;
	CHECK(sqlite3_exec(store_db(s), BACK_TO_6
	    " INSERT INTO runs(id, name, state, submitter) VALUES(1, 'r1', 'succeeded', 1000);"
	    " INSERT INTO runs(id, name, state, submitter) VALUES(2, 'r2', 'running', 1000);"
	    " INSERT INTO jobs(id, run_id, name, stage, state, finished)"
	    "  VALUES(1, 1, 'make', 'exec', 'succeeded', 10);"
	    " INSERT INTO jobs(id, run_id, name, stage, state) VALUES(2, 2, 'make', 'exec', 'running');"
	    " INSERT INTO artifacts(run_id, job_id, name, path, size, sha256, created)"
	    "  VALUES(1, 1, 'out', '/x/runs/r1/make/work/out', 6, 'ab', 1);"
	    " INSERT INTO artifacts(run_id, job_id, name, path, size, sha256, created)"
	    "  VALUES(1, 1, 'old', '/x/runs/r1/make/work/old', 6, 'cd', 1);"
	    " UPDATE artifacts SET removed = 5 WHERE name = 'old';"
	    " INSERT INTO vals(run_id, job_id, key, value, ts) VALUES(1, 1, 'k', 'v', 1);"
	    " PRAGMA user_version = 6;", NULL, NULL, NULL) == SQLITE_OK);
	CHECK((s = reopen(s, path)) != NULL);
	if (s == NULL)
		return;
	CHECK(schema_of(s) == STORE_SCHEMA_VERSION && STORE_SCHEMA_VERSION >= 7);
	CHECK(sqlite3_prepare_v2(store_db(s), "SELECT key IS NULL, reused_from IS NULL FROM jobs"
	    " WHERE id = 1", -1, &st, NULL) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1 &&
	    sqlite3_column_int(st, 1) == 1);
	sqlite3_finalize(st);

	struct reuse_cand *c = NULL;
	int n = -1;
	CHECK(store_reuse_candidates(s, "K", 2, &c, &n) == 0 && n == 0);
	free(c);
	CHECK(store_begin(s) == 0 && store_job_key_set(s, 1, "K", "{}", NULL) == 0 &&
	    store_job_key_set(s, 2, "K", "{}", NULL) == 0 && store_commit(s) == 0);
	CHECK(store_reuse_candidates(s, "K", 2, &c, &n) == 0 && n == 1 && c[0].job_id == 1 &&
	    strcmp(c[0].run, "r1") == 0 && c[0].submitter == 1000);
	free(c);
	struct reuse_art *a = NULL;
	CHECK(store_job_artifact_rows(s, 1, &a, &n) == 0 && n == 2 && a[1].removed == 1 &&
	    a[0].size == 6 && strcmp(a[0].sha256, "ab") == 0);
	free(a);

	struct store_digest d = { .path = "/x/f", .dev = 1, .ino = 2, .size = 3, .mtime = 4,
	    .ctime = 5 };
	char hex[65];
	CHECK(store_digest_get(s, &d, hex) == -1);
	char h64[65];
	memset(h64, 'e', 64);
	h64[64] = '\0';
	CHECK(store_begin(s) == 0 && store_digest_put(s, &d, h64) == 0 && store_commit(s) == 0);
	CHECK(store_digest_get(s, &d, hex) == 0 && strcmp(hex, h64) == 0);
	d.ctime = 6;
	CHECK(store_digest_get(s, &d, hex) == -1);

	/* Twice, as after a restart in between: one copy. */
	for (int i = 0; i < 2; i++)
		CHECK(store_begin(s) == 0 && store_reuse_copy(s, 1, 2, 2) == 0 &&
		    store_commit(s) == 0);
	CHECK(sqlite3_prepare_v2(store_db(s), "SELECT group_concat(name || ':' || path || ':' ||"
	    " sha256), (SELECT group_concat(key || '=' || value) FROM vals WHERE job_id = 2),"
	    " (SELECT reused_from FROM jobs WHERE id = 2) FROM artifacts WHERE job_id = 2",
	    -1, &st, NULL) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW);
	CHECK(strcmp((const char *)sqlite3_column_text(st, 0), "out:/x/runs/r1/make/work/out:ab")
	    == 0);
	CHECK(strcmp((const char *)sqlite3_column_text(st, 1), "k=v") == 0);
	CHECK(sqlite3_column_int64(st, 2) == 1);
	sqlite3_finalize(st);
	/* The job runs again (its key recorded anew): the copies go, the
	 * original's records stay. */
	CHECK(store_begin(s) == 0 && store_job_key_set(s, 2, "K2", "{}", NULL) == 0 &&
	    store_commit(s) == 0);
	CHECK(sqlite3_prepare_v2(store_db(s), "SELECT (SELECT count(*) FROM artifacts WHERE"
	    " job_id = 2), (SELECT count(*) FROM vals WHERE job_id = 2), (SELECT reused_from"
	    " IS NULL FROM jobs WHERE id = 2), (SELECT count(*) FROM artifacts WHERE job_id = 1)",
	    -1, &st, NULL) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 0 &&
	    sqlite3_column_int(st, 1) == 0 && sqlite3_column_int(st, 2) == 1 &&
	    sqlite3_column_int(st, 3) == 2);
	sqlite3_finalize(st);
	store_close(s);
}

/* Schema 5 -> 6: a store of version 5 with an artifact record opens
 * migrated: the record kept, not removed, its path indexed; gc's mark
 * sets removed and removed_by, store_gc_pending() then names the file
 * until another record that is not removed references it. */
static void
case_migration_removed(void)
{
	char path[256];
	struct store *s = open_store("migration_removed", path, sizeof(path));
	sqlite3_stmt *st;

	CHECK(s != NULL);
	if (s == NULL)
		return;
	/* Back to version 5, as a store written by the build before. */
	CHECK(sqlite3_exec(store_db(s), BACK_TO_6 "DROP INDEX artifacts_path;"
	    " ALTER TABLE artifacts DROP COLUMN removed; ALTER TABLE artifacts DROP COLUMN removed_by;"
	    " INSERT INTO artifacts(run_id, job_id, name, path, size, sha256, created)"
	    "  VALUES(1, 1, 'gguf', '/x/runs/r/j/work/m.gguf', 42, 'ab', 1);"
	    " PRAGMA user_version = 5;", NULL, NULL, NULL) == SQLITE_OK);
	CHECK((s = reopen(s, path)) != NULL);
	if (s == NULL)
		return;
	CHECK(schema_of(s) == STORE_SCHEMA_VERSION && STORE_SCHEMA_VERSION >= 6);
	CHECK(sqlite3_prepare_v2(store_db(s), "SELECT id, size, sha256, removed IS NULL,"
	    " removed_by IS NULL FROM artifacts", -1, &st, NULL) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW);
	int64_t id = sqlite3_column_int64(st, 0);
	CHECK(sqlite3_column_int64(st, 1) == 42 && sqlite3_column_int(st, 3) == 1 &&
	    sqlite3_column_int(st, 4) == 1);
	sqlite3_finalize(st);
	CHECK(sqlite3_prepare_v2(store_db(s), "SELECT 1 FROM sqlite_master WHERE type = 'index'"
	    " AND name = 'artifacts_path'", -1, &st, NULL) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW);
	sqlite3_finalize(st);

	double *mk = NULL;
	char **v = store_gc_pending(s, &mk);
	free(mk);
	CHECK(v != NULL && v[0] == NULL);
	strv_free(v);
	CHECK(store_gc_path_held(s, "/x/runs/r/j/work/m.gguf") == 1);
	/* The digest cache: the file's row and those of files under it go
	 * with the mark; a neighbour whose name only starts the same stays. */
	const char *dp[] = { "/x/runs/r/j/work/m.gguf", "/x/runs/r/j/work/m.gguf/a",
		"/x/runs/r/j/work/m.gguf2" };
	char h64[65], hex[65];
	memset(h64, 'e', 64);
	h64[64] = '\0';
	for (int i = 0; i < 3; i++) {
		struct store_digest d = { .path = dp[i], .dev = 1, .ino = 2 + i, .size = 3 };
		CHECK(store_begin(s) == 0 && store_digest_put(s, &d, h64) == 0 && store_commit(s) == 0);
	}
	CHECK(store_gc_mark(s, &id, 1, 1234.5, 1000) == 0);
	for (int i = 0; i < 3; i++) {
		struct store_digest d = { .path = dp[i], .dev = 1, .ino = 2 + i, .size = 3 };
		CHECK((store_digest_get(s, &d, hex) == 0) == (i == 2));
	}
	CHECK(store_gc_path_held(s, "/x/runs/r/j/work/m.gguf") == 0);
	v = store_gc_pending(s, &mk);
	CHECK(v != NULL && v[0] != NULL && strcmp(v[0], "/x/runs/r/j/work/m.gguf") == 0 &&
	    v[1] == NULL && mk[0] == 1234.5);
	free(mk);
	strv_free(v);
	CHECK(sqlite3_prepare_v2(store_db(s), "SELECT removed, removed_by, size, sha256"
	    " FROM artifacts", -1, &st, NULL) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW);
	CHECK(sqlite3_column_double(st, 0) == 1234.5 && sqlite3_column_int64(st, 1) == 1000 &&
	    sqlite3_column_int64(st, 2) == 42 &&
	    strcmp((const char *)sqlite3_column_text(st, 3), "ab") == 0);
	sqlite3_finalize(st);
	/* Another record of the same file, not removed, holds it. */
	CHECK(sqlite3_exec(store_db(s), "INSERT INTO artifacts(run_id, job_id, name, path, size)"
	    " VALUES(2, 2, 'gguf', '/x/runs/r/j/work/m.gguf', 42)", NULL, NULL, NULL) == SQLITE_OK);
	v = store_gc_pending(s, &mk);
	CHECK(v != NULL && v[0] == NULL);
	free(mk);
	strv_free(v);
	store_close(s);
}

/* Schema 7 -> 8: a store of version 7 opens migrated, each run revision
 * 1 of its own name; a run's newest revision is found by its name, a
 * reference NAME@N finds revision N (NAME@1 the run named NAME), NAME
 * the newest and, for previous, the newest that succeeded (the newest
 * when none has); a second revision of a number taken is refused. */
static void
case_migration_revisions(void)
{
	char path[256], name[128];
	struct store *s = open_store("migration_revisions", path, sizeof(path));
	struct run_rev rr;

	CHECK(s != NULL);
	if (s == NULL)
		return;
	CHECK(sqlite3_exec(store_db(s), BACK_TO_7
	    " INSERT INTO runs(id, name, state, submitter) VALUES(1, 'r1', 'succeeded', 1000);"
	    " INSERT INTO runs(id, name, state) VALUES(2, 'r2', 'failed');"
	    " PRAGMA user_version = 7;", NULL, NULL, NULL) == SQLITE_OK);
	CHECK((s = reopen(s, path)) != NULL);
	if (s == NULL)
		return;
	CHECK(schema_of(s) == STORE_SCHEMA_VERSION && STORE_SCHEMA_VERSION >= 8);
	CHECK(store_run_latest(s, "r1", &rr) == 0 && strcmp(rr.name, "r1") == 0 &&
	    rr.revision == 1 && rr.state == PLR_succeeded && rr.submitter == 1000);
	CHECK(store_run_latest(s, "r2", &rr) == 0 && rr.submitter == -1 && rr.state == PLR_failed);
	CHECK(store_run_latest(s, "r3", &rr) == -1);
	CHECK(store_run_resolve(s, "r1@1", 0, name, sizeof(name)) == 0 && strcmp(name, "r1") == 0);
	CHECK(store_run_resolve(s, "r1@2", 0, name, sizeof(name)) == -1);
	CHECK(store_run_resolve(s, "r1@x", 0, name, sizeof(name)) == -1);
	CHECK(store_run_resolve(s, "r2", 1, name, sizeof(name)) == 0 && strcmp(name, "r2") == 0);
	CHECK(sqlite3_exec(store_db(s),
	    " INSERT INTO runs(name, state, base, revision) VALUES('r1@2', 'failed', 'r1', 2);"
	    " INSERT INTO runs(name, state, base, revision) VALUES('r1@3', 'succeeded', 'r1', 3);"
	    " INSERT INTO runs(name, state, base, revision) VALUES('r1@4', 'cancelled', 'r1', 4);",
	    NULL, NULL, NULL) == SQLITE_OK);
	CHECK(store_run_latest(s, "r1", &rr) == 0 && strcmp(rr.name, "r1@4") == 0 &&
	    rr.revision == 4 && rr.submitter == -1);
	CHECK(store_run_resolve(s, "r1", 0, name, sizeof(name)) == 0 && strcmp(name, "r1@4") == 0);
	CHECK(store_run_resolve(s, "r1", 1, name, sizeof(name)) == 0 && strcmp(name, "r1@3") == 0);
	CHECK(store_run_resolve(s, "r1@2", 1, name, sizeof(name)) == 0 && strcmp(name, "r1@2") == 0);
	CHECK(sqlite3_exec(store_db(s), "INSERT INTO runs(name, state, base, revision)"
	    " VALUES('r1@x', 'failed', 'r1', 3)", NULL, NULL, NULL) != SQLITE_OK);
	CHECK(store_run_id(s, "r2") == 2 && store_run_id(s, "r9") == 0);
	store_close(s);
}

/* NAME and NAME@N are references to a run; nothing else is. */
static void
case_run_refs(void)
{
	char base[128], name[128];
	int rev;

	CHECK(run_ref_split("rel-v18", base, sizeof(base), &rev) == 0 &&
	    strcmp(base, "rel-v18") == 0 && rev == 0);
	CHECK(run_ref_split("rel-v18@12", base, sizeof(base), &rev) == 0 &&
	    strcmp(base, "rel-v18") == 0 && rev == 12);
	static const char *const bad[] = { "", "@2", "r@", "r@0", "r@01", "r@-1", "r@2x", "r@2@3",
	    "a b@2", ".r@2", "r@99999999999", NULL };
	for (int i = 0; bad[i] != NULL; i++)
		CHECK(run_ref_split(bad[i], base, sizeof(base), &rev) == -1 && !valid_run_ref(bad[i]),
		    "%s taken for a reference", bad[i]);
	run_rev_name("r", 1, name, sizeof(name));
	CHECK(strcmp(name, "r") == 0);
	run_rev_name("r", 2, name, sizeof(name));
	CHECK(strcmp(name, "r@2") == 0);
}

/* Event ids are gapless and announced once; a rolled-back transaction
 * gives its ids back. */
static void
case_event_ids(void)
{
	char path[256];
	struct store *s = open_store("event_ids", path, sizeof(path));

	CHECK(s != NULL);
	if (s == NULL)
		return;
	CHECK(txn(s, 3) == 0);
	CHECK(store_last_event(s) == 3 && announced == 3);
	store_begin(s);
	store_event(s, "r", "j", "job.test", NULL);
	store_event(s, "r", "j", "job.test", NULL);
	store_rollback(s);
	CHECK(store_last_event(s) == 3 && announced == 3);
	CHECK(txn(s, 1) == 0 && store_last_event(s) == 4);
	store_close(s);
}

static void
case_alloc_faults(void)
{
	char path[256];
	struct store *s = open_store("alloc_faults", path, sizeof(path));

	CHECK(s != NULL);
	if (s == NULL)
		return;
	/* Allocation failures at every point of a transaction. */
	int failures = 0, successes = 0;
	for (long n = 0; n < 400; n++) {
		int64_t before = store_last_event(s), ann_before = announced;
		countdown = n;
		int rc = txn(s, 3);
		countdown = -1;
		if (rc == 0) {
			successes++;
			if (store_last_event(s) != before + 3 || announced != ann_before + 3) {
				CHECK(!"a committed transaction did not announce its 3 events");
				break;
			}
		} else {
			failures++;
			if (announced != ann_before) {
				CHECK(!"a failed transaction announced events");
				break;
			}
		}
		if (count_events(s) != 0) {
			CHECK(!"event ids have a gap after an injected allocation failure");
			break;
		}
	}
	printf("allocation faults: %d failed transactions, %d succeeded\n", failures, successes);
	CHECK(failures > 0 && successes > 0);
	CHECK(store_integrity_ok(s));
	CHECK(out_of_order == 0);
	store_close(s);
}

static void
case_checkpoints(void)
{
	char path[256];
	struct store *s = open_store("checkpoints", path, sizeof(path));

	CHECK(s != NULL);
	if (s == NULL)
		return;
	/* Checkpoints: the checkpointer thread copies the WAL into the
	 * database file once the WAL passes its threshold (4000 pages), long
	 * before the writer would do it itself (20000): the file grows while
	 * the writer only commits. */
	struct stat sb;
	char wal[300];
	snprintf(wal, sizeof(wal), "%s-wal", path);
	CHECK(stat(path, &sb) == 0);
	off_t before_ckpt = sb.st_size;
	for (int i = 0; i < 2500; i++) {
		cJSON *d = cJSON_CreateObject();
		char pad[3000];
		memset(pad, 'c', sizeof(pad) - 1);
		pad[sizeof(pad) - 1] = '\0';
		cJSON_AddStringToObject(d, "pad", pad);
		CHECK(store_begin(s) == 0);
		CHECK(store_event(s, "r", "j", "job.ckpt", d) > 0);
		CHECK(store_commit(s) == 0);
	}
	int grew = 0;
	for (int i = 0; i < 200 && !grew; i++) {
		CHECK(stat(path, &sb) == 0);
		grew = sb.st_size > before_ckpt + 4 * 1024 * 1024;
		if (!grew)
			usleep(50000);
	}
	struct stat wb;
	CHECK(stat(wal, &wb) == 0);
	printf("checkpoints: database file %lld -> %lld bytes, WAL %lld bytes\n",
	    (long long)before_ckpt, (long long)sb.st_size, (long long)wb.st_size);
	CHECK(grew);
	CHECK(wb.st_size < 20000LL * 4200);
	CHECK(store_integrity_ok(s));
	store_close(s);
}

static void
case_full_disk(void)
{
	char path[256];
	struct store *s = open_store("full_disk", path, sizeof(path));

	CHECK(s != NULL);
	if (s == NULL)
		return;
	/* A "full disk": the file-size limit stops writes (SIGXFSZ ignored,
	 * so write() fails with EFBIG). */
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit rl = { 0 }, old;
	getrlimit(RLIMIT_FSIZE, &old);
	rl.rlim_cur = 64 * 1024;
	rl.rlim_max = old.rlim_max;
	setrlimit(RLIMIT_FSIZE, &rl);
	int disk_fail = 0;
	for (int i = 0; i < 200; i++) {
		int64_t ann_before = announced;
		cJSON *big = cJSON_CreateObject();
		char pad[4000];
		memset(pad, 'p', sizeof(pad) - 1);
		pad[sizeof(pad) - 1] = '\0';
		cJSON_AddStringToObject(big, "pad", pad);
		if (store_begin(s) == -1) {
			cJSON_Delete(big);
			disk_fail++;
			continue;
		}
		if (store_event(s, "r", "j", "job.big", big) < 0) {
			store_rollback(s);
			disk_fail++;
			continue;
		}
		if (store_commit(s) == -1) {
			disk_fail++;
			CHECK(announced == ann_before);
		}
	}
	setrlimit(RLIMIT_FSIZE, &old);
	printf("full disk: %d writes refused\n", disk_fail);
	CHECK(disk_fail > 0);
	CHECK(txn(s, 2) == 0);          /* space again: writes work */
	CHECK(count_events(s) == 0);
	CHECK(store_integrity_ok(s));
	int64_t last = store_last_event(s);
	store_close(s);
	/* Reopen: the same last id. */
	CHECK(store_open(&s, path) == 0);
	CHECK(store_last_event(s) == last);
	CHECK(store_integrity_ok(s));
	store_close(s);
}

/* A value row: the job's column (job_name) is "job" on the wire; a
 * column its row type does not name is left out, not put on the wire
 * under its SQL name. */
static void
case_wire_rows(void)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *wst = NULL;
	CHECK(sqlite3_open(":memory:", &db) == SQLITE_OK);
	CHECK(sqlite3_prepare_v2(db, "SELECT 'train' AS job_name, 'k' AS key, 7 AS value,"
	    " 1.5 AS ts, 'x' AS spec_secret", -1, &wst, NULL) == SQLITE_OK);
	cJSON *a = wire_rows(wst, &wire_value);
	sqlite3_finalize(wst);
	cJSON *o = cJSON_GetArrayItem(a, 0);
	CHECK(cJSON_GetArraySize(a) == 1);
	CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "job")),
	    "train") == 0);
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "value")) == 7);
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "ts")) == 1.5);
	CHECK(!cJSON_HasObjectItem(o, "job_name") && !cJSON_HasObjectItem(o, "spec_secret"));
	CHECK(cJSON_GetArraySize(o) == 4);
	cJSON_Delete(a);
	sqlite3_close(db);
}

/* States cross the store's boundary as proto.h's enums: spelled in
  * the rows and the feed lines, read back, a stored word of neither
  * list refused. A rejected run has ended: the metrics' count of runs
  * not yet ended follows the list's finality. */
static void
case_states(void)
{
	char path[256];
	struct store *s = open_store("states", path, sizeof(path));

	CHECK(s != NULL);
	if (s == NULL)
		return;
	sqlite3 *db = store_db(s);
	store_set_announce(s, on_announce);
	CHECK(sqlite3_exec(db, "INSERT INTO runs(name, state) VALUES('vocab', 'running');"
	    " INSERT INTO jobs(run_id, name, stage, state) SELECT id, 'j', 'exec', 'pending'"
	    " FROM runs WHERE name = 'vocab'", NULL, NULL, NULL) == SQLITE_OK);
	int64_t rid = store_run_id(s, "vocab");
	struct job_row jr;
	CHECK(rid > 0 && store_job_get(s, rid, "j", &jr) == 0 && jr.state == PLJ_pending);
	CHECK(store_run_state_get(s, "vocab") == PLR_running);
	CHECK(metrics_init(path) == 0);
	size_t len;
	char *text = metrics_render(&len);
	CHECK(text != NULL && strstr(text, "\npipelined_open_runs 1\n") != NULL);
	free(text);
	CHECK(store_begin(s) == 0);
	CHECK(store_job_state(s, jr.id, "vocab", "j", PLJ_skipped, 0, "dependency a failed") == 0);
	CHECK(store_commit(s) == 0);
	CHECK(strstr(last_line, "\"job\":\"j\",\"type\":\"job.state\",\"state\":\"skipped\"") != NULL);
	CHECK(store_begin(s) == 0);
	CHECK(store_run_state(s, rid, "vocab", PLR_rejected, NULL) == 0);
	CHECK(store_commit(s) == 0);
	CHECK(strstr(last_line, "\"type\":\"run.state\",\"state\":\"rejected\"") != NULL);
	CHECK(store_job_get(s, rid, "j", &jr) == 0 && jr.state == PLJ_skipped);
	CHECK(store_run_state_get(s, "vocab") == PLR_rejected);
	text = metrics_render(&len);
	CHECK(text != NULL && strstr(text, "\npipelined_open_runs 0\n") != NULL &&
	    strstr(text, "pipelined_runs{state=\"rejected\"} 1\n") != NULL);
	free(text);
	CHECK(sqlite3_exec(db, "UPDATE runs SET state = 'paused' WHERE name = 'vocab';"
	    " UPDATE jobs SET state = 'paused' WHERE name = 'j'", NULL, NULL, NULL) == SQLITE_OK);
	CHECK(store_run_state_get(s, "vocab") == -1);
	CHECK(store_job_get(s, rid, "j", &jr) == -1);
	CHECK(store_run_state_get(s, "nosuch") == -1);
	store_close(s);
}

/* The read-only handle (store_ro.h), the readers' only way into the
 * store: a run's submitter, the runs a viewer may see (:viewer bound as
 * access.c's number), /metrics' rows by query and the running train jobs'
 * figures, the page's curves by their wire names; a store that cannot be
 * opened is NULL, and the handle writes nothing. */
static void
case_store_ro(void)
{
	char path[256];
	struct store *s = open_store("ro", path, sizeof(path));

	CHECK(s != NULL);
	if (s == NULL)
		return;
	CHECK(sqlite3_exec(store_db(s), "INSERT INTO runs(name, state, submitter)"
	    " VALUES('theirs', 'running', NULL), ('mine', 'running', 1234);"
	    " INSERT INTO jobs(id, run_id, name, stage, seq, state) VALUES"
	    " (10, 2, 'tr', 'train', 1, 'running'), (11, 2, 'a', 'exec', 2, 'succeeded'),"
	    " (12, 1, 'b', 'exec', 1, 'succeeded'), (13, 1, 'c', 'exec', 2, 'failed');"
	    " INSERT INTO metrics(job_id, name, step, value, ts) VALUES"
	    " (10, 'loss', 10, 2.0, 100), (10, 'loss', 40, 1.5, 130), (10, 'lr', 40, 0.5, 130),"
	    " (10, 'peak_mb', 40, 256, 130), (10, 'other', 50, 9, 131)",
	    NULL, NULL, NULL) == SQLITE_OK);
	CHECK(store_ro_open("/nonexistent/ro.db", "test") == NULL);
	struct store_ro *ro = store_ro_open(path, "test");
	CHECK(ro != NULL);
	if (ro == NULL) {
		store_close(s);
		return;
	}
	store_ro_begin(ro);
	int64_t sub = 0;
	CHECK(store_ro_submitter(ro, "mine", &sub) == 1 && sub == 1234);
	CHECK(store_ro_submitter(ro, "theirs", &sub) == 1 && sub == -1);
	CHECK(store_ro_submitter(ro, "nosuch", &sub) == 0);
	cJSON *a = store_ro_runs(ro, ACCESS_ALL);
	CHECK(cJSON_GetArraySize(a) == 2);
	cJSON_Delete(a);
	a = store_ro_runs(ro, 1234);
	CHECK(cJSON_GetArraySize(a) == 1 && strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetArrayItem(a, 0), "name")), "mine") == 0);
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(a, 0),
	    "jobs")) == 2);
	cJSON_Delete(a);
	a = store_ro_runs(ro, 999);
	CHECK(cJSON_GetArraySize(a) == 0);
	cJSON_Delete(a);
	struct store_mrow *rows;
	int n = store_ro_mrows(ro, SMQ_JOB_STATES, &rows);
	CHECK(n == 3);
	if (n == 3) {
		CHECK(strcmp(rows[0].label[0], "exec") == 0 && strcmp(rows[0].label[1], "failed") == 0 &&
		    rows[0].v == 1);
		CHECK(strcmp(rows[1].label[1], "succeeded") == 0 && rows[1].v == 2);
		CHECK(strcmp(rows[2].label[0], "train") == 0 && rows[2].label[2] == NULL);
	}
	store_mrows_free(rows, n);
	struct store_train *tr;
	n = store_ro_training(ro, &tr);
	CHECK(n == 1);
	if (n == 1) {
		CHECK(strcmp(tr[0].run, "mine") == 0 && strcmp(tr[0].job, "tr") == 0);
		CHECK(tr[0].has[0] && tr[0].v[0] == 1.5 && tr[0].has[1] && tr[0].v[1] == 0.5);
		CHECK(tr[0].has[2] && tr[0].v[2] == 256 && tr[0].has[3] && tr[0].v[3] == 40);
		CHECK(tr[0].sps == 1);  /* 30 steps in 30 seconds */
	}
	free(tr);
	a = store_ro_curves(ro, "mine", "tr");
	CHECK(cJSON_GetArraySize(a) == 3);  /* loss twice, lr; not the others */
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(a, 1),
	    "step")) == 40);
	cJSON_Delete(a);
	CHECK(store_ro_last_event(ro, NULL) == store_last_event(s));
	store_ro_end(ro);
	store_ro_close(ro);
	store_close(s);
}

/* A value's history is of the runs the viewer may read: a member's
 * stage (a bake looking for earlier results) sees its own runs' values
 * and no other member's; root's view, every run's, newest first. */
static void
case_value_history_viewer(void)
{
	char path[256];
	struct store *s = open_store("history", path, sizeof(path));

	CHECK(s != NULL);
	if (s == NULL)
		return;
	CHECK(sqlite3_exec(store_db(s), "INSERT INTO runs(id, name, state, submitter) VALUES"
	    " (1, 'mine', 'succeeded', 1234), (2, 'theirs', 'succeeded', 999),"
	    " (3, 'roots', 'succeeded', NULL);"
	    " INSERT INTO jobs(id, run_id, name, stage, state) VALUES (1, 1, 'bake', 'bake',"
	    " 'succeeded'), (2, 2, 'bake', 'bake', 'succeeded'), (3, 3, 'bake', 'bake', 'succeeded');"
	    " INSERT INTO vals(run_id, job_id, key, value, ts) VALUES (1, 1, 'case/a', 'm', 1),"
	    " (2, 2, 'case/a', 't', 2), (3, 3, 'case/a', 'r', 3), (1, 1, 'other', 'x', 4)",
	    NULL, NULL, NULL) == SQLITE_OK);
	char *h = store_value_history(s, "case/a", 0, 1234);
	cJSON *a = cJSON_Parse(h);
	CHECK(cJSON_GetArraySize(a) == 1 && strcmp(cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(a, 0), "run")), "mine") == 0);
	cJSON_Delete(a);
	free(h);
	h = store_value_history(s, "case/a", 0, ACCESS_ALL);
	a = cJSON_Parse(h);
	CHECK(cJSON_GetArraySize(a) == 3 && strcmp(cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(a, 0), "value")), "r") == 0);
	cJSON_Delete(a);
	free(h);
	h = store_value_history(s, "case/a", 2, ACCESS_ALL);
	a = cJSON_Parse(h);
	CHECK(cJSON_GetArraySize(a) == 2);
	cJSON_Delete(a);
	free(h);
	store_close(s);
}

/* Schema 8 -> 9: a store of version 8 opens migrated, its jobs without a
 * sweep's values or after list; a job created with them keeps them. */
static void
case_migration_sweep(void)
{
	char path[256];
	struct store *s = open_store("migration_sweep", path, sizeof(path));
	sqlite3_stmt *st;
	int64_t id;

	CHECK(s != NULL);
	if (s == NULL)
		return;
	CHECK(sqlite3_exec(store_db(s), BACK_TO_8
	    " INSERT INTO runs(id, name, state, submitter) VALUES(1, 'r1', 'running', 1000);"
	    " INSERT INTO jobs(id, run_id, name, stage, state) VALUES(1, 1, 'make', 'exec', 'running');"
	    " PRAGMA user_version = 8;", NULL, NULL, NULL) == SQLITE_OK);
	CHECK((s = reopen(s, path)) != NULL);
	if (s == NULL)
		return;
	CHECK(schema_of(s) == 9);
	CHECK(store_job_create(s, 1, "train-r64", "train", 1, "lora_r=64", "probe", &id) == 0);
	CHECK(sqlite3_prepare_v2(store_db(s), "SELECT group_concat(name || ':' ||"
	    " coalesce(variant, '-') || ':' || coalesce(deps, '-'), ' ') FROM jobs", -1, &st,
	    NULL) == SQLITE_OK);
	CHECK(sqlite3_step(st) == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(st, 0),
	    "make:-:- train-r64:lora_r=64:probe") == 0);
	sqlite3_finalize(st);
	store_close(s);
}

static const struct unit_case cases[] = {
	UNIT_CASE(migrations),
	UNIT_CASE(migration_removed),
	UNIT_CASE(migration_reuse),
	UNIT_CASE(migration_revisions),
	UNIT_CASE(run_refs),
	UNIT_CASE(migration_sweep),
	UNIT_CASE(event_ids),
	UNIT_CASE(alloc_faults),
	UNIT_CASE(checkpoints),
	UNIT_CASE(full_disk),
	UNIT_CASE(wire_rows),
	UNIT_CASE(states),
	UNIT_CASE(store_ro),
	UNIT_CASE(value_history_viewer),
	UNIT_END
};

/* SQLite's allocator is replaced before its first use, so every case
 * inherits the countdown allocator. */
int
main(int argc, char **argv)
{
	sqlite3_mem_methods m;
	char cmd[300];
	int rc;

	if (mkdtemp(dir) == NULL)
		return 1;
	sqlite3_config(SQLITE_CONFIG_GETMALLOC, &real);
	m = real;
	m.xMalloc = c_malloc;
	m.xRealloc = c_realloc;
	if (sqlite3_config(SQLITE_CONFIG_MALLOC, &m) != SQLITE_OK) {
		fprintf(stderr, "test_core_store: cannot replace SQLite's allocator\n");
		return 1;
	}
	log_init(1, LOG_LVL_ERR, NULL);
	rc = unit_main(argc, argv, cases);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return rc;
}
