/* rate.c: progress-report pacing shared by the stages (rate.h). */
#include <time.h>

#include "rate.h"

int
plc_rate_due(struct plc_rate *r, double done, double total, double every)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	if (done < total && t - r->last < every)
		return 0;
	if (r->last > 0 && done == r->last_done)
		return 0;
	r->last = t;
	r->last_done = done;
	return 1;
}
