/*
 * test_chat.c: the bake's chat client (plugins/lib/serve/chat.c): what every
 * request carries, and how replies of both backends are classified:
 * answers, token caps, truncated prompts (G01) and server errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "runner.h"

static int
classify(struct chat_client *c, long http, const char *body, size_t pbytes,
    struct chat_reply *r)
{
	memset(r, 0, sizeof(*r));
	chat_classify(c, http, body, strlen(body), pbytes, r);
	return r->status;
}

static cJSON *
messages(void)
{
	cJSON *m = cJSON_CreateArray(), *t;

	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "role", "system");
	cJSON_AddStringToObject(t, "content", "You route.");
	cJSON_AddItemToArray(m, t);
	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "role", "user");
	cJSON_AddStringToObject(t, "content", "open docs");
	cJSON_AddItemToArray(m, t);
	return m;
}

static void
case_requests(void)
{
	struct chat_client c;
	char err[256];
	cJSON *m = messages(), *s = cJSON_Parse("{\"type\":\"object\"}"), *r;
	char *t;

	CHECK(chat_init(&c, "vllm", NULL, "m", err, sizeof(err)) == -1);
	CHECK(chat_init(&c, "ollama", "ftp://x", "m", err, sizeof(err)) == -1);
	CHECK(chat_init(&c, "ollama", "http://127.0.0.1:11434/", "router:v18", err, sizeof(err)) == 0);
	CHECK(strcmp(c.url, "http://127.0.0.1:11434") == 0);
	c.num_ctx = 9216;
	c.seed = 42;
	c.max_tokens = 128;
	snprintf(c.keep_alive, sizeof(c.keep_alive), "-1");
	r = chat_request_json(&c, m, s);
	t = cJSON_PrintUnformatted(r);
	/* num_ctx on every request (G01), greedy, seeded, capped, no silent
	 * truncation, the schema as format. */
	CHECK(strstr(t, "\"options\":{\"num_ctx\":9216,\"temperature\":0,\"seed\":42,"
	    "\"num_predict\":128}") != NULL);
	CHECK(strstr(t, "\"truncate\":false") != NULL);
	CHECK(strstr(t, "\"format\":{\"type\":\"object\"}") != NULL);
	CHECK(strstr(t, "\"stream\":false") != NULL);
	CHECK(strstr(t, "\"keep_alive\":-1") != NULL);
	free(t);
	cJSON_Delete(r);

	CHECK(chat_init(&c, "openai", "http://127.0.0.1:8080", "router", err, sizeof(err)) == 0);
	c.max_tokens = 64;
	r = chat_request_json(&c, m, s);
	t = cJSON_PrintUnformatted(r);
	CHECK(strstr(t, "\"temperature\":0") != NULL);
	CHECK(strstr(t, "\"max_tokens\":64") != NULL);
	CHECK(strstr(t, "\"seed\":3407") != NULL);
	CHECK(strstr(t, "\"cache_prompt\":false") != NULL);
	/* The nested response_format that llama-server and vLLM read. */
	CHECK(strstr(t, "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
	    "{\"name\":\"route\",\"schema\":{\"type\":\"object\"}}}") != NULL);
	CHECK(strstr(t, "num_ctx") == NULL);
	free(t);
	cJSON_Delete(r);
	CHECK(chat_prompt_bytes(m) == strlen("You route.") + strlen("open docs"));
	cJSON_Delete(m);
	cJSON_Delete(s);
}

static void
case_ollama_replies(void)
{
	struct chat_client c;
	struct chat_reply r;
	char err[256];

	chat_init(&c, "ollama", NULL, "router", err, sizeof(err));
	c.num_ctx = 4096;
	c.server_ctx = 4096;
	CHECK(classify(&c, 200, "{\"message\":{\"role\":\"assistant\",\"content\":\"{\\\"capability\\\":"
	    "\\\"x\\\"}\"},\"done\":true,\"done_reason\":\"stop\",\"prompt_eval_count\":900,"
	    "\"eval_count\":12}", 3000, &r) == CHAT_OK);
	CHECK(strcmp(r.content, "{\"capability\":\"x\"}") == 0 && r.prompt_tokens == 900);
	chat_reply_free(&r);
	/* Ollama cut a 25 kB prompt to 2050 tokens and answered 200 (G01). */
	CHECK(classify(&c, 200, "{\"message\":{\"content\":\"{}\"},\"done_reason\":\"stop\","
	    "\"prompt_eval_count\":2050,\"eval_count\":5}", 25000, &r) == CHAT_TRUNCATED);
	CHECK(strstr(r.error, "G01") != NULL);
	chat_reply_free(&r);
	/* A prompt that filled the context. */
	CHECK(classify(&c, 200, "{\"message\":{\"content\":\"{}\"},\"done_reason\":\"stop\","
	    "\"prompt_eval_count\":4096}", 9000, &r) == CHAT_TRUNCATED);
	chat_reply_free(&r);
	/* The >= 0.30.9 refusal of a too-long prompt. */
	CHECK(classify(&c, 400, "{\"error\":\"the prompt is longer than the context length "
	    "currently available to the model\"}", 9000, &r) == CHAT_TRUNCATED);
	chat_reply_free(&r);
	/* The token cap: the model's answer, cut. */
	CHECK(classify(&c, 200, "{\"message\":{\"content\":\"{\\\"capa\"},\"done_reason\":\"length\","
	    "\"prompt_eval_count\":900,\"eval_count\":256}", 3000, &r) == CHAT_CAPPED);
	chat_reply_free(&r);
	/* The context ran out while answering. */
	CHECK(classify(&c, 200, "{\"message\":{\"content\":\"x\"},\"done_reason\":\"length\","
	    "\"prompt_eval_count\":4000,\"eval_count\":96}", 12000, &r) == CHAT_TRUNCATED);
	chat_reply_free(&r);
	/* Server failures: 500, an error line after 200, a dropped runner. */
	CHECK(classify(&c, 500, "{\"error\":\"llama runner process has terminated\"}", 10, &r) == CHAT_SERVER);
	CHECK(strstr(r.error, "terminated") != NULL);
	chat_reply_free(&r);
	CHECK(classify(&c, 200, "{\"error\":\"model runner crashed\"}", 10, &r) == CHAT_SERVER);
	chat_reply_free(&r);
	CHECK(classify(&c, 200, "{\"message\":{\"content\":\"\"},\"done\":true}", 10, &r) == CHAT_SERVER);
	chat_reply_free(&r);
	CHECK(classify(&c, 404, "{\"error\":\"model 'router' not found\"}", 10, &r) == CHAT_SERVER);
	chat_reply_free(&r);
	CHECK(classify(&c, 200, "<html>", 10, &r) == CHAT_SERVER);
	chat_reply_free(&r);
	/* Absent metrics are zero (omitempty), not a truncation. */
	CHECK(classify(&c, 200, "{\"message\":{\"content\":\"{}\"},\"done_reason\":\"stop\"}",
	    25000, &r) == CHAT_OK);
	chat_reply_free(&r);
	/* Ollama 0.34.2's answer when its llama-server runner refused the
	 * model's output mid-stream (measured on the tiny fixture: the whole
	 * body, no done_reason, no metrics): the model's, scored
	 * unparseable, with what came before the refusal kept. */
	CHECK(classify(&c, 200, "{\"model\":\"router:v2\",\"created_at\":"
	    "\"2026-12-04T02:02:11.373990966Z\",\"message\":{\"role\":\"assistant\","
	    "\"content\":\"{ \\\"capability\\\" :\\\"search\\\",\\\"args\\\" :{\\\" "
	    "shailClose every everyStop\"},\"done\":false}", 1000, &r) == CHAT_UNPARSED);
	CHECK(strncmp(r.content, "{ \"capability\"", 14) == 0);
	CHECK(strstr(r.error, "done false") != NULL);
	chat_reply_free(&r);
}

static void
case_openai_replies(void)
{
	struct chat_client c;
	struct chat_reply r;
	char err[256];

	chat_init(&c, "openai", NULL, "router", err, sizeof(err));
	c.num_ctx = 2048;
	c.server_ctx = 2048;
	CHECK(classify(&c, 200, "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
	    "\"content\":\"{}\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":300,"
	    "\"completion_tokens\":3}}", 900, &r) == CHAT_OK);
	CHECK(r.completion_tokens == 3);
	chat_reply_free(&r);
	/* llama-server's admission refusal (HACKING.md: llama-server). */
	CHECK(classify(&c, 400, "{\"error\":{\"code\":400,\"message\":\"request (3000 tokens) "
	    "exceeds the available context size (2048 tokens), try increasing it\",\"type\":"
	    "\"exceed_context_size_error\",\"n_prompt_tokens\":3000,\"n_ctx\":2048}}", 9000, &r)
	    == CHAT_TRUNCATED);
	CHECK(strstr(r.error, "exceed_context_size_error") != NULL);
	chat_reply_free(&r);
	/* vLLM, both envelopes. */
	CHECK(classify(&c, 400, "{\"object\":\"error\",\"message\":\"This model's maximum context "
	    "length is 2048 tokens.\",\"type\":\"BadRequestError\",\"code\":400}", 9000, &r)
	    == CHAT_TRUNCATED);
	chat_reply_free(&r);
	CHECK(classify(&c, 400, "{\"error\":{\"message\":\"invalid response_format\",\"type\":"
	    "\"invalid_request_error\"}}", 10, &r) == CHAT_SERVER);
	chat_reply_free(&r);
	CHECK(classify(&c, 200, "{\"choices\":[{\"message\":{\"content\":null},\"finish_reason\":"
	    "\"length\"}],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":256}}", 300, &r)
	    == CHAT_CAPPED);
	CHECK(r.content != NULL && r.len == 0);
	chat_reply_free(&r);
	/* llama-server refusing the model's own output: the model's fault. */
	CHECK(classify(&c, 500, "{\"error\":{\"code\":500,\"message\":\"The model produced output "
	    "that does not match the expected peg-native format\",\"type\":\"server_error\"}}", 10, &r)
	    == CHAT_UNPARSED);
	chat_reply_free(&r);
	CHECK(classify(&c, 500, "{\"error\":{\"code\":500,\"message\":\"out of memory\",\"type\":"
	    "\"server_error\"}}", 10, &r) == CHAT_SERVER);
	chat_reply_free(&r);
	CHECK(classify(&c, 200, "{\"choices\":[]}", 10, &r) == CHAT_SERVER);
	chat_reply_free(&r);
	CHECK(classify(&c, 503, "{\"error\":{\"code\":503,\"message\":\"Loading model\",\"type\":"
	    "\"unavailable_error\"}}", 10, &r) == CHAT_SERVER);
	chat_reply_free(&r);
}

static const struct unit_case cases[] = {
	UNIT_CASE(requests),
	UNIT_CASE(ollama_replies),
	UNIT_CASE(openai_replies),
	UNIT_END
};

int
main(int argc, char **argv)
{
	return unit_main(argc, argv, cases);
}
