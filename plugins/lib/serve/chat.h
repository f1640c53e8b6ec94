/*
 * chat.h: the bake's chat client for two backends: Ollama's native
 * /api/chat and the OpenAI-compatible /v1/chat/completions of llama-server
 * and vLLM. One request per case pass, deterministic (temperature 0, a
 * fixed seed, a token cap, a JSON schema), and a reply classified so that
 * a truncated prompt or a server error is a bake error and never a miss of
 * the model (G01). Facts: HACKING.md, Ollama and llama-server and vLLM.
 *
 * Functions return 0 or -1; on -1 err (or reply->error) says why.
 */
#ifndef PL_CHAT_H
#define PL_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct plc_http_conn;

enum chat_backend { CHAT_OLLAMA = 1, CHAT_OPENAI = 2 };

struct chat_client {
	int backend;		/* enum chat_backend */
	char url[512];		/* base URL, no trailing slash */
	char model[256];
	int num_ctx;		/* the context every request needs (Ollama: sent) */
	int server_ctx;		/* the context the server reported (0: unknown) */
	int64_t seed;
	int max_tokens;		/* token cap per answer */
	double timeout;		/* seconds per request */
	double max_bytes_per_token; /* truncation heuristic, 0: off */
	char keep_alive[32];	/* Ollama keep_alive JSON value, "" for none */
	int shift;		/* Ollama shift: -1 not sent, 0 false, 1 true */
};

/* How a reply is to be counted. */
enum chat_status {
	CHAT_OK = 0,		/* an answer to score */
	CHAT_CAPPED,		/* the token cap cut the answer: still the model's answer */
	CHAT_TRUNCATED,		/* the prompt did not fit: a bake error (G01) */
	CHAT_SERVER,		/* the server failed: a bake error */
	CHAT_TRANSPORT,		/* no answer at all: a bake error */
	CHAT_UNPARSED		/* the server refused the model's output as not
				   matching the schema/format, or (Ollama 0.30
				   and later) stopped it unfinished: the model's
				   fault, scored unparseable (content is "" or
				   what came before the refusal) */
};
const char	*chat_status_name(int status);

struct chat_reply {
	int status;		/* enum chat_status */
	long http;		/* HTTP status, 0 when none */
	char *content;		/* malloc'd, NUL-terminated ("" when none) */
	size_t len;
	long prompt_tokens;	/* -1 when the server did not say */
	long completion_tokens;
	char finish[32];	/* done_reason / finish_reason */
	double seconds;		/* wall time of the request */
	char error[512];
};

int	chat_init(struct chat_client *c, const char *backend, const char *url,
	    const char *model, char *err, size_t errlen);

/* The request body for a conversation (an array of {"role","content"}),
 * with the schema as response format. Caller deletes it. */
cJSON	*chat_request_json(const struct chat_client *c, const cJSON *messages,
	    const cJSON *schema);
/* Send one request and classify the reply. Returns 0 whenever a reply was
 * classified (whatever its status), -1 only when the request could not be
 * built. conn: the calling thread's kept connection (plc_http_conn_new),
 * or NULL for a connection of this request's own. */
int	chat_send(const struct chat_client *c, struct plc_http_conn *conn,
	    const cJSON *messages, const cJSON *schema, struct chat_reply *reply);
/* Classify an HTTP answer (pure; unit-tested): prompt_bytes is the size of
 * the messages' text, for the bytes-per-token truncation check. */
void	chat_classify(const struct chat_client *c, long http, const char *body,
	    size_t len, size_t prompt_bytes, struct chat_reply *reply);
void	chat_reply_free(struct chat_reply *r);

/* Check the server's context before a bake. OpenAI backend: llama-server
 * /props default_generation_settings.n_ctx (the per-slot context), else
 * vLLM /v1/models max_model_len; it must be at least num_ctx. Ollama: the
 * model's trained context from /api/show (num_ctx above it is silently
 * capped); sets server_ctx. */
int	chat_check_context(struct chat_client *c, char *err, size_t errlen);

/* Total bytes of message contents. */
size_t	chat_prompt_bytes(const cJSON *messages);

#endif
