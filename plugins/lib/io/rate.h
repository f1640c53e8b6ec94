/*
 * rate.h: how often a stage reports progress. Every host->progress() call
 * is an event the daemon stores and publishes, so a stage working through
 * thousands of units reports at most every `every` seconds, always the
 * last unit, and never the same count twice.
 */
#ifndef PLC_RATE_H
#define PLC_RATE_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/plugin.h"

struct plc_rate {
	double last;       /* monotonic time of the last report; 0: none yet */
	double last_done;
};

/* 1 when a report of done/total is due now (and records it), else 0. */
int	plc_rate_due(struct plc_rate *r, double done, double total, double every);

/* A stage's job as the common library's engines (gguf_convert.c,
 * gguf_quant.c) call back into it: give &cb as their arg and the
 * functions below as their hooks. Progress is in bytes, every 0.5 s. */
struct plc_jobcb {
	const struct pl_host *host;
	pl_job *job;
	struct plc_rate rate;
};
void	plc_jobcb_log(void *cb, int level, const char *msg);
void	plc_jobcb_progress(void *cb, uint64_t done, uint64_t total);
int	plc_jobcb_cancelled(void *cb);

/* Progress in tensors every 0.5 s, with a "bytes" metric of the bytes
 * written so far when the host records metrics (merge, tensor_fix). */
void	plc_report_tensors(const struct pl_host *host, pl_job *job, struct plc_rate *rate,
	    size_t done, size_t total, uint64_t bytes);

#endif
