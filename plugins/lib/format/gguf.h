/*
 * gguf.h: GGUF v3 files (HACKING.md: GGUF v3): a reader
 * that validates everything it reads before anyone looks at a value, and a
 * streaming writer whose output appears under its final name only when
 * whole. Both follow llama.cpp's ggml/src/gguf.cpp, the loader that has to
 * accept what we write.
 *
 * Errors: functions return 0 or -1 and leave a message in the object's
 * err[] buffer (the reader's names the file and the byte offset, key or
 * tensor). Nothing here logs.
 */
#ifndef PLC_GGUF_H
#define PLC_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "plio.h"

#define GGUF_MAGIC		0x46554747u	/* "GGUF" read as a LE u32 */
#define GGUF_VERSION		3
#define GGUF_DEFAULT_ALIGNMENT	32
#define GGUF_MAX_DIMS		4
#define GGUF_NAME_MAX		63	/* bytes of a tensor name (GGML_MAX_NAME - 1) */
#define GGUF_STRING_MAX		(1ull << 30)	/* the C loader's limit */

/* KV value types. */
enum gguf_vtype {
	GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3,
	GGUF_UINT32 = 4, GGUF_INT32 = 5, GGUF_FLOAT32 = 6, GGUF_BOOL = 7,
	GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_UINT64 = 10, GGUF_INT64 = 11,
	GGUF_FLOAT64 = 12,
	GGUF_VTYPE_COUNT
};

/* The ggml tensor types the stages produce; others are known by size only
 * (gguf_type_info). */
enum {
	GGML_F32 = 0, GGML_F16 = 1, GGML_Q8_0 = 8, GGML_BF16 = 30,
	GGML_TYPE_COUNT = 43
};

/* llama_ftype values for general.file_type. */
enum {
	LLAMA_FTYPE_ALL_F32 = 0, LLAMA_FTYPE_MOSTLY_F16 = 1,
	LLAMA_FTYPE_MOSTLY_Q8_0 = 7, LLAMA_FTYPE_MOSTLY_BF16 = 32
};

#define QK8_0 32
#define Q8_0_BLOCK 34	/* fp16 scale + 32 int8 */

/* Name, block size (elements) and block bytes of a ggml type id; 0 for an
 * id that is out of range or was removed from the format. */
const char *gguf_type_name(uint32_t type);
int	gguf_type_info(uint32_t type, uint32_t *blck, uint32_t *size);
/* A type name ("F16", "q8_0") to its id; -1 when unknown. */
int	gguf_type_from_name(const char *name);
const char *gguf_vtype_name(uint32_t vtype);
/* Payload bytes of one value of a fixed-size type; 0 for STRING/ARRAY. */
size_t	gguf_vtype_size(uint32_t vtype);

/* One key/value pair; the payload points into the reader's copy of the
 * header (gguf_open) or into the caller's buffer (gguf_parse). */
struct gguf_kv {
	char *key;			/* NUL-terminated copy */
	uint32_t type;			/* enum gguf_vtype */
	uint32_t arr_type;		/* element type when type is ARRAY */
	uint64_t n;			/* element count (1 unless ARRAY) */
	const uint8_t *val;		/* raw payload (after the type; for an
					   array, after the element type and count) */
	size_t val_len;
	uint64_t *str_off;		/* STRING arrays: offset of each element's
					   length prefix within val, malloc'd */
	uint64_t file_off;		/* where the key starts in the file */
};

struct gguf_tensor {
	char name[GGUF_NAME_MAX + 1];
	uint32_t n_dims;
	int64_t ne[GGUF_MAX_DIMS];	/* unused trailing dims are 1 */
	uint32_t type;
	uint64_t offset;		/* relative to the data section */
	uint64_t nbytes;
	const uint8_t *data;		/* in the mapped file: read it under
					   plc_guard_begin (plio.h) */
	uint64_t info_off;		/* where its info record starts */
};

struct gguf {
	char path[4096];		/* for messages; "<buffer>" when parsed
					   from memory */
	const uint8_t *base;		/* the whole file */
	size_t size;
	int mapped;			/* base is an mmap we unmap */
	uint8_t *hdr;			/* gguf_open: the header's bytes, copied
					   (the KVs point here) */
	uint32_t version;
	uint64_t n_kv, n_tensors;
	struct gguf_kv *kv;
	struct gguf_tensor *t;
	uint32_t alignment;
	uint64_t data_off;		/* absolute start of the data section */
	uint64_t data_size;		/* sum of the padded tensor sizes */
	char err[512];
};

/* Map and validate a file. On failure the message is in g->err and the
 * struct holds nothing to free (gguf_close is still safe). The header is
 * read under the SIGBUS guard and kept in memory, so that the KVs stay
 * readable when the file shrinks later; only tensor data is read from the
 * mapping. A file that shrinks while it is parsed fails with
 * PLC_MAP_CHANGED. */
int	gguf_open(struct gguf *g, const char *path);
/* Validate a buffer the caller owns (kept; not copied). */
int	gguf_parse(struct gguf *g, const void *buf, size_t len, const char *name);
void	gguf_close(struct gguf *g);

/* Lookups: index, or -1. */
int64_t	gguf_find_kv(const struct gguf *g, const char *key);
int64_t	gguf_find_tensor(const struct gguf *g, const char *name);
/* Typed reads; 0 on success, -1 (with g->err set) when the key is absent
 * or of another type. get_uint/get_int accept any integer type whose value
 * fits; get_float accepts FLOAT32/FLOAT64. */
int	gguf_get_uint(struct gguf *g, const char *key, uint64_t *v);
int	gguf_get_int(struct gguf *g, const char *key, int64_t *v);
int	gguf_get_float(struct gguf *g, const char *key, double *v);
int	gguf_get_bool(struct gguf *g, const char *key, int *v);
/* STRING value: pointer into the file (not NUL-terminated) and length. */
int	gguf_get_str(struct gguf *g, const char *key, const char **s, size_t *len);
/* Element i of an array KV; the scalar accessors convert like the above. */
int	gguf_arr_str(const struct gguf_kv *kv, uint64_t i, const char **s, size_t *len);
double	gguf_arr_num(const struct gguf_kv *kv, uint64_t i);
/* A scalar payload as a number (integers, floats, bool). */
double	gguf_val_num(uint32_t type, const uint8_t *p);
/* Number of dims ignoring trailing 1s, at least 1 (ggml_n_dims). */
int	gguf_tensor_ndims(const struct gguf_tensor *t);
uint64_t gguf_tensor_nelem(const struct gguf_tensor *t);

/*
 * The writer. Build the header in memory (KVs, tensor infos), then
 * gguf_writer_begin() creates the temporary file, writes the header and
 * sizes the file; tensor bytes then go in with gguf_writer_write()
 * (sequential per tensor) or gguf_writer_pwrite() (any order, any thread);
 * padding is left as the zeros the sized file already holds.
 * gguf_writer_commit() checks every tensor is complete, fsyncs and renames.
 */
struct gguf_writer;

struct gguf_writer *gguf_writer_new(void);
void	gguf_writer_free(struct gguf_writer *w);	/* aborts if not committed */
const char *gguf_writer_error(const struct gguf_writer *w);

/* Setting a key that exists removes the old entry and appends the new one,
 * as llama.cpp's gguf_set_* do. */
int	gguf_set_u32(struct gguf_writer *w, const char *key, uint32_t v);
int	gguf_set_i32(struct gguf_writer *w, const char *key, int32_t v);
int	gguf_set_u64(struct gguf_writer *w, const char *key, uint64_t v);
int	gguf_set_f32(struct gguf_writer *w, const char *key, float v);
int	gguf_set_bool(struct gguf_writer *w, const char *key, int v);
int	gguf_set_str(struct gguf_writer *w, const char *key, const char *s);
int	gguf_set_strn(struct gguf_writer *w, const char *key, const char *s, size_t len);
/* Array of fixed-size elements (elements already little-endian). */
int	gguf_set_arr(struct gguf_writer *w, const char *key, uint32_t elem_type,
	    const void *elems, uint64_t n);
/* Array of strings; lens may be NULL for NUL-terminated strings. */
int	gguf_set_arr_str(struct gguf_writer *w, const char *key,
	    const char *const *strs, const size_t *lens, uint64_t n);
/* Copy KV number i of a reader verbatim. */
int	gguf_copy_kv(struct gguf_writer *w, const struct gguf *g, uint64_t i);
int	gguf_remove_kv(struct gguf_writer *w, const char *key);

/* Add a tensor info; returns its index or -1. ne has n_dims entries. */
int64_t	gguf_add_tensor(struct gguf_writer *w, const char *name, uint32_t n_dims,
	    const int64_t *ne, uint32_t type);
uint64_t gguf_writer_tensor_nbytes(const struct gguf_writer *w, int64_t idx);

/* Create the temporary beside path (mode 0644), write the header. */
int	gguf_writer_begin(struct gguf_writer *w, const char *path);
int	gguf_writer_write(struct gguf_writer *w, int64_t idx, const void *buf, size_t len);
int	gguf_writer_pwrite(struct gguf_writer *w, int64_t idx, uint64_t off,
	    const void *buf, size_t len);
/* The output descriptor and a tensor's absolute offset, for callers that
 * copy with plc_copy_range; they report the bytes with gguf_writer_account. */
int	gguf_writer_fd(const struct gguf_writer *w);
uint64_t gguf_writer_tensor_pos(const struct gguf_writer *w, int64_t idx);
void	gguf_writer_account(struct gguf_writer *w, int64_t idx, uint64_t len);
int	gguf_writer_commit(struct gguf_writer *w);
void	gguf_writer_abort(struct gguf_writer *w);

/*
 * Copy the GGUF in to out (temporary name, fsync, rename) without the KVs
 * whose key starts with one of the NULL-terminated drop[]: the other KVs
 * in their order, the tensors as they are. *dropped counts the KVs left
 * out. 0, or -1 with the reason, naming the file, in err.
 */
int	gguf_copy_without(const char *in, const char *out, const char *const *drop,
	    int *dropped, char *err, size_t errlen);

/*
 * gguf_quant.c: a F32/F16/BF16 file to Q8_0 exactly as llama-quantize
 * writes it (KVs, tensor order, which tensors stay unquantized, rounding).
 */
struct gguf_qopts {
	int threads;			/* 0: one per online CPU */
	/* Called on the caller's thread between chunks (may be NULL). */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	int (*cancelled)(void *arg);	/* non-zero stops the work */
	void *arg;
};
struct gguf_qstats {
	uint64_t n_tensors, n_quantized, n_copied, n_fallback;
	uint64_t in_bytes;
	int threads;
};
int	gguf_quantize_q8_0_file(const char *in, const char *out,
	    const struct gguf_qopts *o, struct gguf_qstats *st, char *err, size_t errlen);
/* llama-quantize's tensor_allows_quantization, and the type a tensor gets
 * in a Q8_0 file (Q8_0, the F16 fallback, or its own type). */
int	gguf_q8_0_allows(const char *name, int ndims);
uint32_t gguf_q8_0_target(const struct gguf_tensor *t);

/*
 * gguf_convert.c: a Gemma 3 text checkpoint directory (safetensors, one
 * file or sharded, config.json, tokenizer.model, tokenizer_config.json) to
 * a GGUF as llama.cpp's convert_hf_to_gguf.py writes it.
 */
struct gguf_copts {
	uint32_t outtype;		/* GGML_F16, GGML_BF16 or GGML_F32 */
	/* level: 0 error, 1 warning, 2 info (as enum pl_level) */
	void (*log)(void *arg, int level, const char *msg);
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	int (*cancelled)(void *arg);
	void *arg;
};
struct gguf_cstats {
	uint64_t n_tensors, n_skipped, n_vocab, n_layer, bytes_in;
	int64_t bos, eos;
	char arch[64];
	char sha256[65];		/* of the output file, hashed as written; or "" */
};
int	gguf_convert_gemma3(const char *dir, const char *out, const struct gguf_copts *o,
	    struct gguf_cstats *st, char *err, size_t errlen);
/* 0 when config.json (parsed) is an architecture the native converter
 * takes (Gemma 3 text), -1 otherwise; arch gets its name or "(none)". */
struct cJSON;
int	gguf_convert_arch(const struct cJSON *config, char *arch, size_t archlen);

/* Numeric conversions as ggml does them (HACKING.md: Q8_0). */
uint16_t gguf_fp32_to_fp16(float f);
float	gguf_fp16_to_fp32(uint16_t h);
/* gguf_fp32_to_fp16 over n values (vectorised, same bits). */
void	gguf_fp32_to_fp16_row(const float *x, uint16_t *y, size_t n);
/* gguf_fp32_to_fp16 of n BF16 values (same bits, F16C where the CPU has
 * it); nonzero when an output is NaN or infinite. */
int	gguf_bf16_to_fp16_row(const uint16_t *x, uint16_t *y, size_t n);
uint16_t gguf_fp32_to_bf16(float f);
float	gguf_bf16_to_fp32(uint16_t h);
/* Q8_0 reference quantizer: k floats (k % 32 == 0) to k/32 blocks. */
void	gguf_quantize_q8_0(const float *x, uint8_t *y, int64_t k);

#endif
