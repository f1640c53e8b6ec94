/*
 * fuzz_hf_config.c: the native GGUF converter's reading of a checkpoint's
 * config.json (plugins/lib/convert/gguf_convert.c: the architecture check and
 * the hyperparameters, text_config or the root) on arbitrary bytes
 * written as that file, in a directory with nothing else: whatever the
 * config says, the conversion is refused (at the config, or at the
 * missing tokenizer.model past it) with a message naming the directory,
 * and no output file appears.
 */
#include <limits.h>
#include <unistd.h>

#include "gguf.h"
#include "plio.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char dir[PATH_MAX], cfg[PATH_MAX + 16], out[PATH_MAX + 16];
	struct gguf_cstats st;
	char err[1024];

	if (dir[0] == '\0') {
		snprintf(dir, sizeof(dir), "%s/ckpt", fz_tmpdir("fuzz_hf_config"));
		if (plc_mkdirs(dir, 0755) == -1)
			abort();
		snprintf(cfg, sizeof(cfg), "%s/config.json", dir);
		snprintf(out, sizeof(out), "%s/../out.gguf", dir);
	}
	fz_write(cfg, data, size);
	err[0] = '\0';
	if (gguf_convert_gemma3(dir, out, NULL, &st, err, sizeof(err)) != -1)
		abort();
	if (strncmp(err, dir, strlen(dir)) != 0 || access(out, F_OK) == 0)
		abort();
	return 0;
}
