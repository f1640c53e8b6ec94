/* ollama_admin.c: blobs, create, show, copy, delete (see ollama_admin.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "plio.h"
#include "ollama.h"
#include "ollama_admin.h"

static int
valid_hex(const char *h)
{
	if (strlen(h) != 64)
		return 0;
	for (; *h; h++)
		if (!isxdigit((unsigned char)*h) || isupper((unsigned char)*h))
			return 0;
	return 1;
}

int
ollama_blob_has(struct ollama *c, const char *hex)
{
	char url[1024];
	struct plc_http_resp r;

	if (!valid_hex(hex)) {
		snprintf(c->error, sizeof(c->error), "bad sha256 \"%.70s\"", hex);
		errno = EINVAL;
		return -1;
	}
	snprintf(url, sizeof(url), "%s/api/blobs/sha256:%s", c->url, hex);
	if (plc_http("HEAD", url, NULL, 0, NULL, c->timeout, &r) == -1) {
		snprintf(c->error, sizeof(c->error), "HEAD %s: %s", url, r.error);
		plc_http_free(&r);
		errno = EIO;
		return -1;
	}
	c->status = r.status;
	plc_http_free(&r);
	if (r.status == 200)
		return 1;
	if (r.status == 404)
		return 0;
	snprintf(c->error, sizeof(c->error), "HEAD %s: HTTP %ld", url, r.status);
	errno = EIO;
	return -1;
}

int
ollama_blob_push(struct ollama *c, const char *path, const char *hex, int *uploaded)
{
	char url[1024];
	struct plc_http_resp r;
	int has;

	*uploaded = 0;
	if ((has = ollama_blob_has(c, hex)) == -1)
		return -1;
	if (has)
		return 0;
	snprintf(url, sizeof(url), "%s/api/blobs/sha256:%s", c->url, hex);
	/* Uploads are long: no per-request timeout beyond the client's, and
	 * none at all when the client has none. */
	if (plc_http_post_file(url, path, c->timeout, &r) == -1) {
		snprintf(c->error, sizeof(c->error), "POST %s: %s", url, r.error);
		plc_http_free(&r);
		errno = EIO;
		return -1;
	}
	c->status = r.status;
	if (r.status != 201 && r.status != 200) {
		cJSON *j = cJSON_ParseWithLength(r.body, r.len);
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
		snprintf(c->error, sizeof(c->error), "POST %s: HTTP %ld: %.200s", url, r.status,
		    cJSON_IsString(e) ? e->valuestring : r.body);
		cJSON_Delete(j);
		plc_http_free(&r);
		errno = EIO;
		return -1;
	}
	plc_http_free(&r);
	*uploaded = 1;
	return 0;
}

int
ollama_create(struct ollama *c, const char *req_json)
{
	cJSON *j = ollama_request(c, "POST", "/api/create", req_json), *st;

	if (j == NULL)
		return -1;
	/* stream:false answers the last status object, or an error. */
	st = cJSON_GetObjectItemCaseSensitive(j, "status");
	if (cJSON_GetObjectItemCaseSensitive(j, "error") != NULL ||
	    !cJSON_IsString(st) || strcmp(st->valuestring, "success") != 0) {
		char *t = cJSON_PrintUnformatted(j);
		snprintf(c->error, sizeof(c->error), "%s/api/create: %.300s", c->url, t);
		free(t);
		cJSON_Delete(j);
		errno = EIO;
		return -1;
	}
	cJSON_Delete(j);
	return 0;
}

int
ollama_modelfile_weights(const char *mf, char *hex, size_t len)
{
	const char *p = mf;

	while (p && *p) {
		const char *eol = strchr(p, '\n');
		size_t n = eol ? (size_t)(eol - p) : strlen(p);
		if (n > 5 && strncasecmp(p, "FROM ", 5) == 0) {
			const char *b = NULL;
			for (const char *q = p; q + 7 <= p + n; q++)
				if (strncmp(q, "sha256-", 7) == 0 || strncmp(q, "sha256:", 7) == 0)
					b = q + 7;
			if (b && b + 64 <= p + n) {
				char h[65];
				memcpy(h, b, 64);
				h[64] = '\0';
				if (valid_hex(h)) {
					snprintf(hex, len, "%s", h);
					return 0;
				}
			}
			return -1;	/* the first FROM names no blob */
		}
		p = eol ? eol + 1 : NULL;
	}
	return -1;
}

int
ollama_show(struct ollama *c, const char *name, struct ollama_show *s)
{
	cJSON *req = cJSON_CreateObject(), *j;
	const cJSON *v, *mi, *e;
	char *body;

	memset(s, 0, sizeof(*s));
	cJSON_AddStringToObject(req, "model", name);
	body = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	j = ollama_request(c, "POST", "/api/show", body);
	free(body);
	if (j == NULL)
		return -1;
	v = cJSON_GetObjectItemCaseSensitive(j, "modelfile");
	s->modelfile = strdup(cJSON_IsString(v) ? v->valuestring : "");
	v = cJSON_GetObjectItemCaseSensitive(j, "template");
	s->template = strdup(cJSON_IsString(v) ? v->valuestring : "");
	v = cJSON_GetObjectItemCaseSensitive(j, "parameters");
	s->parameters = strdup(cJSON_IsString(v) ? v->valuestring : "");
	mi = cJSON_GetObjectItemCaseSensitive(j, "model_info");
	cJSON_ArrayForEach(e, mi) {
		size_t kl = e->string ? strlen(e->string) : 0;
		if (kl > 15 && strcmp(e->string + kl - 15, ".context_length") == 0 &&
		    cJSON_IsNumber(e))
			s->context_length = (long)e->valuedouble;
	}
	cJSON_Delete(j);
	if (ollama_modelfile_weights(s->modelfile, s->weights, sizeof(s->weights)) == -1) {
		snprintf(c->error, sizeof(c->error), "%s/api/show %s: the modelfile names no "
		    "weights blob in its FROM line", c->url, name);
		ollama_show_free(s);
		errno = EPROTO;
		return -1;
	}
	return 0;
}

void
ollama_show_free(struct ollama_show *s)
{
	free(s->template);
	free(s->parameters);
	free(s->modelfile);
	s->template = s->parameters = s->modelfile = NULL;
}

int
ollama_manifest_digest(struct ollama *c, const char *name, char *hex, size_t len)
{
	struct ollama_list l;

	if (ollama_tags(c, &l) == -1)
		return -1;
	for (size_t i = 0; i < l.n; i++)
		if (ollama_name_eq(l.v[i].name, name)) {
			const char *d = l.v[i].digest;
			if (strncmp(d, "sha256:", 7) == 0)
				d += 7;
			snprintf(hex, len, "%s", d);
			ollama_list_free(&l);
			return 0;
		}
	ollama_list_free(&l);
	snprintf(c->error, sizeof(c->error), "%s: no tag %s in /api/tags", c->url, name);
	errno = ENOENT;
	return -1;
}

static int
plain(struct ollama *c, const char *method, const char *path, const char *body)
{
	char url[1024];
	struct plc_http_resp r;

	snprintf(url, sizeof(url), "%s%s", c->url, path);
	if (plc_http(method, url, body, strlen(body), NULL, c->timeout, &r) == -1) {
		snprintf(c->error, sizeof(c->error), "%s %s: %s", method, url, r.error);
		plc_http_free(&r);
		errno = EIO;
		return -1;
	}
	c->status = r.status;
	if (r.status != 200) {
		cJSON *j = cJSON_ParseWithLength(r.body, r.len);
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
		snprintf(c->error, sizeof(c->error), "%s %s: HTTP %ld: %.200s", method, url,
		    r.status, cJSON_IsString(e) ? e->valuestring : r.body);
		cJSON_Delete(j);
		plc_http_free(&r);
		errno = r.status == 404 ? ENOENT : EIO;
		return -1;
	}
	plc_http_free(&r);
	return 0;
}

int
ollama_copy(struct ollama *c, const char *source, const char *destination)
{
	cJSON *o = cJSON_CreateObject();
	char *b;
	int rc;

	cJSON_AddStringToObject(o, "source", source);
	cJSON_AddStringToObject(o, "destination", destination);
	b = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	rc = plain(c, "POST", "/api/copy", b);
	free(b);
	return rc;
}

int
ollama_delete(struct ollama *c, const char *name)
{
	cJSON *o = cJSON_CreateObject();
	char *b;
	int rc;

	cJSON_AddStringToObject(o, "model", name);
	b = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	rc = plain(c, "DELETE", "/api/delete", b);
	free(b);
	return rc;
}

/* A bounded request: reuse asks before a job would run, and for a plan. */
#define REUSE_TIMEOUT 10

int
ollama_reuse_key(const char *url, const char *tag, char *buf, size_t len)
{
	struct ollama o;
	struct ollama_show sh;
	char version[64], manifest[80];
	buf[0] = '\0';
	if (ollama_init(&o, url, REUSE_TIMEOUT) == -1 ||
	    ollama_version(&o, version, sizeof(version)) == -1) {
		snprintf(buf, len, "%s", o.error);
		return -1;
	}
	if (tag == NULL) {
		snprintf(buf, len, "ollama version=%s\n", version);
		return 0;
	}
	memset(&sh, 0, sizeof(sh));
	if (ollama_manifest_digest(&o, tag, manifest, sizeof(manifest)) == -1 ||
	    ollama_show(&o, tag, &sh) == -1) {
		snprintf(buf, len, "%s", o.error);
		return -1;
	}
	snprintf(buf, len, "ollama version=%s\n%s manifest=%s\n%s weights=%s\n", version, tag,
	    manifest, tag, sh.weights);
	ollama_show_free(&sh);
	return 0;
}

int
ollama_reuse_check(const char *url, const char *tag, const char *manifest, char *buf,
    size_t len)
{
	struct ollama o;
	char now[80];
	if (manifest == NULL || *manifest == '\0') {
		snprintf(buf, len, "it recorded no manifest digest for %s", tag);
		return -1;
	}
	if (ollama_init(&o, url, REUSE_TIMEOUT) == -1) {
		snprintf(buf, len, "%s", o.error);
		return -1;
	}
	if (ollama_manifest_digest(&o, tag, now, sizeof(now)) == -1) {
		if (errno == ENOENT && o.status == 200) /* /api/tags answered, without it */
			snprintf(buf, len, "the server at %s no longer has tag %s", o.url, tag);
		else
			snprintf(buf, len, "the server cannot be asked whether it still has tag %s:"
			    " %s", tag, o.error);
		return -1;
	}
	if (strcmp(now, manifest) != 0) {
		snprintf(buf, len, "tag %s on the server at %s moved: manifest %.12s, not the"
		    " %.12s it made", tag, o.url, now, manifest);
		return -1;
	}
	return 0;
}
