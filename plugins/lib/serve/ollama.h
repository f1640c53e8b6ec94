/*
 * ollama.h: a small blocking client for the Ollama HTTP API (libcurl
 * through plc_http, cJSON), for the stages that must share a GPU with a
 * model server: version, tags, ps, load, unload (keep_alive 0) and
 * unload-and-wait. The behaviours it copes with are in
 * HACKING.md: Ollama:
 *
 *  - an unload returns at once, before the runner is gone; only /api/ps
 *    tells when it really is (ollama_unload_wait);
 *  - /api/ps and /api/tags always print a tag ("nomic-embed-text:latest"),
 *    while operators write "nomic-embed-text": compare names with
 *    ollama_name_eq, which normalises both sides (ollama_name_norm);
 *  - unloading a model that is not loaded is a no-op answered 200, and
 *    nothing stops another client from loading it again a second later
 *    (G21), so a caller that needs a free GPU checks ps again.
 *
 * Every call takes the client by pointer, returns 0 or -1, and on -1
 * leaves a one-line reason in c->error (transport error, or HTTP status
 * and Ollama's {"error": ...} text). The functions keep no state beyond
 * the struct, so one client per thread, or several, is fine.
 *
 * The admin half of the API (blobs, create, show, copy, delete, chat)
 * belongs in ollama_admin.c and is declared below the marker at the end.
 */
#ifndef PL_OLLAMA_H
#define PL_OLLAMA_H

#include <stddef.h>
#include <stdint.h>

#define OLLAMA_DEFAULT_URL "http://127.0.0.1:11434"
#define OLLAMA_NAME_MAX 256

struct ollama {
	char url[512];         /* base URL without a trailing slash */
	double timeout;        /* seconds per request; 0: none */
	long status;           /* HTTP status of the last request, 0 when none */
	char error[512];       /* why the last call failed */
};

/* One entry of /api/ps or /api/tags. */
struct ollama_model {
	char name[OLLAMA_NAME_MAX];    /* as the server prints it */
	char model[OLLAMA_NAME_MAX];   /* ps: the tag that loaded the runner */
	char digest[80];               /* manifest digest, hex */
	uint64_t size;                 /* bytes */
	uint64_t size_vram;            /* ps: bytes on the GPU */
	char expires_at[64];           /* ps: RFC 3339; in the past = "Stopping..." */
	long context_length;           /* ps: the runner's context, 0 when absent */
};

struct ollama_list {
	struct ollama_model *v;
	size_t n;
};

/* Set up a client for url (NULL or "": OLLAMA_DEFAULT_URL); timeout in
 * seconds for each request. */
int	ollama_init(struct ollama *c, const char *url, double timeout);

/* GET /api/version into buf ("0.12.6"). */
int	ollama_version(struct ollama *c, char *buf, size_t len);

/*
 * The server profiles the project is tested with (pipeline.ini(5):
 * register): Ollama before 0.30 runs GGUFs in its own cgo engine and
 * serves the Modelfile TEMPLATE; from 0.30 it runs an upstream
 * llama-server, may serve the GGUF's own tokenizer.chat_template instead,
 * and rewrites a GGUF at create time. OLLAMA_TESTED lists the releases
 * the tests ran against, the default first.
 */
#define OLLAMA_TESTED "0.34.2, 0.24.0"
enum ollama_profile {
	OLLAMA_PROFILE_UNKNOWN,		/* a dev build ("0.0.0") or unparsed */
	OLLAMA_PROFILE_CGO,		/* before 0.30 */
	OLLAMA_PROFILE_LLAMA_SERVER,	/* 0.30 and later */
};
/* The profile of a version string; *tested is 1 when the version is one
 * of OLLAMA_TESTED. */
enum ollama_profile ollama_profile(const char *version, int *tested);
const char *ollama_profile_name(enum ollama_profile p);

/* GET /api/tags (models on disk) or /api/ps (models loaded). The list is
 * malloc'd; free it with ollama_list_free. */
int	ollama_tags(struct ollama *c, struct ollama_list *out);
int	ollama_ps(struct ollama *c, struct ollama_list *out);
void	ollama_list_free(struct ollama_list *l);

/* Load (pre-warm) a model with an empty /api/generate request. keep_alive
 * is a JSON value as text ("-1", "300", "\"10m\"") or NULL for the
 * server's default; num_ctx > 0 is sent as options.num_ctx (a load-time
 * option: a different value reloads the runner). */
int	ollama_load(struct ollama *c, const char *name, const char *keep_alive,
	    int num_ctx);

/* ollama_load with shift (-1: not sent; 0 or 1: the request's shift, a
 * load-time option from 0.30 on). */
int	ollama_load_opts(struct ollama *c, const char *name, const char *keep_alive,
	    int num_ctx, int shift);

/* Ask the server to unload a model (/api/generate, empty prompt,
 * keep_alive 0). Returns when the server answered, which is before the
 * runner is gone. */
int	ollama_unload(struct ollama *c, const char *name);

/* Unload and poll /api/ps every poll seconds until no entry matches name,
 * for at most wait seconds. 0 when it is gone; -1 with errno ETIMEDOUT
 * (and c->error naming the model) when it is still listed. */
int	ollama_unload_wait(struct ollama *c, const char *name, double wait,
	    double poll);

/* Parse a /api/ps or /api/tags answer into out (malloc'd); 0, or -1 with
 * the reason in err. Entries without a name or model are left out. */
int	ollama_parse_list(const char *body, size_t len, struct ollama_list *out,
	    char *err, size_t errlen);

/* 1 when a ps/tags list holds a model matching name. */
int	ollama_list_has(const struct ollama_list *l, const char *name);

/* Normalise a model name for comparison: lower case, the default
 * "registry.ollama.ai/library/" (or "library/") prefix dropped, and
 * ":latest" appended when there is no tag. A colon inside a host:port
 * prefix is not a tag. Returns 0, or -1 when out is too small. */
int	ollama_name_norm(const char *name, char *out, size_t len);
/* 1 when two names refer to the same tag. */
int	ollama_name_eq(const char *a, const char *b);
/* 1 when a ps entry matches name through its name or its model field. */
int	ollama_model_is(const struct ollama_model *m, const char *name);

/* Internal, for ollama*.c: perform a request against c->url + path and
 * return the parsed JSON body (a cJSON *, as void * so this header needs
 * no cJSON) on a 2xx answer; NULL with c->error set otherwise. */
void	*ollama_request(struct ollama *c, const char *method, const char *path,
	    const char *body);

/* --- ollama_admin.c: blobs, create, show, copy, delete, chat --- */

#endif
