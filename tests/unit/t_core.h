/* t_core.h: a minimal check macro for the core's unit tests. */
#ifndef T_CORE_H
#define T_CORE_H
#include <stdio.h>
#include <stdlib.h>
static int t_fail, t_count;
#define CHECK(cond) do { t_count++; if (!(cond)) { t_fail++; \
	fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define T_DONE() do { printf("%d checks, %d failed\n", t_count, t_fail); \
	return t_fail ? 1 : 0; } while (0)
#endif
