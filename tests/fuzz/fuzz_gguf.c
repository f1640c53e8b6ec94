/*
 * fuzz_gguf.c: the GGUF reader on arbitrary bytes. Whatever gguf_parse()
 * accepts must be safe to walk: every KV value, every string array element
 * and every tensor's data are touched, so an accepted-but-inconsistent file
 * shows up under ASan as an out-of-bounds read.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gguf g;
	/* An exact-size heap copy, so reads past the end are caught. */
	uint8_t *buf = malloc(size ? size : 1);
	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	if (gguf_parse(&g, buf, size, "fuzz") == 0) {
		volatile double sink = 0;
		for (uint64_t i = 0; i < g.n_kv; i++) {
			const struct gguf_kv *kv = &g.kv[i];
			if (kv->type == GGUF_ARRAY) {
				for (uint64_t j = 0; j < kv->n; j++) {
					const char *s;
					size_t len;
					if (kv->arr_type == GGUF_STRING) {
						if (gguf_arr_str(kv, j, &s, &len) == 0 && len)
							sink += (unsigned char)s[len - 1];
					} else
						sink += gguf_arr_num(kv, j);
				}
			} else if (kv->type == GGUF_STRING) {
				const char *s;
				size_t len;
				if (gguf_get_str(&g, kv->key, &s, &len) == 0 && len)
					sink += (unsigned char)s[len - 1];
			} else
				sink += gguf_val_num(kv->type, kv->val);
		}
		for (uint64_t i = 0; i < g.n_tensors; i++) {
			const struct gguf_tensor *t = &g.t[i];
			if (t->nbytes)
				sink += t->data[0] + t->data[t->nbytes - 1];
			sink += (double)gguf_tensor_nelem(t) + gguf_tensor_ndims(t);
		}
		(void)sink;
		gguf_close(&g);
	}
	free(buf);
	return 0;
}
