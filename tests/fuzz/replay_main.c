/* replay_main.c: a plain main for a libFuzzer target, so every corpus is
 * replayed inside `make check` without clang's fuzzing runtime:
 *   replay_NAME FILE|DIR...   runs LLVMFuzzerTestOneInput on each file. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
one(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		perror(path);
		return -1;
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
	if (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)(n > 0 ? n : 0));
	free(buf);
	return 0;
}

int
main(int argc, char **argv)
{
	int count = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) == -1) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (one(argv[i]) == -1)
				return 1;
			count++;
			continue;
		}
		DIR *d = opendir(argv[i]);
		struct dirent *de;
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			char p[4096];
			snprintf(p, sizeof(p), "%s/%s", argv[i], de->d_name);
			if (one(p) == -1)
				return 1;
			count++;
		}
		closedir(d);
	}
	printf("replayed %d inputs\n", count);
	return count > 0 ? 0 : 1;
}
