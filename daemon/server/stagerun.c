/* stagerun.c: where a job's run hook runs. For a run of the daemon's own
 * user it runs here, on the job thread, unless the daemon is split (a
 * privileged parent, priv.c: then root's own runs' stages run in a
 * process too, as root, under root's shim that the parent starts). For
 * anyone else's run a stage runs in a process of its own as the run's
 * owner (pipeline-stage under
 * the run's shim, like a job program): the daemon writes what the stage
 * may read (its section, the [run] section, its inputs resolved, the
 * values and artifacts of the runs it may look up, the configuration
 * without secrets) to a context file, starts the stage process with
 * host->spawn() and stores what it reports through the events file. So
 * no stage opens a submitter's paths with the daemon's rights, and a
 * native stage that crashes on a hostile file fails its job, not the
 * daemon. A stage whose run hook only spawns programs (PL_STAGE_SPAWN_ONLY)
 * stays in the daemon: the programs already run as the owner. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pld.h"
#include "server.h"
#include "priv.h"
#include "plio.h"
#include "memcap.h"

int
stage_out_of_process(const struct pl_job *j)
{
	uid_t uid;
	gid_t gid;
	const char *mode = j->conf ? conf_get(j->conf, "daemon.stage_process") : NULL;

	if (j->store == NULL || j->mode != JOB_MODE_RUN)
		return 0;
	if (mode != NULL && strcmp(mode, "all") == 0)
		return 1;
	if (j->reg->st->flags & PL_STAGE_SPAWN_ONLY)
		return 0;
	/* A split daemon's (priv.c) every run, root's own too: the daemon
	 * process opens no run's paths with root's rights. */
	if (priv_active())
		return 1;
	return j->owner != NULL && owner_ids(j->owner, &uid, &gid) == 0 && uid != geteuid();
}

/* Keys of the configuration a stage process is not given: the secrets. */
static int
conf_secret(const char *k)
{
	return strncmp(k, "http.", 5) == 0 || strncmp(k, "notify.", 7) == 0 ||
	    strstr(k, "token") != NULL || strstr(k, "secret") != NULL ||
	    strstr(k, "password") != NULL;
}

cJSON *
stage_conf_copy(const struct conf *c)
{
	cJSON *o = cJSON_CreateObject();
	const cJSON *e, *all = c != NULL ? c->all : NULL;
	cJSON_ArrayForEach(e, all)
		if (e->string != NULL && !conf_secret(e->string))
			cJSON_AddItemToObject(o, e->string, cJSON_Duplicate(e, 1));
	return o;
}

static cJSON *
kv_array(const struct spec_section *sec)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; sec && i < sec->nkv; i++) {
		cJSON *p = cJSON_CreateArray();
		cJSON_AddItemToArray(p, cJSON_CreateString(sec->kv[i].key));
		cJSON_AddItemToArray(p, cJSON_CreateString(sec->kv[i].value));
		cJSON_AddItemToArray(a, p);
	}
	return a;
}

/* Whether j's stage may look into run name: its own run; another only
 * when both have the same owner, or j's owner is the daemon's user (a
 * submitter sees its own runs, as on the control socket). */
static int
run_visible(pl_job *j, const char *name)
{
	uid_t mine, theirs;
	gid_t g;
	if (strcmp(name, j->run) == 0 || owner_ids(j->owner, &mine, &g) == -1 ||
	    mine == geteuid())
		return 1;
	char *o = store_run_owner_get(j->store, name);
	int ok = owner_ids(o, &theirs, &g) == 0 ? theirs == mine : geteuid() == mine;
	free(o);
	return ok;
}

/* A run's snapshot into runs, once, when there is such a run and the
 * stage may see it: under the name as given, of the run it names
 * (hstore_run_named()). */
static void
add_run(pl_job *j, cJSON *runs, const char *name)
{
	char buf[128];
	if (name == NULL || *name == '\0' || strlen(name) > 127 ||
	    cJSON_HasObjectItem(runs, name))
		return;
	const char *run = hstore_run_named(j, name, buf, sizeof(buf));
	if (!run_visible(j, run))
		return;
	cJSON *s = store_run_snapshot(j->store, run);
	if (s != NULL)
		cJSON_AddItemToObject(runs, name, s);
}

/* The runs a stage may look values and artifacts up in: this one, its
 * previous, and those a value of its section names (RUN or RUN/JOB), of
 * the same owner. */
static cJSON *
runs_snapshot(pl_job *j)
{
	cJSON *runs = cJSON_CreateObject();
	add_run(j, runs, j->run);
	add_run(j, runs, j->spec->previous);
	for (int i = 0; i < j->sec->nkv; i++) {
		const char *v = j->sec->kv[i].value, *slash = strchr(v, '/');
		char name[128];
		if (slash != NULL && slash != v && slash - v < (int)sizeof(name)) {
			snprintf(name, sizeof(name), "%.*s", (int)(slash - v), v);
			add_run(j, runs, name);
		} else if (slash == NULL) {
			add_run(j, runs, v);
		}
	}
	return runs;
}

/* What value_history() may see: the newest values of every run the
 * stage may look into (the owner's; every run for the daemon's user). */
#define HISTORY_MAX 10000
static cJSON *
history(pl_job *j)
{
	uid_t uid;
	gid_t gid;
	char u[16];
	if (owner_ids(j->owner, &uid, &gid) == -1 || uid == geteuid())
		return store_values_recent(j->store, NULL, HISTORY_MAX);
	snprintf(u, sizeof(u), "%u", (unsigned)uid);
	return store_values_recent(j->store, u, HISTORY_MAX);
}

/* The context file, attempt-N.stage.json in the job's directory: the
 * owner's to read, written whole under its final name. */
static int
context_write(pl_job *j, char *path, size_t len)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "stage", j->reg->st->name);
	cJSON_AddStringToObject(o, "plugin", j->reg->plugin ? j->reg->plugin->path : "");
	cJSON_AddStringToObject(o, "run", j->run);
	cJSON_AddStringToObject(o, "job", j->name);
	cJSON_AddNumberToObject(o, "attempt", j->attempt);
	cJSON_AddStringToObject(o, "workdir", j->workdir);
	cJSON_AddStringToObject(o, "spec_path", j->spec->path ? j->spec->path : "-");
	cJSON_AddStringToObject(o, "spec_dir", j->spec->dir ? j->spec->dir : "/");
	if (j->spec->previous)
		cJSON_AddStringToObject(o, "previous", j->spec->previous);
	cJSON_AddItemToObject(o, "section", kv_array(j->sec));
	cJSON_AddItemToObject(o, "run_section", kv_array(j->spec->run));
	cJSON_AddItemToObject(o, "inputs", host_inputs_resolve(j));
	cJSON_AddItemToObject(o, "conf", stage_conf_copy(j->conf));
	cJSON_AddItemToObject(o, "runs", runs_snapshot(j));
	cJSON_AddItemToObject(o, "history", history(j));
	if (j->deadline > 0)
		cJSON_AddNumberToObject(o, "seconds_left", j->deadline - plc_mono_secs());
	/* A batch executor's jobs (Slurm): the stage process submits its
	 * programs itself, as the owner (stagectx.c's batch_spawn()), with
	 * the job's executor options and the daemon's shim. */
	if (j->ex != NULL && j->ex->batch) {
		cJSON_AddStringToObject(o, "executor", j->ex->name);
		cJSON_AddStringToObject(o, "executor_opts", j->ex_opts ? j->ex_opts : "");
	}
	if (j->conf != NULL && j->conf->shim[0] != '\0')
		cJSON_AddStringToObject(o, "shim", j->conf->shim);
	char *text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	char name[64], tmp[80];
	snprintf(name, sizeof(name), "attempt-%d.stage.json", j->attempt);
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	snprintf(path, len, "%s/%s", j->jobdir, name);
	unlinkat(j->jobdirfd, tmp, 0);
	int fd = file_open_at(j->jobdirfd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600), rc = -1;
	uid_t uid;
	gid_t gid;
	if (fd >= 0 && text != NULL && owner_ids(j->owner, &uid, &gid) == 0 &&
	    job_chown_later(j, fd) == -1)
		job_log(j, PL_LOG_ERROR, "stage process: chown %s: %s", path, strerror(errno));
	else if (fd >= 0 && text != NULL && plc_write_all(fd, text, strlen(text)) == 0 &&
	    renameat(j->jobdirfd, tmp, j->jobdirfd, name) == 0)
		rc = 0;
	else
		job_log(j, PL_LOG_ERROR, "stage process: cannot write %s: %s", path,
		    strerror(errno));
	if (fd >= 0)
		close(fd);
	if (rc == -1)
		unlinkat(j->jobdirfd, tmp, 0);
	free(text);
	return rc;
}

/* A run owner's stage process whose stage caps its programs' host
 * memory (it has a host_mem_cap key: the probe's, memcap.h) gets a
 * memory cgroup the privileged parent made at that size (PRIV_CGROUP),
 * since the owner cannot make one below the daemon's own cgroup: the
 * process starts through a shim of its own that the parent moves into
 * it (exec_local.c, PRIV_SHIM_START's cgroup), so that it and the
 * programs it spawns run in the group without a right of the owner's;
 * its directory goes to the stage in PL_MEMCAP_DIR, which
 * memcap_create() takes when it is in it; without it the stage makes
 * its own as before. The directory is recorded, whole (renamed into
 * place), before the process starts, in MEMCAP_RECORD of the process's
 * records directory (exec.h: attempt-N/.shim/pl-stage, the daemon's,
 * 0700, which the job can neither write nor replace), so that a daemon
 * killed meanwhile finds the group after its restart. memcap_done():
 * that shim told to go and the group removed once the process ended,
 * then the record. A job re-adopted after a restart asks for none: its
 * stage process, if still running, is in the group it had, which
 * memcap_ask() reads back from the record (checked: a leaf of the
 * parent's pattern right below the daemon process's own cgroup, the
 * parent's, where memcap_make_root() makes them: memcap_dir_ok()) for
 * memcap_done() to remove as for a fresh one, and which no start is
 * handed (host_spawn.c: a process started again runs without one). An
 * attempt killed after a restart instead of re-entered has its group
 * removed by stage_memcap_leftover() (sched.c). */
#define MEMCAP_RECORD "cgroup"

/* The records directory of j's stage process, relative to its job
 * directory. */
static void
memcap_rel(const pl_job *j, char *rel, size_t len)
{
	snprintf(rel, len, "attempt-%d/.shim/%s", j->attempt, STAGE_PROC_NAME);
}

static void
memcap_record(pl_job *j)
{
	char rel[64];
	int afd = -1, dfd = -1, fd = -1, ok = 0;
	snprintf(rel, sizeof(rel), "attempt-%d", j->attempt);
	/* The attempt's directory as proc_start() makes it (0711), then
	 * the records directory, 0700. */
	if (j->jobdirfd >= 0 && (afd = dirs_make_at(j->jobdirfd, rel, 0711)) >= 0 &&
	    (dfd = dirs_make_at(afd, ".shim/" STAGE_PROC_NAME, 0700)) >= 0) {
		unlinkat(dfd, MEMCAP_RECORD ".tmp", 0);
		fd = file_open_at(dfd, MEMCAP_RECORD ".tmp", O_WRONLY | O_CREAT | O_EXCL, 0600);
		ok = fd >= 0 && plc_write_all(fd, j->memcap_dir, strlen(j->memcap_dir)) == 0 &&
		    plc_write_all(fd, "\n", 1) == 0 &&
		    renameat(dfd, MEMCAP_RECORD ".tmp", dfd, MEMCAP_RECORD) == 0;
	}
	if (!ok) {
		memcap_rel(j, rel, sizeof(rel));
		job_log(j, PL_LOG_WARN, "host_mem_cap: cannot record %s in %s/%s/%s: %s "
		    "(a restart leaves the group)", j->memcap_dir, j->jobdir, rel, MEMCAP_RECORD,
		    strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	if (!ok && dfd >= 0)
		unlinkat(dfd, MEMCAP_RECORD ".tmp", 0);
	if (dfd >= 0)
		close(dfd);
	if (afd >= 0)
		close(afd);
}

/* The group recorded in records directory rdir: 0 with its directory in
 * dir, or -1: none (ENOENT), or not one the parent makes (EINVAL). */
static int
memcap_record_read(const char *rdir, char *dir, size_t len)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/%s", rdir, MEMCAP_RECORD);
	int fd = file_open_at(AT_FDCWD, path, O_RDONLY, 0);
	if (fd == -1)
		return -1;
	char *t = plc_read_fd(fd, NULL, PATH_MAX);
	close(fd);
	if (t == NULL)
		return -1;
	t[strcspn(t, "\n")] = '\0';
	int ok = strlen(t) < len && memcap_dir_ok(t);
	if (ok)
		snprintf(dir, len, "%s", t);
	free(t);
	if (!ok)
		errno = EINVAL;
	return ok ? 0 : -1;
}

/* The parent asked to remove group dir, again while it is busy (a shim
 * leaves it a moment after its last process): 0, or -1 with errno. */
static int
memcap_remove(const char *dir)
{
	int rc, tries = 0;
	while ((rc = priv_cgroup_remove(dir)) == -1 && errno == EBUSY && tries++ < 50) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return rc;
}

static void
memcap_ask(pl_job *j)
{
	uid_t uid;
	gid_t gid;
	j->memcap_dir[0] = '\0';
	if (j->adopted) {
		char rel[64], pdir[PATH_MAX], rdir[PATH_MAX];
		snprintf(pdir, sizeof(pdir), "%s/attempt-%d/%s", j->jobdir, j->attempt,
		    STAGE_PROC_NAME);
		proc_records_dir(pdir, rdir, sizeof(rdir));
		if (memcap_record_read(rdir, j->memcap_dir, sizeof(j->memcap_dir)) == -1) {
			j->memcap_dir[0] = '\0';
			memcap_rel(j, rel, sizeof(rel));
			if (errno != ENOENT)
				job_log(j, PL_LOG_WARN, "host_mem_cap: %s/%s/%s: %s", j->jobdir, rel,
				    MEMCAP_RECORD, errno == EINVAL ? "not a cgroup the privileged "
				    "parent makes: left" : strerror(errno));
		}
		return;
	}
	if (!priv_active() || j->owner == NULL || j->reg == NULL ||
	    (j->ex != NULL && j->ex->batch) ||
	    owner_ids(j->owner, &uid, &gid) == -1 || uid == 0)
		return;
	const struct pl_key *k = host_find_key(j->reg, "host_mem_cap", NULL);
	const char *v = spec_get(j->sec, "host_mem_cap");
	int64_t bytes = k == NULL ? 0 : memcap_parse_size(v ? v : k->def);
	char why[256];
	if (bytes > 0 && priv_cgroup(j->owner, bytes, j->memcap_dir, sizeof(j->memcap_dir),
	    why, sizeof(why)) == -1) {
		job_log(j, PL_LOG_WARN, "host_mem_cap: the privileged parent made no cgroup "
		    "for %s: %s", j->owner, why);
		j->memcap_dir[0] = '\0';
	}
	if (j->memcap_dir[0])
		memcap_record(j);
}

static void
memcap_done(pl_job *j)
{
	if (j->memcap_dir[0] == '\0')
		return;
	exec_local_cgroup_done(j->memcap_dir);
	if (memcap_remove(j->memcap_dir) == 0 || errno == ENOENT) {
		char rel[64], path[128];
		memcap_rel(j, rel, sizeof(rel));
		snprintf(path, sizeof(path), "%s/%s", rel, MEMCAP_RECORD);
		unlinkat(j->jobdirfd, path, 0);
	} else
		job_log(j, PL_LOG_WARN, "host_mem_cap: %s not removed: %s", j->memcap_dir,
		    strerror(errno));
	j->memcap_dir[0] = '\0';
}

void
stage_memcap_leftover(const char *rdir)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/%s", rdir, MEMCAP_RECORD);
	if (memcap_record_read(rdir, dir, sizeof(dir)) == -1) {
		if (errno == EINVAL)
			log_warnx("%s: %s: not a cgroup the privileged parent makes: left",
			    __func__, path);
		else if (errno != ENOENT)
			log_warn("%s: %s", __func__, path);
		return;
	}
	if (memcap_remove(dir) == -1 && errno != ENOENT) {
		log_warn("%s: host_mem_cap: %s not removed", __func__, dir);
		return;
	}
	log_info("%s: host_mem_cap: removed %s", __func__, dir);
	unlink(path);
}

static int
run_out_of_process(pl_job *j)
{
	char ctx[PATH_MAX], bin[PATH_MAX];
	if (context_write(j, ctx, sizeof(ctx)) == -1)
		return plugin_host.fail(j, "stage process: cannot write its context file");
	conf_stage_path(j->conf, bin, sizeof(bin));
	const char *argv[] = { bin, ctx, NULL };
	struct pl_spawn sp = { .abi = PL_ABI_VERSION, .size = sizeof(sp),
		.name = STAGE_PROC_NAME, .argv = argv };
	struct pl_exit ex = PL_EXIT_INIT;
	/* The stage process runs here whatever the job's executor: its
	 * programs run beside it, or under a batch executor (Slurm) as
	 * batch jobs it submits (the context file says which). */
	const struct executor *saved = j->ex;
	char *opts = j->ex_opts;
	j->ex = &exec_local;
	j->ex_opts = NULL;
	j->stage_proc = 1;
	memcap_ask(j);
	j->failmsg[0] = '\0';
	int rc = host_spawn(j, &sp, &ex);
	memcap_done(j);
	j->stage_proc = 0;
	j->ex = saved;
	j->ex_opts = opts;
	if (rc != PL_OK)
		return rc;   /* lost, cancelled, timed out: host_spawn said why */
	if (ex.exited && ex.status == 0)
		return PL_OK;
	/* The stage's own "error" line, whole (host_spawn.c), else the
	 * last one's first 255 bytes. */
	if (j->failmsg[0] == '\0' && ex.error[0])
		snprintf(j->failmsg, sizeof(j->failmsg), "%s", ex.error);
	char err[sizeof(j->failmsg)];
	snprintf(err, sizeof(err), "%s", j->failmsg);
	if (!ex.exited)
		return plugin_host.fail(j, "stage %s: its process was killed by signal %d%s%s",
		    j->reg->st->name, ex.signal, err[0] ? "; " : "", err);
	/* pipeline-stage exits with the run hook's code, negated. */
	if (ex.status >= 1 && ex.status <= -PL_EREJECTED)
		return -ex.status;
	return plugin_host.fail(j, "stage %s: its process exited with status %d%s%s",
	    j->reg->st->name, ex.status, err[0] ? ": " : "", err);
}

/* What a stage that succeeded said it did, its value "message" (a bake:
 * "69 of 72 cases reused from router-v1/bake, 3 run"), goes first in the
 * job's message, before why it ran instead of being reused. Read back
 * from where the backend keeps values: a stage process's lines are
 * stored by now. */
static void
stage_message(struct pl_job *j)
{
	char *m = j->hb->value_get(j, NULL, j->name, "message");
	if (m == NULL || *m == '\0') {
		free(m);
		return;
	}
	char why[sizeof(j->ran_why)];
	struct plc_sb sb;
	snprintf(why, sizeof(why), "%s", j->ran_why);
	plc_sb_init(&sb, j->ran_why, sizeof(j->ran_why));
	plc_sb_append(&sb, m);
	if (why[0] != '\0') {
		plc_sb_append(&sb, "; ");
		plc_sb_append(&sb, why);
	}
	free(m);
}

int
stage_run(struct pl_job *j)
{
	int rc = stage_out_of_process(j) ? run_out_of_process(j) : j->reg->st->run(j);
	/* What the events reader refused (an artifact, the events quota, a
	 * failed commit) fails the job, whatever the stage made of it. */
	if (rc == PL_OK && j->ev_refused)
		rc = plugin_host.fail(j, "%s", j->refused);
	if (rc == PL_OK)
		stage_message(j);
	return rc;
}
