/* fuzz_spec.c: the run-spec parser and checker (daemon/server/spec.c) on
 * arbitrary text: every input is either refused with messages or parsed
 * into a spec whose every job has a name, and every parse error is a
 * line of its own naming a line of the text (but the last, which may
 * count the errors past the first 100); nothing crashes or leaks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pld.h"
#include "host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* "... and N more error(s)\n" as the list's last line, N from 1 up. */
static int
more_line(const char *l)
{
	char *end;
	if (strncmp(l, "... and ", 8) != 0 || l[8] < '1' || l[8] > '9')
		return 0;
	long n = strtol(l + 8, &end, 10);
	const char *want = n == 1 ? " more error\n" : " more errors\n";
	return strncmp(end, want, strlen(want)) == 0 && end[strlen(want)] == '\0';
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	char *errs = NULL;
	struct spec *s = spec_parse("fuzz.ini", text, &errs);
	if (s != NULL) {
		for (int i = 0; i < s->njobs; i++)
			if (s->jobs[i]->name == NULL)
				abort();
		spec_check(s, NULL, host_check_section, 0, &errs);
		spec_free(s);
	} else if (errs == NULL) {
		abort(); /* a refusal always says why */
	} else {
		/* Each parse error is a line of its own that names the file and a
		 * line of the text: nothing of the next line is glued in. Past
		 * the first ERRS_MAX errors the list ends with one line that
		 * counts the rest (errlist.c), the last line and the only one
		 * that names no line. */
		int lines = 1;
		for (size_t i = 0; i < size; i++)
			lines += data[i] == '\n';
		for (const char *l = errs; *l; l = strchr(l, '\n') + 1) {
			char *end;
			if (strchr(l, '\n') == NULL)
				abort();
			if (more_line(l))
				continue;
			if (strncmp(l, "fuzz.ini:", 9) != 0 || strtol(l + 9, &end, 10) > lines ||
			    *end != ':')
				abort();
		}
	}
	free(errs);
	free(text);
	return 0;
}
