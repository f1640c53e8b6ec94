/*
 * ctl_gguf.c: `pipelinectl gguf FILE`, a short listing of a GGUF file's
 * keys and tensors (name, type, shape), as operators use gguf-dump. The
 * file is validated first (gguf.c checks every count, length and offset),
 * so a corrupt file gets the reader's message and exit status 1. Arrays
 * show their first elements and their length; --json prints one object.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ctl.h"
#include "gguf.h"

#define SHOW_ELEMS 8	/* array elements shown */

/* A string value for the text listing: quoted, control bytes escaped,
 * long ones cut. */
static void
print_str(const char *s, size_t len, size_t max)
{
	putchar('\'');
	for (size_t i = 0; i < len && i < max; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\n')
			fputs("\\n", stdout);
		else if (c == '\'' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			printf("\\x%02x", c);
		else
			putchar(c);
	}
	putchar('\'');
	if (len > max)
		printf("... (%zu bytes)", len);
}

static void
print_num(uint32_t type, const uint8_t *p)
{
	double v = gguf_val_num(type, p);
	if (type == GGUF_BOOL)
		fputs(v != 0 ? "true" : "false", stdout);
	else if (type == GGUF_FLOAT32 || type == GGUF_FLOAT64)
		printf("%.9g", v);
	else if (type == GGUF_UINT64)
		printf("%" PRIu64, (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
		    (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 |
		    (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56);
	else
		printf("%.0f", v);
}

static cJSON *
json_num(uint32_t type, const uint8_t *p)
{
	double v = gguf_val_num(type, p);
	return type == GGUF_BOOL ? cJSON_CreateBool(v != 0) : cJSON_CreateNumber(v);
}

static cJSON *
json_str(const char *s, size_t len)
{
	char *t = strndup(s, len);
	cJSON *j = cJSON_CreateString(t ? t : "");
	free(t);
	return j;
}

static int
list_json(struct gguf *g)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "path", g->path);
	cJSON_AddNumberToObject(o, "version", g->version);
	cJSON_AddNumberToObject(o, "alignment", g->alignment);
	cJSON_AddNumberToObject(o, "data_offset", (double)g->data_off);
	cJSON_AddNumberToObject(o, "size", (double)g->size);
	cJSON *kvs = cJSON_AddArrayToObject(o, "kv");
	for (uint64_t i = 0; i < g->n_kv; i++) {
		const struct gguf_kv *kv = &g->kv[i];
		cJSON *k = cJSON_CreateObject();
		cJSON_AddStringToObject(k, "key", kv->key);
		if (kv->type == GGUF_ARRAY) {
			char t[16];
			snprintf(t, sizeof(t), "[%s]", gguf_vtype_name(kv->arr_type));
			cJSON_AddStringToObject(k, "type", t);
			cJSON_AddNumberToObject(k, "n", (double)kv->n);
			cJSON *vals = cJSON_AddArrayToObject(k, "values");
			for (uint64_t j = 0; j < kv->n && j < SHOW_ELEMS; j++) {
				if (kv->arr_type == GGUF_STRING) {
					const char *s;
					size_t len;
					gguf_arr_str(kv, j, &s, &len);
					cJSON_AddItemToArray(vals, json_str(s, len));
				} else
					cJSON_AddItemToArray(vals, json_num(kv->arr_type,
					    kv->val + j * gguf_vtype_size(kv->arr_type)));
			}
			if (kv->n > SHOW_ELEMS)
				cJSON_AddBoolToObject(k, "truncated", 1);
		} else {
			cJSON_AddStringToObject(k, "type", gguf_vtype_name(kv->type));
			if (kv->type == GGUF_STRING) {
				uint64_t len;
				memcpy(&len, kv->val, 8);
				cJSON_AddItemToObject(k, "value", json_str((const char *)kv->val + 8,
				    (size_t)len));
			} else
				cJSON_AddItemToObject(k, "value", json_num(kv->type, kv->val));
		}
		cJSON_AddItemToArray(kvs, k);
	}
	cJSON *ts = cJSON_AddArrayToObject(o, "tensors");
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->t[i];
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", t->name);
		cJSON_AddStringToObject(j, "type", gguf_type_name(t->type));
		cJSON *sh = cJSON_AddArrayToObject(j, "shape");
		for (uint32_t d = 0; d < t->n_dims; d++)
			cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->ne[d]));
		cJSON_AddNumberToObject(j, "offset", (double)(g->data_off + t->offset));
		cJSON_AddNumberToObject(j, "bytes", (double)t->nbytes);
		cJSON_AddItemToArray(ts, j);
	}
	char *txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (txt == NULL)
		return 1;
	puts(txt);
	free(txt);
	return 0;
}

static int
list_text(struct gguf *g)
{
	printf("%s: GGUF v%" PRIu32 ", %" PRIu64 " keys, %" PRIu64 " tensors, alignment %"
	    PRIu32 ", data at byte %" PRIu64 ", %zu bytes\n", g->path, g->version, g->n_kv,
	    g->n_tensors, g->alignment, g->data_off, g->size);
	for (uint64_t i = 0; i < g->n_kv; i++) {
		const struct gguf_kv *kv = &g->kv[i];
		char t[16];
		if (kv->type == GGUF_ARRAY)
			snprintf(t, sizeof(t), "[%s]", gguf_vtype_name(kv->arr_type));
		else
			snprintf(t, sizeof(t), "%s", gguf_vtype_name(kv->type));
		printf("%5" PRIu64 ": %-6s %s = ", i + 1, t, kv->key);
		if (kv->type == GGUF_STRING) {
			uint64_t len;
			memcpy(&len, kv->val, 8);
			print_str((const char *)kv->val + 8, (size_t)len, 60);
		} else if (kv->type == GGUF_ARRAY) {
			putchar('[');
			for (uint64_t j = 0; j < kv->n && j < SHOW_ELEMS; j++) {
				if (j)
					fputs(", ", stdout);
				if (kv->arr_type == GGUF_STRING) {
					const char *s;
					size_t len;
					gguf_arr_str(kv, j, &s, &len);
					print_str(s, len, 40);
				} else
					print_num(kv->arr_type, kv->val + j * gguf_vtype_size(kv->arr_type));
			}
			printf("%s] (%" PRIu64 ")", kv->n > SHOW_ELEMS ? ", ..." : "", kv->n);
		} else
			print_num(kv->type, kv->val);
		putchar('\n');
	}
	printf("tensors:\n");
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->t[i];
		char shape[128];
		int n = snprintf(shape, sizeof(shape), "[");
		for (uint32_t d = 0; d < t->n_dims; d++)
			n += snprintf(shape + n, sizeof(shape) - (size_t)n, "%s%" PRId64,
			    d ? ", " : "", t->ne[d]);
		snprintf(shape + n, sizeof(shape) - (size_t)n, "]");
		printf("%5" PRIu64 ": %-32s %-5s %-18s %" PRIu64 "\n", i + 1, t->name,
		    gguf_type_name(t->type), shape, t->nbytes);
	}
	return 0;
}

int
ctl_gguf(int argc, char **argv)
{
	struct gguf g;
	if (argc != 2) {
		fprintf(stderr, "usage: pipelinectl [--json] gguf FILE\n");
		return 2;
	}
	if (gguf_open(&g, argv[1]) == -1)
		ctl_fail(CTL_ERROR, "EINVAL", "%s", g.err);
	int rc = ctl_json ? list_json(&g) : list_text(&g);
	gguf_close(&g);
	return rc;
}
