/* rate.c: progress-report pacing shared by the stages (rate.h). */
#include <time.h>

#include "plcommon.h"
#include "rate.h"

double
plc_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
plc_rate_due(struct plc_rate *r, double done, double total, double every)
{
	double t = plc_now();
	if (done < total && t - r->last < every)
		return 0;
	if (r->last > 0 && done == r->last_done)
		return 0;
	r->last = t;
	r->last_done = done;
	return 1;
}
