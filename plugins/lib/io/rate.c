/* rate.c: progress-report pacing shared by the stages, and the job
 * callbacks of the common engines (rate.h). */
#include <time.h>

#include "plio.h"
#include "rate.h"

double
plc_mono_secs(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
plc_rate_due(struct plc_rate *r, double done, double total, double every)
{
	double t = plc_mono_secs();
	if (done < total && t - r->last < every)
		return 0;
	if (r->last > 0 && done == r->last_done)
		return 0;
	r->last = t;
	r->last_done = done;
	return 1;
}

void
plc_jobcb_log(void *arg, int level, const char *msg)
{
	struct plc_jobcb *c = arg;
	c->host->log(c->job, level, "%s", msg);
}

void
plc_jobcb_progress(void *arg, uint64_t done, uint64_t total)
{
	struct plc_jobcb *c = arg;
	if (plc_rate_due(&c->rate, (double)done, (double)total, 0.5))
		c->host->progress(c->job, (double)done, (double)total, "bytes");
}

int
plc_jobcb_cancelled(void *arg)
{
	struct plc_jobcb *c = arg;
	return c->host->cancelled(c->job);
}

void
plc_report_tensors(const struct pl_host *host, pl_job *job, struct plc_rate *rate,
    size_t done, size_t total, uint64_t bytes)
{
	if (!plc_rate_due(rate, (double)done, (double)total, 0.5))
		return;
	host->progress(job, (double)done, (double)total, "tensors");
	if (host->metric)
		host->metric(job, "bytes", (int64_t)done, (double)bytes);
}
