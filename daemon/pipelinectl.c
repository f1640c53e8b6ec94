/*
 * pipelinectl: the operator's tool for pipelined.
 *
 *   pipelinectl [-f conf] [-s control.sock] [-F feed.sock] [--json] VERB ...
 *
 * The verbs are in the table cmds[] below: those of the protocol named by
 * the wire vocabulary in include/pipeline/proto.h, shared with the daemon,
 * and pipelinectl's own (stage, in-process, no daemon; gguf, report, plot,
 * doctor). Errors go through err(3); a refusal exits non-zero.
 */
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pipelined.h"
#include "ctl.h"
#include "plcommon.h"

int ctl_json;
static const char *conf_path;
static char control_path[PATH_MAX];
static char feed_path[PATH_MAX];
static struct conf conf;
static int have_conf;

static void usage(void) __attribute__((noreturn));

/* ---- configuration and sockets -------------------------------------- */

static void
load_conf(void)
{
	char buf[PATH_MAX];
	const char *path = conf_path;
	if (path == NULL)
		path = getenv("PIPELINED_CONF");
	if (path == NULL) {
		snprintf(buf, sizeof(buf), "%s/../etc/pipelined.conf", self_dir());
		if (access(buf, R_OK) == 0)
			path = buf;
		else if (access("/etc/pipelined.conf", R_OK) == 0)
			path = "/etc/pipelined.conf";
	}
	if (path != NULL) {
		char *errs = NULL;
		if (conf_load(&conf, path, &errs) == -1) {
			if (conf_path != NULL)
				errx(1, "%s", errs ? errs : path);
			warnx("ignoring %s:\n%s", path, errs ? errs : "");
		}
		free(errs);
		have_conf = 1;
	} else {
		char *errs = NULL;
		conf_load(&conf, "/dev/null", &errs);
		free(errs);
	}
	if (control_path[0] == '\0') {
		const char *e = getenv("PIPELINED_SOCKET");
		snprintf(control_path, sizeof(control_path), "%s", e ? e : conf.control_socket);
	}
	if (feed_path[0] == '\0') {
		const char *e = getenv("PIPELINED_FEED");
		snprintf(feed_path, sizeof(feed_path), "%s", e ? e : conf.feed_socket);
	}
}

const struct conf *
ctl_conf(void)
{
	static int loaded;

	if (!loaded) {
		load_conf();
		loaded = 1;
	}
	return &conf;
}

static int
sock_connect(const char *path)
{
	struct sockaddr_un sun;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path))
		errx(1, "%s: socket path too long", path);
	strcpy(sun.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd == -1)
		err(1, "socket");
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		if (errno == ENOENT || errno == ECONNREFUSED)
			errx(1, "pipelined is not running (no daemon at %s)", path);
		if (errno == EACCES)
			errx(1, "%s: permission denied (are you in the daemon's group?)", path);
		err(1, "connect %s", path);
	}
	return fd;
}

struct conn {
	int fd;
	char *buf;
	size_t len, cap;
};

/* Read one line (without the newline); NULL at EOF. */
static char *
conn_line(struct conn *c)
{
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);
		if (nl != NULL) {
			size_t n = (size_t)(nl - c->buf);
			char *line = strndup(c->buf, n);
			memmove(c->buf, nl + 1, c->len - n - 1);
			c->len -= n + 1;
			return line;
		}
		if (c->cap - c->len < 65536) {
			c->cap = c->cap ? c->cap * 2 : 131072;
			c->buf = realloc(c->buf, c->cap);
			if (c->buf == NULL)
				err(1, "realloc");
		}
		ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return NULL;
		c->len += (size_t)r;
	}
}

static void
conn_send(struct conn *c, cJSON *req)
{
	char *t = cJSON_PrintUnformatted(req);
	size_t n = strlen(t);
	t[n] = '\n';
	if (plc_write_all(c->fd, t, n + 1) == -1)
		err(1, "write to pipelined");
	free(t);
}

static struct conn ctl_conn = { .fd = -1 };

/* One request on the shared control connection (hello first). */
static int
request(enum pl_verb verb, cJSON *args, cJSON **result, int quiet)
{
	if (ctl_conn.fd == -1) {
		load_conf();
		ctl_conn.fd = sock_connect(control_path);
		cJSON *h = cJSON_CreateObject();
		cJSON_AddStringToObject(h, "verb", pl_verb_name(PLV_hello));
		cJSON_AddNumberToObject(h, "version", PL_PROTO_VERSION);
		conn_send(&ctl_conn, h);
		cJSON_Delete(h);
		char *line = conn_line(&ctl_conn);
		if (line == NULL)
			errx(1, "pipelined closed the connection during the handshake");
		cJSON *r = cJSON_Parse(line);
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "status");
		if (!cJSON_IsString(st) || strcmp(st->valuestring, "ok") != 0) {
			const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
			errx(1, "pipelined refused the handshake: %s",
			    cJSON_IsString(e) ? e->valuestring : line);
		}
		cJSON_Delete(r);
		free(line);
	}
	cJSON *req = args ? args : cJSON_CreateObject();
	cJSON_AddStringToObject(req, "verb", pl_verb_name(verb));
	conn_send(&ctl_conn, req);
	cJSON_Delete(req);
	for (;;) {
		char *line = conn_line(&ctl_conn);
		if (line == NULL)
			errx(1, "pipelined closed the connection");
		cJSON *r = cJSON_Parse(line);
		if (r == NULL)
			errx(1, "pipelined sent a malformed line: %.200s", line);
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "status");
		if (!cJSON_IsString(st)) { /* a data line */
			if (!quiet)
				printf("%s\n", line);
			cJSON_Delete(r);
			free(line);
			continue;
		}
		free(line);
		if (strcmp(st->valuestring, "ok") == 0) {
			if (result)
				*result = cJSON_DetachItemFromObject(r, "result");
			cJSON_Delete(r);
			return 0;
		}
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(r, "code");
		if (ctl_json) {
			char *t = cJSON_PrintUnformatted(r);
			printf("%s\n", t);
			free(t);
		} else {
			fprintf(stderr, "pipelinectl: %s: %s%s%s%s", pl_verb_name(verb),
			    cJSON_IsString(e) ? e->valuestring : "error",
			    cJSON_IsString(code) ? " (" : "", cJSON_IsString(code) ? code->valuestring : "",
			    cJSON_IsString(code) ? ")\n" : "\n");
		}
		cJSON_Delete(r);
		return -1;
	}
}

int
ctl_request(enum pl_verb verb, cJSON *args, cJSON **result)
{
	return request(verb, args, result, 1);
}

static void
print_json(const cJSON *o)
{
	char *t = cJSON_PrintUnformatted(o);
	printf("%s\n", t);
	free(t);
}

const char *
jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : "";
}

double
jnum(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void
fmt_time(double t, char *buf, size_t len)
{
	if (t <= 0) {
		snprintf(buf, len, "-");
		return;
	}
	time_t s = (time_t)t;
	struct tm tm;
	localtime_r(&s, &tm);
	strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

static char *
read_spec(const char *path, char *abs, size_t abslen)
{
	size_t len;
	char *text = plc_read_file(path, &len, 4 << 20);
	if (text == NULL)
		err(1, "%s", path);
	int nul = nul_line(text, len);
	if (nul)
		errx(1, "%s:%d: -: a NUL byte (a spec is text)", path, nul);
	char *r = realpath(path, NULL);
	snprintf(abs, abslen, "%s", r ? r : path);
	free(r);
	return text;
}

/* ---- verbs ---------------------------------------------------------- */

static int
cmd_check(int argc, char **argv)
{
	if (argc != 2)
		usage();
	load_conf();
	plugin_load_dir(conf.plugin_dir, &plugin_host);
	char abs[PATH_MAX];
	char *text = read_spec(argv[1], abs, sizeof(abs));
	char *errs = NULL;
	/* Messages name the file as the operator typed it. */
	struct spec *s = spec_parse(argv[1], text, &errs);
	int ok = s != NULL && spec_check(s, have_conf ? &conf : NULL, host_check_section, &errs) == 0;
	if (ctl_json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddBoolToObject(o, "ok", ok);
		if (s)
			cJSON_AddStringToObject(o, "run", s->name);
		cJSON *a = cJSON_AddArrayToObject(o, "errors");
		char *save = NULL;
		for (char *l = errs ? strtok_r(errs, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save))
			cJSON_AddItemToArray(a, cJSON_CreateString(l));
		print_json(o);
		cJSON_Delete(o);
	} else if (ok) {
		printf("%s: OK (run %s, %d jobs)\n", argv[1], s->name, s->njobs);
	} else {
		fputs(errs ? errs : "invalid spec\n", stderr);
	}
	free(errs);
	free(text);
	spec_free(s);
	return ok ? 0 : 1;
}

static int
cmd_submit(int argc, char **argv)
{
	const char *name = NULL, *file = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
			name = argv[++i];
		else if (file == NULL)
			file = argv[i];
		else
			usage();
	}
	if (file == NULL)
		usage();
	char abs[PATH_MAX];
	char *text = read_spec(file, abs, sizeof(abs));
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "path", abs);
	cJSON_AddStringToObject(a, "text", text);
	if (name)
		cJSON_AddStringToObject(a, "name", name);
	free(text);
	cJSON *r = NULL;
	if (request(PLV_submit, a, &r, 0) == -1)
		return 1;
	if (ctl_json)
		print_json(r);
	else
		printf("%s\n", jstr(r, "run"));
	cJSON_Delete(r);
	return 0;
}

static const char *
state_mark(const char *st)
{
	int js = pl_job_state_find(st);
	return js == PLJ_succeeded ? "ok" : js == PLJ_failed ? "FAILED" : st;
}

static void
print_jobs_table(const cJSON *jobs)
{
	printf("%-16s %-12s %-10s %4s %-20s %s\n", "JOB", "STAGE", "STATE", "TRY", "PROGRESS", "MESSAGE");
	const cJSON *j;
	cJSON_ArrayForEach(j, jobs) {
		char prog[32] = "";
		double done = jnum(j, "progress_done"), total = jnum(j, "progress_total");
		if (total > 0)
			snprintf(prog, sizeof(prog), "%.0f/%.0f %s", done, total, jstr(j, "progress_unit"));
		printf("%-16s %-12s %-10s %4.0f %-20s %s\n", jstr(j, "name"), jstr(j, "stage"),
		    state_mark(jstr(j, "state")), jnum(j, "attempts"), prog, jstr(j, "message"));
	}
}

static int run_exit(const char *s);

static int
cmd_status(int argc, char **argv)
{
	if (argc > 2)
		usage();
	cJSON *a = cJSON_CreateObject();
	if (argc == 2)
		cJSON_AddStringToObject(a, "run", argv[1]);
	cJSON *r = NULL;
	if (request(PLV_status, a, &r, 0) == -1)
		return 1;
	int rc = argc == 2 ? run_exit(jstr(cJSON_GetObjectItemCaseSensitive(r, "run"), "state")) : 0;
	if (ctl_json) {
		print_json(r);
	} else if (argc == 2) {
		const cJSON *run = cJSON_GetObjectItemCaseSensitive(r, "run");
		char t[64];
		fmt_time(jnum(run, "created"), t, sizeof(t));
		printf("run %s: %s (submitted %s%s%s)\n", jstr(run, "name"), jstr(run, "state"), t,
		    *jstr(run, "previous") ? ", previous " : "", jstr(run, "previous"));
		if (*jstr(run, "message"))
			printf("  %s\n", jstr(run, "message"));
		print_jobs_table(cJSON_GetObjectItemCaseSensitive(r, "jobs"));
	} else {
		const cJSON *runs = cJSON_GetObjectItemCaseSensitive(r, "runs");
		printf("%-20s %-10s %-9s %-20s %s\n", "RUN", "STATE", "JOBS", "SUBMITTED", "PREVIOUS");
		const cJSON *x;
		cJSON_ArrayForEach(x, runs) {
			char t[64], jobs[32];
			fmt_time(jnum(x, "created"), t, sizeof(t));
			snprintf(jobs, sizeof(jobs), "%.0f/%.0f", jnum(x, "succeeded"), jnum(x, "jobs"));
			printf("%-20s %-10s %-9s %-20s %s\n", jstr(x, "name"), jstr(x, "state"), jobs, t,
			    jstr(x, "previous"));
		}
	}
	cJSON_Delete(r);
	return rc;
}

static int
cmd_logs(int argc, char **argv)
{
	int follow = 0;
	const char *run = NULL, *job = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-f") == 0)
			follow = 1;
		else if (run == NULL)
			run = argv[i];
		else if (job == NULL)
			job = argv[i];
		else
			usage();
	}
	if (job == NULL)
		usage();
	double offset = 0;
	for (;;) {
		cJSON *a = cJSON_CreateObject();
		cJSON_AddStringToObject(a, "run", run);
		cJSON_AddStringToObject(a, "job", job);
		cJSON_AddNumberToObject(a, "offset", offset);
		cJSON *r = NULL;
		if (request(PLV_logs, a, &r, 0) == -1)
			return 1;
		const char *data = jstr(r, "data");
		if (ctl_json)
			print_json(r);
		else
			fputs(data, stdout);
		fflush(stdout);
		offset = jnum(r, "offset");
		int more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "more"));
		const char *state = jstr(r, "state");
		int st = pl_job_state_find(state);
		int active = st == PLJ_running || st == PLJ_pending || st == PLJ_retrying;
		cJSON_Delete(r);
		if (more)
			continue;
		if (!follow || !active)
			break;
		usleep(300000);
	}
	return 0;
}

static int
cmd_simple(int argc, char **argv, enum pl_verb verb, int minargs, int maxargs)
{
	if (argc - 1 < minargs || argc - 1 > maxargs)
		usage();
	cJSON *a = cJSON_CreateObject();
	if (argc > 1)
		cJSON_AddStringToObject(a, "run", argv[1]);
	if (argc > 2)
		cJSON_AddStringToObject(a, "job", argv[2]);
	if (argc > 3)
		cJSON_AddStringToObject(a, "name", argv[3]);
	cJSON *r = NULL;
	if (request(verb, a, &r, 0) == -1)
		return 1;
	if (ctl_json) {
		print_json(r);
	} else if (verb == PLV_values) {
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "values"))
			printf("%-14s %-24s %s\n", jstr(x, "job"), jstr(x, "key"), jstr(x, "value"));
	} else if (verb == PLV_artifacts) {
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "artifacts"))
			printf("%-14s %-10s %12.0f %s %s\n", jstr(x, "job"), jstr(x, "name"),
			    jnum(x, "size"), jstr(x, "sha256"), jstr(x, "path"));
	} else if (verb == PLV_metrics) {
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "metrics"))
			printf("%-12s %8.0f %.6g\n", jstr(x, "name"), jnum(x, "step"), jnum(x, "value"));
	} else {
		printf("%s: %s\n", argv[1], jstr(r, "message"));
	}
	cJSON_Delete(r);
	return 0;
}

/* ---- web ------------------------------------------------------------- */

/* The status page's address; off loopback, a one-time login link. */
static int
cmd_web(int argc, char **argv)
{
	if (argc > 2)
		usage();
	cJSON *r = NULL;
	if (request(PLV_web, NULL, &r, 0) == -1)
		return 1;
	const char *listen = jstr(r, "listen"), *code = jstr(r, "code");
	if (*listen == '\0') {
		cJSON_Delete(r);
		errx(1, "web: the daemon serves no page (set http_listen in pipelined.conf)");
	}
	char url[1024];
	if (*code)
		snprintf(url, sizeof(url), "http://%s/login?code=%s", listen, code);
	else
		snprintf(url, sizeof(url), "http://%s/%s%s", listen, argc == 2 ? "#run=" : "",
		    argc == 2 ? argv[1] : "");
	if (ctl_json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "url", url);
		print_json(o);
		cJSON_Delete(o);
	} else {
		printf("%s\n", url);
		if (*code)
			fprintf(stderr, "pipelinectl: the link logs in once, within ten minutes\n");
	}
	cJSON_Delete(r);
	return 0;
}

/* ---- watch ----------------------------------------------------------- */

/* Progress samples kept per job for its rate: the last RATE_N, of which
 * those in the newest RATE_WINDOW seconds count. */
#define RATE_N		32
#define RATE_WINDOW	60.0

struct wjob {
	char name[128];
	char stage[32];
	char state[16];
	double done, total;
	char unit[16];
	int attempt;
	char msg[160];
	char note[160];		/* a stage's figures (corpus_check's counts) */
	double t0;		/* when it began running (feed time), or 0 */
	double loss;		/* the newest loss metric, if has_loss */
	int has_loss;
	double hist;		/* median seconds in earlier runs, or -1 */
	double rts[RATE_N], rdone[RATE_N];
	int rn, rpos;
};

struct watch {
	struct wjob *jobs;
	int njobs;
	int tty;
	int drawn;
	int nhist;		/* earlier runs the durations came from */
	double now;		/* the newest event's time */
	char run_state[16];
	char run_msg[256];
};

static struct wjob *
wjob_find(struct watch *w, const char *name)
{
	for (int i = 0; i < w->njobs; i++)
		if (strcmp(w->jobs[i].name, name) == 0)
			return &w->jobs[i];
	w->jobs = realloc(w->jobs, (size_t)(w->njobs + 1) * sizeof(*w->jobs));
	struct wjob *j = &w->jobs[w->njobs++];
	memset(j, 0, sizeof(*j));
	snprintf(j->name, sizeof(j->name), "%s", name);
	snprintf(j->state, sizeof(j->state), "%s", pl_job_state_name(PLJ_pending));
	return j;
}

static int
run_final(const char *s)
{
	int st = pl_run_state_find(s);
	return st != -1 && st != PLR_running;
}

/* The exit status a run's state gives watch and status: 0 succeeded (or
 * still running, for status), 1 failed or cancelled, 3 rejected (every job
 * worked and the gate said no). */
static int
run_exit(const char *s)
{
	int st = pl_run_state_find(s);
	if (st == PLR_rejected)
		return 3;
	return st == PLR_failed || st == PLR_cancelled ? 1 : 0;
}

static int
job_final(const char *s)
{
	int st = pl_job_state_find(s);
	return st == PLJ_succeeded || st == PLJ_failed || st == PLJ_cancelled ||
	    st == PLJ_skipped || st == PLJ_rejected;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/*
 * Durations from history: for each job of the run, the median seconds a
 * job of the same name and stage took in the newest (at most five)
 * earlier runs in which it succeeded. These estimate the jobs still to
 * come; a job without history has hist -1.
 */
static void
watch_history(struct watch *w, const char *run)
{
	cJSON *runs = NULL;
	double *d[64];
	int nd[64];
	int nj = w->njobs < 64 ? w->njobs : 64;

	for (int i = 0; i < w->njobs; i++)
		w->jobs[i].hist = -1;
	if (request(PLV_status, NULL, &runs, 1) == -1)
		return;
	memset(nd, 0, sizeof(nd));
	for (int i = 0; i < nj; i++)
		d[i] = calloc(5, sizeof(double));
	const cJSON *r;
	cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(runs, "runs")) {
		if (w->nhist >= 5)
			break;
		if (strcmp(jstr(r, "name"), run) == 0)
			continue;
		cJSON *a = cJSON_CreateObject(), *st = NULL;
		cJSON_AddStringToObject(a, "run", jstr(r, "name"));
		if (request(PLV_status, a, &st, 1) == -1)
			continue;
		int used = 0;
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(st, "jobs")) {
			double secs = jnum(x, "finished") - jnum(x, "started");
			if (pl_job_state_find(jstr(x, "state")) != PLJ_succeeded || jnum(x, "started") <= 0 ||
			    secs < 0)
				continue;
			for (int i = 0; i < nj; i++)
				if (nd[i] < 5 && strcmp(w->jobs[i].name, jstr(x, "name")) == 0 &&
				    strcmp(w->jobs[i].stage, jstr(x, "stage")) == 0) {
					d[i][nd[i]++] = secs;
					used = 1;
				}
		}
		cJSON_Delete(st);
		w->nhist += used;
	}
	cJSON_Delete(runs);
	for (int i = 0; i < nj; i++) {
		if (nd[i] > 0 && d[i] != NULL) {
			qsort(d[i], (size_t)nd[i], sizeof(double), cmp_double);
			w->jobs[i].hist = nd[i] % 2 ? d[i][nd[i] / 2] :
			    (d[i][nd[i] / 2 - 1] + d[i][nd[i] / 2]) / 2;
		}
		free(d[i]);
	}
}

/* A progress sample; a step going back (a relaunch resumed from an older
 * checkpoint) starts the rate afresh. */
static void
rate_add(struct wjob *j, double ts, double done)
{
	int last = (j->rpos + RATE_N - 1) % RATE_N;
	if (j->rn > 0 && done < j->rdone[last])
		j->rn = 0;
	j->rts[j->rpos] = ts;
	j->rdone[j->rpos] = done;
	j->rpos = (j->rpos + 1) % RATE_N;
	if (j->rn < RATE_N)
		j->rn++;
}

/* Units per second over the newest RATE_WINDOW seconds, or -1. */
static double
rate_get(const struct wjob *j)
{
	if (j->rn < 2)
		return -1;
	int newest = (j->rpos + RATE_N - 1) % RATE_N, oldest = newest;
	for (int k = 1; k < j->rn; k++) {
		int i = (newest + RATE_N - k) % RATE_N;
		if (j->rts[newest] - j->rts[i] > RATE_WINDOW)
			break;
		oldest = i;
	}
	double dt = j->rts[newest] - j->rts[oldest];
	double dd = j->rdone[newest] - j->rdone[oldest];
	return dt > 0 && dd > 0 ? dd / dt : -1;
}

/* Seconds left of a job: from its rate while it reports progress, else
 * from its history; -1 when neither says. */
static double
job_left(const struct watch *w, const struct wjob *j)
{
	if (job_final(j->state))
		return 0;
	double r = pl_job_state_find(j->state) == PLJ_running ? rate_get(j) : -1;
	if (r > 0 && j->total > 0)
		return (j->total - j->done) / r;
	if (j->hist < 0)
		return -1;
	if (pl_job_state_find(j->state) == PLJ_running && j->t0 > 0) {
		double left = j->hist - (w->now - j->t0);
		return left > 0 ? left : 0;
	}
	return j->hist;
}

/* The run's time left, assuming its jobs run one after another as the
 * release chain does; *unknown counts the jobs nothing estimates. */
static double
run_left(const struct watch *w, int *unknown)
{
	double sum = 0;
	*unknown = 0;
	for (int i = 0; i < w->njobs; i++) {
		double l = job_left(w, &w->jobs[i]);
		if (l < 0)
			(*unknown)++;
		else
			sum += l;
	}
	return sum;
}

static void
fmt_secs(char *buf, size_t sz, double s)
{
	long t = (long)(s + 0.5);
	if (t >= 3600)
		snprintf(buf, sz, "%ldh%02ldm", t / 3600, t / 60 % 60);
	else if (t >= 60)
		snprintf(buf, sz, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, sz, "%lds", t);
}

/* A job's progress words: "120/400 step, loss 1.234, 2.1 step/s, 2m13s left". */
static void
job_words(const struct watch *w, const struct wjob *j, char *buf, size_t sz)
{
	char left[32];
	buf[0] = '\0';
	if (j->total <= 0)
		return;
	size_t n = (size_t)snprintf(buf, sz, "%.0f/%.0f %s", j->done, j->total, j->unit);
	if (j->has_loss && n < sz)
		n += (size_t)snprintf(buf + n, sz - n, ", loss %.4g", j->loss);
	double r = rate_get(j);
	if (r > 0 && pl_job_state_find(j->state) == PLJ_running && n < sz) {
		fmt_secs(left, sizeof(left), job_left(w, j));
		snprintf(buf + n, sz - n, ", %.3g %s/s, %s left", r, j->unit, left);
	}
}

/* The run's line: its state and, while it runs, the expected end. */
static void
run_words(const struct watch *w, char *buf, size_t sz)
{
	int unknown;
	double left = run_left(w, &unknown);
	char l[32], end[16];
	if (run_final(w->run_state) || (left <= 0 && unknown > 0)) {
		buf[0] = '\0';
		return;
	}
	fmt_secs(l, sizeof(l), left);
	time_t t = (time_t)(w->now + left);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(end, sizeof(end), "%H:%M", &tm);
	snprintf(buf, sz, "%s%s left, ends about %s%s", unknown ? "at least " : "", l, end,
	    unknown ? " (some jobs have no earlier run to go by)" : "");
}

/* --json: the estimates as a line of their own after a progress event. */
static void
eta_json(const struct watch *w, const struct wjob *j)
{
	int unknown;
	double left = run_left(w, &unknown);
	double r = rate_get(j);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", "watch.eta");
	cJSON_AddStringToObject(o, "job", j->name);
	cJSON_AddNumberToObject(o, "ts", w->now);
	cJSON_AddNumberToObject(o, "done", j->done);
	cJSON_AddNumberToObject(o, "total", j->total);
	cJSON_AddStringToObject(o, "unit", j->unit);
	if (j->has_loss)
		cJSON_AddNumberToObject(o, "loss", j->loss);
	if (r > 0) {
		cJSON_AddNumberToObject(o, "per_second", r);
		cJSON_AddNumberToObject(o, "eta_s", job_left(w, j));
	}
	cJSON_AddNumberToObject(o, "run_left_s", left);
	cJSON_AddNumberToObject(o, "run_end", w->now + left);
	cJSON_AddNumberToObject(o, "run_unknown_jobs", unknown);
	cJSON_AddNumberToObject(o, "history_runs", w->nhist);
	char *t = cJSON_PrintUnformatted(o);
	printf("%s\n", t);
	free(t);
	cJSON_Delete(o);
}

static void
watch_draw(struct watch *w)
{
	struct winsize ws;
	int cols = ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 40 ? ws.ws_col : 80;
	if (w->drawn)
		printf("\033[%dA", w->drawn);
	int barw = cols - 16 - 11 - 16;
	if (barw > 40)
		barw = 40;
	if (barw < 10)
		barw = 10;
	for (int i = 0; i < w->njobs; i++) {
		struct wjob *j = &w->jobs[i];
		char bar[64];
		double frac = j->total > 0 ? j->done / j->total : 0;
		if (pl_job_state_find(j->state) == PLJ_succeeded)
			frac = 1;
		if (frac > 1)
			frac = 1;
		int fill = (int)(frac * barw);
		for (int k = 0; k < barw; k++)
			bar[k] = k < fill ? '#' : (k == fill && pl_job_state_find(j->state) == PLJ_running ? '>' : '.');
		bar[barw] = '\0';
		char extra[160];
		job_words(w, j, extra, sizeof(extra));
		printf("\033[2K%-16.16s %-10s [%s] %s%s%s\n", j->name, j->state, bar, extra,
		    *extra && *j->note ? "; " : "", j->note);
	}
	char rw[160];
	run_words(w, rw, sizeof(rw));
	printf("\033[2K run: %s%s%s %s\n", w->run_state, *rw ? ", " : "", rw, w->run_msg);
	w->drawn = w->njobs + 1;
	fflush(stdout);
}

/* A corpus_check event in words: "corpus: warn, 36 examples; guards 1". */
static void
corpus_words(const cJSON *ev, char *buf, size_t len)
{
	const cJSON *c;
	size_t o = (size_t)snprintf(buf, len, "corpus: %s, %.0f examples", jstr(ev, "result"),
	    jnum(ev, "examples"));
	int first = 1;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(ev, "counts")) {
		if (o >= len)
			break;
		o += (size_t)snprintf(buf + o, len - o, "%s%s %.0f", first ? "; " : ", ",
		    c->string, c->valuedouble);
		first = 0;
	}
}

static int
cmd_watch(int argc, char **argv)
{
	int plain = 0;
	const char *run = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--plain") == 0)
			plain = 1;
		else if (run == NULL)
			run = argv[i];
		else
			usage();
	}
	if (run == NULL)
		usage();
	struct watch w = { .tty = !plain && !ctl_json && isatty(1) };
	/* The job list first (this also says whether the run exists). */
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "run", run);
	cJSON *r = NULL;
	if (request(PLV_status, a, &r, 1) == -1)
		return 1;
	const cJSON *x;
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "jobs")) {
		struct wjob *j = wjob_find(&w, jstr(x, "name"));
		snprintf(j->stage, sizeof(j->stage), "%s", jstr(x, "stage"));
	}
	cJSON_Delete(r);
	snprintf(w.run_state, sizeof(w.run_state), "%s", pl_run_state_name(PLR_running));
	watch_history(&w, run);

	struct conn fc = { .fd = sock_connect(feed_path) };
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "verb", pl_verb_name(PLV_watch));
	cJSON_AddNumberToObject(req, "version", PL_PROTO_VERSION);
	cJSON_AddNumberToObject(req, "since", 0);
	cJSON_AddStringToObject(req, "run", run);
	conn_send(&fc, req);
	cJSON_Delete(req);
	int64_t last_id = 0;
	for (;;) {
		char *line = conn_line(&fc);
		if (line == NULL) {
			/* Dropped (or the daemon went away): reconnect from last_id. */
			close(fc.fd);
			for (int tries = 0;; tries++) {
				sleep(1);
				struct sockaddr_un sun = { .sun_family = AF_UNIX };
				snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", feed_path);
				fc.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
				if (connect(fc.fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
					break;
				close(fc.fd);
				if (tries > 120)
					errx(1, "lost the feed of pipelined");
			}
			fc.len = 0;
			req = cJSON_CreateObject();
			cJSON_AddStringToObject(req, "verb", pl_verb_name(PLV_watch));
			cJSON_AddNumberToObject(req, "version", PL_PROTO_VERSION);
			cJSON_AddNumberToObject(req, "since", (double)last_id);
			cJSON_AddStringToObject(req, "run", run);
			conn_send(&fc, req);
			cJSON_Delete(req);
			continue;
		}
		cJSON *ev = cJSON_Parse(line);
		if (ev == NULL) {
			free(line);
			continue;
		}
		if (cJSON_GetObjectItemCaseSensitive(ev, "status") != NULL) {
			/* An error from the feed (unknown run, bad request). */
			const char *e = jstr(ev, "error");
			if (*e)
				errx(1, "watch: %s", e);
			cJSON_Delete(ev);
			free(line);
			continue;
		}
		int64_t id = (int64_t)jnum(ev, "id");
		if (id > last_id)
			last_id = id;
		const char *type = jstr(ev, "type"), *job = jstr(ev, "job");
		if (ctl_json) {
			printf("%s\n", line);
			fflush(stdout);
		}
		if (jnum(ev, "ts") > w.now)
			w.now = jnum(ev, "ts");
		if (strcmp(type, "job.state") == 0) {
			struct wjob *j = wjob_find(&w, job);
			snprintf(j->state, sizeof(j->state), "%s", jstr(ev, "state"));
			snprintf(j->msg, sizeof(j->msg), "%s", jstr(ev, "message"));
			j->attempt = (int)jnum(ev, "attempt");
			if (pl_job_state_find(j->state) == PLJ_running && j->t0 == 0)
				j->t0 = jnum(ev, "ts");
		} else if (strcmp(type, "job.progress") == 0) {
			struct wjob *j = wjob_find(&w, job);
			j->done = jnum(ev, "done");
			j->total = jnum(ev, "total");
			snprintf(j->unit, sizeof(j->unit), "%s", jstr(ev, "unit"));
			rate_add(j, jnum(ev, "ts"), j->done);
			if (ctl_json)
				eta_json(&w, j);
		} else if (strcmp(type, "job.corpus_check") == 0) {
			struct wjob *j = wjob_find(&w, job);
			corpus_words(ev, j->note, sizeof(j->note));
		} else if (strcmp(type, "job.metric") == 0 && strcmp(jstr(ev, "name"), "loss") == 0) {
			struct wjob *j = wjob_find(&w, job);
			j->loss = jnum(ev, "value");
			j->has_loss = 1;
		} else if (strcmp(type, "run.state") == 0) {
			snprintf(w.run_state, sizeof(w.run_state), "%s", jstr(ev, "state"));
			snprintf(w.run_msg, sizeof(w.run_msg), "%s", jstr(ev, "message"));
		}
		if (!ctl_json && !w.tty) {
			/* Plain lines: states, progress at whole steps, the rest. */
			char ts[16];
			time_t t = (time_t)jnum(ev, "ts");
			struct tm tm;
			localtime_r(&t, &tm);
			strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
			if (strcmp(type, "job.state") == 0)
				printf("%s %s %s%s%s\n", ts, job, jstr(ev, "state"),
				    *jstr(ev, "message") ? ": " : "", jstr(ev, "message"));
			else if (strcmp(type, "job.progress") == 0) {
				char words[160], rw[160];
				job_words(&w, wjob_find(&w, job), words, sizeof(words));
				run_words(&w, rw, sizeof(rw));
				printf("%s %s progress %s%s%s\n", ts, job, words,
				    *rw ? "; run " : "", rw);
			}
			else if (strcmp(type, "run.state") == 0)
				printf("%s run %s %s%s%s\n", ts, run, jstr(ev, "state"),
				    *jstr(ev, "message") ? ": " : "", jstr(ev, "message"));
			else if (strcmp(type, "job.artifact") == 0)
				printf("%s %s artifact %s %s %s\n", ts, job, jstr(ev, "name"),
				    jstr(ev, "sha256"), jstr(ev, "path"));
			else if (strcmp(type, "job.error") == 0)
				printf("%s %s error: %s\n", ts, job, jstr(ev, "message"));
			else if (strcmp(type, "job.verdict") == 0 || strcmp(type, "job.verify") == 0)
				printf("%s %s %s\n", ts, job, line);
			else if (strcmp(type, "job.corpus_check") == 0) {
				char words[160];
				corpus_words(ev, words, sizeof(words));
				printf("%s %s %s\n", ts, job, words);
			}
			fflush(stdout);
		} else if (w.tty) {
			watch_draw(&w);
		}
		int done = strcmp(type, "run.state") == 0 && run_final(w.run_state);
		cJSON_Delete(ev);
		free(line);
		if (done)
			break;
	}
	close(fc.fd);
	if (w.tty)
		watch_draw(&w);
	free(w.jobs);
	/* Only a run that succeeded exits 0; one not seen to end exits 1. */
	int st = pl_run_state_find(w.run_state);
	return st == PLR_succeeded ? 0 : st == PLR_rejected ? 3 : 1;
}

/* ---- stage: one stage by hand, in-process --------------------------- */

static void
stage_help(const struct stage_reg *reg)
{
	const struct pl_stage *st = reg->st;
	printf("stage %s: %s\n", st->name, st->summary ? st->summary : "");
	const struct pl_key *k;
	for (int i = 0; (k = host_key(reg, i)) != NULL; i++) {
		if (k->flags & PL_KEY_HIDDEN)
			continue;
		printf("  %-22s %s%s%s%s%s%s\n", k->name, k->help ? k->help : "",
		    k->def ? " [default: " : "", k->def ? k->def : "", k->def ? "]" : "",
		    (k->flags & PL_KEY_REQUIRED) ? " (required)" : "",
		    k->artifact ? " (input)" : "");
	}
}

static int
cmd_stage(int argc, char **argv)
{
	load_conf();
	plugin_load_dir(conf.plugin_dir, &plugin_host);
	if (argc < 2)
		usage();
	if (strcmp(argv[1], "--list") == 0) {
		for (int i = 0; i < plugin_nstages(); i++) {
			const struct stage_reg *r = plugin_stage_at(i);
			printf("%-14s %s\n", r->st->name, r->st->summary ? r->st->summary : "");
		}
		return 0;
	}
	const struct stage_reg *reg = plugin_stage(argv[1]);
	if (reg == NULL)
		errx(2, "no stage \"%s\" (pipelinectl stage --list shows them)", argv[1]);
	const char *workdir = NULL;
	struct spec_section *sec = xcalloc(1, sizeof(*sec));
	sec->name = xstrdup(argv[1]);
	sec->line = 1;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			stage_help(reg);
			return 0;
		}
		if (strcmp(argv[i], "-w") == 0 && i + 1 < argc) {
			workdir = argv[++i];
			continue;
		}
		char *eq = strchr(argv[i], '=');
		if (eq == NULL || eq == argv[i])
			errx(2, "argument %d: \"%s\" is not key=value", i - 1, argv[i]);
		sec->kv = realloc(sec->kv, (size_t)(sec->nkv + 1) * sizeof(*sec->kv));
		sec->kv[sec->nkv].key = strndup(argv[i], (size_t)(eq - argv[i]));
		sec->kv[sec->nkv].value = xstrdup(eq + 1);
		sec->kv[sec->nkv].line = i - 1;
		sec->nkv++;
	}
	/* A one-job spec named after the command line, so messages read
	 * "command line:N: key: ..." with N the argument's position. */
	struct spec spec;
	memset(&spec, 0, sizeof(spec));
	spec.path = "command line";
	char cwd[PATH_MAX];
	spec.dir = getcwd(cwd, sizeof(cwd)) ? cwd : ".";
	spec.name = "by-hand";
	spec.jobs = &sec;
	spec.njobs = 1;
	char *errs = NULL;
	if (host_check_section(reg, &spec, sec, &errs) != 0) {
		fputs(errs ? errs : "invalid keys\n", stderr);
		return 2;
	}
	struct pl_job *j = job_new(JOB_MODE_RUN, reg, &spec, sec);
	j->conf = have_conf ? &conf : NULL;
	j->json_out = ctl_json;
	char tmpl[] = "/tmp/pipelinectl-stage.XXXXXX";
	if (workdir == NULL) {
		workdir = mkdtemp(tmpl);
		if (workdir == NULL)
			err(1, "mkdtemp");
	} else if (plc_mkdirs(workdir, 0755) == -1) {
		err(1, "%s", workdir);
	}
	char *wabs = realpath(workdir, NULL);
	snprintf(j->workdir, sizeof(j->workdir), "%s", wabs ? wabs : workdir);
	free(wabs);
	if (!ctl_json)
		fprintf(stderr, "pipelinectl: stage %s, work directory %s\n", reg->st->name, j->workdir);
	signal(SIGPIPE, SIG_IGN);
	double t0 = now_mono();
	int rc = reg->st->run(j);
	double secs = now_mono() - t0;
	if (ctl_json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "type", "result");
		cJSON_AddStringToObject(o, "stage", reg->st->name);
		cJSON_AddBoolToObject(o, "ok", rc == PL_OK);
		cJSON_AddNumberToObject(o, "seconds", secs);
		if (rc != PL_OK)
			cJSON_AddStringToObject(o, "error", j->failmsg[0] ? j->failmsg :
			    plugin_host.strerror(rc));
		print_json(o);
		cJSON_Delete(o);
	} else if (rc == PL_OK) {
		printf("stage %s: succeeded in %.2fs\n", reg->st->name, secs);
	} else {
		printf("stage %s: failed: %s\n", reg->st->name,
		    j->failmsg[0] ? j->failmsg : plugin_host.strerror(rc));
	}
	job_free(j);
	return rc == PL_OK ? 0 : 1;
}

/* ---- the verbs ------------------------------------------------------ */

static int
cmd_list(int argc, char **argv)
{
	if (argc != 1)
		usage();
	return cmd_status(1, argv);
}

static int
cmd_cancel(int argc, char **argv)
{
	return cmd_simple(argc, argv, PLV_cancel, 1, 1);
}

static int
cmd_retry(int argc, char **argv)
{
	return cmd_simple(argc, argv, PLV_retry, 1, 2);
}

static int
cmd_values(int argc, char **argv)
{
	return cmd_simple(argc, argv, PLV_values, 1, 2);
}

static int
cmd_artifacts(int argc, char **argv)
{
	return cmd_simple(argc, argv, PLV_artifacts, 1, 1);
}

static int
cmd_metrics(int argc, char **argv)
{
	return cmd_simple(argc, argv, PLV_metrics, 2, 3);
}


/*
 * pipelinectl's verbs, in the order of its usage. A verb that is a verb of
 * the protocol is named by proto.h's list (verb); one of pipelinectl's own
 * (no daemon, or several requests) has its name here (own) and verb
 * PLV_COUNT. fn NULL: a verb of a file this pipelinectl was built without.
 */
static const struct cmd {
	enum pl_verb verb;
	const char *own;
	int (*fn)(int, char **);
	const char *args, *help;
	const char *more;       /* a second synopsis, or NULL */
} cmds[] = {
	{ PLV_check, NULL, cmd_check, "SPEC", "validate a run spec", NULL },
	{ PLV_submit, NULL, cmd_submit, "SPEC [--name RUN]", "submit a run; prints its name", NULL },
	{ PLV_watch, NULL, cmd_watch, "RUN", "follow a run live; exit 0 only if it succeeds", NULL },
	{ PLV_status, NULL, cmd_status, "[RUN]", "runs, or one run's jobs", NULL },
	{ PLV_list, NULL, cmd_list, "", "runs, newest first", NULL },
	{ PLV_logs, NULL, cmd_logs, "RUN JOB [-f]", "a job's log; -f follows it", NULL },
	{ PLV_cancel, NULL, cmd_cancel, "RUN", "cancel a run", NULL },
	{ PLV_retry, NULL, cmd_retry, "RUN [JOB]",
	    "re-run what did not succeed (or JOB and what follows it)", NULL },
	{ PLV_values, NULL, cmd_values, "RUN [JOB]", "values stored by a run's jobs", NULL },
	{ PLV_artifacts, NULL, cmd_artifacts, "RUN", "a run's artifacts with size and sha256",
	    NULL },
	{ PLV_metrics, NULL, cmd_metrics, "RUN JOB [NAME]", "a job's metrics", NULL },
	{ PLV_COUNT, "stage", cmd_stage, "STAGE key=value ...",
	    "run one stage by hand, without a daemon", "--list | STAGE --help" },
	{ PLV_COUNT, "gguf", ctl_gguf, "FILE", "list a GGUF file's keys and tensors", NULL },
	{ PLV_COUNT, "report", ctl_report, "RUN [--vs RUN]",
	    "bake results side by side, and the verdict", NULL },
	{ PLV_web, NULL, cmd_web, "[RUN]",
	    "the status page's address (a one-time login link off loopback)", NULL },
	{ PLV_COUNT, "plot", ctl_plot, "RUN [--vs RUN] -o FILE.png|svg",
	    "a train job's loss and learning rate per step", NULL },
	{ PLV_COUNT, "doctor", ctl_doctor, "[SPEC]",
	    "may a training run start with its Python stack?", NULL },
};

static const char *
cmd_name(const struct cmd *c)
{
	return c->verb == PLV_COUNT ? c->own : pl_verb_name(c->verb);
}

static const struct cmd *
cmd_find(const char *name)
{
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(name, cmd_name(&cmds[i])) == 0)
			return &cmds[i];
	return NULL;
}

/* The usage, from the table: a synopsis wider than its column puts the
 * help on a line of its own. */
static void
usage(void)
{
	fprintf(stderr, "usage: pipelinectl [-f conf] [-s socket] [-F feed] [--json] verb [args]\n"
	    "verbs:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		const struct cmd *c = &cmds[i];
		char syn[128];
		snprintf(syn, sizeof(syn), "%s%s%s", cmd_name(c), *c->args ? " " : "", c->args);
		if (strlen(syn) <= 26)
			fprintf(stderr, "  %-26s %s\n", syn, c->help);
		else
			fprintf(stderr, "  %s\n  %-26s %s\n", syn, "", c->help);
		if (c->more != NULL)
			fprintf(stderr, "  %s %s\n", cmd_name(c), c->more);
	}
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int ch;
	log_init(1, LOG_LVL_WARN, NULL);
	plugin_host.host_name = "pipelinectl"; /* plugins may tell by-hand runs apart */
	while ((ch = getopt_long(argc, argv, "+f:s:F:jh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'f': conf_path = optarg; break;
		case 's': snprintf(control_path, sizeof(control_path), "%s", optarg); break;
		case 'F': snprintf(feed_path, sizeof(feed_path), "%s", optarg); break;
		case 'j': ctl_json = 1; break;
		default: usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		usage();
	/* --json may also follow the verb. */
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			ctl_json = 1;
			memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof(char *));
			argc--;
			i--;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	const struct cmd *c = cmd_find(argv[0]);
	if (c == NULL) {
		warnx("unknown verb \"%s\"", argv[0]);
		usage();
	}
	if (c->fn == NULL)
		errx(2, "this pipelinectl was built without the %s verb", cmd_name(c));
	return c->fn(argc, argv);
}
