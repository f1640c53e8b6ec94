/*
 * merge.c: the merge stage. Folds a PEFT LoRA adapter into its base
 * checkpoint, natively and in bounded memory, replacing the reference
 * program's PEFT merge_and_unload on a whole model loaded in bf16
 * (HACKING.md: The training recipe).
 *
 *     W' = W + scale * (B @ A)        scale = alpha / r, or alpha / sqrt(r)
 *                                     with use_rslora (G27)
 *
 * with r and alpha per module from rank_pattern / alpha_pattern, the
 * product transposed for fan_in_fan_out and for embedding LoRA, DoRA's
 * row-norm rescale W' = m / ||W + dW||_row * (W + dW), and modules_to_save
 * tensors replacing the base tensor (HACKING.md: PEFT adapters). The product is
 * OpenBLAS sgemm in float32; bf16/f16 go to f32 exactly on the way in and
 * are rounded to nearest-even once on the way out, into the base's dtype.
 *
 * The output is a checkpoint directory laid out like the base (the same
 * shard files, the same tensor order and dtypes, its config, tokenizer
 * files and index), built in a temporary directory next to the output and
 * renamed when whole. Tensors the adapter does not touch are copied by the
 * kernel (copy_file_range), never decoded. Peak memory is one block of rows
 * of one tensor in f32 plus the adapter's A and B of that module.
 *
 * The adapter fits the base by structure, not by name: every module's A
 * and B against the base tensor's in and out features, the vocabulary
 * (embedding rows), the layer count and the modules_to_save shapes; an
 * adapter our train stage wrote also carries the base's identity
 * (pipeline-base.json: config.json's and the tensor index's digests),
 * which must be this base's. A base_model_name_or_path that names another
 * model is a warning: Unsloth names its 4-bit repository, a hub client's
 * cache names a directory by a hash. Errors name the adapter key or the
 * tensor: a key that matches no base tensor, a shape or rank that
 * disagrees with the config, a result that is not finite. Adapter modules on the vision tower of a
 * Gemma 3 adapter (target_modules also match SigLIP's
 * q/k/v_proj) are merged where the base has them and reported, not
 * refused, where it does not.
 *
 * Artifact: "merged", the output directory.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cblas.h>
#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "plio.h"
#include "inputcheck.h"
#include "safetensors.h"
#include "rate.h"

static const struct pl_host *host;

/* The f32 working set of one block of rows; bigger tensors go in blocks. */
#define BLOCK_BYTES (16u << 20)

static const struct pl_key merge_keys[] = {
	PL_KEY_INPUT(.name = "base", .flags = PL_KEY_REQUIRED | PL_KEY_DIR,
	    .help = "the base checkpoint directory (config.json, model.safetensors or shards "
	    "and index)"),
	PL_KEY_INPUT(.name = "adapter", .flags = PL_KEY_DIR, .artifact = "adapter",
	    .help = "the PEFT adapter directory (adapter_config.json, "
	    "adapter_model.safetensors)"),
	PL_KEY_PATH(.name = "output",
	    .help = "the merged checkpoint directory (default: merged in the job's work "
	    "directory)"),
	PL_KEY_INT(.name = "threads", .def = "0", .flags = PL_KEY_MIN | PL_KEY_VOLATILE, .min = 0,
	    .help = "OpenBLAS threads for the products (0: OpenBLAS's default)"),
	PL_KEY_END
};

enum act_kind { ACT_LORA = 1, ACT_REPLACE, ACT_BIAS };

/* What happens to one base tensor. */
struct action {
	int kind;
	char *target;               /* base tensor name */
	char *module;               /* module path, as PEFT names it */
	const char *key;            /* the adapter key it came from (for messages) */
	const struct st_tensor *A, *B, *mag, *bias, *repl;
	int transposed;             /* dW = (B @ A)^T: fan_in_fan_out, embeddings */
	int embedding;
	int r;
	double alpha, scale;
	int done;
};

struct mctx {
	pl_job *job;
	const char *base_dir, *adapter_dir;
	struct st_set base;
	struct st_file ad;
	cJSON *acfg, *bcfg;
	struct action *acts;
	size_t nacts, capacts;
	int use_rslora, fifo, dora, lora_bias;
	int r_default;
	double alpha_default;
	size_t skipped_vision, merged_vision;
	char first_skipped[512];
	struct plc_rate rate;
	char err[ST_ERRLEN];
};

static void
mctx_free(struct mctx *m)
{
	for (size_t i = 0; i < m->nacts; i++) {
		free(m->acts[i].target);
		free(m->acts[i].module);
	}
	free(m->acts);
	st_set_close(&m->base);
	if (m->ad.path)
		st_close(&m->ad);
	cJSON_Delete(m->acfg);
	cJSON_Delete(m->bcfg);
}

static cJSON *
read_json(const char *path, char *err, size_t errlen)
{
	size_t len;
	char *txt = plc_read_file(path, &len, 16 << 20);
	if (txt == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	cJSON *j = cJSON_ParseWithLength(txt, len);
	free(txt);
	if (j == NULL || !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		snprintf(err, errlen, "%s: not a JSON object", path);
		return NULL;
	}
	return j;
}

static int
ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

static int
is_vision(const char *module)
{
	return strstr(module, "vision_tower.") != NULL ||
	    strstr(module, "multi_modal_projector.") != NULL ||
	    strncmp(module, "vision_tower", 12) == 0;
}

/* PEFT's pattern rule: a rank_pattern/alpha_pattern key matches a module
 * whose name matches (.*\.)?(KEY)$ in full; the first key in dict order
 * wins. POSIX extended regexps stand in for Python's re here; the keys PEFT
 * writes (module names, simple alternations) mean the same in both. */
#define PATTERN_MAX 256      /* bytes of one rank_pattern/alpha_pattern key (the message says it) */
#define PATTERN_MAX_REPEAT 8 /* *, + and ? in one key (the message says it) */

/* Whether key is a pattern small enough to compile: glibc's regcomp()
 * copies a repeated subexpression once per repetition operator, so a
 * key such as "a++++...+" or "(a{999}){999}" took gigabytes (the fuzzer
 * found it). PEFT's keys are module names and simple alternations: no
 * counted repetition ({m,n}), no operator right after another, a few at
 * most. NULL, or why not. */
static const char *
pattern_refused(const char *key)
{
	size_t n = strlen(key);
	int reps = 0;
	if (n == 0)
		return "empty";
	if (n > PATTERN_MAX)
		return "over 256 bytes";
	for (size_t i = 0; i < n; i++) {
		char c = key[i];
		if (c == '\\' && i + 1 < n) {
			i++;
			continue;
		}
		if (c == '{')
			return "a counted repetition ({m,n})";
		if (c == '*' || c == '+' || c == '?') {
			if (++reps > PATTERN_MAX_REPEAT)
				return "more than 8 of *, + and ?";
			if (i > 0 && (key[i - 1] == '*' || key[i - 1] == '+' || key[i - 1] == '?') &&
			    !(i > 1 && key[i - 2] == '\\'))
				return "a repetition of a repetition";
		}
	}
	return NULL;
}

static const cJSON *
pattern_match(const cJSON *pat, const char *module, char *err, size_t errlen, int *bad)
{
	*bad = 0;
	if (!cJSON_IsObject(pat))
		return NULL;
	for (const cJSON *e = pat->child; e; e = e->next) {
		char re[PATTERN_MAX + 32];
		regex_t rx;
		const char *why = pattern_refused(e->string);
		if (why != NULL) {
			snprintf(err, errlen, "adapter_config.json: pattern \"%.80s%s\": %s: not a "
			    "pattern this merger takes (module names and simple alternations)",
			    e->string, strlen(e->string) > 80 ? "..." : "", why);
			*bad = 1;
			return NULL;
		}
		snprintf(re, sizeof(re), "^(.*\\.)?(%s)$", e->string);
		if (regcomp(&rx, re, REG_EXTENDED | REG_NOSUB) != 0) {
			snprintf(err, errlen, "adapter_config.json: pattern \"%s\" is not a "
			    "regular expression this merger understands", e->string);
			*bad = 1;
			return NULL;
		}
		int hit = regexec(&rx, module, 0, NULL, 0) == 0;
		regfree(&rx);
		if (hit)
			return e;
	}
	return NULL;
}

static struct action *
add_action(struct mctx *m)
{
	if (m->nacts == m->capacts) {
		size_t nc = m->capacts ? m->capacts * 2 : 64;
		struct action *na = realloc(m->acts, nc * sizeof(*na));
		if (na == NULL)
			return NULL;
		m->acts = na;
		m->capacts = nc;
	}
	struct action *a = &m->acts[m->nacts++];
	memset(a, 0, sizeof(*a));
	return a;
}

static struct action *
find_action(struct mctx *m, const char *module, int kind)
{
	for (size_t i = 0; i < m->nacts; i++)
		if (m->acts[i].kind == kind && strcmp(m->acts[i].module, module) == 0)
			return &m->acts[i];
	return NULL;
}

/* The base tensor a module's weight (or bias) lives in: the same path, or
 * the same module in the other Gemma 3 layout (model.language_model.* is
 * transformers >= 4.52, language_model.model.* older, model.* the causal
 * class). Returns a malloc'd name or NULL. */
static char *
resolve_layout(struct mctx *m, const char *module, const char *suffix)
{
	static const char *const layouts[] = {
		"model.language_model.", "language_model.model.", "model.", NULL
	};
	char name[2048];
	snprintf(name, sizeof(name), "%s%s", module, suffix);
	if (st_set_find(&m->base, name))
		return strdup(name);
	for (int i = 0; layouts[i]; i++) {
		size_t l = strlen(layouts[i]);
		if (strncmp(module, layouts[i], l) != 0)
			continue;
		for (int j = 0; layouts[j]; j++) {
			if (j == i)
				continue;
			snprintf(name, sizeof(name), "%s%s%s", layouts[j], module + l, suffix);
			if (st_set_find(&m->base, name))
				return strdup(name);
		}
		break;
	}
	return NULL;
}

/* resolve_layout(), and for a module of the vision tower without its
 * vision_model level also the checkpoint's name: transformers 5.23 loads
 * Gemma 3's SigLIP tower one level flatter, so PEFT names
 * model.vision_tower.encoder.layers.0.self_attn.q_proj what the
 * checkpoint (and transformers 5.5) calls
 * model.vision_tower.vision_model.encoder.layers.0.self_attn.q_proj. */
static char *
resolve_target(struct mctx *m, const char *module, const char *suffix)
{
	static const char tower[] = "vision_tower.", level[] = "vision_model.";
	char *r = resolve_layout(m, module, suffix), alt[2048];
	const char *p = strstr(module, tower);

	if (r != NULL || p == NULL || strncmp(p + strlen(tower), level, strlen(level)) == 0)
		return r;
	snprintf(alt, sizeof(alt), "%.*s%s%s", (int)(p - module + strlen(tower)), module, level,
	    p + strlen(tower));
	return resolve_layout(m, alt, suffix);
}

static int
cfg_bool(const cJSON *c, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, k);
	return cJSON_IsTrue(v);
}

/* Refuse adapter options this merger cannot honour, naming them. */
static int
check_adapter_config(struct mctx *m)
{
	const cJSON *c = m->acfg;
	const cJSON *pt = cJSON_GetObjectItemCaseSensitive(c, "peft_type");
	if (!cJSON_IsString(pt) || strcmp(pt->valuestring, "LORA") != 0) {
		snprintf(m->err, sizeof(m->err), "%s/adapter_config.json: peft_type is %s%s%s, "
		    "only LORA adapters can be merged", m->adapter_dir,
		    cJSON_IsString(pt) ? "\"" : "", cJSON_IsString(pt) ? pt->valuestring : "missing",
		    cJSON_IsString(pt) ? "\"" : "");
		return -1;
	}
	static const char *const exotic[] = {
		"layer_replication", "trainable_token_indices", "target_parameters",
		"use_qalora", "use_bdlora", "alora_invocation_tokens", "velora_config",
		"arrow_config", "kasa_config", NULL
	};
	for (int i = 0; exotic[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, exotic[i]);
		if (v && !cJSON_IsNull(v) && !cJSON_IsFalse(v) &&
		    !(cJSON_IsObject(v) && v->child == NULL) &&
		    !(cJSON_IsArray(v) && v->child == NULL)) {
			snprintf(m->err, sizeof(m->err), "%s/adapter_config.json: %s is set; this "
			    "LoRA variant cannot be merged here", m->adapter_dir, exotic[i]);
			return -1;
		}
	}
	const cJSON *init = cJSON_GetObjectItemCaseSensitive(c, "init_lora_weights");
	if (cJSON_IsString(init) && strcmp(init->valuestring, "gaussian") != 0) {
		snprintf(m->err, sizeof(m->err), "%s/adapter_config.json: init_lora_weights "
		    "\"%s\" changes the base at initialisation; merge into the residual base "
		    "is not supported", m->adapter_dir, init->valuestring);
		return -1;
	}
	const cJSON *bias = cJSON_GetObjectItemCaseSensitive(c, "bias");
	if (cJSON_IsString(bias) && strcmp(bias->valuestring, "none") != 0) {
		snprintf(m->err, sizeof(m->err), "%s/adapter_config.json: bias \"%s\" (trained "
		    "base biases) is not supported; only bias \"none\"", m->adapter_dir,
		    bias->valuestring);
		return -1;
	}
	m->use_rslora = cfg_bool(c, "use_rslora");
	m->fifo = cfg_bool(c, "fan_in_fan_out");
	m->dora = cfg_bool(c, "use_dora");
	m->lora_bias = cfg_bool(c, "lora_bias");
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(c, "r");
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(c, "lora_alpha");
	m->r_default = cJSON_IsNumber(r) ? r->valueint : 8;
	m->alpha_default = cJSON_IsNumber(a) ? a->valuedouble : 8;
	if (m->r_default <= 0) {
		snprintf(m->err, sizeof(m->err), "%s/adapter_config.json: r = %d", m->adapter_dir,
		    m->r_default);
		return -1;
	}
	return 0;
}

static const char *
last_component(const char *s, char *buf, size_t len)
{
	snprintf(buf, len, "%s", s);
	size_t n = strlen(buf);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	char *p = strrchr(buf, '/');
	return p ? p + 1 : buf;
}

/* A name is not an identity: a base_model_name_or_path whose last
 * component is neither the base's _name_or_path's nor the base
 * directory's name is reported in the job log, and the structure decides. */
static void
warn_base_name(struct mctx *m)
{
	const cJSON *an = cJSON_GetObjectItemCaseSensitive(m->acfg, "base_model_name_or_path");
	if (!cJSON_IsString(an) || an->valuestring[0] == '\0')
		return;
	char b1[PATH_MAX], b2[PATH_MAX], b3[PATH_MAX], real[PATH_MAX];
	const char *want = last_component(an->valuestring, b1, sizeof(b1));
	const cJSON *bn = cJSON_GetObjectItemCaseSensitive(m->bcfg, "_name_or_path");
	const char *have = cJSON_IsString(bn) ? last_component(bn->valuestring, b2, sizeof(b2)) : NULL;
	const char *dir = last_component(realpath(m->base_dir, real) ? real : m->base_dir,
	    b3, sizeof(b3));
	if ((have && strcmp(want, have) == 0) || strcmp(want, dir) == 0)
		return;
	host->log(m->job, PL_LOG_WARN, "merge: %s/adapter_config.json names its base \"%s\", "
	    "the base is \"%s\" (%s); merging by structure", m->adapter_dir, an->valuestring,
	    have ? bn->valuestring : dir, have ? "config.json _name_or_path" : "its directory name");
}

/* An adapter of our train stage records the base's identity beside it
 * (pipeline-base.json); another base is refused with both digests. An
 * adapter without the file (PEFT's own, Unsloth's) is checked by structure
 * alone. */
static int
check_base_identity(struct mctx *m)
{
	char p[PATH_MAX], c[65], t[65];
	cJSON *id;

	snprintf(p, sizeof(p), "%s/pipeline-base.json", m->adapter_dir);
	if (access(p, F_OK) != 0 && errno == ENOENT)
		return 0;
	if ((id = read_json(p, m->err, sizeof(m->err))) == NULL)
		return -1;
	const cJSON *wc = cJSON_GetObjectItemCaseSensitive(id, "config_sha256");
	const cJSON *wt = cJSON_GetObjectItemCaseSensitive(id, "tensors_sha256");
	const cJSON *wb = cJSON_GetObjectItemCaseSensitive(id, "base");
	if (!cJSON_IsString(wc) || !cJSON_IsString(wt)) {
		snprintf(m->err, sizeof(m->err), "%s: config_sha256 or tensors_sha256 missing or "
		    "not a string", p);
		cJSON_Delete(id);
		return -1;
	}
	if (st_set_identity(&m->base, c, t, m->err, sizeof(m->err)) == -1) {
		cJSON_Delete(id);
		return -1;
	}
	int rc = 0;
	if (strcmp(wc->valuestring, c) != 0 || strcmp(wt->valuestring, t) != 0) {
		snprintf(m->err, sizeof(m->err), "%s: the adapter was trained on base %.200s "
		    "(config.json %.64s, tensor index %.64s), not on %.200s (config.json %s, "
		    "tensor index %s)", p, cJSON_IsString(wb) ? wb->valuestring : "?",
		    wc->valuestring, wt->valuestring, m->base_dir, c, t);
		rc = -1;
	}
	cJSON_Delete(id);
	return rc;
}

/* The number of decoder layers in config.json (text_config's for a
 * conditional model); -1 when absent. */
static int64_t
base_layers(const cJSON *bcfg)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(bcfg, "num_hidden_layers");
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(bcfg, "text_config");
	if (tc != NULL && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(tc, "num_hidden_layers")))
		v = cJSON_GetObjectItemCaseSensitive(tc, "num_hidden_layers");
	return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
}

/* The decoder layer index in a module path ("...layers.N...", not the
 * vision tower's); -1 when it has none. */
static long
module_layer(const char *module)
{
	const char *p = strstr(module, "layers.");
	if (p == NULL || is_vision(module))
		return -1;
	char *end;
	long n = strtol(p + 7, &end, 10);
	return end == p + 7 || (*end != '.' && *end != '\0') ? -1 : n;
}

/*
 * The layer count: an adapter whose target_modules is a list and that sets
 * no layers_to_transform adapts those modules in every layer of the model
 * it was trained on, so its layers must be the base's. One that stops
 * short was trained on a shallower model; the error names the first base
 * tensor it leaves alone. (One that goes beyond has keys that match no
 * base tensor, refused in plan().)
 */
static int
check_layers(struct mctx *m)
{
	const cJSON *tm = cJSON_GetObjectItemCaseSensitive(m->acfg, "target_modules");
	const cJSON *lt = cJSON_GetObjectItemCaseSensitive(m->acfg, "layers_to_transform");
	int64_t nl = base_layers(m->bcfg);
	long top = -1;
	const struct action *at = NULL;

	if (!cJSON_IsArray(tm) || (lt != NULL && !cJSON_IsNull(lt)) || nl <= 0)
		return 0;
	for (size_t i = 0; i < m->nacts; i++) {
		long l = m->acts[i].kind == ACT_LORA && m->acts[i].target ?
		    module_layer(m->acts[i].target) : -1;
		if (l > top) {
			top = l;
			at = &m->acts[i];
		}
	}
	if (at == NULL || top + 1 >= nl)
		return 0;
	/* The same module one layer down: the first base tensor left alone. */
	char next[2048], *p;
	snprintf(next, sizeof(next), "%s", at->target);
	p = strstr(next, "layers.");
	snprintf(p + 7, sizeof(next) - (size_t)(p + 7 - next), "%ld%s", top + 1,
	    strchr(strstr(at->target, "layers.") + 7, '.'));
	snprintf(m->err, sizeof(m->err), "%s: the adapter's modules stop at layer %ld (%ld "
	    "layers) but the base has %lld (config.json num_hidden_layers): base tensor "
	    "\"%s\" has no adapter module though target_modules names it in every layer (an "
	    "adapter for another base?)", m->ad.path, top, top + 1, (long long)nl, next);
	return -1;
}

static int64_t
base_vocab(const cJSON *bcfg)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(bcfg, "vocab_size");
	if (!cJSON_IsNumber(v)) {
		const cJSON *tc = cJSON_GetObjectItemCaseSensitive(bcfg, "text_config");
		v = cJSON_GetObjectItemCaseSensitive(tc, "vocab_size");
	}
	/* Past 2^63 (or negative) it is no size: as if not given. */
	return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 0x1p63 ?
	    (int64_t)v->valuedouble : -1;
}

static void
shape_str(const struct st_tensor *t, char *buf, size_t len)
{
	size_t o = 0;
	o += (size_t)snprintf(buf + o, len - o, "[");
	for (int i = 0; i < t->ndim && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%llu", i ? ", " : "",
		    (unsigned long long)t->shape[i]);
	if (o < len)
		snprintf(buf + o, len - o, "]");
}

static int
is_embedding_name(const char *n)
{
	return strstr(n, "embed_tokens") != NULL || strstr(n, "lm_head") != NULL ||
	    strstr(n, "wte") != NULL;
}

/* Read the adapter's keys into actions on base tensors. */
static int
plan(struct mctx *m)
{
	static const char pfx[] = "base_model.model.";
	const cJSON *mts = cJSON_GetObjectItemCaseSensitive(m->acfg, "modules_to_save");
	const cJSON *rp = cJSON_GetObjectItemCaseSensitive(m->acfg, "rank_pattern");
	const cJSON *ap = cJSON_GetObjectItemCaseSensitive(m->acfg, "alpha_pattern");
	int64_t vocab = base_vocab(m->bcfg);

	for (size_t i = 0; i < m->ad.ntensors; i++) {
		const struct st_tensor *t = &m->ad.tensors[i];
		const char *key = t->name;
		if (strncmp(key, pfx, sizeof(pfx) - 1) != 0) {
			snprintf(m->err, sizeof(m->err), "%s: adapter key \"%s\" does not start "
			    "with \"%s\"", m->ad.path, key, pfx);
			return -1;
		}
		const char *rest = key + sizeof(pfx) - 1;
		static const struct { const char *suf; int part; } sufs[] = {
			{ ".lora_A.weight", 'A' }, { ".lora_B.weight", 'B' },
			{ ".lora_B.bias", 'b' }, { ".lora_magnitude_vector.weight", 'm' },
			{ ".lora_magnitude_vector", 'm' }, { ".lora_embedding_A", 'a' },
			{ ".lora_embedding_B", 'e' }, { NULL, 0 }
		};
		int part = 0;
		char module[2048];
		for (int k = 0; sufs[k].suf; k++) {
			if (ends_with(rest, sufs[k].suf)) {
				part = sufs[k].part;
				snprintf(module, sizeof(module), "%.*s",
				    (int)(strlen(rest) - strlen(sufs[k].suf)), rest);
				break;
			}
		}
		if (!st_is_float(t->dtype)) {
			snprintf(m->err, sizeof(m->err), "%s: adapter tensor \"%s\" has dtype %s; "
			    "only float tensors can be merged", m->ad.path, key,
			    st_dtype_name(t->dtype));
			return -1;
		}
		if (part == 0) {
			/* A full tensor: a modules_to_save replacement. */
			const char *suf = ends_with(rest, ".weight") ? ".weight" :
			    ends_with(rest, ".bias") ? ".bias" : NULL;
			int listed = 0;
			if (suf) {
				snprintf(module, sizeof(module), "%.*s",
				    (int)(strlen(rest) - strlen(suf)), rest);
				for (const cJSON *e = cJSON_IsArray(mts) ? mts->child : NULL; e; e = e->next) {
					if (!cJSON_IsString(e))
						continue;
					size_t l = strlen(e->valuestring), ml = strlen(module);
					if (strcmp(module, e->valuestring) == 0 ||
					    (ml > l && module[ml - l - 1] == '.' &&
					    strcmp(module + ml - l, e->valuestring) == 0))
						listed = 1;
				}
			}
			if (!listed) {
				snprintf(m->err, sizeof(m->err), "%s: adapter key \"%s\" is neither a "
				    "LoRA tensor nor a module in modules_to_save", m->ad.path, key);
				return -1;
			}
			char *target = resolve_target(m, module, suf);
			if (target == NULL) {
				if (is_vision(module)) {
					if (m->skipped_vision++ == 0)
						snprintf(m->first_skipped, sizeof(m->first_skipped), "%s", key);
					continue;
				}
				snprintf(m->err, sizeof(m->err), "%s: adapter key \"%s\" "
				    "(modules_to_save) matches no tensor of the base %s", m->ad.path,
				    key, m->base_dir);
				return -1;
			}
			const struct st_tensor *bt = st_set_find(&m->base, target);
			int same = bt->ndim == t->ndim;
			for (int d = 0; same && d < t->ndim; d++)
				same = bt->shape[d] == t->shape[d];
			if (!same) {
				char s1[128], s2[128];
				shape_str(t, s1, sizeof(s1));
				shape_str(bt, s2, sizeof(s2));
				if (is_embedding_name(target) && t->ndim == 2 && bt->ndim == 2 &&
				    t->shape[1] == bt->shape[1])
					snprintf(m->err, sizeof(m->err), "%s: adapter tensor \"%s\" is %s "
					    "but base tensor \"%s\" is %s: a vocabulary of %llu rows, the "
					    "base has %llu%s (an adapter for another base?)", m->ad.path,
					    key, s1, target, s2, (unsigned long long)t->shape[0],
					    (unsigned long long)bt->shape[0],
					    vocab > 0 ? " (config.json vocab_size)" : "");
				else
					snprintf(m->err, sizeof(m->err), "%s: adapter tensor \"%s\" is %s "
					    "but base tensor \"%s\" is %s", m->ad.path, key, s1, target, s2);
				free(target);
				return -1;
			}
			struct action *a = add_action(m);
			if (a == NULL || (a->module = strdup(module)) == NULL) {
				free(target);
				snprintf(m->err, sizeof(m->err), "out of memory");
				return -1;
			}
			a->kind = ACT_REPLACE;
			a->target = target;
			a->key = key;
			a->repl = t;
			continue;
		}
		int kind = part == 'b' ? ACT_BIAS : ACT_LORA;
		struct action *a = find_action(m, module, kind);
		if (a == NULL) {
			if ((a = add_action(m)) == NULL || (a->module = strdup(module)) == NULL) {
				snprintf(m->err, sizeof(m->err), "out of memory");
				return -1;
			}
			a->kind = kind;
			a->key = key;
		}
		switch (part) {
		case 'A': case 'a': a->A = t; a->embedding = part == 'a'; break;
		case 'B': case 'e': a->B = t; a->embedding = part == 'e'; break;
		case 'm': a->mag = t; break;
		case 'b': a->bias = t; break;
		}
	}

	/* Complete each LoRA module: both halves, rank, scale, target, shapes. */
	for (size_t i = 0; i < m->nacts; i++) {
		struct action *a = &m->acts[i];
		if (a->kind == ACT_REPLACE)
			continue;
		struct action *lo = a->kind == ACT_BIAS ? find_action(m, a->module, ACT_LORA) : a;
		if (a->kind == ACT_BIAS && (lo == NULL || lo->B == NULL)) {
			snprintf(m->err, sizeof(m->err), "%s: adapter key \"%s\" (lora_B.bias) has "
			    "no lora_B.weight beside it", m->ad.path, a->key);
			return -1;
		}
		if (a->kind == ACT_LORA && (a->A == NULL || a->B == NULL)) {
			snprintf(m->err, sizeof(m->err), "%s: module \"%s\" has lora_%s but no "
			    "lora_%s", m->ad.path, a->module, a->A ? "A" : "B", a->A ? "B" : "A");
			return -1;
		}
		if (a->kind == ACT_LORA && a->mag && !m->dora) {
			snprintf(m->err, sizeof(m->err), "%s: module \"%s\" has a "
			    "lora_magnitude_vector but use_dora is not set", m->ad.path, a->module);
			return -1;
		}
		if (a->kind == ACT_LORA && m->dora && a->mag == NULL) {
			snprintf(m->err, sizeof(m->err), "%s: use_dora is set but module \"%s\" "
			    "has no lora_magnitude_vector", m->ad.path, a->module);
			return -1;
		}
		int bad;
		const cJSON *rm = pattern_match(rp, a->module, m->err, sizeof(m->err), &bad);
		if (bad)
			return -1;
		const cJSON *am = pattern_match(ap, a->module, m->err, sizeof(m->err), &bad);
		if (bad)
			return -1;
		a->r = rm && cJSON_IsNumber(rm) ? rm->valueint : m->r_default;
		a->alpha = am && cJSON_IsNumber(am) ? am->valuedouble : m->alpha_default;
		if (a->r <= 0) {
			snprintf(m->err, sizeof(m->err), "%s/adapter_config.json: rank %d for "
			    "module \"%s\"", m->adapter_dir, a->r, a->module);
			return -1;
		}
		a->scale = m->use_rslora ? a->alpha / sqrt((double)a->r) : a->alpha / a->r;
		const char *suffix = a->kind == ACT_BIAS ? ".bias" : ".weight";
		a->target = resolve_target(m, a->module, suffix);
		if (a->target == NULL) {
			if (is_vision(a->module)) {
				if (m->skipped_vision++ == 0)
					snprintf(m->first_skipped, sizeof(m->first_skipped), "%s", a->key);
				a->done = -1;   /* reported, not merged */
				continue;
			}
			snprintf(m->err, sizeof(m->err), "%s: adapter key \"%s\" matches no tensor "
			    "of the base %s (no \"%s%s\")", m->ad.path, a->key, m->base_dir,
			    a->module, suffix);
			return -1;
		}
		if (is_vision(a->module))
			m->merged_vision++;
		const struct st_tensor *W = st_set_find(&m->base, a->target);
		if (!st_is_float(W->dtype)) {
			snprintf(m->err, sizeof(m->err), "base tensor \"%s\" has dtype %s; LoRA "
			    "needs a float tensor", a->target, st_dtype_name(W->dtype));
			return -1;
		}
		if (a->kind == ACT_BIAS) {
			if (W->ndim != 1 || a->bias->ndim != 1 || a->bias->shape[0] != W->shape[0]) {
				char s1[128], s2[128];
				shape_str(a->bias, s1, sizeof(s1));
				shape_str(W, s2, sizeof(s2));
				snprintf(m->err, sizeof(m->err), "%s: adapter tensor \"%s\" is %s but "
				    "base tensor \"%s\" is %s", m->ad.path, a->key, s1, a->target, s2);
				return -1;
			}
			continue;   /* r and scale: the same module, the same patterns */
		}
		const struct st_tensor *A = a->A, *B = a->B;
		char sa[128], sb[128], sw[128];
		shape_str(A, sa, sizeof(sa));
		shape_str(B, sb, sizeof(sb));
		shape_str(W, sw, sizeof(sw));
		if (W->ndim != 2 || A->ndim != 2 || B->ndim != 2) {
			snprintf(m->err, sizeof(m->err), "module \"%s\": lora_A %s, lora_B %s, base "
			    "tensor \"%s\" %s: LoRA needs 2-D tensors", a->module, sa, sb, a->target, sw);
			return -1;
		}
		if (A->shape[0] != (uint64_t)a->r || B->shape[1] != (uint64_t)a->r) {
			snprintf(m->err, sizeof(m->err), "%s: module \"%s\": lora_A %s and lora_B "
			    "%s do not have rank %d, which adapter_config.json gives it%s",
			    m->ad.path, a->module, sa, sb, a->r, rm ? " (rank_pattern)" : " (r)");
			return -1;
		}
		a->transposed = m->fifo || a->embedding;
		uint64_t rows = a->transposed ? A->shape[1] : B->shape[0];
		uint64_t cols = a->transposed ? B->shape[0] : A->shape[1];
		if (rows != W->shape[0] || cols != W->shape[1]) {
			if (is_embedding_name(a->target) && cols == W->shape[1] && a->embedding)
				snprintf(m->err, sizeof(m->err), "%s: module \"%s\": lora_embedding_A "
				    "%s covers a vocabulary of %llu but base tensor \"%s\" has %llu "
				    "rows (an adapter for another base?)", m->ad.path, a->module, sa,
				    (unsigned long long)rows, a->target,
				    (unsigned long long)W->shape[0]);
			else
				snprintf(m->err, sizeof(m->err), "%s: module \"%s\": lora_B %s @ "
				    "lora_A %s%s gives [%llu, %llu] but base tensor \"%s\" is %s",
				    m->ad.path, a->module, sb, sa, a->transposed ? ", transposed," : "",
				    (unsigned long long)rows, (unsigned long long)cols, a->target, sw);
			return -1;
		}
		if (a->mag) {
			if (a->transposed) {
				snprintf(m->err, sizeof(m->err), "module \"%s\": DoRA with %s is not "
				    "supported", a->module, m->fifo ? "fan_in_fan_out" : "embeddings");
				return -1;
			}
			if (a->mag->nelem != W->shape[0]) {
				snprintf(m->err, sizeof(m->err), "%s: module \"%s\": "
				    "lora_magnitude_vector has %llu elements, base tensor \"%s\" has "
				    "%llu rows", m->ad.path, a->module,
				    (unsigned long long)a->mag->nelem, a->target,
				    (unsigned long long)W->shape[0]);
				return -1;
			}
		}
	}
	/* One action per base tensor: LoRA never applies to modules_to_save. */
	for (size_t i = 0; i < m->nacts; i++) {
		if (m->acts[i].target == NULL)
			continue;
		for (size_t j = i + 1; j < m->nacts; j++) {
			if (m->acts[j].target && strcmp(m->acts[i].target, m->acts[j].target) == 0) {
				snprintf(m->err, sizeof(m->err), "base tensor \"%s\" is the target of "
				    "both \"%s\" and \"%s\"", m->acts[i].target, m->acts[i].key,
				    m->acts[j].key);
				return -1;
			}
		}
	}
	return 0;
}

static struct action *
action_for(struct mctx *m, const char *name)
{
	for (size_t i = 0; i < m->nacts; i++)
		if (m->acts[i].target && m->acts[i].done != -1 &&
		    strcmp(m->acts[i].target, name) == 0)
			return &m->acts[i];
	return NULL;
}

static float *
load_f32(const struct st_file *f, const struct st_tensor *t, char *err, size_t errlen)
{
	size_t n = (size_t)t->nelem;
	float *out = malloc((n ? n : 1) * sizeof(float));
	void *raw = malloc(t->nbytes ? t->nbytes : 1);
	if (out == NULL || raw == NULL) {
		snprintf(err, errlen, "%s: out of memory for tensor \"%s\"", f->path, t->name);
		goto fail;
	}
	if (st_read(f, t, raw, 0, t->nbytes) == -1) {
		snprintf(err, errlen, "%s: tensor \"%s\": read: %s", f->path, t->name,
		    strerror(errno));
		goto fail;
	}
	st_to_f32(t->dtype, raw, out, n);
	free(raw);
	return out;
fail:
	free(out);
	free(raw);
	return NULL;
}

static int
count_nonfinite(const float *x, size_t n, size_t *first)
{
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(x[i])) {
			if (bad++ == 0)
				*first = i;
		}
	}
	return bad;
}

/* Merge one LoRA (or lora bias) action into tensor i of the writer, block
 * of rows by block of rows. */
static int
merge_lora(struct mctx *m, struct action *a, const struct st_tensor *W,
    struct st_writer *w, size_t wi)
{
	const struct st_file *bf = st_set_file(&m->base, W);
	float *A = NULL, *B = NULL, *mag = NULL, *buf = NULL;
	void *raw = NULL;
	int rc = -1;
	uint64_t rows = W->ndim >= 1 ? W->shape[0] : 1;
	uint64_t cols = W->ndim == 2 ? W->shape[1] : 1;
	size_t esz = (size_t)st_dtype_bits(W->dtype) / 8;

	if (a->kind == ACT_BIAS) {
		if ((B = load_f32(&m->ad, a->bias, m->err, sizeof(m->err))) == NULL)
			goto out;
	} else {
		if ((A = load_f32(&m->ad, a->A, m->err, sizeof(m->err))) == NULL ||
		    (B = load_f32(&m->ad, a->B, m->err, sizeof(m->err))) == NULL)
			goto out;
		if (a->mag && (mag = load_f32(&m->ad, a->mag, m->err, sizeof(m->err))) == NULL)
			goto out;
	}
	uint64_t brows = BLOCK_BYTES / (cols * sizeof(float));
	if (brows == 0)
		brows = 1;
	if (brows > rows)
		brows = rows;
	buf = malloc((size_t)(brows * cols) * sizeof(float));
	raw = malloc((size_t)(brows * cols) * esz);
	if (buf == NULL || raw == NULL) {
		snprintf(m->err, sizeof(m->err), "out of memory for tensor \"%s\"", W->name);
		goto out;
	}
	for (uint64_t r0 = 0; r0 < rows; r0 += brows) {
		uint64_t nb = rows - r0 < brows ? rows - r0 : brows;
		size_t n = (size_t)(nb * cols);
		if (st_read(bf, W, raw, r0 * cols * esz, n * esz) == -1) {
			snprintf(m->err, sizeof(m->err), "%s: tensor \"%s\": read: %s", bf->path,
			    W->name, strerror(errno));
			goto out;
		}
		st_to_f32(W->dtype, raw, buf, n);
		if (a->kind == ACT_BIAS) {
			for (size_t k = 0; k < n; k++)
				buf[k] += (float)a->scale * B[r0 + k];
		} else if (!a->transposed) {
			/* rows r0.. of B @ A: B[r0:r0+nb, :] (nb x r) @ A (r x cols) */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nb, (int)cols,
			    a->r, (float)a->scale, B + r0 * (uint64_t)a->r, a->r, A, (int)cols,
			    1.0f, buf, (int)cols);
		} else {
			/* rows r0.. of (B @ A)^T = A^T @ B^T: A is [r, rows], B [cols, r] */
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, (int)nb, (int)cols,
			    a->r, (float)a->scale, A + r0, (int)rows, B, a->r,
			    1.0f, buf, (int)cols);
		}
		if (mag) {
			/* DoRA: each output row rescaled to its magnitude. */
			for (uint64_t i = 0; i < nb; i++) {
				float *row = buf + i * cols;
				double ss = 0;
				for (uint64_t k = 0; k < cols; k++)
					ss += (double)row[k] * row[k];
				double norm = sqrt(ss);
				float f = (float)(mag[r0 + i] / norm);
				for (uint64_t k = 0; k < cols; k++)
					row[k] *= f;
			}
		}
		size_t first = 0;
		int bad = count_nonfinite(buf, n, &first);
		if (bad == 0) {
			st_from_f32(W->dtype, buf, raw, n);
			st_to_f32(W->dtype, raw, buf, n);   /* f16 can overflow here */
			bad = count_nonfinite(buf, n, &first);
		}
		if (bad) {
			uint64_t at = r0 * cols + first;
			snprintf(m->err, sizeof(m->err), "merged tensor \"%s\" is not finite in %s "
			    "(%d values in rows %llu..%llu, first at [%llu, %llu]; adapter module "
			    "\"%s\", scale %g)", W->name, st_dtype_name(W->dtype), bad,
			    (unsigned long long)r0, (unsigned long long)(r0 + nb - 1),
			    (unsigned long long)(at / cols), (unsigned long long)(at % cols),
			    a->module, a->scale);
			goto out;
		}
		if (st_writer_write(w, wi, r0 * cols * esz, raw, n * esz, m->err,
		    sizeof(m->err)) == -1)
			goto out;
	}
	rc = 0;
out:
	free(A);
	free(B);
	free(mag);
	free(buf);
	free(raw);
	return rc;
}

/* Write a modules_to_save tensor in place of the base one, converted to
 * the base's dtype (copied by the kernel when the dtypes agree). */
static int
replace_tensor(struct mctx *m, struct action *a, const struct st_tensor *W,
    struct st_writer *w, size_t wi)
{
	const struct st_tensor *t = a->repl;
	if (t->dtype == W->dtype)
		return st_writer_copy(w, wi, 0, m->ad.fd, t->offset, t->nbytes, m->err,
		    sizeof(m->err));
	size_t esz_in = (size_t)st_dtype_bits(t->dtype) / 8;
	size_t esz_out = (size_t)st_dtype_bits(W->dtype) / 8;
	size_t chunk = 1 << 20;
	float *buf = malloc(chunk * sizeof(float));
	void *in = malloc(chunk * esz_in), *out = malloc(chunk * esz_out);
	int rc = -1;
	if (!buf || !in || !out) {
		snprintf(m->err, sizeof(m->err), "out of memory for tensor \"%s\"", W->name);
		goto done;
	}
	for (uint64_t o = 0; o < t->nelem; o += chunk) {
		size_t n = t->nelem - o < chunk ? (size_t)(t->nelem - o) : chunk;
		if (st_read(&m->ad, t, in, o * esz_in, n * esz_in) == -1) {
			snprintf(m->err, sizeof(m->err), "%s: tensor \"%s\": read: %s", m->ad.path,
			    t->name, strerror(errno));
			goto done;
		}
		st_to_f32(t->dtype, in, buf, n);
		st_from_f32(W->dtype, buf, out, n);
		st_to_f32(W->dtype, out, buf, n);
		size_t first;
		if (count_nonfinite(buf, n, &first)) {
			snprintf(m->err, sizeof(m->err), "modules_to_save tensor \"%s\" is not "
			    "finite in %s (element %llu)", t->name, st_dtype_name(W->dtype),
			    (unsigned long long)(o + first));
			goto done;
		}
		if (st_writer_write(w, wi, o * esz_out, out, n * esz_out, m->err,
		    sizeof(m->err)) == -1)
			goto done;
	}
	rc = 0;
done:
	free(buf);
	free(in);
	free(out);
	return rc;
}

/* Write one output file mirroring base file fi. */
static int
merge_file(struct mctx *m, size_t fi, const char *tmpdir, size_t *done, size_t total,
    uint64_t *bytes)
{
	const struct st_file *f = &m->base.files[fi];
	char path[PATH_MAX];
	struct st_writer w;
	int rc = -1;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, m->base.fnames[fi]);
	st_writer_init(&w, path);
	for (size_t i = 0; i < f->nmeta; i++)
		if (st_writer_meta(&w, f->meta[i].key, f->meta[i].value) == -1) {
			snprintf(m->err, sizeof(m->err), "out of memory");
			goto out;
		}
	if (f->nmeta == 0)
		st_writer_meta(&w, "format", "pt");
	for (size_t i = 0; i < f->ntensors; i++)
		if (st_writer_add(&w, f->tensors[i].name, f->tensors[i].dtype, f->tensors[i].ndim,
		    f->tensors[i].shape, m->err, sizeof(m->err)) < 0)
			goto out;
	if (st_writer_start(&w, m->err, sizeof(m->err)) == -1)
		goto out;
	size_t i = 0;
	while (i < f->ntensors) {
		if (host->cancelled(m->job)) {
			rc = PL_ECANCELED;
			goto out;
		}
		struct action *a = action_for(m, f->tensors[i].name);
		if (a == NULL) {
			/* A run of untouched tensors: one kernel copy. */
			size_t j = i;
			while (j + 1 < f->ntensors && action_for(m, f->tensors[j + 1].name) == NULL)
				j++;
			if (st_writer_copy_run(&w, i, j, f->fd, f->tensors[i].offset, m->err,
			    sizeof(m->err)) == -1)
				goto out;
			for (size_t k = i; k <= j; k++)
				*bytes += f->tensors[k].nbytes;
			*done += j - i + 1;
			i = j + 1;
		} else {
			int r = a->kind == ACT_REPLACE ?
			    replace_tensor(m, a, &f->tensors[i], &w, i) :
			    merge_lora(m, a, &f->tensors[i], &w, i);
			if (r == -1)
				goto out;
			a->done = 1;
			*bytes += f->tensors[i].nbytes;
			(*done)++;
			i++;
		}
		plc_report_tensors(host, m->job, &m->rate, *done, total, *bytes);
	}
	if (st_writer_commit(&w, m->err, sizeof(m->err)) == -1)
		goto out;
	rc = 0;
out:
	st_writer_free(&w);
	return rc;
}

/* Reopen every output file and check it holds exactly the base's tensors
 * with the base's dtypes and shapes. */
static int
verify_output(struct mctx *m, const char *dir)
{
	struct st_set out;
	if (st_set_open(&out, dir, m->err, sizeof(m->err)) == -1)
		return -1;
	int rc = 0;
	if (out.ntensors != m->base.ntensors || out.nfiles != m->base.nfiles) {
		snprintf(m->err, sizeof(m->err), "output %s holds %zu tensors in %zu files, the "
		    "base %zu in %zu", dir, out.ntensors, out.nfiles, m->base.ntensors,
		    m->base.nfiles);
		rc = -1;
	}
	for (size_t i = 0; rc == 0 && i < m->base.ntensors; i++) {
		const struct st_tensor *b = m->base.tensors[i];
		const struct st_tensor *o = st_set_find(&out, b->name);
		int same = o && o->dtype == b->dtype && o->ndim == b->ndim;
		for (int d = 0; same && d < b->ndim; d++)
			same = o->shape[d] == b->shape[d];
		if (!same) {
			snprintf(m->err, sizeof(m->err), "output %s: tensor \"%s\" is missing or "
			    "differs in dtype or shape from the base", dir, b->name);
			rc = -1;
		}
	}
	st_set_close(&out);
	return rc;
}

static int
merge_run(pl_job *job)
{
	struct mctx m;
	struct st_outdir od = { "", "" };
	char out_default[PATH_MAX], p[PATH_MAX];
	int rc = PL_EFAIL;

	memset(&m, 0, sizeof(m));
	m.job = job;
	m.ad.fd = -1;
	m.base_dir = host->input(job, "base");
	m.adapter_dir = host->input(job, "adapter");
	if (m.base_dir == NULL || m.adapter_dir == NULL)
		return host->fail(job, "merge: %s cannot be resolved",
		    m.base_dir == NULL ? "base" : "adapter");
	const char *ok = host->get(job, "output");
	const char *output = ok ? host->input(job, "output") : NULL;
	if (ok && output == NULL)
		return host->fail(job, "merge: output %s cannot be used", ok);
	if (output == NULL) {
		snprintf(out_default, sizeof(out_default), "%s/merged", host->workdir(job));
		output = out_default;
	}
	int threads = (int)host->get_int(job, "threads", 0);
	if (threads > 0)
		openblas_set_num_threads(threads);

	snprintf(p, sizeof(p), "%s/config.json", m.base_dir);
	if ((m.bcfg = read_json(p, m.err, sizeof(m.err))) == NULL)
		goto fail;
	snprintf(p, sizeof(p), "%s/adapter_config.json", m.adapter_dir);
	if ((m.acfg = read_json(p, m.err, sizeof(m.err))) == NULL)
		goto fail;
	if (check_adapter_config(&m) == -1)
		goto fail;
	warn_base_name(&m);
	if (st_set_open(&m.base, m.base_dir, m.err, sizeof(m.err)) == -1)
		goto fail;
	if (check_base_identity(&m) == -1)
		goto fail;
	snprintf(p, sizeof(p), "%s/adapter_model.safetensors", m.adapter_dir);
	if (st_open(&m.ad, p, m.err, sizeof(m.err)) == -1)
		goto fail;
	if (plan(&m) == -1 || check_layers(&m) == -1)
		goto fail;

	size_t nlora = 0, nrepl = 0, nbias = 0;
	for (size_t i = 0; i < m.nacts; i++) {
		if (m.acts[i].done == -1)
			continue;
		if (m.acts[i].kind == ACT_LORA)
			nlora++;
		else if (m.acts[i].kind == ACT_REPLACE)
			nrepl++;
		else
			nbias++;
	}
	host->log(job, PL_LOG_INFO, "merge: base %s (%zu tensors in %zu file%s), adapter %s: "
	    "%zu LoRA modules%s%s, %zu modules_to_save tensors, %zu lora biases",
	    m.base_dir, m.base.ntensors, m.base.nfiles, m.base.nfiles == 1 ? "" : "s",
	    m.adapter_dir, nlora, m.use_rslora ? " (rsLoRA)" : "", m.dora ? " (DoRA)" : "",
	    nrepl, nbias);
	if (m.skipped_vision) {
		host->log(job, PL_LOG_WARN, "merge: %zu adapter modules on the vision tower have "
		    "no tensor in the base and were skipped (first: \"%s\")", m.skipped_vision,
		    m.first_skipped);
		char js[256];
		snprintf(js, sizeof(js), "{\"skipped_vision_modules\":%zu,\"merged_vision_modules\":%zu}",
		    m.skipped_vision, m.merged_vision);
		host->event(job, "merge.vision", js);
	} else if (m.merged_vision) {
		host->log(job, PL_LOG_INFO, "merge: %zu adapter modules on the vision tower were "
		    "merged into the base's vision tower", m.merged_vision);
	}
	if (nlora + nrepl + nbias == 0) {
		snprintf(m.err, sizeof(m.err), "%s: the adapter changes no tensor of the base",
		    m.adapter_dir);
		goto fail;
	}

	if (st_outdir_begin(&od, output, m.err, sizeof(m.err)) == -1)
		goto fail;
	size_t done = 0;
	uint64_t bytes = 0;
	for (size_t fi = 0; fi < m.base.nfiles; fi++) {
		int r = merge_file(&m, fi, od.tmp, &done, m.base.ntensors, &bytes);
		if (r == PL_ECANCELED) {
			rc = PL_ECANCELED;
			host->log(job, PL_LOG_INFO, "merge: cancelled after %zu of %zu tensors",
			    done, m.base.ntensors);
			goto cleanup;
		}
		if (r != 0)
			goto fail;
	}
	for (size_t i = 0; i < m.nacts; i++) {
		if (m.acts[i].done == 0) {
			snprintf(m.err, sizeof(m.err), "adapter module \"%s\" was never merged "
			    "(target \"%s\")", m.acts[i].module, m.acts[i].target);
			goto fail;
		}
	}
	int naux = 0;
	if (st_copy_aux_files(m.base_dir, od.tmp, &naux, m.err, sizeof(m.err)) == -1)
		goto fail;
	if (m.base.sharded) {
		const char **names = calloc(m.base.ntensors + 1, sizeof(*names));
		const char **files = calloc(m.base.ntensors + 1, sizeof(*files));
		if (names == NULL || files == NULL) {
			free(names);
			free(files);
			snprintf(m.err, sizeof(m.err), "out of memory");
			goto fail;
		}
		for (size_t i = 0; i < m.base.ntensors; i++) {
			names[i] = m.base.tensors[i]->name;
			files[i] = m.base.fnames[m.base.tensors[i]->file];
		}
		snprintf(p, sizeof(p), "%s/model.safetensors.index.json", od.tmp);
		int r = st_write_index(p, m.base.ntensors, names, files, m.base.data_bytes,
		    m.err, sizeof(m.err));
		free(names);
		free(files);
		if (r == -1)
			goto fail;
	}
	if (verify_output(&m, od.tmp) == -1)
		goto fail;
	if (st_outdir_commit(&od, m.err, sizeof(m.err)) == -1)
		goto fail;
	host->log(job, PL_LOG_INFO, "merge: wrote %s: %zu tensors (%zu merged, %zu replaced, "
	    "%zu copied unchanged), %d other files", output, m.base.ntensors, nlora + nbias,
	    nrepl, m.base.ntensors - nlora - nbias - nrepl, naux);
	if ((rc = host->artifact(job, "merged", output)) != PL_OK) {
		host->fail(job, "merge: registering artifact \"merged\" (%s): %s", output,
		    host->strerror(rc));
		goto cleanup;
	}
	rc = PL_OK;
	goto cleanup;
fail:
	rc = host->fail(job, "merge: %s", m.err);
cleanup:
	st_outdir_abort(&od);
	mctx_free(&m);
	return rc;
}

static int
merge_check(pl_job *job)
{
	plc_check_base(host, job, "base");
	return PL_OK;
}

static const struct pl_stage merge_stage = PL_STAGE(
	.name = "merge",
	.summary = "merge a PEFT LoRA adapter into its base checkpoint (streaming, OpenBLAS)",
	.flags = PL_STAGE_REUSE,
	.keys = merge_keys,
	.check = merge_check,
	.run = merge_run);

PL_PLUGIN(&host, &merge_stage)
