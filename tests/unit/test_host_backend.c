/* test_host_backend.c: the host backends (struct host_backend, host.c,
 * stagectx.c, host_store.c) behind the one host table: every backend has
 * every function; a stage process's reports are lines of its events file
 * in a job program's form, found again by its own lookups; by hand they
 * are printed as given and nothing is there to look up; the store's
 * progress puts a job program's line in the feed's form. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pld.h"
#include "server.h"
#include "runner.h"

static const struct host_backend *const backends[] = { &host_store, &host_stage_proc,
    &host_by_hand };

static void
case_complete(void)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		const struct host_backend *b = backends[i];
		CHECK(b->input && b->spawn && b->artifact_find && b->value_get && b->value_history);
		CHECK(b->begin && b->commit && b->rollback && b->undoable && b->error && b->fail);
		CHECK(b->event && b->progress && b->metric && b->artifact && b->value_set);
		CHECK(b->proc_find && b->proc_insert && b->proc_update && b->job_state &&
		    b->digest_keep);
	}
	CHECK(host_store.daemon == 1 && host_stage_proc.daemon == 0 && host_by_hand.daemon == 0);
}

/* The whole of a file, NUL-terminated (malloc'd). */
static char *
slurp(const char *path)
{
	static char buf[65536];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return strdup(buf);
}

static struct spec *
one_job_spec(void)
{
	char *errs = NULL;
	struct spec *s = spec_parse("r.ini", "[run]\nname = r\n[j]\nstage = exec\n", &errs);
	CHECK(s != NULL);
	return s;
}

static void
case_stage_proc(void)
{
	char dir[] = "/tmp/test_host_backend.XXXXXX", ev[PATH_MAX];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(ev, sizeof(ev), "%s/events", dir);
	struct spec *s = one_job_spec();
	struct pl_job *j = job_new(JOB_MODE_RUN, &host_stage_proc, NULL, s, s->jobs[0]);
	j->evfd = open(ev, O_WRONLY | O_CREAT | O_APPEND, 0600);
	j->ctx = cJSON_Parse("{\"inputs\":{\"data\":{\"path\":\"/d\"},\"bad\":{\"error\":\"no\"}}}");
	CHECK(j->evfd >= 0 && j->ctx != NULL);

	plugin_host.progress(j, 3, 10, "examples");
	plugin_host.metric(j, "loss", 3, 0.5);
	CHECK(plugin_host.value_set(j, "k", "v") == PL_OK);
	plugin_host.event(j, "note", "{\"a\":1}");
	char *t = slurp(ev);
	CHECK(strstr(t, "{\"type\":\"progress\",\"done\":3,\"total\":10,\"unit\":\"examples\","
	    "\"step\":3,\"pl_stage\":true}\n") != NULL);
	CHECK(strstr(t, "{\"type\":\"metric\",\"name\":\"loss\",\"step\":3,\"value\":0.5,"
	    "\"pl_stage\":true}\n") != NULL);
	CHECK(strstr(t, "{\"type\":\"value\",\"key\":\"k\",\"value\":\"v\",\"pl_stage\":true}\n")
	    != NULL);
	CHECK(strstr(t, "{\"type\":\"note\",\"a\":1,\"pl_stage\":true}\n") != NULL);
	free(t);

	/* Its own value is found by its own lookup; inputs come from the
	 * context, with the daemon's reason. */
	char *v = plugin_host.value_get(j, NULL, NULL, "k");
	CHECK(v != NULL && strcmp(v, "v") == 0);
	free(v);
	CHECK(strcmp(plugin_host.input(j, "data"), "/d") == 0);
	char why[64];
	CHECK(host_stage_proc.input(j, "bad", why, sizeof(why)) == NULL && strcmp(why, "no") == 0);
	job_free(j);
	unlink(ev);
	rmdir(dir);
}

static void
case_by_hand(void)
{
	char dir[] = "/tmp/test_host_backend.XXXXXX", out[PATH_MAX];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(out, sizeof(out), "%s/stdout", dir);
	struct spec *s = one_job_spec();
	struct pl_job *j = job_new(JOB_MODE_RUN, &host_by_hand, NULL, s, s->jobs[0]);
	j->json_out = 1;
	fflush(stdout);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600), saved = dup(1);
	CHECK(fd >= 0 && dup2(fd, 1) == 1);
	plugin_host.progress(j, 3, 10, NULL);
	CHECK(plugin_host.value_set(j, "k", "v") == PL_OK);
	fflush(stdout);
	dup2(saved, 1);
	close(fd);
	close(saved);
	char *t = slurp(out);
	CHECK(strcmp(t, "{\"type\":\"job.progress\",\"done\":3,\"total\":10}\n"
	    "{\"type\":\"job.value\",\"key\":\"k\",\"value\":\"v\"}\n") == 0);
	free(t);
	char path[PATH_MAX], *h;
	CHECK(plugin_host.value_get(j, NULL, NULL, "k") == NULL);
	CHECK(plugin_host.artifact_find(j, NULL, NULL, "a", path, sizeof(path), NULL) == PL_ENOENT);
	CHECK((h = plugin_host.value_history(j, "k", 0)) != NULL && strcmp(h, "[]") == 0);
	free(h);
	job_free(j);
	unlink(out);
	rmdir(dir);
}

/* A job program's progress line with no count: no row (the store is
 * not touched), and the event in the feed's form, done 0 and the unit. */
static void
case_store_feed_form(void)
{
	struct spec *s = one_job_spec();
	struct pl_job *j = job_new(JOB_MODE_RUN, &host_store, NULL, s, s->jobs[0]);
	cJSON *d = cJSON_Parse("{\"total\":4}");
	CHECK(host_store.progress(j, NAN, 4, "step", d) == 0);
	char *t = cJSON_PrintUnformatted(d);
	CHECK(strcmp(t, "{\"total\":4,\"done\":0,\"unit\":\"step\"}") == 0);
	free(t);
	cJSON_Delete(d);
	job_free(j);
}

static const struct unit_case cases[] = {
	UNIT_CASE(complete),
	UNIT_CASE(stage_proc),
	UNIT_CASE(by_hand),
	UNIT_CASE(store_feed_form),
	UNIT_END
};

int
main(int argc, char **argv)
{
	log_init(1, LOG_LVL_ERR, NULL);
	return unit_main(argc, argv, cases);
}
