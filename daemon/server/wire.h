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

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct wire_field {
	const char *column;     /* as the store names it (store_wire.c) */
	const char *name;       /* in JSON */
};

struct wire_row {
	const char *what;       /* for messages */
	const struct wire_field *fields; /* ends with { NULL, NULL } */
};

extern const struct wire_row wire_run, wire_job, wire_value, wire_artifact, wire_metric,
    wire_outbox, wire_du;

/* An event's feed line (pipelined(8), proto.h): id, ts, run and job
 * (when given), type, then data's fields (those not named so already);
 * malloc'd, without a newline. */
char	*wire_event_line(int64_t id, double ts, const char *run, const char *job,
	    const char *type, const cJSON *data);
/* A notification's body, what a webhook receives and a command reads
 * (pipelined.conf(5) [notify]): event (its kind), key, event_id, ts, run
 * and job (when given), data (a copy; {} when NULL); malloc'd. */
char	*wire_outbox_body(const char *kind, const char *key, int64_t id, double ts,
	    const char *run, const char *job, const cJSON *data);
/* The notice a watcher gets when it is dropped (feed.c): the bytes it
 * left queued and the id to resume after; malloc'd, with its newline. */
char	*wire_feed_dropped(size_t queued, int64_t resume_since);

#endif
