/* reuse.c: reuse what did not change. Before a job's stage runs, on the
 * job's thread, its key is computed: the sha256 of the canonical text of
 * its parts,
 *   stage   the stage's name;
 *   code    the sha256 of the plugin that registered the stage and, for
 *           the stages that run job programs, of those programs and the
 *           Python lock (the jobs directory's *.py, jobs/pljob, jobs/engines,
 *           requirements.lock) and the stack the interpreter runs
 *           (its environment's pipeline-stack.json: stack_digest);
 *   keys    the stage's keys after defaults, but those marked
 *           PL_KEY_VOLATILE (threads, a server's address, a timeout) and
 *           the inputs;
 *   inputs  the sha256 of each input: an upstream's artifact by the digest
 *           its job recorded (an upstream that ran again and made the same
 *           bytes leaves the key as it was), a file or directory of the
 *           spec by its content;
 *   compared what the stage compares with, which decides its result as
 *           much as its inputs: corpus_check's previous index; probe's
 *           probe/real pairs (the probe_pair history); verify's
 *           previous GGUF, adapter and merged weights, and this run's
 *           adapter and merged weights (so that a verify whose previous
 *           version is another runs again: it never passes by a copy of
 *           itself);
 *   server  what the stage's reuse_key hook says its server holds (the
 *           Ollama version; the digests a bake's tag serves).
 * No run name, job name, position or path of the run's own directories
 * enters it. The key and its parts are stored with the job (explain reads
 * them). A job that may be reused (its stage's descriptor says so:
 * spec_reuse_off) and whose key is that of an earlier job that did its
 * work, of a run its submitter may read, whose artifacts are all still
 * there with the size and digest recorded, and which the stage's
 * reuse_check hook lets stand (register: the server still has the tag at
 * the manifest that job made), is not run: the scheduler ends it `reused`
 * and gives it copies of that job's artifact and value records, in the
 * transaction that records its state (store_reuse_copy). reuse_plan makes
 * the same decisions for a spec not submitted (`submit --plan`).
 *
 * Digests: a file's digest is kept in the store with its device, inode,
 * size, mtime and ctime, and is computed again only when one of those
 * changed; a directory's is the host's manifest digest (plc_sha256_dir_known)
 * over its files' kept digests. What the daemon hashed itself to record
 * an artifact is kept the same way (job_artifact_as, the backend's
 * digest_keep), so that the first reuse of a multi-GB artifact is a stat
 * per file; a digest a stage process reported is its owner's word and is
 * not kept. Inputs are read as the run's owner would read them, as its
 * stage would: in a split daemon through a file server the privileged
 * parent starts as the owner (owner_files_open(), priv.h: it opens, the
 * daemon hashes what it is given), else with the owner's rights on the
 * thread (owner_fs_enter); and hashed as artifacts are (digest_file):
 * bounded, blocking on nothing, and stopped by the job's cancel or
 * timeout. */
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pld.h"
#include "server.h"
#include "priv.h"
#include "plio.h"

static void ran_why(struct pl_job *pj, const char *key, const cJSON *parts, const char *note);
static void ran_why_stored(struct pl_job *pj);

/* The stages that run job programs from the jobs directory. */
static const char *const program_stages[] = { "tokenize", "probe", "train", NULL };
/* The job programs and the Python lock, relative to the jobs directory. */
static const char *const program_globs[] = { "*.py", "pljob/*.py", "engines/*.py",
	"requirements.lock", NULL };

static int
reuse_stop(void *arg)
{
	return job_cancelled(arg);
}

/* The run owner's files this thread reads while it decides a reuse
 * (reuse_try, the plan): their file server's, or the daemon's own calls
 * with the owner's rights (owner_files_open()); NULL outside. */
static __thread struct owner_files *reuse_of;

static char *
in_realpath(const char *path, char *real)
{
	if (reuse_of == NULL)
		return realpath(path, real);
	char *r = owner_files_realpath(reuse_of, path);
	if (r == NULL)
		return NULL;
	int fits = snprintf(real, PATH_MAX, "%s", r) < PATH_MAX;
	free(r);
	if (!fits)
		errno = ENAMETOOLONG;
	return fits ? real : NULL;
}

static int
in_stat(const char *path, struct stat *sb)
{
	return reuse_of != NULL ? owner_files_stat(reuse_of, path, sb, 0) : stat(path, sb);
}

/* What hashing a file saw of it once read: its caller keeps the digest
 * only if that is still the stat it started from. */
struct digest_after {
	int seen;
	struct stat st;
};

static void
digest_hashed(void *arg, const char *path, const struct stat *sb, const struct stat *after,
    const char hex[65])
{
	struct digest_after *a = arg;
	(void)path, (void)sb, (void)hex;
	a->st = *after;
	a->seen = 1;
}

/* path's digest through the store's cache: 0, or -1 (errno set). Read
 * as a job's artifacts are (plc_sha256_path_ctl): the path resolved
 * first, then nothing followed and nothing blocked on (a FIFO swapped in
 * is refused, not waited for), at most artifact_max_size bytes, and given
 * up when pj (NULL: the daemon's own files) is cancelled or times out. */
static int
digest_file(pl_job *pj, struct store *s, const char *path, const struct stat *sb, char hex[65])
{
	struct store_digest d;
	store_digest_of(&d, path, sb);
	if (store_digest_get(s, &d, hex) == 0)
		return 0;
	char real[PATH_MAX];
	uint64_t bytes;
	struct digest_after after = { 0 };
	struct plc_hash_ctl ctl = { .max = pj ? JOB_ARTIFACT_MAX(pj) : 0,
	    .stop = pj ? reuse_stop : NULL, .arg = pj, .fs = reuse_of ? reuse_of->fs : NULL,
	    .hashed = digest_hashed, .hashed_arg = &after };
	if (in_realpath(path, real) == NULL || plc_sha256_path_ctl(real, hex, &bytes, &ctl) == -1)
		return -1;
	/* Changed while it was read (sb, the stat the caller took, against
	 * the descriptor's once read): not kept, and the next look reads it
	 * again. */
	if (store_begin(s) == 0) {
		store_digest_keep(s, path, sb, after.seen ? &after.st : NULL, hex);
		store_commit(s);
	}
	return 0;
}

struct dir_known {
	pl_job *pj;
	struct store *s;
	const char *root;
};

static int
dir_known(void *arg, const char *rel, uint64_t size, char hex[65])
{
	struct dir_known *k = arg;
	char full[PATH_MAX];
	struct stat sb;
	snprintf(full, sizeof(full), "%s/%s", k->root, rel);
	if (in_stat(full, &sb) == -1 || (uint64_t)sb.st_size != size)
		return 0; /* the walk reads it, and fails as it should */
	return digest_file(k->pj, k->s, full, &sb, hex) == 0 ? 1 : -1;
}

/* The same, for plc_sha256_path_ctl's walk through a file server: the
 * file by its path below the directory. */
static int
dir_known_ctl(void *arg, const char *path, uint64_t *size, char hex[65])
{
	struct dir_known *k = arg;
	struct stat sb;
	if (in_stat(path, &sb) == -1 || !S_ISREG(sb.st_mode))
		return 0;
	*size = (uint64_t)sb.st_size;
	return digest_file(k->pj, k->s, path, &sb, hex) == 0 ? 1 : -1;
}

/* A file's or directory's digest, by the host's definition (job_digest),
 * through the cache. size: its bytes, or NULL. */
static int
digest_path(pl_job *pj, struct store *s, const char *path, char hex[65], int64_t *size)
{
	struct stat sb;
	if (in_stat(path, &sb) == -1)
		return -1;
	if (S_ISDIR(sb.st_mode)) {
		struct dir_known k = { pj, s, path };
		uint64_t bytes = 0;
		int rc;
		if (reuse_of != NULL && reuse_of->fs != NULL) {
			/* The same digest, walked through the owner's file
			 * server: nothing followed below the directory. */
			char real[PATH_MAX];
			struct plc_hash_ctl ctl = { .max = pj ? JOB_ARTIFACT_MAX(pj) : 0,
			    .stop = pj ? reuse_stop : NULL, .arg = pj, .fs = reuse_of->fs,
			    .known = dir_known_ctl, .known_arg = &k };
			rc = in_realpath(path, real) == NULL ? -1 :
			    plc_sha256_path_ctl(real, hex, &bytes, &ctl);
		} else
			rc = plc_sha256_dir_known(path, hex, &bytes, dir_known, &k);
		if (size)
			*size = (int64_t)bytes;
		return rc;
	}
	if (!S_ISREG(sb.st_mode)) {
		errno = EINVAL;
		return -1;
	}
	if (size)
		*size = (int64_t)sb.st_size;
	return digest_file(pj, s, path, &sb, hex);
}

static int
in_list(const char *const *l, const char *w)
{
	for (int i = 0; l[i]; i++)
		if (strcmp(l[i], w) == 0)
			return 1;
	return 0;
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The digest of the job programs below dir: of the sorted lines
 * "NAME SHA256", or the reason it has none. */
static void
programs_digest(struct store *s, const char *dir, cJSON *code)
{
	char *text = xstrdup("");
	size_t len = 0;
	for (int g = 0; program_globs[g]; g++) {
		char pat[PATH_MAX];
		glob_t gl;
		snprintf(pat, sizeof(pat), "%s/%s", dir, program_globs[g]);
		if (glob(pat, 0, NULL, &gl) != 0)
			continue;
		qsort(gl.gl_pathv, gl.gl_pathc, sizeof(char *), cmp_name);
		for (size_t i = 0; i < gl.gl_pathc; i++) {
			char hex[65];
			if (digest_path(NULL, s, gl.gl_pathv[i], hex, NULL) == -1)
				snprintf(hex, sizeof(hex), "unreadable");
			const char *rel = gl.gl_pathv[i] + strlen(dir) + 1;
			size_t n = strlen(rel) + strlen(hex) + 3;
			text = realloc(text, len + n);
			if (text == NULL)
				fatal("realloc");
			len += (size_t)snprintf(text + len, n, "%s %s\n", rel, hex);
		}
		globfree(&gl);
	}
	char hex[65];
	plc_sha256_buf(text, len, hex);
	free(text);
	cJSON_AddStringToObject(code, "programs", len ? hex : "none");
}

/*
 * The Python stack the job programs run on: the environment's
 * pipeline-stack.json beside its bin/ (tests/tools/pyenv.sh writes it:
 * the stack, its lock and the lock's digest), so that a job run on
 * another stack, or on a rebuilt one behind the same path, is not taken
 * for this one's; an interpreter without that file (an operator's own) by
 * the digest of the interpreter itself.
 */
static void
stack_digest(struct pl_job *pj, cJSON *code)
{
	const char *py = plugin_host.get(pj, "python");
	if (py == NULL || *py == '\0')
		py = pj->conf->python[0] ? pj->conf->python : "/usr/bin/python3";
	char file[PATH_MAX], real[PATH_MAX], hex[65];
	snprintf(file, sizeof(file), "%s", py);
	char *slash = strrchr(file, '/');
	if (slash != NULL) {
		*slash = '\0';
		slash = strrchr(file, '/');
	}
	if (slash != NULL) {
		snprintf(slash, sizeof(file) - (size_t)(slash - file), "/pipeline-stack.json");
		if (digest_path(pj, pj->store, file, hex, NULL) == 0) {
			cJSON_AddStringToObject(code, "python stack", hex);
			return;
		}
	}
	if (in_realpath(py, real) != NULL && digest_path(pj, pj->store, real, hex, NULL) == 0)
		cJSON_AddStringToObject(code, "python (no lock)", hex);
	else
		cJSON_AddStringToObject(code, "python (no lock)", "unreadable");
}

/* An input's digest: an artifact of this run by the digest its job
 * recorded, else the content at path. */
static void
input_digest(struct pl_job *pj, const char *path, char out[80])
{
	char hex[65];
	for (int i = 0; pj->plan != NULL && i < pj->plan->n; i++)
		if (strcmp(pj->plan->a[i].path, path) == 0) {
			snprintf(out, 80, "%s", pj->plan->a[i].sha256);
			return;
		}
	if ((pj->plan == NULL &&
	    store_artifact_digest_in_run(pj->store, pj->run_id, path, hex) == 0) ||
	    digest_path(pj, pj->store, path, hex, NULL) == 0)
		snprintf(out, 80, "%s", hex);
	else
		snprintf(out, 80, "unreadable: %s", strerror(errno));
}

/* When key is set: the digest of what it names as cmp's label; 1. */
static int
key_path_digest(struct pl_job *pj, cJSON *paths, const char *key, cJSON *cmp,
    const char *label)
{
	const char *v = spec_get(pj->sec, key);
	if (v == NULL || *v == '\0')
		return 0;
	cJSON *p = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(paths, key),
	    "path");
	char d[80];
	if (cJSON_IsString(p))
		input_digest(pj, p->valuestring, d);
	else
		snprintf(d, sizeof(d), "unresolved");
	cJSON_AddStringToObject(cmp, label, d);
	return 1;
}

/* The digest of run's artifact name (the newest), or that the JSON value
 * value (when not NULL) of the run records as {"NAME": {"sha256"}}, as
 * cmp's label; "none" when there is none. */
static void
compared_add(struct pl_job *pj, cJSON *cmp, const char *label, const char *run,
    const char *name, const char *value)
{
	char path[PATH_MAX], sha[65] = "none";
	if (run == NULL || *run == '\0') {
		cJSON_AddStringToObject(cmp, label, "none");
		return;
	}
	char *v = value ? store_value_get(pj->store, run, NULL, value) : NULL;
	cJSON *j = v ? cJSON_Parse(v) : NULL;
	cJSON *h = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, name),
	    "sha256");
	if (cJSON_IsString(h) && strlen(h->valuestring) == 64)
		snprintf(sha, sizeof(sha), "%s", h->valuestring);
	else if (pj->hb->artifact_find(pj, run, NULL, name, path, sizeof(path), sha) != PL_OK)
		snprintf(sha, sizeof(sha), "none");
	cJSON_Delete(j);
	free(v);
	cJSON_AddStringToObject(cmp, label, sha);
}

/* What the stage says the key must hold besides its keys and files
 * (pl_stage.reuse_key: "NAME=VALUE" lines), as parts.server; -1 with why
 * when it cannot tell (its server does not answer): then the job is not
 * reused. */
static int
server_parts(struct pl_job *pj, cJSON *parts, char *why, size_t len)
{
	const struct pl_stage *st = pj->reg->st;
	if (st->reuse_key == NULL)
		return 0;
	char buf[2048] = "";
	cJSON *srv = cJSON_AddObjectToObject(parts, "server");
	int rc = st->reuse_key(pj, buf, sizeof(buf));
	if (rc != PL_OK) {
		snprintf(why, len, "stage %s cannot say what its server holds: %s", st->name,
		    buf[0] ? buf : plugin_host.strerror(rc));
		cJSON_AddStringToObject(srv, "unknown", buf[0] ? buf : plugin_host.strerror(rc));
		return -1;
	}
	char *save = NULL;
	for (char *l = strtok_r(buf, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(l, '=');
		if (eq == NULL || eq == l)
			continue;
		*eq = '\0';
		cJSON_DeleteItemFromObjectCaseSensitive(srv, l);
		cJSON_AddStringToObject(srv, l, eq + 1);
	}
	return 0;
}

/* The parts of pj's key (see the top). When the job cannot be reused
 * whatever its key (its stage's server cannot say what it holds), why is
 * written to unknown; else unknown is "". */
static cJSON *
key_parts(struct pl_job *pj, char *unknown, size_t unknownlen)
{
	const struct pl_stage *stg = pj->reg->st;
	cJSON *parts = cJSON_CreateObject();
	cJSON_AddStringToObject(parts, "stage", stg->name);
	unknown[0] = '\0';
	cJSON *code = cJSON_AddObjectToObject(parts, "code");
	char hex[65];
	/* The code is the daemon's (the plugin it loaded, the job programs
	 * and the Python stack its configuration names), read with its own
	 * rights, not through the owner's file server: a job of no input
	 * then asks for no server at all. */
	struct owner_files *of = reuse_of;
	reuse_of = NULL;
	if (pj->reg->plugin != NULL && digest_path(pj, pj->store, pj->reg->plugin->path, hex,
	    NULL) == 0)
		cJSON_AddStringToObject(code, "plugin", hex);
	else
		cJSON_AddStringToObject(code, "plugin", "unknown");
	if (in_list(program_stages, stg->name)) {
		const char *jd = plugin_host.get(pj, "jobs_dir");
		programs_digest(pj->store, jd && *jd ? jd : pj->conf->jobs_dir, code);
		stack_digest(pj, code);
	}
	reuse_of = of;
	/* The keys and the inputs, each by name in order. */
	const struct pl_key *k;
	int n = 0;
	for (int i = 0; host_key(pj->reg, i) != NULL; i++)
		n++;
	const char **names = xcalloc((size_t)n + 1, sizeof(*names));
	for (int i = 0; i < n; i++)
		names[i] = host_key(pj->reg, i)->name;
	qsort(names, (size_t)n, sizeof(*names), cmp_name);
	cJSON *keys = cJSON_AddObjectToObject(parts, "keys");
	cJSON *inputs = cJSON_AddObjectToObject(parts, "inputs");
	cJSON *paths = host_inputs_resolve(pj);
	for (int i = 0; i < n; i++) {
		k = host_find_key(pj->reg, names[i], NULL);
		if (k->flags & PL_KEY_VOLATILE)
			continue;
		int content = k->type == PL_KEY_INPUT ||
		    (k->type == PL_KEY_PATH && (k->flags & (PL_KEY_FILE | PL_KEY_DIR)));
		if (!content) {
			const char *v = plugin_host.get(pj, k->name);
			if (v != NULL)
				cJSON_AddStringToObject(keys, k->name, v);
			continue;
		}
		cJSON *e = cJSON_GetObjectItemCaseSensitive(paths, k->name);
		cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "path");
		char d[80];
		const char *set = spec_get(pj->sec, k->name);
		if ((set == NULL || *set == '\0') && k->artifact == NULL && k->def == NULL)
			continue; /* an input the job does not use */
		if (cJSON_IsString(p))
			input_digest(pj, p->valuestring, d);
		else
			snprintf(d, sizeof(d), "unresolved");
		cJSON_AddStringToObject(inputs, k->name, d);
	}
	free(names);
	/* What a stage compares with is an input too: verify's "differs from
	 * the previous version" must be decided again when the previous
	 * version is another, never taken from a copy of itself. */
	if (strcmp(stg->name, "corpus_check") == 0) {
		cJSON *cmp = cJSON_AddObjectToObject(parts, "compared");
		const char *prev = plugin_host.get(pj, "previous");
		if (prev == NULL || *prev == '\0')
			prev = pj->spec ? pj->spec->previous : NULL;
		if (prev != NULL && strchr(prev, '/') != NULL) {
			char d[80];
			input_digest(pj, prev, d);
			cJSON_AddStringToObject(cmp, "previous index", d);
		} else
			compared_add(pj, cmp, "previous index", prev, "index", NULL);
	} else if (strcmp(stg->name, "probe") == 0) {
		/* The probe's over-estimate is the mean of the newest probe/real
		 * pairs train runs stored: the pairs there now decide its
		 * result as much as its inputs (a probe after a train run that
		 * added a pair calibrates anew, never by a copy of one before). */
		cJSON *cmp = cJSON_AddObjectToObject(parts, "compared");
		char *hist = plugin_host.value_history(pj, "probe_pair", 1000);
		char d[65];
		plc_sha256_buf(hist ? hist : "", hist ? strlen(hist) : 0, d);
		cJSON_AddStringToObject(cmp, "probe_pair history", d);
		free(hist);
	} else if (strcmp(stg->name, "verify") == 0) {
		cJSON *cmp = cJSON_AddObjectToObject(parts, "compared");
		const char *prev = pj->spec ? pj->spec->previous : NULL;
		static const char *const what[] = { "gguf", "adapter", "merged", NULL };
		for (int i = 0; what[i]; i++) {
			char pk[64], label[80];
			snprintf(pk, sizeof(pk), "previous_%s", what[i]);
			snprintf(label, sizeof(label), "previous %s", what[i]);
			if (!key_path_digest(pj, paths, pk, cmp, label))
				compared_add(pj, cmp, label, prev, what[i], strcmp(what[i], "gguf") == 0 ?
				    "verify" : NULL);
			if (i > 0 && !key_path_digest(pj, paths, what[i], cmp, what[i]))
				compared_add(pj, cmp, what[i], pj->run, what[i], NULL);
		}
	}
	cJSON_Delete(paths);
	server_parts(pj, parts, unknown, unknownlen);
	return parts;
}

/* Whether the files of an earlier job's artifacts are there as recorded;
 * why not in why. */
static int
artifacts_intact(struct pl_job *pj, int64_t job_id, char *why, size_t len)
{
	struct reuse_art *a;
	int n;
	if (store_job_artifact_rows(pj->store, job_id, &a, &n) == -1) {
		snprintf(why, len, "its artifacts cannot be read from the store");
		return 0;
	}
	int ok = 1;
	for (int i = 0; i < n && ok; i++) {
		char hex[65];
		int64_t size = 0;
		if (a[i].removed) {
			snprintf(why, len, "its artifact %s (%s) was removed by gc", a[i].name,
			    a[i].path);
			ok = 0;
		} else if (digest_path(pj, pj->store, a[i].path, hex, &size) == -1) {
			snprintf(why, len, "its artifact %s (%s) cannot be read: %s", a[i].name,
			    a[i].path, strerror(errno));
			ok = 0;
		} else if (size != a[i].size || strcmp(hex, a[i].sha256) != 0) {
			snprintf(why, len, "its artifact %s (%s) changed on disk: recorded %" PRId64
			    " bytes sha256 %.16s, now %" PRId64 " bytes sha256 %.16s", a[i].name,
			    a[i].path, a[i].size, a[i].sha256, size, hex);
			ok = 0;
		}
	}
	free(a);
	return ok;
}

/* The earlier job of key key whose work stands for pj's: one the viewer
 * may read, whose artifacts are there as recorded and whose stage says
 * what it made outside them still stands (reuse_check). 1 with it in
 * *out, or 0, with in note why the first of the same key was not taken
 * (or "" when there was none). */
static int
reuse_find(struct pl_job *pj, const char *key, int64_t viewer, struct reuse_cand *out,
    char *note, size_t notelen)
{
	struct reuse_cand *c = NULL;
	int nc = 0, found = 0;
	note[0] = '\0';
	if (store_reuse_candidates(pj->store, key, pj->job_id, &c, &nc) == -1)
		return 0;
	for (int i = 0; i < nc && !found; i++) {
		char why[PATH_MAX + 256] = "";
		if (!access_run(viewer, c[i].submitter))
			continue;
		int ok = artifacts_intact(pj, c[i].job_id, why, sizeof(why));
		if (ok && pj->reg->st->reuse_check != NULL) {
			int rc = pj->reg->st->reuse_check(pj, c[i].run, c[i].job, why, sizeof(why));
			if (rc != PL_OK && why[0] == '\0')
				snprintf(why, sizeof(why), "stage %s refused it: %s",
				    pj->reg->st->name, plugin_host.strerror(rc));
			ok = rc == PL_OK;
		}
		if (!ok) {
			if (note[0] == '\0')
				snprintf(note, notelen, "job %s of run %s had the same key, but %s",
				    c[i].job, c[i].run, why);
			continue;
		}
		*out = c[i];
		found = 1;
	}
	free(c);
	return found;
}

int
reuse_try(struct pl_job *pj)
{
	pj->reuse_src = 0;
	if (pj->store == NULL || pj->reg == NULL)
		return 0;
	/* A re-entered attempt whose stage started processes runs on. */
	if (pj->adopted) {
		struct proc_row *rows = NULL;
		int n = 0;
		if (store_attempt_procs(pj->store, pj->attempt_id, &rows, &n) == -1 || n > 0) {
			free(rows);
			ran_why_stored(pj);
			return 0;
		}
		free(rows);
	}
	struct owner_files of;
	if (owner_files_open(&of, pj->owner) == -1) {
		job_logf(pj, "reuse: cannot take the rights of the run's owner: %s",
		    strerror(errno));
		return 0;
	}
	reuse_of = &of;
	char note[1024] = "", off[160];
	cJSON *parts = key_parts(pj, note, sizeof(note));
	char *text = cJSON_PrintUnformatted(parts);
	char key[65];
	plc_sha256_buf(text, strlen(text), key);
	int allowed = spec_reuse_off(pj->spec, pj->sec, off, sizeof(off)) == NULL;
	struct reuse_cand c;
	if (!allowed)
		snprintf(note, sizeof(note), "%s (pipeline.ini(5) reuse)", off);
	else if (note[0] == '\0' && reuse_find(pj, key, hstore_viewer(pj), &c, note, sizeof(note))) {
		pj->reuse_src = c.job_id;
		snprintf(pj->reuse_msg, sizeof(pj->reuse_msg), "reused job %s of run %s",
		    c.job, c.run);
	}
	reuse_of = NULL;
	owner_files_close(&of);
	if (store_begin(pj->store) == 0) {
		store_job_key_set(pj->store, pj->job_id, key, text, note[0] ? note : NULL);
		store_commit(pj->store);
	}
	if (allowed && pj->reuse_src == 0)
		ran_why(pj, key, parts, note);
	job_logf(pj, "key %s%s", key, allowed ? "" : " (this job is not reused: see"
	    " pipeline.ini(5) reuse)");
	if (note[0])
		job_logf(pj, "not reused: %s", note);
	if (pj->reuse_src)
		job_logf(pj, "%s: its key is this job's; its artifacts are there as recorded",
		    pj->reuse_msg);
	free(text);
	cJSON_Delete(parts);
	return pj->reuse_src != 0;
}

/* explain's text: why the job ran, or what it took. */
static void
line_add(cJSON *lines, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
line_add(cJSON *lines, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	cJSON_AddItemToArray(lines, cJSON_CreateString(buf));
}

static const char *
jstr_or(const cJSON *o, const char *k, const char *def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : def;
}

/* The differences between two objects of strings, one line each:
 * "WHAT NAME: OLD -> NEW". */
static int
diff_obj(cJSON *lines, const char *what, const cJSON *a, const cJSON *b)
{
	int n = 0;
	const cJSON *x;
	cJSON_ArrayForEach(x, b) {
		const char *old = jstr_or(a, x->string, NULL);
		const char *new = cJSON_IsString(x) ? x->valuestring : "?";
		if (old == NULL)
			line_add(lines, "%s %s: (unset) -> %s", what, x->string, new);
		else if (strcmp(old, new) != 0)
			line_add(lines, "%s %s: %s -> %s", what, x->string, old, new);
		else
			continue;
		n++;
	}
	cJSON_ArrayForEach(x, a) {
		if (cJSON_GetObjectItemCaseSensitive(b, x->string) == NULL) {
			line_add(lines, "%s %s: %s -> (unset)", what, x->string,
			    cJSON_IsString(x) ? x->valuestring : "?");
			n++;
		}
	}
	return n;
}

/* Why a job of stage with key and parts (a JSON object) and note ran,
 * against near, the nearest earlier job of its stage: lines of lines, the
 * reasons prefixed with pre ("ran: " for explain; "" for a plan, whose
 * line is the note alone when there is one, and else names near without
 * its key). */
static void
why_lines(cJSON *lines, const char *pre, const char *stage, const char *key,
    const cJSON *parts, const char *note, const cJSON *near)
{
	if (note != NULL)
		line_add(lines, "%s%s", pre, note);
	if (note != NULL && *pre == '\0')
		return; /* a plan's line: the note says why */
	if (near == NULL) {
		line_add(lines, "%sno earlier run of stage %s", pre, stage);
		return;
	}
	const char *nkey = jstr_or(near, "key", "");
	if (*pre != '\0')
		line_add(lines, "nearest earlier: job %s of run %s (%s), key %s",
		    jstr_or(near, "job", "?"), jstr_or(near, "run", "?"),
		    jstr_or(near, "state", "?"), nkey);
	else /* a plan's line: the changes say the rest */
		line_add(lines, "against job %s of run %s", jstr_or(near, "job", "?"),
		    jstr_or(near, "run", "?"));
	if (strcmp(nkey, key) == 0) {
		if (note == NULL)
			line_add(lines, "%sthe same key%s", pre, parts ? ", but reuse is off for this"
			    " job (pipeline.ini(5) reuse)" : "");
		return;
	}
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(near, "parts");
	int n = 0;
	static const char *const objs[][2] = { { "code", "code" }, { "server", "server" },
	    { "keys", "key" }, { "inputs", "input" }, { "compared", "compared" } };
	for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
		n += diff_obj(lines, objs[i][1], cJSON_GetObjectItemCaseSensitive(a, objs[i][0]),
		    cJSON_GetObjectItemCaseSensitive(parts, objs[i][0]));
	if (n == 0)
		line_add(lines, "the parts are the same but the keys differ (a daemon of"
		    " another key's form?)");
}

/* Why pj, a job that may be reused, runs, in a line (pj->ran_why), for
 * the message status, watch and the page show once it is done: the note
 * (an earlier job of the same key that was not taken, and why), else
 * what changed against the nearest earlier job of its stage, as explain
 * and a plan say it, or that there is none. */
static void
ran_why(struct pl_job *pj, const char *key, const cJSON *parts, const char *note)
{
	pj->ran_why[0] = '\0';
	if (note != NULL && *note != '\0') {
		snprintf(pj->ran_why, sizeof(pj->ran_why), "ran: %s", note);
		return;
	}
	cJSON *q = store_q_explain(pj->store, pj->run, pj->name, hstore_viewer(pj));
	cJSON *lines = cJSON_CreateArray();
	why_lines(lines, "", pj->sec->stage, key, parts, NULL,
	    q ? cJSON_GetObjectItemCaseSensitive(q, "nearest") : NULL);
	struct plc_sb sb;
	plc_sb_init(&sb, pj->ran_why, sizeof(pj->ran_why));
	plc_sb_append(&sb, "ran:");
	int n = 0;
	const cJSON *l;
	cJSON_ArrayForEach(l, lines) {
		/* "against job J of run R" names what the rest compares with. */
		if (!cJSON_IsString(l) || strncmp(l->valuestring, "against ", 8) == 0 || n == 3)
			continue;
		plc_sb_append(&sb, n++ ? "; " : " ");
		plc_sb_append(&sb, l->valuestring);
	}
	if (cJSON_GetArraySize(lines) > n + 1 && n == 3)
		plc_sb_append(&sb, "; ... (pipelinectl explain)");
	cJSON_Delete(lines);
	cJSON_Delete(q);
}

/* ran_why() of a job re-entered after a restart with its processes
 * running: from the key, parts and note recorded before the restart. */
static void
ran_why_stored(struct pl_job *pj)
{
	char off[160];
	pj->ran_why[0] = '\0';
	if (spec_reuse_off(pj->spec, pj->sec, off, sizeof(off)) != NULL)
		return;
	cJSON *q = store_q_explain(pj->store, pj->run, pj->name, hstore_viewer(pj));
	cJSON *me = cJSON_GetObjectItemCaseSensitive(q, "job");
	const char *key = jstr_or(me, "key", NULL);
	if (key != NULL)
		ran_why(pj, key, cJSON_GetObjectItemCaseSensitive(me, "parts"),
		    jstr_or(me, "note", NULL));
	cJSON_Delete(q);
}

cJSON *
reuse_explain(struct store *s, const char *run, const char *job, int64_t viewer)
{
	cJSON *q = store_q_explain(s, run, job, viewer);
	if (q == NULL)
		return NULL;
	cJSON *me = cJSON_GetObjectItemCaseSensitive(q, "job");
	cJSON *near = cJSON_GetObjectItemCaseSensitive(q, "nearest");
	cJSON *lines = cJSON_AddArrayToObject(q, "lines");
	const char *state = jstr_or(me, "state", "?");
	const char *key = jstr_or(me, "key", NULL);
	line_add(lines, "%s/%s: %s (stage %s)", run, job, state, jstr_or(me, "stage", "?"));
	if (key == NULL) {
		line_add(lines, "no key: the job has not started since reuse came");
		return q;
	}
	line_add(lines, "key %s", key);
	if (strcmp(state, "reused") == 0) {
		line_add(lines, "reused: took the artifacts and values of job %s of run %s"
		    " (the same key)", jstr_or(me, "from_job", "?"), jstr_or(me, "from_run", "?"));
		return q;
	}
	why_lines(lines, "ran: ", jstr_or(me, "stage", "?"), key,
	    cJSON_GetObjectItemCaseSensitive(me, "parts"), jstr_or(me, "note", NULL), near);
	return q;
}

/* The artifacts a planned reuse of job src gives job name. */
static void
plan_add(struct reuse_plan *plan, struct store *s, int64_t src, const char *name)
{
	struct reuse_art *a;
	int n;
	if (store_job_artifact_rows(s, src, &a, &n) == -1)
		return;
	for (int i = 0; i < n; i++) {
		if (a[i].removed)
			continue;
		plan->a = reallocarray(plan->a, (size_t)plan->n + 1, sizeof(*plan->a));
		if (plan->a == NULL)
			fatal("reallocarray");
		struct plan_art *p = &plan->a[plan->n++];
		snprintf(p->job, sizeof(p->job), "%s", name);
		snprintf(p->name, sizeof(p->name), "%s", a[i].name);
		snprintf(p->path, sizeof(p->path), "%s", a[i].path);
		memcpy(p->sha256, a[i].sha256, sizeof(p->sha256));
	}
	free(a);
}

/* One job of the plan: whether an earlier job stands for it, as
 * reuse_try would find now. 1: reused (added to plan). */
static int
plan_job(struct store *s, const struct conf *c, const struct spec *spec,
    const struct spec_section *sec, int64_t viewer, struct reuse_plan *plan, cJSON *e)
{
	const struct stage_reg *reg = plugin_stage(sec->stage);
	cJSON *why = cJSON_GetObjectItemCaseSensitive(e, "why");
	if (reg == NULL) {
		line_add(why, "no plugin provides stage %s", sec->stage);
		return 0;
	}
	struct pl_job *pj = job_new(JOB_MODE_PLAN, &host_store, reg, spec, sec);
	pj->conf = c;
	pj->store = s;
	pj->owner = spec->owner;
	pj->plan = plan;
	struct owner_files of;
	int reused = 0;
	if (owner_files_open(&of, pj->owner) == -1) {
		line_add(why, "its inputs cannot be read with the rights of the run's owner: %s",
		    strerror(errno));
		job_free(pj);
		return 0;
	}
	reuse_of = &of;
	char note[1024] = "";
	cJSON *parts = key_parts(pj, note, sizeof(note));
	char *text = cJSON_PrintUnformatted(parts);
	char key[65];
	plc_sha256_buf(text, strlen(text), key);
	free(text);
	cJSON_AddStringToObject(e, "key", key);
	struct reuse_cand rc;
	if (note[0] == '\0' && reuse_find(pj, key, viewer, &rc, note, sizeof(note))) {
		cJSON_ReplaceItemInObjectCaseSensitive(e, "action", cJSON_CreateString("reuse"));
		cJSON_AddStringToObject(e, "from_run", rc.run);
		cJSON_AddStringToObject(e, "from_job", rc.job);
		line_add(why, "the same key as job %s of run %s, whose artifacts are there as"
		    " recorded%s", rc.job, rc.run, reg->st->reuse_check ? " and whose stage says"
		    " what it made still stands" : "");
		plan_add(plan, s, rc.job_id, sec->name);
		reused = 1;
	} else {
		cJSON *near = store_q_nearest(s, reg->st->name, sec->name, 0, viewer);
		why_lines(why, "", reg->st->name, key, parts, note[0] ? note : NULL, near);
		cJSON_Delete(near);
	}
	reuse_of = NULL;
	owner_files_close(&of);
	cJSON_Delete(parts);
	job_free(pj);
	return reused;
}

/* A job after one that runs: its inputs are known only then, unless no
 * earlier job of its stage was ever run. */
static void
plan_after(struct store *s, const struct spec_section *sec, const char *after, int64_t viewer,
    cJSON *why)
{
	cJSON *near = store_q_nearest(s, sec->stage, sec->name, 0, viewer);
	if (near == NULL)
		line_add(why, "no earlier run of stage %s", sec->stage);
	else
		line_add(why, "runs after %s, which runs: its inputs are known only then"
		    " (if they come out the same, it is still reused)", after);
	cJSON_Delete(near);
}

cJSON *
reuse_plan(struct store *s, const struct conf *c, const struct spec *spec, int64_t viewer)
{
	int n = spec->njobs;
	int **dep = xcalloc((size_t)n + 1, sizeof(*dep));
	for (int i = 0; i < n; i++)
		dep[i] = xcalloc((size_t)spec->jobs[i]->nafter + 1, sizeof(**dep));
	spec_after_index(spec, dep);
	/* 0: not planned yet, 1: runs, 2: reused. */
	char *done = xcalloc((size_t)n + 1, 1);
	struct reuse_plan plan = { NULL, 0 };
	cJSON *out = cJSON_CreateArray();
	for (int left = n, progress = 1; left > 0 && progress;) {
		progress = 0;
		for (int i = 0; i < n; i++) {
			const struct spec_section *sec = spec->jobs[i];
			int ready = !done[i], runs = -1;
			for (int k = 0; ready && k < sec->nafter; k++) {
				if (dep[i][k] < 0)
					continue;
				if (!done[dep[i][k]])
					ready = 0;
				else if (done[dep[i][k]] == 1 && runs < 0)
					runs = dep[i][k];
			}
			if (!ready)
				continue;
			cJSON *e = cJSON_CreateObject();
			cJSON_AddStringToObject(e, "job", sec->name);
			cJSON_AddStringToObject(e, "stage", sec->stage ? sec->stage : "?");
			cJSON_AddStringToObject(e, "action", "run");
			cJSON *why = cJSON_AddArrayToObject(e, "why");
			char off[160];
			done[i] = 1;
			if (spec_reuse_off(spec, sec, off, sizeof(off)) != NULL)
				line_add(why, "%s", off);
			else if (runs >= 0) {
				cJSON_AddStringToObject(e, "after", spec->jobs[runs]->name);
				plan_after(s, sec, spec->jobs[runs]->name, viewer, why);
			} else if (plan_job(s, c, spec, sec, viewer, &plan, e))
				done[i] = 2;
			cJSON_AddItemToArray(out, e);
			left--;
			progress = 1;
		}
	}
	for (int i = 0; i < n; i++)
		free(dep[i]);
	free(dep);
	free(done);
	free(plan.a);
	return out;
}
