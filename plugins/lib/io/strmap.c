/* strmap.c: the string -> int hash map (struct plc_strmap, plio.h): open
 * addressing with linear probing, FNV-1a, at most half full, so a lookup
 * costs O(1) and a spec or a corpus costs its size, not its size squared.
 * The map owns copies of its keys. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plio.h"

static uint64_t
strmap_hash(const char *k)
{
	uint64_t h = 1469598103934665603ULL;
	for (const unsigned char *p = (const unsigned char *)k; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return h;
}

/* The slot holding k, or the empty slot where it would go. */
static size_t
strmap_slot(char *const *keys, size_t cap, const char *k)
{
	size_t i = (size_t)strmap_hash(k) & (cap - 1);
	while (keys[i] != NULL && strcmp(keys[i], k) != 0)
		i = (i + 1) & (cap - 1);
	return i;
}

int *
plc_strmap_get(const struct plc_strmap *m, const char *k)
{
	if (m->cap == 0)
		return NULL;
	size_t i = strmap_slot(m->keys, m->cap, k);
	return m->keys[i] ? &m->vals[i] : NULL;
}

static int
strmap_grow(struct plc_strmap *m)
{
	size_t nc = m->cap ? m->cap * 2 : 64;
	char **nk = calloc(nc, sizeof(*nk));
	int *nv = calloc(nc, sizeof(*nv));
	if (nk == NULL || nv == NULL) {
		free(nk);
		free(nv);
		errno = ENOMEM;
		return -1;
	}
	for (size_t j = 0; j < m->cap; j++) {
		if (m->keys[j] == NULL)
			continue;
		size_t i = strmap_slot(nk, nc, m->keys[j]);
		nk[i] = m->keys[j];
		nv[i] = m->vals[j];
	}
	free(m->keys);
	free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = nc;
	return 0;
}

int *
plc_strmap_add(struct plc_strmap *m, const char *k, int v, int *added)
{
	if (added != NULL)
		*added = 0;
	if (2 * (m->n + 1) > m->cap && strmap_grow(m) == -1)
		return NULL;
	size_t i = strmap_slot(m->keys, m->cap, k);
	if (m->keys[i] == NULL) {
		if ((m->keys[i] = strdup(k)) == NULL)
			return NULL;
		m->vals[i] = v;
		m->n++;
		if (added != NULL)
			*added = 1;
	}
	return &m->vals[i];
}

int
plc_strmap_put(struct plc_strmap *m, const char *k, int v)
{
	int *p = plc_strmap_add(m, k, v, NULL);
	if (p == NULL)
		return -1;
	*p = v;
	return 0;
}

void
plc_strmap_free(struct plc_strmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->keys[i]);
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}
