/*
 * wire.h: the names the store's rows have in JSON (wire.c). The control
 * socket's replies (store_q_*), the status page's documents (web.c) and
 * the outbox rows notify.c reads take their field names from here, never
 * from SQL: a row type maps each column a query may select (its name or
 * its AS alias) to the field's name in JSON, so a column renamed in the
 * schema changes its row type's table, not what a client reads.
 */
#ifndef PL_WIRE_H
#define PL_WIRE_H

#include <sqlite3.h>
#include <cjson/cJSON.h>

struct wire_field {
	const char *column;     /* as sqlite3_column_name() gives it */
	const char *name;       /* in JSON */
};

struct wire_row {
	const char *what;       /* for messages */
	const struct wire_field *fields; /* ends with { NULL, NULL } */
};

extern const struct wire_row wire_run, wire_job, wire_value, wire_artifact, wire_metric,
    wire_outbox, wire_last_event;

/* The rows st gives, stepped to the end (the caller resets or finalizes
 * it), as an array of objects named by row. A column row does not name is
 * left out and logged: a query and its row type disagree. */
cJSON	*wire_rows(sqlite3_stmt *st, const struct wire_row *row);

#endif
