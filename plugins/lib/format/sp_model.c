/*
 * sp_model.c: read SentencePiece's tokenizer.model (see sp_model.h).
 *
 * Protobuf wire format: each field is a varint key (field number << 3 |
 * wire type) followed by a varint (0), 8 bytes (1), a varint length and
 * that many bytes (2) or 4 bytes (5). Groups (3, 4) are not used by
 * sentencepiece_model.proto and are refused. Unknown fields are skipped,
 * as protobuf does.
 *
 *   ModelProto      1: repeated SentencePiece pieces, 2: TrainerSpec,
 *                   3: NormalizerSpec
 *   SentencePiece   1: string piece, 2: float score, 3: Type type
 *   TrainerSpec     3: model_type, 35: byte_fallback, 40: unk_id,
 *                   41: bos_id, 42: eos_id, 43: pad_id
 *   NormalizerSpec  3: add_dummy_prefix
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plio.h"
#include "sp_model.h"

struct pb {
	const uint8_t *p, *end, *base;
	struct sp_model *m;
	const char *label;
};

static int __attribute__((format(printf, 2, 3)))
pberr(struct pb *b, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(b->m->err, sizeof(b->m->err), "%s: byte %zu: %s", b->label,
	    (size_t)(b->p - b->base), msg);
	return -1;
}

static int
varint(struct pb *b, uint64_t *v)
{
	uint64_t r = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (b->p >= b->end)
			return pberr(b, "truncated varint");
		uint8_t c = *b->p++;
		r |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = r;
			return 0;
		}
	}
	return pberr(b, "varint longer than 10 bytes");
}

/* Read a key; val gets a scalar payload. For wire type 2, *sub is the
 * payload's start and *len its length. */
static int
field(struct pb *b, uint32_t *num, int *wt, uint64_t *val, const uint8_t **sub,
    uint64_t *len)
{
	uint64_t key;
	if (varint(b, &key) == -1)
		return -1;
	*num = (uint32_t)(key >> 3);
	*wt = (int)(key & 7);
	if (*num == 0)
		return pberr(b, "field number 0");
	switch (*wt) {
	case 0:
		return varint(b, val);
	case 1:
		if (b->end - b->p < 8)
			return pberr(b, "truncated 64-bit field %u", *num);
		memcpy(val, b->p, 8);
		b->p += 8;
		return 0;
	case 5: {
		uint32_t v;
		if (b->end - b->p < 4)
			return pberr(b, "truncated 32-bit field %u", *num);
		memcpy(&v, b->p, 4);
		*val = v;
		b->p += 4;
		return 0;
	}
	case 2:
		if (varint(b, len) == -1)
			return -1;
		if (*len > (uint64_t)(b->end - b->p))
			return pberr(b, "field %u length %llu runs past the end", *num,
			    (unsigned long long)*len);
		*sub = b->p;
		b->p += *len;
		return 0;
	default:
		return pberr(b, "unsupported wire type %d in field %u", *wt, *num);
	}
}

static int
parse_piece(struct pb *outer, const uint8_t *p, uint64_t len, struct sp_piece *pc,
    size_t idx)
{
	struct pb b = { p, p + len, outer->base, outer->m, outer->label };
	pc->s = "";
	pc->len = 0;
	pc->score = 0.0f;
	pc->type = SP_NORMAL;
	int have_piece = 0;
	while (b.p < b.end) {
		uint32_t num;
		int wt;
		uint64_t v = 0, l = 0;
		const uint8_t *sub = NULL;
		if (field(&b, &num, &wt, &v, &sub, &l) == -1)
			return -1;
		if (num == 1 && wt == 2) {
			pc->s = (const char *)sub;
			pc->len = (size_t)l;
			have_piece = 1;
		} else if (num == 2 && wt == 5) {
			uint32_t u = (uint32_t)v;
			memcpy(&pc->score, &u, 4);
		} else if (num == 3 && wt == 0) {
			if (v < 1 || v > 6)
				return pberr(&b, "piece %zu has unknown type %llu", idx,
				    (unsigned long long)v);
			pc->type = (int)v;
		} else if (num <= 3)
			return pberr(&b, "piece %zu: field %u has wire type %d", idx, num, wt);
	}
	if (!have_piece)
		return pberr(&b, "piece %zu has no text", idx);
	return 0;
}

static int
parse_trainer(struct pb *outer, const uint8_t *p, uint64_t len)
{
	struct pb b = { p, p + len, outer->base, outer->m, outer->label };
	struct sp_model *m = outer->m;
	while (b.p < b.end) {
		uint32_t num;
		int wt;
		uint64_t v = 0, l = 0;
		const uint8_t *sub = NULL;
		if (field(&b, &num, &wt, &v, &sub, &l) == -1)
			return -1;
		if (wt != 0)
			continue;
		/* int32 fields are sign-extended to 64 bits on the wire. */
		int iv = (int)(int64_t)v;
		switch (num) {
		case 3: m->model_type = iv; break;
		case 35: m->byte_fallback = v != 0; break;
		case 40: m->unk_id = iv; break;
		case 41: m->bos_id = iv; break;
		case 42: m->eos_id = iv; break;
		case 43: m->pad_id = iv; break;
		}
	}
	return 0;
}

static int
parse_normalizer(struct pb *outer, const uint8_t *p, uint64_t len)
{
	struct pb b = { p, p + len, outer->base, outer->m, outer->label };
	while (b.p < b.end) {
		uint32_t num;
		int wt;
		uint64_t v = 0, l = 0;
		const uint8_t *sub = NULL;
		if (field(&b, &num, &wt, &v, &sub, &l) == -1)
			return -1;
		if (num == 3 && wt == 0)
			outer->m->add_dummy_prefix = v != 0;
	}
	return 0;
}

static int parse(struct sp_model *m, uint8_t *buf, size_t len, const char *label);

/* On failure the pieces are freed and buf stays the caller's. */
int
sp_model_parse(struct sp_model *m, uint8_t *buf, size_t len, const char *label)
{
	if (parse(m, buf, len, label) == 0)
		return 0;
	free(m->pieces);
	m->pieces = NULL;
	m->n = 0;
	m->buf = NULL;
	return -1;
}

static int
parse(struct sp_model *m, uint8_t *buf, size_t len, const char *label)
{
	struct pb b = { buf, buf + len, buf, m, label };
	size_t cap = 0;

	memset(m, 0, sizeof(*m));
	m->buf = buf;
	m->len = len;
	m->unk_id = 0;
	m->bos_id = 1;
	m->eos_id = 2;
	m->pad_id = -1;
	m->model_type = 1;
	m->add_dummy_prefix = 1;
	while (b.p < b.end) {
		uint32_t num;
		int wt;
		uint64_t v = 0, l = 0;
		const uint8_t *sub = NULL;
		if (field(&b, &num, &wt, &v, &sub, &l) == -1)
			return -1;
		if (num == 1 && wt == 2) {
			if (m->n == cap) {
				cap = cap ? cap * 2 : 1024;
				struct sp_piece *np = realloc(m->pieces, cap * sizeof(*np));
				if (np == NULL)
					return pberr(&b, "out of memory");
				m->pieces = np;
			}
			if (parse_piece(&b, sub, l, &m->pieces[m->n], m->n) == -1)
				return -1;
			m->n++;
		} else if (num == 2 && wt == 2) {
			if (parse_trainer(&b, sub, l) == -1)
				return -1;
		} else if (num == 3 && wt == 2) {
			if (parse_normalizer(&b, sub, l) == -1)
				return -1;
		} else if (num <= 3)
			return pberr(&b, "field %u has wire type %d", num, wt);
	}
	if (m->n == 0)
		return pberr(&b, "no pieces: not a SentencePiece model");
	return 0;
}

int
sp_model_load(struct sp_model *m, const char *path)
{
	size_t len;
	uint8_t *buf = (uint8_t *)plc_read_file(path, &len, 1u << 30);
	if (buf == NULL) {
		memset(m, 0, sizeof(*m));
		snprintf(m->err, sizeof(m->err), "%s: %s", path, strerror(errno));
		return -1;
	}
	if (sp_model_parse(m, buf, len, path) == -1) {
		free(buf);
		return -1;
	}
	return 0;
}

void
sp_model_free(struct sp_model *m)
{
	free(m->pieces);
	free(m->buf);
	m->pieces = NULL;
	m->buf = NULL;
	m->n = 0;
}
