/*
 * fuzz_conf.c: pipelined.conf(5) (daemon/lib/conf.c: inih and its handler)
 * on arbitrary bytes, written as the configuration file: it loads or is
 * refused with messages, every one a line naming the file and a line of
 * it; a loaded configuration prints (pipelined -nv) and its values are
 * in range: resources with a name and a capacity from 0 to 1000000, at
 * least one job at a time, at least 4 KiB queued for a watcher.
 */
#include "pld.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[PATH_MAX];
	static FILE *devnull;
	struct conf c;
	char *errs = NULL;
	int lines = 1;

	if (path[0] == '\0') {
		char *dir = realpath(fz_tmpdir("fuzz_conf"), NULL);
		snprintf(path, sizeof(path), "%s/pipelined.conf", dir);
		free(dir);
		devnull = fopen("/dev/null", "w");
	}
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	fz_write(path, data, size);
	if (conf_load(&c, path, &errs) == 0) {
		if (errs != NULL || c.max_jobs < 1 || c.feed_queue_max < 4096)
			abort();
		for (int i = 0; i < c.nres; i++)
			if (c.res[i].name[0] == '\0' || c.res[i].capacity < 0 ||
			    c.res[i].capacity > 1000000)
				abort();
		conf_print(&c, devnull);
	} else {
		if (errs == NULL)
			abort();
		for (const char *l = errs; *l; l = strchr(l, '\n') + 1) {
			char *end;
			if (strncmp(l, path, strlen(path)) != 0 || l[strlen(path)] != ':' ||
			    strtol(l + strlen(path) + 1, &end, 10) > lines || *end != ':' ||
			    strchr(l, '\n') == NULL)
				abort();
		}
	}
	conf_free(&c);
	free(errs);
	return 0;
}
