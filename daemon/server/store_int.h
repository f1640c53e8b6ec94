/*
 * store_int.h: the store's inside, shared by its files: store.c (schema
 * and migrations, the connection, transactions, events and every write),
 * store_query.c (the reads: the control socket's and the scheduler's
 * queries), store_gc.c and store_reuse.c, store_wire.c (rows as the
 * wire's JSON), store_ro.c (the read-only handle and the status page's
 * reads) and store_metrics.c (GET /metrics' reads). Nothing else includes
 * it: no SQL and no sqlite3 call is made outside these files.
 */
#ifndef PL_STORE_INT_H
#define PL_STORE_INT_H

#include <pthread.h>

#include <sqlite3.h>

#include "pld.h"
#include "access.h"
#include "store.h"
#include "store_ro.h"
#include "wire.h"

/* The condition a query on runs r adds, with store_bind_viewer()'s
 * :viewer (access.c's viewer: ACCESS_ALL binds NULL). A query using it
 * names its other parameters too, or numbers them all before it: SQLite
 * gives :viewer the slot after the highest number seen before it, which a
 * later ?N could take again. */
#define ACCESS_SQL(r) "(:viewer IS NULL OR " r ".submitter = :viewer)"

struct store {
	sqlite3 *db;
	pthread_mutex_t mtx;
	int64_t last_event;
	int64_t txn_first_event;
	store_announce_fn announce;
	/* The outbox (notify.c): which events are wanted, and who to wake
	 * after a commit that added rows. */
	store_outbox_fn outbox_fn;
	void (*outbox_wake)(void);
	int outbox_new;
	char instance[40];
	struct ann *pending, **pending_tail;
	int in_txn;
	int txn_failed;          /* a write of this transaction failed */
	int txn_undoable;        /* its caller handles a failed commit */
	int err;                 /* the last failure's SQLite result code */
	char errmsg[256];
	store_fail_fn fail;
	/* Prepared statements, kept for the life of the store (the SQL
	 * texts are literals: the pointer is the key, the text checks it). */
	struct { const char *sql; sqlite3_stmt *st; } cache[48];
	int ncache;
	/* The checkpointer (see the top). */
	char *path;
	pthread_t ckpt_thr;
	pthread_mutex_t ckpt_mtx;
	pthread_cond_t ckpt_cv;
	int ckpt_on, ckpt_ready, ckpt_want, ckpt_stop;
};

/* A statement for sql, from the cache when it is there and idle; give it
 * back with store_unprep(). Callers hold s->mtx. */
sqlite3_stmt *store_prep(struct store *s, const char *sql);
void	store_unprep(struct store *s, sqlite3_stmt *st);
/* The rows of st as JSON, named by row (wire.c); gives st back. */
cJSON	*store_rows(struct store *s, sqlite3_stmt *st, const struct wire_row *row);

/* Bind :viewer in st, if it has one (store_ro.c). */
void	store_bind_viewer(sqlite3_stmt *st, int64_t viewer);

/* The rows st gives, stepped to the end (the caller resets or finalizes
 * it), as an array of objects named by row (store_wire.c). A column row
 * does not name is left out and logged: a query and its row type
 * disagree. */
cJSON	*wire_rows(sqlite3_stmt *st, const struct wire_row *row);

/* A read-only handle (store_ro.h). */
struct store_ro {
	sqlite3 *db;
	char who[32];           /* the reader, for the log */
};
/* A statement for sql on ro's connection (finalize it), or NULL, logged. */
sqlite3_stmt *store_ro_prep(struct store_ro *ro, const char *sql);

#endif
