/*
 * metrics.h: GET /metrics (metrics.c), which the HTTP side serves and the
 * feed counts into.
 */
#ifndef PL_METRICS_H
#define PL_METRICS_H

#include <stddef.h>

/* metrics.c: the Prometheus exposition of GET /metrics */
enum metrics_counter { MC_FEED_WATCHERS, MC_FEED_DROPPED };
/* Counters the store does not hold; any thread. */
void	metrics_count(enum metrics_counter which, long delta);
int	metrics_init(const char *dbpath);
/* The exposition as a malloc'd text (*len bytes), or NULL. HTTP thread only. */
char	*metrics_render(size_t *len);

#endif
