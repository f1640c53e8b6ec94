/*
 * chat.c: the bake's chat client (see chat.h). Every request is
 * deterministic and bounded; every reply is classified before anything
 * scores it.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "plio.h"
#include "chat.h"

const char *
chat_status_name(int s)
{
	switch (s) {
	case CHAT_OK:		return "ok";
	case CHAT_CAPPED:	return "capped";
	case CHAT_TRUNCATED:	return "truncated";
	case CHAT_SERVER:	return "server error";
	case CHAT_TRANSPORT:	return "transport error";
	case CHAT_UNPARSED:	return "output refused by the server";
	}
	return "unknown";
}

int
chat_init(struct chat_client *c, const char *backend, const char *url,
    const char *model, char *err, size_t errlen)
{
	size_t n;

	memset(c, 0, sizeof(*c));
	if (backend != NULL && strcmp(backend, "ollama") == 0)
		c->backend = CHAT_OLLAMA;
	else if (backend != NULL && strcmp(backend, "openai") == 0)
		c->backend = CHAT_OPENAI;
	else {
		snprintf(err, errlen, "backend \"%s\": must be ollama or openai",
		    backend ? backend : "");
		return -1;
	}
	if (url == NULL || *url == '\0')
		url = c->backend == CHAT_OLLAMA ? "http://127.0.0.1:11434" : "http://127.0.0.1:8080";
	n = strlen(url);
	while (n > 0 && url[n - 1] == '/')
		n--;
	if (n == 0 || n >= sizeof(c->url) || strncmp(url, "http", 4) != 0) {
		snprintf(err, errlen, "url \"%s\": not an http URL", url);
		return -1;
	}
	memcpy(c->url, url, n);
	if (model == NULL || *model == '\0' || strlen(model) >= sizeof(c->model)) {
		snprintf(err, errlen, "model: missing or too long");
		return -1;
	}
	snprintf(c->model, sizeof(c->model), "%s", model);
	c->num_ctx = 8192;
	c->seed = 3407;
	c->max_tokens = 256;
	c->timeout = 300;
	c->max_bytes_per_token = 8;
	c->shift = -1;
	return 0;
}

size_t
chat_prompt_bytes(const cJSON *messages)
{
	const cJSON *m;
	size_t n = 0;

	cJSON_ArrayForEach(m, messages) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(m, "content");
		if (cJSON_IsString(t))
			n += strlen(t->valuestring);
	}
	return n;
}

/*
 * Ollama: native /api/chat, because /v1 on Ollama cannot set the context
 * (HACKING.md: Ollama). num_ctx goes on every request, the same every
 * time, or the server falls back to its VRAM-derived default and trims the
 * prompt (G01); truncate:false makes a too-long prompt an HTTP 400 on
 * servers that know the field (>= 0.12.6) and is ignored by older ones.
 * OpenAI: the nested response_format is the form llama-server, vLLM and
 * Ollama's bridge all read; cache_prompt:false keeps temperature-0 answers
 * bit-identical across passes on llama-server (HACKING.md: llama-server).
 */
cJSON *
chat_request_json(const struct chat_client *c, const cJSON *messages,
    const cJSON *schema)
{
	cJSON *r = cJSON_CreateObject(), *o;

	cJSON_AddStringToObject(r, "model", c->model);
	cJSON_AddItemToObject(r, "messages", cJSON_Duplicate(messages, 1));
	cJSON_AddBoolToObject(r, "stream", 0);
	if (c->backend == CHAT_OLLAMA) {
		if (schema)
			cJSON_AddItemToObject(r, "format", cJSON_Duplicate(schema, 1));
		o = cJSON_AddObjectToObject(r, "options");
		cJSON_AddNumberToObject(o, "num_ctx", c->num_ctx);
		cJSON_AddNumberToObject(o, "temperature", 0);
		cJSON_AddNumberToObject(o, "seed", (double)c->seed);
		cJSON_AddNumberToObject(o, "num_predict", c->max_tokens);
		cJSON_AddBoolToObject(r, "truncate", 0);
		/* shift is a load-time option from 0.30 on: a value other
		 * than the live clients' reloads their runner. */
		if (c->shift >= 0)
			cJSON_AddBoolToObject(r, "shift", c->shift);
		if (c->keep_alive[0]) {
			cJSON *ka = cJSON_Parse(c->keep_alive);
			if (ka)
				cJSON_AddItemToObject(r, "keep_alive", ka);
		}
	} else {
		cJSON_AddNumberToObject(r, "temperature", 0);
		cJSON_AddNumberToObject(r, "seed", (double)c->seed);
		cJSON_AddNumberToObject(r, "max_tokens", c->max_tokens);
		cJSON_AddBoolToObject(r, "cache_prompt", 0);
		if (schema) {
			o = cJSON_AddObjectToObject(r, "response_format");
			cJSON_AddStringToObject(o, "type", "json_schema");
			cJSON *js = cJSON_AddObjectToObject(o, "json_schema");
			cJSON_AddStringToObject(js, "name", "route");
			cJSON_AddItemToObject(js, "schema", cJSON_Duplicate(schema, 1));
		}
	}
	return r;
}

static long
num(const cJSON *o, const char *k, long def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? (long)v->valuedouble : def;
}

static const char *
str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The error text of any of the three envelopes: Ollama {"error": "..."},
 * OpenAI/llama-server/vLLM >= 0.10.1 {"error": {"message", "type"}}, and
 * older vLLM {"object": "error", "message"}. */
static void
error_text(const cJSON *j, const char *body, char *msg, size_t len, char *type,
    size_t tlen)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");

	type[0] = '\0';
	if (cJSON_IsString(e))
		snprintf(msg, len, "%s", e->valuestring);
	else if (cJSON_IsObject(e)) {
		const char *m = str(e, "message"), *t = str(e, "type");
		snprintf(msg, len, "%s", m ? m : "(no message)");
		if (t)
			snprintf(type, tlen, "%s", t);
	} else if (str(j, "message"))
		snprintf(msg, len, "%s", str(j, "message"));
	else
		snprintf(msg, len, "%.200s", body && *body ? body : "(empty body)");
	if (type[0] == '\0' && cJSON_IsObject(j) && str(j, "type"))
		snprintf(type, tlen, "%s", str(j, "type"));
}

static int
mentions_context(const char *msg, const char *type)
{
	return strcmp(type, "exceed_context_size_error") == 0 ||
	    strcasestr(msg, "exceed") != NULL || strcasestr(msg, "context") != NULL ||
	    strcasestr(msg, "too long") != NULL;
}

static void
set_content(struct chat_reply *r, const char *s)
{
	free(r->content);
	r->content = strdup(s ? s : "");
	r->len = r->content ? strlen(r->content) : 0;
}

void
chat_classify(const struct chat_client *c, long http, const char *body,
    size_t len, size_t prompt_bytes, struct chat_reply *r)
{
	cJSON *j = body ? cJSON_ParseWithLength(body, len) : NULL;
	char msg[400], type[64];
	const char *content = NULL, *finish = NULL;
	int ctx = c->server_ctx > 0 ? c->server_ctx : c->num_ctx;

	r->http = http;
	r->prompt_tokens = r->completion_tokens = -1;
	r->finish[0] = '\0';
	set_content(r, "");
	if (http != 200) {
		error_text(j, body, msg, sizeof(msg), type, sizeof(type));
		/* A prompt the server refused as too long is a truncation of
		 * this bake, not a wrong answer (G01). */
		r->status = (http == 400 && mentions_context(msg, type)) ?
		    CHAT_TRUNCATED : CHAT_SERVER;
		/* llama-server parses the model's output into the chat format
		 * before answering, and answers 500 when it does not match: that
		 * is an unparseable answer of the model, not a server failure. */
		if (http == 500 && (strcasestr(msg, "model produced output") ||
		    strcasestr(msg, "failed to parse")))
			r->status = CHAT_UNPARSED;
		snprintf(r->error, sizeof(r->error), "HTTP %ld: %s%s%s", http, msg,
		    type[0] ? " " : "", type);
		goto out;
	}
	if (!cJSON_IsObject(j)) {
		r->status = CHAT_SERVER;
		snprintf(r->error, sizeof(r->error), "answer is not a JSON object: %.80s",
		    body ? body : "");
		goto out;
	}
	if (cJSON_GetObjectItemCaseSensitive(j, "error") != NULL) {
		/* An error after the status line (a streamed error). */
		error_text(j, body, msg, sizeof(msg), type, sizeof(type));
		r->status = mentions_context(msg, type) ? CHAT_TRUNCATED : CHAT_SERVER;
		snprintf(r->error, sizeof(r->error), "server error: %s", msg);
		goto out;
	}
	if (c->backend == CHAT_OLLAMA) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
		content = str(m, "content");
		finish = str(j, "done_reason");
		/* Metric fields are omitempty: absent means 0, not unknown. */
		r->prompt_tokens = num(j, "prompt_eval_count", 0);
		r->completion_tokens = num(j, "eval_count", 0);
		/*
		 * A finished answer says done:true with done_reason "stop" or
		 * "length", streamed or not (0.34.2 as 0.24.0). done:false is
		 * an answer the runner stopped: from 0.30, llama-server sends
		 * its refusal of the model's output (its chat parser fails on
		 * a token that leaves invalid UTF-8, llama.cpp through b10969)
		 * as an error event inside the stream, which Ollama's
		 * /completion client drops, ending the answer with what came
		 * before it and no reason. That is the answer the live
		 * clients get for this prompt: scored unparseable, as the
		 * same refusal is on the openai backend (HTTP 500).
		 */
		if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "done"))) {
			set_content(r, content);
			r->status = CHAT_UNPARSED;
			snprintf(r->error, sizeof(r->error), "the answer stopped unfinished "
			    "after %zu bytes (done false, no done_reason): the runner "
			    "refused the model's output and Ollama did not pass on why "
			    "(its log names it: common_chat_peg_parse)", r->len);
			goto out;
		}
	} else {
		const cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "choices");
		const cJSON *c0 = cJSON_GetArrayItem(ch, 0);
		const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
		content = str(cJSON_GetObjectItemCaseSensitive(c0, "message"), "content");
		finish = str(c0, "finish_reason");
		if (c0 == NULL) {
			r->status = CHAT_SERVER;
			snprintf(r->error, sizeof(r->error), "answer has no choices[0]");
			goto out;
		}
		r->prompt_tokens = num(u, "prompt_tokens", -1);
		r->completion_tokens = num(u, "completion_tokens", -1);
	}
	snprintf(r->finish, sizeof(r->finish), "%s", finish ? finish : "");
	set_content(r, content);
	if (r->prompt_tokens >= ctx) {
		r->status = CHAT_TRUNCATED;
		snprintf(r->error, sizeof(r->error), "prompt used %ld tokens of a %d-token "
		    "context: the server cut it (G01)", r->prompt_tokens, ctx);
		goto out;
	}
	/*
	 * Ollama cuts an over-long prompt to about half the context and answers
	 * 200; only prompt_eval_count shows it (G01). A prompt counted as far
	 * fewer tokens than its bytes allow for was cut.
	 */
	if (c->max_bytes_per_token > 0 && r->prompt_tokens > 0 &&
	    (double)prompt_bytes / r->prompt_tokens > c->max_bytes_per_token) {
		r->status = CHAT_TRUNCATED;
		snprintf(r->error, sizeof(r->error), "prompt of %zu bytes counted as %ld "
		    "tokens (over %.1f bytes per token): the server cut it (G01)",
		    prompt_bytes, r->prompt_tokens, c->max_bytes_per_token);
		goto out;
	}
	if (strcmp(r->finish, "length") == 0) {
		if (r->prompt_tokens >= 0 && r->completion_tokens >= 0 &&
		    r->prompt_tokens + r->completion_tokens >= ctx) {
			r->status = CHAT_TRUNCATED;
			snprintf(r->error, sizeof(r->error), "context of %d tokens ran out "
			    "(prompt %ld, answer %ld)", ctx, r->prompt_tokens,
			    r->completion_tokens);
		} else {
			r->status = CHAT_CAPPED;
			snprintf(r->error, sizeof(r->error), "answer cut at the %d-token cap",
			    c->max_tokens);
		}
		goto out;
	}
	if (strcmp(r->finish, "stop") != 0 && strcmp(r->finish, "eos") != 0) {
		r->status = CHAT_SERVER;
		snprintf(r->error, sizeof(r->error), "answer ended with \"%s\" instead of "
		    "stop", r->finish);
		goto out;
	}
	r->status = CHAT_OK;
out:
	cJSON_Delete(j);
}

int
chat_send(const struct chat_client *c, struct plc_http_conn *conn,
    const cJSON *messages, const cJSON *schema, struct chat_reply *reply)
{
	struct plc_http_resp h;
	struct timespec t0, t1;
	char url[700];
	cJSON *req;
	char *body;

	memset(reply, 0, sizeof(*reply));
	if ((req = chat_request_json(c, messages, schema)) == NULL ||
	    (body = cJSON_PrintUnformatted(req)) == NULL) {
		cJSON_Delete(req);
		snprintf(reply->error, sizeof(reply->error), "out of memory");
		return -1;
	}
	cJSON_Delete(req);
	snprintf(url, sizeof(url), "%s%s", c->url,
	    c->backend == CHAT_OLLAMA ? "/api/chat" : "/v1/chat/completions");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = conn ? plc_http_conn_do(conn, "POST", url, body, strlen(body), NULL,
	    c->timeout, &h) : plc_http("POST", url, body, strlen(body), NULL, c->timeout, &h);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	free(body);
	reply->seconds = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (rc == -1) {
		reply->status = CHAT_TRANSPORT;
		reply->content = strdup("");
		snprintf(reply->error, sizeof(reply->error), "POST %s: %s", url, h.error);
		plc_http_free(&h);
		return 0;
	}
	chat_classify(c, h.status, h.body, h.len, chat_prompt_bytes(messages), reply);
	plc_http_free(&h);
	return 0;
}

void
chat_reply_free(struct chat_reply *r)
{
	free(r->content);
	r->content = NULL;
}

static cJSON *
get_json(const char *url, double timeout, long *status, char *err, size_t errlen)
{
	struct plc_http_resp h;
	cJSON *j;

	if (plc_http("GET", url, NULL, 0, NULL, timeout, &h) == -1) {
		snprintf(err, errlen, "GET %s: %s", url, h.error);
		plc_http_free(&h);
		*status = 0;
		return NULL;
	}
	*status = h.status;
	j = h.status == 200 ? cJSON_ParseWithLength(h.body, h.len) : NULL;
	if (h.status != 200)
		snprintf(err, errlen, "GET %s: HTTP %ld", url, h.status);
	else if (j == NULL)
		snprintf(err, errlen, "GET %s: answer is not JSON", url);
	plc_http_free(&h);
	return j;
}

int
chat_check_context(struct chat_client *c, char *err, size_t errlen)
{
	char url[700];
	long status;
	cJSON *j;
	long n = 0;

	if (c->backend == CHAT_OPENAI) {
		snprintf(url, sizeof(url), "%s/props", c->url);
		j = get_json(url, 30, &status, err, errlen);
		if (j != NULL) {
			const cJSON *d = cJSON_GetObjectItemCaseSensitive(j,
			    "default_generation_settings");
			n = num(d, "n_ctx", 0);
			if (n <= 0)
				n = num(j, "n_ctx", 0);
			cJSON_Delete(j);
		} else if (status == 404) {
			/* Not llama-server: vLLM reports max_model_len. */
			snprintf(url, sizeof(url), "%s/v1/models", c->url);
			j = get_json(url, 30, &status, err, errlen);
			if (j == NULL)
				return -1;
			const cJSON *m, *d = cJSON_GetObjectItemCaseSensitive(j, "data");
			cJSON_ArrayForEach(m, d)
				if (str(m, "id") && strcmp(str(m, "id"), c->model) == 0)
					n = num(m, "max_model_len", 0);
			if (n == 0)
				n = num(cJSON_GetArrayItem(d, 0), "max_model_len", 0);
			cJSON_Delete(j);
		} else
			return -1;
		if (n <= 0) {
			snprintf(err, errlen, "%s: the server reports no context size", c->url);
			return -1;
		}
		if (n < c->num_ctx) {
			snprintf(err, errlen, "%s: the server's context is %ld tokens per slot, "
			    "less than num_ctx %d (llama-server: -c %d -np 1)", c->url, n,
			    c->num_ctx, c->num_ctx);
			return -1;
		}
		c->server_ctx = (int)n;
		return 0;
	}

	/* Ollama caps num_ctx at the model's trained context without a word
	 * (HACKING.md: Ollama): read <arch>.context_length from /api/show. */
	struct plc_http_resp h;
	cJSON *req = cJSON_CreateObject();
	char *body;

	cJSON_AddStringToObject(req, "model", c->model);
	body = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	snprintf(url, sizeof(url), "%s/api/show", c->url);
	if (plc_http("POST", url, body, strlen(body), NULL, 60, &h) == -1) {
		snprintf(err, errlen, "POST %s: %s", url, h.error);
		free(body);
		plc_http_free(&h);
		return -1;
	}
	free(body);
	if (h.status != 200) {
		snprintf(err, errlen, "POST %s (%s): HTTP %ld: %.200s", url, c->model,
		    h.status, h.body);
		plc_http_free(&h);
		return -1;
	}
	j = cJSON_ParseWithLength(h.body, h.len);
	plc_http_free(&h);
	const cJSON *mi = cJSON_GetObjectItemCaseSensitive(j, "model_info"), *e;
	cJSON_ArrayForEach(e, mi) {
		size_t kl = e->string ? strlen(e->string) : 0;
		if (kl > 15 && strcmp(e->string + kl - 15, ".context_length") == 0 &&
		    cJSON_IsNumber(e))
			n = (long)e->valuedouble;
	}
	cJSON_Delete(j);
	if (n > 0 && n < c->num_ctx) {
		snprintf(err, errlen, "%s: num_ctx %d exceeds the model's trained context "
		    "%ld, which the server would silently use instead", c->model,
		    c->num_ctx, n);
		return -1;
	}
	c->server_ctx = c->num_ctx;
	return 0;
}
