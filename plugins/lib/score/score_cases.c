/*
 * score_cases.c: the bake's cases (score.h, first part): capability lists,
 * case files, corpus keys, the model output parser and the score of one
 * output against its case. Pure functions: no I/O but reading the case,
 * capability and stats files.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "plio.h"
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

int
sc_outcome_parse(const char *name)
{
	for (int o = SC_PASS; o <= SC_SKIPPED; o++)
		if (name != NULL && strcmp(name, sc_outcome_name(o)) == 0)
			return o;
	return -1;
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

cJSON *
sc_caps_canon(const struct sc_caps *caps)
{
	cJSON *capa = cJSON_CreateArray();

	for (int i = 0; i < caps->n; i++) {
		char b[SC_NAME_MAX + 32];
		snprintf(b, sizeof(b), "%s%s%s", caps->name[i],
		    caps->hidden[i] ? " hidden" : "", caps->disabled[i] ? " disabled" : "");
		cJSON_AddItemToArray(capa, cJSON_CreateString(b));
	}
	return capa;
}

cJSON *
sc_case_canon(const struct sc_case *c)
{
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
	return o;
}

void
sc_case_digest(const struct sc_case *c, char hex[65])
{
	cJSON *o = sc_case_canon(c);
	char *text = cJSON_PrintUnformatted(o);

	plc_sha256_buf(text ? text : "", text ? strlen(text) : 0, hex);
	free(text);
	cJSON_Delete(o);
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
	cJSON *all = cJSON_CreateObject(), *arr;
	char *text;

	for (int i = 0; i < n; i++)
		v[i] = &cases[i];
	qsort(v, n, sizeof(*v), case_cmp);
	cJSON_AddStringToObject(all, "system", system ? system : "");
	cJSON_AddItemToObject(all, "capabilities", sc_caps_canon(caps));
	arr = cJSON_AddArrayToObject(all, "cases");
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(arr, sc_case_canon(v[i]));
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
