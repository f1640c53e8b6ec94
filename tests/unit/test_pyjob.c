/*
 * test_pyjob.c: the job-program helpers (plugins/lib/job/pyjob.c): the
 * checkpoint check the train stage trusts instead of the job (a COMPLETE
 * marker in sha256sum(1) format, written last, listing exactly the other
 * files, each hashing as recorded), the choice of the newest complete
 * checkpoint, event-line accessors and exit descriptions.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plio.h"
#include "pyjob.h"
#include "runner.h"

static char root[PATH_MAX];

static void
put(const char *dir, const char *name, const char *text)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (plc_write_file_atomic(p, text, strlen(text), 0644) == -1) {
		perror(p);
		exit(1);
	}
}

/* A checkpoint directory with two files and a correct marker. */
static void
make_ckpt(char *dir, size_t len, long step)
{
	char ha[65], hb[65], marker[256];
	snprintf(dir, len, "%s/checkpoints/checkpoint-%ld", root, step);
	plc_mkdirs(dir, 0755);
	put(dir, "adapter_model.safetensors", "weights");
	put(dir, "optimizer.pt", "moments");
	plc_sha256_buf("weights", 7, ha);
	plc_sha256_buf("moments", 7, hb);
	snprintf(marker, sizeof(marker), "%s  adapter_model.safetensors\n%s  optimizer.pt\n",
	    ha, hb);
	put(dir, "COMPLETE", marker);
}

static void
case_verify(void)
{
	char d[PATH_MAX], why[512], p[PATH_MAX];

	make_ckpt(d, sizeof(d), 25);
	CHECK(pyjob_checkpoint_verify(d, why, sizeof(why)) == 0, "complete: %s", why);

	/* A file changed after the marker was written. */
	put(d, "optimizer.pt", "Moments");
	CHECK(pyjob_checkpoint_verify(d, why, sizeof(why)) == -1 &&
	    strstr(why, "optimizer.pt: sha256") != NULL, "hash: %s", why);
	make_ckpt(d, sizeof(d), 25);

	/* A file the marker does not cover. */
	put(d, "rng.pt", "state");
	CHECK(pyjob_checkpoint_verify(d, why, sizeof(why)) == -1 &&
	    strstr(why, "3 files present but COMPLETE lists 2") != NULL, "extra: %s", why);
	snprintf(p, sizeof(p), "%s/rng.pt", d);
	unlink(p);

	/* A listed file missing. */
	snprintf(p, sizeof(p), "%s/optimizer.pt", d);
	unlink(p);
	CHECK(pyjob_checkpoint_verify(d, why, sizeof(why)) == -1 &&
	    strstr(why, "optimizer.pt is listed in COMPLETE but missing") != NULL,
	    "missing: %s", why);
	make_ckpt(d, sizeof(d), 25);

	/* No marker: the save was cut short. */
	snprintf(p, sizeof(p), "%s/COMPLETE", d);
	unlink(p);
	CHECK(pyjob_checkpoint_verify(d, why, sizeof(why)) == -1 &&
	    strstr(why, "no COMPLETE marker") != NULL, "no marker: %s", why);

	/* Malformed and empty markers. */
	put(d, "COMPLETE", "not a hash  adapter_model.safetensors\n");
	CHECK(pyjob_checkpoint_verify(d, why, sizeof(why)) == -1 &&
	    strstr(why, "COMPLETE line 1 is malformed") != NULL, "malformed: %s", why);
	put(d, "COMPLETE", "");
	CHECK(pyjob_checkpoint_verify(d, why, sizeof(why)) == -1 &&
	    strstr(why, "lists no files") != NULL, "empty: %s", why);
	char bad[256];
	snprintf(bad, sizeof(bad), "%064d  ../escape\n", 0);
	put(d, "COMPLETE", bad);
	CHECK(pyjob_checkpoint_verify(d, why, sizeof(why)) == -1, "a path with a slash");
}

struct skips {
	int n;
	char last[PATH_MAX];
};

static void
on_skip(void *arg, const char *dir, const char *why)
{
	struct skips *s = arg;
	s->n++;
	snprintf(s->last, sizeof(s->last), "%s", dir);
	(void)why;
}

static void
case_newest(void)
{
	char d[PATH_MAX], got[PATH_MAX], croot[PATH_MAX], p[PATH_MAX];
	long step = -1;
	struct skips sk = { 0 };

	snprintf(croot, sizeof(croot), "%s/checkpoints", root);
	make_ckpt(d, sizeof(d), 25);
	make_ckpt(d, sizeof(d), 50);
	make_ckpt(d, sizeof(d), 100);       /* numeric order, not lexical */
	make_ckpt(d, sizeof(d), 75);
	/* 100 is incomplete: its marker is gone. */
	snprintf(p, sizeof(p), "%s/checkpoint-100/COMPLETE", croot);
	unlink(p);
	/* Names that are not checkpoints are ignored. */
	snprintf(p, sizeof(p), "%s/checkpoint-", croot);
	plc_mkdirs(p, 0755);
	snprintf(p, sizeof(p), "%s/checkpoint-7x", croot);
	plc_mkdirs(p, 0755);
	snprintf(p, sizeof(p), "%s/.checkpoint-125.tmp", croot);
	plc_mkdirs(p, 0755);

	CHECK(pyjob_checkpoint_newest(croot, got, sizeof(got), &step, on_skip, &sk) == 1,
	    "found none");
	CHECK(step == 75, "step %ld, want 75", step);
	CHECK(strstr(got, "/checkpoint-75") != NULL, "%s", got);
	CHECK(sk.n == 1 && strstr(sk.last, "checkpoint-100") != NULL, "skips %d (%s)",
	    sk.n, sk.last);

	char none[PATH_MAX];
	snprintf(none, sizeof(none), "%s/nothing-here", root);
	CHECK(pyjob_checkpoint_newest(none, got, sizeof(got), &step, NULL, NULL) == 0,
	    "a missing directory has no checkpoint");
}

static void
case_events(void)
{
	char b[64];
	const char *l = "{\"type\":\"memory\",\"peak_mb\":6653.5,\"gpu\":\"RTX\",\"s\":\"12.5\"}";
	CHECK(pyjob_event_num(l, "peak_mb", -1) == 6653.5, "number");
	CHECK(pyjob_event_num(l, "s", -1) == 12.5, "number as a string");
	CHECK(pyjob_event_num(l, "absent", -1) == -1, "default");
	CHECK(pyjob_event_num("not json", "x", 7) == 7, "bad line");
	CHECK(pyjob_event_str(l, "gpu", b, sizeof(b)) == 0 && strcmp(b, "RTX") == 0, "string");
	CHECK(pyjob_event_str(l, "peak_mb", b, sizeof(b)) == -1, "not a string");
}

static void
case_exit_str(void)
{
	struct pl_exit e;
	char b[512];
	memset(&e, 0, sizeof(e));
	e.exited = 1;
	e.status = 3;
	snprintf(e.error, sizeof(e.error), "CUDA out of memory");
	pyjob_exit_str(&e, b, sizeof(b));
	CHECK(strcmp(b, "exited with status 3 (out of memory): CUDA out of memory") == 0, "%s", b);
	e.exited = 0;
	e.signal = SIGKILL;
	e.error[0] = '\0';
	pyjob_exit_str(&e, b, sizeof(b));
	CHECK(strcmp(b, "killed by signal 9 (Killed)") == 0, "%s", b);
	e.exited = 1;
	e.status = 42;
	pyjob_exit_str(&e, b, sizeof(b));
	CHECK(strcmp(b, "exited with status 42") == 0, "%s", b);
}

static const struct unit_case cases[] = {
	UNIT_CASE(verify),
	UNIT_CASE(newest),
	UNIT_CASE(events),
	UNIT_CASE(exit_str),
	UNIT_END
};

int
main(int argc, char **argv)
{
	const char *t = getenv("TEST_TMP");
	snprintf(root, sizeof(root), "%s/test_pyjob.XXXXXX", t ? t : "/tmp");
	if (mkdtemp(root) == NULL) {
		perror(root);
		return 1;
	}
	int rc = unit_main(argc, argv, cases);
	return rc;
}
