/*
 * check.h: the unit tests' one check macro.
 *
 *     CHECK(cond);
 *     CHECK(cond, "fmt", ...);
 *
 * counts a check; when cond is false it prints "file:line: check failed:
 * cond" (and ": " and the message, when one is given) and counts a
 * failure. The counts are the process's: runner.h runs each case in a
 * process of its own and fails the case when check_failures is not 0 at
 * its end; a helper that reports a failure of its own counts it in
 * check_failures.
 */
#ifndef CHECK_H
#define CHECK_H
#include <stdarg.h>
#include <stdio.h>

static int check_failures, check_count;

/* The message after the condition; fmt is " " followed by the caller's
 * format, or " " alone when there is none. */
static inline void __attribute__((format(printf, 1, 2)))
check_msg_(const char *fmt, ...)
{
	va_list ap;

	if (fmt[1] != '\0') {
		fputs(":", stderr);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
	}
	fputc('\n', stderr);
}

#define CHECK(cond, ...) do {                                               \
	check_count++;                                                      \
	if (!(cond)) {                                                      \
		check_failures++;                                           \
		fprintf(stderr, "%s:%d: check failed: %s", __FILE__, __LINE__, #cond); \
		check_msg_(" " __VA_ARGS__);                                \
	}                                                                   \
} while (0)
#endif
