/*
 * store_int.h: the store's inside, shared by its two files: store.c
 * (schema and migrations, the connection, transactions, events and every
 * write) and store_query.c (the reads: the control socket's and the
 * scheduler's queries). Nothing else includes it.
 */
#ifndef PL_STORE_INT_H
#define PL_STORE_INT_H

#include <sqlite3.h>

#include "pipelined.h"
#include "wire.h"

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

#endif
