/*
 * test_runner.c: the unit tests' runner (runner.h) itself. The cases run
 * this binary again with PL_RUNNER_INNER set, where main runs a list of
 * its own (a case that passes, one whose CHECK fails, one that crashes,
 * one that skips, one that hangs), and read what it printed and how it
 * exited: a failed check or a crash fails its case and the test, a skip
 * is counted apart, a case past its time limit is killed with what it
 * started and fails, named; --case runs one case alone, --list lists
 * them, an unknown case is an error.
 */
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runner.h"

static const char *self;

static void
inner_good(void)
{
	CHECK(1 + 1 == 2);
}

static void
inner_bad(void)
{
	CHECK(1 + 1 == 3, "planted");
}

static void
inner_crash(void)
{
	raise(SIGSEGV);
}

static void
inner_skipped(void)
{
	UNIT_SKIP("planted skip");
}

/* Hangs, after starting a process that would outlive it (its pid in
 * $PL_RUNNER_PIDFILE): the runner must kill both. */
static void
inner_hang(void)
{
	const char *pidfile = getenv("PL_RUNNER_PIDFILE");
	pid_t kid = fork();

	if (kid == 0) {
		for (;;)
			pause();
	}
	if (pidfile != NULL) {
		FILE *f = fopen(pidfile, "w");
		if (f != NULL) {
			fprintf(f, "%d\n", (int)kid);
			fclose(f);
		}
	}
	for (;;)
		pause();
}

static const struct unit_case inner[] = {
	{ "good", inner_good, 0 },
	{ "bad", inner_bad, 0 },
	{ "crash", inner_crash, 0 },
	{ "skipped", inner_skipped, 0 },
	{ "hang", inner_hang, 1 },              /* its own limit: 1 s */
	{ "hang_default", inner_hang, 0 },      /* UNIT_TIMEOUT's */
	UNIT_END
};

static double
mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Run this binary with PL_RUNNER_INNER and ARGS; its output (stdout and
 * stderr) in out, its exit status returned, -1 when it could not run. */
static int
inner_run(const char *args, char *out, size_t len)
{
	char cmd[4200];
	size_t n;
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "PL_RUNNER_INNER=1 '%s' %s 2>&1", self, args);
	p = popen(cmd, "r");
	if (p == NULL)
		return -1;
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Every case: the bad, the crashed and the hung ones fail the test. */
static void
case_all(void)
{
	char out[8192];

	setenv("UNIT_TIMEOUT", "1", 1);
	CHECK(inner_run("", out, sizeof(out)) == 1, "%s", out);
	CHECK(strstr(out, "ok good\n") != NULL);
	CHECK(strstr(out, "check failed: 1 + 1 == 3: planted") != NULL);
	CHECK(strstr(out, "not ok bad: exit 1\n") != NULL);
	/* Killed by SIGSEGV; under ASan its handler reports and exits 1. */
	CHECK(strstr(out, "not ok crash: killed by signal 11\n") != NULL ||
	    strstr(out, "not ok crash: exit 1\n") != NULL, "%s", out);
	CHECK(strstr(out, "skip skipped\n") != NULL);
	CHECK(strstr(out, "not ok hang: timed out after 1 s\n") != NULL, "%s", out);
	CHECK(strstr(out, "6 cases: 1 passed, 4 failed, 1 skipped\n") != NULL, "%s", out);
}

/* A hung case is killed at its limit, with the process it started, and
 * reported by name; the others run on. The limit is the case's own, else
 * UNIT_TIMEOUT's; a UNIT_TIMEOUT that is no number of seconds is an error. */
static void
case_timeout(void)
{
	char out[8192], pidfile[4200], buf[32];
	const char *tmp = getenv("TEST_TMP");
	double t0;
	FILE *f;
	int kid = 0;

	snprintf(pidfile, sizeof(pidfile), "%s/hang.pid", tmp ? tmp : "/tmp");
	unlink(pidfile);
	setenv("PL_RUNNER_PIDFILE", pidfile, 1);
	unsetenv("UNIT_TIMEOUT");
	t0 = mono();
	CHECK(inner_run("--case hang", out, sizeof(out)) == 1, "%s", out);
	CHECK(mono() - t0 < 20, "took %.1f s", mono() - t0);
	CHECK(strstr(out, "not ok hang: timed out after 1 s\n") != NULL, "%s", out);
	CHECK(strstr(out, "1 cases: 0 passed, 1 failed\n") != NULL, "%s", out);
	f = fopen(pidfile, "r");
	CHECK(f != NULL && fgets(buf, sizeof(buf), f) != NULL && (kid = atoi(buf)) > 0,
	    "%s: no pid", pidfile);
	if (f != NULL)
		fclose(f);
	/* The case's child was killed with it (and reparented: not ours to
	 * reap, so a zombie for a moment at most). */
	for (int i = 0; kid > 0 && i < 200 && kill(kid, 0) == 0; i++) {
		struct timespec ten = { 0, 10 * 1000000 };
		nanosleep(&ten, NULL);
	}
	CHECK(kid > 0 && kill(kid, 0) == -1 && errno == ESRCH, "pid %d still there", kid);

	setenv("UNIT_TIMEOUT", "2", 1);
	t0 = mono();
	CHECK(inner_run("--case hang_default", out, sizeof(out)) == 1, "%s", out);
	CHECK(mono() - t0 >= 1.9 && mono() - t0 < 20, "took %.1f s", mono() - t0);
	CHECK(strstr(out, "not ok hang_default: timed out after 2 s\n") != NULL, "%s", out);

	setenv("UNIT_TIMEOUT", "soon", 1);
	CHECK(inner_run("--case good", out, sizeof(out)) == 2, "%s", out);
	CHECK(strstr(out, "UNIT_TIMEOUT=soon: not a number of seconds") != NULL, "%s", out);
	unsetenv("UNIT_TIMEOUT");
}

/* One case by name, alone; a skip alone exits 77, as a skipped test. */
static void
case_by_name(void)
{
	char out[8192];

	CHECK(inner_run("--case good", out, sizeof(out)) == 0, "%s", out);
	CHECK(strstr(out, "1 cases: 1 passed, 0 failed\n") != NULL && strstr(out, "bad") == NULL);
	CHECK(inner_run("--case bad", out, sizeof(out)) == 1, "%s", out);
	CHECK(inner_run("--case skipped", out, sizeof(out)) == UNIT_SKIPPED, "%s", out);
	CHECK(inner_run("--case nosuch", out, sizeof(out)) == 2, "%s", out);
	CHECK(strstr(out, "no case named nosuch") != NULL);
}

static void
case_list(void)
{
	char out[8192];

	CHECK(inner_run("--list", out, sizeof(out)) == 0);
	CHECK(strcmp(out, "good\nbad\ncrash\nskipped\nhang\nhang_default\n") == 0, "%s", out);
	CHECK(inner_run("--bogus", out, sizeof(out)) == 2);
	CHECK(strstr(out, "usage:") != NULL);
}

static const struct unit_case cases[] = {
	UNIT_CASE(all),
	UNIT_CASE(timeout),
	UNIT_CASE(by_name),
	UNIT_CASE(list),
	UNIT_END
};

int
main(int argc, char **argv)
{
	self = argv[0];
	if (getenv("PL_RUNNER_INNER") != NULL) {
		struct rlimit rl = { 0, 0 };

		setrlimit(RLIMIT_CORE, &rl);   /* the planted crash leaves no core */
		return unit_main(argc, argv, inner);
	}
	return unit_main(argc, argv, cases);
}
