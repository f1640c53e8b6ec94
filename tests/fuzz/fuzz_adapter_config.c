/*
 * fuzz_adapter_config.c: the merge stage's reading of a PEFT adapter's
 * adapter_config.json (plugins/merge.c: read_json, check_adapter_config,
 * check_base_identity, and rank_pattern/alpha_pattern as plan() applies them
 * to Gemma 3 module names) on arbitrary bytes written as that file, with
 * a fixed base config.json; then the same bytes as the base's config.json
 * (its name and vocab_size) with a fixed adapter config. The plugin has
 * no header: its source is compiled in here, as it is, to reach the
 * reader. A refusal names the file.
 */
#include <limits.h>

#include "../../plugins/merge.c"
#include "fuzz.h"

static const char base[] = "{\"_name_or_path\":\"google/gemma-3-270m\","
    "\"architectures\":[\"Gemma3ForCausalLM\"],\"vocab_size\":262144}";

static const char *const modules[] = {
	"model.language_model.layers.0.self_attn.q_proj",
	"model.language_model.layers.11.mlp.down_proj",
	"base_model.model.model.layers.3.self_attn.v_proj",
	"model.vision_tower.vision_model.encoder.layers.0.mlp.fc1",
	"lm_head", NULL
};

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char adir[PATH_MAX], bdir[PATH_MAX], apath[PATH_MAX + 32];
	struct mctx m;
	char p[PATH_MAX + 32];

	if (adir[0] == '\0') {
		const char *dir = fz_tmpdir("fuzz_adapter_config");
		snprintf(adir, sizeof(adir), "%s/adapter", dir);
		snprintf(bdir, sizeof(bdir), "%s/gemma-3-270m", dir);
		if (plc_mkdirs(adir, 0755) == -1 || plc_mkdirs(bdir, 0755) == -1)
			abort();
		snprintf(p, sizeof(p), "%s/config.json", bdir);
		fz_write(p, (const uint8_t *)base, sizeof(base) - 1);
		snprintf(apath, sizeof(apath), "%s/adapter_config.json", adir);
	}
	fz_write(apath, data, size);
	memset(&m, 0, sizeof(m));
	m.base_dir = bdir;
	m.adapter_dir = adir;
	snprintf(p, sizeof(p), "%s/config.json", bdir);
	if ((m.bcfg = read_json(p, m.err, sizeof(m.err))) == NULL)
		abort();
	int ok = (m.acfg = read_json(apath, m.err, sizeof(m.err))) != NULL &&
	    check_adapter_config(&m) == 0 && check_base_identity(&m) == 0;
	const cJSON *rp = cJSON_GetObjectItemCaseSensitive(m.acfg, "rank_pattern");
	const cJSON *ap = cJSON_GetObjectItemCaseSensitive(m.acfg, "alpha_pattern");
	for (int i = 0; ok && modules[i]; i++) {
		int bad;
		const cJSON *rm = pattern_match(rp, modules[i], m.err, sizeof(m.err), &bad);
		if (bad) {
			ok = 0;
			break;
		}
		const cJSON *am = pattern_match(ap, modules[i], m.err, sizeof(m.err), &bad);
		if (bad) {
			ok = 0;
			break;
		}
		int r = rm && cJSON_IsNumber(rm) ? rm->valueint : m.r_default;
		double alpha = am && cJSON_IsNumber(am) ? am->valuedouble : m.alpha_default;
		if (r <= 0 || m.r_default <= 0)
			continue;   /* plan() refuses it, naming the module */
		volatile double scale = m.use_rslora ? alpha / sqrt((double)r) : alpha / r;
		(void)scale;
		(void)is_vision(modules[i]);
	}
	if (!ok && strncmp(m.err, "adapter_config.json", 19) != 0 &&
	    strncmp(m.err, adir, strlen(adir)) != 0)
		abort();   /* a refusal names the file */
	m.ad.path = NULL;
	mctx_free(&m);

	/* The bytes as the base's config.json. */
	static const char adapter[] = "{\"peft_type\":\"LORA\",\"r\":8,"
	    "\"base_model_name_or_path\":\"google/gemma-3-270m\"}";
	memset(&m, 0, sizeof(m));
	m.base_dir = bdir;
	m.adapter_dir = adir;
	fz_write(apath, (const uint8_t *)adapter, sizeof(adapter) - 1);
	fz_write(p, data, size);
	if ((m.acfg = read_json(apath, m.err, sizeof(m.err))) == NULL)
		abort();
	if ((m.bcfg = read_json(p, m.err, sizeof(m.err))) != NULL) {
		if (check_base_identity(&m) == -1 && strncmp(m.err, adir, strlen(adir)) != 0)
			abort();
		(void)base_vocab(m.bcfg);
	} else if (strncmp(m.err, p, strlen(p)) != 0) {
		abort();
	}
	mctx_free(&m);
	/* Back to the fixed base for the next input. */
	fz_write(p, (const uint8_t *)base, sizeof(base) - 1);
	return 0;
}
