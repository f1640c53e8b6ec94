/*
 * stcopy.h: the copy-and-hash engine, part of the plugins' common library
 * (plio.h): copies tensors of a safetensors input set (safetensors.h)
 * into output files with the kernel, never decoding them, and hashes them
 * from the input meanwhile: each tensor (sha256 of its bytes), and, when
 * asked, each output file as a whole, so that a stage can hand the host
 * the digest of what it wrote (artifact_digest) instead of the host
 * reading it again. tensor_fix is its user.
 *
 * The calling thread copies the tensors with the kernel (copy_file_range,
 * consecutive tensors in one call), and starts the writeback of each
 * piece at once, so the fsync at the end has little left. The bytes are
 * hashed from the input, mapped a window at a time, through the page
 * cache the copies read too: every tensor, and with file_digest every
 * output file as a whole (its header as written, then its tensors in
 * order: exactly the file's bytes).
 *
 * A whole-file digest is one sequential stream, the longest single piece
 * of work, so it has a thread of its own, the file hasher. It hashes the
 * tensor it is passing over in the same pass (plc_sha256_update2: two
 * streams cost about 1.4x one) unless the calling thread has claimed it.
 * The calling thread claims tensors from the back, hashes them two at a
 * time between its copies, and stops claiming where the file hasher is;
 * so the two threads share the work and end together on two cores.
 *
 * The input may change under the stage (an operator overwrites the
 * checkpoint) or fail to read. A page of the mapping past the file's new
 * end, or one the disk cannot read, raises SIGBUS: both threads hash
 * under a guard (plc_guard_begin) that turns it into the job's failure
 * naming the file, instead of the daemon's death. A copy comes back short
 * from a file that shrank, and a file that is not of the size and
 * modification time stc_inputs_record() saw fails the run too; the
 * output is then never committed.
 */
#ifndef STCOPY_H
#define STCOPY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "plio.h"
#include "safetensors.h"

/* One tensor to copy. */
struct stc_item {
	const struct st_tensor *t;   /* in the input set */
	const char *name;            /* its name in the output, for messages */
	char sha[65];                /* out: sha256 of its bytes */
};

struct stc_job {
	/* In. items[] holds output file o's tensors at first[o] ..
	 * first[o] + count[o] - 1, in the order w[o] declared them; every
	 * writer is started (st_writer_start), and committed by stc_run. */
	const struct st_set *in;
	struct stc_item *items;
	size_t nitems;
	struct st_writer *w;
	const size_t *first, *count;
	size_t nouts;
	int file_digest;             /* hash each output file whole too */
	int (*cancelled)(void *arg); /* polled between pieces; may be NULL */
	void (*progress)(void *arg, size_t done, size_t total, uint64_t bytes);
	void *arg;
	/* Out. */
	char (*fsha)[65];            /* with file_digest: per output file */
	uint64_t *fbytes;            /* the bytes each file digest covers */
	size_t done;                 /* tensors copied whole */
	char err[ST_ERRLEN];
	/* The engine's. */
	struct timespec *mtime;      /* per input file, from stc_inputs_record */
	pthread_mutex_t mu;          /* guards front and back */
	size_t front, back;          /* items[] below front: hashed by the file
	                                hasher; from back on: by the caller */
	pthread_t hasher;
	int hasher_started;
	int stop;                    /* __atomic: the file hasher stops */
	int failed;                  /* __atomic: the file hasher failed (herr) */
	struct plc_wbthread wb;      /* starts the writeback of what was copied */
	char herr[512];              /* the file hasher's error */
};

/* Take the input files' sizes and modification times, once their headers
 * are read: a change after this fails stc_run. 0, or -1 with err. */
int	stc_inputs_record(struct stc_job *j);
/* Copy and hash every item, then commit the writers: 0; 1 when cancelled;
 * -1 with err naming the file (and tensor). */
int	stc_run(struct stc_job *j);
/* Free what stc_inputs_record and stc_run allocated. */
void	stc_free(struct stc_job *j);

#endif
