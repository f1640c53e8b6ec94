/*
 * gc.c: disk accounting and reclaiming (pipelinectl du and gc,
 * pipelined.conf(5) [retention]).
 *
 * du: the bytes each run's artifact records hold (store_gc.c) and what
 * its directory, state_dir/runs/NAME, holds on disk, walked without
 * following a link.
 *
 * gc: a plan over the store's runs and artifact records, then the
 * removal. Kept: every run that is not final (queued, running, ...),
 * the newest promoted run of each alias and keep_promoted promoted to it
 * before, every run submitted in the last keep_days days, and every run a
 * kept run references (its previous run, a *_run key naming it, a path
 * into its directory in the spec), transitively. Of the rest, the records
 * of artifacts of min_size bytes or more are marked removed (when, by
 * whom) in a committed transaction, and only then are their files
 * unlinked: a file whose every record is marked. A file another record
 * holds (a kept run's, another user's, one below min_size) stays: a file
 * lives as long as the last record that references it. The daemon killed
 * between the mark and the unlink finishes at its next start
 * (gc_finish()). A file is removed only below state_dir/runs/RUN/, each
 * directory on the way opened O_DIRECTORY | O_NOFOLLOW and the last name
 * unlinked relative to it: a link planted on the way is never followed
 * (a link as the last name is itself removed, not what it points to).
 * gc runs on the loop thread: no submit, retry or cancel runs meanwhile.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pld.h"
#include "server.h"
#include "plio.h"
#include "priv.h"

#define GC_DEPTH 64     /* directories deep gc walks or removes */

/* The runs' directory, state_dir/runs, resolved (artifact paths are
 * stored resolved): "" when it does not exist. */
static void
runs_root(const struct conf *c, char *buf, size_t len)
{
	char p[PATH_MAX + 8];
	snprintf(p, sizeof(p), "%s/runs", c->state_dir);
	char *r = realpath(p, NULL);
	snprintf(buf, len, "%s", r ? r : "");
	free(r);
}

/* The bytes of the regular files below name in dfd (name itself when a
 * file), never following a link. */
static uint64_t
tree_bytes_at(int dfd, const char *name, int depth)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return 0;
	if (S_ISREG(st.st_mode))
		return (uint64_t)st.st_size;
	if (!S_ISDIR(st.st_mode) || depth >= GC_DEPTH)
		return 0;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1)
		return 0;
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return 0;
	}
	uint64_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n += tree_bytes_at(dirfd(d), e->d_name, depth + 1);
	closedir(d);
	return n;
}

/* Is path a file of a run's directory: root/RUN/NAME..., without an
 * empty, "." or ".." part? Its part below root, or NULL. */
static const char *
below_runs(const char *root, const char *path)
{
	size_t n = strlen(root);
	if (n == 0 || strncmp(path, root, n) != 0 || path[n] != '/')
		return NULL;
	const char *rel = path + n + 1;
	int parts = 0;
	for (const char *p = rel; ; ) {
		size_t l = strcspn(p, "/");
		if (l == 0 || (l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.'))
			return NULL;
		parts++;
		if (p[l] == '\0')
			break;
		p += l + 1;
	}
	return parts >= 2 ? rel : NULL;
}

/*
 * Unlink the artifact file (or directory) path below the runs' directory
 * root: each directory on the way opened O_DIRECTORY | O_NOFOLLOW from
 * the one before, the last name removed relative to its parent. A path
 * already gone is done. What the daemon's own user may not remove (a
 * member's 0750 work directory, in a daemon process of its own user) the
 * privileged parent removes, by the same walk from its own state_dir
 * (PRIV_RMTREE). 0, or -1 with why.
 */
static int
unlink_artifact(const char *root, const char *path, char *why, size_t len)
{
	const char *rel = below_runs(root, path);
	if (rel == NULL) {
		snprintf(why, len, "%s: not below %s", path, root);
		return -1;
	}
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1) {
		snprintf(why, len, "%s: %s", root, strerror(errno));
		return -1;
	}
	char *copy = xstrdup(rel), *p = copy;
	int rc = 0, e = 0;
	for (;;) {
		char *slash = strchr(p, '/');
		if (slash == NULL)
			break;
		*slash = '\0';
		int nfd = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		e = errno;
		close(fd);
		fd = nfd;
		if (fd == -1) {
			if (e != ENOENT) {
				snprintf(why, len, "%s: %s%s", path, strerror(e), e == ELOOP ||
				    e == ENOTDIR ? " (a link on the way: not followed)" : "");
				rc = -1;
			}
			goto out;
		}
		p = slash + 1;
	}
	if (plc_rmtree_at(fd, p, GC_DEPTH) == -1) {
		e = errno;
		snprintf(why, len, "%s: %s", path, strerror(e));
		rc = -1;
	}
	close(fd);
out:
	free(copy);
	if (rc == -1 && (e == EACCES || e == EPERM) && priv_active())
		rc = priv_rmtree(rel, why, len);
	return rc;
}

int
gc_finish(struct store *s, const struct conf *c)
{
	char root[PATH_MAX], why[PATH_MAX + 128];
	runs_root(c, root, sizeof(root));
	double *marked = NULL;
	char **v = store_gc_pending(s, &marked);
	int n = 0, bad = 0;
	for (int i = 0; v[i]; i++) {
		struct stat st;
		if (lstat(v[i], &st) == -1)
			continue;
		/* Written after its mark: a retried job made it again, and
		 * its record is still to come. */
		if ((double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9 > marked[i]) {
			log_info("%s: %s: changed since gc marked it removed; left", __func__, v[i]);
			continue;
		}
		if (unlink_artifact(root, v[i], why, sizeof(why)) == -1) {
			log_warnx("%s: %s", __func__, why);
			bad++;
		} else
			n++;
	}
	strv_free(v);
	free(marked);
	if (n > 0)
		log_info("%s: %d file%s a gc marked removed unlinked", __func__, n, n == 1 ? "" : "s");
	return bad ? -1 : 0;
}

/* ---- du -------------------------------------------------------------- */

static uint64_t
run_disk(const char *root, const char *run, const char *job)
{
	if (*root == '\0')
		return 0;
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1)
		return 0;
	uint64_t n = 0;
	if (job == NULL)
		n = tree_bytes_at(fd, run, 0);
	else {
		int rfd = openat(fd, run, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (rfd >= 0) {
			n = tree_bytes_at(rfd, job, 0);
			close(rfd);
		}
	}
	close(fd);
	return n;
}

cJSON *
gc_du(struct store *s, const struct conf *c, int64_t viewer, const char *run)
{
	char root[PATH_MAX];
	runs_root(c, root, sizeof(root));
	cJSON *rows = store_q_du(s, viewer, run);
	if (rows == NULL)
		return NULL;
	double bytes = 0, disk = 0;
	cJSON *x;
	cJSON_ArrayForEach(x, rows) {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(x, "run");
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(x, "bytes");
		double d = cJSON_IsString(n) ? (double)run_disk(root, n->valuestring, NULL) : 0;
		cJSON_AddNumberToObject(x, "disk", d);
		disk += d;
		bytes += cJSON_IsNumber(b) ? b->valuedouble : 0;
	}
	cJSON *r = cJSON_CreateObject();
	if (run == NULL) {
		cJSON_AddItemToObject(r, "runs", rows);
		cJSON_AddNumberToObject(r, "bytes", bytes);
		cJSON_AddNumberToObject(r, "disk", disk);
		return r;
	}
	cJSON_AddItemToObject(r, "run", cJSON_DetachItemFromArray(rows, 0));
	cJSON_Delete(rows);
	/* Per job: what its directory holds, and its artifacts. */
	cJSON *jobs = cJSON_AddArrayToObject(r, "jobs");
	cJSON *st = store_q_run(s, run);
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(st, "jobs")) {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(x, "name");
		if (!cJSON_IsString(n))
			continue;
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "job", n->valuestring);
		cJSON_AddNumberToObject(j, "disk", (double)run_disk(root, run, n->valuestring));
		cJSON_AddItemToArray(jobs, j);
	}
	cJSON_Delete(st);
	cJSON *arts = store_q_artifacts(s, run);
	cJSON_AddItemToObject(r, "artifacts", arts ? arts : cJSON_CreateArray());
	return r;
}

/* ---- gc -------------------------------------------------------------- */

/* Does the spec text name value on a key ending in "_run" (stats_run)? */
static int
spec_names_run(const char *text, const char *name)
{
	size_t nl = strlen(name);
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *eq = strchr(l, '='), *end = strchr(l, '\n');
		if (end == NULL)
			end = l + strlen(l);
		if (eq == NULL || eq > end)
			continue;
		const char *k = eq;
		while (k > l && (k[-1] == ' ' || k[-1] == '\t'))
			k--;
		if (k - l < 4 || strncmp(k - 4, "_run", 4) != 0)
			continue;
		const char *v = eq + 1;
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		const char *ve = end;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r'))
			ve--;
		if ((size_t)(ve - v) == nl && strncmp(v, name, nl) == 0)
			return 1;
	}
	return 0;
}

/* Does text hold dir/NAME as a path: followed by '/', a space or the
 * end of a line? */
static int
spec_names_dir(const char *text, const char *dir, const char *name)
{
	char pat[PATH_MAX * 2];
	if (*dir == '\0')
		return 0;
	snprintf(pat, sizeof(pat), "%s/%s", dir, name);
	size_t n = strlen(pat);
	for (const char *p = strstr(text, pat); p; p = strstr(p + 1, pat))
		if (strchr("/ \t\r\n", p[n]) != NULL)
			return 1;
	return 0;
}

/* Does kept run k reference run r? How, in why. */
static int
references(const struct gc_run *k, const struct gc_run *r, const char *const dirs[2],
    char *why, size_t len)
{
	if (k->previous && strcmp(k->previous, r->name) == 0) {
		snprintf(why, len, "the previous run of run %s, which is kept", k->name);
		return 1;
	}
	if (k->spec_text == NULL)
		return 0;
	if (spec_names_run(k->spec_text, r->name)) {
		snprintf(why, len, "named by a *_run key of run %s, which is kept", k->name);
		return 1;
	}
	for (int i = 0; i < 2; i++)
		if (spec_names_dir(k->spec_text, dirs[i], r->name)) {
			snprintf(why, len, "its files are named by run %s's spec, which is kept",
			    k->name);
			return 1;
		}
	return 0;
}

static void
keep(struct gc_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
keep(struct gc_run *r, const char *fmt, ...)
{
	if (r->keep)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
	r->keep = 1;
}

/* Which runs the retention keeps (pipelined.conf(5) [retention]); the
 * target of a `gc RUN` is exempt from keep_days alone. */
static void
plan_runs(struct gc_set *g, const struct conf *c, double now, const char *target,
    const char *const dirs[2])
{
	for (int i = 0; i < g->nruns; i++) {
		struct gc_run *r = &g->runs[i];
		if (r->state < 0)
			keep(r, "its state is not one this pipelined knows");
		else if (!pl_run_state_final(r->state))
			keep(r, "it is %s: a run that is not over needs its files",
			    pl_run_state_name(r->state));
	}
	/* The promoted runs of each alias, newest first: the current one and
	 * keep_promoted before it. */
	for (int i = 0; i < g->nruns; i++) {
		struct gc_run *r = &g->runs[i];
		if (r->promoted <= 0)
			continue;
		int newer = 0;
		for (int j = 0; j < g->nruns; j++) {
			const struct gc_run *o = &g->runs[j];
			if (j != i && o->promoted > 0 && strcmp(o->alias, r->alias) == 0 &&
			    (o->promoted > r->promoted || (o->promoted == r->promoted && j > i)))
				newer++;
		}
		if (newer == 0)
			keep(r, "it is the promoted version (alias %s)", r->alias);
		else if (newer <= c->keep_promoted)
			keep(r, "promoted (alias %s) %d version%s before the current one, within "
			    "keep_promoted = %d", r->alias, newer, newer == 1 ? "" : "s",
			    c->keep_promoted);
	}
	for (int i = 0; i < g->nruns; i++) {
		struct gc_run *r = &g->runs[i];
		if ((target == NULL || strcmp(r->name, target) != 0) &&
		    now - r->created < (double)c->keep_days * 86400)
			keep(r, "submitted within keep_days = %d", c->keep_days);
	}
	/* What the kept runs reference, until nothing more is kept. */
	for (int changed = 1; changed; ) {
		changed = 0;
		for (int i = 0; i < g->nruns; i++) {
			if (!g->runs[i].keep)
				continue;
			for (int j = 0; j < g->nruns; j++) {
				char why[256];
				if (!g->runs[j].keep && references(&g->runs[i], &g->runs[j], dirs,
				    why, sizeof(why))) {
					keep(&g->runs[j], "%s", why);
					changed = 1;
				}
			}
		}
	}
}

static struct gc_run *
run_of(struct gc_set *g, int64_t id)
{
	for (int i = 0; i < g->nruns; i++)
		if (g->runs[i].id == id)
			return &g->runs[i];
	return NULL;
}

static cJSON *
art_json(const struct gc_run *r, const struct gc_art *a, const char *why)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "run", r ? r->name : "");
	cJSON_AddStringToObject(o, "job", a->job);
	cJSON_AddStringToObject(o, "name", a->name);
	cJSON_AddStringToObject(o, "path", a->path);
	cJSON_AddNumberToObject(o, "size", (double)a->size);
	if (why != NULL)
		cJSON_AddStringToObject(o, "why", why);
	return o;
}

/* Take back the records of path: a record gc does not take holds it. */
static void
untake_path(struct gc_set *g, const char *path)
{
	for (int i = 0; i < g->narts; i++)
		if (strcmp(g->arts[i].path, path) == 0)
			g->arts[i].take = 0;
}

/*
 * The run whose directory holds path (root/RUN/...) must have a record of
 * that path and be one the viewer may act on: a record of a member's run
 * that names a file of another run's directory (a job may report any
 * file it can read as its artifact) never has gc remove that file.
 */
static int
dir_run_ok(struct gc_set *g, const char *root, const char *path, int64_t viewer, char *why,
    size_t len)
{
	const char *rel = below_runs(root, path);
	size_t n = rel ? strcspn(rel, "/") : 0;
	const struct gc_run *d = NULL;
	for (int i = 0; rel && i < g->nruns; i++)
		if (strlen(g->runs[i].name) == n && strncmp(g->runs[i].name, rel, n) == 0)
			d = &g->runs[i];
	int named = 0;
	for (int i = 0; d && i < g->narts && !named; i++)
		named = g->arts[i].run_id == d->id && strcmp(g->arts[i].path, path) == 0;
	if (!named)
		snprintf(why, len, "in the directory of run %.*s, which has no record of it",
		    (int)n, rel ? rel : "");
	else if (!access_run(viewer, d->submitter))
		snprintf(why, len, "in the directory of run %s, which is not yours", d->name);
	else
		return 1;
	return 0;
}

enum pl_proto_err
gc_collect(struct store *s, const struct conf *c, int64_t viewer, int64_t uid, const char *run,
    int dry, cJSON **result, char *err, size_t errlen)
{
	struct gc_set g;
	char root[PATH_MAX], sdruns[PATH_MAX + 8];
	runs_root(c, root, sizeof(root));
	snprintf(sdruns, sizeof(sdruns), "%s/runs", c->state_dir);
	const char *const dirs[2] = { root, sdruns };
	*result = NULL;
	/* What an earlier gc marked and could not unlink goes first. */
	if (!dry)
		gc_finish(s, c);
	if (store_gc_load(s, &g) == -1) {
		snprintf(err, errlen, "the store could not be read (see the daemon's log)");
		return PLP_EINTERNAL;
	}
	double now = now_wall();
	plan_runs(&g, c, now, run, dirs);
	const struct gc_run *target = NULL;
	for (int i = 0; run && i < g.nruns; i++)
		if (strcmp(g.runs[i].name, run) == 0)
			target = &g.runs[i];
	if (run != NULL && target == NULL) {
		store_gc_free(&g);
		snprintf(err, errlen, "no run %s", run);
		return PLP_ENOENT;
	}
	if (target != NULL && target->keep) {
		snprintf(err, errlen, "gc %s refused: %s", run, target->why);
		store_gc_free(&g);
		return PLP_ESTATE;
	}
	cJSON *res = cJSON_CreateObject(), *skipped = cJSON_CreateArray();
	cJSON_AddBoolToObject(res, "dry_run", dry);
	cJSON_AddNumberToObject(res, "min_size", (double)c->gc_min_size);
	/* The records to mark: not yet removed, of a run not kept that the
	 * viewer may act on (and the one named), min_size or more. */
	for (int i = 0; i < g.narts; i++) {
		struct gc_art *a = &g.arts[i];
		const struct gc_run *r = run_of(&g, a->run_id);
		a->take = !a->removed && r != NULL && !r->keep && (target == NULL || r == target) &&
		    access_run(viewer, r->submitter) && a->size >= c->gc_min_size;
		if (a->take && below_runs(root, a->path) == NULL) {
			cJSON_AddItemToArray(skipped, art_json(r, a, "not below the runs' directory: "
			    "gc removes nothing else"));
			a->take = 0;
		}
		char why[512];
		if (a->take && !dir_run_ok(&g, root, a->path, viewer, why, sizeof(why))) {
			cJSON_AddItemToArray(skipped, art_json(r, a, why));
			a->take = 0;
		}
	}
	/* A file another record holds stays, and its records with it. */
	for (int i = 0; i < g.narts; i++) {
		const struct gc_art *a = &g.arts[i];
		if (a->removed || a->take)
			continue;
		for (int j = 0; j < g.narts; j++) {
			struct gc_art *b = &g.arts[j];
			if (b->take && strcmp(b->path, a->path) == 0) {
				const struct gc_run *ra = run_of(&g, a->run_id), *rb = run_of(&g, b->run_id);
				char why[512];
				snprintf(why, sizeof(why), "held by run %s's record (%s %s)",
				    ra ? ra->name : "?", a->job, a->name);
				cJSON_AddItemToArray(skipped, art_json(rb, b, why));
				untake_path(&g, a->path);
			}
		}
	}
	cJSON *removed = cJSON_CreateArray();
	int64_t *ids = xcalloc((size_t)g.narts + 1, sizeof(*ids));
	int nids = 0;
	double bytes = 0;
	for (int i = 0; i < g.narts; i++) {
		const struct gc_art *a = &g.arts[i];
		if (!a->take)
			continue;
		ids[nids++] = a->id;
		cJSON_AddItemToArray(removed, art_json(run_of(&g, a->run_id), a, NULL));
		int first = 1;
		for (int j = 0; j < i && first; j++)
			if (g.arts[j].take && strcmp(g.arts[j].path, a->path) == 0)
				first = 0;
		if (first)
			bytes += (double)a->size;
	}
	cJSON_AddItemToObject(res, "removed", removed);
	cJSON_AddNumberToObject(res, "bytes", bytes);
	cJSON_AddItemToObject(res, "skipped", skipped);
	cJSON *kept = cJSON_AddArrayToObject(res, "kept");
	for (int i = 0; i < g.nruns; i++)
		if (g.runs[i].keep && access_run(viewer, g.runs[i].submitter)) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "run", g.runs[i].name);
			cJSON_AddStringToObject(o, "why", g.runs[i].why);
			cJSON_AddItemToArray(kept, o);
		}
	enum pl_proto_err rc = PLP_OK;
	if (dry || nids == 0)
		goto out;
	/* The mark first, committed: a kill from here on is finished by
	 * gc_finish() at the next start. */
	if (store_gc_mark(s, ids, nids, now, uid) == -1) {
		store_error(s, err, errlen);
		rc = PLP_EIO;
		goto out;
	}
	log_info("gc: uid %lld marked %d artifact record%s removed (%.0f bytes)", (long long)uid,
	    nids, nids == 1 ? "" : "s", bytes);
	/* A test's hook: seconds to wait between the mark and the unlinks,
	 * for a kill -9 in between (tests/integration/store/gc-kill.sh). */
	const char *pause = getenv("PL_TEST_GC_PAUSE");
	if (pause != NULL && atoi(pause) > 0)
		sleep((unsigned)atoi(pause));
	cJSON *errors = cJSON_AddArrayToObject(res, "errors");
	for (int i = 0; i < g.narts; i++) {
		const struct gc_art *a = &g.arts[i];
		int first = a->take;
		for (int j = 0; j < i && first; j++)
			if (g.arts[j].take && strcmp(g.arts[j].path, a->path) == 0)
				first = 0;
		if (!first || store_gc_path_held(s, a->path) != 0)
			continue;
		char why[PATH_MAX + 128];
		if (unlink_artifact(root, a->path, why, sizeof(why)) == -1) {
			log_warnx("gc: %s", why);
			cJSON_AddItemToArray(errors, cJSON_CreateString(why));
		}
	}
out:
	free(ids);
	store_gc_free(&g);
	if (rc != PLP_OK) {
		cJSON_Delete(res);
		return rc;
	}
	*result = res;
	return PLP_OK;
}
