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
 *
 * A case has a time limit, as libuv's tests do: UNIT_TIMEOUT seconds (60;
 * the environment's UNIT_TIMEOUT, when set, instead), or its own with
 * UNIT_CASE_TIMEOUT(name, seconds). A case past it is killed with its
 * whole process group (each case runs in a group of its own, so what it
 * started goes too) and reported "not ok NAME: timed out after N s".
 */
#ifndef RUNNER_H
#define RUNNER_H
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

struct unit_case {
	const char *name;
	void (*fn)(void);
	int timeout;            /* seconds; 0: unit_timeout() */
};

#define UNIT_CASE(name) { #name, case_##name, 0 }
#define UNIT_CASE_TIMEOUT(name, secs) { #name, case_##name, (secs) }
#define UNIT_END { NULL, NULL, 0 }

/* A case's time limit when it sets none. */
#define UNIT_TIMEOUT 60

/* The exit status of a skipped case, as of a skipped test. */
#define UNIT_SKIPPED 77
#define UNIT_SKIP(...) do {                                                 \
	printf("skip: " __VA_ARGS__);                                       \
	putchar('\n');                                                      \
	fflush(NULL);                                                       \
	_exit(UNIT_SKIPPED);                                                \
} while (0)

/* The default limit: UNIT_TIMEOUT, or the environment's UNIT_TIMEOUT. */
static int
unit_timeout(void)
{
	const char *v = getenv("UNIT_TIMEOUT");
	char *end;
	long n;

	if (v == NULL || *v == '\0')
		return UNIT_TIMEOUT;
	n = strtol(v, &end, 10);
	if (*end != '\0' || n <= 0 || n > 86400) {
		fprintf(stderr, "UNIT_TIMEOUT=%s: not a number of seconds (1 to 86400)\n", v);
		exit(2);
	}
	return (int)n;
}

/* unit_wait: wait for the case's process pid at most secs seconds; 0
 * with its status in st, or -1 when the time ran out. A pidfd tells when
 * it ended; without one (an old kernel) the wait polls every 10 ms. */
static int
unit_wait(pid_t pid, int secs, int *st)
{
	struct timespec t0, t;
	int fd, left;

	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		pid_t r = waitpid(pid, st, WNOHANG);

		if (r == pid || (r == -1 && errno != EINTR)) {
			if (fd != -1)
				close(fd);
			if (r != pid)
				*st = 255 << 8;   /* not ours to wait for: a failure */
			return 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		left = secs * 1000 - (int)((t.tv_sec - t0.tv_sec) * 1000 +
		    (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			break;
		if (fd != -1) {
			struct pollfd pf = { .fd = fd, .events = POLLIN };
			poll(&pf, 1, left);
		} else {
			struct timespec ten = { 0, 10 * 1000000 };
			nanosleep(&ten, NULL);
		}
	}
	if (fd != -1)
		close(fd);
	return -1;
}

/* unit_run_case: one case in a child process of a process group of its
 * own; its outcome as the child's exit status, -1 when the fork failed,
 * -2 when it ran past its time limit (then it and its group are killed). */
static int
unit_run_case(const struct unit_case *c)
{
	int secs = c->timeout > 0 ? c->timeout : unit_timeout();
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	if (pid == -1) {
		perror("unit_run_case: fork");
		return -1;
	}
	if (pid == 0) {
		setpgid(0, 0);
		c->fn();
		printf("%s: %d checks, %d failed\n", c->name, check_count, check_failures);
		fflush(NULL);
		_exit(check_failures ? 1 : 0);
	}
	setpgid(pid, pid);      /* both sides: whichever runs first */
	if (unit_wait(pid, secs, &st) == 0)
		return st;
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	return -2;
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
		if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			pass++;
			printf("ok %s\n", c->name);
		} else if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == UNIT_SKIPPED) {
			skip++;
			printf("skip %s\n", c->name);
		} else {
			fail++;
			if (st == -1)
				printf("not ok %s: not started\n", c->name);
			else if (st == -2)
				printf("not ok %s: timed out after %d s\n", c->name,
				    c->timeout > 0 ? c->timeout : unit_timeout());
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
