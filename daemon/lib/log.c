/* log.c: the daemon's log, in the OpenBSD style: log_warn adds strerror,
 * log_warnx does not; messages start with the function name. In the
 * foreground lines go to stderr, otherwise to the log file. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pld.h"

static FILE *log_fp;
static int log_lvl = LOG_LVL_INFO;
static int log_tee;     /* warnings and errors to stderr too (start-up) */
static pthread_mutex_t log_mtx = PTHREAD_MUTEX_INITIALIZER;

static const char *const lvl_names[] = { "error", "warn", "info", "debug" };

/* Log to stderr in the foreground, to the file otherwise; -1 (errno set,
 * stderr used) when the file cannot be opened for appending. */
int
log_init(int foreground, int level, const char *file)
{
	log_lvl = level;
	if (!foreground && file != NULL && *file) {
		FILE *f = fopen(file, "ae");
		if (f == NULL) {
			log_fp = stderr;
			return -1;
		}
		setvbuf(f, NULL, _IOLBF, 0);
		log_fp = f;
		return 0;
	}
	log_fp = stderr;
	return 0;
}

/* While a detached daemon starts, its warnings and errors go to the
 * operator's terminal as well as to the log file. */
void
log_tee_stderr(int on)
{
	pthread_mutex_lock(&log_mtx);
	log_tee = on;
	pthread_mutex_unlock(&log_mtx);
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
	if (log_tee && f != stderr && lvl <= LOG_LVL_WARN) {
		fprintf(stderr, "pipelined: %s%s%s\n", msg, with_errno ? ": " : "",
		    with_errno ? strerror(saved) : "");
		fflush(stderr);
	}
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
