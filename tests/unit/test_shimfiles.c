/* test_shimfiles.c: the job records (shimfiles.c) read when the
 * process is out of descriptors (idle connections holding them all): an
 * exit.json that says status 0 is read as such with every descriptor taken, not taken for a
 * missing record; a missing record is still missing. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "pld.h"
#include "executor.h"
#include "runner.h"

/* Every descriptor taken (the rlimit lowered: the case's process is its
 * own), the records are still read. */
static void
case_out_of_descriptors(void)
{
	char dir[] = "/tmp/test_shimfiles.XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/exit.json", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fputs("{\"exited\":1,\"status\":3,\"signal\":0}\n", f);
	fclose(f);

	proc_reserve_fd();
	struct rlimit rl = { 64, 64 };
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = 64;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	int fds[64], n = 0;
	while (n < 64 && (fds[n] = open("/dev/null", O_RDONLY)) != -1)
		n++;
	CHECK(n < 64 && errno == EMFILE);
	CHECK(open(path, O_RDONLY) == -1 && errno == EMFILE);

	struct proc p;
	memset(&p, 0, sizeof(p));
	snprintf(p.dir, sizeof(p.dir), "%s", dir);
	CHECK(proc_read_exit(&p) == 1);
	CHECK(p.exited == 1 && p.status == 3);
	/* Again: the reserve was taken back after the first read. */
	memset(&p, 0, sizeof(p));
	snprintf(p.dir, sizeof(p.dir), "%s", dir);
	CHECK(proc_read_exit(&p) == 1 && p.status == 3);
	/* Still out of descriptors, a missing record is missing. */
	snprintf(p.dir, sizeof(p.dir), "%s/none", dir);
	CHECK(proc_read_exit(&p) == 0);

	while (n > 0)
		close(fds[--n]);
	unlink(path);
	rmdir(dir);
}

static const struct unit_case cases[] = {
	UNIT_CASE(out_of_descriptors),
	UNIT_END
};

int
main(int argc, char **argv)
{
	return unit_main(argc, argv, cases);
}
