/*
 * ollama_admin.h: the admin half of the Ollama client (blobs, create,
 * show, copy, delete), for the register and gate stages. It builds on
 * ollama.h (same struct ollama, same error convention: 0 or -1 with
 * c->error set). Facts: HACKING.md: Ollama.
 */
#ifndef PL_OLLAMA_ADMIN_H
#define PL_OLLAMA_ADMIN_H

#include "ollama.h"

/* HEAD /api/blobs/sha256:<hex>: 1 present, 0 absent, -1 error. */
int	ollama_blob_has(struct ollama *c, const char *sha256_hex);
/* Upload a file as a blob unless the server has it (HEAD first, so a
 * gigabyte is not pushed twice). *uploaded is 1 when it was sent. */
int	ollama_blob_push(struct ollama *c, const char *path, const char *sha256_hex,
	    int *uploaded);

/* POST /api/create (JSON form, >= 0.5.5) with stream:false. req is the
 * request object's text ({"model", "files", "template", "parameters"...}). */
int	ollama_create(struct ollama *c, const char *req_json);

/* What /api/show says a tag serves. */
struct ollama_show {
	char weights[80];	/* model layer digest, hex: the FROM blob */
	char *template;		/* malloc'd; the template actually chosen */
	char *parameters;	/* malloc'd; Ollama's parameter lines */
	char *modelfile;	/* malloc'd */
	long context_length;	/* <arch>.context_length, 0 when absent */
};
int	ollama_show(struct ollama *c, const char *name, struct ollama_show *s);
void	ollama_show_free(struct ollama_show *s);
/* The weights digest from a modelfile's first FROM line
 * (".../blobs/sha256-<hex>"); -1 when there is none. */
int	ollama_modelfile_weights(const char *modelfile, char *hex, size_t len);

/* The manifest digest of a tag from /api/tags; -1 with errno ENOENT when
 * the tag does not exist. */
int	ollama_manifest_digest(struct ollama *c, const char *name, char *hex, size_t len);

/* Reuse (pipeline-plugin(3) REUSE): what a stage's key holds of the
 * server at url, as "NAME=VALUE" lines in buf: its version and, when tag
 * is not NULL, the manifest and weights digests the tag serves now. 0, or
 * -1 with why in buf (the server does not answer, the tag is not there). */
int	ollama_reuse_key(const char *url, const char *tag, char *buf, size_t len);
/* Whether the server at url still serves tag at the manifest digest an
 * earlier job recorded (manifest; NULL: it recorded none): 0, or -1 with
 * why in buf. */
int	ollama_reuse_check(const char *url, const char *tag, const char *manifest, char *buf,
	    size_t len);

/* POST /api/copy: 200 with an empty body. */
int	ollama_copy(struct ollama *c, const char *source, const char *destination);
/* DELETE /api/delete. */
int	ollama_delete(struct ollama *c, const char *name);

#endif
