/* log.c: the daemon's log, in the OpenBSD style: log_warn adds strerror,
 * log_warnx does not; messages start with the function name. In the
 * foreground lines go to stderr, otherwise to the log file. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipelined.h"

static FILE *log_fp;
static int log_lvl = LOG_LVL_INFO;
static pthread_mutex_t log_mtx = PTHREAD_MUTEX_INITIALIZER;

static const char *const lvl_names[] = { "error", "warn", "info", "debug" };

void
log_init(int foreground, int level, const char *file)
{
	log_lvl = level;
	if (!foreground && file != NULL && *file) {
		FILE *f = fopen(file, "a");
		if (f != NULL) {
			setvbuf(f, NULL, _IOLBF, 0);
			log_fp = f;
			return;
		}
	}
	log_fp = stderr;
}

void
log_setlevel(int level)
{
	log_lvl = level;
}

int
log_getlevel(void)
{
	return log_lvl;
}

int
log_level_parse(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(s, lvl_names[i]) == 0)
			return i;
	if (strcmp(s, "warning") == 0)
		return LOG_LVL_WARN;
	return -1;
}

const char *
log_level_name(int level)
{
	return level >= 0 && level < 4 ? lvl_names[level] : "?";
}

static void
vlog(int lvl, int with_errno, const char *fmt, va_list ap)
{
	if (lvl > log_lvl)
		return;
	int saved = errno;
	char msg[2048];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	char ts[32];
	struct timespec now;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	pthread_mutex_lock(&log_mtx);
	FILE *f = log_fp ? log_fp : stderr;
	if (with_errno)
		fprintf(f, "%s.%03ldZ %s: %s: %s\n", ts, now.tv_nsec / 1000000,
		    lvl_names[lvl], msg, strerror(saved));
	else
		fprintf(f, "%s.%03ldZ %s: %s\n", ts, now.tv_nsec / 1000000,
		    lvl_names[lvl], msg);
	fflush(f);
	pthread_mutex_unlock(&log_mtx);
	errno = saved;
}

#define LOGFN(name, lvl, e)                     \
	void name(const char *fmt, ...)         \
	{                                       \
		va_list ap;                     \
		va_start(ap, fmt);              \
		vlog(lvl, e, fmt, ap);          \
		va_end(ap);                     \
	}
LOGFN(log_warn, LOG_LVL_WARN, 1)
LOGFN(log_warnx, LOG_LVL_WARN, 0)
LOGFN(log_info, LOG_LVL_INFO, 0)
LOGFN(log_debug, LOG_LVL_DEBUG, 0)

void
fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(LOG_LVL_ERR, 1, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(LOG_LVL_ERR, 0, fmt, ap);
	va_end(ap);
	exit(1);
}
