/*
 * fuzz_model_output.c: the bake's model-output parser and scorer
 * (plugins/lib/score/score_cases.c) on arbitrary bytes. Whatever a model or a
 * misbehaving server returns is scored as some outcome; it never crashes,
 * leaks or reads outside the buffer. The same bytes are also tried as a
 * case-file line, which comes from an operator but is parsed by the same
 * hands.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "score.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sc_caps caps;
static struct sc_case route, guard;

static void
setup(void)
{
	static char *names[] = { "open_folder", "delete_file", "clarify", "search" };
	static unsigned char hidden[] = { 0, 0, 1, 0 }, disabled[] = { 0, 0, 0, 0 };
	static const char r[] = "{\"id\":\"r\",\"kind\":\"route\",\"user\":\"open docs\","
	    "\"expect\":{\"capability\":\"open_folder\",\"args\":{\"path\":\"docs\","
	    "\"deep\":{\"a\":[1,{\"b\":null}]}}},\"forbid\":[\"delete_file\"]}";
	static const char g[] = "{\"id\":\"g\",\"kind\":\"guard\",\"user\":\"x\","
	    "\"forbid\":[\"delete_file\"]}";
	char err[256];

	caps.n = 4;
	caps.name = names;
	caps.hidden = hidden;
	caps.disabled = disabled;
	if (sc_case_parse(r, sizeof(r) - 1, &caps, &route, err, sizeof(err)) == -1 ||
	    sc_case_parse(g, sizeof(g) - 1, &caps, &guard, err, sizeof(err)) == -1)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	char got[SC_NAME_MAX], why[256];
	struct sc_case c;
	int o;

	if (!ready) {
		setup();
		ready = 1;
	}
	o = sc_score(&route, &caps, (const char *)data, size, got, sizeof(got), why, sizeof(why));
	if (o < SC_PASS || o > SC_UNPARSEABLE)
		abort();
	/* An output that passes must name the asserted capability. */
	if (o == SC_PASS && strcmp(got, "open_folder") != 0)
		abort();
	o = sc_score(&guard, &caps, (const char *)data, size, got, sizeof(got), why, sizeof(why));
	if (o == SC_PASS && strcmp(got, "delete_file") == 0)
		abort();
	if (sc_case_parse((const char *)data, size, &caps, &c, why, sizeof(why)) == 0)
		sc_case_free(&c);
	return 0;
}
