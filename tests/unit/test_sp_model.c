/*
 * test_sp_model.c: the SentencePiece model reader (sp_model.c) on a
 * hand-built ModelProto: pieces with scores and types (the default type
 * included), the trainer's special ids (a negative one too), the
 * normalizer's add_dummy_prefix, unknown fields skipped; then every
 * truncation and a set of lying lengths and bad wire types refused
 * without reading out of bounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_model.h"
#include "runner.h"

struct buf {
	unsigned char b[4096];
	size_t n;
};

static void
put(struct buf *b, const void *p, size_t n)
{
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void
varint(struct buf *b, unsigned long long v)
{
	do {
		unsigned char c = v & 0x7f;
		v >>= 7;
		if (v)
			c |= 0x80;
		put(b, &c, 1);
	} while (v);
}

static void
key(struct buf *b, unsigned field, unsigned wt)
{
	varint(b, (unsigned long long)field << 3 | wt);
}

static void
lendelim(struct buf *b, unsigned field, const struct buf *sub)
{
	key(b, field, 2);
	varint(b, sub->n);
	put(b, sub->b, sub->n);
}

static void
piece(struct buf *m, const char *s, float score, int type)
{
	struct buf p = { .n = 0 };
	key(&p, 1, 2);
	varint(&p, strlen(s));
	put(&p, s, strlen(s));
	key(&p, 2, 5);
	put(&p, &score, 4);
	if (type) {
		key(&p, 3, 0);
		varint(&p, (unsigned)type);
	}
	lendelim(m, 1, &p);
}

static void
build(struct buf *m)
{
	struct buf t = { .n = 0 }, nz = { .n = 0 };
	m->n = 0;
	piece(m, "<pad>", 0.0f, 3);
	piece(m, "<unk>", 0.0f, 2);
	piece(m, "\xe2\x96\x81the", -1.5f, 0);	/* NORMAL by default */
	piece(m, "<0x0A>", 0.0f, 6);
	piece(m, "<start_of_turn>", 0.0f, 4);
	/* TrainerSpec: model_type 2, byte_fallback, unk 1, bos 5, eos 6,
	 * pad -1 (int32 sign-extended to 10 bytes), an unknown string. */
	key(&t, 3, 0); varint(&t, 2);
	key(&t, 35, 0); varint(&t, 1);
	key(&t, 40, 0); varint(&t, 1);
	key(&t, 41, 0); varint(&t, 5);
	key(&t, 42, 0); varint(&t, 6);
	key(&t, 43, 0); varint(&t, 0xffffffffffffffffull);
	key(&t, 1, 2); varint(&t, 3); put(&t, "abc", 3);
	lendelim(m, 2, &t);
	key(&nz, 3, 0); varint(&nz, 0);
	key(&nz, 1, 2); varint(&nz, 8); put(&nz, "identity", 8);
	lendelim(m, 3, &nz);
	/* An unknown top-level field (fixed64), skipped. */
	key(m, 9, 1);
	put(m, "12345678", 8);
}

static int
parse_copy(const unsigned char *p, size_t n, struct sp_model *m)
{
	unsigned char *c = malloc(n ? n : 1);	/* exact size, for ASan */
	memcpy(c, p, n);
	int rc = sp_model_parse(m, c, n, "test.model");
	if (rc == -1)
		free(c);	/* not taken over on failure */
	return rc;
}

/* A model of five pieces, read whole. */
static void
case_parse(void)
{
	struct buf m;
	struct sp_model sp;

	build(&m);
	CHECK(parse_copy(m.b, m.n, &sp) == 0);
	CHECK(sp.n == 5);
	if (sp.n == 5) {
		CHECK(sp.pieces[0].len == 5 && memcmp(sp.pieces[0].s, "<pad>", 5) == 0);
		CHECK(sp.pieces[0].type == SP_CONTROL && sp.pieces[1].type == SP_UNKNOWN);
		CHECK(sp.pieces[2].type == SP_NORMAL && sp.pieces[2].score == -1.5f);
		CHECK(sp.pieces[3].type == SP_BYTE && sp.pieces[4].type == SP_USER_DEFINED);
	}
	CHECK(sp.model_type == 2 && sp.byte_fallback == 1);
	CHECK(sp.unk_id == 1 && sp.bos_id == 5 && sp.eos_id == 6 && sp.pad_id == -1);
	CHECK(sp.add_dummy_prefix == 0);
	sp_model_free(&sp);
}

static void
case_truncations(void)
{
	struct buf m;
	struct sp_model sp;

	build(&m);
	/* Every truncation either parses (a cut between fields leaves a
	 * shorter valid message) or fails with a message; none crashes. */
	int refused = 0;
	for (size_t n = 0; n < m.n; n++) {
		if (parse_copy(m.b, n, &sp) == 0)
			sp_model_free(&sp);
		else {
			refused++;
			if (strncmp(sp.err, "test.model: ", 12) != 0) {
				fprintf(stderr, "truncation %zu: message \"%s\"\n", n, sp.err);
				check_failures++;
			}
		}
	}
	CHECK(refused > (int)m.n / 2);
}

/* Malformed models, each refused with what is wrong. */
static void
case_malformed(void)
{
	struct buf m;
	struct sp_model sp;

	build(&m);
	/* A piece length that lies. */
	unsigned char bad[4096];
	memcpy(bad, m.b, m.n);
	bad[1] = 0xff;	/* the first piece's length becomes 16383 */
	bad[2] = 0x7f;
	CHECK(parse_copy(bad, m.n, &sp) == -1 && strstr(sp.err, "runs past the end"));
	/* A group wire type. */
	memcpy(bad, m.b, m.n);
	bad[0] = (1 << 3) | 3;
	CHECK(parse_copy(bad, m.n, &sp) == -1 && strstr(sp.err, "wire type 3"));
	/* A piece of unknown type. */
	struct buf p = { .n = 0 };
	piece(&p, "x", 0.0f, 9);
	CHECK(parse_copy(p.b, p.n, &sp) == -1 && strstr(sp.err, "unknown type 9"));
	/* No pieces at all. */
	CHECK(parse_copy((const unsigned char *)"", 0, &sp) == -1 && strstr(sp.err, "no pieces"));
	/* An overlong varint. */
	memset(bad, 0xff, 16);
	CHECK(parse_copy(bad, 16, &sp) == -1 && strstr(sp.err, "varint"));
}

static const struct unit_case cases[] = {
	UNIT_CASE(parse),
	UNIT_CASE(truncations),
	UNIT_CASE(malformed),
	UNIT_END
};

int
main(int argc, char **argv)
{
	return unit_main(argc, argv, cases);
}
