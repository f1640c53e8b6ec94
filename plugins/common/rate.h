/*
 * rate.h: how often a stage reports progress. Every host->progress() call
 * is an event the daemon stores and publishes, so a stage working through
 * thousands of units reports at most every `every` seconds, always the
 * last unit, and never the same count twice.
 */
#ifndef PLC_RATE_H
#define PLC_RATE_H

struct plc_rate {
	double last;       /* monotonic time of the last report; 0: none yet */
	double last_done;
};

/* 1 when a report of done/total is due now (and records it), else 0. */
int	plc_rate_due(struct plc_rate *r, double done, double total, double every);

#endif
