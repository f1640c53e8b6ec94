/*
 * test_mapguard.c: the SIGBUS guard for mapped reads (plc_guard_begin,
 * plio.h). A file of four pages is mapped and truncated to one: a
 * touch of a page past the new end under a guard comes back as the error
 * branch of sigsetjmp, again and again (the mask is right after each
 * jump, with or without sigsetjmp's mask saved, and in a thread that
 * blocks SIGBUS), in two threads at once; a touch of a page still there
 * does not. In child processes: a fault with no guard, in a thread other
 * than the guarded one, or a SIGBUS sent with kill while a guard is set,
 * still kills the process with SIGBUS (under ASan: its report); a handler installed before the
 * guard's still gets the faults that are not guarded (as the copies in
 * several plugins chain). A write(2) from the lost pages fails with
 * EFAULT, and a copy of the file comes back short (plc_copy_range: EIO).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plio.h"
#include "runner.h"

static char path[4200];
static size_t page;
static volatile unsigned char *map;   /* four pages; only the first is in the file */
static volatile unsigned sink;
static int mapfd;                     /* the mapped file, truncated to one page */

/* Read one byte of the mapping under a guard: 0, or -1 on SIGBUS. */
static int
touch(size_t off, int savemask)
{
	sigjmp_buf jb;
	if (sigsetjmp(jb, savemask))
		return -1;
	plc_guard_begin(&jb);
	sink += map[off];
	plc_guard_end();
	return 0;
}

static int
bus_blocked(void)
{
	sigset_t s;
	pthread_sigmask(SIG_SETMASK, NULL, &s);
	return sigismember(&s, SIGBUS);
}

static void *
faulter(void *arg)
{
	int *bad = arg;
	for (int i = 0; i < 2000; i++) {
		if (touch(2 * page + (size_t)i % page, i & 1) != -1 || touch(0, 1) != 0)
			(*bad)++;
	}
	return NULL;
}

static void *
blocked_faulter(void *arg)
{
	int *bad = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (int i = 0; i < 100; i++)
		if (touch(3 * page, 1) != -1)
			(*bad)++;
	return NULL;
}

/* Run fn in a child; its wait status. No core files. */
static int
in_child(void (*fn)(void))
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = { 0, 0 };
		setrlimit(RLIMIT_CORE, &rl);
		alarm(20);
		fn();
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return st;
}

/* Whether a SIGBUS had its default action before the guard's handler
 * (not so under ASan, whose handler reports the fault and exits). */
static int bus_default;

/* The child died of the fault, as it would without the guard: killed by
 * SIGBUS, or by the sanitizer's handler (not at one of its _exit calls). */
static int
crashed(int st)
{
	if (bus_default)
		return WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS;
	return !WIFEXITED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 3 &&
	    WEXITSTATUS(st) != 4);
}

static void
child_unguarded(void)
{
	CHECK(touch(3 * page, 1) == -1);   /* installed, and working */
	sink += map[3 * page];              /* no guard: the default action */
	_exit(3);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int guarded;

static void *
hold_guard(void *arg)
{
	sigjmp_buf jb;
	if (sigsetjmp(jb, 1))
		_exit(4);   /* another thread's fault must not land here */
	plc_guard_begin(&jb);
	pthread_mutex_lock(&mu);
	guarded = 1;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	for (;;)
		pause();
	return NULL;
}

static void
child_other_thread(void)
{
	pthread_t t;
	pthread_create(&t, NULL, hold_guard, NULL);
	pthread_mutex_lock(&mu);
	while (!guarded)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	sink += map[3 * page];
	_exit(3);
}

static void
child_sent(void)
{
	sigjmp_buf jb;
	if (sigsetjmp(jb, 1))
		_exit(4);   /* kill(2) is not a fault */
	plc_guard_begin(&jb);
	kill(getpid(), SIGBUS);
	plc_guard_end();
	_exit(3);
}

static void
earlier_handler(int sig, siginfo_t *si, void *uc)
{
	_exit(si->si_code > 0 && si->si_addr == (void *)(map + 3 * page) ? 42 : 43);
}

static void
child_chained(void)
{
	struct sigaction sa = { .sa_sigaction = earlier_handler, .sa_flags = SA_SIGINFO };
	sigaction(SIGBUS, &sa, NULL);
	/* No guard has been used in this process yet: the first installs its
	 * handler over this one. */
	if (touch(3 * page, 1) != -1)
		_exit(5);
	sink += map[3 * page];
	_exit(3);
}

/* A handler set before the first guard: each case is a process that has
 * used no guard yet, and the child inherits that. */
static void
case_chained(void)
{
	int st = in_child(child_chained);

	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42);
}

/* Under a guard, again and again. */
static void
case_repeated(void)
{
	int bad = 0;

	for (int i = 0; i < 1000; i++) {
		if (touch(page + (size_t)i, i & 1) != -1 || touch((size_t)i, 1) != 0)
			bad++;
		if (bus_blocked())
			bad++;
	}
	CHECK(bad == 0);
	CHECK(touch(page - 1, 0) == 0);     /* the last byte still in the file */
}

/* Two threads faulting at once, and one that blocks every signal. */
static void
case_threads(void)
{
	pthread_t t1, t2, t3;
	int bad1 = 0, bad2 = 0, bad3 = 0;

	pthread_create(&t1, NULL, faulter, &bad1);
	pthread_create(&t2, NULL, faulter, &bad2);
	pthread_create(&t3, NULL, blocked_faulter, &bad3);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	pthread_join(t3, NULL);
	CHECK(bad1 == 0 && bad2 == 0 && bad3 == 0);
}

/* What is not guarded crashes as before. */
static void
case_unguarded(void)
{
	CHECK(crashed(in_child(child_unguarded)));
	CHECK(crashed(in_child(child_other_thread)));
	CHECK(crashed(in_child(child_sent)));
}

/* The kernel's own reads of the lost pages fail instead of raising
 * SIGBUS; a copy of the file comes back short. */
static void
case_kernel_reads(void)
{
	char cpath[4300];
	int cfd;

	snprintf(cpath, sizeof(cpath), "%s.copy", path);
	cfd = open(cpath, O_RDWR | O_CREAT | O_TRUNC, 0600);
	errno = 0;
	CHECK(write(cfd, (const void *)(map + 2 * page), page) == -1 && errno == EFAULT);
	errno = 0;
	CHECK(plc_copy_range(mapfd, 0, cfd, 0, 4 * page) == -1 && errno == EIO);
	close(cfd);
	unlink(cpath);
}

static const struct unit_case cases[] = {
	UNIT_CASE(chained),
	UNIT_CASE(repeated),
	UNIT_CASE(threads),
	UNIT_CASE(unguarded),
	UNIT_CASE(kernel_reads),
	UNIT_END
};

/* The file of four pages, mapped, then truncated to one; every case
 * inherits the mapping. */
int
main(int argc, char **argv)
{
	const char *t = getenv("TEST_TMP");
	snprintf(path, sizeof(path), "%s/mapped", t ? t : "/tmp");
	page = (size_t)sysconf(_SC_PAGESIZE);
	struct sigaction old;
	sigaction(SIGBUS, NULL, &old);
	bus_default = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL;

	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	unsigned char *buf = malloc(4 * page);
	memset(buf, 'x', 4 * page);
	if (fd == -1 || write(fd, buf, 4 * page) != (ssize_t)(4 * page)) {
		perror(path);
		return 1;
	}
	map = mmap(NULL, 4 * page, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	sink += map[3 * page];
	if (ftruncate(fd, (off_t)page) != 0) {
		perror("ftruncate");
		return 1;
	}
	mapfd = fd;
	int rc = unit_main(argc, argv, cases);

	munmap((void *)map, 4 * page);
	close(fd);
	unlink(path);
	free(buf);
	return rc;
}
