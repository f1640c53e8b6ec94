/*
 * web.c: the status page's server side, on the HTTP listener (httpd.c).
 *
 * Read-only. The page (etc/web: HTML, CSS and JavaScript of our own, no
 * build step) asks for JSON documents read from the store through a
 * read-only handle opened per request (store_ro.h: the queries are the
 * store's, this file puts their rows together), and follows a run live
 * through /api/events: Server-Sent Events fed by a watcher of the status
 * feed (feed.c) that this file opens for each page, with the feed's own
 * replay after `since` (the Last-Event-ID the browser sends on a
 * reconnect), so a page never misses or repeats an event and no page polls
 * the store. A page left open costs one feed watcher and one HTTP thread,
 * nothing that grows with time.
 *
 * Everything from the store goes out as JSON, and the page puts it in the
 * document as text, never as markup; every response forbids any script but
 * our own (httpd.c's Content-Security-Policy).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pld.h"
#include "http.h"
#include "access.h"
#include "plio.h"
#include "store_ro.h"

static char web_dbpath[PATH_MAX];
static char web_feed[PATH_MAX];
static char web_state[PATH_MAX];
static char web_root[PATH_MAX];

void
web_init(const char *dbpath, const char *feed_socket, const char *state_dir,
    const char *web_dir)
{
	snprintf(web_dbpath, sizeof(web_dbpath), "%s", dbpath);
	snprintf(web_feed, sizeof(web_feed), "%s", feed_socket);
	snprintf(web_state, sizeof(web_state), "%s", state_dir);
	snprintf(web_root, sizeof(web_root), "%s", web_dir);
}

/* The page's own files: a fixed list, so no path from a request ever
 * reaches the file system. */
char *
web_static(const char *url, const char **type, size_t *len)
{
	static const struct { const char *url, *file, *type; } files[] = {
		{ "/", "index.html", "text/html; charset=utf-8" },
		{ "/app.js", "app.js", "text/javascript; charset=utf-8" },
		{ "/app.css", "app.css", "text/css; charset=utf-8" },
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (strcmp(url, files[i].url) != 0)
			continue;
		char path[PATH_MAX + 32];
		snprintf(path, sizeof(path), "%s/%s", web_root, files[i].file);
		size_t n = 0;
		char *b = plc_read_file(path, &n, 4 << 20);
		if (b == NULL) {
			log_warnx("web: %s: %s", path, strerror(errno));
			return NULL;
		}
		*type = files[i].type;
		*len = n;
		return b;
	}
	return NULL;
}

/* Values stored as JSON text are handed on as JSON, not as strings. */
static void
parse_values(cJSON *a, const char *field)
{
	cJSON *o;
	cJSON_ArrayForEach(o, a) {
		cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
		if (!cJSON_IsString(v))
			continue;
		cJSON *p = cJSON_Parse(v->valuestring);
		if (p != NULL)
			cJSON_ReplaceItemInObjectCaseSensitive(o, field, p);
	}
}

static char *
json_out(cJSON *o, size_t *len)
{
	char *t = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (t != NULL)
		*len = strlen(t);
	return t;
}

/* May viewer see run (access.c)? 200, or 404: no such run, or another
 * user's, answered alike (access_no_run()). */
static int
run_access(struct store_ro *db, const char *run, int64_t viewer)
{
	int64_t submitter;
	return store_ro_submitter(db, run, &submitter) && access_run(viewer, submitter) ? 200 : 404;
}

/* GET /api/runs: every run viewer may see, newest first, with its verdict,
 * and the newest event's id (the index's live stream starts after it). */
static char *
api_runs(struct store_ro *db, int64_t viewer, size_t *len)
{
	cJSON *a = store_ro_runs(db, viewer);
	parse_values(a, "verdict");
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "runs", a);
	/* The index follows every run's events from here on. */
	cJSON_AddNumberToObject(o, "last_event", (double)store_ro_last_event(db, NULL));
	return json_out(o, len);
}

/* GET /api/run?run=R: the run, its spec text (the page draws the DAG from
 * its after keys), jobs, artifacts, bake summaries, verdicts and the
 * corpus_check summaries and changes. */
static char *
api_run(struct store_ro *db, const char *run, size_t *len)
{
	cJSON *r = store_ro_run(db, run);
	if (cJSON_GetArraySize(r) != 1) {
		cJSON_Delete(r);
		return NULL;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "run", cJSON_DetachItemFromArray(r, 0));
	cJSON_Delete(r);
	cJSON_AddItemToObject(o, "jobs", store_ro_jobs(db, run));
	cJSON_AddItemToObject(o, "artifacts", store_ro_artifacts(db, run));
	cJSON *vals = store_ro_page_values(db, run);
	parse_values(vals, "value");
	/* The bake summaries without their per-case rows (the verdict has the
	 * figures the page shows; the rows are in bake.json). */
	cJSON *v;
	cJSON_ArrayForEach(v, vals)
		cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(v, "value"),
		    "rows");
	cJSON_AddItemToObject(o, "values", vals);
	/* The train jobs' curves, and the newest event of the run, from the
	 * same snapshot: the page follows the feed after that event, so it
	 * neither misses nor repeats a point. */
	cJSON *curves = cJSON_AddObjectToObject(o, "metrics");
	cJSON *tj = store_ro_train_jobs(db, run);
	cJSON *t;
	cJSON_ArrayForEach(t, tj) {
		const char *jn = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "name"));
		if (jn != NULL)
			cJSON_AddItemToObject(curves, jn, store_ro_curves(db, run, jn));
	}
	cJSON_Delete(tj);
	cJSON_AddNumberToObject(o, "last_event", (double)store_ro_last_event(db, run));
	return json_out(o, len);
}

/* GET /api/metrics?run=R&job=J: the job's loss, lr and resume steps. */
static char *
api_metrics(struct store_ro *db, const char *run, const char *job, size_t *len)
{
	cJSON *a = store_ro_curves(db, run, job);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "metrics", a);
	return json_out(o, len);
}

/* GET /api/log?run=R&job=J&offset=N: the job log from N (the last 64 KB
 * when N is absent), and the offset to ask from next. */
static char *
api_log(const char *run, const char *job, const char *off, size_t *len)
{
	if (!valid_run_ref(run) || !valid_name(job))
		return NULL;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/runs/%s/%s/job.log", web_state, run, job);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	cJSON *o = cJSON_CreateObject();
	long long from = off ? atoll(off) : -1, size = 0;
	char *text = NULL;
	struct stat sb;
	if (fd != -1 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
		size = (long long)sb.st_size;
		if (from < 0 || from > size)
			from = size > 65536 ? size - 65536 : 0;
		long long n = size - from > 65536 ? 65536 : size - from;
		text = malloc((size_t)n + 1);
		ssize_t got = text ? pread(fd, text, (size_t)n, (off_t)from) : -1;
		if (got < 0)
			got = 0;
		if (text)
			text[got] = '\0';
		size = from + got;
	} else {
		from = 0;
	}
	if (fd != -1)
		close(fd);
	/* cJSON escapes; invalid UTF-8 is the page's to show as it can. */
	cJSON_AddStringToObject(o, "text", text ? text : "");
	cJSON_AddNumberToObject(o, "offset", (double)size);
	free(text);
	return json_out(o, len);
}

char *
web_api(const char *url, const char *run, const char *job, const char *off, int64_t viewer,
    size_t *len, int *status, char *err, size_t errlen)
{
	*status = 200;
	snprintf(err, errlen, "not found\n");
	struct store_ro *db = store_ro_open(web_dbpath, "web");
	if (db == NULL) {
		*status = 503;
		snprintf(err, errlen, "the store could not be read\n");
		return NULL;
	}
	char *b = NULL;
	store_ro_begin(db);
	/* Every document but the list is one run's, for who may see it. */
	if (strcmp(url, "/api/runs") != 0 && (*status = run_access(db, run, viewer)) != 200) {
		char name[160];
		snprintf(name, sizeof(name), "%.128s", run == NULL ? "(none given)" :
		    valid_run_ref(run) ? run : "(a name that is not valid)");
		access_no_run(viewer, name, err, errlen);
		if (strlen(err) + 1 < errlen)
			strcat(err, "\n");
	}
	if (*status != 200)
		;
	else if (strcmp(url, "/api/runs") == 0)
		b = api_runs(db, viewer, len);
	else if (strcmp(url, "/api/run") == 0)
		b = api_run(db, run, len);
	else if (strcmp(url, "/api/metrics") == 0 && job != NULL)
		b = api_metrics(db, run, job, len);
	else if (strcmp(url, "/api/log") == 0 && job != NULL)
		b = api_log(run, job, off, len);
	store_ro_end(db);
	store_ro_close(db);
	if (b == NULL && *status == 200)
		*status = 404;
	return b;
}

/* ---- /api/events: the feed as Server-Sent Events ---------------------- */

struct sse {
	int fd;			/* the feed connection */
	char buf[65536];	/* what the feed sent, not yet handed on */
	size_t len;
	char out[65536 + 256];	/* one event in SSE form, partly handed on */
	size_t olen, opos;
	int paced;		/* data went out: wait before reading again */
};

/* A page gets its events at most five times a second: a burst becomes one
 * write instead of one per scheduling pass, so a page costs the daemon the
 * same whatever the event rate. */
#define SSE_PACE_MS 200

/* Open a feed watcher for run after event id since, seeing what viewer
 * may (access.c). */
struct sse *
web_sse_open(const char *run, long long since, int64_t viewer)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (strlen(web_feed) >= sizeof(sun.sun_path))
		return NULL;
	strcpy(sun.sun_path, web_feed);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return NULL;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		close(fd);
		return NULL;
	}
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "verb", pl_verb_name(PLV_watch));
	cJSON_AddNumberToObject(req, "version", PL_PROTO_VERSION);
	cJSON_AddNumberToObject(req, "since", (double)(since > 0 ? since : 0));
	if (run != NULL && *run != '\0')
		cJSON_AddStringToObject(req, "run", run);
	/* The feed takes "viewer" from the daemon's own user only: the page's
	 * session sees what its user may. */
	if (viewer != ACCESS_ALL)
		cJSON_AddNumberToObject(req, "viewer", (double)viewer);
	char *t = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	size_t n = strlen(t);
	t[n] = '\0';
	int ok = write(fd, t, n) == (ssize_t)n && write(fd, "\n", 1) == 1;
	free(t);
	if (!ok) {
		close(fd);
		return NULL;
	}
	struct sse *s = xcalloc(1, sizeof(*s));
	s->fd = fd;
	return s;
}

void
web_sse_close(struct sse *s)
{
	if (s == NULL)
		return;
	close(s->fd);
	free(s);
}

/*
 * One feed line as SSE text into dst (room for it: the line plus 64
 * bytes): "id: N\ndata: LINE\n\n" for an event, whose line starts with
 * {"id":N (store.c's event_line puts the id first), "event: feed" for a
 * notice without an id (feed.dropped: the page reconnects). Returns the
 * bytes, 0 for a line to pass over, -1 for the feed's error reply, which
 * ends the stream.
 */
static ssize_t
sse_line(const char *line, size_t ll, char *dst)
{
	if (strncmp(line, "{\"id\":", 6) == 0) {
		const char *p = line + 6, *q = p;
		while (*q >= '0' && *q <= '9')
			q++;
		if (q == p)
			return 0;
		int n = sprintf(dst, "id: %.*s\ndata: ", (int)(q - p), p);
		memcpy(dst + n, line, ll);
		memcpy(dst + n + ll, "\n\n", 2);
		return n + (ssize_t)ll + 2;
	}
	if (strstr(line, "\"status\"") != NULL)
		return -1;
	int n = sprintf(dst, "event: feed\ndata: ");
	memcpy(dst + n, line, ll);
	memcpy(dst + n + ll, "\n\n", 2);
	return n + (ssize_t)ll + 2;
}

/*
 * Fill dst with SSE text, as many whole events as fit (one write to the
 * page for a burst of events, not one per event). Waits for the feed up to
 * 15 s, then sends a comment, so a page that went away is noticed.
 * Returns the bytes written, -1 at the end of the stream.
 */
ssize_t
web_sse_read(struct sse *s, char *dst, size_t max)
{
	for (;;) {
		if (s->opos < s->olen) {
			size_t n = s->olen - s->opos < max ? s->olen - s->opos : max;
			memcpy(dst, s->out + s->opos, n);
			s->opos += n;
			return (ssize_t)n;
		}
		size_t used = 0, off = 0;
		int end = 0;
		char *nl;
		while ((nl = memchr(s->buf + off, '\n', s->len - off)) != NULL) {
			size_t ll = (size_t)(nl - (s->buf + off));
			*nl = '\0';
			/* A line that does not fit what is left goes through s->out. */
			if (used + ll + 64 > max) {
				if (used > 0) {
					*nl = '\n';
					break;
				}
				ssize_t k = ll + 64 <= sizeof(s->out) ? sse_line(s->buf + off, ll, s->out) : 0;
				off += ll + 1;
				if (k < 0) {
					end = 1;
					break;
				}
				s->olen = (size_t)k;
				s->opos = 0;
				break;
			}
			ssize_t k = sse_line(s->buf + off, ll, dst + used);
			off += ll + 1;
			if (k < 0) {
				end = 1;
				break;
			}
			used += (size_t)k;
		}
		memmove(s->buf, s->buf + off, s->len - off);
		s->len -= off;
		if (used > 0) {
			s->paced = 1;
			return (ssize_t)used;
		}
		if (end)
			return -1;
		if (s->opos < s->olen)
			continue;
		if (s->len == sizeof(s->buf))
			return -1;	/* a line longer than the buffer: start over */
		if (s->paced) {
			s->paced = 0;
			struct timespec ts = { 0, SSE_PACE_MS * 1000000L };
			nanosleep(&ts, NULL);
		}
		struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
		int pr = poll(&pfd, 1, 15000);
		if (pr == 0) {
			static const char ka[] = ": keep-alive\n\n";
			size_t n = sizeof(ka) - 1 < max ? sizeof(ka) - 1 : max;
			memcpy(dst, ka, n);
			return (ssize_t)n;
		}
		if (pr < 0 && errno == EINTR)
			continue;
		ssize_t got = pr < 0 ? -1 : read(s->fd, s->buf + s->len, sizeof(s->buf) - s->len);
		if (got <= 0)
			return -1;
		s->len += (size_t)got;
	}
}
