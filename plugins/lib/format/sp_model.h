/*
 * sp_model.h: the parts of a SentencePiece tokenizer.model (a protobuf
 * ModelProto) that a GGUF converter needs: every piece with its score and
 * type, and the trainer's special ids. A minimal protobuf reader; every
 * length is checked against the buffer before it is used.
 */
#ifndef PLC_SP_MODEL_H
#define PLC_SP_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* ModelProto.SentencePiece.Type */
enum sp_type {
	SP_NORMAL = 1, SP_UNKNOWN = 2, SP_CONTROL = 3, SP_USER_DEFINED = 4,
	SP_UNUSED = 5, SP_BYTE = 6
};

struct sp_piece {
	const char *s;		/* into the model's buffer; not NUL-terminated */
	size_t len;
	float score;
	int type;		/* enum sp_type */
};

struct sp_model {
	uint8_t *buf;
	size_t len;
	struct sp_piece *pieces;
	size_t n;
	/* TrainerSpec ids (defaults 0, 1, 2, -1 as in sentencepiece). */
	int unk_id, bos_id, eos_id, pad_id;
	int model_type;		/* TrainerSpec.model_type: 1 unigram, 2 BPE, ... */
	int byte_fallback;
	int add_dummy_prefix;	/* NormalizerSpec; default 1 */
	char err[512];
};

/* Load and validate; on failure m->err says why (file, byte offset). */
int	sp_model_load(struct sp_model *m, const char *path);
/* Parse a buffer the model takes over when it succeeds (free()d by
 * sp_model_free); on failure it stays the caller's. */
int	sp_model_parse(struct sp_model *m, uint8_t *buf, size_t len, const char *label);
void	sp_model_free(struct sp_model *m);

#endif
