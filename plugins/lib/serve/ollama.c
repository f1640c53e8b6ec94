/* ollama.c: the Ollama client's lifecycle half (see ollama.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "plio.h"
#include "ollama.h"

int
ollama_init(struct ollama *c, const char *url, double timeout)
{
	memset(c, 0, sizeof(*c));
	if (url == NULL || *url == '\0')
		url = OLLAMA_DEFAULT_URL;
	size_t n = strlen(url);
	while (n > 0 && url[n - 1] == '/')
		n--;
	if (n == 0 || n >= sizeof(c->url)) {
		snprintf(c->error, sizeof(c->error), "ollama: bad URL \"%s\"", url);
		errno = EINVAL;
		return -1;
	}
	memcpy(c->url, url, n);
	c->url[n] = '\0';
	c->timeout = timeout;
	return 0;
}

void *
ollama_request(struct ollama *c, const char *method, const char *path,
    const char *body)
{
	char url[1024];
	struct plc_http_resp r;

	snprintf(url, sizeof(url), "%s%s", c->url, path);
	c->status = 0;
	c->error[0] = '\0';
	if (plc_http(method, url, body, body ? strlen(body) : 0, NULL,
	    c->timeout, &r) == -1) {
		snprintf(c->error, sizeof(c->error), "%s %s: %s", method, url,
		    r.error);
		plc_http_free(&r);
		errno = EIO;
		return NULL;
	}
	c->status = r.status;
	cJSON *j = cJSON_ParseWithLength(r.body, r.len);
	if (r.status < 200 || r.status > 299) {
		/* Ollama's error body is {"error": "..."} (errors.mdx). */
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
		snprintf(c->error, sizeof(c->error), "%s %s: HTTP %ld: %.200s",
		    method, url, r.status, cJSON_IsString(e) ? e->valuestring :
		    (r.len ? r.body : "(empty body)"));
		cJSON_Delete(j);
		plc_http_free(&r);
		errno = r.status == 404 ? ENOENT : EIO;
		return NULL;
	}
	if (j == NULL) {
		snprintf(c->error, sizeof(c->error), "%s %s: answer is not JSON: %.80s",
		    method, url, r.body);
		plc_http_free(&r);
		errno = EPROTO;
		return NULL;
	}
	plc_http_free(&r);
	return j;
}

int
ollama_version(struct ollama *c, char *buf, size_t len)
{
	cJSON *j = ollama_request(c, "GET", "/api/version", NULL);
	if (j == NULL)
		return -1;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "version");
	if (!cJSON_IsString(v)) {
		snprintf(c->error, sizeof(c->error), "%s/api/version: no \"version\" string",
		    c->url);
		cJSON_Delete(j);
		errno = EPROTO;
		return -1;
	}
	snprintf(buf, len, "%s", v->valuestring);
	cJSON_Delete(j);
	return 0;
}

enum ollama_profile
ollama_profile(const char *version, int *tested)
{
	int maj = 0, min = 0, patch = 0;
	char want[32];
	const char *p = OLLAMA_TESTED;

	*tested = 0;
	if (sscanf(version, "%d.%d.%d", &maj, &min, &patch) < 2 || (maj == 0 && min == 0))
		return OLLAMA_PROFILE_UNKNOWN;
	/* The list is "a.b.c, d.e.f": compare each item whole. */
	while (*p) {
		size_t n = strcspn(p, ",");
		snprintf(want, sizeof(want), "%.*s", (int)n, p);
		if (strcmp(want, version) == 0)
			*tested = 1;
		p += n;
		while (*p == ',' || *p == ' ')
			p++;
	}
	return maj == 0 && min < 30 ? OLLAMA_PROFILE_CGO : OLLAMA_PROFILE_LLAMA_SERVER;
}

const char *
ollama_profile_name(enum ollama_profile p)
{
	switch (p) {
	case OLLAMA_PROFILE_CGO:
		return "cgo engine (before 0.30)";
	case OLLAMA_PROFILE_LLAMA_SERVER:
		return "llama-server runner (0.30 and later)";
	default:
		return "unknown (a development build?)";
	}
}

static void
copy_str(char *dst, size_t len, const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	snprintf(dst, len, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

/* A byte count, 0 when absent or not one: a number at or past 2^64 (or
 * NaN) has no uint64_t (converting it is undefined behaviour), and a
 * server that sends one has no size worth comparing (G22). */
static uint64_t
get_u64(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble < 0x1p64 ?
	    (uint64_t)v->valuedouble : 0;
}

/* Both listings are {"models": [ {...}, ... ]}. */
int
ollama_parse_list(const char *body, size_t len, struct ollama_list *out,
    char *err, size_t errlen)
{
	out->v = NULL;
	out->n = 0;
	cJSON *j = cJSON_ParseWithLength(body, len);
	if (!cJSON_IsObject(j)) {
		snprintf(err, errlen, "the answer is not a JSON object");
		cJSON_Delete(j);
		errno = EPROTO;
		return -1;
	}
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "models");
	if (arr == NULL || cJSON_IsNull(arr)) {
		/* An idle server may answer {"models": null}. */
		cJSON_Delete(j);
		return 0;
	}
	if (!cJSON_IsArray(arr)) {
		snprintf(err, errlen, "\"models\" is not an array");
		cJSON_Delete(j);
		errno = EPROTO;
		return -1;
	}
	int n = cJSON_GetArraySize(arr);
	if (n > 0 && (out->v = calloc((size_t)n, sizeof(*out->v))) == NULL) {
		cJSON_Delete(j);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	const cJSON *m;
	cJSON_ArrayForEach(m, arr) {
		if (!cJSON_IsObject(m) || out->n >= (size_t)n)
			continue;
		struct ollama_model *d = &out->v[out->n];
		copy_str(d->name, sizeof(d->name), m, "name");
		copy_str(d->model, sizeof(d->model), m, "model");
		copy_str(d->digest, sizeof(d->digest), m, "digest");
		copy_str(d->expires_at, sizeof(d->expires_at), m, "expires_at");
		d->size = get_u64(m, "size");
		d->size_vram = get_u64(m, "size_vram");
		d->context_length = (long)get_u64(m, "context_length");
		if (d->name[0] == '\0' && d->model[0] == '\0')
			continue;
		if (d->name[0] == '\0')
			memcpy(d->name, d->model, sizeof(d->name));
		out->n++;
	}
	cJSON_Delete(j);
	return 0;
}

static int
list_models(struct ollama *c, const char *path, struct ollama_list *out)
{
	char url[1024], err[256];
	struct plc_http_resp r;

	out->v = NULL;
	out->n = 0;
	snprintf(url, sizeof(url), "%s%s", c->url, path);
	c->status = 0;
	c->error[0] = '\0';
	if (plc_http("GET", url, NULL, 0, NULL, c->timeout, &r) == -1) {
		snprintf(c->error, sizeof(c->error), "GET %s: %s", url, r.error);
		plc_http_free(&r);
		errno = EIO;
		return -1;
	}
	c->status = r.status;
	if (r.status < 200 || r.status > 299) {
		snprintf(c->error, sizeof(c->error), "GET %s: HTTP %ld: %.200s", url,
		    r.status, r.len ? r.body : "(empty body)");
		plc_http_free(&r);
		errno = EIO;
		return -1;
	}
	int rc = ollama_parse_list(r.body, r.len, out, err, sizeof(err));
	if (rc == -1)
		snprintf(c->error, sizeof(c->error), "GET %s: %s", url, err);
	plc_http_free(&r);
	return rc;
}

int
ollama_tags(struct ollama *c, struct ollama_list *out)
{
	return list_models(c, "/api/tags", out);
}

int
ollama_ps(struct ollama *c, struct ollama_list *out)
{
	return list_models(c, "/api/ps", out);
}

void
ollama_list_free(struct ollama_list *l)
{
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* Both load and unload are an /api/generate request without a prompt;
 * keep_alive decides which (HACKING.md: Ollama). */
static int
generate_empty(struct ollama *c, const char *name, const char *keep_alive,
    int num_ctx, int shift, const char *want_reason)
{
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "model", name);
	cJSON_AddBoolToObject(req, "stream", 0);
	if (keep_alive != NULL) {
		cJSON *ka = cJSON_Parse(keep_alive);
		if (ka == NULL) {
			snprintf(c->error, sizeof(c->error),
			    "keep_alive \"%s\" is not a JSON value (a number of seconds, "
			    "or a quoted Go duration)", keep_alive);
			cJSON_Delete(req);
			errno = EINVAL;
			return -1;
		}
		cJSON_AddItemToObject(req, "keep_alive", ka);
	}
	if (num_ctx > 0) {
		cJSON *o = cJSON_AddObjectToObject(req, "options");
		cJSON_AddNumberToObject(o, "num_ctx", num_ctx);
	}
	if (shift >= 0)
		cJSON_AddBoolToObject(req, "shift", shift);
	char *body = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	cJSON *j = ollama_request(c, "POST", "/api/generate", body);
	free(body);
	if (j == NULL)
		return -1;
	/* done_reason exists from 0.3.11 on; older servers leave it out. */
	const cJSON *dr = cJSON_GetObjectItemCaseSensitive(j, "done_reason");
	if (cJSON_IsString(dr) && want_reason != NULL &&
	    strcmp(dr->valuestring, want_reason) != 0) {
		snprintf(c->error, sizeof(c->error),
		    "%s/api/generate %s: done_reason \"%s\", expected \"%s\"",
		    c->url, name, dr->valuestring, want_reason);
		cJSON_Delete(j);
		errno = EPROTO;
		return -1;
	}
	cJSON_Delete(j);
	return 0;
}

int
ollama_load(struct ollama *c, const char *name, const char *keep_alive,
    int num_ctx)
{
	return generate_empty(c, name, keep_alive, num_ctx, -1, "load");
}

int
ollama_load_opts(struct ollama *c, const char *name, const char *keep_alive,
    int num_ctx, int shift)
{
	return generate_empty(c, name, keep_alive, num_ctx, shift, "load");
}

int
ollama_unload(struct ollama *c, const char *name)
{
	return generate_empty(c, name, "0", 0, -1, "unload");
}

int
ollama_list_has(const struct ollama_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (ollama_model_is(&l->v[i], name))
			return 1;
	return 0;
}

static void
sleep_s(double s)
{
	struct timespec ts;
	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* The unload answer comes before the runner has stopped; until ps stops
 * listing the model its memory is still held, so wait for that. */
int
ollama_unload_wait(struct ollama *c, const char *name, double wait, double poll)
{
	if (ollama_unload(c, name) == -1)
		return -1;
	if (poll <= 0)
		poll = 0.1;
	double deadline = plc_mono_secs() + wait;
	for (;;) {
		struct ollama_list l;
		if (ollama_ps(c, &l) == -1)
			return -1;
		int has = ollama_list_has(&l, name);
		ollama_list_free(&l);
		if (!has)
			return 0;
		if (plc_mono_secs() >= deadline) {
			snprintf(c->error, sizeof(c->error),
			    "%s: %s still listed by /api/ps %.1f s after its unload",
			    c->url, name, wait);
			errno = ETIMEDOUT;
			return -1;
		}
		sleep_s(poll);
	}
}

int
ollama_name_norm(const char *name, char *out, size_t len)
{
	char buf[OLLAMA_NAME_MAX * 2];
	size_t n = 0;

	for (const char *p = name; *p != '\0' && n + 1 < sizeof(buf); p++)
		buf[n++] = (char)tolower((unsigned char)*p);
	buf[n] = '\0';
	/* Trim blanks an operator's list may carry. */
	char *s = buf;
	while (isspace((unsigned char)*s))
		s++;
	n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	/* The default host and namespace are what DisplayShortest drops. */
	static const char *const prefixes[] = {
		"https://registry.ollama.ai/library/", "registry.ollama.ai/library/",
		"library/",
	};
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = strlen(prefixes[i]);
		if (strncmp(s, prefixes[i], pl) == 0 && s[pl] != '\0') {
			s += pl;
			break;
		}
	}
	/* A tag is a colon after the last slash: "host:5000/m" has none. */
	const char *slash = strrchr(s, '/');
	const char *colon = strrchr(slash ? slash : s, ':');
	int r = colon ? snprintf(out, len, "%s", s) : snprintf(out, len, "%s:latest", s);
	if (r < 0 || (size_t)r >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

int
ollama_name_eq(const char *a, const char *b)
{
	char na[OLLAMA_NAME_MAX * 2], nb[OLLAMA_NAME_MAX * 2];
	if (a == NULL || b == NULL || *a == '\0' || *b == '\0')
		return 0;
	if (ollama_name_norm(a, na, sizeof(na)) == -1 ||
	    ollama_name_norm(b, nb, sizeof(nb)) == -1)
		return 0;
	return strcmp(na, nb) == 0;
}

int
ollama_model_is(const struct ollama_model *m, const char *name)
{
	return ollama_name_eq(m->name, name) || ollama_name_eq(m->model, name);
}
