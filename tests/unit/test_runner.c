/*
 * test_runner.c: the unit tests' runner (runner.h) itself. The cases run
 * this binary again with PL_RUNNER_INNER set, where main runs a list of
 * its own (a case that passes, one whose CHECK fails, one that crashes,
 * one that skips), and read what it printed and how it exited: a failed
 * check or a crash fails its case and the test, a skip is counted apart,
 * --case runs one case alone, --list lists them, an unknown case is an
 * error.
 */
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static const struct unit_case inner[] = {
	{ "good", inner_good },
	{ "bad", inner_bad },
	{ "crash", inner_crash },
	{ "skipped", inner_skipped },
	UNIT_END
};

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

/* Every case: the bad and the crashed one fail the test. */
static void
case_all(void)
{
	char out[8192];

	CHECK(inner_run("", out, sizeof(out)) == 1, "%s", out);
	CHECK(strstr(out, "ok good\n") != NULL);
	CHECK(strstr(out, "check failed: 1 + 1 == 3: planted") != NULL);
	CHECK(strstr(out, "not ok bad: exit 1\n") != NULL);
	/* Killed by SIGSEGV; under ASan its handler reports and exits 1. */
	CHECK(strstr(out, "not ok crash: killed by signal 11\n") != NULL ||
	    strstr(out, "not ok crash: exit 1\n") != NULL, "%s", out);
	CHECK(strstr(out, "skip skipped\n") != NULL);
	CHECK(strstr(out, "4 cases: 1 passed, 2 failed, 1 skipped\n") != NULL, "%s", out);
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
	CHECK(strcmp(out, "good\nbad\ncrash\nskipped\n") == 0, "%s", out);
	CHECK(inner_run("--bogus", out, sizeof(out)) == 2);
	CHECK(strstr(out, "usage:") != NULL);
}

static const struct unit_case cases[] = {
	UNIT_CASE(all),
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
