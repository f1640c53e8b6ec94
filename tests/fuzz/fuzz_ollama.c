/*
 * fuzz_ollama.c: the Ollama client's parsing of server answers (/api/ps
 * and /api/tags listings, model names) on arbitrary bytes: no crash, no
 * read past the input, every entry it keeps has a name, and a kept name
 * normalises to a tagged name.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ollama.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ollama_list l;
	char err[256], norm[OLLAMA_NAME_MAX * 2];

	if (ollama_parse_list((const char *)data, size, &l, err, sizeof(err)) == 0) {
		for (size_t i = 0; i < l.n; i++) {
			if (l.v[i].name[0] == '\0')
				abort();
			if (ollama_name_norm(l.v[i].name, norm, sizeof(norm)) == 0 &&
			    strchr(norm, ':') == NULL)
				abort();
			(void)ollama_list_has(&l, l.v[i].model);
		}
		ollama_list_free(&l);
	}
	/* The bytes as a model name. */
	char *name = malloc(size + 1);
	if (name != NULL) {
		memcpy(name, data, size);
		name[size] = '\0';
		if (ollama_name_norm(name, norm, sizeof(norm)) == 0) {
			const char *slash = strrchr(norm, '/');
			if (strchr(slash ? slash : norm, ':') == NULL)
				abort();
			(void)ollama_name_eq(name, norm);
		}
		free(name);
	}
	return 0;
}
