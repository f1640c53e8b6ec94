/*
 * gguf_convert.c: a Gemma 3 text checkpoint (Gemma3ForCausalLM, or the
 * language model of Gemma3ForConditionalGeneration) to GGUF, as llama.cpp's
 * convert_hf_to_gguf.py does it (HACKING.md: Gemma 3 to GGUF):
 *
 *   - names: "language_model." dropped, vision tower and projector skipped,
 *     the rest mapped to llama.cpp's names; a name that does not map
 *     is an error, as it is for the reference;
 *   - values: +1 on every norm kind (Gemma3RMSNorm multiplies by 1 + w),
 *     norms written F32, matrices in the outtype, the embedding cut to the
 *     vocabulary size, no output.weight unless lm_head.weight is stored;
 *   - hyperparameters with transformers' Gemma3TextConfig defaults for the
 *     fields config.json leaves out (the reference reads the config through
 *     AutoConfig, so it sees those defaults);
 *   - the SentencePiece vocabulary padded with [PAD<id>] to vocab_size,
 *     token types and scores, added tokens, special ids, add_bos/add_eos,
 *     add_sep (tokenizer_config.json's, else read from tokenizer.json's
 *     post-processor as the reference does), add_space_prefix = false and
 *     the chat template.
 *
 * Two places deliberately do more than the reference, because what it
 * would write loads but is wrong for Gemma: special ids it cannot resolve
 * (it needs tokenizer.json, which a checkpoint may lack) are resolved from
 * the token texts in tokenizer_config.json/special_tokens_map.json, then
 * from the SentencePiece trainer spec, since llama.cpp's SPM defaults
 * (bos 1, eos 2, unk 0) are Llama's; and values that are NaN or infinite,
 * or overflow F16, are refused with the tensor named instead of written.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gguf.h"
#include "safetensors.h"
#include "sp_model.h"

#define ARCH "gemma3"

struct conv {
	const char *dir;
	const struct gguf_copts *o;
	char *err;
	size_t errlen;
	cJSON *config, *text;		/* text: text_config or NULL */
	cJSON *tok_config;		/* tokenizer_config.json or NULL */
	cJSON *tok_json;		/* tokenizer.json or NULL */
	cJSON *stmap;			/* special_tokens_map.json or NULL */
	/* hyperparameters */
	int64_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_ctx;
	int64_t n_vocab, sliding_window, swa_pattern;
	double eps, rope_theta, rope_swa;
	/* vocabulary */
	struct sp_model sp;
	const char **tok;
	size_t *tok_len;
	float *score;
	int32_t *ttype;
	char **owned;			/* strings we allocated, n_vocab entries */
};

static int __attribute__((format(printf, 2, 3)))
cerr(struct conv *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err, c->errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static void __attribute__((format(printf, 3, 4)))
cvlog(struct conv *c, int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	if (c->o == NULL || c->o->log == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->o->log(c->o->arg, level, msg);
}

/* Read dir/name as JSON; NULL with *missing set when there is no file. */
static cJSON *
load_json(struct conv *c, const char *name, int required, int *bad)
{
	char path[4200];
	size_t len;
	*bad = 0;
	snprintf(path, sizeof(path), "%s/%s", c->dir, name);
	char *txt = plc_read_file(path, &len, 512u << 20);
	if (txt == NULL) {
		if (errno == ENOENT && !required)
			return NULL;
		*bad = 1;
		cerr(c, "%s: %s", path, strerror(errno));
		return NULL;
	}
	cJSON *j = cJSON_ParseWithLength(txt, len);
	if (j == NULL) {
		const char *at = cJSON_GetErrorPtr();
		*bad = 1;
		cerr(c, "%s: invalid JSON near byte %ld", path,
		    at ? (long)(at - txt) : -1L);
	}
	free(txt);
	return j;
}

/* The merged hparams: text_config's entry, else the root's. */
static cJSON *
hp(struct conv *c, const char *key)
{
	if (c->text && cJSON_HasObjectItem(c->text, key))
		return cJSON_GetObjectItemCaseSensitive(c->text, key);
	return cJSON_GetObjectItemCaseSensitive(c->config, key);
}

static int
hp_int(struct conv *c, const char *key, int64_t def, int64_t *v)
{
	cJSON *j = hp(c, key);
	if (j == NULL || cJSON_IsNull(j)) {
		*v = def;
		return 0;
	}
	if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) ||
	    j->valuedouble < 0 || j->valuedouble > 4294967295.0)
		return cerr(c, "%s/config.json: %s must be a non-negative integer", c->dir, key);
	*v = (int64_t)j->valuedouble;
	return 0;
}

static int
hp_num(struct conv *c, const char *key, double def, double *v)
{
	cJSON *j = hp(c, key);
	if (j == NULL || cJSON_IsNull(j)) {
		*v = def;
		return 0;
	}
	if (!cJSON_IsNumber(j))
		return cerr(c, "%s/config.json: %s must be a number", c->dir, key);
	*v = j->valuedouble;
	return 0;
}

/* Architecture check: only Gemma 3 text is converted natively. */
int
gguf_convert_arch(const cJSON *config, char *arch, size_t archlen)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(config, "architectures");
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(config, "model_type");
	const char *name = NULL;
	if (cJSON_IsArray(a) && cJSON_IsString(cJSON_GetArrayItem(a, 0)))
		name = cJSON_GetArrayItem(a, 0)->valuestring;
	else if (cJSON_IsString(mt) && (strcmp(mt->valuestring, "gemma3_text") == 0))
		name = "Gemma3ForCausalLM";
	else if (cJSON_IsString(mt) && strcmp(mt->valuestring, "gemma3") == 0)
		name = "Gemma3ForConditionalGeneration";
	snprintf(arch, archlen, "%s", name ? name : "(none)");
	return name && (strcmp(name, "Gemma3ForCausalLM") == 0 ||
	    strcmp(name, "Gemma3ForConditionalGeneration") == 0) ? 0 : -1;
}

static int
check_arch(struct conv *c, char *arch, size_t archlen)
{
	if (gguf_convert_arch(c->config, arch, archlen) == 0)
		return 0;
	return cerr(c, "%s/config.json: architecture %s is not supported by the native "
	    "converter (it converts Gemma3ForCausalLM and Gemma3ForConditionalGeneration); "
	    "set tool = llama.cpp and llama_cpp = PATH to run llama.cpp's "
	    "convert_hf_to_gguf.py instead", c->dir, arch);
}

static int
read_hparams(struct conv *c)
{
	cJSON *tc = cJSON_GetObjectItemCaseSensitive(c->config, "text_config");
	c->text = cJSON_IsObject(tc) ? tc : NULL;
	/* Gemma3TextConfig's defaults (HACKING.md: Gemma 3 to GGUF). */
	if (hp_int(c, "num_hidden_layers", 26, &c->n_layer) ||
	    hp_int(c, "hidden_size", 2304, &c->n_embd) ||
	    hp_int(c, "intermediate_size", 9216, &c->n_ff) ||
	    hp_int(c, "num_attention_heads", 8, &c->n_head) ||
	    hp_int(c, "num_key_value_heads", 4, &c->n_head_kv) ||
	    hp_int(c, "head_dim", 256, &c->head_dim) ||
	    hp_int(c, "max_position_embeddings", 131072, &c->n_ctx) ||
	    hp_int(c, "vocab_size", 262208, &c->n_vocab) ||
	    hp_int(c, "sliding_window", 4096, &c->sliding_window) ||
	    hp_int(c, "sliding_window_pattern", 6, &c->swa_pattern) ||
	    hp_num(c, "rms_norm_eps", 1e-6, &c->eps))
		return -1;
	/* rope_theta, or transformers 5's rope_parameters per layer kind. */
	cJSON *rp = hp(c, "rope_parameters");
	cJSON *full = cJSON_IsObject(rp) ? cJSON_GetObjectItemCaseSensitive(rp, "full_attention") : NULL;
	cJSON *slide = cJSON_IsObject(rp) ? cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention") : NULL;
	cJSON *t;
	if (full && cJSON_IsNumber(t = cJSON_GetObjectItemCaseSensitive(full, "rope_theta")))
		c->rope_theta = t->valuedouble;
	else if (hp_num(c, "rope_theta", 1000000.0, &c->rope_theta))
		return -1;
	if (slide && cJSON_IsNumber(t = cJSON_GetObjectItemCaseSensitive(slide, "rope_theta")))
		c->rope_swa = t->valuedouble;
	else if (hp_num(c, "rope_local_base_freq", 10000.0, &c->rope_swa))
		return -1;
	cJSON *sc = hp(c, "attn_logit_softcapping");
	if (sc && !cJSON_IsNull(sc))
		return cerr(c, "%s/config.json: attn_logit_softcapping is set; Gemma 3 has "
		    "none and llama.cpp's gemma3 does not implement it", c->dir);
	if (c->n_layer == 0 || c->n_embd == 0 || c->n_head == 0 || c->n_head_kv == 0 ||
	    c->head_dim == 0 || c->n_vocab == 0)
		return cerr(c, "%s/config.json: a zero among num_hidden_layers, hidden_size, "
		    "num_attention_heads, num_key_value_heads, head_dim, vocab_size", c->dir);
	return 0;
}

/* ---- vocabulary (HACKING.md: Gemma 3 to GGUF) ---- */

static int
looks_special(const char *t)
{
	size_t n = strlen(t);
	if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") ||
	    !strcmp(t, "[@BOS@]"))
		return 1;
	if (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>"))
		return 1;
	/* "<｜" and "｜>": U+FF5C is EF BD 9C. */
	if (n >= 8 && !strncmp(t, "<\xef\xbd\x9c", 4) && !strcmp(t + n - 4, "\xef\xbd\x9c>"))
		return 1;
	if (n >= 8 && !strncmp(t, "<unused", 7) && t[n - 1] == '>')
		return 1;
	return 0;
}

static int
set_token(struct conv *c, int64_t id, const char *text, float score, int32_t type)
{
	char *s = strdup(text);
	if (s == NULL)
		return cerr(c, "out of memory");
	free(c->owned[id]);
	c->owned[id] = s;
	c->tok[id] = s;
	c->tok_len[id] = strlen(s);
	c->score[id] = score;
	c->ttype[id] = type;
	return 0;
}

static int
build_vocab(struct conv *c)
{
	char path[4200];
	int64_t n = c->n_vocab;

	snprintf(path, sizeof(path), "%s/tokenizer.model", c->dir);
	if (access(path, F_OK) == -1)
		return cerr(c, "%s: no tokenizer.model; the native converter handles only "
		    "SentencePiece vocabularies (set tool = llama.cpp for a tokenizer.json-only "
		    "checkpoint)", c->dir);
	if (sp_model_load(&c->sp, path) == -1)
		return cerr(c, "%s", c->sp.err);
	c->tok = calloc((size_t)n, sizeof(*c->tok));
	c->tok_len = calloc((size_t)n, sizeof(*c->tok_len));
	c->score = calloc((size_t)n, sizeof(*c->score));
	c->ttype = calloc((size_t)n, sizeof(*c->ttype));
	c->owned = calloc((size_t)n, sizeof(*c->owned));
	if (!c->tok || !c->tok_len || !c->score || !c->ttype || !c->owned)
		return cerr(c, "out of memory for %" PRId64 " tokens", n);
	for (int64_t i = 0; i < n; i++) {
		char t[32];
		snprintf(t, sizeof(t), "[PAD%" PRId64 "]", i);
		if (set_token(c, i, t, -10000.0f, 5) == -1)
			return -1;
	}
	if ((int64_t)c->sp.n > n)
		cvlog(c, 1, "tokenizer.model has %zu pieces, vocab_size is %" PRId64
		    "; pieces from id %" PRId64 " are ignored", c->sp.n, n, n);
	for (size_t i = 0; i < c->sp.n && (int64_t)i < n; i++) {
		const struct sp_piece *p = &c->sp.pieces[i];
		int32_t ty = 1;
		switch (p->type) {
		case SP_UNKNOWN: ty = 2; break;
		case SP_CONTROL: ty = 3; break;
		case SP_UNUSED: ty = 5; break;
		case SP_BYTE: ty = 6; break;
		}
		free(c->owned[i]);
		c->owned[i] = NULL;
		c->tok[i] = p->s;
		c->tok_len[i] = p->len;
		c->score[i] = p->score;
		c->ttype[i] = ty;
	}

	int bad;
	cJSON *added = load_json(c, "added_tokens.json", 0, &bad);
	if (bad)
		return -1;
	if (added) {
		cJSON *e;
		cJSON_ArrayForEach(e, added) {
			if (!cJSON_IsNumber(e) || e->valuedouble < 0) {
				cJSON_Delete(added);
				return cerr(c, "%s/added_tokens.json: %s: id must be a non-negative "
				    "integer", c->dir, e->string);
			}
			int64_t id = (int64_t)e->valuedouble;
			if (id >= n) {
				cvlog(c, 1, "added_tokens.json: ignoring token %" PRId64 " (%s): "
				    "id out of range, vocab_size is %" PRId64, id, e->string, n);
				continue;
			}
			if (set_token(c, id, e->string, -1000.0f, 4) == -1) {
				cJSON_Delete(added);
				return -1;
			}
		}
		cJSON_Delete(added);
	}

	cJSON *dec = c->tok_config ?
	    cJSON_GetObjectItemCaseSensitive(c->tok_config, "added_tokens_decoder") : NULL;
	cJSON *e;
	if (!cJSON_IsObject(dec))
		dec = NULL;
	cJSON_ArrayForEach(e, dec) {
		char *end;
		long long id = strtoll(e->string, &end, 10);
		cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
		if (*e->string == '\0' || *end != '\0' || id < 0 || !cJSON_IsString(content))
			return cerr(c, "%s/tokenizer_config.json: added_tokens_decoder entry "
			    "\"%s\" needs an integer id and a string content", c->dir, e->string);
		if (id >= n) {
			cvlog(c, 1, "tokenizer_config.json: ignoring added token %lld (%s): id "
			    "out of range, vocab_size is %" PRId64, id, content->valuestring, n);
			continue;
		}
		const char *txt = content->valuestring;
		int special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"));
		if (special || looks_special(txt)) {
			if (set_token(c, id, txt, -1000.0f, 3) == -1)
				return -1;
		} else {
			/* User-defined text is stored with real spaces, not
			 * U+2581 (E2 96 81). */
			char *s = malloc(strlen(txt) + 1), *q = s;
			if (s == NULL)
				return cerr(c, "out of memory");
			for (const char *p = txt; *p;) {
				if (!strncmp(p, "\xe2\x96\x81", 3)) {
					*q++ = ' ';
					p += 3;
				} else
					*q++ = *p++;
			}
			*q = '\0';
			int rc = set_token(c, id, s, -1000.0f, 4);
			free(s);
			if (rc == -1)
				return -1;
		}
	}
	return 0;
}

/* ---- special tokens (gguf-py SpecialVocab, then our fallbacks) ---- */

static const struct {
	const char *typ, *key;
} special_keys[] = {
	{ "bos", "tokenizer.ggml.bos_token_id" },
	{ "eos", "tokenizer.ggml.eos_token_id" },
	{ "unk", "tokenizer.ggml.unknown_token_id" },
	{ "sep", "tokenizer.ggml.seperator_token_id" },
	{ "pad", "tokenizer.ggml.padding_token_id" },
	{ "cls", NULL },	/* no GGUF key: the reference skips it */
	{ "mask", "tokenizer.ggml.mask_token_id" },
};
#define N_SPECIAL (sizeof(special_keys) / sizeof(special_keys[0]))

/* A "<typ>_token" entry: a string, or an object with a string content. */
static const char *
token_text(cJSON *obj, const char *typ)
{
	char k[32];
	if (obj == NULL)
		return NULL;
	snprintf(k, sizeof(k), "%s_token", typ);
	cJSON *e = cJSON_GetObjectItemCaseSensitive(obj, k);
	if (cJSON_IsString(e))
		return e->valuestring;
	if (cJSON_IsObject(e)) {
		cJSON *ct = cJSON_GetObjectItemCaseSensitive(e, "content");
		if (cJSON_IsString(ct))
			return ct->valuestring;
	}
	return NULL;
}

static int
is_int(cJSON *j)
{
	return cJSON_IsNumber(j) && j->valuedouble == floor(j->valuedouble) &&
	    fabs(j->valuedouble) < 2147483648.0;
}

/* The id of a post-processor template entry's special token, or NULL. */
static const char *
tmpl_special(cJSON *entry)
{
	cJSON *st = cJSON_GetObjectItemCaseSensitive(entry, "SpecialToken");
	cJSON *id = st ? cJSON_GetObjectItemCaseSensitive(st, "id") : NULL;
	return cJSON_IsString(id) ? id->valuestring : NULL;
}

static int
str_in(const char *s, const char *a, const char *b)
{
	return s && ((a && !strcmp(s, a)) || (b && !strcmp(s, b)));
}

/* Whether tokenizer.json's post-processor puts a separator between the two
 * sequences of a pair: 1 or 0, -1 when it does not say (no tokenizer.json,
 * no template with a middle part). The reference's reading (gguf-py's
 * SpecialVocab): RobertaProcessing adds one; a TemplateProcessing pair
 * "A [x] [y] B", less the single template's leading and trailing special
 * tokens, adds one when x (with no trailing special token in the single
 * template) or y is the tokenizer_config's sep or eos token. Only plain
 * string tokens of tokenizer_config.json count, as there. */
static int
template_add_sep(struct conv *c)
{
	cJSON *pp = c->tok_json ? cJSON_GetObjectItemCaseSensitive(c->tok_json, "post_processor") : NULL;
	if (!cJSON_IsObject(pp))
		return -1;
	const char *bos = NULL, *cls = NULL, *eos = NULL, *sep = NULL;
	cJSON *tc = c->tok_config;
	const char *names[4] = { "bos_token", "cls_token", "eos_token", "sep_token" };
	const char **dst[4] = { &bos, &cls, &eos, &sep };
	for (int i = 0; i < 4 && tc; i++) {
		cJSON *v = cJSON_GetObjectItemCaseSensitive(tc, names[i]);
		if (cJSON_IsString(v) && *v->valuestring)
			*dst[i] = v->valuestring;
	}
	if (!bos && cls && tc)
		bos = cls;
	if (!eos && sep && tc)
		eos = sep;
	cJSON *procs = cJSON_GetObjectItemCaseSensitive(pp, "processors");
	int n = cJSON_IsArray(procs) ? cJSON_GetArraySize(procs) : 1;
	int add = -1;
	for (int p = 0; p < n; p++) {
		cJSON *pr = cJSON_IsArray(procs) ? cJSON_GetArrayItem(procs, p) : pp;
		cJSON *ty = cJSON_GetObjectItemCaseSensitive(pr, "type");
		if (!cJSON_IsString(ty))
			continue;
		if (!strcmp(ty->valuestring, "RobertaProcessing")) {
			add = 1;
			continue;
		}
		if (strcmp(ty->valuestring, "TemplateProcessing"))
			continue;
		cJSON *single = cJSON_GetObjectItemCaseSensitive(pr, "single");
		cJSON *pair = cJSON_GetObjectItemCaseSensitive(pr, "pair");
		int ns = cJSON_IsArray(single) ? cJSON_GetArraySize(single) : 0;
		int np = cJSON_IsArray(pair) ? cJSON_GetArraySize(pair) : 0;
		const char *first = NULL, *last = NULL;
		if (ns > 1) {
			first = tmpl_special(cJSON_GetArrayItem(single, 0));
			if (first && !tc)
				bos = first;
			else if (first && !str_in(first, bos, cls)) {
				if (!bos)
					bos = first;
				if (!cls)
					cls = first;
			}
			last = tmpl_special(cJSON_GetArrayItem(single, ns - 1));
			if (last)
				eos = last;
		}
		if (np == 0)
			continue;
		int lo = 0, hi = np;
		const char *p0 = tmpl_special(cJSON_GetArrayItem(pair, 0));
		const char *pn = tmpl_special(cJSON_GetArrayItem(pair, np - 1));
		if (first && p0 && !strcmp(p0, first))
			lo = 1;
		if (last && pn && !strcmp(pn, last))
			hi = np - 1;
		if (hi - lo < 3)
			continue;	/* no middle part: "A B" or less */
		cJSON *sa = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(pair, lo), "Sequence");
		cJSON *sb = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(pair, hi - 1), "Sequence");
		cJSON *ia = sa ? cJSON_GetObjectItemCaseSensitive(sa, "id") : NULL;
		cJSON *ib = sb ? cJSON_GetObjectItemCaseSensitive(sb, "id") : NULL;
		if (!cJSON_IsString(ia) || strcmp(ia->valuestring, "A") ||
		    !cJSON_IsString(ib) || strcmp(ib->valuestring, "B"))
			continue;
		const char *m0 = tmpl_special(cJSON_GetArrayItem(pair, lo + 1));
		add = 0;
		if (str_in(m0, sep, eos) && !last)
			add = 1;
		if (hi - lo == 4 && str_in(tmpl_special(cJSON_GetArrayItem(pair, lo + 2)), sep, eos))
			add = 1;
	}
	return add;
}

static void
resolve_specials(struct conv *c, int64_t ids[N_SPECIAL])
{
	for (size_t i = 0; i < N_SPECIAL; i++)
		ids[i] = -1;
	/* 1. tokenizer_config's texts looked up in tokenizer.json's
	 *    added_tokens (only when tokenizer.json exists). */
	cJSON *added = c->tok_json ?
	    cJSON_GetObjectItemCaseSensitive(c->tok_json, "added_tokens") : NULL;
	if (cJSON_IsArray(added) && c->tok_config)
		for (size_t i = 0; i < N_SPECIAL; i++) {
			const char *txt = token_text(c->tok_config, special_keys[i].typ);
			cJSON *a;
			if (txt == NULL)
				continue;
			cJSON_ArrayForEach(a, added) {
				cJSON *ct = cJSON_GetObjectItemCaseSensitive(a, "content");
				if (cJSON_IsString(ct) && strcmp(ct->valuestring, txt) == 0) {
					cJSON *id = cJSON_GetObjectItemCaseSensitive(a, "id");
					if (is_int(id) && id->valuedouble >= 0 &&
					    id->valuedouble < (double)c->n_vocab)
						ids[i] = (int64_t)id->valuedouble;
					break;
				}
			}
		}
	/* 2. config.json's <typ>_token_id, at the root or else in
	 *    text_config; lists (eos_token_id: [1, 106]) are ignored. */
	for (size_t i = 0; i < N_SPECIAL; i++) {
		char k[32];
		if (ids[i] >= 0)
			continue;
		snprintf(k, sizeof(k), "%s_token_id", special_keys[i].typ);
		cJSON *v = cJSON_GetObjectItemCaseSensitive(c->config, k);
		if ((v == NULL || cJSON_IsNull(v)) && c->text)
			v = cJSON_GetObjectItemCaseSensitive(c->text, k);
		if (is_int(v) && v->valuedouble >= 0 && v->valuedouble < (double)c->n_vocab)
			ids[i] = (int64_t)v->valuedouble;
	}
	/* 3. Our fallback for bos/eos/unk/pad: the token text named by
	 *    tokenizer_config.json or special_tokens_map.json, found in the
	 *    vocabulary; then the SentencePiece trainer's id. */
	for (size_t i = 0; i < N_SPECIAL; i++) {
		const char *typ = special_keys[i].typ;
		if (ids[i] >= 0 || (strcmp(typ, "bos") && strcmp(typ, "eos") &&
		    strcmp(typ, "unk") && strcmp(typ, "pad")))
			continue;
		const char *txt = token_text(c->tok_config, typ);
		if (txt == NULL)
			txt = token_text(c->stmap, typ);
		if (txt) {
			size_t tl = strlen(txt);
			for (int64_t id = 0; id < c->n_vocab; id++)
				if (c->tok_len[id] == tl && memcmp(c->tok[id], txt, tl) == 0) {
					ids[i] = id;
					cvlog(c, 2, "%s token id %" PRId64 " found by its text %s "
					    "(no tokenizer.json entry or config id for it)", typ, id, txt);
					break;
				}
		}
		if (ids[i] >= 0)
			continue;
		int sid = !strcmp(typ, "bos") ? c->sp.bos_id : !strcmp(typ, "eos") ?
		    c->sp.eos_id : !strcmp(typ, "unk") ? c->sp.unk_id : c->sp.pad_id;
		if (sid >= 0 && sid < c->n_vocab) {
			ids[i] = sid;
			cvlog(c, 2, "%s token id %d taken from tokenizer.model's trainer spec",
			    typ, sid);
		}
	}
}

/* ---- tensors ---- */

enum nkind { K_MAT, K_NORM };

struct otensor {
	char name[GGUF_NAME_MAX + 1];
	const struct st_tensor *src;
	enum nkind kind;
	int64_t ne[GGUF_MAX_DIMS];
	uint32_t n_dims;
	uint32_t type;
	int64_t rows;		/* rows of the source to write (embedding cut) */
	int order;		/* for sorting */
};

static const struct {
	const char *hf;		/* after "model.layers.N." */
	const char *gg;		/* after "blk.N." */
	enum nkind kind;
} layer_map[] = {
	{ "input_layernorm.weight", "attn_norm.weight", K_NORM },
	{ "self_attn.q_proj.weight", "attn_q.weight", K_MAT },
	{ "self_attn.k_proj.weight", "attn_k.weight", K_MAT },
	{ "self_attn.v_proj.weight", "attn_v.weight", K_MAT },
	{ "self_attn.o_proj.weight", "attn_output.weight", K_MAT },
	{ "self_attn.q_norm.weight", "attn_q_norm.weight", K_NORM },
	{ "self_attn.k_norm.weight", "attn_k_norm.weight", K_NORM },
	{ "post_attention_layernorm.weight", "post_attention_norm.weight", K_NORM },
	{ "pre_feedforward_layernorm.weight", "ffn_norm.weight", K_NORM },
	{ "post_feedforward_layernorm.weight", "post_ffw_norm.weight", K_NORM },
	{ "mlp.gate_proj.weight", "ffn_gate.weight", K_MAT },
	{ "mlp.up_proj.weight", "ffn_up.weight", K_MAT },
	{ "mlp.down_proj.weight", "ffn_down.weight", K_MAT },
};
#define N_LAYER_MAP (int)(sizeof(layer_map) / sizeof(layer_map[0]))

/* TextModel.filter_tensors: the multimodal parts are not ours. */
static int
multimodal(const char *n)
{
	static const char *const pre[] = { "mlp", "vit.", "vpm.", "siglip2.", "conformer.",
		"merger.", "resampler.", "sound_encoder.", "sound_projection.",
		"speech_embeddings.", NULL };
	static const char *const sub[] = { "visual.", "vision.", "audio.", "talker.",
		"vision_", "audio_", "token2wav.", "code2wav.", "projector.",
		"pre_mm_projector_norm", "image_newline", "view_seperator", "patch_embed",
		"patch_embedding", "patch_merger.", "patch_merge_mlp.", "model.connector.",
		NULL };
	for (int i = 0; pre[i]; i++)
		if (!strncmp(n, pre[i], strlen(pre[i])))
			return 1;
	for (int i = 0; sub[i]; i++)
		if (strstr(n, sub[i]))
			return 1;
	return 0;
}

static int
ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Map one HF name (already without "language_model."); 1 mapped, 0 skip,
 * -1 error. */
static int
map_name(struct conv *c, const char *n, struct otensor *t)
{
	if (multimodal(n) || ends_with(n, ".rotary_emb.inv_freq") ||
	    ends_with(n, ".attention.masked_bias") || ends_with(n, ".attention.bias"))
		return 0;
	if (!strcmp(n, "model.embed_tokens.weight")) {
		snprintf(t->name, sizeof(t->name), "token_embd.weight");
		t->kind = K_MAT;
		t->order = -3;
		return 1;
	}
	if (!strcmp(n, "lm_head.weight")) {
		snprintf(t->name, sizeof(t->name), "output.weight");
		t->kind = K_MAT;
		t->order = 1 << 30;
		return 1;
	}
	if (!strcmp(n, "model.norm.weight")) {
		snprintf(t->name, sizeof(t->name), "output_norm.weight");
		t->kind = K_NORM;
		t->order = (1 << 30) - 1;
		return 1;
	}
	int layer, off = 0;
	if (sscanf(n, "model.layers.%d.%n", &layer, &off) == 1 && off > 0 && layer >= 0) {
		for (int i = 0; i < N_LAYER_MAP; i++)
			if (!strcmp(n + off, layer_map[i].hf)) {
				if (layer >= c->n_layer)
					return cerr(c, "tensor %s: layer %d, but num_hidden_layers is %"
					    PRId64, n, layer, c->n_layer);
				snprintf(t->name, sizeof(t->name), "blk.%d.%s", layer, layer_map[i].gg);
				t->kind = layer_map[i].kind;
				t->order = layer * 64 + i;
				return 1;
			}
	}
	return cerr(c, "tensor %s cannot be mapped to a gemma3 GGUF name (the reference "
	    "converter stops here too)", n);
}

/* The HF shape a mapped tensor must have. */
static void
expected_shape(struct conv *c, const char *gg, int64_t *d0, int64_t *d1)
{
	const char *s = strncmp(gg, "blk.", 4) == 0 ? strchr(gg + 4, '.') + 1 : gg;
	int64_t qd = c->n_head * c->head_dim, kd = c->n_head_kv * c->head_dim;
	*d1 = -1;
	if (!strcmp(s, "token_embd.weight") || !strcmp(s, "output.weight")) {
		*d0 = -1;	/* rows checked against the vocabulary */
		*d1 = c->n_embd;
	} else if (!strcmp(s, "attn_q.weight")) {
		*d0 = qd;
		*d1 = c->n_embd;
	} else if (!strcmp(s, "attn_k.weight") || !strcmp(s, "attn_v.weight")) {
		*d0 = kd;
		*d1 = c->n_embd;
	} else if (!strcmp(s, "attn_output.weight")) {
		*d0 = c->n_embd;
		*d1 = qd;
	} else if (!strcmp(s, "ffn_gate.weight") || !strcmp(s, "ffn_up.weight")) {
		*d0 = c->n_ff;
		*d1 = c->n_embd;
	} else if (!strcmp(s, "ffn_down.weight")) {
		*d0 = c->n_embd;
		*d1 = c->n_ff;
	} else if (!strcmp(s, "attn_q_norm.weight") || !strcmp(s, "attn_k_norm.weight"))
		*d0 = c->head_dim;
	else
		*d0 = c->n_embd;
}

static int
cmp_otensor(const void *a, const void *b)
{
	const struct otensor *x = a, *y = b;
	return (x->order > y->order) - (x->order < y->order);
}

/*
 * The tensors' data. The output is cut into pieces in file order, each a
 * range of one tensor. Two workers (this thread and a helper) take the
 * pieces in turn: each reads its piece (pread, into a buffer that stays in
 * the core's cache), converts it into one of NSLOT slots (a tensor stored
 * in the outtype is read straight into its slot) and writes the slot at its
 * place (pwrite). A third thread, the hasher, hashes the file in order
 * (sha256, for the artifact) from the slots the writes read, and the
 * header and the padding between tensors read back from the file, so
 * nothing reads the 2 GB again (the read-back of the whole output cost a
 * third copy). That hash is the longest single stream of work (1.7 GB/s
 * on one core with the SHA extensions; a worker reads, converts and
 * writes about as fast), so it has a thread of its own and the two
 * workers keep it fed. A worker waits before piece k until piece k - NSLOT
 * is both hashed and written, so what is in flight stays NSLOT slots
 * (16 MB) whatever the checkpoint's size. Behind the pieces written
 * without a gap, a writeback thread (plc_wbthread) starts the disk writes
 * in windows of WB_WINDOW bytes, so the disk gets large sequential writes
 * during the run and the final fsync has little left (about 20 ms for the
 * 2 GB of tests/bench/convert-bench.sh). A tensor stored in the outtype
 * still goes through user space: copying it with copy_file_range instead
 * (and hashing it from the input) cost more, on ext4 without reflinks the
 * kernel copies through splice: 2.9 s of CPU for outtype bf16 against
 * 2.6 s, 1.3x cp + fsync against 1.07x. Mapping the input instead of
 * reading it saves a copy, but on the benchmark's machine (a VM) its page
 * faults cost more than the copy: 1.2 s of CPU to convert the 2 GB from a
 * mapping, 0.7 s through pread into a buffer the cache holds. Of
 * two errors, the one in the earlier piece is reported, so the message
 * does not depend on timing.
 */
#define CONV_WORKERS 2
#define PIECE_ELEMS ((uint64_t)1 << 17)		/* elements per converted piece */
#define SLOT_BYTES (PIECE_ELEMS * 4)		/* and bytes per piece copied */
#define NSLOT 32				/* pieces in flight */
#define WB_WINDOW ((uint64_t)32 << 20)		/* bytes per writeback */
#define HBUF ((size_t)1 << 20)			/* read-back buffer of the hasher */

struct piece {
	size_t t;			/* index in ot */
	uint64_t e0, n;			/* elements */
	uint64_t pos, len;		/* bytes of the output file */
	const uint8_t *data;		/* the output bytes, once ready */
	int refs;			/* atomic: hash and write still to come */
};

struct wshare {
	struct conv *c;
	struct st_set *set;
	struct gguf_writer *w;
	const struct otensor *ot;
	struct piece *pc;
	size_t npc;
	size_t next;			/* the next piece to take (atomic) */
	uint64_t done, total;		/* source bytes (done: atomic) */
	int stop;			/* atomic */
	uint8_t *slots;			/* NSLOT converted pieces */
	unsigned char *fin;		/* per piece: written (atomic) */
	unsigned char *ready;		/* per piece: data set (mu) */
	unsigned char *freed;		/* per piece: hashed and written (mu) */
	pthread_mutex_t mu;
	pthread_cond_t cv_ready;	/* the hasher waits for a piece */
	pthread_cond_t cv_free;		/* a worker waits for a slot */
	size_t low;			/* main thread: pieces below are written */
	uint64_t wb_from;		/* main thread: writeback started below */
	struct plc_wbthread wb;
	int hashing;			/* the hasher runs */
	struct plc_sha256 sha;		/* the hasher's, then the main thread's */
	uint64_t hashed;		/* bytes of the file hashed */
	uint8_t *hbuf;
	size_t err_at;			/* the piece of err, or SIZE_MAX */
	char err[512];
};

/* A matrix stored in its outtype is copied as it is. */
static int
stored_as_is(const struct otensor *t)
{
	const int d = t->src->dtype;
	return t->kind == K_MAT && ((t->type == GGML_F16 && d == ST_F16) ||
	    (t->type == GGML_BF16 && d == ST_BF16) || (t->type == GGML_F32 && d == ST_F32));
}

struct wbuf {
	uint8_t *ibuf;			/* the piece as read */
	float *fbuf;
};

static int __attribute__((format(printf, 3, 4)))
piece_err(struct wshare *x, size_t k, const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&x->mu);
	if (k < x->err_at) {
		x->err_at = k;
		va_start(ap, fmt);
		vsnprintf(x->err, sizeof(x->err), fmt, ap);
		va_end(ap);
	}
	__atomic_store_n(&x->stop, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&x->cv_ready);
	pthread_cond_broadcast(&x->cv_free);
	pthread_mutex_unlock(&x->mu);
	return -1;
}

static int
stopped(struct wshare *x)
{
	return __atomic_load_n(&x->stop, __ATOMIC_RELAXED);
}

/* What a conversion found that must not be written. */
enum { C_OK, C_NAN, C_INF, C_OVERFLOW, C_DTYPE };
struct cres {
	int what;
	uint64_t i;			/* the element */
	float v;			/* its value (C_OVERFLOW) */
};

/* The first NaN or infinity of the input, else the first F16 overflow. */
static void
find_special(const float *f, const uint16_t *h, uint64_t n, struct cres *r)
{
	for (uint64_t i = 0; i < n; i++)
		if (!isfinite(f[i])) {
			r->what = isnan(f[i]) ? C_NAN : C_INF;
			r->i = i;
			return;
		}
	for (uint64_t i = 0; h && i < n; i++)
		if ((h[i] & 0x7c00) == 0x7c00) {
			r->what = C_OVERFLOW;
			r->i = i;
			r->v = f[i];
			return;
		}
}

/* Convert n elements of t's source, read into b->ibuf, into dst. */
static void
convert(const struct otensor *t, uint64_t n, uint8_t *dst, struct wbuf *b, struct cres *r)
{
	const struct st_tensor *s = t->src;
	const void *in = b->ibuf;

	r->what = C_OK;
	if (t->kind == K_MAT && s->dtype == ST_BF16 && t->type == GGML_F16) {
		/* The bulk of a conversion: one pass. */
		const uint16_t *x = in;
		uint16_t *h = (uint16_t *)(void *)dst;
		if (gguf_bf16_to_fp16_row(x, h, n)) {
			for (uint64_t i = 0; i < n; i++)
				b->fbuf[i] = gguf_bf16_to_fp32(x[i]);
			find_special(b->fbuf, h, n, r);
		}
		return;
	}
	if (st_to_f32(s->dtype, in, b->fbuf, n) == -1) {
		r->what = C_DTYPE;
		return;
	}
	/* NaN and infinity have an all-ones exponent; test the bits without
	 * a branch, then find the element only if one is there. */
	uint32_t acc = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &b->fbuf[i], 4);
		acc |= (~u & 0x7f800000u) == 0;
	}
	if (acc) {
		find_special(b->fbuf, NULL, n, r);
		return;
	}
	if (t->kind == K_NORM) {
		/* +1 in the source's arithmetic: float32 for F32 and (widened)
		 * BF16, half for F16 (torch adds in half). */
		for (uint64_t i = 0; i < n; i++) {
			if (s->dtype == ST_F16)
				b->fbuf[i] = gguf_fp16_to_fp32(gguf_fp32_to_fp16(b->fbuf[i] + 1.0f));
			else
				b->fbuf[i] += 1.0f;
		}
	}
	if (t->type == GGML_F32)
		memcpy(dst, b->fbuf, n * 4);
	else if (t->type == GGML_BF16)
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h = gguf_fp32_to_bf16(b->fbuf[i]);
			memcpy(dst + 2 * i, &h, 2);
		}
	else {
		uint16_t *h = (uint16_t *)(void *)dst;
		uint32_t over = 0;
		gguf_fp32_to_fp16_row(b->fbuf, h, n);
		for (uint64_t i = 0; i < n; i++)
			over |= (~h[i] & 0x7c00u) == 0;
		if (over)
			find_special(b->fbuf, h, n, r);
	}
}

/* Piece k's hash or its write is done; after both, its slot is free. */
static void
piece_release(struct wshare *x, size_t k)
{
	struct piece *p = &x->pc[k];
	if (__atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	pthread_mutex_lock(&x->mu);
	x->freed[k] = 1;
	pthread_cond_broadcast(&x->cv_free);
	pthread_mutex_unlock(&x->mu);
}

static void
piece_ready(struct wshare *x, size_t k, const uint8_t *data)
{
	pthread_mutex_lock(&x->mu);
	x->pc[k].data = data;
	x->ready[k] = 1;
	pthread_cond_signal(&x->cv_ready);
	pthread_mutex_unlock(&x->mu);
}

static int
do_piece(struct wshare *x, size_t k, struct wbuf *b)
{
	struct piece *p = &x->pc[k];
	const struct otensor *t = &x->ot[p->t];
	const struct st_tensor *s = t->src;
	struct st_file *f = st_set_file(x->set, s);
	uint64_t sbytes = (uint64_t)st_dtype_bits(s->dtype) / 8;

	if (k >= NSLOT) {
		/* Piece k - NSLOT's slot, and no more than NSLOT pieces ahead
		 * of the hasher. */
		pthread_mutex_lock(&x->mu);
		while (!x->freed[k - NSLOT] && !stopped(x))
			pthread_cond_wait(&x->cv_free, &x->mu);
		pthread_mutex_unlock(&x->mu);
		if (stopped(x))
			return -1;
	}
	uint8_t *dst = x->slots + (k % NSLOT) * SLOT_BYTES;
	int as_is = stored_as_is(t);
	if (st_read(f, s, as_is ? dst : b->ibuf, p->e0 * sbytes, p->n * sbytes) == -1)
		return piece_err(x, k, "tensor %s: reading %s: %s", s->name, f->path,
		    strerror(errno));
	if (!as_is) {
		struct cres r;
		convert(t, p->n, dst, b, &r);
		switch (r.what) {
		case C_NAN:
		case C_INF:
			return piece_err(x, k, "tensor %s: element %" PRIu64 " is %s; refusing to "
			    "convert", s->name, p->e0 + r.i, r.what == C_NAN ? "NaN" : "infinite");
		case C_OVERFLOW:
			return piece_err(x, k, "tensor %s: element %" PRIu64 " (%g) overflows F16; "
			    "use outtype = bf16 or f32", s->name, p->e0 + r.i, (double)r.v);
		case C_DTYPE:
			return piece_err(x, k, "tensor %s: dtype %s cannot be converted", s->name,
			    st_dtype_name(s->dtype));
		}
	}
	piece_ready(x, k, dst);
	if (plc_pwrite_all(gguf_writer_fd(x->w), dst, p->len, (off_t)p->pos) == -1)
		return piece_err(x, k, "tensor %s: writing: %s", s->name, strerror(errno));
	gguf_writer_account(x->w, (int64_t)p->t, p->len);
	__atomic_store_n(&x->fin[k], 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&x->done, p->n * sbytes, __ATOMIC_RELAXED);
	piece_release(x, k);
	return 0;
}

/* Hash the output from where the hash is to end, reading it back: the
 * header, the padding between tensors and after the last. */
static int
hash_back(struct wshare *x, uint64_t end)
{
	int fd = gguf_writer_fd(x->w);
	while (x->hashed < end) {
		size_t n = end - x->hashed < HBUF ? (size_t)(end - x->hashed) : HBUF;
		if (plc_read_all(fd, x->hbuf, n, (off_t)x->hashed) == -1)
			return -1;
		plc_sha256_update(&x->sha, x->hbuf, n);
		x->hashed += n;
	}
	return 0;
}

/* The hasher: every piece in file order, from the slot it is written
 * from, with what lies between read back. */
static void *
hasher_main(void *arg)
{
	struct wshare *x = arg;
	for (size_t k = 0; k < x->npc; k++) {
		struct piece *p = &x->pc[k];
		pthread_mutex_lock(&x->mu);
		while (!x->ready[k] && !stopped(x))
			pthread_cond_wait(&x->cv_ready, &x->mu);
		pthread_mutex_unlock(&x->mu);
		if (stopped(x))
			break;
		if (hash_back(x, p->pos) == -1) {
			piece_err(x, k, "%s: reading back: %s", "output", strerror(errno));
			break;
		}
		plc_sha256_update(&x->sha, p->data, p->len);
		x->hashed = p->pos + p->len;
		piece_release(x, k);
	}
	return NULL;
}

/* Main thread: start the writeback of the file up to the end of the
 * pieces written without a gap, a window at a time. */
static void
writeback(struct wshare *x)
{
	while (x->low < x->npc && __atomic_load_n(&x->fin[x->low], __ATOMIC_ACQUIRE))
		x->low++;
	if (x->low == 0)
		return;
	const struct piece *p = &x->pc[x->low - 1];
	uint64_t end = p->pos + p->len;
	if (end >= x->wb_from + WB_WINDOW) {
		plc_wbthread_add(&x->wb, gguf_writer_fd(x->w), x->wb_from, end - x->wb_from);
		x->wb_from = end;
	}
}

/* A worker's share: pieces until none is left or one failed. The main
 * thread (main set) also reports progress and watches for cancellation. */
static void
work(struct wshare *x, struct wbuf *b, int main)
{
	const struct gguf_copts *o = x->c->o;
	while (!stopped(x)) {
		size_t k = __atomic_fetch_add(&x->next, 1, __ATOMIC_RELAXED);
		if (k >= x->npc || do_piece(x, k, b) == -1)
			break;
		if (!main)
			continue;
		writeback(x);
		if (o == NULL)
			continue;
		if (o->progress)
			o->progress(o->arg, __atomic_load_n(&x->done, __ATOMIC_RELAXED), x->total);
		if (o->cancelled && o->cancelled(o->arg))
			piece_err(x, x->npc - 1, "cancelled");
	}
}

static int
wbuf_alloc(struct wbuf *b)
{
	b->ibuf = malloc(PIECE_ELEMS * 4);
	b->fbuf = malloc(PIECE_ELEMS * sizeof(float));
	return b->ibuf && b->fbuf ? 0 : -1;
}

static void
wbuf_free(struct wbuf *b)
{
	free(b->ibuf);
	free(b->fbuf);
}

static void *
helper_main(void *arg)
{
	struct wbuf b;
	if (wbuf_alloc(&b) == 0)
		work(arg, &b, 0);	/* else the main thread does it all */
	wbuf_free(&b);
	return NULL;
}

/* sha_hex, when not NULL, gets the output file's sha256, or "" when it
 * could not be computed. */
static int
write_tensors(struct conv *c, struct st_set *set, struct gguf_writer *w,
    const struct otensor *ot, size_t n_ot, uint64_t *total, char sha_hex[65])
{
	struct wshare x;
	struct wbuf b;
	pthread_t helper, hasher;
	int have_helper = 0, rc = -1, sync_ok = 0;

	memset(&x, 0, sizeof(x));
	memset(&b, 0, sizeof(b));
	x.c = c;
	x.set = set;
	x.w = w;
	x.ot = ot;
	size_t cap = 0;
	for (size_t j = 0; j < n_ot; j++) {
		const struct st_tensor *s = ot[j].src;
		uint64_t sbytes = (uint64_t)st_dtype_bits(s->dtype) / 8;
		uint64_t dbytes = stored_as_is(&ot[j]) ? sbytes : ot[j].type == GGML_F32 ? 4 : 2;
		uint64_t nel = (uint64_t)ot[j].rows * (uint64_t)ot[j].ne[0];
		uint64_t step = stored_as_is(&ot[j]) ? SLOT_BYTES / sbytes : PIECE_ELEMS;
		uint64_t pos = gguf_writer_tensor_pos(w, (int64_t)j);
		*total += nel * sbytes;
		for (uint64_t e0 = 0; e0 < nel; e0 += step) {
			if (x.npc == cap) {
				cap = cap ? 2 * cap : 1024;
				struct piece *np = realloc(x.pc, cap * sizeof(*np));
				if (np == NULL) {
					cerr(c, "out of memory");
					goto out;
				}
				x.pc = np;
			}
			struct piece *p = &x.pc[x.npc++];
			memset(p, 0, sizeof(*p));
			p->t = j;
			p->e0 = e0;
			p->n = nel - e0 < step ? nel - e0 : step;
			p->pos = pos + e0 * dbytes;
			p->len = p->n * dbytes;
		}
	}
	x.total = *total;
	x.err_at = SIZE_MAX;
	for (size_t i = 0; i < set->nfiles; i++)
		(void)posix_fadvise(set->files[i].fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	size_t nflags = x.npc ? x.npc : 1;
	x.fin = calloc(nflags, 1);
	x.ready = calloc(nflags, 1);
	x.freed = calloc(nflags, 1);
	x.slots = malloc(NSLOT * SLOT_BYTES);
	if (!x.fin || !x.ready || !x.freed || !x.slots || wbuf_alloc(&b) == -1) {
		cerr(c, "out of memory");
		goto out;
	}
	if (pthread_mutex_init(&x.mu, NULL) != 0)
		goto nosync;
	if (pthread_cond_init(&x.cv_ready, NULL) != 0) {
		pthread_mutex_destroy(&x.mu);
		goto nosync;
	}
	if (pthread_cond_init(&x.cv_free, NULL) != 0) {
		pthread_cond_destroy(&x.cv_ready);
		pthread_mutex_destroy(&x.mu);
		goto nosync;
	}
	sync_ok = 1;
	/* Without the hasher (no memory, no thread) there is no digest, and
	 * the host reads the file. */
	if (sha_hex && (x.hbuf = malloc(HBUF)) != NULL && plc_sha256_init(&x.sha) == 0) {
		if (pthread_create(&hasher, NULL, hasher_main, &x) == 0)
			x.hashing = 1;
		else
			plc_sha256_discard(&x.sha);
	}
	for (size_t k = 0; k < x.npc; k++)
		x.pc[k].refs = x.hashing ? 2 : 1;
	plc_wbthread_start(&x.wb);	/* if not, writebacks are done inline */
	if (CONV_WORKERS > 1 && pthread_create(&helper, NULL, helper_main, &x) == 0)
		have_helper = 1;	/* else this thread does it all */
	work(&x, &b, 1);
	if (have_helper)
		pthread_join(helper, NULL);
	if (x.hashing)
		pthread_join(hasher, NULL);
	plc_wbthread_stop(&x.wb);
	if (x.hashing) {
		struct stat sb;
		if (x.err_at == SIZE_MAX && (fstat(gguf_writer_fd(w), &sb) == -1 ||
		    hash_back(&x, (uint64_t)sb.st_size) == -1))
			piece_err(&x, x.npc, "%s: reading back: %s", "output", strerror(errno));
		if (x.err_at == SIZE_MAX)
			plc_sha256_final(&x.sha, sha_hex);
		else
			plc_sha256_discard(&x.sha);
	}
	if (x.err_at != SIZE_MAX)
		cerr(c, "%s", x.err);
	else
		rc = 0;
	goto out;
nosync:
	cerr(c, "out of memory");
out:
	if (sync_ok) {
		pthread_cond_destroy(&x.cv_free);
		pthread_cond_destroy(&x.cv_ready);
		pthread_mutex_destroy(&x.mu);
	}
	wbuf_free(&b);
	free(x.hbuf);
	free(x.slots);
	free(x.freed);
	free(x.ready);
	free(x.fin);
	free(x.pc);
	return rc;
}

static int
add_kvs(struct conv *c, struct gguf_writer *w, uint32_t ftype, const char *name)
{
	int rc = 0;
	cJSON *rs;

	rc |= gguf_set_str(w, "general.architecture", ARCH);
	rc |= gguf_set_str(w, "general.type", "model");
	if (name && *name)
		rc |= gguf_set_str(w, "general.name", name);
	/* Default sampling from generation_config.json, as the reference's
	 * metadata pass writes it (llama.cpp uses these as defaults). */
	int bad;
	cJSON *gen = load_json(c, "generation_config.json", 0, &bad);
	if (bad)
		return -1;
	if (gen) {
		cJSON *e = cJSON_GetObjectItemCaseSensitive(gen, "top_k");
		if (is_int(e))
			rc |= gguf_set_i32(w, "general.sampling.top_k", (int32_t)e->valuedouble);
		static const char *const fl[][2] = { { "top_p", "general.sampling.top_p" },
			{ "min_p", "general.sampling.min_p" },
			{ "temperature", "general.sampling.temp" } };
		for (size_t i = 0; i < sizeof(fl) / sizeof(fl[0]); i++) {
			e = cJSON_GetObjectItemCaseSensitive(gen, fl[i][0]);
			if (cJSON_IsNumber(e))
				rc |= gguf_set_f32(w, fl[i][1], (float)e->valuedouble);
		}
		cJSON_Delete(gen);
	}
	rc |= gguf_set_u32(w, ARCH ".block_count", (uint32_t)c->n_layer);
	rc |= gguf_set_u32(w, ARCH ".context_length", (uint32_t)c->n_ctx);
	rc |= gguf_set_u32(w, ARCH ".embedding_length", (uint32_t)c->n_embd);
	rc |= gguf_set_u32(w, ARCH ".feed_forward_length", (uint32_t)c->n_ff);
	rc |= gguf_set_u32(w, ARCH ".attention.head_count", (uint32_t)c->n_head);
	rc |= gguf_set_u32(w, ARCH ".attention.head_count_kv", (uint32_t)c->n_head_kv);
	/* rope_scaling (or rope_parameters.full_attention): linear and yarn
	 * with a factor, and longrope, as the reference writes them. */
	rs = hp(c, "rope_scaling");
	cJSON *rp = hp(c, "rope_parameters");
	if (cJSON_IsObject(rp) && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(rp, "full_attention")))
		rs = cJSON_GetObjectItemCaseSensitive(rp, "full_attention");
	if (cJSON_IsObject(rs)) {
		cJSON *ty = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
		if (!cJSON_IsString(ty))
			ty = cJSON_GetObjectItemCaseSensitive(rs, "type");
		cJSON *fa = cJSON_GetObjectItemCaseSensitive(rs, "factor");
		const char *tys = cJSON_IsString(ty) ? ty->valuestring : "";
		if ((!strcmp(tys, "linear") || !strcmp(tys, "yarn")) && cJSON_IsNumber(fa)) {
			rc |= gguf_set_str(w, ARCH ".rope.scaling.type", tys);
			rc |= gguf_set_f32(w, ARCH ".rope.scaling.factor", (float)fa->valuedouble);
			if (!strcmp(tys, "yarn")) {
				cJSON *oc = cJSON_GetObjectItemCaseSensitive(rs,
				    "original_max_position_embeddings");
				if (!is_int(oc))
					return cerr(c, "%s/config.json: yarn rope scaling needs "
					    "original_max_position_embeddings", c->dir);
				rc |= gguf_set_u32(w, ARCH ".rope.scaling.original_context_length",
				    (uint32_t)oc->valuedouble);
			}
		} else if (!strcmp(tys, "longrope") || !strcmp(tys, "su"))
			rc |= gguf_set_str(w, ARCH ".rope.scaling.type", "longrope");
		else if (*tys && strcmp(tys, "default"))
			cvlog(c, 1, "rope type %s is not written (the reference ignores it too)", tys);
	}
	rc |= gguf_set_f32(w, ARCH ".rope.freq_base", (float)c->rope_theta);
	rc |= gguf_set_f32(w, ARCH ".rope.freq_base_swa", (float)c->rope_swa);
	rc |= gguf_set_f32(w, ARCH ".attention.layer_norm_rms_epsilon", (float)c->eps);
	rc |= gguf_set_u32(w, ARCH ".attention.key_length", (uint32_t)c->head_dim);
	rc |= gguf_set_u32(w, ARCH ".attention.value_length", (uint32_t)c->head_dim);
	rc |= gguf_set_u32(w, "general.file_type", ftype);
	if (c->swa_pattern != 1)
		rc |= gguf_set_u32(w, ARCH ".attention.sliding_window", (uint32_t)c->sliding_window);
	cJSON *fs = hp(c, "final_logit_softcapping");
	if (cJSON_IsNumber(fs) && fs->valuedouble != 0)
		rc |= gguf_set_f32(w, ARCH ".final_logit_softcapping", (float)fs->valuedouble);
	rc |= gguf_set_u32(w, "general.quantization_version", 2);
	return rc ? cerr(c, "%s", gguf_writer_error(w)) : 0;
}

static int
add_tokenizer_kvs(struct conv *c, struct gguf_writer *w, struct gguf_cstats *st)
{
	int rc = 0;
	int64_t ids[N_SPECIAL];
	int bad;

	rc |= gguf_set_str(w, "tokenizer.ggml.model", "llama");
	rc |= gguf_set_str(w, "tokenizer.ggml.pre", "default");
	rc |= gguf_set_arr_str(w, "tokenizer.ggml.tokens", c->tok, c->tok_len, (uint64_t)c->n_vocab);
	rc |= gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_FLOAT32, c->score, (uint64_t)c->n_vocab);
	rc |= gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, c->ttype, (uint64_t)c->n_vocab);
	if (rc)
		return cerr(c, "%s", gguf_writer_error(w));

	resolve_specials(c, ids);
	for (size_t i = 0; i < N_SPECIAL; i++) {
		if (special_keys[i].key == NULL || ids[i] < 0)
			continue;
		rc |= gguf_set_u32(w, special_keys[i].key, (uint32_t)ids[i]);
		if (st) {
			if (!strcmp(special_keys[i].typ, "bos")) st->bos = ids[i];
			if (!strcmp(special_keys[i].typ, "eos")) st->eos = ids[i];
		}
	}
	/* add_bos/add_eos (and add_sep) from tokenizer_config.json; Gemma's
	 * tokenizer adds BOS and not EOS when the file does not say; add_sep
	 * otherwise from tokenizer.json's post-processor, as the reference
	 * does (Gemma 3's pair template gives false). */
	static const char *const adds[] = { "bos", "eos", "sep" };
	for (int i = 0; i < 3; i++) {
		char k[64], key[64];
		snprintf(k, sizeof(k), "add_%s_token", adds[i]);
		snprintf(key, sizeof(key), "tokenizer.ggml.add_%s_token", adds[i]);
		cJSON *v = c->tok_config ? cJSON_GetObjectItemCaseSensitive(c->tok_config, k) : NULL;
		int sep;
		if (cJSON_IsBool(v))
			rc |= gguf_set_bool(w, key, cJSON_IsTrue(v));
		else if (i < 2)
			rc |= gguf_set_bool(w, key, i == 0);
		else if ((sep = template_add_sep(c)) >= 0)
			rc |= gguf_set_bool(w, key, sep);
	}

	/* The chat template: tokenizer_config.json's, else chat_template.jinja,
	 * else chat_template.json's. */
	cJSON *ct = c->tok_config ? cJSON_GetObjectItemCaseSensitive(c->tok_config,
	    "chat_template") : NULL;
	cJSON *alt = NULL;
	char *jinja = NULL;
	if (ct == NULL) {
		char path[4200];
		size_t len;
		snprintf(path, sizeof(path), "%s/chat_template.jinja", c->dir);
		jinja = plc_read_file(path, &len, 64u << 20);
		if (jinja)
			rc |= gguf_set_strn(w, "tokenizer.chat_template", jinja, len);
		else {
			alt = load_json(c, "chat_template.json", 0, &bad);
			if (bad)
				return -1;
			ct = alt ? cJSON_GetObjectItemCaseSensitive(alt, "chat_template") : NULL;
		}
	}
	if (cJSON_IsString(ct))
		rc |= gguf_set_str(w, "tokenizer.chat_template", ct->valuestring);
	else if (cJSON_IsArray(ct)) {
		const char *names[256];
		char *nbuf[256];
		int nn = 0;
		cJSON *e;
		cJSON_ArrayForEach(e, ct) {
			cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
			cJSON *tp = cJSON_GetObjectItemCaseSensitive(e, "template");
			if (!cJSON_IsString(nm) || !*nm->valuestring || !cJSON_IsString(tp))
				continue;
			if (!strcmp(nm->valuestring, "default")) {
				rc |= gguf_set_str(w, "tokenizer.chat_template", tp->valuestring);
				continue;
			}
			if (nn == 256)
				continue;
			char *s = strdup(nm->valuestring);
			if (s == NULL)
				continue;
			for (char *p = s; *p; p++)
				if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
				    (*p >= '0' && *p <= '9')))
					*p = '_';
			char key[300];
			snprintf(key, sizeof(key), "tokenizer.chat_template.%s", s);
			rc |= gguf_set_str(w, key, tp->valuestring);
			nbuf[nn] = s;
			names[nn++] = s;
		}
		if (nn)
			rc |= gguf_set_arr_str(w, "tokenizer.chat_templates", names, NULL, (uint64_t)nn);
		for (int i = 0; i < nn; i++)
			free(nbuf[i]);
	} else if (jinja == NULL)
		cvlog(c, 1, "no chat template found (tokenizer_config.json, chat_template.jinja, "
		    "chat_template.json)");
	free(jinja);
	cJSON_Delete(alt);
	rc |= gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", 0);
	return rc ? cerr(c, "%s", gguf_writer_error(w)) : 0;
}

int
gguf_convert_gemma3(const char *dir, const char *out, const struct gguf_copts *o,
    struct gguf_cstats *st, char *err, size_t errlen)
{
	struct conv c;
	struct st_set set;
	struct gguf_writer *w = NULL;
	struct otensor *ot = NULL;
	size_t n_ot = 0;
	int set_open = 0, rc = -1, bad;
	uint32_t outtype = o ? o->outtype : GGML_F16;
	char arch[128], serr[ST_ERRLEN];

	memset(&c, 0, sizeof(c));
	memset(&set, 0, sizeof(set));
	c.dir = dir;
	c.o = o;
	c.err = err;
	c.errlen = errlen;
	if (st) {
		memset(st, 0, sizeof(*st));
		st->bos = st->eos = -1;
	}
	if (outtype != GGML_F16 && outtype != GGML_BF16 && outtype != GGML_F32) {
		cerr(&c, "outtype must be f16, bf16 or f32");
		goto out;
	}
	if ((c.config = load_json(&c, "config.json", 1, &bad)) == NULL)
		goto out;
	if (check_arch(&c, arch, sizeof(arch)) == -1 || read_hparams(&c) == -1)
		goto out;
	c.tok_config = load_json(&c, "tokenizer_config.json", 0, &bad);
	if (bad)
		goto out;
	c.tok_json = load_json(&c, "tokenizer.json", 0, &bad);
	if (bad)
		goto out;
	c.stmap = load_json(&c, "special_tokens_map.json", 0, &bad);
	if (bad)
		goto out;
	if (build_vocab(&c) == -1)
		goto out;

	if (st_set_open(&set, dir, serr, sizeof(serr)) == -1) {
		cerr(&c, "%s", serr);
		goto out;
	}
	set_open = 1;
	ot = calloc(set.ntensors + 1, sizeof(*ot));
	if (ot == NULL) {
		cerr(&c, "out of memory");
		goto out;
	}
	size_t skipped = 0;
	for (size_t i = 0; i < set.ntensors; i++) {
		const struct st_tensor *s = set.tensors[i];
		char name[1024];
		/* Every "language_model." goes, wherever it is. */
		const char *p = s->name;
		size_t k = 0;
		while (*p && k < sizeof(name) - 1) {
			if (!strncmp(p, "language_model.", 15)) {
				p += 15;
				continue;
			}
			name[k++] = *p++;
		}
		name[k] = '\0';
		struct otensor t;
		memset(&t, 0, sizeof(t));
		int m = map_name(&c, name, &t);
		if (m == -1)
			goto out;
		if (m == 0) {
			skipped++;
			continue;
		}
		for (size_t j = 0; j < n_ot; j++)
			if (!strcmp(ot[j].name, t.name)) {
				cerr(&c, "tensors %s and %s both map to %s", ot[j].src->name,
				    s->name, t.name);
				goto out;
			}
		t.src = s;
		if (s->dtype != ST_F32 && s->dtype != ST_F16 && s->dtype != ST_BF16) {
			cerr(&c, "tensor %s: dtype %s; only F32, F16 and BF16 are converted",
			    s->name, st_dtype_name(s->dtype));
			goto out;
		}
		int64_t d0, d1;
		expected_shape(&c, t.name, &d0, &d1);
		int want_dims = d1 < 0 ? 1 : 2;
		if (s->ndim != want_dims || (d0 >= 0 && (int64_t)s->shape[0] != d0) ||
		    (want_dims == 2 && (int64_t)s->shape[1] != d1)) {
			char want[64];
			if (want_dims == 1)
				snprintf(want, sizeof(want), "[%" PRId64 "]", d0);
			else if (d0 < 0)
				snprintf(want, sizeof(want), "[vocab, %" PRId64 "]", d1);
			else
				snprintf(want, sizeof(want), "[%" PRId64 ", %" PRId64 "]", d0, d1);
			char have[64];
			if (s->ndim == 1)
				snprintf(have, sizeof(have), "[%" PRIu64 "]", s->shape[0]);
			else if (s->ndim == 2)
				snprintf(have, sizeof(have), "[%" PRIu64 ", %" PRIu64 "]",
				    s->shape[0], s->shape[1]);
			else
				snprintf(have, sizeof(have), "%d dimensions", s->ndim);
			cerr(&c, "tensor %s has shape %s, config.json implies %s", s->name,
			    have, want);
			goto out;
		}
		t.rows = want_dims == 2 ? (int64_t)s->shape[0] : 1;
		if (d0 < 0) {
			/* Embedding (and lm_head): cut to the vocabulary. */
			if (t.rows < c.n_vocab) {
				cerr(&c, "tensor %s has %" PRId64 " rows, fewer than the %" PRId64
				    " tokens of the vocabulary (vocab_size)", s->name, t.rows, c.n_vocab);
				goto out;
			}
			if (t.rows > c.n_vocab)
				cvlog(&c, 1, "%s: %" PRId64 " rows cut to the vocabulary's %" PRId64,
				    s->name, t.rows, c.n_vocab);
			t.rows = c.n_vocab;
		}
		if (want_dims == 2) {
			t.n_dims = 2;
			t.ne[0] = (int64_t)s->shape[1];
			t.ne[1] = t.rows;
		} else {
			t.n_dims = 1;
			t.ne[0] = (int64_t)s->shape[0];
		}
		t.ne[2] = t.ne[3] = 1;
		t.type = t.kind == K_NORM ? GGML_F32 : outtype;
		ot[n_ot++] = t;
	}
	/* Everything llama.cpp's gemma3 loader requires must be there. */
	{
		char want[GGUF_NAME_MAX + 1];
		int have_embd = 0, have_norm = 0;
		for (size_t j = 0; j < n_ot; j++) {
			have_embd |= !strcmp(ot[j].name, "token_embd.weight");
			have_norm |= !strcmp(ot[j].name, "output_norm.weight");
		}
		if (!have_embd || !have_norm) {
			cerr(&c, "%s: the checkpoint has no %s", dir, !have_embd ?
			    "model.embed_tokens.weight" : "model.norm.weight");
			goto out;
		}
		for (int64_t l = 0; l < c.n_layer; l++)
			for (int i = 0; i < N_LAYER_MAP; i++) {
				snprintf(want, sizeof(want), "blk.%" PRId64 ".%s", l, layer_map[i].gg);
				size_t j;
				for (j = 0; j < n_ot; j++)
					if (!strcmp(ot[j].name, want))
						break;
				if (j == n_ot) {
					cerr(&c, "%s: the checkpoint has no model.layers.%" PRId64 ".%s "
					    "(num_hidden_layers is %" PRId64 ")", dir, l, layer_map[i].hf,
					    c.n_layer);
					goto out;
				}
			}
	}
	qsort(ot, n_ot, sizeof(*ot), cmp_otensor);

	w = gguf_writer_new();
	if (w == NULL) {
		cerr(&c, "out of memory");
		goto out;
	}
	const char *gname = NULL;
	cJSON *nop = cJSON_GetObjectItemCaseSensitive(c.config, "_name_or_path");
	if (cJSON_IsString(nop) && *nop->valuestring) {
		gname = strrchr(nop->valuestring, '/');
		gname = gname ? gname + 1 : nop->valuestring;
	} else {
		gname = strrchr(dir, '/');
		gname = gname && gname[1] ? gname + 1 : dir;
	}
	uint32_t ftype = outtype == GGML_F16 ? LLAMA_FTYPE_MOSTLY_F16 :
	    outtype == GGML_BF16 ? LLAMA_FTYPE_MOSTLY_BF16 : LLAMA_FTYPE_ALL_F32;
	if (add_kvs(&c, w, ftype, gname) == -1 || add_tokenizer_kvs(&c, w, st) == -1)
		goto out;
	for (size_t j = 0; j < n_ot; j++)
		if (gguf_add_tensor(w, ot[j].name, ot[j].n_dims, ot[j].ne, ot[j].type) != (int64_t)j) {
			cerr(&c, "%s", gguf_writer_error(w));
			goto out;
		}
	if (gguf_writer_begin(w, out) == -1) {
		cerr(&c, "%s", gguf_writer_error(w));
		goto out;
	}
	uint64_t total = 0;
	if (write_tensors(&c, &set, w, ot, n_ot, &total, st ? st->sha256 : NULL) == -1)
		goto out;
	if (gguf_writer_commit(w) == -1) {
		cerr(&c, "%s", gguf_writer_error(w));
		goto out;
	}
	if (st) {
		st->n_tensors = n_ot;
		st->n_skipped = skipped;
		st->n_vocab = (uint64_t)c.n_vocab;
		st->n_layer = (uint64_t)c.n_layer;
		st->bytes_in = total;
		snprintf(st->arch, sizeof(st->arch), "%s", arch);
	}
	rc = 0;
out:
	gguf_writer_free(w);
	free(ot);
	if (set_open)
		st_set_close(&set);
	if (c.owned)
		for (int64_t i = 0; i < c.n_vocab; i++)
			free(c.owned[i]);
	free(c.owned);
	free(c.tok);
	free(c.tok_len);
	free(c.score);
	free(c.ttype);
	sp_model_free(&c.sp);
	cJSON_Delete(c.config);
	cJSON_Delete(c.tok_config);
	cJSON_Delete(c.tok_json);
	cJSON_Delete(c.stmap);
	return rc;
}
