/*
 * score.c: case files, capability lists, output parsing, scoring, Wilson
 * intervals, aggregates and the release rule. Pure functions: no I/O but
 * reading the case, capability and stats files.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "plcommon.h"
#include "score.h"

static char *
xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int
valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= SC_NAME_MAX)
		return 0;
	for (; *s; s++)
		if (!isprint((unsigned char)*s) || *s == '"' || *s == '\\')
			return 0;
	return 1;
}

const char *
sc_outcome_name(int o)
{
	switch (o) {
	case SC_PASS:		return "pass";
	case SC_MISS:		return "miss";
	case SC_FORBIDDEN:	return "forbidden";
	case SC_UNPARSEABLE:	return "unparseable";
	case SC_ERROR:		return "error";
	case SC_SKIPPED:	return "skipped";
	}
	return "unknown";
}

/*
 * The capability list: one capability per line, optionally followed by the
 * words "hidden" (accepted but not documented in the prompt) and
 * "disabled" (not runnable in this bake). '#' starts a comment.
 */
int
sc_caps_load(const char *path, struct sc_caps *caps, char *err, size_t errlen)
{
	char *text, *line, *save = NULL;
	int lineno = 0;

	memset(caps, 0, sizeof(*caps));
	if ((text = plc_read_file(path, NULL, 1 << 20)) == NULL) {
		plc_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	/* strtok_r would merge empty lines and lose line numbers: split by hand. */
	for (line = text; line != NULL; line = save) {
		char *nl = strchr(line, '\n'), *w, *wsave = NULL;
		int idx = -1;

		save = nl ? nl + 1 : NULL;
		if (nl)
			*nl = '\0';
		lineno++;
		if ((w = strchr(line, '#')) != NULL)
			*w = '\0';
		for (w = strtok_r(line, " \t\r", &wsave); w != NULL;
		    w = strtok_r(NULL, " \t\r", &wsave)) {
			if (idx < 0) {
				if (!valid_name(w)) {
					plc_seterr(err, errlen, "%s:%d: bad capability name", path, lineno);
					goto fail;
				}
				if (sc_caps_find(caps, w) >= 0) {
					plc_seterr(err, errlen, "%s:%d: capability %s listed twice",
					    path, lineno, w);
					goto fail;
				}
				int n = caps->n + 1;
				char **nn = realloc(caps->name, n * sizeof(*nn));
				if (nn == NULL)
					goto nomem;
				caps->name = nn;
				unsigned char *h = realloc(caps->hidden, n);
				if (h == NULL)
					goto nomem;
				caps->hidden = h;
				unsigned char *d = realloc(caps->disabled, n);
				if (d == NULL)
					goto nomem;
				caps->disabled = d;
				idx = caps->n;
				if ((caps->name[idx] = strdup(w)) == NULL)
					goto nomem;
				caps->hidden[idx] = caps->disabled[idx] = 0;
				caps->n = n;
			} else if (strcmp(w, "hidden") == 0) {
				caps->hidden[idx] = 1;
			} else if (strcmp(w, "disabled") == 0) {
				caps->disabled[idx] = 1;
			} else {
				plc_seterr(err, errlen, "%s:%d: unknown flag \"%s\" (hidden, disabled)",
				    path, lineno, w);
				goto fail;
			}
		}
	}
	free(text);
	if (caps->n == 0) {
		plc_seterr(err, errlen, "%s: no capabilities listed", path);
		return -1;
	}
	return 0;
nomem:
	plc_seterr(err, errlen, "%s:%d: out of memory", path, lineno);
fail:
	free(text);
	sc_caps_free(caps);
	return -1;
}

int
sc_caps_find(const struct sc_caps *caps, const char *name)
{
	for (int i = 0; i < caps->n; i++)
		if (strcmp(caps->name[i], name) == 0)
			return i;
	return -1;
}

int
sc_caps_disable(struct sc_caps *caps, const char *name)
{
	int i = sc_caps_find(caps, name);

	if (i < 0)
		return -1;
	caps->disabled[i] = 1;
	return 0;
}

void
sc_caps_free(struct sc_caps *caps)
{
	for (int i = 0; i < caps->n; i++)
		free(caps->name[i]);
	free(caps->name);
	free(caps->hidden);
	free(caps->disabled);
	memset(caps, 0, sizeof(*caps));
}

/*
 * The enum holds every capability the router accepts, hidden ones too: an
 * enum built from the documented list alone forced one capability's cases
 * to another (G26). Disabled capabilities are not accepted in this bake.
 */
cJSON *
sc_schema(const struct sc_caps *caps)
{
	cJSON *s = cJSON_CreateObject(), *props, *cap, *en, *req;

	cJSON_AddStringToObject(s, "type", "object");
	props = cJSON_AddObjectToObject(s, "properties");
	cap = cJSON_AddObjectToObject(props, "capability");
	cJSON_AddStringToObject(cap, "type", "string");
	en = cJSON_AddArrayToObject(cap, "enum");
	for (int i = 0; i < caps->n; i++)
		if (!caps->disabled[i])
			cJSON_AddItemToArray(en, cJSON_CreateString(caps->name[i]));
	cJSON_AddStringToObject(cJSON_AddObjectToObject(props, "args"), "type", "object");
	req = cJSON_AddArrayToObject(s, "required");
	cJSON_AddItemToArray(req, cJSON_CreateString("capability"));
	cJSON_AddItemToArray(req, cJSON_CreateString("args"));
	return s;
}

/* Case files. */

static const char *
getstr(const cJSON *o, const char *k, int *bad)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	if (v == NULL || cJSON_IsNull(v))
		return NULL;
	if (!cJSON_IsString(v)) {
		*bad = 1;
		return NULL;
	}
	return v->valuestring;
}

void
sc_case_free(struct sc_case *c)
{
	free(c->id);
	free(c->channel);
	cJSON_Delete(c->setup);
	free(c->user);
	free(c->expect);
	cJSON_Delete(c->args);
	for (int i = 0; i < c->nforbid; i++)
		free(c->forbid[i]);
	free(c->forbid);
	free(c->train_key);
	memset(c, 0, sizeof(*c));
}

void
sc_cases_free(struct sc_case *cases, int n)
{
	for (int i = 0; i < n; i++)
		sc_case_free(&cases[i]);
	free(cases);
}

static const char *const case_keys[] = {
	"id", "kind", "channel", "setup", "user", "expect", "forbid", "train_key", NULL
};

/*
 * One JSONL line: {"id", "kind": "route"|"guard", "channel", "setup": [{"role",
 * "content", "channel"}], "user", "expect": {"capability", "args"},
 * "forbid": [...], "train_key"}. Everything is checked against the
 * capability list, so a typo in a case is an error here and not a silent
 * miss at scoring time.
 */
int
sc_case_parse(const char *line, size_t len, const struct sc_caps *caps,
    struct sc_case *c, char *err, size_t errlen)
{
	cJSON *o, *v, *e;
	const char *s;
	int bad = 0;

	memset(c, 0, sizeof(*c));
	o = cJSON_ParseWithLength(line, len);
	if (o == NULL || !cJSON_IsObject(o)) {
		plc_seterr(err, errlen, "not a JSON object");
		cJSON_Delete(o);
		return -1;
	}
	cJSON_ArrayForEach(v, o) {
		int k;
		for (k = 0; case_keys[k]; k++)
			if (v->string && strcmp(v->string, case_keys[k]) == 0)
				break;
		if (case_keys[k] == NULL) {
			plc_seterr(err, errlen, "unknown field \"%.40s\"", v->string ? v->string : "");
			goto fail;
		}
	}
	s = getstr(o, "id", &bad);
	if (bad || s == NULL || !valid_name(s)) {
		plc_seterr(err, errlen, "id: missing or not a short printable string");
		goto fail;
	}
	c->id = xstrdup(s);

	s = getstr(o, "kind", &bad);
	if (bad || s == NULL || (strcmp(s, "route") != 0 && strcmp(s, "guard") != 0)) {
		plc_seterr(err, errlen, "case %s: kind: must be \"route\" or \"guard\"", c->id);
		goto fail;
	}
	c->kind = strcmp(s, "guard") == 0 ? SC_GUARD : SC_ROUTE;

	s = getstr(o, "channel", &bad);
	if (bad) {
		plc_seterr(err, errlen, "case %s: channel: not a string", c->id);
		goto fail;
	}
	c->channel = xstrdup(s ? s : "default");

	s = getstr(o, "user", &bad);
	if (bad || s == NULL || *s == '\0') {
		plc_seterr(err, errlen, "case %s: user: missing or not a string", c->id);
		goto fail;
	}
	c->user = xstrdup(s);

	c->setup = cJSON_CreateArray();
	if ((v = cJSON_GetObjectItemCaseSensitive(o, "setup")) != NULL && !cJSON_IsNull(v)) {
		if (!cJSON_IsArray(v)) {
			plc_seterr(err, errlen, "case %s: setup: not an array", c->id);
			goto fail;
		}
		int i = 0;
		cJSON_ArrayForEach(e, v) {
			const char *role, *content, *ch;
			if (!cJSON_IsObject(e)) {
				plc_seterr(err, errlen, "case %s: setup[%d]: not an object", c->id, i);
				goto fail;
			}
			role = getstr(e, "role", &bad);
			content = getstr(e, "content", &bad);
			ch = getstr(e, "channel", &bad);
			if (bad || role == NULL || content == NULL ||
			    (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0)) {
				plc_seterr(err, errlen, "case %s: setup[%d]: needs role "
				    "(user or assistant) and content strings", c->id, i);
				goto fail;
			}
			/* The setup seeds context on the case's own channel; a
			 * case that seeds one channel and routes on another
			 * scores every context case context-free (G25). */
			if (ch != NULL && strcmp(ch, c->channel) != 0) {
				plc_seterr(err, errlen, "case %s: setup[%d]: channel \"%.40s\" is not "
				    "the case's channel \"%.40s\" (G25)", c->id, i, ch, c->channel);
				goto fail;
			}
			cJSON *t = cJSON_CreateObject();
			cJSON_AddStringToObject(t, "role", role);
			cJSON_AddStringToObject(t, "content", content);
			cJSON_AddItemToArray(c->setup, t);
			i++;
		}
	}

	if ((v = cJSON_GetObjectItemCaseSensitive(o, "expect")) != NULL && !cJSON_IsNull(v)) {
		if (!cJSON_IsObject(v)) {
			plc_seterr(err, errlen, "case %s: expect: not an object", c->id);
			goto fail;
		}
		s = getstr(v, "capability", &bad);
		if (bad || s == NULL) {
			plc_seterr(err, errlen, "case %s: expect.capability: missing", c->id);
			goto fail;
		}
		if (caps && sc_caps_find(caps, s) < 0) {
			plc_seterr(err, errlen, "case %s: expect.capability: \"%.60s\" is not in "
			    "the capability list", c->id, s);
			goto fail;
		}
		c->expect = xstrdup(s);
		e = cJSON_GetObjectItemCaseSensitive(v, "args");
		if (e != NULL && !cJSON_IsNull(e)) {
			if (!cJSON_IsObject(e)) {
				plc_seterr(err, errlen, "case %s: expect.args: not an object", c->id);
				goto fail;
			}
			c->args = cJSON_Duplicate(e, 1);
		}
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(o, "forbid")) != NULL && !cJSON_IsNull(v)) {
		int n = cJSON_GetArraySize(v);
		if (!cJSON_IsArray(v)) {
			plc_seterr(err, errlen, "case %s: forbid: not an array", c->id);
			goto fail;
		}
		c->forbid = calloc(n ? n : 1, sizeof(char *));
		cJSON_ArrayForEach(e, v) {
			if (!cJSON_IsString(e) || (caps && sc_caps_find(caps, e->valuestring) < 0)) {
				plc_seterr(err, errlen, "case %s: forbid[%d]: not a capability of "
				    "the list", c->id, c->nforbid);
				goto fail;
			}
			if (c->expect && strcmp(c->expect, e->valuestring) == 0) {
				plc_seterr(err, errlen, "case %s: forbid[%d]: forbids the expected "
				    "capability", c->id, c->nforbid);
				goto fail;
			}
			c->forbid[c->nforbid++] = xstrdup(e->valuestring);
		}
	}
	if (c->kind == SC_ROUTE && c->expect == NULL) {
		plc_seterr(err, errlen, "case %s: a route case needs expect.capability", c->id);
		goto fail;
	}
	if (c->kind == SC_GUARD && c->nforbid == 0) {
		plc_seterr(err, errlen, "case %s: a guard case needs a forbid list", c->id);
		goto fail;
	}
	s = getstr(o, "train_key", &bad);
	if (bad) {
		plc_seterr(err, errlen, "case %s: train_key: not a string", c->id);
		goto fail;
	}
	c->train_key = (s && *s) ? xstrdup(s) : NULL;
	if (c->kind == SC_GUARD)
		snprintf(c->group, sizeof(c->group), "guard:%s", c->forbid[0]);
	else
		snprintf(c->group, sizeof(c->group), "%s", c->expect);
	cJSON_Delete(o);
	return 0;
fail:
	cJSON_Delete(o);
	sc_case_free(c);
	return -1;
}

int
sc_cases_load(const char *path, const struct sc_caps *caps,
    struct sc_case **cases, int *ncases, char *err, size_t errlen)
{
	char *text, *line, *next, e[256];
	size_t len;
	int lineno = 0, n = 0, cap = 0;
	struct sc_case *cs = NULL;

	*cases = NULL;
	*ncases = 0;
	if ((text = plc_read_file(path, &len, 256u << 20)) == NULL) {
		plc_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	for (line = text; line != NULL && *line; line = next) {
		char *nl = strchr(line, '\n');
		const char *p;

		next = nl ? nl + 1 : NULL;
		if (nl)
			*nl = '\0';
		lineno++;
		for (p = line; *p == ' ' || *p == '\t' || *p == '\r'; p++)
			;
		if (*p == '\0' || *p == '#')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			struct sc_case *ncs = realloc(cs, cap * sizeof(*cs));
			if (ncs == NULL) {
				plc_seterr(err, errlen, "%s:%d: out of memory", path, lineno);
				goto fail;
			}
			cs = ncs;
		}
		if (sc_case_parse(line, strlen(line), caps, &cs[n], e, sizeof(e)) == -1) {
			plc_seterr(err, errlen, "%s:%d: %s", path, lineno, e);
			goto fail;
		}
		cs[n].line = lineno;
		for (int i = 0; i < n; i++)
			if (strcmp(cs[i].id, cs[n].id) == 0) {
				plc_seterr(err, errlen, "%s:%d: case id %s already used on line %d",
				    path, lineno, cs[n].id, cs[i].line);
				n++;
				goto fail;
			}
		n++;
	}
	free(text);
	if (n == 0) {
		plc_seterr(err, errlen, "%s: no cases", path);
		free(cs);
		return -1;
	}
	*cases = cs;
	*ncases = n;
	return 0;
fail:
	free(text);
	sc_cases_free(cs, n);
	return -1;
}

int
sc_case_skipped(const struct sc_case *c, const struct sc_caps *caps)
{
	int i;

	if (c->expect == NULL)
		return 0;
	i = sc_caps_find(caps, c->expect);
	return i >= 0 && caps->disabled[i];
}

static int
case_cmp(const void *a, const void *b)
{
	const struct sc_case *const *x = a, *const *y = b;

	return strcmp((*x)->id, (*y)->id);
}

/*
 * The digest covers everything that decides what a case asks and what
 * counts as a pass, in a canonical form (cases sorted by id, fields in a
 * fixed order), so reordering the file does not change it but editing a
 * case, the system prompt or the capability list does.
 */
void
sc_case_set_digest(const struct sc_case *cases, int n, const char *system,
    const struct sc_caps *caps, char hex[65])
{
	const struct sc_case **v = calloc(n ? n : 1, sizeof(*v));
	cJSON *all = cJSON_CreateObject(), *arr, *capa;
	char *text;

	for (int i = 0; i < n; i++)
		v[i] = &cases[i];
	qsort(v, n, sizeof(*v), case_cmp);
	cJSON_AddStringToObject(all, "system", system ? system : "");
	capa = cJSON_AddArrayToObject(all, "capabilities");
	for (int i = 0; i < caps->n; i++) {
		char b[SC_NAME_MAX + 32];
		snprintf(b, sizeof(b), "%s%s%s", caps->name[i],
		    caps->hidden[i] ? " hidden" : "", caps->disabled[i] ? " disabled" : "");
		cJSON_AddItemToArray(capa, cJSON_CreateString(b));
	}
	arr = cJSON_AddArrayToObject(all, "cases");
	for (int i = 0; i < n; i++) {
		const struct sc_case *c = v[i];
		cJSON *o = cJSON_CreateObject(), *f;
		cJSON_AddStringToObject(o, "id", c->id);
		cJSON_AddStringToObject(o, "kind", c->kind == SC_GUARD ? "guard" : "route");
		cJSON_AddStringToObject(o, "channel", c->channel);
		cJSON_AddItemToObject(o, "setup", cJSON_Duplicate(c->setup, 1));
		cJSON_AddStringToObject(o, "user", c->user);
		if (c->expect)
			cJSON_AddStringToObject(o, "expect", c->expect);
		if (c->args)
			cJSON_AddItemToObject(o, "args", cJSON_Duplicate(c->args, 1));
		f = cJSON_AddArrayToObject(o, "forbid");
		for (int j = 0; j < c->nforbid; j++)
			cJSON_AddItemToArray(f, cJSON_CreateString(c->forbid[j]));
		if (c->train_key)
			cJSON_AddStringToObject(o, "train_key", c->train_key);
		cJSON_AddItemToArray(arr, o);
	}
	text = cJSON_PrintUnformatted(all);
	plc_sha256_buf(text, strlen(text), hex);
	free(text);
	cJSON_Delete(all);
	free(v);
}

/* Corpus keys. */

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
sc_keys_parse(const char *json, struct sc_keys *keys, char *err, size_t errlen)
{
	cJSON *o = cJSON_Parse(json), *arr, *e;

	memset(keys, 0, sizeof(*keys));
	if (o == NULL || !cJSON_IsObject(o)) {
		plc_seterr(err, errlen, "not a JSON object");
		cJSON_Delete(o);
		return -1;
	}
	arr = cJSON_GetObjectItemCaseSensitive(o, "corpus_keys");
	if (!cJSON_IsArray(arr)) {
		plc_seterr(err, errlen, "corpus_keys: missing or not an array");
		cJSON_Delete(o);
		return -1;
	}
	keys->key = calloc(cJSON_GetArraySize(arr) + 1, sizeof(char *));
	cJSON_ArrayForEach(e, arr) {
		if (!cJSON_IsString(e)) {
			plc_seterr(err, errlen, "corpus_keys[%d]: not a string", keys->n);
			cJSON_Delete(o);
			sc_keys_free(keys);
			return -1;
		}
		keys->key[keys->n++] = strdup(e->valuestring);
	}
	qsort(keys->key, keys->n, sizeof(char *), str_cmp);
	cJSON_Delete(o);
	return 0;
}

int
sc_keys_load(const char *path, struct sc_keys *keys, char *err, size_t errlen)
{
	char *text, e[200];
	int rc;

	memset(keys, 0, sizeof(*keys));
	if ((text = plc_read_file(path, NULL, 256u << 20)) == NULL) {
		plc_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	rc = sc_keys_parse(text, keys, e, sizeof(e));
	if (rc == -1)
		plc_seterr(err, errlen, "%s: %s", path, e);
	free(text);
	return rc;
}

int
sc_keys_has(const struct sc_keys *keys, const char *key)
{
	return keys->n > 0 &&
	    bsearch(&key, keys->key, keys->n, sizeof(char *), str_cmp) != NULL;
}

void
sc_keys_free(struct sc_keys *keys)
{
	for (int i = 0; i < keys->n; i++)
		free(keys->key[i]);
	free(keys->key);
	memset(keys, 0, sizeof(*keys));
}

int
sc_held_out(const struct sc_case *c, const struct sc_keys *keys)
{
	return c->train_key == NULL || keys == NULL || !sc_keys_has(keys, c->train_key);
}

/* Output parsing and scoring. */

void
sc_answer_free(struct sc_answer *a)
{
	cJSON_Delete(a->args);
	a->args = NULL;
}

/*
 * The model is asked for one JSON object under a schema, but a backend
 * that ignores the schema, a token cap or a broken model can return
 * anything: prose, a code fence, a huge or deeply nested document, wrong
 * types. Every one of those is "unparseable", its own outcome, and the
 * parser must never crash on it (tests/fuzz/fuzz_model_output.c).
 */
int
sc_parse_answer(const char *text, size_t len, struct sc_answer *a,
    char *why, size_t whylen)
{
	const char *p = text, *end = text + len, *pend = NULL;
	cJSON *o, *cap, *args;

	memset(a, 0, sizeof(*a));
	if (text == NULL || len == 0) {
		plc_seterr(why, whylen, "empty output");
		return -1;
	}
	if (len > SC_MAX_OUTPUT) {
		plc_seterr(why, whylen, "output of %zu bytes exceeds %d", len, SC_MAX_OUTPUT);
		return -1;
	}
	if (memchr(text, '\0', len) != NULL) {
		plc_seterr(why, whylen, "output contains a NUL byte");
		return -1;
	}
	while (p < end && isspace((unsigned char)*p))
		p++;
	while (end > p && isspace((unsigned char)end[-1]))
		end--;
	/* A ```json fence around the object is tolerated; prose is not. */
	if (end - p >= 6 && memcmp(p, "```", 3) == 0 && memcmp(end - 3, "```", 3) == 0) {
		const char *nl = memchr(p, '\n', end - p);
		if (nl == NULL || nl >= end - 3) {
			plc_seterr(why, whylen, "empty code fence");
			return -1;
		}
		p = nl + 1;
		end -= 3;
		while (end > p && isspace((unsigned char)end[-1]))
			end--;
	}
	if (p == end || *p != '{') {
		plc_seterr(why, whylen, "not a JSON object");
		return -1;
	}
	/* On failure cJSON leaves the error position in pend; its global
	 * cJSON_GetErrorPtr() would race between the bake's threads. */
	o = cJSON_ParseWithLengthOpts(p, end - p, &pend, 0);
	if (o == NULL) {
		plc_seterr(why, whylen, "invalid JSON near byte %zu",
		    (size_t)((pend != NULL && pend >= p && pend <= end) ? pend - p : 0));
		return -1;
	}
	if (pend != NULL && pend < end) {
		plc_seterr(why, whylen, "trailing text after the JSON object");
		cJSON_Delete(o);
		return -1;
	}
	if (!cJSON_IsObject(o)) {
		plc_seterr(why, whylen, "not a JSON object");
		cJSON_Delete(o);
		return -1;
	}
	cap = cJSON_GetObjectItemCaseSensitive(o, "capability");
	if (!cJSON_IsString(cap) || cap->valuestring[0] == '\0') {
		plc_seterr(why, whylen, "\"capability\" missing or not a string");
		cJSON_Delete(o);
		return -1;
	}
	if (strlen(cap->valuestring) >= SC_NAME_MAX) {
		plc_seterr(why, whylen, "\"capability\" longer than %d bytes", SC_NAME_MAX - 1);
		cJSON_Delete(o);
		return -1;
	}
	args = cJSON_GetObjectItemCaseSensitive(o, "args");
	if (args != NULL && !cJSON_IsNull(args) && !cJSON_IsObject(args)) {
		plc_seterr(why, whylen, "\"args\" is not an object");
		cJSON_Delete(o);
		return -1;
	}
	snprintf(a->capability, sizeof(a->capability), "%s", cap->valuestring);
	if (args != NULL && cJSON_IsObject(args))
		a->args = cJSON_DetachItemViaPointer(o, args);
	cJSON_Delete(o);
	return 0;
}

/* Strings compare trimmed and case-folded: "Docs " asserts "docs". */
static int
str_eq_loose(const char *a, const char *b)
{
	size_t la, lb;

	while (isspace((unsigned char)*a))
		a++;
	while (isspace((unsigned char)*b))
		b++;
	la = strlen(a);
	lb = strlen(b);
	while (la > 0 && isspace((unsigned char)a[la - 1]))
		la--;
	while (lb > 0 && isspace((unsigned char)b[lb - 1]))
		lb--;
	return la == lb && strncasecmp(a, b, la) == 0;
}

static int
json_eq(const cJSON *w, const cJSON *g)
{
	if (cJSON_IsString(w))
		return cJSON_IsString(g) && str_eq_loose(w->valuestring, g->valuestring);
	if (cJSON_IsNumber(w))
		return cJSON_IsNumber(g) && fabs(w->valuedouble - g->valuedouble) <= 1e-9 *
		    fmax(1.0, fabs(w->valuedouble));
	if (cJSON_IsBool(w))
		return cJSON_IsBool(g) && (cJSON_IsTrue(w) == cJSON_IsTrue(g));
	if (cJSON_IsNull(w))
		return cJSON_IsNull(g);
	if (cJSON_IsArray(w)) {
		const cJSON *x, *y;
		if (!cJSON_IsArray(g) || cJSON_GetArraySize(w) != cJSON_GetArraySize(g))
			return 0;
		for (x = w->child, y = g->child; x && y; x = x->next, y = y->next)
			if (!json_eq(x, y))
				return 0;
		return 1;
	}
	if (cJSON_IsObject(w))
		return cJSON_IsObject(g) && sc_args_match(w, g);
	return 0;
}

int
sc_args_match(const cJSON *want, const cJSON *got)
{
	const cJSON *w;

	if (want == NULL || cJSON_GetArraySize(want) == 0)
		return 1;
	if (got == NULL || !cJSON_IsObject(got))
		return 0;
	cJSON_ArrayForEach(w, want) {
		const cJSON *g = cJSON_GetObjectItemCaseSensitive(got, w->string);
		if (g == NULL || !json_eq(w, g))
			return 0;
	}
	return 1;
}

int
sc_score(const struct sc_case *c, const struct sc_caps *caps,
    const char *text, size_t len, char *got, size_t gotlen,
    char *why, size_t whylen)
{
	struct sc_answer a;
	int out = SC_PASS;

	if (got && gotlen)
		got[0] = '\0';
	if (why && whylen)
		why[0] = '\0';
	if (sc_parse_answer(text, len, &a, why, whylen) == -1)
		return SC_UNPARSEABLE;
	if (got && gotlen)
		snprintf(got, gotlen, "%s", a.capability);
	for (int i = 0; i < c->nforbid; i++)
		if (strcmp(a.capability, c->forbid[i]) == 0) {
			plc_seterr(why, whylen, "forbidden capability %s", a.capability);
			out = SC_FORBIDDEN;
			goto done;
		}
	if (caps && sc_caps_find(caps, a.capability) < 0) {
		plc_seterr(why, whylen, "unknown capability %.60s", a.capability);
		out = SC_MISS;
		goto done;
	}
	if (c->expect != NULL) {
		if (strcmp(a.capability, c->expect) != 0) {
			plc_seterr(why, whylen, "expected %s", c->expect);
			out = SC_MISS;
		} else if (!sc_args_match(c->args, a.args)) {
			plc_seterr(why, whylen, "arguments differ");
			out = SC_MISS;
		}
	}
done:
	sc_answer_free(&a);
	return out;
}

/* Statistics. */

void
sc_wilson(double k, double n, double z, double *lo, double *hi)
{
	double p, z2, den, mid, half;

	if (n <= 0) {
		*lo = 0;
		*hi = 1;
		return;
	}
	p = k / n;
	z2 = z * z;
	den = 1 + z2 / n;
	mid = (p + z2 / (2 * n)) / den;
	half = z * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / den;
	*lo = fmax(0, mid - half);
	*hi = fmin(1, mid + half);
}

static void
rate_set(struct sc_rate *r, double k, double n)
{
	r->k = k;
	r->n = n;
	r->acc = n > 0 ? k / n : 0;
	sc_wilson(k, n, SC_Z95, &r->lo, &r->hi);
}

int
sc_row_passed(const struct sc_row *r)
{
	return __builtin_popcount(r->pass_mask);
}

static int
group_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sc_group *)a)->name, ((const struct sc_group *)b)->name);
}

/*
 * Accuracy pools case-passes (passed passes over runnable cases x passes),
 * which is the mean of the per-pass accuracies. Intervals use the number
 * of cases, not case-passes, as n: at temperature 0 the passes of one case
 * are far from independent, and counting them as trials would narrow the
 * interval three times over (F16: slices of about 8 cases need intervals).
 * A held-out guard is breached when any pass failed it (F15: one pass
 * overstated a margin; every pass counts).
 */
int
sc_aggregate(const struct sc_row *rows, int n, int passes, struct sc_agg *agg)
{
	double ok = 0, hok = 0, secs = 0;
	int runs = 0;

	memset(agg, 0, sizeof(*agg));
	if (passes < 1 || passes > SC_MAX_PASSES)
		return -1;
	agg->passes = passes;
	agg->cases = n;
	agg->groups = calloc(n ? n : 1, sizeof(*agg->groups));
	if (agg->groups == NULL)
		return -1;
	for (int i = 0; i < n; i++) {
		const struct sc_row *r = &rows[i];
		int p = sc_row_passed(r), g;

		agg->errors += r->errors;
		if (!r->runnable) {
			agg->skipped++;
			continue;
		}
		agg->runnable++;
		ok += p;
		runs += r->runs;
		secs += r->seconds;
		for (int j = 0; j < passes; j++)
			if (r->pass_mask & (1u << j))
				agg->passed_per_pass[j]++;
		if (r->held_out) {
			agg->held_out_cases++;
			hok += p;
			if (r->kind == SC_GUARD) {
				agg->guards_held_out++;
				if (p < passes)
					agg->guard_breaches++;
				for (int j = 0; j < passes; j++)
					if (!(r->pass_mask & (1u << j)))
						agg->breaches_per_pass[j]++;
			}
		}
		for (g = 0; g < agg->ngroups; g++)
			if (strcmp(agg->groups[g].name, r->group) == 0)
				break;
		if (g == agg->ngroups) {
			snprintf(agg->groups[g].name, sizeof(agg->groups[g].name), "%s", r->group);
			agg->ngroups++;
		}
		agg->groups[g].cases++;
		agg->groups[g].rate.k += (double)p / passes;
	}
	rate_set(&agg->overall, ok / passes, agg->runnable);
	rate_set(&agg->held_out, hok / passes, agg->held_out_cases);
	for (int g = 0; g < agg->ngroups; g++)
		rate_set(&agg->groups[g].rate, agg->groups[g].rate.k, agg->groups[g].cases);
	qsort(agg->groups, agg->ngroups, sizeof(*agg->groups), group_cmp);
	double lo = 1, hi = 0;
	for (int j = 0; j < passes; j++) {
		agg->acc_per_pass[j] = agg->runnable ?
		    (double)agg->passed_per_pass[j] / agg->runnable : 0;
		lo = fmin(lo, agg->acc_per_pass[j]);
		hi = fmax(hi, agg->acc_per_pass[j]);
	}
	agg->spread_pp = agg->runnable ? (hi - lo) * 100 : 0;
	agg->s_per_case = runs ? secs / runs : 0;
	return 0;
}

void
sc_agg_free(struct sc_agg *agg)
{
	free(agg->groups);
	agg->groups = NULL;
}

cJSON *
sc_rate_json(const struct sc_rate *r)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "k", r->k);
	cJSON_AddNumberToObject(o, "n", r->n);
	cJSON_AddNumberToObject(o, "acc", r->acc);
	cJSON_AddNumberToObject(o, "lo", r->lo);
	cJSON_AddNumberToObject(o, "hi", r->hi);
	return o;
}

cJSON *
sc_agg_json(const struct sc_agg *agg)
{
	cJSON *o = cJSON_CreateObject(), *a, *g;

	cJSON_AddNumberToObject(o, "cases", agg->cases);
	cJSON_AddNumberToObject(o, "runnable", agg->runnable);
	cJSON_AddNumberToObject(o, "not_runnable", agg->skipped);
	cJSON_AddNumberToObject(o, "errors", agg->errors);
	cJSON_AddNumberToObject(o, "passes", agg->passes);
	cJSON_AddItemToObject(o, "overall", sc_rate_json(&agg->overall));
	cJSON_AddItemToObject(o, "held_out", sc_rate_json(&agg->held_out));
	cJSON_AddNumberToObject(o, "held_out_cases", agg->held_out_cases);
	cJSON_AddNumberToObject(o, "held_out_guards", agg->guards_held_out);
	cJSON_AddNumberToObject(o, "guard_breaches", agg->guard_breaches);
	a = cJSON_AddArrayToObject(o, "breaches_per_pass");
	for (int j = 0; j < agg->passes; j++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(agg->breaches_per_pass[j]));
	a = cJSON_AddArrayToObject(o, "passed_per_pass");
	for (int j = 0; j < agg->passes; j++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(agg->passed_per_pass[j]));
	cJSON_AddNumberToObject(o, "spread_pp", agg->spread_pp);
	cJSON_AddNumberToObject(o, "s_per_case", agg->s_per_case);
	g = cJSON_AddObjectToObject(o, "per_capability");
	for (int i = 0; i < agg->ngroups; i++) {
		cJSON *r = sc_rate_json(&agg->groups[i].rate);
		cJSON_AddNumberToObject(r, "cases", agg->groups[i].cases);
		cJSON_AddItemToObject(g, agg->groups[i].name, r);
	}
	return o;
}

/* Rows as {"id": [flags, runs, pass_mask, errors, seconds, "group"]}, where
 * flags is 1 guard | 2 held out | 4 no train key | 8 runnable. */
cJSON *
sc_rows_json(const struct sc_row *rows, int n)
{
	cJSON *o = cJSON_CreateObject();

	for (int i = 0; i < n; i++) {
		const struct sc_row *r = &rows[i];
		cJSON *a = cJSON_CreateArray();
		int flags = (r->kind == SC_GUARD) | r->held_out << 1 | r->no_key << 2 |
		    r->runnable << 3;
		cJSON_AddItemToArray(a, cJSON_CreateNumber(flags));
		cJSON_AddItemToArray(a, cJSON_CreateNumber(r->runs));
		cJSON_AddItemToArray(a, cJSON_CreateNumber(r->pass_mask));
		cJSON_AddItemToArray(a, cJSON_CreateNumber(r->errors));
		cJSON_AddItemToArray(a, cJSON_CreateNumber(round(r->seconds * 1000) / 1000));
		cJSON_AddItemToArray(a, cJSON_CreateString(r->group));
		cJSON_AddItemToObject(o, r->id, a);
	}
	return o;
}

int
sc_rows_parse(const cJSON *cases, struct sc_row **rows, int *n, char *err, size_t errlen)
{
	const cJSON *e;
	struct sc_row *rs;
	int i = 0;

	*rows = NULL;
	*n = 0;
	if (!cJSON_IsObject(cases)) {
		plc_seterr(err, errlen, "cases: not an object");
		return -1;
	}
	rs = calloc(cJSON_GetArraySize(cases) + 1, sizeof(*rs));
	if (rs == NULL) {
		plc_seterr(err, errlen, "out of memory");
		return -1;
	}
	cJSON_ArrayForEach(e, cases) {
		const cJSON *f[6];
		int j = 0;
		const cJSON *x;
		struct sc_row *r = &rs[i];

		if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 6 || e->string == NULL ||
		    strlen(e->string) >= SC_NAME_MAX)
			goto bad;
		cJSON_ArrayForEach(x, e)
			f[j++] = x;
		for (j = 0; j < 5; j++)
			if (!cJSON_IsNumber(f[j]))
				goto bad;
		if (!cJSON_IsString(f[5]) || strlen(f[5]->valuestring) >= SC_NAME_MAX)
			goto bad;
		snprintf(r->id, sizeof(r->id), "%s", e->string);
		int flags = (int)f[0]->valuedouble;
		r->kind = flags & 1 ? SC_GUARD : SC_ROUTE;
		r->held_out = !!(flags & 2);
		r->no_key = !!(flags & 4);
		r->runnable = !!(flags & 8);
		r->runs = (int)f[1]->valuedouble;
		r->pass_mask = (uint32_t)f[2]->valuedouble;
		r->errors = (int)f[3]->valuedouble;
		r->seconds = f[4]->valuedouble;
		snprintf(r->group, sizeof(r->group), "%s", f[5]->valuestring);
		if (r->runs < 0 || r->runs > SC_MAX_PASSES)
			goto bad;
		i++;
		continue;
bad:
		plc_seterr(err, errlen, "cases.%.60s: not a result row", e->string ? e->string : "?");
		free(rs);
		return -1;
	}
	*rows = rs;
	*n = i;
	return 0;
}

const struct sc_row *
sc_row_find(const struct sc_row *rows, int n, const char *id)
{
	for (int i = 0; i < n; i++)
		if (strcmp(rows[i].id, id) == 0)
			return &rows[i];
	return NULL;
}

/* A case a model passed in every pass it made. */
static int
row_all_passed(const struct sc_row *r)
{
	return r->runs > 0 && sc_row_passed(r) == r->runs;
}

int
sc_fair_slice(const struct sc_row *a, int na, const struct sc_row *b, int nb,
    struct sc_fair *f)
{
	double ka = 0, kb = 0, oa = 0, ob = 0;

	memset(f, 0, sizeof(*f));
	for (int i = 0; i < na; i++) {
		const struct sc_row *y = sc_row_find(b, nb, a[i].id);
		if (y == NULL || !a[i].runnable || !y->runnable || a[i].runs == 0 ||
		    y->runs == 0)
			continue;
		double pa = (double)sc_row_passed(&a[i]) / a[i].runs;
		double pb = (double)sc_row_passed(y) / y->runs;
		f->common++;
		oa += pa;
		ob += pb;
		if (!a[i].held_out || !y->held_out)
			continue;
		f->cases++;
		ka += pa;
		kb += pb;
		int xa = row_all_passed(&a[i]), xb = row_all_passed(y);
		if (xa && xb)
			f->both++;
		else if (xa)
			f->only_a++;
		else if (xb)
			f->only_b++;
		else
			f->neither++;
	}
	rate_set(&f->a, ka, f->cases);
	rate_set(&f->b, kb, f->cases);
	rate_set(&f->oa, oa, f->common);
	rate_set(&f->ob, ob, f->common);
	f->p_mcnemar = sc_mcnemar_exact(f->only_a, f->only_b);
	return 0;
}

/*
 * Under the null hypothesis each discordant case is the candidate's with
 * probability 1/2: p = 2 P(X <= min(b, c)) for X ~ Binomial(b + c, 1/2),
 * at most 1. The terms are summed in logs (lgamma), so large n does not
 * underflow 0.5^n.
 */
double
sc_mcnemar_exact(int b, int c)
{
	int n = b + c, k = b < c ? b : c;
	double sum = 0, ln2 = log(2.0);

	if (b < 0 || c < 0 || n == 0)
		return 1.0;
	for (int i = 0; i <= k; i++)
		sum += exp(lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0) - n * ln2);
	return fmin(1.0, 2 * sum);
}

/* Keys are named for the two sides: A, A_only, A_overall and B's. */
cJSON *
sc_fair_json(const struct sc_fair *f, const char *a, const char *b)
{
	cJSON *o = cJSON_CreateObject();
	char k[SC_NAME_MAX + 16];

	cJSON_AddNumberToObject(o, "cases", f->cases);
	cJSON_AddItemToObject(o, a, sc_rate_json(&f->a));
	cJSON_AddItemToObject(o, b, sc_rate_json(&f->b));
	snprintf(k, sizeof(k), "%s_only", a);
	cJSON_AddNumberToObject(o, k, f->only_a);
	snprintf(k, sizeof(k), "%s_only", b);
	cJSON_AddNumberToObject(o, k, f->only_b);
	cJSON_AddNumberToObject(o, "both", f->both);
	cJSON_AddNumberToObject(o, "neither", f->neither);
	cJSON_AddNumberToObject(o, "mcnemar_p", f->p_mcnemar);
	cJSON_AddNumberToObject(o, "common_cases", f->common);
	snprintf(k, sizeof(k), "%s_overall", a);
	cJSON_AddItemToObject(o, k, sc_rate_json(&f->oa));
	snprintf(k, sizeof(k), "%s_overall", b);
	cJSON_AddItemToObject(o, k, sc_rate_json(&f->ob));
	return o;
}

const char *
sc_verdict_name(int code)
{
	switch (code) {
	case SC_V_PROMOTE:	return "promote";
	case SC_V_VETO:		return "veto";
	case SC_V_FAIR_LOWER:	return "fair slice lower";
	case SC_V_TIE_OVERALL:	return "tie, overall not higher";
	case SC_V_INCOMPLETE:	return "not comparable";
	case SC_V_FAIR_SMALL:	return "fair slice too small";
	}
	return "unknown";
}

int
sc_release_rule(const struct sc_row *cand, int nc, const struct sc_agg *ca,
    const struct sc_row *inc, int ni, const struct sc_agg *ia,
    double tie_pp, int min_fair, struct sc_verdict *v)
{
	size_t off = 0;
	const struct sc_fair *f = &v->fair;
	char paired[200];

	memset(v, 0, sizeof(*v));
	v->code = SC_V_INCOMPLETE;
	v->min_fair = min_fair;
	if (ca->errors > 0 || ia->errors > 0) {
		snprintf(v->reason, sizeof(v->reason), "bake errors (candidate %d, incumbent %d): "
		    "results are incomplete", ca->errors, ia->errors);
		return 0;
	}
	if (ca->runnable == 0 || ia->runnable == 0) {
		snprintf(v->reason, sizeof(v->reason), "no runnable cases");
		return 0;
	}
	/*
	 * The veto first (F17): the overall number ranked the worst router
	 * first until held-out guards the incumbent passes could veto. The
	 * incumbent passes a guard only when it passed every pass. The guard
	 * is held out from the candidate's corpus; the incumbent may have
	 * trained on it.
	 */
	for (int i = 0; i < nc; i++) {
		const struct sc_row *c = &cand[i], *r;
		if (c->kind != SC_GUARD || !c->held_out || !c->runnable)
			continue;
		if (sc_row_passed(c) == c->runs)
			continue;
		r = sc_row_find(inc, ni, c->id);
		if (r == NULL) {
			snprintf(v->reason, sizeof(v->reason), "case %s missing from the "
			    "incumbent's results", c->id);
			return 0;
		}
		if (!r->runnable || r->runs == 0 || sc_row_passed(r) != r->runs)
			continue;
		v->new_breaches++;
		if (off < sizeof(v->breach_ids) - 1) {
			int w = snprintf(v->breach_ids + off, sizeof(v->breach_ids) - off,
			    "%s%s", off ? "," : "", c->id);
			off += w > 0 ? (size_t)w : 0;
		}
	}
	/*
	 * The ranking compares like with like: each model's held-out set is
	 * what its own corpus lacks, and two different sets of cases do not
	 * rank two models. The fair slice is the cases both held out.
	 */
	sc_fair_slice(cand, nc, inc, ni, &v->fair);
	v->d_fair_pp = (f->a.acc - f->b.acc) * 100;
	v->d_held_out_pp = (ca->held_out.acc - ia->held_out.acc) * 100;
	v->d_overall_pp = (f->oa.acc - f->ob.acc) * 100;
	/* Compare in rounded hundredths of a point so that 0.5 means 0.5. */
	v->tie = fabs(round(v->d_fair_pp * 100) / 100) <= tie_pp;
	snprintf(paired, sizeof(paired), "%.2f%% vs %.2f%% of %d cases; candidate alone "
	    "passed %d, incumbent alone %d, McNemar p %.3g", f->a.acc * 100, f->b.acc * 100,
	    f->cases, f->only_a, f->only_b, f->p_mcnemar);
	if (v->new_breaches > 0) {
		v->code = SC_V_VETO;
		snprintf(v->reason, sizeof(v->reason), "veto: %d held-out guard%s the "
		    "incumbent passes breached (%.400s)", v->new_breaches,
		    v->new_breaches == 1 ? "" : "s", v->breach_ids);
	} else if (f->cases < min_fair) {
		v->code = SC_V_FAIR_SMALL;
		snprintf(v->reason, sizeof(v->reason), "fair slice of %d case%s is below "
		    "min_fair_cases %d: no basis for a verdict (fair slice %.2f%% vs "
		    "%.2f%%; held-out %.2f%% of %d vs %.2f%% of %d)", f->cases,
		    f->cases == 1 ? "" : "s", min_fair, f->a.acc * 100, f->b.acc * 100,
		    ca->held_out.acc * 100, ca->held_out_cases, ia->held_out.acc * 100,
		    ia->held_out_cases);
	} else if (!v->tie && v->d_fair_pp > 0) {
		v->code = SC_V_PROMOTE;
		snprintf(v->reason, sizeof(v->reason), "fair slice %+.2f pp beyond the "
		    "%.2f pp tie (%s)", v->d_fair_pp, tie_pp, paired);
	} else if (!v->tie) {
		v->code = SC_V_FAIR_LOWER;
		snprintf(v->reason, sizeof(v->reason), "fair slice %+.2f pp (%s)",
		    v->d_fair_pp, paired);
	} else if (round(v->d_overall_pp * 100) > 0) {
		v->code = SC_V_PROMOTE;
		snprintf(v->reason, sizeof(v->reason), "fair-slice tie (%+.2f pp within "
		    "%.2f; %s), overall %+.2f pp", v->d_fair_pp, tie_pp, paired,
		    v->d_overall_pp);
	} else {
		v->code = SC_V_TIE_OVERALL;
		snprintf(v->reason, sizeof(v->reason), "fair-slice tie (%+.2f pp within "
		    "%.2f; %s), overall %+.2f pp is not higher", v->d_fair_pp, tie_pp,
		    paired, v->d_overall_pp);
	}
	v->pass = v->code == SC_V_PROMOTE;
	return 0;
}
