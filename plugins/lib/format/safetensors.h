/*
 * safetensors.h: reading, validating and writing safetensors files and
 * sharded checkpoints (model.safetensors.index.json), for the model-file
 * stages (merge, tensor_fix, convert).
 *
 * A file is validated the way the reference (Rust) reader does it: header
 * length at most 100,000,000 and inside the file, UTF-8 JSON, only
 * dtype/shape/data_offsets per tensor, string-only __metadata__, offsets
 * that after sorting start at 0 and follow one another exactly, sizes that
 * match shape x dtype, no trailing bytes. Every error names the file and,
 * where there is one, the tensor.
 *
 * Functions return 0 or -1; on -1 the message is in the caller's err
 * buffer (ST_ERRLEN bytes is always enough to hold a useful one).
 */
#ifndef SAFETENSORS_H
#define SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "plio.h"

#define ST_ERRLEN       1024
#define ST_MAX_HEADER   100000000ULL   /* the reference reader's MAX_HEADER_SIZE */
#define ST_MAX_DIMS     16

/* dtypes, in the reference crate's enum order (writers sort by it). */
#define ST_DTYPES(X) \
	X(ST_BOOL, "BOOL", 8) X(ST_F4, "F4", 4) X(ST_F6_E2M3, "F6_E2M3", 6) \
	X(ST_F6_E3M2, "F6_E3M2", 6) X(ST_U8, "U8", 8) X(ST_I8, "I8", 8) \
	X(ST_F8_E5M2, "F8_E5M2", 8) X(ST_F8_E4M3, "F8_E4M3", 8) \
	X(ST_F8_E8M0, "F8_E8M0", 8) X(ST_F8_E4M3FNUZ, "F8_E4M3FNUZ", 8) \
	X(ST_F8_E5M2FNUZ, "F8_E5M2FNUZ", 8) X(ST_I16, "I16", 16) \
	X(ST_U16, "U16", 16) X(ST_F16, "F16", 16) X(ST_BF16, "BF16", 16) \
	X(ST_I32, "I32", 32) X(ST_U32, "U32", 32) X(ST_F32, "F32", 32) \
	X(ST_C64, "C64", 64) X(ST_F64, "F64", 64) X(ST_I64, "I64", 64) \
	X(ST_U64, "U64", 64)

enum st_dtype {
#define ST_X_ENUM(e, s, b) e,
	ST_DTYPES(ST_X_ENUM)
#undef ST_X_ENUM
	ST_NDTYPES
};

const char	*st_dtype_name(int dtype);
int		 st_dtype_parse(const char *s);      /* -1 when unknown */
int		 st_dtype_bits(int dtype);

struct st_tensor {
	char		*name;
	int		 dtype;
	int		 ndim;
	uint64_t	 shape[ST_MAX_DIMS];
	uint64_t	 nelem;
	uint64_t	 begin, end;   /* data_offsets, relative to the data buffer */
	uint64_t	 offset;       /* absolute offset in the file */
	uint64_t	 nbytes;
	int		 file;         /* index of its file in a set; 0 for one file */
	size_t		 order;        /* position in the file, by offset */
};

struct st_meta {
	char	*key;
	char	*value;
};

struct st_file {
	char		*path;
	int		 fd;
	uint64_t	 size;
	uint64_t	 header_len;   /* N */
	uint64_t	 data_start;   /* 8 + N */
	size_t		 ntensors;
	struct st_tensor *tensors;     /* sorted by offset */
	size_t		 nmeta;
	struct st_meta	*meta;
};

/* Open and validate one file; the descriptor stays open for reads. */
int	st_open(struct st_file *f, const char *path, char *err, size_t errlen);
void	st_close(struct st_file *f);
/* Validate a header (the N bytes after the length) for a file whose data
 * buffer has data_size bytes; fills f->tensors and f->meta. label names
 * the file in messages. Used by st_open and by the fuzz target. */
int	st_parse_header(struct st_file *f, const char *label, const char *hdr,
	    size_t len, uint64_t data_size, char *err, size_t errlen);
const struct st_tensor *st_find(const struct st_file *f, const char *name);
const char *st_meta_get(const struct st_file *f, const char *key);

/* A checkpoint: one model.safetensors, a sharded set with its index, or a
 * single file named directly. */
struct st_set {
	char		*dir;
	int		 sharded;      /* 1: read through model.safetensors.index.json */
	size_t		 nfiles;
	struct st_file	*files;
	char		**fnames;      /* file names relative to dir */
	size_t		 ntensors;
	struct st_tensor **tensors;    /* file by file, by offset ("model order") */
	struct st_tensor **byname;     /* sorted by name, for st_set_find */
	uint64_t	 data_bytes;   /* sum of all tensors' bytes */
};

int	st_set_open(struct st_set *s, const char *path, char *err, size_t errlen);
void	st_set_close(struct st_set *s);
const struct st_tensor *st_set_find(const struct st_set *s, const char *name);
struct st_file *st_set_file(const struct st_set *s, const struct st_tensor *t);
/* The checkpoint's identity: sha256 of config.json, and of the tensor
 * index (every tensor's name, dtype and shape, in name order). */
int	st_set_identity(const struct st_set *s, char config_hex[65],
	    char tensors_hex[65], char *err, size_t errlen);

/* Read a tensor's bytes (or part of them: off/len inside the tensor). */
int	st_read(const struct st_file *f, const struct st_tensor *t, void *buf,
	    uint64_t off, uint64_t len);

/*
 * Writing. Declare every tensor first (offsets are assigned in declaration
 * order, so declaring them in an input file's offset order keeps its
 * alignment), then st_writer_start() writes the header (padded with spaces
 * to a multiple of 8) to a temporary file; then fill each tensor with
 * st_writer_write() and/or st_writer_copy() in any order; st_writer_commit()
 * checks that every byte was written, fsyncs and renames.
 */
struct st_wtensor {
	char		*name;
	int		 dtype;
	int		 ndim;
	uint64_t	 shape[ST_MAX_DIMS];
	uint64_t	 nbytes;
	uint64_t	 begin;        /* relative to the data buffer */
	uint64_t	 written;
};

struct st_writer {
	struct plc_atomic a;
	char		 path[4096];
	size_t		 n, cap;
	struct st_wtensor *t;
	size_t		 nmeta;
	struct st_meta	*meta;
	uint64_t	 data_start;
	uint64_t	 data_bytes;
	int		 started;
};

void	st_writer_init(struct st_writer *w, const char *path);
int	st_writer_meta(struct st_writer *w, const char *key, const char *value);
/* Returns the tensor's index, or -1. */
int	st_writer_add(struct st_writer *w, const char *name, int dtype, int ndim,
	    const uint64_t *shape, char *err, size_t errlen);
int	st_writer_start(struct st_writer *w, char *err, size_t errlen);
/* Absolute file offset of tensor i's bytes (after start). */
uint64_t st_writer_offset(const struct st_writer *w, size_t i);
int	st_writer_write(struct st_writer *w, size_t i, uint64_t off, const void *buf,
	    uint64_t len, char *err, size_t errlen);
/* Copy len bytes from in_fd at in_off into tensor i at off, through the
 * kernel (plc_copy_range). */
int	st_writer_copy(struct st_writer *w, size_t i, uint64_t off, int in_fd,
	    uint64_t in_off, uint64_t len, char *err, size_t errlen);
/* Copy a run of consecutive tensors i..j (inclusive) in one call: their
 * bytes are contiguous in the output, and must be in the input too. */
int	st_writer_copy_run(struct st_writer *w, size_t i, size_t j, int in_fd,
	    uint64_t in_off, char *err, size_t errlen);
int	st_writer_commit(struct st_writer *w, char *err, size_t errlen);
void	st_writer_abort(struct st_writer *w);
void	st_writer_free(struct st_writer *w);

/*
 * Checkpoint directories that appear under their final name only when
 * whole: the stage writes into "<parent>/.<name>.tmp.<pid>" and renames it
 * over the final name at the end (an existing output is swapped out and
 * removed only after the rename). Stale temporaries of earlier attempts
 * are removed by st_outdir_begin.
 */
struct st_outdir {
	char	final[4096];
	char	tmp[4096];
};
int	st_outdir_begin(struct st_outdir *o, const char *final, char *err, size_t errlen);
int	st_outdir_commit(struct st_outdir *o, char *err, size_t errlen);
void	st_outdir_abort(struct st_outdir *o);
/* Remove a directory tree (no symlinks followed). */
int	st_rmtree(const char *path);
/* Copy the regular, non-hidden files of src that are not safetensors
 * weights or their index (config.json, tokenizer files, ...) into dst;
 * *ncopied gets their number. */
int	st_copy_aux_files(const char *src, const char *dst, int *ncopied,
	    char *err, size_t errlen);
/* Write model.safetensors.index.json for the given names and files. */
int	st_write_index(const char *path, size_t n, const char *const *names,
	    const char *const *files, uint64_t total_size, char *err, size_t errlen);

/* Element conversions. To F32: exact for F16/BF16/F32 (F64 rounds). From
 * F32: round to nearest, ties to even; F16 overflows to infinity; NaN stays
 * a (quiet) NaN. Only F32, F16, BF16 and F64 are supported. */
int	st_to_f32(int dtype, const void *src, float *dst, size_t n);
int	st_from_f32(int dtype, const float *src, void *dst, size_t n);
uint16_t st_f32_to_bf16(float f);
float	 st_bf16_to_f32(uint16_t h);
uint16_t st_f32_to_f16(float f);
float	 st_f16_to_f32(uint16_t h);
int	st_is_float(int dtype);   /* F16, BF16, F32, F64 */

#endif
