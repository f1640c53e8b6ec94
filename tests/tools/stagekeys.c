/*
 * stagekeys.c: print a stage plugin's key table as the body of a Python
 * dict, for tests/tools/gen-jobkeys.sh, which writes jobs/pljob/keys.py
 * from it. The plugin is loaded with dlopen and initialised with a host
 * whose only service is register_stage, as the daemon registers it, so
 * the table printed is the one the daemon and pipelinectl use.
 *
 *     stagekeys PLUGIN.so STAGE
 *
 * prints one line per key:
 *     "NAME": K("TYPE", DEFAULT, MIN, MAX, CHOICES, CHECKPOINT),
 * where DEFAULT is the default's text or None, MIN and MAX are numbers
 * when the key has PL_KEY_MIN or PL_KEY_MAX, else None, CHOICES is a
 * tuple of the key's choices or None, and CHECKPOINT is True when the key
 * has PL_KEY_CHECKPOINT (K is keys.py's named tuple).
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pipeline/plugin.h"

static const char *want;
static const struct pl_stage *found;

static int
capture(void *plugin, const struct pl_stage *st)
{
	(void)plugin;
	if (strcmp(st->name, want) == 0)
		found = st;
	return PL_OK;
}

static const char *
type_name(int t)
{
	static const char *const names[] = {
		[PL_KEY_STRING] = "string", [PL_KEY_INT] = "int",
		[PL_KEY_FLOAT] = "float", [PL_KEY_BOOL] = "bool",
		[PL_KEY_DURATION] = "duration", [PL_KEY_SIZE] = "size",
		[PL_KEY_PATH] = "path", [PL_KEY_LIST] = "list",
		[PL_KEY_INPUT] = "input",
	};
	if (t < 0 || (size_t)t >= sizeof(names) / sizeof(names[0]) || names[t] == NULL)
		return NULL;
	return names[t];
}

/* A Python string literal of s: the defaults are plain text, but a quote
 * or a backslash must not end the literal. */
static void
print_str(const char *s)
{
	putchar('"');
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
	putchar('"');
}

int
main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: stagekeys PLUGIN.so STAGE\n");
		return 2;
	}
	want = argv[2];
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		fprintf(stderr, "stagekeys: %s\n", dlerror());
		return 1;
	}
	pl_plugin_init_fn init = (pl_plugin_init_fn)dlsym(h, "pl_plugin_init");
	if (init == NULL) {
		fprintf(stderr, "stagekeys: %s: no pl_plugin_init\n", argv[1]);
		return 1;
	}
	struct pl_host host;
	memset(&host, 0, sizeof(host));
	host.abi = PL_ABI_VERSION;
	host.size = sizeof(host);
	host.register_stage = capture;
	if (init(&host, NULL) != PL_OK || found == NULL) {
		fprintf(stderr, "stagekeys: %s: no stage %s registered\n", argv[1], want);
		return 1;
	}
	for (const struct pl_key *k = found->keys; k->name != NULL; k++) {
		const char *t = type_name(k->type);
		if (t == NULL) {
			fprintf(stderr, "stagekeys: %s: key %s: unknown type %d\n",
			    want, k->name, k->type);
			return 1;
		}
		printf("    \"%s\": K(\"%s\", ", k->name, t);
		if (k->def != NULL)
			print_str(k->def);
		else
			fputs("None", stdout);
		if (k->flags & PL_KEY_MIN)
			printf(", %" PRId64, k->min);
		else
			fputs(", None", stdout);
		if (k->flags & PL_KEY_MAX)
			printf(", %" PRId64, k->max);
		else
			fputs(", None", stdout);
		if (k->choices != NULL) {
			/* "a|b|c" as the tuple ("a", "b", "c"); "a" as ("a",). */
			fputs(", (", stdout);
			int i = 0;
			for (const char *c = k->choices; *c != '\0'; i++) {
				size_t n = strcspn(c, "|");
				char w[256];
				snprintf(w, sizeof(w), "%.*s", (int)n, c);
				fputs(i > 0 ? ", " : "", stdout);
				print_str(w);
				c += n + (c[n] == '|');
			}
			fputs(i == 1 ? ",)" : ")", stdout);
		} else
			fputs(", None", stdout);
		printf(", %s),\n", (k->flags & PL_KEY_CHECKPOINT) ? "True" : "False");
	}
	return 0;
}
