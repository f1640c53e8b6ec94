/*
 * fuzz_cases.c: the bake's two operator files (plugins/lib/score/score_cases.c) on
 * arbitrary bytes: the input as a case file (pipeline-cases(5)) against a
 * fixed capability list, and as a capability list. A loaded case file's
 * every case has an id, a line within the file and a user turn, and a
 * route case an asserted capability of the list; a refusal names the
 * file. A loaded capability list holds distinct printable names without
 * quotes or backslashes.
 */
#include <ctype.h>
#include <limits.h>

#include "score.h"
#include "fuzz.h"

static char cases_path[PATH_MAX], caps_path[PATH_MAX];
static struct sc_caps caps;

static void
setup(void)
{
	static const char list[] = "open_folder\ndelete_file\nclarify hidden\nsearch\n";
	const char *dir = fz_tmpdir("fuzz_cases");
	char err[512];

	snprintf(cases_path, sizeof(cases_path), "%s/cases.jsonl", dir);
	snprintf(caps_path, sizeof(caps_path), "%s/capabilities.txt", dir);
	fz_write(caps_path, (const uint8_t *)list, sizeof(list) - 1);
	if (sc_caps_load(caps_path, &caps, err, sizeof(err)) == -1) {
		fprintf(stderr, "fuzz_cases: %s\n", err);
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct sc_case *cs = NULL;
	struct sc_caps c2;
	char err[1024];
	int n = 0, lines = 1;

	if (!ready) {
		setup();
		ready = 1;
	}
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	fz_write(cases_path, data, size);
	if (sc_cases_load(cases_path, &caps, &cs, &n, err, sizeof(err)) == 0) {
		for (int i = 0; i < n; i++) {
			const struct sc_case *k = &cs[i];
			if (k->id == NULL || k->user == NULL || k->line < 1 || k->line > lines)
				abort();
			if (k->kind == SC_ROUTE && (k->expect == NULL ||
			    sc_caps_find(&caps, k->expect) < 0))
				abort();
			for (int f = 0; f < k->nforbid; f++)
				if (k->forbid[f] == NULL)
					abort();
			(void)sc_case_skipped(k, &caps);
		}
		sc_cases_free(cs, n);
	} else if (strncmp(err, cases_path, strlen(cases_path)) != 0) {
		abort();   /* every refusal names the file */
	}
	fz_write(caps_path, data, size);
	if (sc_caps_load(caps_path, &c2, err, sizeof(err)) == 0) {
		for (int i = 0; i < c2.n; i++) {
			const char *nm = c2.name[i];
			if (nm[0] == '\0' || strlen(nm) >= SC_NAME_MAX || sc_caps_find(&c2, nm) != i)
				abort();
			for (const char *q = nm; *q; q++)
				if (!isprint((unsigned char)*q) || *q == '"' || *q == '\\')
					abort();
		}
		cJSON_Delete(sc_schema(&c2));
		sc_caps_free(&c2);
	} else if (strncmp(err, caps_path, strlen(caps_path)) != 0) {
		abort();
	}
	return 0;
}
