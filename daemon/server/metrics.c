/*
 * metrics.c: the Prometheus text exposition of GET /metrics (httpd.c).
 *
 * Everything but a few counters comes from the store, read through a
 * read-only handle of this file's own (store_ro.h; the queries are
 * store_metrics.c's), used by one HTTP thread at a time: in WAL mode a
 * reader neither waits for the writer nor makes it wait, so a scrape costs
 * the scheduler nothing. This file names the series and renders them. What the store does not hold (feed
 * watchers and drops, the daemon's start time) the daemon keeps in
 * atomics that metrics_count() and feed.c update.
 *
 * Names follow Prometheus' conventions: the pipelined_ prefix, _total for
 * counters, base units (_seconds, _bytes), histograms with _bucket, _sum
 * and _count. pipelined(8) lists every series.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pld.h"
#include "metrics.h"
#include "store_ro.h"

static struct store_ro *rdb;
static char db_path[PATH_MAX];
static double t_start;

/* Counters the store does not hold. */
static unsigned long c_feed_watchers, c_feed_dropped;

void
metrics_count(enum metrics_counter which, long delta)
{
	unsigned long *c = which == MC_FEED_WATCHERS ? &c_feed_watchers : &c_feed_dropped;
	__atomic_add_fetch(c, (unsigned long)delta, __ATOMIC_RELAXED);
}

int
metrics_init(const char *dbpath)
{
	snprintf(db_path, sizeof(db_path), "%s", dbpath);
	t_start = now_wall();
	return 0;
}

/* The read handle, opened on first use by the HTTP thread. */
static struct store_ro *
rconn(void)
{
	if (rdb == NULL)
		rdb = store_ro_open(db_path, "metrics");
	return rdb;
}

/* A label value, escaped as the exposition format wants. */
static void
lv(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f), fputc(*s, f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void
head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}


/* Histogram buckets for job and attempt durations, in seconds: a second
 * to twelve hours, the span of the release chain's stages. */
static const double bounds[] = { 1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14400, 43200 };
#define NB (sizeof(bounds) / sizeof(bounds[0]))

struct hist {
	char stage[64];
	unsigned long b[NB];
	unsigned long n;
	double sum;
};

/* One histogram per stage from rows of (stage, seconds). */
static void
histogram(FILE *f, struct store_ro *db, const char *name, const char *help, enum store_mq q)
{
	struct hist h[64];
	int nh = 0;
	struct store_mrow *rows;
	int nr = store_ro_mrows(db, q, &rows);
	if (nr < 0)
		return;
	memset(h, 0, sizeof(h));
	for (int r = 0; r < nr; r++) {
		const char *stage = rows[r].label[0];
		double v = rows[r].v;
		int i;
		for (i = 0; i < nh; i++)
			if (strcmp(h[i].stage, stage) == 0)
				break;
		if (i == nh) {
			if (nh == 64)
				continue;
			snprintf(h[nh++].stage, sizeof(h[0].stage), "%s", stage);
		}
		for (size_t k = 0; k < NB; k++)
			if (v <= bounds[k])
				h[i].b[k]++;
		h[i].n++;
		h[i].sum += v;
	}
	store_mrows_free(rows, nr);
	head(f, name, "histogram", help);
	for (int i = 0; i < nh; i++) {
		for (size_t k = 0; k < NB; k++) {
			fprintf(f, "%s_bucket{stage=", name);
			lv(f, h[i].stage);
			fprintf(f, ",le=\"%g\"} %lu\n", bounds[k], h[i].b[k]);
		}
		fprintf(f, "%s_bucket{stage=", name);
		lv(f, h[i].stage);
		fprintf(f, ",le=\"+Inf\"} %lu\n%s_sum{stage=", h[i].n, name);
		lv(f, h[i].stage);
		fprintf(f, "} %.6f\n%s_count{stage=", h[i].sum, name);
		lv(f, h[i].stage);
		fprintf(f, "} %lu\n", h[i].n);
	}
}

/* Rows of (label values..., number) as one series per row. */
static void
series(FILE *f, struct store_ro *db, const char *name, const char *type, const char *help,
    const char *const *labels, int nl, enum store_mq q)
{
	struct store_mrow *rows;
	int nr = store_ro_mrows(db, q, &rows);
	if (nr < 0)
		return;
	head(f, name, type, help);
	for (int k = 0; k < nr; k++) {
		fputs(name, f);
		if (nl > 0) {
			fputc('{', f);
			for (int i = 0; i < nl; i++) {
				fprintf(f, "%s%s=", i ? "," : "", labels[i]);
				lv(f, rows[k].label[i]);
			}
			fputc('}', f);
		}
		fprintf(f, " %.17g\n", rows[k].v);
	}
	store_mrows_free(rows, nr);
}

/* A state of every known name, 0 when none is in it, so a dashboard's
 * series do not come and go. The counts, in the order of known, go to
 * counts too (16 at the most) when it is not NULL. */
static void
states(FILE *f, struct store_ro *db, const char *name, const char *help, const char *const *known,
    int nk, enum store_mq q, long *counts)
{
	long n[16] = { 0 };
	struct store_mrow *rows;
	int nr = store_ro_mrows(db, q, &rows);
	if (nr < 0)
		return;
	for (int k = 0; k < nr; k++)
		for (int i = 0; i < nk && i < 16; i++)
			if (strcmp(rows[k].label[0], known[i]) == 0)
				n[i] = (long)rows[k].v;
	store_mrows_free(rows, nr);
	head(f, name, "gauge", help);
	for (int i = 0; i < nk && i < 16; i++)
		fprintf(f, "%s{state=\"%s\"} %ld\n", name, known[i], n[i]);
	if (counts != NULL)
		memcpy(counts, n, sizeof(n));
}

/* The running train jobs: step, loss, learning rate, peak memory and the
 * steps per second over the last minute of steps. */
static void
training(FILE *f, struct store_ro *db)
{
	static const struct { const char *name, *help; double scale; } m[] = {
		{ "pipelined_train_loss", "the newest training loss of a running train job", 1 },
		{ "pipelined_train_learning_rate", "the newest learning rate of a running train job", 1 },
		{ "pipelined_train_peak_memory_bytes",
		    "the newest peak accelerator memory a running train job reported", 1048576 },
	};
	/* Rows first, then one family at a time (the format wants each
	 * family's samples together). */
	struct store_train *rows;
	int nr = store_ro_training(db, &rows);
	if (nr < 0)
		return;
	for (int i = 0; i < 5; i++) {
		static const char *const nm[2] = { "pipelined_train_step",
		    "pipelined_train_steps_per_second" };
		static const char *const hp[2] = { "the newest optimizer step of a running train job",
		    "optimizer steps per second of a running train job over the last minute" };
		const char *name = i < 3 ? m[i].name : nm[i - 3];
		head(f, name, "gauge", i < 3 ? m[i].help : hp[i - 3]);
		for (int k = 0; k < nr; k++) {
			double v = i == 4 ? rows[k].sps : rows[k].v[i] * (i < 3 ? m[i].scale : 1);
			if (i == 4 ? v < 0 : !rows[k].has[i])
				continue;
			fprintf(f, "%s{run=", name);
			lv(f, rows[k].run);
			fputs(",job=", f);
			lv(f, rows[k].job);
			fprintf(f, ",stage=\"train\"} %.17g\n", v);
		}
	}
	free(rows);
}

/* Gate verdicts: one series per gate job, and the count per verdict. */
static void
verdicts(FILE *f, struct store_ro *db)
{
	struct store_mrow *rows;
	int nr = store_ro_mrows(db, SMQ_VERDICTS, &rows);
	if (nr < 0)
		return;
	struct v { char run[128], job[128], verdict[32]; double fair[2]; int hasfair; } *vs = NULL;
	int n = 0;
	for (int k = 0; k < nr; k++) {
		cJSON *o = cJSON_Parse(rows[k].label[2]);
		const cJSON *vd = cJSON_GetObjectItemCaseSensitive(o, "verdict");
		if (cJSON_IsString(vd)) {
			vs = xrealloc(vs, (size_t)n + 1, sizeof(*vs));
			struct v *x = &vs[n++];
			memset(x, 0, sizeof(*x));
			snprintf(x->run, sizeof(x->run), "%s", rows[k].label[0]);
			snprintf(x->job, sizeof(x->job), "%s", rows[k].label[1]);
			snprintf(x->verdict, sizeof(x->verdict), "%s", vd->valuestring);
			const cJSON *fs = cJSON_GetObjectItemCaseSensitive(o, "fair_slice");
			const cJSON *ca = cJSON_GetObjectItemCaseSensitive(
			    cJSON_GetObjectItemCaseSensitive(fs, "candidate"), "acc");
			const cJSON *in = cJSON_GetObjectItemCaseSensitive(
			    cJSON_GetObjectItemCaseSensitive(fs, "incumbent"), "acc");
			if (cJSON_IsNumber(ca) && cJSON_IsNumber(in)) {
				x->fair[0] = ca->valuedouble;
				x->fair[1] = in->valuedouble;
				x->hasfair = 1;
			}
		}
		cJSON_Delete(o);
	}
	store_mrows_free(rows, nr);
	head(f, "pipelined_gate_verdict", "gauge",
	    "1 for the verdict a gate job reached, labelled with it");
	for (int i = 0; i < n; i++) {
		fputs("pipelined_gate_verdict{run=", f);
		lv(f, vs[i].run);
		fputs(",job=", f);
		lv(f, vs[i].job);
		fputs(",stage=\"gate\",verdict=", f);
		lv(f, vs[i].verdict);
		fputs("} 1\n", f);
	}
	head(f, "pipelined_gate_verdicts_total", "counter", "gate verdicts reached, by verdict");
	for (int i = 0; i < n; i++) {
		int seen = 0, cnt = 0;
		for (int k = 0; k < n; k++) {
			if (strcmp(vs[k].verdict, vs[i].verdict) == 0) {
				if (k < i)
					seen = 1;
				cnt++;
			}
		}
		if (seen)
			continue;
		fputs("pipelined_gate_verdicts_total{verdict=", f);
		lv(f, vs[i].verdict);
		fprintf(f, "} %d\n", cnt);
	}
	head(f, "pipelined_fair_slice_accuracy", "gauge",
	    "accuracy on the fair slice (cases neither model's corpus holds) a gate compared, by side");
	for (int i = 0; i < n; i++) {
		if (!vs[i].hasfair)
			continue;
		for (int s = 0; s < 2; s++) {
			fputs("pipelined_fair_slice_accuracy{run=", f);
			lv(f, vs[i].run);
			fputs(",job=", f);
			lv(f, vs[i].job);
			fprintf(f, ",stage=\"gate\",side=\"%s\"} %.17g\n",
			    s ? "incumbent" : "candidate", vs[i].fair[s]);
		}
	}
	free(vs);
}

static long
file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (long)sb.st_size : 0;
}

static long
rss_bytes(void)
{
	long pages = 0, size;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f == NULL)
		return 0;
	if (fscanf(f, "%ld %ld", &size, &pages) != 2)
		pages = 0;
	fclose(f);
	return pages * sysconf(_SC_PAGESIZE);
}

static pthread_mutex_t render_mtx = PTHREAD_MUTEX_INITIALIZER;
static char *render(size_t *len);

/* One scrape at a time: the read connection is this file's only one. */
char *
metrics_render(size_t *len)
{
	pthread_mutex_lock(&render_mtx);
	char *b = render(len);
	pthread_mutex_unlock(&render_mtx);
	return b;
}

_Static_assert(PLR_COUNT <= 16, "states() counts at most 16 states");

static char *
render(size_t *len)
{
	static const char *const run_states[] = { PL_RUN_STATES(PL_X_WORD) };
	static const char *const job_states[] = { PL_JOB_STATES(PL_X_WORD) };
	static const char *const l_stage[] = { "stage" };
	static const char *const l_run[] = { "run" };
	static const char *const l_run_job[] = { "run", "job", "stage" };
	static const char *const l_bake[] = { "run", "job", "stage", "slice" };
	char *buf = NULL;
	FILE *f;
	struct store_ro *db = rconn();

	if (db == NULL)
		return NULL;
	if ((f = open_memstream(&buf, len)) == NULL)
		return NULL;
	/* One read transaction: every figure of a scrape from one snapshot. */
	store_ro_begin(db);
	long nruns[16];
	states(f, db, "pipelined_runs", "runs by state", run_states,
	    (int)(sizeof(run_states) / sizeof(run_states[0])),
	    SMQ_RUN_STATES, nruns);
	/* Not yet ended: in a state proto.h's list does not call final. */
	long open = 0;
	for (int i = 0; i < PLR_COUNT; i++)
		open += pl_run_state_final(i) ? 0 : nruns[i];
	head(f, "pipelined_open_runs", "gauge", "runs not yet ended");
	fprintf(f, "pipelined_open_runs %ld\n", open);
	head(f, "pipelined_jobs", "gauge", "jobs by stage and state");
	{
		/* Every state of every stage that has jobs, 0 when none is in
		 * it; the rows come by stage. */
		struct store_mrow *rows;
		int nr = store_ro_mrows(db, SMQ_JOB_STATES, &rows);
		for (int k = 0; k < nr; k++) {
			if (k > 0 && strcmp(rows[k].label[0], rows[k - 1].label[0]) == 0)
				continue;
			for (size_t i = 0; i < sizeof(job_states) / sizeof(job_states[0]); i++) {
				long n = 0;
				for (int x = k; x < nr && strcmp(rows[x].label[0], rows[k].label[0]) == 0; x++)
					if (strcmp(rows[x].label[1], job_states[i]) == 0)
						n = (long)rows[x].v;
				fputs("pipelined_jobs{stage=", f);
				lv(f, rows[k].label[0]);
				fprintf(f, ",state=\"%s\"} %ld\n", job_states[i], n);
			}
		}
		store_mrows_free(rows, nr);
	}
	histogram(f, db, "pipelined_job_duration_seconds",
	    "seconds from a job's first start to its end, every attempt included, by stage",
	    SMQ_JOB_SECONDS);
	histogram(f, db, "pipelined_attempt_duration_seconds",
	    "seconds an attempt ran, by stage", SMQ_ATTEMPT_SECONDS);
	series(f, db, "pipelined_job_retries_total", "counter",
	    "attempts after a job's first, by stage (retries and requeues)", l_stage, 1,
	    SMQ_RETRIES);
	series(f, db, "pipelined_train_resumes_total", "counter",
	    "relaunches of a train job that resumed from a checkpoint", l_run_job, 3,
	    SMQ_TRAIN_RESUMES);
	training(f, db);
	series(f, db, "pipelined_bake_accuracy", "gauge",
	    "a bake's accuracy, overall and on the cases its model's corpus does not hold",
	    l_bake, 4, SMQ_BAKE_ACCURACY);
	series(f, db, "pipelined_bake_guard_breaches", "gauge",
	    "held-out guard cases a bake's model failed", l_run_job, 3,
	    SMQ_BAKE_BREACHES);
	verdicts(f, db);
	/* What the runs' artifact files hold (gc.c keeps the rest): a file
	 * once however many records name it, those gc removed left out. */
	series(f, db, "pipelined_artifact_bytes", "gauge",
	    "bytes of the artifact files the runs hold (each file once; gc's removals left out)",
	    NULL, 0, SMQ_ARTIFACT_BYTES);
	series(f, db, "pipelined_run_artifact_bytes", "gauge",
	    "bytes of the artifact files one run holds (pipelinectl du)", l_run, 1,
	    SMQ_RUN_ARTIFACT_BYTES);
	static const char *const outbox_states[] = { "pending", "delivered", "failed" };
	states(f, db, "pipelined_notifications", "notifications in the outbox by state",
	    outbox_states, 3, SMQ_OUTBOX_STATES, NULL);
	series(f, db, "pipelined_events_total", "counter",
	    "events published on the status feed (the newest event id)", NULL, 0, SMQ_LAST_EVENT);
	store_ro_end(db);

	head(f, "pipelined_feed_watchers", "gauge", "connections following the status feed");
	fprintf(f, "pipelined_feed_watchers %lu\n",
	    __atomic_load_n(&c_feed_watchers, __ATOMIC_RELAXED));
	head(f, "pipelined_feed_dropped_total", "counter",
	    "watchers dropped for reading too slowly");
	fprintf(f, "pipelined_feed_dropped_total %lu\n",
	    __atomic_load_n(&c_feed_dropped, __ATOMIC_RELAXED));
	char wal[PATH_MAX + 8];
	snprintf(wal, sizeof(wal), "%s-wal", db_path);
	head(f, "pipelined_store_bytes", "gauge", "the store's size on disk, its WAL included");
	fprintf(f, "pipelined_store_bytes %ld\n", file_size(db_path) + file_size(wal));
	head(f, "pipelined_uptime_seconds", "gauge", "seconds since the daemon started");
	fprintf(f, "pipelined_uptime_seconds %.3f\n", now_wall() - t_start);
	head(f, "pipelined_start_time_seconds", "gauge",
	    "when the daemon started, in seconds since the epoch");
	fprintf(f, "pipelined_start_time_seconds %.3f\n", t_start);
	head(f, "pipelined_resident_memory_bytes", "gauge", "the daemon's resident memory");
	fprintf(f, "pipelined_resident_memory_bytes %ld\n", rss_bytes());
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
