/*
 * stcopy.c: the copy-and-hash engine of the common library (stcopy.h).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plio.h"
#include "safetensors.h"
#include "stcopy.h"

/* Units of work, small enough that cancellation and progress stay live
 * and the two threads can even out: a copy call moves at most COPY_BYTES
 * (a run of consecutive tensors, or a piece of a large one); a
 * hashing call takes HASH_BYTES of each stream; the input is mapped
 * WINDOW_BYTES at a time per reader (so memory stays bounded). */
#define COPY_BYTES   (32ull << 20)
#define HASH_BYTES   (1u << 20)
#define WINDOW_BYTES (16u << 20)

struct win {                   /* a piece of an input file mapped for reading */
	const struct st_file *sf;
	unsigned char *base;
	uint64_t start, len;
};

static void
win_drop(struct win *w)
{
	if (w->base)
		munmap(w->base, w->len);
	w->base = NULL;
}

/* The bytes [off, off + n) of sf, n <= HASH_BYTES, or NULL (errno). */
static const unsigned char *
win_get(struct win *w, const struct st_file *sf, uint64_t off, size_t n)
{
	if (w->base && w->sf == sf && off >= w->start && off + n <= w->start + w->len)
		return w->base + (off - w->start);
	win_drop(w);
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t start = off & ~(page - 1), len = WINDOW_BYTES;
	if (start + len > sf->size)
		len = sf->size - start;
	if (off + n > start + len) {
		errno = EIO;   /* past the end of the file: not a tensor of it */
		return NULL;
	}
	void *p = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, sf->fd, (off_t)start);
	if (p == MAP_FAILED)
		return NULL;
	w->sf = sf;
	w->base = p;
	w->start = start;
	w->len = len;
	return w->base + (off - start);
}

static int
stopped(struct stc_job *f)
{
	return __atomic_load_n(&f->stop, __ATOMIC_RELAXED);
}

/* Hash mapped input into a (and b, plc_sha256_update2, when b is set)
 * under the SIGBUS guard (plio.h): -1 when a page could not be read
 * because the file shrank under the mapping or the disk failed. The
 * contexts are then half-updated, for the caller to discard. */
static int
hash_mapped(struct plc_sha256 *a, const unsigned char *pa, size_t na,
    struct plc_sha256 *b, const unsigned char *pb, size_t nb)
{
	sigjmp_buf jb;
	if (sigsetjmp(jb, 1))
		return -1;
	plc_guard_begin(&jb);
	if (b != NULL)
		plc_sha256_update2(a, pa, na, b, pb, nb);
	else
		plc_sha256_update(a, pa, na);
	plc_guard_end();
	return 0;
}

/* The message for an input file that could not be read through its
 * mapping. */
static void
map_failed(char *err, size_t errlen, const struct st_file *sf)
{
	snprintf(err, errlen, "%s: " PLC_MAP_CHANGED, sf->path);
}

/* The file hasher takes items[k] into its pass unless the calling thread has. */
static int
claim_front(struct stc_job *f, size_t k)
{
	pthread_mutex_lock(&f->mu);
	int mine = k < f->back;
	if (mine)
		f->front = k + 1;
	pthread_mutex_unlock(&f->mu);
	return mine;
}

/* The job thread takes the last tensor nobody has; SIZE_MAX when none. */
static size_t
claim_back(struct stc_job *f)
{
	size_t k = SIZE_MAX;
	pthread_mutex_lock(&f->mu);
	if (f->back > f->front)
		k = --f->back;
	pthread_mutex_unlock(&f->mu);
	return k;
}

/* The file hasher: output file by output file, its header (read back from
 * the file) and then its tensors' bytes in order. */
static void *
file_main(void *arg)
{
	struct stc_job *f = arg;
	struct win win = { 0 };
	struct plc_sha256 fc, tc;
	int live_f = 0, live_t = 0;
	unsigned char *hb = malloc(HASH_BYTES);
	if (hb == NULL)
		goto nomem;
	for (size_t o = 0; o < f->nouts; o++) {
		const struct st_writer *w = &f->w[o];
		size_t first = f->first[o];
		const struct st_file *sf = st_set_file(f->in, f->items[first].t);
		if (plc_sha256_init(&fc) == -1)
			goto nomem;
		live_f = 1;
		for (uint64_t off = 0; off < w->data_start; off += HASH_BYTES) {
			size_t n = w->data_start - off < HASH_BYTES ? (size_t)(w->data_start - off) :
			    HASH_BYTES;
			if (plc_read_all(w->a.fd, hb, n, (off_t)off) == -1) {
				snprintf(f->herr, sizeof(f->herr), "%s: reading the header back: %s",
				    w->a.tmp, strerror(errno));
				goto out;
			}
			plc_sha256_update(&fc, hb, n);
		}
		uint64_t pos = w->data_start;
		for (size_t i = 0; i < f->count[o]; i++) {
			struct stc_item *k = &f->items[first + i];
			if (st_writer_offset(w, i) != pos) {
				snprintf(f->herr, sizeof(f->herr), "%s: tensor \"%s\" is not where the "
				    "file digest expects it", w->path, k->name);
				goto out;
			}
			int pair = claim_front(f, first + i);
			if (pair && plc_sha256_init(&tc) == -1)
				goto nomem;
			live_t = pair;
			for (uint64_t off = 0; off < k->t->nbytes; off += HASH_BYTES) {
				if (stopped(f))
					goto out;
				size_t n = k->t->nbytes - off < HASH_BYTES ?
				    (size_t)(k->t->nbytes - off) : HASH_BYTES;
				const unsigned char *p = win_get(&win, sf, k->t->offset + off, n);
				if (p == NULL) {
					snprintf(f->herr, sizeof(f->herr), "%s: tensor \"%s\": mmap: %s",
					    sf->path, k->t->name, strerror(errno));
					goto out;
				}
				if (hash_mapped(&fc, p, n, pair ? &tc : NULL, p, n) == -1) {
					map_failed(f->herr, sizeof(f->herr), sf);
					goto out;
				}
			}
			if (pair)
				plc_sha256_final(&tc, k->sha);
			live_t = 0;
			pos += k->t->nbytes;
		}
		plc_sha256_final(&fc, f->fsha[o]);
		live_f = 0;
		f->fbytes[o] = pos;
	}
	goto out;
nomem:
	snprintf(f->herr, sizeof(f->herr), "out of memory for hashing");
out:
	if (f->herr[0])
		__atomic_store_n(&f->failed, 1, __ATOMIC_RELEASE);
	if (live_f)
		plc_sha256_discard(&fc);
	if (live_t)
		plc_sha256_discard(&tc);
	win_drop(&win);
	free(hb);
	return NULL;
}

/* The job thread's hashing: two tensors at a time, in lanes. */
struct lane {
	size_t k;              /* items[] index; SIZE_MAX: idle */
	uint64_t off;          /* bytes hashed */
	struct plc_sha256 c;
	struct win win;
};

static void
lanes_free(struct lane *L)
{
	for (int i = 0; i < 2; i++) {
		if (L[i].k != SIZE_MAX)
			plc_sha256_discard(&L[i].c);
		L[i].k = SIZE_MAX;
		win_drop(&L[i].win);
	}
}

/* Up to HASH_BYTES of each lane's tensor, claiming tensors for idle lanes.
 * Returns 1, 0 when there was nothing left to hash, -1 on error; adds
 * the bytes hashed to *hashed. */
static int
lanes_step(struct stc_job *f, struct lane *L, uint64_t *hashed)
{
	const unsigned char *p[2] = { NULL, NULL };
	size_t n[2] = { 0, 0 };
	int busy = 0;
	for (int i = 0; i < 2; i++) {
		if (L[i].k == SIZE_MAX && (L[i].k = claim_back(f)) != SIZE_MAX) {
			L[i].off = 0;
			if (plc_sha256_init(&L[i].c) == -1) {
				L[i].k = SIZE_MAX;
				snprintf(f->err, sizeof(f->err), "out of memory for hashing");
				return -1;
			}
		}
		if (L[i].k == SIZE_MAX)
			continue;
		busy = 1;
		const struct st_tensor *t = f->items[L[i].k].t;
		const struct st_file *sf = st_set_file(f->in, t);
		n[i] = t->nbytes - L[i].off < HASH_BYTES ? (size_t)(t->nbytes - L[i].off) : HASH_BYTES;
		if (n[i] && (p[i] = win_get(&L[i].win, sf, t->offset + L[i].off, n[i])) == NULL) {
			snprintf(f->err, sizeof(f->err), "%s: tensor \"%s\": mmap: %s", sf->path,
			    t->name, strerror(errno));
			return -1;
		}
	}
	/* One pass for both lanes when they read one file, so that a fault
	 * names the file it was in. */
	const struct st_file *sf[2] = { NULL, NULL };
	for (int i = 0; i < 2; i++)
		if (n[i])
			sf[i] = st_set_file(f->in, f->items[L[i].k].t);
	int both = n[0] && n[1] && sf[0] == sf[1];
	for (int i = 0; i < 2; i++) {
		if (n[i] == 0 || (both && i == 1))
			continue;
		if (hash_mapped(&L[i].c, p[i], n[i], both ? &L[1].c : NULL, p[1], n[1]) == -1) {
			map_failed(f->err, sizeof(f->err), sf[i]);
			return -1;
		}
	}
	for (int i = 0; i < 2; i++) {
		if (L[i].k == SIZE_MAX)
			continue;
		L[i].off += n[i];
		*hashed += n[i];
		if (L[i].off == f->items[L[i].k].t->nbytes) {
			plc_sha256_final(&L[i].c, f->items[L[i].k].sha);
			L[i].k = SIZE_MAX;
		}
	}
	return busy;
}

int
stc_inputs_record(struct stc_job *f)
{
	struct stat st;
	if ((f->mtime = calloc(f->in->nfiles + 1, sizeof(*f->mtime))) == NULL) {
		snprintf(f->err, sizeof(f->err), "out of memory");
		return -1;
	}
	for (size_t i = 0; i < f->in->nfiles; i++) {
		if (fstat(f->in->files[i].fd, &st) == -1) {
			snprintf(f->err, sizeof(f->err), "%s: %s", f->in->files[i].path,
			    strerror(errno));
			return -1;
		}
		f->mtime[i] = st.st_mtim;
	}
	return 0;
}

/* Whether an input file changed while it was read: another size than the
 * one its header was checked against (a copy comes back short when it
 * shrank), or modified since (a checkpoint overwritten in place: the
 * bytes copied and the bytes hashed might then differ). A change takes
 * f->err, naming the file. */
static int
inputs_changed(struct stc_job *f)
{
	struct stat st;
	for (size_t i = 0; i < f->in->nfiles; i++) {
		const struct st_file *sf = &f->in->files[i];
		if (fstat(sf->fd, &st) == -1)
			continue;
		if ((uint64_t)st.st_size != sf->size) {
			snprintf(f->err, sizeof(f->err), "%s: the file changed size while it was "
			    "being read (%llu bytes when it was opened, %llu now)", sf->path,
			    (unsigned long long)sf->size, (unsigned long long)st.st_size);
			return 1;
		}
		if (st.st_mtim.tv_sec != f->mtime[i].tv_sec ||
		    st.st_mtim.tv_nsec != f->mtime[i].tv_nsec) {
			snprintf(f->err, sizeof(f->err), "%s: the file was modified while it was "
			    "being read", sf->path);
			return 1;
		}
	}
	return 0;
}

/* Where the copying is: output file, tensor in it, offset in the tensor. */
struct cpos {
	size_t o, i;
	uint64_t off;
	size_t done;           /* tensors copied whole */
	uint64_t bytes;
};

/* Copy the next piece: a run of whole tensors that follow one another in
 * the input too (nothing dropped in between), or COPY_BYTES of a larger
 * tensor. Returns the bytes copied, or -1. */
static int64_t
copy_step(struct stc_job *f, struct cpos *c)
{
	size_t first = f->first[c->o], n = f->count[c->o], j = c->i;
	struct st_writer *w = &f->w[c->o];
	const struct st_tensor *t = f->items[first + c->i].t;
	const struct st_file *in = st_set_file(f->in, t);
	uint64_t len = t->nbytes - c->off, at = st_writer_offset(w, c->i) + c->off;
	if (c->off > 0 || len > COPY_BYTES) {
		len = len > COPY_BYTES ? COPY_BYTES : len;
		if (st_writer_copy(w, c->i, c->off, in->fd, t->offset + c->off, len, f->err,
		    sizeof(f->err)) == -1)
			return -1;
		c->off += len;
		if (c->off < t->nbytes)
			goto out;
	} else {
		while (j + 1 < n && f->items[first + j + 1].t->begin == f->items[first + j].t->end &&
		    len + f->items[first + j + 1].t->nbytes <= COPY_BYTES) {
			j++;
			len += f->items[first + j].t->nbytes;
		}
		if (st_writer_copy_run(w, c->i, j, in->fd, t->offset, f->err, sizeof(f->err)) == -1)
			return -1;
	}
	c->done += j - c->i + 1;
	c->i = j + 1;
	c->off = 0;
	if (c->i == n) {
		c->o++;
		c->i = 0;
	}
out:
	plc_wbthread_add(&f->wb, w->a.fd, at, len);
	c->bytes += len;
	return (int64_t)len;
}

/* The calling thread hashes while it has hashed less than HASH_LEAD times what it
 * copied, so early on it mostly hashes (from the back, leaving the file
 * hasher its single stream to run alone later) and ends with copies. */
#define HASH_LEAD 3

int
stc_run(struct stc_job *f)
{
	struct lane L[2];
	struct cpos c = { 0, 0, 0, 0, 0 };
	uint64_t hashed = 0;
	int more = 1, rc = -1;

	memset(L, 0, sizeof(L));
	L[0].k = L[1].k = SIZE_MAX;
	f->front = 0;
	f->back = f->nitems;
	if (pthread_mutex_init(&f->mu, NULL) != 0) {
		snprintf(f->err, sizeof(f->err), "cannot create a mutex");
		return -1;
	}
	f->fsha = calloc(f->nouts, sizeof(*f->fsha));
	f->fbytes = calloc(f->nouts, sizeof(*f->fbytes));
	if (f->fsha == NULL || f->fbytes == NULL) {
		snprintf(f->err, sizeof(f->err), "out of memory");
		goto out;
	}
	plc_wbthread_start(&f->wb);
	if (f->file_digest) {
		if (pthread_create(&f->hasher, NULL, file_main, f) != 0) {
			snprintf(f->err, sizeof(f->err), "cannot start the hashing thread");
			goto out;
		}
		f->hasher_started = 1;
	}
	while (more || c.o < f->nouts) {
		if (f->cancelled != NULL && f->cancelled(f->arg)) {
			rc = 1;
			goto out;
		}
		if (__atomic_load_n(&f->failed, __ATOMIC_ACQUIRE))
			break;   /* its message is taken after the join */
		if (more && (c.o == f->nouts || hashed < HASH_LEAD * c.bytes + COPY_BYTES)) {
			if ((more = lanes_step(f, L, &hashed)) == -1)
				goto out;
			continue;
		}
		if (copy_step(f, &c) == -1) {
			inputs_changed(f);   /* a short copy: say why */
			goto out;
		}
		f->done = c.done;
		if (f->progress != NULL)
			f->progress(f->arg, c.done, f->nitems, c.bytes);
	}
	if (f->hasher_started) {
		pthread_join(f->hasher, NULL);
		f->hasher_started = 0;
	}
	if (f->herr[0]) {
		snprintf(f->err, sizeof(f->err), "%s", f->herr);
		goto out;
	}
	if (inputs_changed(f))
		goto out;
	plc_wbthread_stop(&f->wb);
	for (size_t o = 0; o < f->nouts; o++)
		if (st_writer_commit(&f->w[o], f->err, sizeof(f->err)) == -1)
			goto out;
	rc = 0;
out:
	if (f->hasher_started) {
		__atomic_store_n(&f->stop, 1, __ATOMIC_RELAXED);
		pthread_join(f->hasher, NULL);
		f->hasher_started = 0;
	}
	plc_wbthread_stop(&f->wb);
	lanes_free(L);
	pthread_mutex_destroy(&f->mu);
	return rc;
}

void
stc_free(struct stc_job *f)
{
	free(f->fsha);
	free(f->fbytes);
	free(f->mtime);
	f->fsha = NULL;
	f->fbytes = NULL;
	f->mtime = NULL;
}
