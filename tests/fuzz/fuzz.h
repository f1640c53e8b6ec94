/* fuzz.h: what several fuzz targets share: a private temporary
 * directory, made once per process and removed at its exit, and the
 * input as a NUL-terminated heap copy (exactly sized, so a read past it
 * is caught). */
#ifndef FUZZ_H
#define FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fz_dir[64];

static inline void
fz_rmdir(void)
{
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fz_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz: cannot remove %s\n", fz_dir);
}

/* The target's temporary directory, under the test's (TEST_TMP: a
 * replay in tests/run.sh), TMPDIR or /tmp. */
static inline const char *
fz_tmpdir(const char *name)
{
	if (fz_dir[0] == '\0') {
		const char *t = getenv("TEST_TMP");
		if (t == NULL || *t == '\0')
			t = getenv("TMPDIR");
		snprintf(fz_dir, sizeof(fz_dir), "%.32s/%.16s.XXXXXX", t && *t ? t : "/tmp", name);
		if (mkdtemp(fz_dir) == NULL) {
			perror(fz_dir);
			abort();
		}
		atexit(fz_rmdir);
	}
	return fz_dir;
}

static inline char *
fz_text(const uint8_t *data, size_t size)
{
	char *t = malloc(size + 1);
	if (t == NULL)
		abort();
	memcpy(t, data, size);
	t[size] = '\0';
	return t;
}

/* Write the input to a file (events files, configurations). */
static inline void
fz_write(const char *path, const uint8_t *data, size_t size)
{
	FILE *f = fopen(path, "w");
	if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
		perror(path);
		abort();
	}
}

#endif
