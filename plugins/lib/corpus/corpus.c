/*
 * corpus.c: the training corpus as data: one JSONL line to an example, the
 * normalisation every comparison of requests goes through, the word
 * sketches and MinHash values of the near-duplicate search, the surface
 * forms of the guard check, and the target read as a routing call
 * (corpus.h; the corpus_check stage in pipeline.ini(5)).
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "score.h"

static const char *const family_names[CX_NFAM] = { "negation", "quote", "vague" };

const char *
cx_family_name(int i)
{
	return i >= 0 && i < CX_NFAM ? family_names[i] : "?";
}

static inline uint64_t
fmix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return k;
}

static inline uint32_t
fmix32(uint32_t h)
{
	h ^= h >> 16;
	h *= 0x85ebca6bU;
	h ^= h >> 13;
	h *= 0xc2b2ae35U;
	h ^= h >> 16;
	return h;
}

/* A fast non-cryptographic hash, eight bytes a step (the system prompts
 * of a large corpus are gigabytes; FNV's byte a step cost seconds). */
uint64_t
cx_hash64(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *s = p;
	uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ULL), v;

	while (n >= 8) {
		memcpy(&v, s, 8);
		h = (h ^ fmix64(v)) * 0x9fb21c651e98df25ULL;
		h ^= h >> 29;
		s += 8;
		n -= 8;
	}
	v = 0;
	memcpy(&v, s, n);
	h = (h ^ fmix64(v ^ n)) * 0x9fb21c651e98df25ULL;
	return fmix64(h);
}

size_t
cx_normalise(const char *in, size_t len, char *out, size_t outlen)
{
	size_t o = 0;
	int space = 0;

	if (outlen == 0)
		return 0;
	for (size_t i = 0; i < len && o + 1 < outlen; i++) {
		unsigned char c = (unsigned char)in[i];
		/* U+2018 and U+2019 are apostrophes too; U+201C and U+201D
		 * quotes, punctuation like '"'. */
		if (c == 0xe2 && i + 2 < len && (unsigned char)in[i + 1] == 0x80) {
			unsigned char d = (unsigned char)in[i + 2];
			if (d == 0x98 || d == 0x99) {
				i += 2;
				continue;
			}
			if (d == 0x9c || d == 0x9d) {
				i += 2;
				space = o > 0;
				continue;
			}
		}
		if (c == '\'')
			continue;
		if (c >= 0x80 || isalnum(c)) {
			if (space && o + 2 < outlen)
				out[o++] = ' ';
			space = 0;
			out[o++] = (char)(c < 0x80 ? tolower(c) : c);
		} else {
			space = o > 0;
		}
	}
	out[o] = '\0';
	return o;
}

/* Append the normalised text to a growing buffer, turns joined by
 * " \x1f " (a separator normalisation never leaves in a turn). */
static int
req_append(char **buf, size_t *len, size_t *cap, const char *text, size_t n)
{
	size_t need = *len + n + 4;
	if (need > *cap) {
		size_t c = *cap ? *cap : 256;
		while (c < need)
			c *= 2;
		char *b = realloc(*buf, c);
		if (b == NULL)
			return -1;
		*buf = b;
		*cap = c;
	}
	if (*len > 0) {
		memcpy(*buf + *len, " \x1f ", 3);
		*len += 3;
	}
	*len += cx_normalise(text, n, *buf + *len, *cap - *len);
	return 0;
}

static int
role_code(const char *r)
{
	if (strcmp(r, "system") == 0)
		return 0;
	if (strcmp(r, "user") == 0)
		return 1;
	if (strcmp(r, "assistant") == 0)
		return 2;
	return -1;
}

int
cx_parse_line(const char *line, size_t len, struct cx_example *ex)
{
	static const char *const roles[] = { "system", "user", "assistant" };
	char *rq = NULL;
	size_t rqlen = 0, rqcap = 0;

	memset(ex, 0, sizeof(*ex));
	cJSON *o = cJSON_ParseWithLength(line, len);
	if (!cJSON_IsObject(o)) {
		snprintf(ex->why, sizeof(ex->why), "not a JSON object");
		cJSON_Delete(o);
		return -1;
	}
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "key");
	if (cJSON_IsString(k) && k->valuestring[0] != '\0')
		ex->key = strdup(k->valuestring);
	else
		snprintf(ex->why, sizeof(ex->why), "no non-empty string \"key\"");
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "messages");
	int n = cJSON_IsArray(m) ? cJSON_GetArraySize(m) : 0;
	if (n < 2) {
		if (ex->why[0] == '\0')
			snprintf(ex->why, sizeof(ex->why), "\"messages\" must list at least a "
			    "prompt and a response");
		goto out;
	}
	int i = 0, prev = -1, first_turn = 1;
	uint64_t h = 0x243f6a8885a308d3ULL;
	const cJSON *e;
	cJSON_ArrayForEach(e, m) {
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(e, "role");
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
		int rc = cJSON_IsString(r) ? role_code(r->valuestring) : -1;
		if (rc < 0 || !cJSON_IsString(c)) {
			if (ex->why[0] == '\0')
				snprintf(ex->why, sizeof(ex->why), "message %d needs role "
				    "system|user|assistant and a string content", i);
			goto out;
		}
		size_t clen = strlen(c->valuestring);
		h = cx_hash64(c->valuestring, clen, h ^ (uint64_t)(rc + 1));
		if (rc == 0) {
			if (i != 0 && ex->why[0] == '\0')
				snprintf(ex->why, sizeof(ex->why), "roles out of order: a system "
				    "message at %d (only the first may be)", i);
			if (i == 0) {
				ex->has_system = 1;
				ex->system_hash = cx_hash64(c->valuestring, clen, 0);
			}
		} else {
			int want = first_turn ? 1 : (prev == 1 ? 2 : 1);
			if (rc != want && ex->why[0] == '\0')
				snprintf(ex->why, sizeof(ex->why), "roles out of order: message %d "
				    "is the %s's, the %s's was due", i, roles[rc], roles[want]);
			first_turn = 0;
			prev = rc;
			if (i == n - 1) {
				ex->target = strdup(c->valuestring);
			} else {
				if (req_append(&rq, &rqlen, &rqcap, c->valuestring, clen) == -1)
					goto out;
				if (rc == 1) {
					free(ex->user);
					ex->user = strdup(c->valuestring);
				}
			}
		}
		i++;
	}
	ex->content_hash = h;
	if (prev != 2 && ex->why[0] == '\0')
		snprintf(ex->why, sizeof(ex->why), "the last message must be the assistant's "
		    "response");
	if (ex->user == NULL && ex->why[0] == '\0')
		snprintf(ex->why, sizeof(ex->why), "no user turn before the response");
out:
	ex->request = rq ? rq : strdup("");
	if (ex->target == NULL)
		ex->target = strdup("");
	if (ex->user == NULL)
		ex->user = strdup("");
	cJSON_Delete(o);
	return 0;
}

void
cx_example_free(struct cx_example *ex)
{
	free(ex->key);
	free(ex->request);
	free(ex->user);
	free(ex->target);
	memset(ex, 0, sizeof(*ex));
}

char *
cx_case_request(const cJSON *setup, const char *user)
{
	char *rq = NULL;
	size_t len = 0, cap = 0;
	const cJSON *t;

	cJSON_ArrayForEach(t, setup) {
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(t, "content");
		if (cJSON_IsString(c) &&
		    req_append(&rq, &len, &cap, c->valuestring, strlen(c->valuestring)) == -1)
			goto fail;
	}
	if (req_append(&rq, &len, &cap, user, strlen(user)) == -1)
		goto fail;
	return rq;
fail:
	free(rq);
	return NULL;
}

/* Insert h into the sorted sketch of at most CX_SKETCH distinct values. */
static void
sketch_add(uint32_t *sk, int *n, uint32_t h)
{
	int lo = 0, hi = *n;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (sk[mid] < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < *n && sk[lo] == h)
		return;
	if (lo == CX_SKETCH)
		return;
	int last = *n < CX_SKETCH ? *n : CX_SKETCH - 1;
	memmove(sk + lo + 1, sk + lo, (size_t)(last - lo) * sizeof(*sk));
	sk[lo] = h;
	if (*n < CX_SKETCH)
		(*n)++;
}

int
cx_sketch(const char *norm, uint32_t sk[CX_SKETCH])
{
	int n = 0;
	const char *p = norm;

	while (*p) {
		while (*p == ' ')
			p++;
		const char *w = p;
		while (*p && *p != ' ')
			p++;
		if (p > w && !(p - w == 1 && *w == '\x1f'))
			sketch_add(sk, &n, (uint32_t)cx_hash64(w, (size_t)(p - w), 7));
	}
	return n;
}

double
cx_jaccard(const uint32_t *a, int na, const uint32_t *b, int nb)
{
	/* Both sets whole: exact. Otherwise the CX_SKETCH smallest of the
	 * union, and how many of those both sketches hold. */
	int limit = na < CX_SKETCH && nb < CX_SKETCH ? INT_MAX : CX_SKETCH;
	int i = 0, j = 0, taken = 0, both = 0;

	if (na == 0 && nb == 0)
		return 1.0;
	while (taken < limit && (i < na || j < nb)) {
		if (j >= nb || (i < na && a[i] < b[j]))
			i++;
		else if (i >= na || b[j] < a[i])
			j++;
		else {
			i++;
			j++;
			both++;
		}
		taken++;
	}
	return taken ? (double)both / taken : 0.0;
}

void
cx_minhash(const uint32_t *sk, int n, uint32_t mh[CX_MINHASH])
{
	for (int i = 0; i < CX_MINHASH; i++) {
		uint32_t seed = 0x9e3779b9U * (uint32_t)(i + 1), m = UINT32_MAX;
		for (int w = 0; w < n; w++) {
			uint32_t v = fmix32(sk[w] ^ seed);
			if (v < m)
				m = v;
		}
		mh[i] = m;
	}
}

int
cx_families(const char *user, int vague_words)
{
	static const char *const neg[] = { "not", "no", "never", "dont", "doesnt", "didnt",
	    "cannot", "cant", "wont", "shouldnt", "mustnt", "nothing", "without", NULL };
	size_t len = strlen(user);
	char *norm = malloc(len + 1);
	int fam = 0, words = 0, quotes = 0;

	if (norm == NULL)
		return 0;
	cx_normalise(user, len, norm, len + 1);
	for (char *p = norm; *p;) {
		while (*p == ' ')
			p++;
		char *w = p;
		while (*p && *p != ' ')
			p++;
		if (p == w)
			break;
		words++;
		for (int i = 0; neg[i]; i++)
			if ((size_t)(p - w) == strlen(neg[i]) && memcmp(w, neg[i], (size_t)(p - w)) == 0)
				fam |= CX_FAM_NEGATION;
	}
	free(norm);
	if (words > 0 && words <= vague_words)
		fam |= CX_FAM_VAGUE;
	/* Quoted or pasted content: a pair of double quotes (straight or
	 * curly), a code fence, or a line quoted with '>'. */
	for (const char *p = user; *p; p++) {
		if (*p == '"')
			quotes++;
		else if (strncmp(p, "\xe2\x80\x9c", 3) == 0)
			quotes++;
		if (strncmp(p, "```", 3) == 0 || (*p == '>' && (p == user || p[-1] == '\n')))
			quotes += 2;
	}
	if (quotes >= 2)
		fam |= CX_FAM_QUOTE;
	return fam;
}

static int
cmp_item_name(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	return strcmp(x->string ? x->string : "", y->string ? y->string : "");
}

/* The canonical hash of a JSON value, as the scoring compares values:
 * strings trimmed and case-folded, numbers by value, object keys in
 * order, arrays element by element. */
static uint64_t
canon_hash(const cJSON *v, uint64_t h, int depth)
{
	if (depth > 64)
		return cx_hash64("deep", 4, h);
	if (cJSON_IsString(v)) {
		const char *s = v->valuestring;
		size_t n = strlen(s);
		while (n > 0 && isspace((unsigned char)*s))
			s++, n--;
		while (n > 0 && isspace((unsigned char)s[n - 1]))
			n--;
		char buf[256];
		uint64_t x = cx_hash64("s", 1, h);
		for (size_t off = 0; off < n; off += sizeof(buf)) {
			size_t m = n - off < sizeof(buf) ? n - off : sizeof(buf);
			for (size_t i = 0; i < m; i++)
				buf[i] = (char)tolower((unsigned char)s[off + i]);
			x = cx_hash64(buf, m, x);
		}
		return x;
	}
	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;
		if (d == 0)
			d = 0;	/* -0 equals 0 */
		return cx_hash64(&d, sizeof(d), cx_hash64("n", 1, h));
	}
	if (cJSON_IsArray(v)) {
		const cJSON *e;
		h = cx_hash64("[", 1, h);
		cJSON_ArrayForEach(e, v)
			h = canon_hash(e, h, depth + 1);
		return cx_hash64("]", 1, h);
	}
	if (cJSON_IsObject(v)) {
		int n = cJSON_GetArraySize(v), i = 0;
		const cJSON **items = malloc(sizeof(*items) * (size_t)(n ? n : 1));
		const cJSON *e;
		if (items == NULL)
			return h;
		cJSON_ArrayForEach(e, v)
			items[i++] = e;
		qsort(items, (size_t)n, sizeof(*items), cmp_item_name);
		h = cx_hash64("{", 1, h);
		for (i = 0; i < n; i++) {
			const char *nm = items[i]->string ? items[i]->string : "";
			h = canon_hash(items[i], cx_hash64(nm, strlen(nm) + 1, h), depth + 1);
		}
		free(items);
		return cx_hash64("}", 1, h);
	}
	if (cJSON_IsBool(v))
		return cx_hash64(cJSON_IsTrue(v) ? "t" : "f", 1, h);
	return cx_hash64("z", 1, h);
}

int
cx_target(const char *text, char *cap, size_t caplen, uint64_t *canon,
    char *why, size_t whylen)
{
	const char *p = text, *end = NULL;

	while (isspace((unsigned char)*p))
		p++;
	if (*p != '{') {
		snprintf(why, whylen, "the target is not a JSON object%s",
		    strncmp(p, "```", 3) == 0 ? " (a code fence around it)" : "");
		return -1;
	}
	if (strlen(p) > SC_MAX_OUTPUT) {
		snprintf(why, whylen, "the target is longer than %d bytes", SC_MAX_OUTPUT);
		return -1;
	}
	cJSON *o = cJSON_ParseWithOpts(p, &end, 0);
	if (o == NULL) {
		snprintf(why, whylen, "the target is not valid JSON");
		return -1;
	}
	while (end && isspace((unsigned char)*end))
		end++;
	int rc = -1;
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "capability");
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "args");
	if (end && *end != '\0')
		snprintf(why, whylen, "text after the target's JSON object");
	else if (!cJSON_IsString(c) || c->valuestring[0] == '\0')
		snprintf(why, whylen, "the target has no string \"capability\"");
	else if (strlen(c->valuestring) >= SC_NAME_MAX || strlen(c->valuestring) >= caplen)
		snprintf(why, whylen, "the target's capability is longer than %d bytes",
		    SC_NAME_MAX - 1);
	else if (a != NULL && !cJSON_IsObject(a))
		snprintf(why, whylen, "the target's \"args\" is not an object");
	else {
		snprintf(cap, caplen, "%s", c->valuestring);
		uint64_t h = cx_hash64(c->valuestring, strlen(c->valuestring), 11);
		*canon = a ? canon_hash(a, h, 0) : canon_hash(NULL, h, 0);
		/* An absent args and an empty one call the same. */
		if (a != NULL && cJSON_GetArraySize(a) == 0)
			*canon = canon_hash(NULL, h, 0);
		rc = 0;
	}
	cJSON_Delete(o);
	return rc;
}
