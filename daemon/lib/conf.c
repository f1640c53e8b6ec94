/* conf.c: pipelined.conf(5), read with inih. inih's handler is not told
 * the line number, so the reader callback counts lines: the handler runs
 * right after the reader returned the line it is about. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include "pld.h"
#include "plio.h"

struct conf_key {
	const char *section;
	const char *key;
	char kind;          /* s string, p path, i int, d duration, z size, l level, g group,
	                       m stage_process (owners, all),
	                       a ADDRESS:PORT, e notify events, u user,
	                       n non-negative integer, Z size from 0,
	                       c a count (1 to 10^9), B a size from 4096 of any magnitude */
	const char *help;
};

/* Every key pipelined.conf accepts; conf_print prints them in this order.
 * [resources] takes any name with an integer capacity. */
static const struct conf_key conf_keys[] = {
	{ "daemon", "state_dir", 'p', "the store and the job directories" },
	{ "daemon", "control_socket", 'p', "the control socket" },
	{ "daemon", "feed_socket", 'p', "the read-only status feed socket" },
	{ "daemon", "plugin_dir", 'p', "where stage plugins (*.so) are loaded from" },
	{ "daemon", "shim", 'p', "the pipeline-shim binary" },
	{ "daemon", "jobs_dir", 'p', "the job programs (jobs/*.py)" },
	{ "daemon", "python", 's', "the Python interpreter for job programs" },
	{ "daemon", "log_level", 'l', "error, warn, info or debug" },
	{ "daemon", "log_file", 'p', "the log file when detached" },
	{ "daemon", "max_jobs", 'i', "jobs running at once" },
	{ "daemon", "group", 'g', "the group allowed to submit, cancel and retry its own runs" },
	{ "daemon", "admin_group", 'g', "the group that sees and acts on every run" },
	{ "daemon", "job_user", 'u', "the user root's submissions run their jobs as" },
	{ "daemon", "user", 'u', "the user pipelined becomes once started as root (unset: it stays root alone, _pipelined beside group, admin_group or job_user)" },
	{ "daemon", "kill_grace", 'd', "time between SIGTERM and SIGKILL" },
	{ "daemon", "stage_process", 'm', "owners (default): stages of other users' runs in a process of their own; all: every run's" },
	{ "daemon", "feed_queue_max", 'z', "bytes queued for one watcher before it is dropped" },
	{ "daemon", "http_listen", 'a', "ADDRESS:PORT serving the status page and /metrics; off if unset" },
	{ "daemon", "metrics_listen", 'a', "another name for http_listen" },
	{ "daemon", "http_token", 's', "the bearer token for /metrics and every run (16 characters or more)" },
	{ "daemon", "http_host", 's', "the Host: names the listener answers, separated by spaces" },
	{ "daemon", "http_max_connections", 'i', "HTTP connections open at once" },
	{ "daemon", "http_max_per_ip", 'i', "HTTP connections from one address at once (0: no limit)" },
	{ "daemon", "http_max_per_session", 'i', "HTTP connections of one status page session at once (0: no limit)" },
	{ "daemon", "http_max_per_user", 'i', "HTTP connections of one user's sessions at once (0: no limit)" },
	{ "daemon", "http_max_streams", 'i', "status page event streams at once (below http_max_connections)" },
	{ "daemon", "http_timeout", 'd', "how long an HTTP connection may make no progress" },
	{ "daemon", "http_header_timeout", 'd', "how long a client may take to send a request's header" },
	{ "daemon", "web_dir", 'p', "the status page's files" },
	{ "daemon", "events_max_lines", 'c', "event lines one attempt of a job may report" },
	{ "daemon", "events_max_size", 'z', "bytes of event lines one attempt of a job may report" },
	{ "daemon", "artifact_max_size", 'B', "the largest artifact the daemon hashes" },
	{ "notify", "url", 's', "webhook URLs to POST events to, separated by spaces" },
	{ "notify", "secret", 's', "the HMAC-SHA256 key webhook bodies are signed with" },
	{ "notify", "events", 'e', "the events to notify: run.start run.end job.failed gate.verdict train.resumed" },
	{ "notify", "command", 's', "a command run for each event (event on stdin)" },
	{ "notify", "timeout", 'd', "how long one delivery may take" },
	{ "notify", "retries", 'i', "tries of one delivery before it is given up" },
	{ "daemon", "control_max_clients", 'i', "control connections open at once" },
	{ "daemon", "control_idle_timeout", 'd', "how long a control connection may send nothing" },
	{ "daemon", "feed_max_watchers", 'i', "feed connections open at once" },
	{ "daemon", "feed_idle_timeout", 'd', "how long a feed connection may wait to send its request" },
	{ "daemon", "max_spec_bytes", 'z', "the largest run spec checked or submitted (refused before it is parsed)" },
	{ "daemon", "max_spec_jobs", 'i', "the most jobs a run spec may have (counted after any expansion)" },
	{ "daemon", "max_variants", 'i', "the ceiling of a run spec's max_variants: the most variants a sweep may make" },
	{ "retention", "keep_promoted", 'n', "gc keeps the promoted run and this many promoted before it, per alias" },
	{ "retention", "keep_days", 'n', "gc keeps every run submitted in this many last days" },
	{ "retention", "min_size", 'Z', "gc removes the artifact files of this size or more (0: every artifact file)" },
	{ "slurm", "partition", 's', "default partition" },
	{ "slurm", "gres", 's', "default generic resources" },
	{ "slurm", "time", 's', "default time limit" },
	{ "slurm", "mem", 's', "default memory" },
	{ "slurm", "account", 's', "default account" },
	{ "slurm", "sbatch_options", 's', "extra sbatch options" },
	{ "slurm", "poll_interval", 'd', "how often queue states are read" },
	{ "slurm", "signal_before", 'd', "how long before the time limit jobs get SIGUSR1" },
	{ "slurm", "bin_dir", 'p', "where sbatch, squeue, scontrol and scancel are" },
	{ NULL, NULL, 0, NULL }
};

/* The keys a reload (SIGHUP) cannot apply, each bound at the daemon's
 * start: the state directory and the sockets (held open, the pid file's
 * lock), the log (opened once), the HTTP listener and what libmicrohttpd
 * takes at its start (the connection limits, the timeout), the status
 * page's files. Every other key takes effect at the reload. */
#define RK(name, type) { #name, type, offsetof(struct conf, name), \
	sizeof(((struct conf *)0)->name) }
static const struct restart_key {
	const char *key;
	char type;              /* s string, else compared as bytes */
	size_t off, len;
} restart_keys[] = {
	RK(state_dir, 's'), RK(user, 's'), RK(control_socket, 's'), RK(feed_socket, 's'), RK(log_file, 's'),
	RK(http_listen, 's'), RK(http_max_connections, 'i'), RK(http_max_per_ip, 'i'),
	RK(http_timeout, 'd'), RK(web_dir, 's'),
};
#undef RK
#define NRESTART_KEYS (sizeof(restart_keys) / sizeof(restart_keys[0]))

struct conf_parse {
	struct conf *c;
	int line;
	char **errs;
	int nerr;
};

const char *const conf_notify_kinds[CONF_NOTIFY_NKINDS] = { "run.start", "run.end",
    "job.failed", "gate.verdict", "train.resumed" };

static int
notify_known_kind(const char *word)
{
	for (int k = 0; k < CONF_NOTIFY_NKINDS; k++)
		if (strcmp(word, conf_notify_kinds[k]) == 0)
			return 1;
	return 0;
}

static const struct conf_key *
conf_key_find(const char *section, const char *key)
{
	for (const struct conf_key *k = conf_keys; k->section; k++)
		if (strcmp(k->section, section) == 0 && strcmp(k->key, key) == 0)
			return k;
	return NULL;
}

static void
set_path(struct conf *c, char *dst, const char *v)
{
	char *r = path_resolve(c->dir, v);
	snprintf(dst, PATH_MAX, "%s", r);
	free(r);
}

static int
conf_handler(void *user, const char *section, const char *name, const char *value)
{
	struct conf_parse *p = user;
	struct conf *c = p->c;
	int64_t i;
	double d;
	char sk[256];

	if (name == NULL) /* a section with no keys yet */
		return 1;
	if (strcmp(section, "resources") == 0) {
		if (parse_int(value, &i) == -1 || i < 0 || i > 1000000) {
			errs_add(p->errs, c->path, p->line, name,
			    "capacity must be a non-negative integer, not \"%s\"", value);
			p->nerr++;
			return 1;
		}
		if (!valid_name(name)) {
			errs_add(p->errs, c->path, p->line, name, "bad resource name");
			p->nerr++;
			return 1;
		}
		struct resource *r = conf_resource(c, name);
		if (r == NULL) {
			if (c->nres == CONF_MAX_RES) {
				errs_add(p->errs, c->path, p->line, name, "too many resources");
				p->nerr++;
				return 1;
			}
			r = &c->res[c->nres++];
			snprintf(r->name, sizeof(r->name), "%s", name);
		}
		r->capacity = (int)i;
		snprintf(sk, sizeof(sk), "resources.%s", name);
		cJSON_DeleteItemFromObject(c->all, sk);
		cJSON_AddStringToObject(c->all, sk, value);
		return 1;
	}
	const struct conf_key *k = conf_key_find(section, name);
	if (k == NULL) {
		int known_section = strcmp(section, "daemon") == 0 || strcmp(section, "slurm") == 0 ||
		    strcmp(section, "notify") == 0 || strcmp(section, "retention") == 0;
		if (known_section)
			errs_add(p->errs, c->path, p->line, name, "unknown key in [%s]", section);
		else
			errs_add(p->errs, c->path, p->line, name, "unknown section [%s]", section);
		p->nerr++;
		return 1;
	}
	int bad = 0;
	switch (k->kind) {
	case 'p':
		if (*value == '\0') {
			bad = 1;
		} else {
			/* Resolved against the file's directory, it must fit
			 * (PATH_MAX): a path cut short would name another file. */
			char *r = path_resolve(c->dir, value);
			size_t n = strlen(r);
			free(r);
			if (n >= PATH_MAX) {
				errs_add(p->errs, c->path, p->line, name, "the path is %zu bytes "
				    "long resolved, over the limit of %d", n, PATH_MAX - 1);
				p->nerr++;
				return 1;
			}
		}
		break;
	case 'i':
		/* The http_max_per_ bounds alone may be 0: no limit. */
		bad = parse_int(value, &i) == -1 || i < (strncmp(name, "http_max_per_", 13) == 0 ?
		    0 : 1) || i > 100000;
		break;
	case 'n':
		bad = parse_int(value, &i) == -1 || i < 0 || i > 100000;
		break;
	case 'd':
		bad = parse_duration(value, &d) == -1;
		break;
	case 'Z':
		bad = parse_size(value, &i) == -1 || i < 0;
		break;
	case 'z':
		/* A spec larger than a request line could not be sent. */
		bad = parse_size(value, &i) == -1 || i < 4096 || i > (strcmp(name,
		    "max_spec_bytes") == 0 ? PL_PROTO_MAX_LINE : INT_MAX);
		break;
	case 'B':
		bad = parse_size(value, &i) == -1 || i < 4096;
		break;
	case 'c':
		bad = parse_int(value, &i) == -1 || i < 1 || i > 1000000000;
		break;
	case 'l':
		bad = log_level_parse(value) == -1;
		break;
	case 'm':
		bad = strcmp(value, "owners") != 0 && strcmp(value, "all") != 0;
		break;
	case 'e': {
		char **w = split_list(value, NULL);
		for (int n = 0; w && w[n]; n++)
			if (!notify_known_kind(w[n])) {
				char known[256];
				struct plc_sb sb;
				plc_sb_init(&sb, known, sizeof(known));
				for (int q = 0; q < CONF_NOTIFY_NKINDS; q++) {
					plc_sb_sep(&sb, " ");
					plc_sb_append(&sb, conf_notify_kinds[q]);
				}
				errs_add(p->errs, c->path, p->line, name, "unknown event \"%s\" (known: "
				    "%s)", w[n], known);
				p->nerr++;
				strv_free(w);
				return 1;
			}
		strv_free(w);
		break;
	}
	case 'a':
		if (*value != '\0') {
			struct sockaddr_storage ss;
			socklen_t sl;
			char msg[256];
			if (httpd_parse_addr(value, &ss, &sl, msg, sizeof(msg)) == -1) {
				errs_add(p->errs, c->path, p->line, name, "%s", msg);
				p->nerr++;
				return 1;
			}
		}
		break;
	case 'g':
		if (*value != '\0') {
			struct group *g = getgrnam(value);
			if (g == NULL) {
				errs_add(p->errs, c->path, p->line, name, "no such group \"%s\"", value);
				p->nerr++;
				return 1;
			}
			if (strcmp(name, "admin_group") == 0)
				c->admin_gid = g->gr_gid;
			else
				c->gid = g->gr_gid;
		}
		break;
	case 'u':
		if (*value != '\0') {
			struct passwd *pw = getpwnam(value);
			if (pw == NULL) {
				errs_add(p->errs, c->path, p->line, name, "no such user \"%s\"", value);
				p->nerr++;
				return 1;
			}
			if (strcmp(name, "user") == 0) {
				c->user_uid = pw->pw_uid;
				c->user_gid = pw->pw_gid;
			} else {
				c->job_uid = pw->pw_uid;
				c->job_gid = pw->pw_gid;
			}
		}
		break;
	}
	if (bad) {
		errs_add(p->errs, c->path, p->line, name, "bad value \"%s\"", value);
		p->nerr++;
		return 1;
	}
	snprintf(sk, sizeof(sk), "%s.%s", section, name);
	cJSON_DeleteItemFromObject(c->all, sk);
	cJSON_DeleteItemFromObject(c->lines, sk);
	cJSON_AddNumberToObject(c->lines, sk, p->line);
	if (k->kind == 'p') {
		char *r = path_resolve(c->dir, value);
		cJSON_AddStringToObject(c->all, sk, r);
		free(r);
	} else {
		cJSON_AddStringToObject(c->all, sk, value);
	}
	if (strcmp(section, "retention") == 0) {
		if (strcmp(name, "keep_promoted") == 0)
			c->keep_promoted = (int)i;
		else if (strcmp(name, "keep_days") == 0)
			c->keep_days = (int)i;
		else if (strcmp(name, "min_size") == 0)
			c->gc_min_size = i;
		return 1;
	}
	if (strcmp(section, "daemon") != 0)
		return 1;
	if (strcmp(name, "state_dir") == 0)
		set_path(c, c->state_dir, value);
	else if (strcmp(name, "control_socket") == 0)
		set_path(c, c->control_socket, value);
	else if (strcmp(name, "feed_socket") == 0)
		set_path(c, c->feed_socket, value);
	else if (strcmp(name, "plugin_dir") == 0)
		set_path(c, c->plugin_dir, value);
	else if (strcmp(name, "shim") == 0)
		set_path(c, c->shim, value);
	else if (strcmp(name, "jobs_dir") == 0)
		set_path(c, c->jobs_dir, value);
	else if (strcmp(name, "log_file") == 0)
		set_path(c, c->log_file, value);
	else if (strcmp(name, "python") == 0)
		snprintf(c->python, sizeof(c->python), "%s", value);
	else if (strcmp(name, "log_level") == 0)
		c->log_level = log_level_parse(value);
	else if (strcmp(name, "max_jobs") == 0)
		c->max_jobs = (int)i;
	else if (strcmp(name, "group") == 0)
		snprintf(c->group, sizeof(c->group), "%s", value);
	else if (strcmp(name, "admin_group") == 0)
		snprintf(c->admin_group, sizeof(c->admin_group), "%s", value);
	else if (strcmp(name, "job_user") == 0)
		snprintf(c->job_user, sizeof(c->job_user), "%s", value);
	else if (strcmp(name, "user") == 0)
		snprintf(c->user, sizeof(c->user), "%s", value);
	else if (strcmp(name, "kill_grace") == 0)
		c->kill_grace = d;
	else if (strcmp(name, "feed_queue_max") == 0)
		c->feed_queue_max = (int)i;
	else if (strcmp(name, "http_listen") == 0 || strcmp(name, "metrics_listen") == 0)
		snprintf(c->http_listen, sizeof(c->http_listen), "%s", value);
	else if (strcmp(name, "http_token") == 0)
		snprintf(c->http_token, sizeof(c->http_token), "%s", value);
	else if (strcmp(name, "http_host") == 0)
		snprintf(c->http_host, sizeof(c->http_host), "%s", value);
	else if (strcmp(name, "http_max_connections") == 0)
		c->http_max_connections = (int)i;
	else if (strcmp(name, "http_max_per_ip") == 0)
		c->http_max_per_ip = (int)i;
	else if (strcmp(name, "http_max_per_session") == 0)
		c->http_max_per_session = (int)i;
	else if (strcmp(name, "http_max_per_user") == 0)
		c->http_max_per_user = (int)i;
	else if (strcmp(name, "http_max_streams") == 0)
		c->http_max_streams = (int)i;
	else if (strcmp(name, "http_timeout") == 0)
		c->http_timeout = d;
	else if (strcmp(name, "http_header_timeout") == 0)
		c->http_header_timeout = d;
	else if (strcmp(name, "web_dir") == 0)
		set_path(c, c->web_dir, value);
	else if (strcmp(name, "control_max_clients") == 0)
		c->control_max_clients = (int)i;
	else if (strcmp(name, "control_idle_timeout") == 0)
		c->control_idle_timeout = d;
	else if (strcmp(name, "feed_max_watchers") == 0)
		c->feed_max_watchers = (int)i;
	else if (strcmp(name, "feed_idle_timeout") == 0)
		c->feed_idle_timeout = d;
	else if (strcmp(name, "max_spec_bytes") == 0)
		c->max_spec_bytes = (int)i;
	else if (strcmp(name, "max_spec_jobs") == 0)
		c->max_spec_jobs = (int)i;
	else if (strcmp(name, "max_variants") == 0)
		c->max_variants = (int)i;
	return 1;
}

/* Is dir/sub a directory? */
static int
is_dir_at(const char *dir, const char *sub)
{
	char buf[PATH_MAX];
	struct stat st;
	snprintf(buf, sizeof(buf), "%s/%s", dir, sub);
	return stat(buf, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Is dir/pipeline-shim there to run? */
static int
has_shim(const char *dir)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s/pipeline-shim", dir);
	return access(buf, X_OK) == 0;
}

/* The helpers' defaults, found from the running binary's own place
 * (/proc/self/exe), never from where the build meant to install it: a
 * development tree (the binaries in daemon/, with plugins/, jobs/ and
 * etc/web beside it), or an installed one, PREFIX/sbin/pipelined and
 * PREFIX/bin/pipelinectl beside PREFIX/lib/pipelined (the shim, the stage
 * process, plugins/, jobs/) and PREFIX/share/pipelined/web. So `make
 * install PREFIX=... DESTDIR=...` after a plain `make`, or a tree moved
 * elsewhere, finds its own files. The build's PREFIX (PL_PREFIX) is the
 * last resort, for a binary found in neither layout. */
static void
conf_default_paths(struct conf *c)
{
	const char *sd = self_dir();
	char lib[PATH_MAX], prefix[PATH_MAX];
	char *r;

	if (has_shim(sd) && is_dir_at(sd, "../plugins")) {
		snprintf(c->shim, sizeof(c->shim), "%s/pipeline-shim", sd);
		r = path_resolve(sd, "../plugins");
		snprintf(c->plugin_dir, sizeof(c->plugin_dir), "%s", r);
		free(r);
		r = path_resolve(sd, "../jobs");
		snprintf(c->jobs_dir, sizeof(c->jobs_dir), "%s", r);
		free(r);
		r = path_resolve(sd, "../etc/web");
		snprintf(c->web_dir, sizeof(c->web_dir), "%s", r);
		free(r);
		return;
	}
	r = path_resolve(sd, "../lib/pipelined");
	snprintf(lib, sizeof(lib), "%s", r);
	free(r);
	if (!has_shim(lib)) {
		/* PREFIX/lib/pipelined itself (pipeline-stage), else the build's. */
		size_t n = strlen(sd), m = strlen("/lib/pipelined");
		if (n > m && strcmp(sd + n - m, "/lib/pipelined") == 0 && has_shim(sd))
			snprintf(lib, sizeof(lib), "%s", sd);
		else
			snprintf(lib, sizeof(lib), "%s/lib/pipelined", PL_PREFIX);
	}
	snprintf(prefix, sizeof(prefix), "%.*s", (int)(strlen(lib) - strlen("/lib/pipelined")),
	    lib);
	snprintf(c->shim, sizeof(c->shim), "%s/pipeline-shim", lib);
	snprintf(c->plugin_dir, sizeof(c->plugin_dir), "%s/plugins", lib);
	snprintf(c->jobs_dir, sizeof(c->jobs_dir), "%s/jobs", lib);
	snprintf(c->web_dir, sizeof(c->web_dir), "%s/share/pipelined/web", prefix);
}

static void
conf_defaults(struct conf *c)
{
	snprintf(c->state_dir, sizeof(c->state_dir), "/var/lib/pipelined");
	snprintf(c->control_socket, sizeof(c->control_socket), "/run/pipelined/control.sock");
	snprintf(c->feed_socket, sizeof(c->feed_socket), "/run/pipelined/feed.sock");
	conf_default_paths(c);
	snprintf(c->python, sizeof(c->python), "/usr/bin/python3");
	c->log_level = LOG_LVL_INFO;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	c->max_jobs = n > 0 ? (int)n : 2;
	c->gid = (gid_t)-1;
	c->admin_gid = (gid_t)-1;
	c->http_max_connections = 1024;
	c->http_max_per_ip = 0;
	c->http_max_per_session = 8;
	c->http_max_per_user = 16;
	c->http_max_streams = 64;
	c->http_timeout = 30;
	c->http_header_timeout = 10;
	c->job_uid = (uid_t)-1;
	c->job_gid = (gid_t)-1;
	c->user_uid = (uid_t)-1;
	c->user_gid = (gid_t)-1;
	c->kill_grace = 10;
	c->feed_queue_max = 1 << 20;
	c->control_max_clients = 256;
	c->control_idle_timeout = 60;
	c->feed_max_watchers = 256;
	c->feed_idle_timeout = 10;
	c->max_spec_bytes = CONF_MAX_SPEC_BYTES;
	c->max_spec_jobs = CONF_MAX_SPEC_JOBS;
	c->max_variants = CONF_MAX_VARIANTS;
	c->keep_promoted = 2;
	c->keep_days = 14;
	c->gc_min_size = 0;
}

int
conf_load(struct conf *c, const char *path, char **errs)
{
	memset(c, 0, sizeof(*c));
	c->all = cJSON_CreateObject();
	c->lines = cJSON_CreateObject();
	conf_defaults(c);
	char *abs = realpath(path, NULL);
	snprintf(c->path, sizeof(c->path), "%s", abs ? abs : path);
	snprintf(c->dir, sizeof(c->dir), "%s", c->path);
	char *slash = strrchr(c->dir, '/');
	if (slash)
		*slash = '\0';
	else
		strcpy(c->dir, ".");
	free(abs);

	struct conf_parse p = { .c = c, .errs = errs };
	/* Read whole and parsed by the spec's line reader: lines (paths, URLs)
	 * of any length. */
	char *text = plc_read_file(path, NULL, 16u << 20);
	if (text == NULL) {
		errs_add(errs, path, 0, "-", "cannot open: %s", strerror(errno));
		return -1;
	}
	int rc = ini_text_parse(c->path, text, conf_handler, &p, &p.line, errs, &p.nerr);
	free(text);
	if (rc > 0) {
		errs_add(errs, c->path, rc, "-", "syntax error (expected [section] or key = value)");
		p.nerr++;
	}
	if (c->http_max_streams >= c->http_max_connections) {
		errs_add(errs, c->path, 0, "http_max_streams", "%d is not below http_max_connections "
		    "(%d): the event streams would leave no room for /metrics", c->http_max_streams,
		    c->http_max_connections);
		p.nerr++;
	}
	if (c->log_file[0] == '\0')
		snprintf(c->log_file, sizeof(c->log_file), "%s/pipelined.log", c->state_dir);
	/* Fill the effective defaults into the lookup table too. */
	static const char *const dk[] = { "daemon.state_dir", "daemon.control_socket",
	    "daemon.feed_socket", "daemon.plugin_dir", "daemon.shim", "daemon.jobs_dir",
	    "daemon.python", "daemon.log_file" };
	const char *dv[] = { c->state_dir, c->control_socket, c->feed_socket,
	    c->plugin_dir, c->shim, c->jobs_dir, c->python, c->log_file };
	for (size_t i = 0; i < sizeof(dk) / sizeof(dk[0]); i++)
		if (!cJSON_HasObjectItem(c->all, dk[i]))
			cJSON_AddStringToObject(c->all, dk[i], dv[i]);
	return p.nerr ? -1 : 0;
}

int
conf_default_user(struct conf *c, char **errs)
{
	if (c->user[0] != '\0' || (c->gid == (gid_t)-1 && c->admin_gid == (gid_t)-1 &&
	    c->job_uid == (uid_t)-1))
		return 0;
	struct passwd *pw = getpwnam(CONF_DEFAULT_USER);
	if (pw == NULL) {
		errs_add(errs, c->path, 0, "user", "unset beside group, admin_group or job_user, "
		    "where it means \"%s\", which is no such user: make install (its sysusers.d "
		    "file) or `useradd -r -M -d /nonexistent -s /usr/sbin/nologin %s` makes it, "
		    "or name another unprivileged user", CONF_DEFAULT_USER, CONF_DEFAULT_USER);
		return -1;
	}
	snprintf(c->user, sizeof(c->user), "%s", CONF_DEFAULT_USER);
	c->user_uid = pw->pw_uid;
	c->user_gid = pw->pw_gid;
	cJSON_DeleteItemFromObject(c->all, "daemon.user");
	cJSON_AddStringToObject(c->all, "daemon.user", c->user);
	return 0;
}

void
conf_free(struct conf *c)
{
	cJSON_Delete(c->all);
	cJSON_Delete(c->lines);
	c->all = c->lines = NULL;
}

int
conf_line(const struct conf *c, const char *section_key)
{
	const cJSON *v = c->lines ? cJSON_GetObjectItemCaseSensitive(c->lines, section_key) : NULL;
	return cJSON_IsNumber(v) ? v->valueint : 0;
}

void
conf_stage_path(const struct conf *c, char *buf, size_t len)
{
	const char *shim = c != NULL ? c->shim : "";
	const char *slash = strrchr(shim, '/');
	if (slash != NULL)
		snprintf(buf, len, "%.*s/pipeline-stage", (int)(slash - shim), shim);
	else
		snprintf(buf, len, "%s/pipeline-stage", self_dir());
}

void
conf_shim_path(const struct conf *c, char *buf, size_t len)
{
	if (c != NULL && c->shim[0] != '\0')
		snprintf(buf, len, "%s", c->shim);
	else
		snprintf(buf, len, "%s/pipeline-shim", self_dir());
}

const char *
conf_get(const struct conf *c, const char *section_key)
{
	if (c == NULL || c->all == NULL)
		return NULL;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->all, section_key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int64_t
conf_number(const struct conf *c, const char *section_key, int64_t def)
{
	int64_t v;
	const char *s = conf_get(c, section_key);
	return s != NULL && parse_size(s, &v) == 0 && v > 0 ? v : def;
}

struct resource *
conf_resource(struct conf *c, const char *name)
{
	for (int i = 0; i < c->nres; i++)
		if (strcmp(c->res[i].name, name) == 0)
			return &c->res[i];
	return NULL;
}

/* The effective configuration, in pipelined.conf syntax (-nv). */
void
conf_print(const struct conf *c, FILE *f)
{
	fprintf(f, "# %s\n# A reload (SIGHUP) applies every key at once but these, which need a "
	    "restart:\n#", c->path);
	for (size_t i = 0; i < NRESTART_KEYS; i++)
		fprintf(f, " %s", restart_keys[i].key);
	fprintf(f, "\n[daemon]\n");
	fprintf(f, "state_dir = %s\n", c->state_dir);
	fprintf(f, "control_socket = %s\n", c->control_socket);
	fprintf(f, "feed_socket = %s\n", c->feed_socket);
	fprintf(f, "plugin_dir = %s\n", c->plugin_dir);
	fprintf(f, "shim = %s\n", c->shim);
	fprintf(f, "jobs_dir = %s\n", c->jobs_dir);
	fprintf(f, "python = %s\n", c->python);
	fprintf(f, "log_level = %s\n", log_level_name(c->log_level));
	fprintf(f, "log_file = %s\n", c->log_file);
	fprintf(f, "max_jobs = %d\n", c->max_jobs);
	fprintf(f, "group = %s\n", c->group);
	fprintf(f, "admin_group = %s\n", c->admin_group);
	fprintf(f, "job_user = %s\n", c->job_user);
	fprintf(f, "user = %s\n", c->user);
	fprintf(f, "kill_grace = %gs\n", c->kill_grace);
	fprintf(f, "feed_queue_max = %d\n", c->feed_queue_max);
	fprintf(f, "http_listen = %s\n", c->http_listen);
	fprintf(f, "http_token = %s\n", c->http_token[0] ? "(set)" : "");
	fprintf(f, "http_host = %s\n", c->http_host);
	fprintf(f, "http_max_connections = %d\n", c->http_max_connections);
	fprintf(f, "http_max_per_ip = %d\n", c->http_max_per_ip);
	fprintf(f, "http_max_per_session = %d\n", c->http_max_per_session);
	fprintf(f, "http_max_per_user = %d\n", c->http_max_per_user);
	fprintf(f, "http_max_streams = %d\n", c->http_max_streams);
	fprintf(f, "http_timeout = %gs\n", c->http_timeout);
	fprintf(f, "http_header_timeout = %gs\n", c->http_header_timeout);
	fprintf(f, "web_dir = %s\n", c->web_dir);
	fprintf(f, "control_max_clients = %d\n", c->control_max_clients);
	fprintf(f, "control_idle_timeout = %gs\n", c->control_idle_timeout);
	fprintf(f, "feed_max_watchers = %d\n", c->feed_max_watchers);
	fprintf(f, "feed_idle_timeout = %gs\n", c->feed_idle_timeout);
	fprintf(f, "events_max_lines = %lld\n", (long long)conf_number(c,
	    "daemon.events_max_lines", CONF_EVENTS_MAX_LINES));
	fprintf(f, "events_max_size = %lld\n", (long long)conf_number(c,
	    "daemon.events_max_size", CONF_EVENTS_MAX_SIZE));
	fprintf(f, "artifact_max_size = %lld\n", (long long)conf_number(c,
	    "daemon.artifact_max_size", CONF_ARTIFACT_MAX_SIZE));
	fprintf(f, "max_spec_bytes = %d\n", c->max_spec_bytes);
	fprintf(f, "max_spec_jobs = %d\n", c->max_spec_jobs);
	fprintf(f, "max_variants = %d\n", c->max_variants);
	fprintf(f, "\n[retention]\n");
	fprintf(f, "keep_promoted = %d\n", c->keep_promoted);
	fprintf(f, "keep_days = %d\n", c->keep_days);
	fprintf(f, "min_size = %lld\n", (long long)c->gc_min_size);
	fprintf(f, "\n[resources]\n");
	for (int i = 0; i < c->nres; i++)
		fprintf(f, "%s = %d\n", c->res[i].name, c->res[i].capacity);
	/* [notify] and [slurm]: the keys set; a secret is not printed. */
	static const char *const sections[] = { "notify", "slurm" };
	for (int s = 0; s < 2; s++) {
		int any = 0;
		for (const struct conf_key *k = conf_keys; k->section; k++) {
			if (strcmp(k->section, sections[s]) != 0)
				continue;
			char sk[128];
			snprintf(sk, sizeof(sk), "%s.%s", sections[s], k->key);
			const char *v = conf_get(c, sk);
			if (v == NULL)
				continue;
			if (!any++)
				fprintf(f, "\n[%s]\n", sections[s]);
			fprintf(f, "%s = %s\n", k->key, strcmp(sk, "notify.secret") == 0 ?
			    "(set)" : v);
		}
	}
}

/* Keep in nc, the configuration a reload read, the running values (old's)
 * of the keys that need a restart; the names of those whose value changed
 * go into changed, separated by ", ". Returns how many changed. */
int
conf_keep_restart(struct conf *nc, const struct conf *old, char *changed, size_t len)
{
	int n = 0;
	changed[0] = '\0';
	for (size_t i = 0; i < NRESTART_KEYS; i++) {
		const struct restart_key *k = &restart_keys[i];
		char *to = (char *)nc + k->off;
		const char *from = (const char *)old + k->off;
		int same = k->type == 's' ? strcmp(to, from) == 0 : memcmp(to, from, k->len) == 0;
		if (!same) {
			size_t l = strlen(changed);
			snprintf(changed + l, len - l, "%s%s", n ? ", " : "", k->key);
			n++;
		}
		memcpy(to, from, k->len);
		/* What conf_get() answers too: the running value. */
		const char *alias[] = { k->key, strcmp(k->key, "http_listen") == 0 ?
		    "metrics_listen" : NULL };
		for (int a = 0; a < 2 && alias[a]; a++) {
			char sk[128];
			snprintf(sk, sizeof(sk), "daemon.%s", alias[a]);
			cJSON_DeleteItemFromObject(nc->all, sk);
			const cJSON *v = cJSON_GetObjectItemCaseSensitive(old->all, sk);
			if (v != NULL)
				cJSON_AddItemToObject(nc->all, sk, cJSON_Duplicate(v, 1));
		}
	}
	return n;
}
