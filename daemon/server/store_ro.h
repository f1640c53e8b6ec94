/*
 * store_ro.h: the store read through a read-only handle of its own, for
 * the readers outside the scheduler's thread: GET /metrics (metrics.c,
 * whose queries are store_metrics.c's) and the status page's documents
 * (web.c, whose queries are store_ro.c's). In WAL mode such a reader
 * neither waits for the writer nor makes it wait. A handle is used by one
 * thread at a time; its callers get plain numbers, strings and the wire's
 * JSON rows (wire.h), never SQL.
 */
#ifndef PL_STORE_RO_H
#define PL_STORE_RO_H

#include <stdint.h>

#include <cjson/cJSON.h>

struct store_ro;

/* The store at path, read-only; who names the reader in the log (its
 * failures to open and to prepare). NULL, logged, when it cannot be
 * opened. */
struct store_ro *store_ro_open(const char *path, const char *who);
void	store_ro_close(struct store_ro *ro);
/* One read transaction: what is read between begin and end comes from one
 * snapshot. */
void	store_ro_begin(struct store_ro *ro);
void	store_ro_end(struct store_ro *ro);

/* The status page's reads (web.c). Each returns the wire's rows (an
 * array, empty when none or on a failure, logged) unless said otherwise. */
/* Does run exist: 1, with its submitter (-1: unknown), or 0. */
int	store_ro_submitter(struct store_ro *ro, const char *run, int64_t *submitter);
/* The runs viewer may see (access.c), newest first, 500 at the most,
 * with their counts of jobs and of those that succeeded and the newest
 * gate.verdict value (JSON text). */
cJSON	*store_ro_runs(struct store_ro *ro, int64_t viewer);
/* The newest event's id, of run's events or of all (run NULL); 0 when
 * none. */
int64_t	store_ro_last_event(struct store_ro *ro, const char *run);
/* One run, its spec text included (one row, or none). */
cJSON	*store_ro_run(struct store_ro *ro, const char *run);
/* A run's jobs in their order, with their progress. */
cJSON	*store_ro_jobs(struct store_ro *ro, const char *run);
/* A run's artifact records. */
cJSON	*store_ro_artifacts(struct store_ro *ro, const char *run);
/* A run's values the page shows (bake.summary, gate.verdict and
 * corpus_check's summary and diff), as JSON text. */
cJSON	*store_ro_page_values(struct store_ro *ro, const char *run);
/* A run's train jobs (their names). */
cJSON	*store_ro_train_jobs(struct store_ro *ro, const char *run);
/* A job's curves: its loss, lr and resumed metrics by name and step. */
cJSON	*store_ro_curves(struct store_ro *ro, const char *run, const char *job);

/* GET /metrics' reads (store_metrics.c): one query's rows, each up to
 * four labels (strings; "" for NULL) and a number. */
enum store_mq {
	SMQ_RUN_STATES,         /* state; runs */
	SMQ_JOB_STATES,         /* stage, state; jobs (by stage, then state) */
	SMQ_JOB_SECONDS,        /* stage; a job's first start to its end */
	SMQ_ATTEMPT_SECONDS,    /* stage; an attempt's start to its end */
	SMQ_RETRIES,            /* stage; attempts after a job's first */
	SMQ_TRAIN_RESUMES,      /* run, job, stage; train relaunches that resumed */
	SMQ_BAKE_ACCURACY,      /* run, job, stage, slice; a bake's accuracy */
	SMQ_BAKE_BREACHES,      /* run, job, stage; a bake's guard breaches */
	SMQ_VERDICTS,           /* run, job, gate.verdict value (JSON text); 0 */
	SMQ_ARTIFACT_BYTES,     /* ; bytes of the held artifact files, each once */
	SMQ_RUN_ARTIFACT_BYTES, /* run; the same, one run's */
	SMQ_OUTBOX_STATES,      /* state; notifications */
	SMQ_LAST_EVENT,         /* ; the newest event's id */
	SMQ_COUNT
};
struct store_mrow {
	char *label[4];         /* NULL past the query's labels */
	double v;
};
/* The rows of query q, malloc'd (free them with store_mrows_free), in
 * *rows; their count, or -1 (logged) when the query failed. */
int	store_ro_mrows(struct store_ro *ro, enum store_mq q, struct store_mrow **rows);
void	store_mrows_free(struct store_mrow *rows, int n);  /* n may be -1 */

/* The running train jobs' newest figures, in the order of the jobs. */
struct store_train {
	char run[128], job[128];
	double v[4];            /* the newest loss, lr, peak_mb and loss's step */
	int has[4];             /* which of v there are */
	double sps;             /* steps per second over the last minute; -1: unknown */
};
/* The rows, malloc'd, in *rows; their count, or -1 (logged). */
int	store_ro_training(struct store_ro *ro, struct store_train **rows);

#endif
