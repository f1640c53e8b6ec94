/*
 * corpus.h: the training corpus as data (the corpus_check stage,
 * pipeline.ini(5)): one JSONL line read into an example, the request
 * normalised for comparison, its words sketched for similarity, and the
 * target read as the routing call the bake scores (pipeline-cases(5)).
 *
 * Nothing here talks to the host; the stage, its fuzz target and its tests
 * share it. An example keeps nothing of the system prompt but its hash:
 * the memory of a check grows with the number of examples, not with the
 * prompts' size.
 */
#ifndef PL_CORPUS_H
#define PL_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* Word hashes kept per request (a bottom-k sketch): exact Jaccard for
 * requests of at most this many distinct words, an estimate beyond. */
#define CX_SKETCH	32
/* MinHash values per request for the LSH buckets: CX_BANDS bands of
 * CX_ROWS values each. */
#define CX_BANDS	8
#define CX_ROWS		2
#define CX_MINHASH	(CX_BANDS * CX_ROWS)

/* Surface forms of a request (the reference's guard definition:
 * negations, quoted or pasted content, vague phrasing). */
#define CX_FAM_NEGATION	0x1
#define CX_FAM_QUOTE	0x2
#define CX_FAM_VAGUE	0x4
#define CX_NFAM		3
const char	*cx_family_name(int bit_index);

/* One example. Strings are malloc'd; cx_example_free() frees them. */
struct cx_example {
	char *key;		/* NULL when the line has none */
	int has_system;		/* the first message is the system prompt */
	uint64_t system_hash;	/* of its content (0 without one) */
	char *request;		/* the turns between the system prompt and the
				   target, normalised, joined by " \x1f " */
	char *user;		/* the last user turn, raw (surface forms) */
	char *target;		/* the last message's content, raw */
	uint64_t content_hash;	/* of every message's role and content */
	char why[192];		/* the first structure problem, "" when none */
};

/* Parse one corpus line. Returns 0 when it is a JSON object (why then
 * names a structure problem, if any: no key, messages missing, a role or
 * content of the wrong kind, roles out of order, a last message that is
 * not the assistant's), -1 when it is not (why says so). */
int	cx_parse_line(const char *line, size_t len, struct cx_example *ex);
void	cx_example_free(struct cx_example *ex);

/* The request a bake case asks (its setup turns and user turn), in the
 * form cx_parse_line() gives an example's; malloc'd. */
char	*cx_case_request(const cJSON *setup, const char *user);

/* Normalise text for comparison: ASCII letters lower-cased, apostrophes
 * dropped (don't -> dont), every other ASCII punctuation, white space and
 * control character a single space, no space at either end; bytes above
 * ASCII kept. Writes at most outlen - 1 bytes and a NUL; returns the
 * length written. */
size_t	cx_normalise(const char *in, size_t len, char *out, size_t outlen);
uint64_t cx_hash64(const void *p, size_t n, uint64_t seed);

/* The sketch of a normalised request: the CX_SKETCH smallest distinct
 * word hashes, sorted; returns how many. */
int	cx_sketch(const char *norm, uint32_t sk[CX_SKETCH]);
/* Jaccard similarity of two sketches' word sets (exact when both hold
 * all their words, else Broder's bottom-k estimate), in [0, 1]. */
double	cx_jaccard(const uint32_t *a, int na, const uint32_t *b, int nb);
/* MinHash values of a sketch's words, for the LSH bands. */
void	cx_minhash(const uint32_t *sk, int n, uint32_t mh[CX_MINHASH]);
/* The surface forms of a request: CX_FAM_* bits from the raw user turn
 * and its normalised words (vague: at most vague_words words). */
int	cx_families(const char *user_raw, int vague_words);

/* Read a target as the routing call the bake scores: one JSON object
 * (no fence, no text around it) with a string "capability" and, if
 * present, an object "args". Returns 0 and the capability, or -1 with
 * why. canon receives a hash of the call in a canonical form (object keys
 * sorted, strings trimmed and case-folded as the scoring compares them). */
int	cx_target(const char *text, char *cap, size_t caplen, uint64_t *canon,
	    char *why, size_t whylen);

#endif
