/* plugin.c: the stage registry and the plugin loader.
 *
 * A plugin is refused, with one log line and no harm to the daemon, when
 * its file is group- or world-writable, when dlopen fails, when it lacks
 * pl_plugin_init, when its pl_plugin_abi is another ABI version than the
 * host's, or when its init fails (which includes refusing the host's ABI,
 * or registering a stage struct of another ABI or size, a key table of
 * another stride, or a default that is not a value of its key). Each
 * refusal names the host's ABI and the plugin's. Every registration a
 * failed init made is undone. The registry keeps its own copy of each
 * struct pl_stage. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pld.h"
#include "host.h"
#include "plio.h"

#define MAX_STAGES 256
#define MAX_PLUGINS 64

static struct stage_reg stages[MAX_STAGES];
static int nstages;
static struct plugin *plugins[MAX_PLUGINS];
static int nplugins;
/* Set while a plugin's init runs: the registration error, if any. */
static char reg_error[256];

int
plugin_struct_check(const char *what, const void *src, size_t size, char *why, size_t whylen)
{
	uint32_t hdr[2];

	if (src == NULL) {
		snprintf(why, whylen, "no %s", what);
		return -1;
	}
	memcpy(hdr, src, sizeof(hdr));
	if (hdr[0] != PL_ABI_VERSION) {
		snprintf(why, whylen, "%s of ABI %u (host: ABI %d)", what, hdr[0], PL_ABI_VERSION);
		return -1;
	}
	if (hdr[1] != size) {
		snprintf(why, whylen, "%s of ABI %u size %u (host: ABI %d size %zu)%s",
		    what, hdr[0], hdr[1], PL_ABI_VERSION, size,
		    hdr[1] > size ? ": built for a newer host" : "");
		return -1;
	}
	return 0;
}

/* Whether v is one of choices ("a|b|c"). */
static int
plugin_key_choice(const char *choices, const char *v)
{
	size_t vl = strlen(v);

	for (const char *c = choices; *c != '\0'; ) {
		size_t n = strcspn(c, "|");
		if (n == vl && strncmp(c, v, n) == 0)
			return 1;
		c += n + (c[n] == '|');
	}
	return 0;
}

int
plugin_key_value(const struct pl_key *k, const char *v, char *why, size_t whylen)
{
	int64_t iv = 0;
	double dv = 0;
	int bv;
	const char *what = NULL;

	switch (k->type) {
	case PL_KEY_INT: if (parse_int(v, &iv) == -1) what = "an integer"; break;
	case PL_KEY_FLOAT: if (parse_double(v, &dv) == -1) what = "a number"; break;
	case PL_KEY_BOOL: if (parse_bool(v, &bv) == -1) what = "yes or no"; break;
	case PL_KEY_DURATION: if (parse_duration(v, &dv) == -1) what = "a duration (30s, 5m, 2h)"; break;
	case PL_KEY_SIZE: if (parse_size(v, &iv) == -1) what = "a size (512, 8M, 2G)"; break;
	case PL_KEY_PATH: case PL_KEY_INPUT: if (*v == '\0') what = "a path"; break;
	default: break;
	}
	/* A long value cuts the message visibly (plc_sb), not silently. */
	struct plc_sb sb;
	plc_sb_init(&sb, why, whylen);
	if (what) {
		plc_sb_appendf(&sb, "bad value \"%s\": expected %s", v, what);
		return 1;
	}
	/* The key's choices (pl_key choices, "a|b|c"): the value is one of
	 * them, else "V" is not a, b or c. */
	if (k->choices != NULL && !plugin_key_choice(k->choices, v)) {
		plc_sb_appendf(&sb, "\"%s\" is not ", v);
		const char *c = k->choices;
		for (int i = 0; *c != '\0'; i++) {
			size_t n = strcspn(c, "|");
			const char *next = c + n + (c[n] == '|');
			plc_sb_appendf(&sb, "%s%.*s", i == 0 ? "" : *next == '\0' ? " or " : ", ",
			    (int)n, c);
			c = next;
		}
		return 2;
	}
	/* The key's bounds (pl_key min and max), on the value as parsed. */
	int64_t lo = k->min, hi = k->max;
	unsigned b = k->flags & (PL_KEY_MIN | PL_KEY_MAX);
	double x = k->type == PL_KEY_INT || k->type == PL_KEY_SIZE ? (double)iv : dv;
	int num = k->type == PL_KEY_INT || k->type == PL_KEY_SIZE ||
	    k->type == PL_KEY_FLOAT || k->type == PL_KEY_DURATION;
	if (!num || !(((b & PL_KEY_MIN) && x < (double)lo) || ((b & PL_KEY_MAX) && x > (double)hi)))
		return 0;
	if ((b & PL_KEY_MIN) && (b & PL_KEY_MAX) && lo == hi)
		plc_sb_appendf(&sb, "%s is out of range: must be %lld", v, (long long)lo);
	else if ((b & PL_KEY_MIN) && (b & PL_KEY_MAX))
		plc_sb_appendf(&sb, "%s is out of range: must be between %lld and %lld", v,
		    (long long)lo, (long long)hi);
	else if (b & PL_KEY_MIN)
		plc_sb_appendf(&sb, "%s is out of range: must be %lld or more", v, (long long)lo);
	else
		plc_sb_appendf(&sb, "%s is out of range: must be %lld or less", v, (long long)hi);
	return 2;
}

/* Every default of a stage's key table is a value of its key: the getters
 * then never fall back to their def argument for a key with a default.
 * Choices are a string key's, and not empty. */
static int
check_defaults(const struct pl_stage *st)
{
	char why[256];

	for (const struct pl_key *k = st->keys; k != NULL && k->name != NULL; k++) {
		if (k->choices != NULL && (k->type != PL_KEY_STRING || *k->choices == '\0')) {
			snprintf(reg_error, sizeof(reg_error), "stage \"%s\": key %s: choices "
			    "on a key that is not a string, or empty", st->name, k->name);
			return -1;
		}
		if (k->def != NULL && plugin_key_value(k, k->def, why, sizeof(why)) != 0) {
			snprintf(reg_error, sizeof(reg_error), "stage \"%s\": key %s: default %s",
			    st->name, k->name, why);
			return -1;
		}
	}
	return 0;
}

int
plugin_register_stage(void *plugin, const struct pl_stage *pst)
{
	struct plugin *p = plugin;
	if (plugin_struct_check("stage struct", pst, sizeof(*pst), reg_error,
	    sizeof(reg_error)) == -1)
		return PL_EABI;
	const struct pl_stage *st = pst;
	if (st->name == NULL || !valid_name(st->name) || st->run == NULL) {
		snprintf(reg_error, sizeof(reg_error), "stage without a valid name or run hook");
		return PL_EINVAL;
	}
	if (plugin_stage(st->name) != NULL) {
		snprintf(reg_error, sizeof(reg_error), "stage \"%s\" is already registered", st->name);
		return PL_EEXIST;
	}
	if (nstages == MAX_STAGES) {
		snprintf(reg_error, sizeof(reg_error), "too many stages");
		return PL_ENOMEM;
	}
	if (st->key_size != sizeof(struct pl_key)) {
		snprintf(reg_error, sizeof(reg_error), "stage \"%s\": struct pl_key of ABI %u "
		    "size %u (host: ABI %d size %zu)", st->name, st->abi, st->key_size,
		    PL_ABI_VERSION, sizeof(struct pl_key));
		return PL_EABI;
	}
	if (check_defaults(st) == -1)
		return PL_EINVAL;
	struct pl_stage *own = xcalloc(1, sizeof(*own));
	*own = *st;
	stages[nstages].st = own;
	stages[nstages].plugin = p;
	nstages++;
	p->nstages++;
	return PL_OK;
}

/* Undo every registration of plugin p. */
static void
unregister(struct plugin *p)
{
	int w = 0;
	for (int i = 0; i < nstages; i++)
		if (stages[i].plugin != p)
			stages[w++] = stages[i];
		else
			free(stages[i].st);
	nstages = w;
	p->nstages = 0;
}

int
plugin_load(const char *path, const struct pl_host *host, char *why, size_t whylen)
{
	struct stat st;
	if (stat(path, &st) == -1) {
		snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, whylen, "file is group- or world-writable (mode %04o)",
		    (unsigned)(st.st_mode & 07777));
		return -1;
	}
	if (nplugins == MAX_PLUGINS) {
		snprintf(why, whylen, "too many plugins");
		return -1;
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		snprintf(why, whylen, "dlopen: %s", dlerror());
		return -1;
	}
	pl_plugin_init_fn init = (pl_plugin_init_fn)dlsym(h, PL_ENTRY_SYMBOL);
	if (init == NULL) {
		snprintf(why, whylen, "no entry symbol %s", PL_ENTRY_SYMBOL);
		dlclose(h);
		return -1;
	}
	/* The plugin's ABI, when it says (PL_PLUGIN() does): one of another
	 * version is refused before its init is handed a table it cannot read. */
	const uint32_t *abi = dlsym(h, PL_ABI_SYMBOL);
	if (abi != NULL && *abi != PL_ABI_VERSION) {
		snprintf(why, whylen, "ABI version mismatch: plugin of ABI %u (host: ABI %d)%s",
		    *abi, PL_ABI_VERSION, *abi > PL_ABI_VERSION ? ": built for a newer host" :
		    ": built for an older host");
		dlclose(h);
		return -1;
	}
	struct plugin *p = xcalloc(1, sizeof(*p));
	snprintf(p->path, sizeof(p->path), "%s", path);
	p->handle = h;
	reg_error[0] = '\0';
	int rc = init(host, p);
	if (rc != PL_OK || p->nstages == 0) {
		if (rc == PL_EABI && reg_error[0] == '\0' && abi != NULL)
			snprintf(why, whylen, "init failed: ABI version mismatch: plugin of ABI %u "
			    "refused the host (host: ABI %d)", *abi, PL_ABI_VERSION);
		else if (rc == PL_EABI && reg_error[0] == '\0')
			snprintf(why, whylen, "init failed: ABI version mismatch: plugin of an ABI "
			    "it does not state (no %s) refused the host (host: ABI %d)",
			    PL_ABI_SYMBOL, PL_ABI_VERSION);
		else if (rc != PL_OK)
			snprintf(why, whylen, "init failed: %s%s%s", host->strerror(rc),
			    reg_error[0] ? ": " : "", reg_error);
		else
			snprintf(why, whylen, "init registered no stage");
		unregister(p);
		dlclose(h);
		free(p);
		return -1;
	}
	plugins[nplugins++] = p;
	return 0;
}

static int
cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
plugin_load_dir(const char *dir, const struct pl_host *host)
{
	DIR *d = opendir(dir);
	if (d == NULL) {
		log_warn("%s: %s", __func__, dir);
		return 0;
	}
	char **names = NULL;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		if (len < 4 || strcmp(de->d_name + len - 3, ".so") != 0)
			continue;
		names = xrealloc(names, (size_t)n + 1, sizeof(*names));
		names[n++] = xstrdup(de->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof(*names), cmpstr);
	int loaded = 0;
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX], why[512];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		int already = 0;
		for (int k = 0; k < nplugins; k++)
			already |= strcmp(plugins[k]->path, path) == 0;
		if (!already) {
			if (plugin_load(path, host, why, sizeof(why)) == -1)
				log_warnx("plugin_load: %s: refused: %s", path, why);
			else
				loaded++;
		}
		free(names[i]);
	}
	free(names);
	return loaded;
}

const struct stage_reg *
plugin_stage(const char *name)
{
	for (int i = 0; i < nstages; i++)
		if (strcmp(stages[i].st->name, name) == 0)
			return &stages[i];
	return NULL;
}

int
plugin_nstages(void)
{
	return nstages;
}

const struct stage_reg *
plugin_stage_at(int i)
{
	return i >= 0 && i < nstages ? &stages[i] : NULL;
}
