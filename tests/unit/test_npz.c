/*
 * test_npz.c: the .npz reader (plugins/lib/format/npz.c) against archives
 * written by numpy's own np.savez (Debian's python3 and numpy), as
 * tokenize writes tokens.npz: int32 and unicode arrays, zip64 extras; and
 * its refusals: a compressed archive, a missing array, another dtype, a
 * file that is not a zip.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plio.h"
#include "runner.h"

/* The archives numpy writes (in main, before the cases). */
static char dir[] = "/tmp/test_npz.XXXXXX", p[4200], pz[4200], bad[4200];

static void
case_read(void)
{
	char err[512], s[64];
	struct npz_array a;

	CHECK(npz_read(p, "prompt_len", &a, err, sizeof(err)) == 0);
	CHECK(a.n == 3 && strcmp(a.descr, "<i4") == 0);
	CHECK(npz_int(&a, 0) == 7 && npz_int(&a, 1) == -3 && npz_int(&a, 2) == 70000);
	npz_free(&a);
	CHECK(npz_read(p, "keys", &a, err, sizeof(err)) == 0);
	CHECK(a.n == 3 && strncmp(a.descr, "<U", 2) == 0);
	CHECK(npz_str(&a, 0, s, sizeof(s)) == 6 && strcmp(s, "ex0001") == 0);
	CHECK(npz_str(&a, 1, s, sizeof(s)) > 0 && strcmp(s, "k-\xc3\xa9t\xc3\xa9") == 0);
	CHECK(npz_str(&a, 2, s, sizeof(s)) > 0 && strcmp(s, "long-key-number-three") == 0);
	CHECK(npz_str(&a, 2, s, 8) == -1);
	npz_free(&a);
	CHECK(npz_read(p, "input_ids", &a, err, sizeof(err)) == 0 && a.n == 10 &&
	    npz_int(&a, 9) == 9);
	npz_free(&a);
}

/* Refusals, each naming the file. */
static void
case_refusals(void)
{
	char err[512];
	struct npz_array a;

	CHECK(npz_read(p, "offsets", &a, err, sizeof(err)) == -1 && strstr(err, p) &&
	    strstr(err, "no array offsets"));
	CHECK(npz_read(p, "f", &a, err, sizeof(err)) == -1 && strstr(err, "<f8"));
	CHECK(npz_read(pz, "keys", &a, err, sizeof(err)) == -1 && strstr(err, "compressed"));
	FILE *f = fopen(bad, "w");
	fputs("not a zip at all, but long enough to look for an end record", f);
	fclose(f);
	CHECK(npz_read(bad, "keys", &a, err, sizeof(err)) == -1 && strstr(err, "not a zip"));
	CHECK(npz_read("/nonexistent/x.npz", "keys", &a, err, sizeof(err)) == -1);
}

static const struct unit_case cases[] = {
	UNIT_CASE(read),
	UNIT_CASE(refusals),
	UNIT_END
};

int
main(int argc, char **argv)
{
	char cmd[4096];
	int rc;

	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(p, sizeof(p), "%s/t.npz", dir);
	snprintf(pz, sizeof(pz), "%s/z.npz", dir);
	snprintf(bad, sizeof(bad), "%s/bad.npz", dir);
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -c '"
	    "import numpy as np, sys\n"
	    "k = np.asarray([\"ex0001\", \"k-\\u00e9t\\u00e9\", \"long-key-number-three\"], dtype=str)\n"
	    "np.savez(sys.argv[1], input_ids=np.arange(10, dtype=np.int32), keys=k,\n"
	    "    prompt_len=np.asarray([7, -3, 70000], dtype=np.int32), f=np.zeros(2))\n"
	    "np.savez_compressed(sys.argv[2], keys=k)\n"
	    "' %s %s", p, pz);
	if (system(cmd) != 0) {
		fprintf(stderr, "numpy could not write the archives\n");
		return 1;
	}
	rc = unit_main(argc, argv, cases);
	unlink(p);
	unlink(pz);
	unlink(bad);
	rmdir(dir);
	return rc;
}
