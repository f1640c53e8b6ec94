/*
 * fuzz_modelfile.c: the register stage's Modelfile template reader
 * (plugins/register.c: modelfile_load, pipeline.ini(5) "register") on
 * arbitrary bytes written as the template file, and the same bytes as
 * the modelfile a server returns (ollama_admin.c: the weights digest of
 * its first FROM line). The plugin has no header: its source is compiled
 * in here, as it is, to reach the reader. A loaded template has a
 * TEMPLATE, parameters of Ollama's types (finite numbers an integer
 * option can carry exactly; stop: strings); a
 * refusal names the file; a digest is 64 hex digits.
 */
#include <limits.h>
#include <math.h>

#include "../../plugins/register.c"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[PATH_MAX];
	struct modelfile m;
	char err[1024], hex[80];

	if (path[0] == '\0')
		snprintf(path, sizeof(path), "%s/Modelfile.tmpl", fz_tmpdir("fuzz_modelfile"));
	fz_write(path, data, size);
	if (modelfile_load(path, &m, err, sizeof(err)) == 0) {
		if (m.template == NULL || !cJSON_IsObject(m.params))
			abort();
		for (const cJSON *p = m.params->child; p; p = p->next) {
			if (strcmp(p->string, "stop") == 0) {
				if (!cJSON_IsArray(p))
					abort();
				for (const cJSON *s = p->child; s; s = s->next)
					if (!cJSON_IsString(s))
						abort();
			} else if (!cJSON_IsNumber(p) || !isfinite(p->valuedouble) ||
			    fabs(p->valuedouble) > 9007199254740992.0) {
				abort();
			}
		}
		(void)same_text(m.template, m.system ? m.system : "");
		modelfile_free(&m);
	} else if (strncmp(err, path, strlen(path)) != 0) {
		abort();
	}
	char *text = fz_text(data, size);
	if (ollama_modelfile_weights(text, hex, sizeof(hex)) == 0 &&
	    (strlen(hex) != 64 || strspn(hex, "0123456789abcdefABCDEF") != 64))
		abort();
	free(text);
	return 0;
}
