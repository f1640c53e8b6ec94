/*
 * runner.h: the unit tests' runner, after libuv's test runner. A unit test
 * is a list of named cases; each case runs in a process of its own (a
 * fork of the test), so a crash, an exit or the state one case leaves
 * behind (a scheduler, signal handlers, rlimits, the CHECK counts) is its
 * own, and any case runs alone by its name:
 *
 *     static void case_names(void) { CHECK(...); }
 *     static void case_basic(void) { CHECK(...); }
 *
 *     static const struct unit_case cases[] = {
 *             UNIT_CASE(names),
 *             UNIT_CASE(basic),
 *             UNIT_END
 *     };
 *
 *     int main(int argc, char **argv) { return unit_main(argc, argv, cases); }
 *
 *     test_NAME                 every case, in the list's order
 *     test_NAME --case CASE     that case alone (tests/run.sh unit/NAME/CASE)
 *     test_NAME --list          the names of the cases
 *
 * A case passes when its process ends with exit status 0 and no CHECK of
 * it failed; UNIT_SKIP("why") ends it as skipped (a precondition is
 * missing). A case's process prints "NAME: N checks, N failed" (or
 * "skip: why"), the runner "ok NAME", "skip NAME" or "not ok NAME: exit
 * N" (or the signal that killed it), and at the end "N cases: N passed,
 * N failed" (and "N skipped"); it exits 1 when a case failed, 77 when every case
 * run was skipped, 0 otherwise. What main does before unit_main (a
 * temporary directory, a server the cases share) every case inherits.
 */
#ifndef RUNNER_H
#define RUNNER_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

struct unit_case {
	const char *name;
	void (*fn)(void);
};

#define UNIT_CASE(name) { #name, case_##name }
#define UNIT_END { NULL, NULL }

/* The exit status of a skipped case, as of a skipped test. */
#define UNIT_SKIPPED 77
#define UNIT_SKIP(...) do {                                                 \
	printf("skip: " __VA_ARGS__);                                       \
	putchar('\n');                                                      \
	fflush(NULL);                                                       \
	_exit(UNIT_SKIPPED);                                                \
} while (0)

/* unit_run_case: one case in a child process; its outcome as the child's
 * exit status, or -1 when the fork failed. */
static int
unit_run_case(const struct unit_case *c)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	if (pid == -1) {
		perror("unit_run_case: fork");
		return -1;
	}
	if (pid == 0) {
		c->fn();
		printf("%s: %d checks, %d failed\n", c->name, check_count, check_failures);
		fflush(NULL);
		_exit(check_failures ? 1 : 0);
	}
	while (waitpid(pid, &st, 0) == -1)
		;
	return st;
}

static int
unit_main(int argc, char **argv, const struct unit_case *cases)
{
	const char *only = NULL;
	int pass = 0, fail = 0, skip = 0, found = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--list") == 0) {
			for (const struct unit_case *c = cases; c->name; c++)
				printf("%s\n", c->name);
			return 0;
		} else if (strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
			only = argv[++i];
		} else {
			fprintf(stderr, "usage: %s [--list | --case CASE]\n", argv[0]);
			return 2;
		}
	}
	for (const struct unit_case *c = cases; c->name; c++) {
		int st;

		if (only && strcmp(only, c->name) != 0)
			continue;
		found++;
		st = unit_run_case(c);
		if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			pass++;
			printf("ok %s\n", c->name);
		} else if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == UNIT_SKIPPED) {
			skip++;
			printf("skip %s\n", c->name);
		} else {
			fail++;
			if (st == -1)
				printf("not ok %s: not started\n", c->name);
			else if (WIFSIGNALED(st))
				printf("not ok %s: killed by signal %d\n", c->name, WTERMSIG(st));
			else
				printf("not ok %s: exit %d\n", c->name, WEXITSTATUS(st));
		}
		fflush(NULL);
	}
	if (only && !found) {
		fprintf(stderr, "%s: no case named %s (--list lists them)\n", argv[0], only);
		return 2;
	}
	if (skip)
		printf("%d cases: %d passed, %d failed, %d skipped\n", found, pass, fail, skip);
	else
		printf("%d cases: %d passed, %d failed\n", found, pass, fail);
	if (fail)
		return 1;
	return skip == found ? UNIT_SKIPPED : 0;
}
#endif
