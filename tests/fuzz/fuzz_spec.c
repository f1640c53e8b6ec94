/* fuzz_spec.c: the run-spec parser and checker (daemon/spec.c) on
 * arbitrary text: every input is either refused with messages or parsed
 * into a spec whose every job has a name; nothing crashes or leaks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pipelined.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
		spec_check(s, NULL, &errs);
		spec_free(s);
	} else if (errs == NULL) {
		abort(); /* a refusal always says why */
	}
	free(errs);
	free(text);
	return 0;
}
