/* control.c: the control socket. Newline-delimited JSON requests, each
 * answered by data lines and exactly one closing line (proto.h). The first
 * request must be hello with our protocol version. A line over
 * PL_PROTO_MAX_LINE gets an error and the connection is closed; malformed
 * JSON and unknown verbs get an error reply; nothing a client sends stops
 * the daemon from serving. Peers are identified with SO_PEERCRED: root,
 * the daemon's own user and members of the configured group (and of
 * admin_group) may check, submit, cancel and retry; anyone who can connect
 * may read; and each sees and acts on the runs access.c lets it (its own,
 * or with root, the daemon's user and admin_group, every run). A spec's
 * files are checked with the peer's rights: in a split daemon by
 * pipeline-stage --check, which the privileged parent starts as the peer
 * (files_start()), else with the peer's file-system credentials taken by
 * the daemon (peer_fs_enter()). At
 * most control_max_clients connections are served at once (one more is
 * told EBUSY and closed), and one silent for control_idle_timeout is
 * closed: idle connections cannot use up the daemon's descriptors, which
 * the job threads need to read the job records. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "pld.h"
#include "server.h"
#include "plio.h"
#include "priv.h"

struct client {
	uv_pipe_t pipe;
	char *buf;
	size_t len, cap;
	int hello;
	int closing;
	int busy;                 /* a plan is being made for it (plan_work) */
	int orphan;               /* closed while busy: plan_done frees it */
	struct access_peer peer;  /* SO_PEERCRED, SO_PEERGROUPS */
	char *refused;            /* why its first request is refused (access_too_many) */
	pid_t pid;
	int64_t viewer;           /* whose runs it sees (access.c) */
	char run[128];            /* the run known_run() resolved */
	uint64_t last;          /* uv_now() when it last sent something */
	struct client *next, *prev;
};

/* What control_listen() was given. */
static struct listen_ctx ctx;
#define CONF (*ctx.conf)

static uv_pipe_t ctl_server;
static uv_timer_t ctl_sweep;
static struct client *clients;
static int nclients;

static void
on_close(uv_handle_t *h)
{
	struct client *c = h->data;
	if (c->prev)
		c->prev->next = c->next;
	else if (clients == c)
		clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	nclients--;
	if (c->busy) {
		c->orphan = 1;
		return;
	}
	free(c->buf);
	free(c->refused);
	free(c);
}

static void
client_close(struct client *c)
{
	if (c->closing)
		return;
	c->closing = 1;
	uv_close((uv_handle_t *)&c->pipe, on_close);
}

static void
on_write(uv_write_t *req, int status)
{
	free(req->data);
	free(req);
}

static void
send_line(struct client *c, char *text)
{
	if (c->closing) {
		free(text);
		return;
	}
	/* Strings from clients and files may hold invalid UTF-8: a reply is
	 * valid JSON all the same. */
	char *clean = utf8_clean(text);
	if (clean != NULL) {
		free(text);
		text = clean;
	}
	size_t n = strlen(text);
	char *buf = xrealloc(text, n + 2, 1);
	buf[n] = '\n';
	buf[n + 1] = '\0';
	uv_write_t *req = xcalloc(1, sizeof(*req));
	req->data = buf;
	uv_buf_t b = uv_buf_init(buf, (unsigned)(n + 1));
	if (uv_write(req, (uv_stream_t *)&c->pipe, &b, 1, on_write) != 0) {
		free(buf);
		free(req);
		client_close(c);
	}
}

static void
reply_ok(struct client *c, cJSON *result)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "status", "ok");
	cJSON_AddItemToObject(o, "result", result ? result : cJSON_CreateObject());
	send_line(c, cJSON_PrintUnformatted(o));
	cJSON_Delete(o);
}

static void
reply_err(struct client *c, enum pl_proto_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void
reply_err(struct client *c, enum pl_proto_err code, const char *fmt, ...)
{
	char *msg;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) == -1)
		fatal("reply_err");
	va_end(ap);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "status", "error");
	cJSON_AddStringToObject(o, "code", pl_proto_err_name(code));
	cJSON_AddStringToObject(o, "error", msg);
	send_line(c, cJSON_PrintUnformatted(o));
	cJSON_Delete(o);
	free(msg);
}

/* May this peer change things? */
static int
peer_may_write(const struct client *c)
{
	return access_may_write(CONF, &c->peer);
}

/* Who a run submitted by this peer runs its jobs as (pipelined(8)
 * USERS), as spec->owner has it: the peer's uid, gid and groups
 * (SO_PEERCRED, SO_PEERGROUPS), or for root the configured job_user with
 * its groups; NULL for the daemon's own user (root without job_user, or a
 * daemon that is not root and so cannot switch). */
static char *
run_owner(const struct client *c)
{
	/* The privileged parent reads the peer's credentials itself, and
	 * starts shims only for owners so vouched for (priv.c). */
	int fd;
	if (priv_active() && uv_fileno((const uv_handle_t *)&c->pipe, &fd) == 0)
		priv_vouch(fd);
	uid_t uid = c->peer.uid;
	gid_t gid = c->peer.gid, jg[256];
	const gid_t *g = c->peer.groups;
	int ng = c->peer.ngroups;
	/* Not root, and not split: no other user to start jobs as. Split,
	 * the daemon process may be its own user: the parent starts them. */
	if ((geteuid() != 0 && !priv_active()) || (uid == 0 && CONF->job_uid == (uid_t)-1))
		return NULL;
	if (uid == 0) {
		uid = CONF->job_uid;
		gid = CONF->job_gid;
		struct passwd *pw = getpwuid(uid);
		ng = 256;
		if (pw == NULL || getgrouplist(pw->pw_name, gid, jg, &ng) == -1)
			ng = 0;
		g = jg;
	}
	char buf[4096];
	size_t n = (size_t)snprintf(buf, sizeof(buf), "%u:%u", (unsigned)uid, (unsigned)gid);
	for (int i = 0; i < ng && n + 12 < sizeof(buf); i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%c%u", i ? ',' : ':', (unsigned)g[i]);
	return xstrdup(buf);
}

static const char *
arg_str(const cJSON *req, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A request field of the wrong type is an error, never taken for an
 * absent one (which widens the request: a retry of one job with "job": 7
 * retried the whole run). Returns the first such field's message. */
static int
bad_field(const cJSON *req, char *msg, size_t len)
{
	static const char *const strs[] = { "verb", "run", "job", "name", "path", "text", NULL };
	static const char *const nums[] = { "version", "offset", "since", NULL };
	for (int i = 0; strs[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, strs[i]);
		if (v != NULL && !cJSON_IsString(v)) {
			snprintf(msg, len, "request field \"%s\" must be a string", strs[i]);
			return 1;
		}
	}
	for (int i = 0; nums[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, nums[i]);
		if (v != NULL && !cJSON_IsNumber(v)) {
			snprintf(msg, len, "request field \"%s\" must be a number", nums[i]);
			return 1;
		}
	}
	return 0;
}

/*
 * A spec's checks open the files it names (a bake's case file and
 * capability list, a base's config.json). For a peer other than root they
 * run with the peer's file-system credentials, so that root opens only
 * what the peer could and no error tells the peer more than its own
 * open(2) would: no line of a file it cannot read, no difference between
 * a missing path and an unreadable one it could not tell apart itself.
 * fsuid, fsgid and the supplementary groups are per thread in Linux; the
 * groups are set with the raw system call, since glibc's setgroups()
 * changes every thread's. Only the loop thread runs checks. This serves
 * only a daemon that is not split: in a split one (priv_active()) the
 * files of a peer other than root are opened in a process of the peer's
 * (files_start()), and the daemon process never takes a peer's rights.
 */
struct peer_fs {
	int on;
	uid_t fsuid;
	gid_t fsgid;
	int ngroups;
	gid_t groups[256];
};

static int
peer_fs_enter(const struct client *c, struct peer_fs *s)
{
	s->on = 0;
	if (geteuid() != 0 || c->peer.uid == 0)
		return 0;
	if ((s->ngroups = (int)syscall(SYS_getgroups, 256, s->groups)) == -1) {
		log_warn("control: getgroups");
		return -1;
	}
	if (syscall(SYS_setgroups, (size_t)c->peer.ngroups, c->peer.groups) == -1) {
		log_warn("control: setgroups for uid %d", (int)c->peer.uid);
		return -1;
	}
	s->on = 1;
	s->fsgid = (gid_t)setfsgid(c->peer.gid);
	s->fsuid = (uid_t)setfsuid(c->peer.uid);
	/* setfsuid() reports the previous value, never an error: read back. */
	if ((uid_t)setfsuid((uid_t)-1) != c->peer.uid || (gid_t)setfsgid((gid_t)-1) != c->peer.gid) {
		log_warnx("control: cannot take uid %d gid %d to check a spec", (int)c->peer.uid,
		    (int)c->peer.gid);
		return -1;
	}
	return 0;
}

static void
peer_fs_leave(struct peer_fs *s)
{
	if (!s->on)
		return;
	setfsuid(s->fsuid);
	setfsgid(s->fsgid);
	if ((uid_t)setfsuid((uid_t)-1) != s->fsuid || (gid_t)setfsgid((gid_t)-1) != s->fsgid ||
	    syscall(SYS_setgroups, (size_t)s->ngroups, s->groups) == -1)
		fatal("control: cannot restore the daemon's credentials after a check");
	s->on = 0;
}

/*
 * `submit --plan`, `check --plan`: what each job of a checked spec would
 * do. The plan hashes inputs (through the digest cache, but a new file of
 * gigabytes is read whole) and asks the stages' servers, so it is made on
 * a thread of libuv's pool; the client's further requests wait (its reads
 * stop) until its reply is sent, and a client that goes meanwhile is
 * freed when the plan is done.
 */
struct plan_req {
	uv_work_t w;
	struct client *c;
	struct spec *spec;
	const struct conf *conf;
	int64_t viewer;
	cJSON *plan;
};

static void client_lines(struct client *c);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void
plan_work(uv_work_t *w)
{
	struct plan_req *p = w->data;
	p->plan = reuse_plan(ctx.store, p->conf, p->spec, p->viewer);
}

static void
plan_done(uv_work_t *w, int status)
{
	struct plan_req *p = w->data;
	struct client *c = p->c;
	c->busy = 0;
	if (c->orphan) {
		free(c->buf);
		free(c);
	} else {
		cJSON *r = cJSON_CreateObject();
		cJSON_AddStringToObject(r, "run", p->spec->name);
		cJSON_AddNumberToObject(r, "jobs", p->spec->njobs);
		cJSON_AddBoolToObject(r, "submitted", 0);
		cJSON_AddItemToObject(r, "plan", p->plan ? p->plan : cJSON_CreateArray());
		p->plan = NULL;
		reply_ok(c, r);
		c->last = uv_now(ctx.loop);
		if (!c->closing) {
			uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
			client_lines(c);
		}
	}
	cJSON_Delete(p->plan);
	spec_free(p->spec);
	free(p);
}

/* Start the plan of spec (taken) for c. */
static void
plan_start(struct client *c, struct spec *spec)
{
	struct plan_req *p = xcalloc(1, sizeof(*p));
	p->w.data = p;
	p->c = c;
	p->spec = spec;
	p->conf = CONF;
	p->viewer = c->viewer;
	spec->owner = run_owner(c);
	spec->submitter = (int64_t)c->peer.uid;
	if (uv_queue_work(ctx.loop, &p->w, plan_work, plan_done) != 0) {
		reply_err(c, PLP_EINTERNAL, "the plan could not be started");
		spec_free(spec);
		free(p);
		return;
	}
	c->busy = 1;
	uv_read_stop((uv_stream_t *)&c->pipe);
}

/* The rest of a check or submit once spec is checked (taken, with
 * errs): the refusal, the plan, the answer or the run submitted. */
static void
check_finish(struct client *c, struct spec *spec, char *errs, int bad, int submit, int plan)
{
	if (bad) {
		reply_err(c, PLP_EINVAL, "%s", errs ? errs : spec ? "the spec could not be "
		    "checked with the peer's credentials" : "invalid spec");
		free(errs);
		spec_free(spec);
		return;
	}
	free(errs);
	if (plan) {
		plan_start(c, spec);
		return;
	}
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "run", spec->name);
	cJSON_AddNumberToObject(r, "jobs", spec->njobs);
	if (!submit) {
		spec_free(spec);
		reply_ok(c, r);
		return;
	}
	char err[512];
	spec->owner = run_owner(c);
	spec->submitter = (int64_t)c->peer.uid;
	enum pl_proto_err rc = sched_submit(spec, err, sizeof(err));
	if (rc != PLP_OK) {
		cJSON_Delete(r);
		reply_err(c, rc, "%s", err);
		spec_free(spec);
		return;
	}
	/* The run's name as the scheduler made it: NAME@N for a revision
	 * past the first. */
	char base[128];
	int rev;
	cJSON_ReplaceItemInObject(r, "run", cJSON_CreateString(spec->name));
	cJSON_AddNumberToObject(r, "revision", run_ref_split(spec->name, base, sizeof(base),
	    &rev) == 0 && rev > 0 ? rev : 1);
	reply_ok(c, r);
}

/*
 * The files' part of a check for a peer that is not root, in a split
 * daemon: the daemon checks all but the files itself, with its own rights
 * (SPEC_CHECK_NOFILES), and pipeline-stage --check, which the privileged
 * parent starts as the peer (priv_check()), opens them as the peer may.
 * Its answer, at most FILES_ANSWER_MAX bytes within PRIV_CHECK_TIMEOUT_S,
 * is read on a pool thread and its errors merged into the reply. It is
 * the peer's own word about the peer's own files, which can only refuse
 * the peer's spec: the daemon takes it for nothing else.
 */
#define FILES_ANSWER_MAX (1 << 20)
struct files_req {
	uv_work_t w;
	struct client *c;
	struct spec *spec;
	char *errs;                 /* the daemon's own */
	int bad, submit, plan;
	int fd;                     /* a copy of the connection, for the parent */
	char *path, *text;
	uid_t uid;
	char *ferrs;                /* the files' errors, or why there is no answer */
};

/* At most max bytes of fd within the deadline (monotonic seconds), up to
 * its end: malloc'd and NUL-terminated, or NULL. */
static char *
read_until(int fd, size_t max, double deadline)
{
	size_t len = 0;
	char *buf = xcalloc(1, max + 1);
	for (;;) {
		int ms = (int)((deadline - plc_mono_secs()) * 1000);
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (ms <= 0 || poll(&pf, 1, ms) <= 0)
			break;
		ssize_t n = read(fd, buf + len, max - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			buf[len] = '\0';
			return n == 0 ? buf : (free(buf), NULL);
		}
		if ((len += (size_t)n) == max)
			break;
	}
	free(buf);
	return NULL;
}

static void
files_work(uv_work_t *w)
{
	struct files_req *f = w->data;
	char why[256];
	int rfd = priv_check(f->fd, f->path, f->text, strlen(f->text), why, sizeof(why));
	if (rfd == -1) {
		errs_add(&f->ferrs, f->path, 0, "-", "the check of its files as uid %u was "
		    "refused: %s", (unsigned)f->uid, why);
		return;
	}
	char *out = read_until(rfd, FILES_ANSWER_MAX, plc_mono_secs() + PRIV_CHECK_TIMEOUT_S);
	close(rfd);
	cJSON *a = out ? cJSON_Parse(out) : NULL;
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(a, "ok");
	const char *e = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "errors"));
	if (cJSON_IsFalse(ok) && e != NULL && *e != '\0')
		f->ferrs = xstrdup(e);
	else if (!cJSON_IsTrue(ok))
		errs_add(&f->ferrs, f->path, 0, "-", "the check of its files as uid %u gave no "
		    "answer within %d s", (unsigned)f->uid, PRIV_CHECK_TIMEOUT_S);
	cJSON_Delete(a);
	free(out);
}

static void
files_done(uv_work_t *w, int status)
{
	struct files_req *f = w->data;
	struct client *c = f->c;
	c->busy = 0;
	if (c->orphan) {
		free(c->buf);
		free(c);
		spec_free(f->spec);
		free(f->errs);
	} else {
		if (f->ferrs != NULL) {
			errs_merge(&f->errs, f->ferrs);
			f->bad = 1;
		}
		check_finish(c, f->spec, f->errs, f->bad, f->submit, f->plan);
		c->last = uv_now(ctx.loop);
		if (!c->closing && !c->busy) {
			uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
			client_lines(c);
		}
	}
	close(f->fd);
	free(f->ferrs);
	free(f->path);
	free(f->text);
	free(f);
}

/* Start the files' part of the check of spec (taken, with errs) for c
 * (the parent's: priv_active(), and c not root's, or the daemon process
 * not root); 0, or -1 when it
 * cannot start (then nothing is taken). */
static int
files_start(struct client *c, struct spec *spec, char *errs, int bad, const char *path,
    const char *text, int submit, int plan)
{
	int fd;
	if (uv_fileno((const uv_handle_t *)&c->pipe, &fd) != 0 ||
	    (fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) == -1)
		return -1;
	struct files_req *f = xcalloc(1, sizeof(*f));
	*f = (struct files_req){ .c = c, .spec = spec, .errs = errs, .bad = bad,
		.submit = submit, .plan = plan, .fd = fd, .path = xstrdup(path),
		.text = xstrdup(text), .uid = c->peer.uid };
	f->w.data = f;
	if (uv_queue_work(ctx.loop, &f->w, files_work, files_done) != 0) {
		close(fd);
		free(f->path);
		free(f->text);
		free(f);
		return -1;
	}
	c->busy = 1;
	uv_read_stop((uv_stream_t *)&c->pipe);
	return 0;
}

static void
check_submit(struct client *c, const cJSON *req, int submit)
{
	const char *path = arg_str(req, "path"), *text = arg_str(req, "text");
	const char *name = arg_str(req, "name");
	const cJSON *plan = cJSON_GetObjectItemCaseSensitive(req, "plan");
	if (plan != NULL && !cJSON_IsBool(plan)) {
		reply_err(c, PLP_EINVAL, "request field \"plan\" must be true or false");
		return;
	}
	if (path == NULL || text == NULL) {
		reply_err(c, PLP_EINVAL, "%s needs \"path\" and \"text\"",
		    pl_verb_name(submit ? PLV_submit : PLV_check));
		return;
	}
	char *errs = NULL;
	struct spec *spec = spec_load(path, text, CONF, &errs);
	if (spec != NULL && name != NULL) {
		free(spec->name);
		spec->name = xstrdup(name);
	}
	/* Split: all but the files here, the files as the peer (above);
	 * root's too when the daemon process is a user of its own. */
	if (spec != NULL && priv_active() && (c->peer.uid != 0 || geteuid() != 0)) {
		int bad = spec_check(spec, CONF, host_check_section, SPEC_CHECK_NOFILES,
		    &errs) == -1;
		if (files_start(c, spec, errs, bad, path, text, submit, cJSON_IsTrue(plan)) == 0)
			return;
		reply_err(c, PLP_EINTERNAL, "the check of the spec's files could not be started");
		free(errs);
		spec_free(spec);
		return;
	}
	/* Not split (or root's own spec): the files with the peer's
	 * file-system rights, taken by the daemon for the check. */
	struct peer_fs pfs = { .on = 0 };
	int bad = spec == NULL || peer_fs_enter(c, &pfs) == -1;
	if (!bad)
		bad = spec_check(spec, CONF, host_check_section, 0, &errs) == -1;
	peer_fs_leave(&pfs);
	check_finish(c, spec, errs, bad, submit, cJSON_IsTrue(plan));
}

static void
v_check(struct client *c, const cJSON *req)
{
	check_submit(c, req, 0);
}

static void
v_submit(struct client *c, const cJSON *req)
{
	check_submit(c, req, 1);
}

/* The run a request names (NAME: its newest revision; NAME@N: revision
 * N), by its stored name, if the peer may see and act on it (access.c);
 * else the ENOENT reply, the same for a run that does not exist and for
 * another user's (access_no_run()), and NULL. The name lives in c until
 * the next call. */
static const char *
known_run(struct client *c, const cJSON *req)
{
	const char *run = arg_str(req, "run");
	int64_t submitter;
	char msg[512];
	if (run == NULL) {
		reply_err(c, PLP_ENOENT, "no run (none given)");
		return NULL;
	}
	int found = store_run_resolve(ctx.store, run, 0, c->run, sizeof(c->run)) == 0 &&
	    store_run_submitter(ctx.store, c->run, &submitter) == 0;
	if (!found || !access_run(c->viewer, submitter)) {
		reply_err(c, PLP_ENOENT, "%s", access_no_run(c->viewer, run, msg, sizeof(msg)));
		if (found)
			log_info("control: uid %d pid %d refused run %s", (int)c->peer.uid,
			    (int)c->pid, run);
		return NULL;
	}
	return c->run;
}

static void
v_logs(struct client *c, const cJSON *req)
{
	const char *run = arg_str(req, "run"), *job = arg_str(req, "job");
	const cJSON *off = cJSON_GetObjectItemCaseSensitive(req, "offset");
	if (run == NULL || job == NULL) {
		reply_err(c, PLP_EINVAL, "logs needs \"run\" and \"job\"");
		return;
	}
	if ((run = known_run(c, req)) == NULL)
		return;
	const char *path = sched_job_log(run, job);
	if (path == NULL) {
		reply_err(c, PLP_ENOENT, "no job %s in run %s", job, run);
		return;
	}
	off_t o = cJSON_IsNumber(off) && off->valuedouble > 0 ? (off_t)off->valuedouble : 0;
	cJSON *r = cJSON_CreateObject();
	char buf[65536 + 1];
	ssize_t n = 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int more = 0;
	if (fd >= 0) {
		n = pread(fd, buf, sizeof(buf) - 1, o);
		if (n < 0)
			n = 0;
		struct stat st;
		if (fstat(fd, &st) == 0 && st.st_size > o + n)
			more = 1;
		close(fd);
	}
	buf[n] = '\0';
	/* Keep the JSON text valid: no NUL inside. */
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = '?';
	cJSON_AddStringToObject(r, "data", buf);
	cJSON_AddNumberToObject(r, "offset", (double)(o + n));
	cJSON_AddBoolToObject(r, "more", more);
	cJSON_AddStringToObject(r, "state", pl_job_state_name(sched_job_state(run, job)));
	reply_ok(c, r);
}

static void
v_hello(struct client *c, const cJSON *req)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, "version");
	if (!cJSON_IsNumber(v) || v->valueint != PL_PROTO_VERSION) {
		reply_err(c, PLP_EVERSION, "protocol version mismatch: client %d, pipelined %d",
		    cJSON_IsNumber(v) ? v->valueint : -1, PL_PROTO_VERSION);
		client_close(c);
		return;
	}
	c->hello = 1;
	cJSON *r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "version", PL_PROTO_VERSION);
	cJSON_AddStringToObject(r, "daemon", "pipelined " PL_VERSION);
	cJSON_AddBoolToObject(r, "may_write", peer_may_write(c));
	reply_ok(c, r);
}

static void
v_ping(struct client *c, const cJSON *req)
{
	reply_ok(c, NULL);
}

/* Why an open job waits, from the scheduler, as the job's "wait":
 * {"reason":"after","job"}, {"reason":"backoff","until"},
 * {"reason":"slots"|"resource","resource","need","used","capacity",
 * "place","held_by":["RUN/JOB"...],"holders"} (and "kept","kept_for":
 * JOB where a sweep keeps the resource for an earlier variant's job of
 * the same run), {"reason":"stopping"}. */
static void
add_wait(struct client *c, cJSON *job, const char *run)
{
	static const char *const why[] = { [SW_AFTER] = "after", [SW_BACKOFF] = "backoff",
	    [SW_SLOTS] = "slots", [SW_RESOURCE] = "resource", [SW_STOPPING] = "stopping" };
	struct sched_wait w;
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(job, "name");
	if (!cJSON_IsString(name) || sched_job_wait(run, name->valuestring, &w) == -1 ||
	    w.why == SW_NONE)
		return;
	cJSON *o = cJSON_AddObjectToObject(job, "wait");
	cJSON_AddStringToObject(o, "reason", why[w.why]);
	if (w.why == SW_AFTER)
		cJSON_AddStringToObject(o, "job", w.what);
	if (w.why == SW_BACKOFF)
		cJSON_AddNumberToObject(o, "until", w.next_at);
	if (w.why != SW_SLOTS && w.why != SW_RESOURCE)
		return;
	if (w.why == SW_RESOURCE) {
		cJSON_AddStringToObject(o, "resource", w.what);
		cJSON_AddNumberToObject(o, "need", w.need);
		if (w.kept_for[0] != '\0') {
			cJSON_AddNumberToObject(o, "kept", w.kept);
			cJSON_AddStringToObject(o, "kept_for", w.kept_for);
		}
	}
	cJSON_AddNumberToObject(o, "used", w.used);
	cJSON_AddNumberToObject(o, "capacity", w.capacity);
	cJSON_AddNumberToObject(o, "place", w.place);
	cJSON *h = cJSON_AddArrayToObject(o, "held_by");
	for (int i = 0; i < w.nholders && i < SCHED_HOLDERS; i++) {
		/* A run this peer may not see is not named (access.c). */
		char hr[256];
		int64_t sub = -1;
		snprintf(hr, sizeof(hr), "%s", w.holders[i]);
		hr[strcspn(hr, "/")] = '\0';
		int seen = store_run_submitter(ctx.store, hr, &sub) == 0 && access_run(c->viewer, sub);
		cJSON_AddItemToArray(h, cJSON_CreateString(seen ? w.holders[i] : "another user's run"));
	}
	cJSON_AddNumberToObject(o, "holders", w.nholders);
}

static void
v_status(struct client *c, const cJSON *req)
{
	const char *run = arg_str(req, "run");
	if (run != NULL) {
		if ((run = known_run(c, req)) == NULL)
			return;
		cJSON *r = store_q_run(ctx.store, run);
		if (r == NULL) {
			char msg[512];
			reply_err(c, PLP_ENOENT, "%s", access_no_run(c->viewer, run, msg, sizeof(msg)));
			return;
		}
		cJSON *j;
		cJSON_ArrayForEach(j, cJSON_GetObjectItemCaseSensitive(r, "jobs")) {
			add_wait(c, j, run);
			/* A sweep's variant: its values beside it, and the
			 * job of the spec it is a copy of. */
			const cJSON *nm = cJSON_GetObjectItemCaseSensitive(j, "name");
			char *origin = NULL;
			char *var = cJSON_IsString(nm) ? sched_job_variant(run, nm->valuestring,
			    &origin) : NULL;
			if (var != NULL)
				cJSON_AddStringToObject(j, "variant", var);
			if (var != NULL && origin != NULL)
				cJSON_AddStringToObject(j, "origin", origin);
			free(var);
			free(origin);
		}
		reply_ok(c, r);
		return;
	}
	cJSON *r = cJSON_CreateObject();
	cJSON_AddItemToObject(r, "runs", store_q_runs(ctx.store, c->viewer));
	cJSON_AddNumberToObject(r, "running_jobs", sched_running());
	cJSON_AddNumberToObject(r, "last_event", (double)store_last_event(ctx.store));
	reply_ok(c, r);
}

static void
v_list(struct client *c, const cJSON *req)
{
	v_status(c, req);
}

/* Cancel or retry: the scheduler's message, or its refusal. */
static void
cancel_retry(struct client *c, const cJSON *req, int cancel)
{
	const char *run = arg_str(req, "run"), *job = arg_str(req, "job");
	char msg[512];
	if (run == NULL) {
		reply_err(c, PLP_EINVAL, "%s needs \"run\"",
		    pl_verb_name(cancel ? PLV_cancel : PLV_retry));
		return;
	}
	/* A retry runs the jobs again as the run's owner: only for who may
	 * act on the run. */
	if ((run = known_run(c, req)) == NULL)
		return;
	enum pl_proto_err e = cancel ? sched_cancel(run, msg, sizeof(msg)) :
	    sched_retry(run, job, msg, sizeof(msg));
	if (e != PLP_OK) {
		reply_err(c, e, "%s", msg);
		return;
	}
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "message", msg);
	reply_ok(c, r);
}

static void
v_cancel(struct client *c, const cJSON *req)
{
	cancel_retry(c, req, 1);
}

static void
v_retry(struct client *c, const cJSON *req)
{
	cancel_retry(c, req, 0);
}

/* The status page's address, and a one-time login code for it, whose
 * session sees the runs this peer may see. */
static void
v_web(struct client *c, const cJSON *req)
{
	cJSON *r = cJSON_CreateObject();
	char code[40];
	cJSON_AddStringToObject(r, "listen", CONF->http_listen);
	/* The link's session sees what this peer may see. */
	if (CONF->http_listen[0] != '\0') {
		if (ctx.login_code == NULL ||
		    ctx.login_code(code, sizeof(code), c->viewer, c->peer.uid) == -1) {
			cJSON_Delete(r);
			reply_err(c, PLP_EBUSY, "no login link could be made: too many unused "
			    "(see the daemon's log)");
			return;
		}
		cJSON_AddStringToObject(r, "code", code);
	}
	reply_ok(c, r);
}

static void
v_values(struct client *c, const cJSON *req)
{
	const char *run = known_run(c, req);
	if (run == NULL)
		return;
	cJSON *r = cJSON_CreateObject();
	cJSON_AddItemToObject(r, "values", store_q_values(ctx.store, run, arg_str(req, "job")));
	reply_ok(c, r);
}

/* Why a job ran instead of being reused, or what it took (reuse.c). */
static void
v_explain(struct client *c, const cJSON *req)
{
	const char *run = known_run(c, req), *job = arg_str(req, "job");
	if (run == NULL)
		return;
	if (job == NULL) {
		reply_err(c, PLP_EINVAL, "explain needs a job");
		return;
	}
	cJSON *r = reuse_explain(ctx.store, run, job, c->viewer);
	if (r == NULL) {
		reply_err(c, PLP_ENOENT, "run %s has no job %s", run, job);
		return;
	}
	reply_ok(c, r);
}

static void
v_artifacts(struct client *c, const cJSON *req)
{
	const char *run = known_run(c, req);
	if (run == NULL)
		return;
	cJSON *r = cJSON_CreateObject();
	cJSON_AddItemToObject(r, "artifacts", store_q_artifacts(ctx.store, run));
	reply_ok(c, r);
}

static void
v_metrics(struct client *c, const cJSON *req)
{
	const char *run = known_run(c, req), *job = arg_str(req, "job");
	if (run == NULL)
		return;
	if (job == NULL) {
		reply_err(c, PLP_EINVAL, "metrics needs \"job\"");
		return;
	}
	cJSON *r = cJSON_CreateObject();
	cJSON_AddItemToObject(r, "metrics", store_q_metrics(ctx.store, run, job,
	    arg_str(req, "name")));
	reply_ok(c, r);
}

/* The bytes each run the peer sees holds, or one run's per job and
 * artifact (gc.c). */
static void
v_du(struct client *c, const cJSON *req)
{
	const char *run = arg_str(req, "run");
	if (run != NULL && (run = known_run(c, req)) == NULL)
		return;
	cJSON *r = gc_du(ctx.store, CONF, c->viewer, run);
	if (r == NULL)
		reply_err(c, PLP_EINTERNAL, "the store could not be read (see the daemon's log)");
	else
		reply_ok(c, r);
}

/* gc: root, the daemon's user and admin_group on every run, a member of
 * the group on its own (the viewer); "run" names one run, "dry_run"
 * removes nothing. */
static void
v_gc(struct client *c, const cJSON *req)
{
	const char *run = arg_str(req, "run");
	const cJSON *dry = cJSON_GetObjectItemCaseSensitive(req, "dry_run");
	char err[1024];
	if (dry != NULL && !cJSON_IsBool(dry)) {
		reply_err(c, PLP_EINVAL, "request field \"dry_run\" must be true or false");
		return;
	}
	if (run != NULL && (run = known_run(c, req)) == NULL)
		return;
	cJSON *r = NULL;
	enum pl_proto_err e = gc_collect(ctx.store, CONF, c->viewer, (int64_t)c->peer.uid, run,
	    cJSON_IsTrue(dry), &r, err, sizeof(err));
	if (e != PLP_OK) {
		reply_err(c, e, "%s", err);
		return;
	}
	reply_ok(c, r);
}

/* The dispatch table, generated from proto.h's list: a verb without its
 * v_VERB handler does not compile. Indexed by enum pl_verb. */
typedef void verb_fn(struct client *, const cJSON *);
static const struct verb {
	const char *name;
	verb_fn *fn;
	enum pl_access access;
} verbs[] = {
#define PL_X_VERB(v, a, d) [PLV_##v] = { #v, v_##v, a },
	PL_VERBS(PL_X_VERB)
#undef PL_X_VERB
};

static void
dispatch(struct client *c, const char *line)
{
	cJSON *req = cJSON_Parse(line);
	if (req == NULL || !cJSON_IsObject(req)) {
		reply_err(c, PLP_EPROTO, "malformed request: not a JSON object");
		cJSON_Delete(req);
		return;
	}
	const char *name = arg_str(req, "verb");
	char bad[128];
	if (name == NULL) {
		reply_err(c, PLP_EPROTO, "request without \"verb\"");
		goto out;
	}
	if (bad_field(req, bad, sizeof(bad))) {
		reply_err(c, PLP_EINVAL, "%s", bad);
		goto out;
	}
	const struct verb *v = NULL;
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcmp(name, verbs[i].name) == 0)
			v = &verbs[i];
	enum pl_verb vi = v ? (enum pl_verb)(v - verbs) : PLV_COUNT;
	/* cJSON ends a string at a \u0000: the rest would be lost silently.
	 * In a spec's text (a file read by a client of ours can hold one) the
	 * error names the line. */
	if (json_has_nul(line)) {
		const char *path = arg_str(req, "path"), *text = arg_str(req, "text");
		if (text != NULL && (vi == PLV_check || vi == PLV_submit))
			reply_err(c, PLP_EINVAL, "%s:%d: -: a NUL byte (a spec is text)",
			    path ? path : "-", nul_line(text, strlen(text) + 1));
		else
			reply_err(c, PLP_EINVAL, "a NUL character in a request string");
		goto out;
	}
	if (vi != PLV_hello && !c->hello) {
		reply_err(c, PLP_EPROTO, "the first request must be hello with \"version\": %d",
		    PL_PROTO_VERSION);
		goto out;
	}
	if (v == NULL) {
		reply_err(c, PLP_EVERB, "unknown verb \"%.64s\"", name);
		goto out;
	}
	/* check opens the files a spec names: not for read-only peers, who
	 * can run `pipelinectl check` themselves, with their own rights. */
	if (v->access == PL_WRITE && !peer_may_write(c)) {
		reply_err(c, PLP_EPERM, "%s refused: uid %d is not root, the daemon's user, or in"
		    " group %s%s", v->name, (int)c->peer.uid, CONF->group[0] ? CONF->group :
		    "(none set)", vi == PLV_check ? "; pipelinectl check needs no daemon" : "");
		log_info("control: %s refused for uid %d pid %d", v->name, (int)c->peer.uid,
		    (int)c->pid);
		goto out;
	}
	v->fn(c, req);
out:
	cJSON_Delete(req);
}

static void
on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct client *c = h->data;
	if (c->cap - c->len < 65536) {
		size_t ncap = c->cap ? c->cap * 2 : 65536 * 2;
		c->buf = xrealloc(c->buf, ncap, 1);
		c->cap = ncap;
	}
	*buf = uv_buf_init(c->buf + c->len, (unsigned)(c->cap - c->len));
}

static void
on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct client *c = s->data;
	if (nread < 0) {
		client_close(c);
		return;
	}
	c->last = uv_now(ctx.loop);
	c->len += (size_t)nread;
	client_lines(c);
}

/* Answer the whole lines c sent, in order, until one starts a plan. */
static void
client_lines(struct client *c)
{
	while (!c->busy) {
		char *nl = memchr(c->buf, '\n', c->len);
		if (nl == NULL)
			break;
		*nl = '\0';
		size_t n = (size_t)(nl - c->buf) + 1;
		if (n > PL_PROTO_MAX_LINE) {
			reply_err(c, PLP_ETOOLONG, "request line over %d bytes", PL_PROTO_MAX_LINE);
			client_close(c);
			return;
		}
		if (n > 1 && c->refused != NULL) {
			reply_err(c, PLP_EPERM, "%s", c->refused);
			client_close(c);
			return;
		}
		if (n > 1)
			dispatch(c, c->buf);
		if (c->closing)
			return;
		memmove(c->buf, c->buf + n, c->len - n);
		c->len -= n;
	}
	if (c->len > PL_PROTO_MAX_LINE) {
		reply_err(c, PLP_ETOOLONG, "request line over %d bytes", PL_PROTO_MAX_LINE);
		client_close(c);
		return;
	}
	/* Give back memory after a large request. */
	if (c->cap > 1 << 20 && c->len < 65536) {
		c->buf = xrealloc(c->buf, 65536 * 2, 1);
		c->cap = 65536 * 2;
	}
}

static void
on_connection(uv_stream_t *srv, int status)
{
	if (status < 0)
		return;
	struct client *c = xcalloc(1, sizeof(*c));
	uv_pipe_init(ctx.loop, &c->pipe, 0);
	c->pipe.data = c;
	c->last = uv_now(ctx.loop);
	c->next = clients;
	if (clients)
		clients->prev = c;
	clients = c;
	nclients++;
	if (uv_accept(srv, (uv_stream_t *)&c->pipe) != 0) {
		client_close(c);
		return;
	}
	if (nclients > CONF->control_max_clients) {
		reply_err(c, PLP_EBUSY, "too many control connections (control_max_clients = %d)",
		    CONF->control_max_clients);
		client_close(c);
		return;
	}
	uv_os_fd_t fd;
	int pr = uv_fileno((uv_handle_t *)&c->pipe, &fd) != 0 ? -1 :
	    access_peer_of(fd, &c->peer, &c->pid);
	if (pr == -2) {
		/* Answered at its first request: a socket closed before it
		 * reads what the peer sent loses the reply too. */
		char msg[256];
		access_too_many(&c->peer, msg, sizeof(msg));
		c->refused = xstrdup(msg);
		c->peer.ngroups = 0;
	} else if (pr != 0) {
		client_close(c);
		return;
	}
	c->viewer = access_viewer(CONF, &c->peer);
	uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}

/* Close the connections that have sent nothing for control_idle_timeout;
 * run every second. */
static void
on_sweep(uv_timer_t *t)
{
	uint64_t now = uv_now(ctx.loop);
	uint64_t idle = (uint64_t)(CONF->control_idle_timeout * 1000);
	for (struct client *c = clients; c; c = c->next)
		if (!c->closing && !c->busy && now - c->last >= idle)
			client_close(c);
}

int
control_listen(const struct listen_ctx *c, const char *path)
{
	ctx = *c;
	if (sock_listen(ctx.loop, &ctl_server, path, 0660, CONF->gid, on_connection) == -1)
		return -1;
	uv_timer_init(ctx.loop, &ctl_sweep);
	uv_timer_start(&ctl_sweep, on_sweep, 1000, 1000);
	uv_unref((uv_handle_t *)&ctl_sweep);
	return 0;
}
