/*
 * tensor_fix.c: the tensor_fix stage. Drops and renames the tensors of a
 * safetensors checkpoint so the GGUF converter takes it (G23): for a
 * merged Gemma 3 (Gemma3ForConditionalGeneration) checkpoint, drop the
 * vision tower and the projector and move the text tensors from
 * model.language_model.* to the names of the text-only model. The
 * reference program did this with a Python script and counted the
 * tensors by hand every time (gemma-3-4b: 439 dropped, 444 kept).
 *
 * Here the counts are checked every time: from expect_dropped and
 * expect_kept when the spec gives them, else derived from config.json for
 * a Gemma 3 checkpoint (13 tensors per text layer plus embed_tokens and
 * norm; 16 per SigLIP layer plus 7). A count that differs, a rule that
 * matched nothing, or a rename that would collide fails the job with the
 * numbers and the names. Kept tensors are copied by the kernel
 * (copy_file_range, consecutive tensors in one call), never decoded, and
 * hashed from the input meanwhile: each for the manifest, and each output
 * file as a whole for the "fixed" artifact's digest, which the stage hands
 * the host (artifact_digest) instead of the host reading the output again
 * (the common library's copy-and-hash engine, stcopy.h).
 *
 * Artifacts: "fixed", the output checkpoint directory (the input's other
 * files, e.g. config.json and the tokenizer, copied unchanged; an index
 * when the input was sharded), and "manifest", a JSON file listing every
 * kept tensor (old name, new name, dtype, shape, sha256 of its bytes) and
 * every dropped one.
 */
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "plio.h"
#include "safetensors.h"
#include "rate.h"
#include "stcopy.h"

static const struct pl_host *host;

#define DEFAULT_DROP   "*vision_tower.* *multi_modal_projector.*"
#define DEFAULT_RENAME "model.language_model.=model."

static const struct pl_key fix_keys[] = {
	PL_KEY_INPUT(.name = "input", .artifact = "merged",
	    .help = "the checkpoint directory to fix (default: the upstream merged artifact)"),
	PL_KEY_PATH(.name = "output",
	    .help = "the fixed checkpoint directory (default: fixed in the job's work "
	    "directory)"),
	PL_KEY_PATH(.name = "manifest",
	    .help = "the manifest file (default: OUTPUT.manifest.json)"),
	PL_KEY_LIST(.name = "drop", .def = DEFAULT_DROP,
	    .help = "tensors to drop: name prefixes, or fnmatch patterns when they hold * ? "
	    "or ["),
	PL_KEY_LIST(.name = "rename", .def = DEFAULT_RENAME,
	    .help = "prefix renames FROM=TO, the first that matches applies (TO may be empty)"),
	PL_KEY_INT(.name = "expect_dropped", .flags = PL_KEY_MIN, .min = 0,
	    .help = "how many tensors must be dropped (default: from a Gemma 3 config.json)"),
	PL_KEY_INT(.name = "expect_kept", .flags = PL_KEY_MIN, .min = 0,
	    .help = "how many tensors must be kept (default: from a Gemma 3 config.json)"),
	PL_KEY_END
};

struct rule {
	char *from;        /* drop: the pattern; rename: the prefix */
	char *to;          /* rename only */
	int glob;
	size_t hits;
};

struct kept {
	const struct st_tensor *t;
	char *newname;
	size_t out_file;   /* index among output files */
	size_t out_index;  /* index in its output file */
	char sha[65];
};

struct fctx {
	pl_job *job;
	const char *input, *output, *manifest;
	struct st_set in;
	struct rule *drop, *ren;
	size_t ndrop, nren;
	struct kept *kept;
	size_t nkept;
	const struct st_tensor **dropped;
	size_t ndropped;
	int64_t want_dropped, want_kept;
	const char *want_source;
	char **outnames;           /* output file names */
	size_t noutfiles;
	size_t *first_kept;        /* per output file: its first entry in kept[] */
	size_t *count_kept;
	/* copying and hashing (stcopy.h) */
	struct st_writer *w;       /* per output file, all started before copying */
	struct stc_item *items;    /* kept[]'s tensors, for the engine */
	struct stc_job cp;
	struct plc_rate rate;
	char err[ST_ERRLEN];
};

static void
rules_free(struct rule *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(r[i].from);
		free(r[i].to);
	}
	free(r);
}

static void
fctx_free(struct fctx *f)
{
	rules_free(f->drop, f->ndrop);
	rules_free(f->ren, f->nren);
	for (size_t i = 0; i < f->nkept; i++)
		free(f->kept[i].newname);
	free(f->kept);
	free(f->dropped);
	for (size_t i = 0; i < f->noutfiles; i++)
		free(f->outnames[i]);
	free(f->outnames);
	free(f->first_kept);
	free(f->count_kept);
	for (size_t i = 0; f->w && i < f->noutfiles; i++)
		st_writer_free(&f->w[i]);
	free(f->w);
	free(f->items);
	stc_free(&f->cp);
	st_set_close(&f->in);
}

/* Split a list value (comma- or space-separated) into rules. */
static int
parse_rules(const char *v, int rename, struct rule **out, size_t *n, char *err, size_t errlen)
{
	*out = NULL;
	*n = 0;
	if (v == NULL)
		return 0;
	char *copy = strdup(v), *save = NULL;
	if (copy == NULL)
		return -1;
	for (char *w = strtok_r(copy, ", \t", &save); w; w = strtok_r(NULL, ", \t", &save)) {
		struct rule *nr = realloc(*out, (*n + 1) * sizeof(*nr));
		if (nr == NULL) {
			free(copy);
			return -1;
		}
		*out = nr;
		struct rule *r = &nr[(*n)++];
		memset(r, 0, sizeof(*r));
		if (rename) {
			char *eq = strchr(w, '=');
			if (eq == NULL || eq == w) {
				snprintf(err, errlen, "rename rule \"%s\" is not FROM=TO with a "
				    "non-empty FROM", w);
				free(copy);
				return -1;
			}
			*eq = '\0';
			r->from = strdup(w);
			r->to = strdup(eq + 1);
		} else {
			r->from = strdup(w);
			r->glob = strpbrk(w, "*?[") != NULL;
		}
		if (r->from == NULL || (rename && r->to == NULL)) {
			free(copy);
			return -1;
		}
	}
	free(copy);
	return 0;
}

static int
drop_match(const struct rule *r, const char *name)
{
	if (r->glob)
		return fnmatch(r->from, name, 0) == 0;
	return strncmp(name, r->from, strlen(r->from)) == 0;
}

static int64_t
json_int(const cJSON *o, const char *k, int64_t def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : def;
}

/* Expected counts for a Gemma 3 checkpoint, from its config.json. */
static int
gemma3_counts(struct fctx *f, int64_t *dropped, int64_t *kept)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/config.json", f->input);
	char *txt = plc_read_file(p, NULL, 16 << 20);
	if (txt == NULL)
		return -1;
	cJSON *c = cJSON_Parse(txt);
	free(txt);
	if (c == NULL)
		return -1;
	int rc = -1;
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(c, "model_type");
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(c, "text_config");
	const cJSON *vc = cJSON_GetObjectItemCaseSensitive(c, "vision_config");
	if (!cJSON_IsString(mt))
		goto out;
	if (strcmp(mt->valuestring, "gemma3") == 0 && cJSON_IsObject(tc) && cJSON_IsObject(vc)) {
		/* Missing fields take transformers' defaults, as the converter
		 * sees them: Gemma3TextConfig 26 layers, SiglipVisionConfig 12.
		 * A SigLIP head (vision_use_head) adds tensors not counted here. */
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(vc, "vision_use_head")))
			goto out;
		int64_t L = json_int(tc, "num_hidden_layers", 26);
		int64_t V = json_int(vc, "num_hidden_layers", 12);
		*kept = 13 * L + 2;
		*dropped = 16 * V + 7;
		rc = 0;
	} else if (strcmp(mt->valuestring, "gemma3_text") == 0) {
		*kept = 13 * json_int(c, "num_hidden_layers", 26) + 2;
		*dropped = 0;
		rc = 0;
	}
out:
	cJSON_Delete(c);
	return rc;
}

/* Decide each tensor's fate and check the rules and counts. */
static int
plan(struct fctx *f)
{
	f->kept = calloc(f->in.ntensors + 1, sizeof(*f->kept));
	f->dropped = calloc(f->in.ntensors + 1, sizeof(*f->dropped));
	if (f->kept == NULL || f->dropped == NULL) {
		snprintf(f->err, sizeof(f->err), "out of memory");
		return -1;
	}
	for (size_t i = 0; i < f->in.ntensors; i++) {
		const struct st_tensor *t = f->in.tensors[i];
		int dropped = 0;
		for (size_t k = 0; k < f->ndrop; k++) {
			if (drop_match(&f->drop[k], t->name)) {
				f->drop[k].hits++;
				dropped = 1;
				break;
			}
		}
		if (dropped) {
			f->dropped[f->ndropped++] = t;
			continue;
		}
		struct kept *kp = &f->kept[f->nkept++];
		kp->t = t;
		const char *nn = t->name;
		char buf[4096];
		for (size_t k = 0; k < f->nren; k++) {
			size_t l = strlen(f->ren[k].from);
			if (strncmp(t->name, f->ren[k].from, l) == 0) {
				f->ren[k].hits++;
				snprintf(buf, sizeof(buf), "%s%s", f->ren[k].to, t->name + l);
				nn = buf;
				break;
			}
		}
		if (*nn == '\0' || strcmp(nn, "__metadata__") == 0) {
			snprintf(f->err, sizeof(f->err), "renaming tensor \"%s\" gives the invalid "
			    "name \"%s\"", t->name, nn);
			return -1;
		}
		if ((kp->newname = strdup(nn)) == NULL) {
			snprintf(f->err, sizeof(f->err), "out of memory");
			return -1;
		}
	}
	for (size_t k = 0; k < f->ndrop; k++) {
		if (f->drop[k].hits == 0) {
			snprintf(f->err, sizeof(f->err), "drop rule \"%s\" matched none of the %zu "
			    "tensors of %s", f->drop[k].from, f->in.ntensors, f->input);
			return -1;
		}
	}
	for (size_t k = 0; k < f->nren; k++) {
		if (f->ren[k].hits == 0) {
			snprintf(f->err, sizeof(f->err), "rename rule \"%s=%s\" matched none of the "
			    "%zu kept tensors of %s", f->ren[k].from, f->ren[k].to, f->nkept,
			    f->input);
			return -1;
		}
	}
	/* Collisions: two kept tensors under one new name. */
	struct kept **by = malloc((f->nkept + 1) * sizeof(*by));
	if (by == NULL) {
		snprintf(f->err, sizeof(f->err), "out of memory");
		return -1;
	}
	for (size_t i = 0; i < f->nkept; i++)
		by[i] = &f->kept[i];
	for (size_t i = 1; i < f->nkept; i++) {   /* insertion sort by new name */
		struct kept *v = by[i];
		size_t j = i;
		while (j > 0 && strcmp(by[j - 1]->newname, v->newname) > 0) {
			by[j] = by[j - 1];
			j--;
		}
		by[j] = v;
	}
	for (size_t i = 1; i < f->nkept; i++) {
		if (strcmp(by[i]->newname, by[i - 1]->newname) == 0) {
			snprintf(f->err, sizeof(f->err), "rename collision: \"%s\" and \"%s\" would "
			    "both become \"%s\"", by[i - 1]->t->name, by[i]->t->name, by[i]->newname);
			free(by);
			return -1;
		}
	}
	free(by);
	if ((int64_t)f->ndropped != f->want_dropped || (int64_t)f->nkept != f->want_kept) {
		snprintf(f->err, sizeof(f->err), "%s: %zu of %zu tensors dropped and %zu kept, "
		    "expected %lld dropped and %lld kept (%s)", f->input, f->ndropped,
		    f->in.ntensors, f->nkept, (long long)f->want_dropped, (long long)f->want_kept,
		    f->want_source);
		return -1;
	}
	return 0;
}

/* Output files: one per input file that keeps a tensor; shard names are
 * renumbered when a shard empties out. */
static int
plan_files(struct fctx *f)
{
	size_t nin = f->in.nfiles;
	size_t *cnt = calloc(nin, sizeof(*cnt));
	f->outnames = calloc(nin, sizeof(*f->outnames));
	f->first_kept = calloc(nin, sizeof(*f->first_kept));
	f->count_kept = calloc(nin, sizeof(*f->count_kept));
	if (!cnt || !f->outnames || !f->first_kept || !f->count_kept) {
		free(cnt);
		snprintf(f->err, sizeof(f->err), "out of memory");
		return -1;
	}
	for (size_t i = 0; i < f->nkept; i++)
		cnt[f->kept[i].t->file]++;
	size_t nout = 0;
	for (size_t i = 0; i < nin; i++)
		if (cnt[i])
			nout++;
	size_t o = 0, k = 0;
	for (size_t i = 0; i < nin; i++) {
		if (cnt[i] == 0)
			continue;
		char name[PATH_MAX];
		if (!f->in.sharded)
			snprintf(name, sizeof(name), "%s", "model.safetensors");
		else if (nout == nin)
			snprintf(name, sizeof(name), "%s", f->in.fnames[i]);
		else
			snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", o + 1, nout);
		f->outnames[o] = strdup(name);
		f->first_kept[o] = k;
		f->count_kept[o] = cnt[i];
		for (size_t j = 0; j < cnt[i]; j++, k++) {
			f->kept[k].out_file = o;
			f->kept[k].out_index = j;
		}
		o++;
	}
	f->noutfiles = nout;
	free(cnt);
	return 0;
}

/* Declare output file o's tensors and write its header. */
static int
start_file(struct fctx *f, size_t o, const char *dir)
{
	char path[PATH_MAX];
	struct st_writer *w = &f->w[o];
	size_t first = f->first_kept[o], n = f->count_kept[o];
	const struct st_file *in = st_set_file(&f->in, f->kept[first].t);

	snprintf(path, sizeof(path), "%s/%s", dir, f->outnames[o]);
	st_writer_init(w, path);
	for (size_t i = 0; i < in->nmeta; i++)
		st_writer_meta(w, in->meta[i].key, in->meta[i].value);
	if (in->nmeta == 0)
		st_writer_meta(w, "format", "pt");
	for (size_t i = 0; i < n; i++) {
		const struct kept *k = &f->kept[first + i];
		if (st_writer_add(w, k->newname, k->t->dtype, k->t->ndim, k->t->shape, f->err,
		    sizeof(f->err)) < 0)
			return -1;
	}
	return st_writer_start(w, f->err, sizeof(f->err));
}

/* Copy every kept tensor and hash it, by the common library's engine
 * (stcopy.h): each for the manifest, and each output file whole when the
 * host takes the "fixed" artifact's digest from the stage. */
static int
cp_cancelled(void *arg)
{
	struct fctx *f = arg;
	return host->cancelled(f->job);
}

static void
cp_progress(void *arg, size_t done, size_t total, uint64_t bytes)
{
	struct fctx *f = arg;
	plc_report_tensors(host, f->job, &f->rate, done, total, bytes);
}

static int
copy_and_hash(struct fctx *f, const char *dir)
{
	f->w = calloc(f->noutfiles, sizeof(*f->w));
	f->items = calloc(f->nkept + 1, sizeof(*f->items));
	if (f->w == NULL || f->items == NULL) {
		snprintf(f->err, sizeof(f->err), "out of memory");
		return -1;
	}
	for (size_t o = 0; o < f->noutfiles; o++)
		if (start_file(f, o, dir) == -1)
			return -1;
	for (size_t k = 0; k < f->nkept; k++) {
		f->items[k].t = f->kept[k].t;
		f->items[k].name = f->kept[k].newname;
	}
	f->cp.items = f->items;
	f->cp.nitems = f->nkept;
	f->cp.w = f->w;
	f->cp.first = f->first_kept;
	f->cp.count = f->count_kept;
	f->cp.nouts = f->noutfiles;
	f->cp.file_digest = 1;
	f->cp.cancelled = cp_cancelled;
	f->cp.progress = cp_progress;
	f->cp.arg = f;
	int r = stc_run(&f->cp);
	if (r == 1) {
		host->log(f->job, PL_LOG_INFO, "tensor_fix: cancelled after %zu of %zu "
		    "tensors", f->cp.done, f->nkept);
		return PL_ECANCELED;
	}
	if (r == -1) {
		snprintf(f->err, sizeof(f->err), "%s", f->cp.err);
		return -1;
	}
	for (size_t k = 0; k < f->nkept; k++)
		memcpy(f->kept[k].sha, f->items[k].sha, sizeof(f->kept[k].sha));
	return 0;
}

/* The output directory's digest by the host's definition, with the whole-
 * file digests computed while copying; a file of another size than was
 * hashed fails it. The other files (config, tokenizer, index) are small
 * and hashed here. */
static int
known_digest(void *arg, const char *rel, uint64_t size, char hex[65])
{
	struct fctx *f = arg;
	for (size_t o = 0; o < f->noutfiles; o++) {
		if (strcmp(rel, f->outnames[o]) != 0)
			continue;
		if (size != f->cp.fbytes[o]) {
			snprintf(f->err, sizeof(f->err), "%s is %llu bytes, %llu were hashed", rel,
			    (unsigned long long)size, (unsigned long long)f->cp.fbytes[o]);
			errno = EIO;
			return -1;
		}
		memcpy(hex, f->cp.fsha[o], 65);
		return 1;
	}
	return 0;
}

/* Reopen the output: exactly the kept tensors, under their new names,
 * with their dtypes and shapes. */
static int
verify_output(struct fctx *f, const char *dir)
{
	struct st_set out;
	if (st_set_open(&out, dir, f->err, sizeof(f->err)) == -1)
		return -1;
	int rc = 0;
	if (out.ntensors != f->nkept) {
		snprintf(f->err, sizeof(f->err), "output %s holds %zu tensors, %zu were kept", dir,
		    out.ntensors, f->nkept);
		rc = -1;
	}
	for (size_t i = 0; rc == 0 && i < f->nkept; i++) {
		const struct st_tensor *o = st_set_find(&out, f->kept[i].newname);
		const struct st_tensor *t = f->kept[i].t;
		int same = o && o->dtype == t->dtype && o->ndim == t->ndim && o->nbytes == t->nbytes;
		for (int d = 0; same && d < t->ndim; d++)
			same = o->shape[d] == t->shape[d];
		if (!same) {
			snprintf(f->err, sizeof(f->err), "output %s: tensor \"%s\" (was \"%s\") is "
			    "missing or differs", dir, f->kept[i].newname, t->name);
			rc = -1;
		}
	}
	st_set_close(&out);
	return rc;
}

static int
write_manifest(struct fctx *f)
{
	cJSON *m = cJSON_CreateObject(), *a;
	char *js = NULL;
	int rc = -1;
	if (m == NULL)
		goto nomem;
	cJSON_AddStringToObject(m, "input", f->input);
	cJSON_AddStringToObject(m, "output", f->output);
	cJSON *rules = cJSON_AddObjectToObject(m, "rules");
	a = cJSON_AddArrayToObject(rules, "drop");
	for (size_t i = 0; i < f->ndrop; i++) {
		cJSON *r = cJSON_CreateObject();
		cJSON_AddStringToObject(r, "pattern", f->drop[i].from);
		cJSON_AddNumberToObject(r, "matched", (double)f->drop[i].hits);
		cJSON_AddItemToArray(a, r);
	}
	a = cJSON_AddArrayToObject(rules, "rename");
	for (size_t i = 0; i < f->nren; i++) {
		cJSON *r = cJSON_CreateObject();
		cJSON_AddStringToObject(r, "from", f->ren[i].from);
		cJSON_AddStringToObject(r, "to", f->ren[i].to);
		cJSON_AddNumberToObject(r, "matched", (double)f->ren[i].hits);
		cJSON_AddItemToArray(a, r);
	}
	cJSON *ex = cJSON_AddObjectToObject(m, "expected");
	cJSON_AddNumberToObject(ex, "dropped", (double)f->want_dropped);
	cJSON_AddNumberToObject(ex, "kept", (double)f->want_kept);
	cJSON_AddStringToObject(ex, "source", f->want_source);
	cJSON_AddNumberToObject(m, "total", (double)f->in.ntensors);
	cJSON_AddNumberToObject(m, "dropped", (double)f->ndropped);
	cJSON_AddNumberToObject(m, "kept", (double)f->nkept);
	a = cJSON_AddArrayToObject(m, "tensors");
	if (a == NULL)
		goto nomem;
	for (size_t i = 0; i < f->nkept; i++) {
		const struct kept *k = &f->kept[i];
		cJSON *t = cJSON_CreateObject();
		if (t == NULL)
			goto nomem;
		cJSON_AddStringToObject(t, "old", k->t->name);
		cJSON_AddStringToObject(t, "new", k->newname);
		cJSON_AddStringToObject(t, "dtype", st_dtype_name(k->t->dtype));
		cJSON *sh = cJSON_AddArrayToObject(t, "shape");
		for (int d = 0; d < k->t->ndim; d++)
			cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)k->t->shape[d]));
		cJSON_AddNumberToObject(t, "bytes", (double)k->t->nbytes);
		cJSON_AddStringToObject(t, "sha256", k->sha);
		cJSON_AddStringToObject(t, "file", f->outnames[k->out_file]);
		cJSON_AddItemToArray(a, t);
	}
	a = cJSON_AddArrayToObject(m, "dropped_tensors");
	for (size_t i = 0; i < f->ndropped; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(f->dropped[i]->name));
	if ((js = cJSON_Print(m)) == NULL)
		goto nomem;
	size_t jl = strlen(js);
	js[jl] = '\n';
	if (plc_write_file_atomic(f->manifest, js, jl + 1, 0644) == -1) {
		snprintf(f->err, sizeof(f->err), "%s: %s", f->manifest, strerror(errno));
		goto out;
	}
	rc = 0;
	goto out;
nomem:
	snprintf(f->err, sizeof(f->err), "out of memory for the manifest");
out:
	cJSON_free(js);
	cJSON_Delete(m);
	return rc;
}

static int
fix_run(pl_job *job)
{
	struct fctx f;
	struct st_outdir od = { "", "" };
	char out_default[PATH_MAX], man_default[PATH_MAX + 32];
	int rc = PL_EFAIL;

	memset(&f, 0, sizeof(f));
	f.job = job;
	if ((f.input = host->input(job, "input")) == NULL)
		return host->fail(job, "tensor_fix: input cannot be resolved (no path given and "
		    "no upstream \"merged\" artifact)");
	const char *ok = host->get(job, "output");
	f.output = ok ? host->input(job, "output") : NULL;
	if (ok && f.output == NULL)
		return host->fail(job, "tensor_fix: output %s cannot be used", ok);
	if (f.output == NULL) {
		snprintf(out_default, sizeof(out_default), "%s/fixed", host->workdir(job));
		f.output = out_default;
	}
	const char *mk = host->get(job, "manifest");
	f.manifest = mk ? host->input(job, "manifest") : NULL;
	if (mk && f.manifest == NULL)
		return host->fail(job, "tensor_fix: manifest %s cannot be used", mk);
	if (f.manifest == NULL) {
		snprintf(man_default, sizeof(man_default), "%s.manifest.json", f.output);
		f.manifest = man_default;
	}
	if (parse_rules(host->get(job, "drop"), 0, &f.drop, &f.ndrop, f.err, sizeof(f.err)) == -1 ||
	    parse_rules(host->get(job, "rename"), 1, &f.ren, &f.nren, f.err, sizeof(f.err)) == -1)
		goto fail;
	if (st_set_open(&f.in, f.input, f.err, sizeof(f.err)) == -1)
		goto fail;
	f.cp.in = &f.in;
	if (stc_inputs_record(&f.cp) == -1) {
		snprintf(f.err, sizeof(f.err), "%s", f.cp.err);
		goto fail;
	}

	/* The counts are verified every time (G23). */
	int64_t gd = -1, gk = -1;
	int have_gemma = gemma3_counts(&f, &gd, &gk) == 0;
	const char *sd = host->get(job, "expect_dropped"), *sk = host->get(job, "expect_kept");
	f.want_dropped = sd ? host->get_int(job, "expect_dropped", 0) : gd;
	f.want_kept = sk ? host->get_int(job, "expect_kept", 0) : gk;
	if ((sd == NULL || sk == NULL) && !have_gemma) {
		snprintf(f.err, sizeof(f.err), "%s: config.json is not a Gemma 3 config, so the "
		    "expected counts cannot be derived: set expect_dropped and expect_kept "
		    "(G23: verify the count every time)", f.input);
		goto fail;
	}
	f.want_source = sd && sk ? "from the spec" : sd || sk ?
	    "from the spec and the Gemma 3 config.json" : "from the Gemma 3 config.json";
	if (plan(&f) == -1 || plan_files(&f) == -1)
		goto fail;
	host->log(job, PL_LOG_INFO, "tensor_fix: %s: %zu tensors, %zu dropped, %zu kept "
	    "(expected %lld and %lld, %s), %zu output file%s", f.input, f.in.ntensors,
	    f.ndropped, f.nkept, (long long)f.want_dropped, (long long)f.want_kept,
	    f.want_source, f.noutfiles, f.noutfiles == 1 ? "" : "s");

	if (st_outdir_begin(&od, f.output, f.err, sizeof(f.err)) == -1)
		goto fail;
	int r = copy_and_hash(&f, od.tmp);
	if (r == PL_ECANCELED) {
		rc = PL_ECANCELED;
		goto cleanup;
	}
	if (r != 0)
		goto fail;
	uint64_t bytes = 0;
	for (size_t i = 0; i < f.nkept; i++)
		bytes += f.kept[i].t->nbytes;
	int naux = 0;
	if (st_copy_aux_files(f.input, od.tmp, &naux, f.err, sizeof(f.err)) == -1)
		goto fail;
	if (f.in.sharded) {
		const char **names = calloc(f.nkept + 1, sizeof(*names));
		const char **files = calloc(f.nkept + 1, sizeof(*files));
		uint64_t total = 0;
		if (names == NULL || files == NULL) {
			free(names);
			free(files);
			snprintf(f.err, sizeof(f.err), "out of memory");
			goto fail;
		}
		for (size_t i = 0; i < f.nkept; i++) {
			names[i] = f.kept[i].newname;
			files[i] = f.outnames[f.kept[i].out_file];
			total += f.kept[i].t->nbytes;
		}
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/model.safetensors.index.json", od.tmp);
		r = st_write_index(p, f.nkept, names, files, total, f.err, sizeof(f.err));
		free(names);
		free(files);
		if (r == -1)
			goto fail;
	}
	if (verify_output(&f, od.tmp) == -1)
		goto fail;
	char dsha[65];
	f.err[0] = '\0';
	if (plc_sha256_dir_known(od.tmp, dsha, NULL, known_digest, &f) == -1) {
		if (f.err[0] == '\0')
			snprintf(f.err, sizeof(f.err), "%s: digest: %s", od.tmp, strerror(errno));
		goto fail;
	}
	/* The manifest describes the output, so it goes first: an output
	 * never appears without its manifest. */
	if (write_manifest(&f) == -1)
		goto fail;
	if (st_outdir_commit(&od, f.err, sizeof(f.err)) == -1) {
		unlink(f.manifest);
		goto fail;
	}
	host->log(job, PL_LOG_INFO, "tensor_fix: wrote %s (%zu tensors, %llu bytes copied, "
	    "%d other files) and %s", f.output, f.nkept, (unsigned long long)bytes, naux,
	    f.manifest);
	rc = host->artifact_digest(job, "fixed", f.output, dsha);
	if (rc != PL_OK || (rc = host->artifact(job, "manifest", f.manifest)) != PL_OK) {
		host->fail(job, "tensor_fix: registering the artifacts: %s", host->strerror(rc));
		goto cleanup;
	}
	char js[128];
	snprintf(js, sizeof(js), "{\"dropped\":%zu,\"kept\":%zu}", f.ndropped, f.nkept);
	host->event(job, "tensor_fix.counts", js);
	rc = PL_OK;
	goto cleanup;
fail:
	rc = host->fail(job, "tensor_fix: %s", f.err);
cleanup:
	st_outdir_abort(&od);
	fctx_free(&f);
	return rc;
}

static int
fix_check(pl_job *job)
{
	struct rule *r = NULL;
	size_t n = 0;
	char err[256];
	if (parse_rules(host->get(job, "rename"), 1, &r, &n, err, sizeof(err)) == -1)
		host->check_error(job, "rename", "%s", err);
	rules_free(r, n);
	return PL_OK;
}

static const struct pl_stage fix_stage = PL_STAGE(
	.name = "tensor_fix",
	.summary = "drop and rename checkpoint tensors for the GGUF converter, counts verified (G23)",
	.flags = PL_STAGE_REUSE,
	.keys = fix_keys,
	.check = fix_check,
	.run = fix_run);

PL_PLUGIN(&host, &fix_stage)
