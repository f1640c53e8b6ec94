/*
 * wire.c: the one layer that names the store's rows in JSON (wire.h).
 * The wire names are the protocol (pipelinectl(1), pipelined(8), the
 * status page's etc/web/app.js and the notifications read them); the
 * columns are the schema's (store.c's migrations). A row type lists every
 * column its queries may select, by the name SQLite reports for it, with
 * its name on the wire (store_wire.c turns a query's rows into JSON
 * through them). The lines that are not rows, an event's feed line and a
 * notification's body, are built here too.
 */
#include <stdio.h>
#include <string.h>

#include "pld.h"
#include "wire.h"

/* Runs: the runs list, one run, the status page's. */
static const struct wire_field run_fields[] = {
	{ "name", "name" },
	{ "state", "state" },
	{ "previous", "previous" },
	{ "description", "description" },
	{ "spec_path", "spec_path" },
	{ "spec_text", "spec_text" },
	{ "created", "created" },
	{ "finished", "finished" },
	{ "message", "message" },
	{ "jobs", "jobs" },             /* count of the run's jobs */
	{ "succeeded", "succeeded" },   /* count of those that succeeded */
	{ "verdict", "verdict" },       /* the newest gate.verdict value */
	{ "state_event", "state_event" }, /* the id of the newest run.state event */
	{ "bytes", "bytes" },           /* what its artifact records hold (du) */
	{ NULL, NULL }
};
const struct wire_row wire_run = { "run", run_fields };

/* du's rows: a run's artifact files, held and removed by gc. */
static const struct wire_field du_fields[] = {
	{ "name", "run" },
	{ "state", "state" },
	{ "artifacts", "artifacts" },   /* files held (each path once) */
	{ "bytes", "bytes" },           /* their bytes */
	{ "removed", "removed" },       /* files gc removed */
	{ "removed_bytes", "removed_bytes" },
	{ NULL, NULL }
};
const struct wire_row wire_du = { "du", du_fields };

static const struct wire_field job_fields[] = {
	{ "name", "name" },
	{ "stage", "stage" },
	{ "state", "state" },
	{ "attempts", "attempts" },
	{ "started", "started" },
	{ "finished", "finished" },
	{ "message", "message" },
	{ "progress_done", "progress_done" },
	{ "progress_total", "progress_total" },
	{ "progress_unit", "progress_unit" },
	{ "next_at", "next_at" },
	{ "variant", "variant" },       /* a sweep's job's values */
	{ "deps", "after" },            /* a sweep's run: the job's expanded after list */
	{ NULL, NULL }
};
const struct wire_row wire_job = { "job", job_fields };

/* The job's name is selected as "job_name" where a row also has a name
 * of its own. */
static const struct wire_field value_fields[] = {
	{ "job_name", "job" },
	{ "key", "key" },
	{ "value", "value" },
	{ "ts", "ts" },
	{ NULL, NULL }
};
const struct wire_row wire_value = { "value", value_fields };

static const struct wire_field artifact_fields[] = {
	{ "job_name", "job" },
	{ "name", "name" },
	{ "path", "path" },
	{ "size", "size" },
	{ "sha256", "sha256" },
	{ "created", "created" },
	{ "removed", "removed" },       /* when gc removed its file (NULL: held) */
	{ "removed_by", "removed_by" }, /* the uid that ran that gc */
	{ NULL, NULL }
};
const struct wire_row wire_artifact = { "artifact", artifact_fields };

static const struct wire_field metric_fields[] = {
	{ "name", "name" },
	{ "step", "step" },
	{ "value", "value" },
	{ NULL, NULL }
};
const struct wire_row wire_metric = { "metric", metric_fields };

/* The outbox rows due, for notify.c's delivery thread. */
static const struct wire_field outbox_fields[] = {
	{ "id", "id" },
	{ "kind", "kind" },
	{ "run", "run" },
	{ "job", "job" },
	{ "target", "target" },
	{ "key", "key" },
	{ "body", "body" },
	{ "attempts", "attempts" },
	{ NULL, NULL }
};
const struct wire_row wire_outbox = { "outbox", outbox_fields };

/* An event's id (named idname), time, run and job (when given), in that
 * order: the feed line and the notification body share them. */
static void
add_event(cJSON *o, const char *idname, int64_t id, double ts, const char *run,
    const char *job)
{
	cJSON_AddNumberToObject(o, idname, (double)id);
	cJSON_AddNumberToObject(o, "ts", ts);
	if (run)
		cJSON_AddStringToObject(o, "run", run);
	if (job)
		cJSON_AddStringToObject(o, "job", job);
}

char *
wire_event_line(int64_t id, double ts, const char *run, const char *job, const char *type,
    const cJSON *data)
{
	cJSON *o = cJSON_CreateObject();
	add_event(o, "id", id, ts, run, job);
	cJSON_AddStringToObject(o, "type", type);
	if (data != NULL) {
		for (const cJSON *c = data->child; c; c = c->next) {
			if (c->string == NULL || cJSON_HasObjectItem(o, c->string))
				continue;
			cJSON_AddItemToObject(o, c->string, cJSON_Duplicate(c, 1));
		}
	}
	char *line = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return line;
}

char *
wire_outbox_body(const char *kind, const char *key, int64_t id, double ts, const char *run,
    const char *job, const cJSON *data)
{
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "event", kind);
	cJSON_AddStringToObject(b, "key", key);
	add_event(b, "event_id", id, ts, run, job);
	cJSON_AddItemToObject(b, "data", data ? cJSON_Duplicate(data, 1) : cJSON_CreateObject());
	char *body = cJSON_PrintUnformatted(b);
	cJSON_Delete(b);
	return body;
}

char *
wire_feed_dropped(size_t queued, int64_t resume_since)
{
	char *notice;
	if (asprintf(&notice, "{\"type\":\"feed.dropped\",\"reason\":\"watcher too slow:"
	    " %zu bytes queued\",\"resume_since\":%lld}\n", queued, (long long)resume_since) == -1)
		fatal("wire_feed_dropped");
	return notice;
}
