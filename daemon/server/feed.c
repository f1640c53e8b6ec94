/* feed.c: the read-only status feed. A watcher sends one watch request,
 * gets the stored events after `since` (replayed from the store in
 * batches, paced by its own write queue), then live events as they are
 * announced. Nothing here ever waits for a watcher: one whose queue passes
 * feed_queue_max bytes is dropped with a notice and may reconnect with
 * `since`: the notice is queued behind what the watcher has not read yet,
 * and the connection is shut down once it is written (or closed after
 * feed_idle_timeout). At most feed_max_watchers connections are served at
 * once, and one that has not sent its request within feed_idle_timeout is
 * closed. Announcements arrive from any thread through a locked queue and
 * are delivered on the loop thread in id order. A watcher gets the lines
 * of the runs its peer may see (access.c: its own, or every run for root,
 * the daemon's user and admin_group) and the daemon's own lines; the
 * daemon's user may ask for a viewer's lines ("viewer": UID), which is
 * how a status page's session gets its user's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pld.h"
#include "server.h"
#include "metrics.h"
#include "wire.h"

#define REPLAY_BATCH 256
#define REPLAY_HIGH (256 * 1024)
#define REQ_MAX 4096             /* the longest watch request */

struct watcher {
	uv_pipe_t pipe;
	uv_shutdown_t shut;
	char *req;               /* the request as it comes; freed once started */
	char *refused;           /* why its request is refused (access_too_many) */
	size_t reqlen;
	int started, live, closing, dropping;
	char run[128];
	int64_t cursor;          /* last event id sent */
	int64_t viewer;          /* whose runs' lines it gets (access.c) */
	uint64_t since;          /* uv_now() at the connection, or at the drop */
	struct watcher *next, *prev;
};

/* What feed_listen() was given; announcements from other threads wake
 * the loop through feed_wake. */
static struct listen_ctx ctx;
static pthread_t loop_thread;
static uv_async_t feed_wake;
static int listening;
#define CONF (*ctx.conf)

static uv_pipe_t feed_server;
static uv_timer_t feed_sweep;
static struct watcher *watchers;
static int nwatchers;
static pthread_mutex_t q_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct ann *q_head, **q_tail = &q_head;

static void
on_close(uv_handle_t *h)
{
	struct watcher *w = h->data;
	if (w->prev)
		w->prev->next = w->next;
	else if (watchers == w)
		watchers = w->next;
	if (w->next)
		w->next->prev = w->prev;
	nwatchers--;
	free(w->req);
	free(w->refused);
	free(w);
	metrics_count(MC_FEED_WATCHERS, -1);
}

static void
w_close(struct watcher *w)
{
	if (w->closing)
		return;
	w->closing = 1;
	uv_close((uv_handle_t *)&w->pipe, on_close);
}

static void pump(struct watcher *w);

static void
on_write(uv_write_t *req, int status)
{
	struct watcher *w = req->handle->data;
	free(req->data);
	free(req);
	if (status == 0 && w && !w->closing && w->started && !w->live &&
	    uv_stream_get_write_queue_size((uv_stream_t *)&w->pipe) < REPLAY_HIGH / 2)
		pump(w);
}

static int w_send_buf(struct watcher *w, char *buf, size_t len);

static void
on_shutdown(uv_shutdown_t *req, int status)
{
	w_close(req->handle->data);
}

/* Drop a watcher that fell behind: the notice goes behind everything it
 * has not read yet (uv_try_write would fail, the queue being full), and
 * the connection is shut down once the notice is written. */
static void
w_drop(struct watcher *w, size_t qs)
{
	char *notice = wire_feed_dropped(qs, w->cursor);
	log_info("feed: dropped a watcher with %zu bytes queued", qs);
	metrics_count(MC_FEED_DROPPED, 1);
	w->dropping = 1;
	w->since = uv_now(ctx.loop);
	uv_write_t *req = xcalloc(1, sizeof(*req));
	req->data = notice;
	uv_buf_t b = uv_buf_init(notice, (unsigned)strlen(notice));
	if (uv_write(req, (uv_stream_t *)&w->pipe, &b, 1, on_write) != 0) {
		free(notice);
		free(req);
		w_close(w);
		return;
	}
	uv_read_stop((uv_stream_t *)&w->pipe);
	if (uv_shutdown(&w->shut, (uv_stream_t *)&w->pipe, on_shutdown) != 0)
		w_close(w);
}

/* Queue one line, valid UTF-8 (stored events may hold what a job
 * program wrote). */
static int
w_send(struct watcher *w, const char *line)
{
	char *clean = utf8_clean(line);
	const char *l = clean ? clean : line;
	size_t len = strlen(l);
	char *buf = malloc(len + 1);
	if (buf != NULL) {
		memcpy(buf, l, len);
		buf[len] = '\n';
	}
	free(clean);
	return buf ? w_send_buf(w, buf, len + 1) : -1;
}

/* Queue a buffer of whole lines (taking it); drop the watcher when it has
 * fallen too far behind. */
static int
w_send_buf(struct watcher *w, char *buf, size_t blen)
{
	if (w->closing || w->dropping) {
		free(buf);
		return -1;
	}
	size_t qs = uv_stream_get_write_queue_size((uv_stream_t *)&w->pipe);
	if (w->live && qs > (size_t)CONF->feed_queue_max) {
		free(buf);
		w_drop(w, qs);
		return -1;
	}
	uv_write_t *req = xcalloc(1, sizeof(*req));
	req->data = buf;
	uv_buf_t b = uv_buf_init(buf, (unsigned)blen);
	if (uv_write(req, (uv_stream_t *)&w->pipe, &b, 1, on_write) != 0) {
		free(buf);
		free(req);
		w_close(w);
		return -1;
	}
	return 0;
}

struct replay {
	struct watcher *w;
	int n;
};

static void
replay_one(void *arg, int64_t id, const char *line)
{
	struct replay *r = arg;
	if (w_send(r->w, line) == 0)
		r->w->cursor = id;
	r->n++;
}

/* Replay stored events until the write queue is full or none are left;
 * then the watcher goes live. */
static void
pump(struct watcher *w)
{
	while (!w->closing && !w->dropping && !w->live &&
	    uv_stream_get_write_queue_size((uv_stream_t *)&w->pipe) < REPLAY_HIGH) {
		struct replay r = { .w = w };
		if (store_q_events(ctx.store, w->cursor, w->run[0] ? w->run : NULL, w->viewer,
		    REPLAY_BATCH, replay_one, &r) < 0) {
			w_close(w);
			return;
		}
		if (r.n < REPLAY_BATCH)
			w->live = 1;
	}
}

static void
w_error(struct watcher *w, enum pl_proto_err code, const char *msg)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "status", "error");
	cJSON_AddStringToObject(o, "code", pl_proto_err_name(code));
	cJSON_AddStringToObject(o, "error", msg);
	char *t = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	w_send(w, t);
	free(t);
	w->started = 1;
	w->live = 1;
	uv_read_stop((uv_stream_t *)&w->pipe);
	w_close(w);
}

static void
start_watch(struct watcher *w, const char *line)
{
	cJSON *req = cJSON_Parse(line);
	const cJSON *verb = cJSON_GetObjectItemCaseSensitive(req, "verb");
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(req, "version");
	const cJSON *since = cJSON_GetObjectItemCaseSensitive(req, "since");
	const cJSON *run = cJSON_GetObjectItemCaseSensitive(req, "run");
	const cJSON *viewer = cJSON_GetObjectItemCaseSensitive(req, "viewer");
	int64_t submitter = -1;
	char msg[512], rname[128];
	if (w->refused != NULL)
		w_error(w, PLP_EPERM, w->refused);
	else if (!cJSON_IsObject(req) || !cJSON_IsString(verb) ||
	    strcmp(verb->valuestring, pl_verb_name(PLV_watch)) != 0) {
		snprintf(msg, sizeof(msg), "the feed takes one request: {\"verb\":\"%s\","
		    "\"version\":%d,\"since\":ID,\"run\":NAME}", pl_verb_name(PLV_watch),
		    PL_PROTO_VERSION);
		w_error(w, PLP_EPROTO, msg);
	} else if (!cJSON_IsNumber(ver) || ver->valueint != PL_PROTO_VERSION) {
		snprintf(msg, sizeof(msg), "protocol version mismatch: client %d, pipelined %d",
		    cJSON_IsNumber(ver) ? ver->valueint : -1, PL_PROTO_VERSION);
		w_error(w, PLP_EVERSION, msg);
	} else if ((run != NULL && !cJSON_IsString(run)) || (since != NULL && !cJSON_IsNumber(since))) {
		/* Taken for absent, a wrong type would widen the watch. */
		w_error(w, PLP_EINVAL, "\"run\" must be a string and \"since\" a number");
	} else if (viewer != NULL && (!cJSON_IsNumber(viewer) || viewer->valuedouble < 0 ||
	    w->viewer != ACCESS_ALL)) {
		w_error(w, PLP_EPERM, "\"viewer\" is the daemon's own: a uid, from root or the "
		    "daemon's user");
	} else if (cJSON_IsString(run) && (store_run_resolve(ctx.store, run->valuestring, 0,
	    rname, sizeof(rname)) == -1 || store_run_submitter(ctx.store, rname,
	    &submitter) == -1 || !access_run(viewer ? (int64_t)viewer->valuedouble : w->viewer,
	    submitter))) {
		/* Another user's run is answered as one that does not exist. */
		char name[128];
		snprintf(name, sizeof(name), "%.100s", run->valuestring);
		w_error(w, PLP_ENOENT, access_no_run(viewer ? (int64_t)viewer->valuedouble :
		    w->viewer, name, msg, sizeof(msg)));
	} else {
		if (viewer != NULL)
			w->viewer = (int64_t)viewer->valuedouble;
		/* NAME watches its newest revision, by its stored name. */
		if (cJSON_IsString(run))
			snprintf(w->run, sizeof(w->run), "%s", rname);
		w->cursor = cJSON_IsNumber(since) && since->valuedouble > 0 ?
		    (int64_t)since->valuedouble : 0;
		w->started = 1;
		free(w->req);
		w->req = NULL;
		pump(w);
	}
	cJSON_Delete(req);
}

static void
on_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf)
{
	struct watcher *w = h->data;
	if (w->req == NULL && (w->started || (w->req = malloc(REQ_MAX)) == NULL)) {
		*buf = uv_buf_init(NULL, 0);
		return;
	}
	*buf = uv_buf_init(w->req + w->reqlen, (unsigned)(REQ_MAX - w->reqlen - 1));
}

static void
on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct watcher *w = s->data;
	if (n < 0) {
		w_close(w);
		return;
	}
	if (w->started || n == 0)
		return; /* anything after the request is ignored */
	w->reqlen += (size_t)n;
	w->req[w->reqlen] = '\0';
	char *nl = strchr(w->req, '\n');
	if (nl != NULL) {
		*nl = '\0';
		start_watch(w, w->req);
	} else if (w->reqlen >= REQ_MAX - 1) {
		w_error(w, PLP_ETOOLONG, "watch request too long");
	}
}

static void
on_connection(uv_stream_t *srv, int status)
{
	if (status < 0)
		return;
	struct watcher *w = xcalloc(1, sizeof(*w));
	uv_pipe_init(ctx.loop, &w->pipe, 0);
	w->pipe.data = w;
	metrics_count(MC_FEED_WATCHERS, 1);
	w->since = uv_now(ctx.loop);
	w->next = watchers;
	if (watchers)
		watchers->prev = w;
	watchers = w;
	nwatchers++;
	if (uv_accept(srv, (uv_stream_t *)&w->pipe) != 0) {
		w_close(w);
		return;
	}
	struct access_peer peer;
	uv_os_fd_t fd;
	int pr = uv_fileno((uv_handle_t *)&w->pipe, &fd) != 0 ? -1 : access_peer_of(fd, &peer, NULL);
	if (pr == -2) {
		/* Answered at its request (start_watch): a socket closed
		 * before it reads what the peer sent loses the reply too. */
		char msg[256];
		access_too_many(&peer, msg, sizeof(msg));
		w->refused = xstrdup(msg);
		peer.ngroups = 0;
	} else if (pr != 0) {
		w_close(w);
		return;
	}
	w->viewer = access_viewer(CONF, &peer);
	if (nwatchers > CONF->feed_max_watchers) {
		char msg[128];
		snprintf(msg, sizeof(msg), "too many feed connections (feed_max_watchers = %d)",
		    CONF->feed_max_watchers);
		w_error(w, PLP_EBUSY, msg);
		return;
	}
	uv_read_start((uv_stream_t *)&w->pipe, on_alloc, on_read);
}

/* Close the connections that sent no request within feed_idle_timeout,
 * and the dropped ones whose notice has not been read in that time; run
 * every second. A live watcher is never idle: it waits for events. */
static void
on_sweep(uv_timer_t *t)
{
	uint64_t now = uv_now(ctx.loop);
	uint64_t idle = (uint64_t)(CONF->feed_idle_timeout * 1000);
	for (struct watcher *w = watchers; w; w = w->next)
		if (!w->closing && (!w->started || w->dropping) && now - w->since >= idle)
			w_close(w);
}

static void
on_wake(uv_async_t *a)
{
	feed_flush();
}

int
feed_listen(const struct listen_ctx *c, const char *path)
{
	ctx = *c;
	loop_thread = pthread_self();
	if (sock_listen(ctx.loop, &feed_server, path, 0666, CONF->gid, on_connection) == -1)
		return -1;
	uv_async_init(ctx.loop, &feed_wake, on_wake);
	__atomic_store_n(&listening, 1, __ATOMIC_RELEASE);
	uv_timer_init(ctx.loop, &feed_sweep);
	uv_timer_start(&feed_sweep, on_sweep, 1000, 1000);
	uv_unref((uv_handle_t *)&feed_sweep);
	return 0;
}

void
feed_announce(int64_t id, const char *run, const char *line)
{
	struct ann *a = xcalloc(1, sizeof(*a));
	a->id = id;
	a->run = run ? xstrdup(run) : NULL;
	a->submitter = -1;	/* looked up by feed_flush() when a watcher needs it */
	a->line = utf8_clean(line);
	if (a->line == NULL)
		a->line = xstrdup(line);
	pthread_mutex_lock(&q_mtx);
	*q_tail = a;
	q_tail = &a->next;
	pthread_mutex_unlock(&q_mtx);
	/* Another thread wakes the loop; the loop thread's own announcements
	 * are delivered at the end of its pass (pipelined.c's check handle):
	 * waking itself would cost it one more pass. */
	if (__atomic_load_n(&listening, __ATOMIC_ACQUIRE) &&
	    !pthread_equal(pthread_self(), loop_thread))
		uv_async_send(&feed_wake);
}

/* The uid that submitted a run (-1: unknown, or no such run), from a
 * small cache (a run's submitter never changes) or the store. */
static int64_t
run_submitter(const char *run)
{
	static struct { char name[128]; int64_t submitter; } cache[64];
	static int next;
	for (int i = 0; i < 64; i++)
		if (strcmp(cache[i].name, run) == 0)
			return cache[i].submitter;
	int64_t sub = -1;
	if (store_run_submitter(ctx.store, run, &sub) == -1)
		return -1;
	if (strlen(run) >= sizeof(cache[0].name))
		return sub;	/* too long to keep */
	snprintf(cache[next].name, sizeof(cache[next].name), "%s", run);
	cache[next].submitter = sub;
	next = (next + 1) % 64;
	return sub;
}

/* Does w get announcement a: after its cursor, of its run if it named
 * one, and of a run it may see (the daemon's own lines, without a run,
 * are everyone's)? */
static int
ann_for(const struct watcher *w, const struct ann *a)
{
	if (a->id <= w->cursor || (w->run[0] && (a->run == NULL || strcmp(w->run, a->run) != 0)))
		return 0;
	return w->viewer == ACCESS_ALL || a->run == NULL || access_run(w->viewer, a->submitter);
}

/* Deliver what was announced: per watcher, every line it should get in
 * one write (announcements come in batches: one per committed batch of a
 * job's event lines). */
void
feed_flush(void)
{
	pthread_mutex_lock(&q_mtx);
	struct ann *list = q_head;
	q_head = NULL;
	q_tail = &q_head;
	pthread_mutex_unlock(&q_mtx);
	if (list == NULL)
		return;
	/* Whose lines they are, when a watcher sees only its own runs'. */
	int some = 0;
	for (struct watcher *w = watchers; w; w = w->next)
		some |= w->live && w->viewer != ACCESS_ALL;
	for (struct ann *a = list; some && a; a = a->next)
		a->submitter = a->run ? run_submitter(a->run) : ACCESS_ALL;
	for (struct watcher *w = watchers, *wn; w; w = wn) {
		wn = w->next;
		if (!w->live || w->closing || w->dropping)
			continue;
		size_t len = 0;
		for (struct ann *a = list; a; a = a->next)
			if (ann_for(w, a))
				len += strlen(a->line) + 1;
		if (len == 0)
			continue;
		char *buf = malloc(len), *p = buf;
		int64_t last = w->cursor;
		if (buf == NULL)
			continue;
		for (struct ann *a = list; a; a = a->next) {
			if (!ann_for(w, a))
				continue;
			size_t l = strlen(a->line);
			memcpy(p, a->line, l);
			p[l] = '\n';
			p += l + 1;
			last = a->id;
		}
		if (w_send_buf(w, buf, len) == 0)
			w->cursor = last;
	}
	for (struct ann *a = list, *n; a; a = n) {
		n = a->next;
		free(a->run);
		free(a->line);
		free(a);
	}
}
