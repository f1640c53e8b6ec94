/*
 * store_wire.c: a query's rows as the wire's JSON, each column named by
 * its row type (wire.c's tables, wire.h): the control socket's replies
 * (store_query.c), the status page's documents (store_ro.c) and the
 * outbox rows notify.c reads go out through here.
 */
#include <string.h>

#include "store_int.h"

/* The wire name of column i, or NULL. */
static const char *
wire_name(sqlite3_stmt *st, int i, const struct wire_row *row)
{
	const char *col = sqlite3_column_name(st, i);
	for (const struct wire_field *f = row->fields; col != NULL && f->column; f++)
		if (strcmp(col, f->column) == 0)
			return f->name;
	log_warnx("wire: a %s row has no field for column %s", row->what, col ? col : "?");
	return NULL;
}

static void
add_col(cJSON *o, sqlite3_stmt *st, int i, const char *name)
{
	switch (sqlite3_column_type(st, i)) {
	case SQLITE_INTEGER:
		cJSON_AddNumberToObject(o, name, (double)sqlite3_column_int64(st, i));
		break;
	case SQLITE_FLOAT:
		cJSON_AddNumberToObject(o, name, sqlite3_column_double(st, i));
		break;
	case SQLITE_TEXT:
		cJSON_AddStringToObject(o, name, (const char *)sqlite3_column_text(st, i));
		break;
	default:
		cJSON_AddNullToObject(o, name);
	}
}

cJSON *
wire_rows(sqlite3_stmt *st, const struct wire_row *row)
{
	cJSON *a = cJSON_CreateArray();
	const char *names[64];
	int n = sqlite3_column_count(st);
	if (n > (int)(sizeof(names) / sizeof(names[0])))
		n = (int)(sizeof(names) / sizeof(names[0]));
	for (int i = 0; i < n; i++)
		names[i] = wire_name(st, i, row);
	while (sqlite3_step(st) == SQLITE_ROW) {
		cJSON *o = cJSON_CreateObject();
		for (int i = 0; i < n; i++)
			if (names[i] != NULL)
				add_col(o, st, i, names[i]);
		cJSON_AddItemToArray(a, o);
	}
	return a;
}
