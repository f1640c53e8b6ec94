/*
 * fuzz_safetensors.c: the safetensors header validator on arbitrary bytes,
 * taken as a whole file (8-byte length, header, data). Whatever
 * st_parse_header() accepts must satisfy the invariants the stages rely
 * on: tensors sorted by offset, contiguous from 0 to the end of the data,
 * each exactly shape x dtype bytes, names unique; a violation aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_file f;
	char err[ST_ERRLEN];
	uint64_t n = 0;

	if (size < 8)
		return 0;
	for (int i = 7; i >= 0; i--)
		n = (n << 8) | data[i];
	if (n > ST_MAX_HEADER || n > size - 8)
		return 0;
	/* An exact-size heap copy of the header, so reads past it are caught. */
	char *hdr = malloc(n ? n : 1);
	if (hdr == NULL)
		return 0;
	memcpy(hdr, data + 8, n);
	memset(&f, 0, sizeof(f));
	if (st_parse_header(&f, "fuzz", hdr, n, size - 8 - n, err, sizeof(err)) == 0) {
		uint64_t at = 0;
		for (size_t i = 0; i < f.ntensors; i++) {
			const struct st_tensor *t = &f.tensors[i];
			uint64_t bits = t->nelem * (uint64_t)st_dtype_bits(t->dtype);
			if (t->begin != at || t->end - t->begin != t->nbytes ||
			    bits / 8 != t->nbytes || t->name == NULL)
				abort();
			for (size_t j = 0; j < i; j++)
				if (strcmp(f.tensors[j].name, t->name) == 0)
					abort();
			at = t->end;
		}
		if (at != size - 8 - n)
			abort();
		for (size_t i = 0; i < f.nmeta; i++)
			if (f.meta[i].key == NULL || f.meta[i].value == NULL)
				abort();
		st_close(&f);
	} else if (err[0] == '\0' || strncmp(err, "fuzz", 4) != 0) {
		abort();   /* every refusal names the file */
	}
	free(hdr);
	return 0;
}
