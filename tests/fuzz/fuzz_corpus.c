/*
 * fuzz_corpus.c: the corpus_check stage's reader (plugins/lib/corpus/corpus.c)
 * on arbitrary bytes: the input as one corpus line, its target as a
 * routing call, its text normalised, sketched and compared. A parsed
 * example has a request, a user turn and a target (possibly empty), and a
 * refusal says why; normalised text holds no ASCII upper case, punctuation
 * or doubled space and no space at either end; a sketch is sorted,
 * distinct and at most CX_SKETCH long; a similarity lies in [0, 1] and is
 * 1 between a sketch and itself; a routing call's capability is non-empty.
 */
#include <ctype.h>

#include "corpus.h"
#include "score.h"
#include "fuzz.h"

/* Normalised text; a request's turns are joined by " \x1f ", so a turn
 * that normalises to nothing leaves spaces next to a separator. */
static void
check_norm(const char *s, size_t n, int turns)
{
	if (!turns && n > 0 && (s[0] == ' ' || s[n - 1] == ' '))
		abort();
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x80 && !(islower(c) || isdigit(c) || c == ' ' || c == '\x1f'))
			abort();
		if (!turns && c == ' ' && i + 1 < n && s[i + 1] == ' ')
			abort();
	}
}

static void
check_sketch(const char *norm)
{
	uint32_t sk[CX_SKETCH], mh[CX_MINHASH];
	int n = cx_sketch(norm, sk);

	if (n < 0 || n > CX_SKETCH)
		abort();
	for (int i = 1; i < n; i++)
		if (sk[i - 1] >= sk[i])
			abort();
	if (n > 0 && cx_jaccard(sk, n, sk, n) != 1.0)
		abort();
	double j = cx_jaccard(sk, n, sk, n / 2);
	if (!(j >= 0 && j <= 1))
		abort();
	cx_minhash(sk, n, mh);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cx_example ex;
	char *in = malloc(size + 1), cap[SC_NAME_MAX], why[256];
	uint64_t canon;

	if (in == NULL)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	if (cx_parse_line(in, size, &ex) == 0) {
		if (ex.request == NULL || ex.user == NULL || ex.target == NULL)
			abort();
		check_norm(ex.request, strlen(ex.request), 1);
		check_sketch(ex.request);
		(void)cx_families(ex.user, 3);
		if (cx_target(ex.target, cap, sizeof(cap), &canon, why, sizeof(why)) == 0 &&
		    cap[0] == '\0')
			abort();
	} else if (ex.why[0] == '\0') {
		abort();	/* a refusal says why */
	}
	cx_example_free(&ex);
	/* The bytes themselves as text to normalise and as a target. */
	char *norm = malloc(size + 1);
	if (norm != NULL) {
		size_t n = cx_normalise(in, size, norm, size + 1);
		if (n != strlen(norm))
			abort();
		check_norm(norm, n, 0);
		check_sketch(norm);
		free(norm);
	}
	if (cx_target(in, cap, sizeof(cap), &canon, why, sizeof(why)) == 0 && cap[0] == '\0')
		abort();
	(void)cx_families(in, 3);
	free(in);
	return 0;
}
