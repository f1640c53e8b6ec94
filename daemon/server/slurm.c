/*
 * slurm.c: the Slurm side of the slurm executor: batch scripts, sbatch,
 * state queries and their parsers, state mapping, scancel. See slurm.h.
 *
 * Everything here runs Slurm's own client commands (sbatch, scontrol,
 * squeue, sacct, scancel) rather than linking libslurm: their text output
 * is stable across the versions Debian ships, the daemon needs no Slurm
 * headers to build, and a cluster's client configuration (SLURM_CONF,
 * munge) applies exactly as it does for an operator at a shell.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "slurm.h"

extern char **environ;

static const struct {
	const char *name;
	int state;
} states[] = {
	{ "PENDING", SLURM_PENDING },
	{ "RUNNING", SLURM_RUNNING },
	{ "SUSPENDED", SLURM_SUSPENDED },
	{ "COMPLETING", SLURM_COMPLETING },
	{ "CONFIGURING", SLURM_CONFIGURING },
	{ "COMPLETED", SLURM_COMPLETED },
	{ "CANCELLED", SLURM_CANCELLED },
	{ "FAILED", SLURM_FAILED },
	{ "TIMEOUT", SLURM_TIMEOUT },
	{ "NODE_FAIL", SLURM_NODE_FAIL },
	{ "PREEMPTED", SLURM_PREEMPTED },
	{ "BOOT_FAIL", SLURM_BOOT_FAIL },
	{ "DEADLINE", SLURM_DEADLINE },
	{ "OUT_OF_MEMORY", SLURM_OUT_OF_MEMORY },
	{ "REQUEUED", SLURM_REQUEUED },
	{ "REQUEUE_HOLD", SLURM_REQUEUE_HOLD },
	{ "REQUEUE_FED", SLURM_REQUEUE_FED },
	{ "SPECIAL_EXIT", SLURM_SPECIAL_EXIT },
	{ "RESV_DEL_HOLD", SLURM_RESV_DEL_HOLD },
	{ "REVOKED", SLURM_REVOKED },
	{ "RESIZING", SLURM_RESIZING },
	{ "SIGNALING", SLURM_SIGNALING },
	{ "STAGE_OUT", SLURM_STAGE_OUT },
	{ "STOPPED", SLURM_STOPPED },
	/* squeue's and sacct's compact codes. */
	{ "PD", SLURM_PENDING }, { "R", SLURM_RUNNING }, { "S", SLURM_SUSPENDED },
	{ "CG", SLURM_COMPLETING }, { "CF", SLURM_CONFIGURING }, { "CD", SLURM_COMPLETED },
	{ "CA", SLURM_CANCELLED }, { "F", SLURM_FAILED }, { "TO", SLURM_TIMEOUT },
	{ "NF", SLURM_NODE_FAIL }, { "PR", SLURM_PREEMPTED }, { "BF", SLURM_BOOT_FAIL },
	{ "DL", SLURM_DEADLINE }, { "OOM", SLURM_OUT_OF_MEMORY }, { "RQ", SLURM_REQUEUED },
	{ "RH", SLURM_REQUEUE_HOLD }, { "RF", SLURM_REQUEUE_FED }, { "SE", SLURM_SPECIAL_EXIT },
	{ "RD", SLURM_RESV_DEL_HOLD }, { "RV", SLURM_REVOKED }, { "RS", SLURM_RESIZING },
	{ "SI", SLURM_SIGNALING }, { "SO", SLURM_STAGE_OUT }, { "ST", SLURM_STOPPED },
};

/* A state as printed: "CANCELLED", "CANCELLED by 0" (sacct),
 * "COMPLETING+" or a compact code. Only the leading word counts. */
int
slurm_state_parse(const char *name)
{
	char w[32];
	size_t n = 0;
	while (name && (isupper((unsigned char)name[n]) || name[n] == '_') && n < sizeof(w) - 1) {
		w[n] = name[n];
		n++;
	}
	w[n] = '\0';
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		if (strcmp(states[i].name, w) == 0)
			return states[i].state;
	return SLURM_UNKNOWN;
}

const char *
slurm_state_name(int state)
{
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		if (states[i].state == state)
			return states[i].name;
	return "UNKNOWN";
}

int
slurm_state_terminal(int state)
{
	switch (state) {
	case SLURM_COMPLETED: case SLURM_CANCELLED: case SLURM_FAILED:
	case SLURM_TIMEOUT: case SLURM_NODE_FAIL: case SLURM_PREEMPTED:
	case SLURM_BOOT_FAIL: case SLURM_DEADLINE: case SLURM_OUT_OF_MEMORY:
	case SLURM_REVOKED:
		return 1;
	}
	return 0;
}

/*
 * Requeued and held jobs count as queued: Slurm will run them again (a
 * REQUEUE_HOLD or SPECIAL_EXIT job waits for an operator's release).
 * COMPLETING is still running for us: the job's processes are being
 * reaped, and a requeue may yet follow it.
 */
int
slurm_proc_state(int state)
{
	if (slurm_state_terminal(state))
		return PROC_ENDED;
	switch (state) {
	case SLURM_RUNNING: case SLURM_SUSPENDED: case SLURM_COMPLETING:
	case SLURM_RESIZING: case SLURM_SIGNALING: case SLURM_STAGE_OUT:
	case SLURM_STOPPED:
		return PROC_RUNNING;
	}
	return PROC_QUEUED;
}

const char *
slurm_end_class(int state)
{
	switch (state) {
	case SLURM_TIMEOUT: case SLURM_DEADLINE:
		return "timeout";
	case SLURM_NODE_FAIL: case SLURM_BOOT_FAIL:
		return "node_fail";
	case SLURM_PREEMPTED:
		return "preempted";
	case SLURM_CANCELLED: case SLURM_REVOKED:
		return "cancelled";
	case SLURM_OUT_OF_MEMORY:
		return "oom";
	}
	return "";
}

static void
copy(char *dst, size_t len, const char *src, size_t n)
{
	if (n >= len)
		n = len - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static void
job_init(struct slurm_job *j, const char *source)
{
	memset(j, 0, sizeof(*j));
	j->restarts = -1;
	snprintf(j->source, sizeof(j->source), "%s", source);
}

/* "S:G" into status and signal; 0 or -1. */
static int
parse_exitcode(const char *s, int *status, int *sig)
{
	char *end;
	long a = strtol(s, &end, 10);
	if (end == s || *end != ':')
		return -1;
	const char *g = end + 1;
	long b = strtol(g, &end, 10);
	if (end == g || a < 0 || a > 255 || b < 0 || b > 255)
		return -1;
	*status = (int)a;
	*sig = (int)b;
	return 0;
}

static void
set_reason(struct slurm_job *j, const char *v, size_t n)
{
	copy(j->reason, sizeof(j->reason), v, n);
	if (strcmp(j->reason, "None") == 0 || strcmp(j->reason, "(null)") == 0)
		j->reason[0] = '\0';
}

static void
set_state(struct slurm_job *j, const char *v, size_t n)
{
	char buf[64];
	copy(buf, sizeof(buf), v, n);
	/* sacct: "CANCELLED by 0"; keep the word. */
	char *sp = strchr(buf, ' ');
	if (sp)
		*sp = '\0';
	snprintf(j->state_name, sizeof(j->state_name), "%s", buf);
	j->state = slurm_state_parse(buf);
}

/*
 * A key starts a token when it is a word of letters, digits and the
 * characters scontrol uses in keys (AllocNode:Sid, ReqB:S:C:T,
 * NtasksPerN:B:S:C, Socks/Node) followed by '='. A token that does not
 * start so continues the previous value: values such as Command= or
 * WorkDir= may hold spaces.
 */
static size_t
key_len(const char *t, size_t n)
{
	size_t i = 0;
	if (n == 0 || !isalpha((unsigned char)t[0]))
		return 0;
	while (i < n && (isalnum((unsigned char)t[i]) || t[i] == '_' || t[i] == ':' || t[i] == '/'))
		i++;
	return i < n && t[i] == '=' ? i : 0;
}

/* Apply one key=value pair of scontrol's (or jobcomp's) output. */
static void
apply_pair(struct slurm_job *j, const char *key, size_t klen, const char *val,
    size_t vlen, int *found_id, int *found_state)
{
#define KEY(k) (klen == sizeof(k) - 1 && strncmp(key, k, klen) == 0)
	char b[64];
	/* Only free-text values (Reason, paths) may hold spaces: the others
	 * end at their first word. */
	if (!KEY("Reason")) {
		size_t w = 0;
		while (w < vlen && val[w] != ' ' && val[w] != '\t')
			w++;
		vlen = w;
	}
	if (KEY("JobId")) {
		/* The record's own id comes first; a later JobId= (inside a
		 * Comment=, say) does not replace it. */
		if (!*found_id && vlen > 0) {
			copy(j->id, sizeof(j->id), val, vlen);
			*found_id = 1;
		}
	} else if (KEY("JobState")) {
		set_state(j, val, vlen);
		*found_state = 1;
	} else if (KEY("Reason")) {
		set_reason(j, val, vlen);
	} else if (KEY("Restarts")) {
		copy(b, sizeof(b), val, vlen);
		j->restarts = atoi(b);
	} else if (KEY("ExitCode")) {
		copy(b, sizeof(b), val, vlen);
		if (parse_exitcode(b, &j->exit_status, &j->exit_signal) == 0)
			j->have_exit = 1;
	} else if (KEY("NodeList") || (KEY("BatchHost") && j->nodes[0] == '\0')) {
		if (vlen > 0 && !(vlen == 6 && strncmp(val, "(null)", 6) == 0))
			copy(j->nodes, sizeof(j->nodes), val, vlen);
	}
#undef KEY
}

/*
 * One record: the text up to the first newline. Each token that starts
 * with a key begins a pair; its value runs to the next such token.
 */
int
slurm_parse_scontrol(const char *line, struct slurm_job *j)
{
	job_init(j, "scontrol");
	const char *end = strchr(line, '\n');
	if (end == NULL)
		end = line + strlen(line);
	const char *key = NULL, *val = NULL, *p = line;
	size_t klen = 0;
	int found_id = 0, found_state = 0;
	for (;;) {
		while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
			p++;
		const char *t = p;
		while (p < end && *p != ' ' && *p != '\t' && *p != '\r')
			p++;
		size_t tlen = (size_t)(p - t);
		size_t kl = key_len(t, tlen);
		if (tlen == 0 || kl > 0) {
			if (key != NULL) {
				const char *vend = tlen == 0 ? end : t;
				while (vend > val && isspace((unsigned char)vend[-1]))
					vend--;
				apply_pair(j, key, klen, val, (size_t)(vend - val),
				    &found_id, &found_state);
			}
			if (tlen == 0)
				break;
			key = t;
			klen = kl;
			val = t + kl + 1;
		}
	}
	return found_id && found_state && j->state != SLURM_UNKNOWN ? 0 : -1;
}

/* The next line of text into buf (without its newline); NULL at the end. */
static const char *
next_line(const char *s, char *buf, size_t len)
{
	if (s == NULL || *s == '\0')
		return NULL;
	const char *nl = strchr(s, '\n');
	size_t n = nl ? (size_t)(nl - s) : strlen(s);
	copy(buf, len, s, n);
	if (n > 0 && buf[n < len ? n - 1 : len - 2] == '\r')
		buf[n < len ? n - 1 : len - 2] = '\0';
	return nl ? nl + 1 : s + n;
}

/* Split buf at '|' into at most max fields; returns the count. */
static int
split_bar(char *buf, char **f, int max)
{
	int n = 0;
	char *p = buf;
	while (n < max) {
		f[n++] = p;
		char *bar = strchr(p, '|');
		if (bar == NULL)
			break;
		*bar = '\0';
		p = bar + 1;
	}
	return n;
}

int
slurm_parse_squeue(const char *text, const char *id, struct slurm_job *j)
{
	char line[1024];
	const char *s = text;
	while ((s = next_line(s, line, sizeof(line))) != NULL) {
		char *f[4];
		int n = split_bar(line, f, 4);
		if (n < 2 || strcmp(f[0], id) != 0)
			continue;
		job_init(j, "squeue");
		snprintf(j->id, sizeof(j->id), "%s", f[0]);
		set_state(j, f[1], strlen(f[1]));
		if (n >= 3)
			set_reason(j, f[2], strlen(f[2]));
		if (n >= 4 && f[3][0] != '(')
			snprintf(j->nodes, sizeof(j->nodes), "%s", f[3]);
		return j->state != SLURM_UNKNOWN ? 0 : -1;
	}
	return -1;
}

/*
 * sacct -n -P -X -o JobID,State,ExitCode,Reason,NodeList. With -X only
 * the allocation's line is printed; a requeued job (without -D) shows its
 * latest run.
 */
int
slurm_parse_sacct(const char *text, const char *id, struct slurm_job *j)
{
	char line[1024];
	const char *s = text;
	int found = -1;
	while ((s = next_line(s, line, sizeof(line))) != NULL) {
		char *f[5];
		int n = split_bar(line, f, 5);
		if (n < 3 || strcmp(f[0], id) != 0)
			continue;
		job_init(j, "sacct");
		snprintf(j->id, sizeof(j->id), "%s", f[0]);
		set_state(j, f[1], strlen(f[1]));
		if (parse_exitcode(f[2], &j->exit_status, &j->exit_signal) == 0)
			j->have_exit = 1;
		if (n >= 4)
			set_reason(j, f[3], strlen(f[3]));
		if (n >= 5 && strcmp(f[4], "None assigned") != 0)
			snprintf(j->nodes, sizeof(j->nodes), "%s", f[4]);
		found = j->state != SLURM_UNKNOWN ? 0 : -1;
	}
	return found;
}

/*
 * jobcomp/filetxt writes one line per job end (and one per requeue) in
 * scontrol's key=value format, starting with "JobId=ID ". The last record
 * of the job is its latest word.
 */
int
slurm_parse_jobcomp(const char *text, const char *id, struct slurm_job *j)
{
	char want[96];
	int wl = snprintf(want, sizeof(want), "JobId=%s ", id);
	const char *s = text, *last = NULL;
	while (s && *s) {
		if (strncmp(s, want, (size_t)wl) == 0)
			last = s;
		s = strchr(s, '\n');
		if (s)
			s++;
	}
	if (last == NULL)
		return -1;
	if (slurm_parse_scontrol(last, j) == -1)
		return -1;
	snprintf(j->source, sizeof(j->source), "jobcomp");
	/* jobcomp's ExitCode is the batch script's; a requeue record says
	 * PENDING, like scontrol would. */
	return 0;
}

int
slurm_parse_sbatch(const char *text, char *id, size_t idlen)
{
	/* The id is the first line that is a number, optionally ";cluster";
	 * sbatch may print warnings ("sbatch: ...") before it. */
	char line[256];
	const char *s = text;
	while ((s = next_line(s, line, sizeof(line))) != NULL) {
		size_t n = 0;
		while (isdigit((unsigned char)line[n]))
			n++;
		if (n == 0 || (line[n] != '\0' && line[n] != ';'))
			continue;
		if (n >= idlen)
			return -1;
		copy(id, idlen, line, n);
		return 0;
	}
	return -1;
}

int
slurm_parse_config(const char *text, const char *key, char *buf, size_t len)
{
	char line[1024];
	const char *s = text;
	size_t kl = strlen(key);
	while ((s = next_line(s, line, sizeof(line))) != NULL) {
		if (strncmp(line, key, kl) != 0 || (line[kl] != ' ' && line[kl] != '='))
			continue;
		char *eq = strchr(line + kl, '=');
		if (eq == NULL)
			continue;
		eq++;
		while (*eq == ' ')
			eq++;
		snprintf(buf, len, "%s", eq);
		return 0;
	}
	return -1;
}

/* ---------------------------------------------------------------- options */

static int
has_space(const char *s)
{
	for (; *s; s++)
		if (isspace((unsigned char)*s))
			return 1;
	return 0;
}

/* Slurm's time formats: minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or
 * UNLIMITED / infinite. */
static int
valid_time(const char *s)
{
	if (strcasecmp(s, "unlimited") == 0 || strcasecmp(s, "infinite") == 0)
		return 1;
	int digits = 0, colons = 0, dash = 0;
	for (const char *p = s; *p; p++) {
		if (isdigit((unsigned char)*p))
			digits++;
		else if (*p == ':' && digits > 0 && p[1] != '\0')
			colons++;
		else if (*p == '-' && !dash && colons == 0 && digits > 0 && p[1] != '\0')
			dash = 1;
		else
			return 0;
	}
	return digits > 0 && colons <= 2;
}

/* --mem: a number with an optional K, M, G or T suffix. */
static int
valid_mem(const char *s)
{
	const char *p = s;
	while (isdigit((unsigned char)*p))
		p++;
	if (p == s)
		return 0;
	if (*p && strchr("KMGTkmgt", *p))
		p++;
	return *p == '\0';
}

/* [B:|R:]SIG[@SECONDS], or "none". */
static int
valid_signal(const char *s)
{
	if (strcmp(s, "none") == 0)
		return 1;
	if ((s[0] == 'B' || s[0] == 'R') && s[1] == ':')
		s += 2;
	const char *p = s;
	while (isalnum((unsigned char)*p))
		p++;
	if (p == s)
		return 0;
	if (*p == '@') {
		const char *d = ++p;
		while (isdigit((unsigned char)*p))
			p++;
		if (p == d)
			return 0;
	}
	return *p == '\0';
}

/* "90", "90s", "1.5m", "2h": seconds, or -1. */
static double
duration(const char *v)
{
	char *end;
	double d = strtod(v, &end);
	if (end == v || d < 0)
		return -1;
	if (*end == 's')
		end++;
	else if (*end == 'm')
		d *= 60, end++;
	else if (*end == 'h')
		d *= 3600, end++;
	return *end == '\0' ? d : -1;
}

/* The sbatch(1) options a spec may give in sbatch_options: the shape and
 * placement of the job (nodes, tasks, CPUs, GPUs, memory per unit, node
 * features, QOS, reservation, time floor, niceness, mail, comment,
 * dependencies), each as --NAME or --NAME=VALUE. Never what says who the
 * batch script runs as, which files it writes or reads, where it runs or
 * what environment it gets (--uid, --gid, --output, --error, --input,
 * --chdir, --export, --get-user-env, --wrap...): the script is the
 * daemon's and starts as the daemon's user (or, submitted by the
 * privileged parent, as the run's owner: priv.c), so one of those from a
 * submitter's spec would write a file or run code with the daemon's
 * rights. pipelined.conf's [slurm] sbatch_options, the operator's, is not
 * limited. */
static const char *const spec_sbatch_ok[] = {
	"begin", "clusters", "cluster-constraint", "comment", "constraint", "contiguous",
	"cores-per-socket", "cpus-per-gpu", "cpus-per-task", "deadline", "dependency",
	"distribution", "exclude", "exclusive", "gpu-bind", "gpu-freq", "gpus",
	"gpus-per-node", "gpus-per-socket", "gpus-per-task", "gres", "gres-flags", "hint",
	"licenses", "mail-type", "mail-user", "mem-bind", "mem-per-cpu", "mem-per-gpu",
	"mincpus", "nice", "nodelist", "nodes", "ntasks", "ntasks-per-core",
	"ntasks-per-gpu", "ntasks-per-node", "ntasks-per-socket", "overcommit",
	"oversubscribe", "qos", "reservation", "sockets-per-node", "spread-job",
	"switches", "threads-per-core", "time-min", "tmp", "use-min-nodes", "wckey",
	NULL
};

int
slurm_spec_options_check(const char *v, char *err, size_t errlen)
{
	char tmp[1024], *save = NULL;
	if (strlen(v) >= sizeof(tmp)) {
		snprintf(err, errlen, "too long (at most %zu characters)", sizeof(tmp) - 1);
		return -1;
	}
	snprintf(tmp, sizeof(tmp), "%s", v);
	for (char *t = strtok_r(tmp, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
		for (const unsigned char *c = (const unsigned char *)t; *c; c++)
			if (*c < 0x21 || *c == 0x7f || *c == '"' || *c == '\'' || *c == '\\') {
				snprintf(err, errlen, "\"%.64s\": a control character, a quote or "
				    "a backslash", t);
				return -1;
			}
		size_t n = strcspn(t, "=");
		int ok = 0;
		if (strncmp(t, "--", 2) == 0)
			for (int i = 0; spec_sbatch_ok[i] && !ok; i++)
				ok = n - 2 == strlen(spec_sbatch_ok[i]) &&
				    strncmp(t + 2, spec_sbatch_ok[i], n - 2) == 0;
		if (!ok) {
			snprintf(err, errlen, "\"%.64s\" is not an option a spec may give: it takes "
			    "--NAME or --NAME=VALUE for the job's shape and placement (such as --qos, "
			    "--exclusive, --nodes, --gpus, --constraint); who the batch script runs "
			    "as, its files and environment are the daemon's (pipeline.ini(5))", t);
			return -1;
		}
	}
	return 0;
}

int
slurm_opts_parse(const char *opts, struct slurm_opts *o, char *err, size_t errlen)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->signal, sizeof(o->signal), "USR1@120");
	o->poll = 1;
	o->requeue = 1;
	const char *s = opts;
	char line[1024];
	while ((s = next_line(s, line, sizeof(line))) != NULL) {
		if (line[0] == '\0' || line[0] == '#')
			continue;
		char *eq = strchr(line, '=');
		if (eq == NULL) {
			snprintf(err, errlen, "\"%s\": not key=value", line);
			return -1;
		}
		*eq = '\0';
		char *k = line, *v = eq + 1;
		/* Trim both. */
		while (*k == ' ')
			k++;
		for (char *e = k + strlen(k); e > k && e[-1] == ' '; )
			*--e = '\0';
		while (*v == ' ')
			v++;
		for (char *e = v + strlen(v); e > v && e[-1] == ' '; )
			*--e = '\0';
#define STR(name, check, what) \
		if (strcmp(k, #name) == 0) { \
			if (strlen(v) >= sizeof(o->name)) { \
				snprintf(err, errlen, "%s: too long (at most %zu characters)", k, \
				    sizeof(o->name) - 1); \
				return -1; \
			} \
			if (!(check)) { \
				snprintf(err, errlen, "%s: \"%s\" is not %s", k, v, what); \
				return -1; \
			} \
			snprintf(o->name, sizeof(o->name), "%s", v); \
			continue; \
		}
		STR(partition, !has_space(v), "a partition name (no spaces)")
		STR(gres, !has_space(v), "a GRES list such as gpu:1 (no spaces)")
		STR(time, v[0] == '\0' || valid_time(v), "a Slurm time (minutes, H:M:S, D-H:M:S)")
		STR(mem, v[0] == '\0' || valid_mem(v), "a size such as 16G")
		STR(account, !has_space(v), "an account name (no spaces)")
		STR(sbatch_options, strchr(v, '\n') == NULL, "one line")
		STR(signal, valid_signal(v), "a signal such as USR1@120, or none")
		STR(checkpoints, !has_space(v), "a directory without spaces")
		STR(jobcomp, 1, "a path")
		STR(job_name, !has_space(v), "a job name (no spaces)")
#undef STR
		if (strcmp(k, "poll") == 0 || strcmp(k, "poll_interval") == 0) {
			double d = duration(v);
			if (d < 0.2 || d > 3600) {
				snprintf(err, errlen, "%s: \"%s\" is not a duration between 0.2s "
				    "and 1h", k, v);
				return -1;
			}
			o->poll = d;
			continue;
		}
		if (strcmp(k, "signal_before") == 0) {
			double d = duration(v);
			if (d < 0 || d > 65535) {
				snprintf(err, errlen, "signal_before: \"%s\" is not a duration "
				    "up to 65535s", v);
				return -1;
			}
			if (d == 0)
				snprintf(o->signal, sizeof(o->signal), "none");
			else
				snprintf(o->signal, sizeof(o->signal), "USR1@%d", (int)d);
			continue;
		}
		if (strcmp(k, "bin_dir") == 0) {
			if (strlen(v) >= sizeof(o->bin_dir)) {
				snprintf(err, errlen, "bin_dir: too long");
				return -1;
			}
			snprintf(o->bin_dir, sizeof(o->bin_dir), "%s", v);
			continue;
		}
		if (strcmp(k, "requeue") == 0) {
			if (strcmp(v, "yes") == 0 || strcmp(v, "true") == 0 || strcmp(v, "on") == 0 ||
			    strcmp(v, "1") == 0)
				o->requeue = 1;
			else if (strcmp(v, "no") == 0 || strcmp(v, "false") == 0 ||
			    strcmp(v, "off") == 0 || strcmp(v, "0") == 0)
				o->requeue = 0;
			else {
				snprintf(err, errlen, "requeue: \"%s\" is not a boolean", v);
				return -1;
			}
			continue;
		}
		/* Other executors' keys and the daemon's own pass through. */
	}
	return 0;
}

/* ---------------------------------------------------------------- script */

char *
slurm_shquote(const char *s)
{
	size_t n = 3;
	for (const char *p = s; *p; p++)
		n += *p == '\'' ? 4 : 1;
	char *q = malloc(n), *d = q;
	if (q == NULL)
		return NULL;
	*d++ = '\'';
	for (const char *p = s; *p; p++) {
		if (*p == '\'') {
			memcpy(d, "'\\''", 4);
			d += 4;
		} else
			*d++ = *p;
	}
	*d++ = '\'';
	*d = '\0';
	return q;
}

struct buf {
	char *s;
	size_t len, cap;
	int oom;
};

static void
bput(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
bput(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = 1;
			return;
		}
		if (b->s && (size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap * 2 : 4096;
		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		char *ns = realloc(b->s, cap);
		if (ns == NULL) {
			b->oom = 1;
			return;
		}
		b->s = ns;
		b->cap = cap;
	}
}

static void
bput_quoted(struct buf *b, const char *s)
{
	char *q = slurm_shquote(s);
	if (q == NULL) {
		b->oom = 1;
		return;
	}
	bput(b, "%s", q);
	free(q);
}

/* A path in an #SBATCH line: no white space (sbatch splits there); '%'
 * doubled, since sbatch expands %j and friends in --output. */
static int
sbatch_path(struct buf *b, const char *opt, const char *path, char *err, size_t errlen)
{
	if (has_space(path)) {
		snprintf(err, errlen, "%s: \"%s\" holds white space, which an #SBATCH line "
		    "cannot carry", opt, path);
		return -1;
	}
	bput(b, "#SBATCH %s=", opt);
	for (const char *p = path; *p; p++)
		bput(b, *p == '%' ? "%%%%" : "%c", *p);
	bput(b, "\n");
	return 0;
}

static const char *
env_get(char *const envp[], const char *name)
{
	size_t n = strlen(name);
	for (char *const *e = envp; e && *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

/*
 * The batch script. Slurm runs it on the compute node in the process
 * directory (on the shared filesystem, so the same path as here). It
 *  - refuses to run once the daemon has recorded the job's end
 *    (slurm.ended in the records directory, exec_slurm.c): a requeue
 *    of a job the daemon has already finished with must not start a
 *    second copy beside the next attempt;
 *  - on a restart after a requeue (preemption, node failure, scontrol
 *    requeue), moves the previous run's exit record aside and exports
 *    PL_RESUME_FROM with the newest complete checkpoint (the COMPLETE
 *    marker lists exactly the files present and every sha256 matches,
 *    as pipeline-job(7) defines it), so a training resumes instead of
 *    starting over;
 *  - runs the shim in the background and waits for it: the shell traps
 *    USR1 and USR2 (the --signal warning before the time limit, and
 *    scancel --batch) and forwards them to the shim it started (its own
 *    child, $!), which forwards them to the job's process group, known
 *    to it alone: never a process group read from a file the job can
 *    write (the batch step may run as the daemon's user, root); it survives
 *    TERM (Slurm signals every process of the job; the shim forwards TERM
 *    itself), so the shim can still write exit.json before the batch step
 *    ends and Slurm kills what is left; a wait a trapped signal ended
 *    (status over 128, a trap having set pl_sig: USR1, USR2, TERM, INT,
 *    HUP) is waited again, and the
 *    shell answers that second wait with the status it kept even when
 *    the shim ended meanwhile (a kill -0 there found it gone and took
 *    the interrupted wait's 138 for the job's status);
 *  - starts the shim with a clean environment (env -i, only PATH) and
 *    hands it the job's command line and environment as data, a request
 *    on its standard input (pipeline-shim -R 0, the format of shim.c):
 *    the batch step's environment (Slurm's variables), then the job's,
 *    whose entries replace those of the same name; nothing of the job's
 *    environment (LD_PRELOAD) is in any process of the script's, which
 *    runs as the daemon's user (or as the run's owner, where the
 *    privileged parent submitted it so: the shim then has no -u and
 *    nobody to become); only the job's program, once the shim has made
 *    it the run's user, executes with it;
 *  - exits with the job's own status, so Slurm's record (FAILED,
 *    COMPLETED) agrees with the exit record.
 */
char *
slurm_script(const struct slurm_opts *o, const char *dir, const char *records,
    const char *log, char *const argv[], char *const envp[], const char *cwd, char *err,
    size_t errlen)
{
	struct buf b = { 0 };
	if (argv == NULL || argv[0] == NULL) {
		snprintf(err, errlen, "no command to run");
		return NULL;
	}
	bput(&b, "#!/bin/sh\n");
	bput(&b, "# Written by pipelined (exec_slurm.c) and submitted with sbatch.\n");
	char name[128];
	const char *run = env_get(envp, "PL_RUN"), *job = env_get(envp, "PL_JOB");
	if (o->job_name[0])
		snprintf(name, sizeof(name), "%s", o->job_name);
	else
		snprintf(name, sizeof(name), "pl.%s.%s", run ? run : "run", job ? job : "job");
	for (char *p = name; *p; p++)
		if (isspace((unsigned char)*p) || *p == '\'' || *p == '"')
			*p = '_';
	/* The extra options first: sbatch takes an option's last
	 * occurrence, so the daemon's own lines below win over them. */
	if (o->sbatch_options[0]) {
		char tmp[sizeof(o->sbatch_options)], *save = NULL;
		snprintf(tmp, sizeof(tmp), "%s", o->sbatch_options);
		for (char *t = strtok_r(tmp, " \t", &save); t; t = strtok_r(NULL, " \t", &save))
			bput(&b, "#SBATCH %s\n", t);
	}
	bput(&b, "#SBATCH --job-name=%s\n", name);
	if (sbatch_path(&b, "--chdir", dir, err, errlen) == -1 ||
	    sbatch_path(&b, "--output", log, err, errlen) == -1) {
		free(b.s);
		return NULL;
	}
	bput(&b, "#SBATCH --open-mode=append\n");
	bput(&b, "#SBATCH %s\n", o->requeue ? "--requeue" : "--no-requeue");
	if (strcmp(o->signal, "none") != 0)
		bput(&b, "#SBATCH --signal=%s%s\n",
		    (o->signal[0] == 'B' || o->signal[0] == 'R') && o->signal[1] == ':' ? "" : "B:",
		    o->signal);
	if (o->partition[0])
		bput(&b, "#SBATCH --partition=%s\n", o->partition);
	if (o->gres[0])
		bput(&b, "#SBATCH --gres=%s\n", o->gres);
	if (o->time[0])
		bput(&b, "#SBATCH --time=%s\n", o->time);
	if (o->mem[0])
		bput(&b, "#SBATCH --mem=%s\n", o->mem);
	if (o->account[0])
		bput(&b, "#SBATCH --account=%s\n", o->account);
	bput(&b, "\npl_dir=");
	bput_quoted(&b, dir);
	bput(&b, "\npl_records=");
	bput_quoted(&b, records);
	bput(&b, "\n"
	    "pl_restart=${SLURM_RESTART_COUNT:-0}\n"
	    "if [ -e \"$pl_records/slurm.ended\" ]; then\n"
	    "\techo \"pipelined: Slurm job ${SLURM_JOB_ID:-?} (restart $pl_restart): the daemon "
	    "has recorded this job's end already; not running it again\"\n"
	    "\texit 0\n"
	    "fi\n");
	/* The job's environment, exactly as the daemon built it: data for
	 * the shim's request (pl_request below), never exported here. */
	int envc = 0;
	for (char *const *e = envp; e && *e; e++, envc++) {
		const char *eq = strchr(*e, '=');
		size_t n = eq ? (size_t)(eq - *e) : 0;
		int ok = n > 0 && (isalpha((unsigned char)(*e)[0]) || (*e)[0] == '_');
		for (size_t i = 0; ok && i < n; i++)
			ok = isalnum((unsigned char)(*e)[i]) || (*e)[i] == '_';
		if (!ok) {
			snprintf(err, errlen, "environment entry \"%.64s\" is not NAME=VALUE", *e);
			free(b.s);
			return NULL;
		}
	}
	const char *workdir = env_get(envp, "PL_WORKDIR");
	bput(&b, "pl_workdir=");
	bput_quoted(&b, workdir ? workdir : "");
	bput(&b, "\n");
	bput(&b, "cd ");
	bput_quoted(&b, cwd ? cwd : dir);
	bput(&b, " || exit 1\n\n");
	bput(&b,
	    "# The newest complete checkpoint under $1 (pipeline-job(7)).\n"
	    "pl_newest_checkpoint() {\n"
	    "\tfor pl_s in $(ls -1 \"$1\" 2>/dev/null | sed -n 's/^checkpoint-\\([0-9][0-9]*\\)$/\\1/p' | sort -rn); do\n"
	    "\t\tpl_c=\"$1/checkpoint-$pl_s\"\n"
	    "\t\t[ -f \"$pl_c/COMPLETE\" ] || continue\n"
	    "\t\tpl_l=$(sed 's/^[0-9a-f]*[ ][ *]//' \"$pl_c/COMPLETE\" | sort)\n"
	    "\t\tpl_p=$(ls -A \"$pl_c\" | grep -vx COMPLETE | sort)\n"
	    "\t\tif [ \"$pl_l\" != \"$pl_p\" ]; then\n"
	    "\t\t\techo \"pipelined: $pl_c: COMPLETE does not list exactly its files; passed over\"\n"
	    "\t\t\tcontinue\n"
	    "\t\tfi\n"
	    "\t\tif ! (cd \"$pl_c\" && sha256sum --status -c COMPLETE); then\n"
	    "\t\t\techo \"pipelined: $pl_c: a file does not match its sha256 in COMPLETE; passed over\"\n"
	    "\t\t\tcontinue\n"
	    "\t\tfi\n"
	    "\t\techo \"$pl_c\"\n"
	    "\t\treturn 0\n"
	    "\tdone\n"
	    "\treturn 1\n"
	    "}\n\n");
	bput(&b, "if [ \"$pl_restart\" -gt 0 ]; then\n"
	    "\techo \"pipelined: Slurm job $SLURM_JOB_ID restarted (restart $pl_restart) on $(hostname)\"\n"
	    "\tfor pl_f in exit.json shim.json; do\n"
	    "\t\t[ -e \"$pl_dir/$pl_f\" ] && mv -f \"$pl_dir/$pl_f\" \"$pl_dir/$pl_f.restart-$pl_restart\"\n"
	    "\tdone\n");
	if (o->checkpoints[0]) {
		bput(&b, "\tpl_ckroot=");
		bput_quoted(&b, o->checkpoints);
		bput(&b, "\n");
	} else
		bput(&b, "\tpl_ckroot=\"${pl_workdir:-$PWD}/checkpoints\"\n");
	bput(&b,
	    "\tpl_out=$(pl_newest_checkpoint \"$pl_ckroot\")\n"
	    "\tpl_ck=$(printf '%%s\\n' \"$pl_out\" | tail -n 1)\n"
	    "\tprintf '%%s\\n' \"$pl_out\" | grep '^pipelined: ' || :\n"
	    "\tcase $pl_ck in\n"
	    "\t\"$pl_ckroot\"/checkpoint-*)\n"
	    "\t\tpl_resume=\"$pl_ck\"\n"
	    "\t\techo \"pipelined: resuming from $pl_ck\";;\n"
	    "\t*)\techo \"pipelined: no complete checkpoint under $pl_ckroot\";;\n"
	    "\tesac\n"
	    "fi\n\n");
	/* The request: uint32 argc and envc (little-endian, as printf's
	 * octal escapes), then the strings, each ended by a NUL. */
	int argc = 0;
	while (argv[argc])
		argc++;
	bput(&b,
	    "pl_u32() {\n"
	    "\tprintf \"\\\\$(printf %%03o $(($1 & 255)))\\\\$(printf %%03o $((($1 >> 8) & 255)))"
	    "\\\\$(printf %%03o $((($1 >> 16) & 255)))\\\\$(printf %%03o $((($1 >> 24) & 255)))\"\n"
	    "}\n"
	    "pl_request() {\n"
	    "\tpl_n=$(($(tr -cd '\\000' < /proc/$$/environ | wc -c) + %d))\n"
	    "\t[ -z \"${pl_resume:-}\" ] || pl_n=$((pl_n + 1))\n"
	    "\tpl_u32 %d\n"
	    "\tpl_u32 \"$pl_n\"\n"
	    "\tprintf '%%s\\000'", envc, argc);
	for (int i = 0; i < argc; i++) {
		bput(&b, " \\\n\t    ");
		bput_quoted(&b, argv[i]);
	}
	/* The batch step's environment (Slurm's: SLURM_JOB_ID,
	 * CUDA_VISIBLE_DEVICES), then the job's, which the shim lets replace
	 * an entry of the same name. */
	bput(&b, "\n\tcat /proc/$$/environ\n");
	if (envc > 0) {
		bput(&b, "\tprintf '%%s\\000'");
		for (char *const *e = envp; *e; e++) {
			bput(&b, " \\\n\t    ");
			bput_quoted(&b, *e);
		}
		bput(&b, "\n");
	}
	bput(&b,
	    "\t[ -z \"${pl_resume:-}\" ] || printf '%%s\\000' \"PL_RESUME_FROM=$pl_resume\"\n"
	    "}\n"
	    "pl_forward() {\n"
	    "\tpl_sig=1\n"
	    "\tkill -s \"$1\" \"$pl_pid\" 2>/dev/null\n"
	    "\treturn 0\n"
	    "}\n"
	    "trap 'pl_forward USR1' USR1\n"
	    "trap 'pl_forward USR2' USR2\n"
	    "trap 'pl_sig=1' TERM INT HUP\n\n");
	bput(&b, "pl_request | env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin ");
	bput_quoted(&b, argv[0]);
	bput(&b, " -R 0 &\n"
	    "pl_pid=$!\n"
	    "pl_rc=0\n"
	    "while :; do\n"
	    "\tpl_sig=\n"
	    "\twait \"$pl_pid\"\n"
	    "\tpl_w=$?\n"
	    "\t[ \"$pl_w\" -eq 127 ] && break\n"
	    "\tpl_rc=$pl_w\n"
	    "\t[ -n \"$pl_sig\" ] && [ \"$pl_w\" -gt 128 ] || break\n"
	    "done\n"
	    "if [ \"$pl_rc\" -eq 0 ] && [ -f \"$pl_dir/exit.json\" ]; then\n"
	    "\tpl_x=$(sed -n 's/.*\"exited\":\\([0-9]*\\).*/\\1/p' \"$pl_dir/exit.json\")\n"
	    "\tpl_st=$(sed -n 's/.*\"status\":\\([0-9]*\\).*/\\1/p' \"$pl_dir/exit.json\")\n"
	    "\tpl_sg=$(sed -n 's/.*\"signal\":\\([0-9]*\\).*/\\1/p' \"$pl_dir/exit.json\")\n"
	    "\t[ \"$pl_x\" = 1 ] && exit \"${pl_st:-0}\"\n"
	    "\t[ \"${pl_sg:-0}\" -gt 0 ] && exit $((128 + pl_sg))\n"
	    "fi\n"
	    "exit \"$pl_rc\"\n");
	if (b.oom) {
		free(b.s);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	return b.s;
}

/* ---------------------------------------------------------------- commands */

static double
mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * posix_spawnp rather than fork: the daemon is multithreaded, and the
 * child must not run anything between fork and exec. The pipe is
 * O_CLOEXEC so a command started by another job thread at the same time
 * does not hold our write end open.
 */
static char bin_dir[256];
static pthread_mutex_t bin_lock = PTHREAD_MUTEX_INITIALIZER;

void
slurm_set_bin_dir(const char *dir)
{
	pthread_mutex_lock(&bin_lock);
	snprintf(bin_dir, sizeof(bin_dir), "%s", dir ? dir : "");
	pthread_mutex_unlock(&bin_lock);
}

int
slurm_cmd(char *const argv[], char *out, size_t outlen, int timeout_ms)
{
	char prog[PATH_MAX];
	pthread_mutex_lock(&bin_lock);
	if (bin_dir[0] && strchr(argv[0], '/') == NULL)
		snprintf(prog, sizeof(prog), "%s/%s", bin_dir, argv[0]);
	else
		snprintf(prog, sizeof(prog), "%s", argv[0]);
	pthread_mutex_unlock(&bin_lock);
	int fds[2];
	out[0] = '\0';
	if (pipe2(fds, O_CLOEXEC) == -1) {
		snprintf(out, outlen, "pipe: %s", strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
	pid_t pid;
	int rc = posix_spawnp(&pid, prog, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (rc != 0) {
		close(fds[0]);
		snprintf(out, outlen, "%s: %s", prog, strerror(rc));
		return -1;
	}
	return slurm_collect(pid, fds[0], argv[0], out, outlen, timeout_ms);
}

int
slurm_collect(pid_t pid, int fd, const char *name, char *out, size_t outlen,
    int timeout_ms)
{
	size_t len = 0;
	out[0] = '\0';
	double deadline = mono() + timeout_ms / 1000.0;
	int killed = 0;
	for (;;) {
		int left = (int)((deadline - mono()) * 1000);
		if (left <= 0) {
			kill(pid, SIGKILL);
			killed = 1;
			break;
		}
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int n = poll(&pfd, 1, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			continue;
		char tmp[4096];
		ssize_t r = read(fd, tmp, sizeof(tmp));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		size_t take = (size_t)r;
		if (len + take >= outlen)
			take = outlen - 1 - len;
		memcpy(out + len, tmp, take);
		len += take;
		out[len] = '\0';
	}
	close(fd);
	int status = 0, w;
	while ((w = waitpid(pid, &status, 0)) == -1 && errno == EINTR)
		;
	if (w == -1) {
		/* Someone else reaped it (a SIGCHLD handler waiting for any
		 * child): its status is lost, and a guess would be a lie. */
		snprintf(out, outlen, "%s: exit status lost: %s", name, strerror(errno));
		return -1;
	}
	if (killed) {
		snprintf(out, outlen, "%s: no answer within %d ms", name, timeout_ms);
		return -1;
	}
	if (!WIFEXITED(status)) {
		snprintf(out + len, outlen - len, "%s%s: killed by signal %d", len ? "\n" : "",
		    name, WTERMSIG(status));
		return -1;
	}
	return WEXITSTATUS(status);
}

void
slurm_last_words(const char *out, char *err, size_t errlen)
{
	const char *end = out + strlen(out);
	while (end > out && isspace((unsigned char)end[-1]))
		end--;
	const char *start = end;
	while (start > out && start[-1] != '\n')
		start--;
	snprintf(err, errlen, "%.*s", (int)(end - start), start);
}

int
slurm_submit(const char *script_path, char *id, size_t idlen, char *err, size_t errlen)
{
	char out[8192];
	char *argv[] = { "sbatch", "--parsable", (char *)script_path, NULL };
	int rc = slurm_cmd(argv, out, sizeof(out), SLURM_TIMEOUT_MS);
	if (rc != 0) {
		slurm_last_words(out, err, errlen);
		if (rc > 0 && err[0] == '\0')
			snprintf(err, errlen, "sbatch exited with status %d", rc);
		return -1;
	}
	if (slurm_parse_sbatch(out, id, idlen) == -1) {
		snprintf(err, errlen, "sbatch printed no job id: \"%.200s\"", out);
		return -1;
	}
	return 0;
}

/*
 * Where jobcomp/filetxt writes, from Slurm's configuration: asked once
 * per process. "" when the cluster keeps no such file.
 */
static void
jobcomp_path(char *buf, size_t len)
{
	static char cached[PATH_MAX];
	static int done;
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&lock);
	if (!done) {
		char out[65536], type[128] = "";
		char *argv[] = { "scontrol", "show", "config", NULL };
		if (slurm_cmd(argv, out, sizeof(out), SLURM_TIMEOUT_MS) == 0) {
			slurm_parse_config(out, "JobCompType", type, sizeof(type));
			if (strcmp(type, "jobcomp/filetxt") == 0)
				slurm_parse_config(out, "JobCompLoc", cached, sizeof(cached));
			done = 1;
		}
	}
	snprintf(buf, len, "%s", cached);
	pthread_mutex_unlock(&lock);
}

/* The last 4 MiB of a jobcomp file are plenty for a job that ended since
 * the controller forgot it (MinJobAge). */
static char *
read_tail(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return NULL;
	struct stat st;
	if (fstat(fd, &st) == -1) {
		close(fd);
		return NULL;
	}
	off_t want = 4 << 20, off = st.st_size > want ? st.st_size - want : 0;
	size_t n = (size_t)(st.st_size - off);
	char *t = malloc(n + 1);
	ssize_t r = t ? pread(fd, t, n, off) : -1;
	close(fd);
	if (r < 0) {
		free(t);
		return NULL;
	}
	t[r] = '\0';
	if (off > 0) {
		/* Drop the partial first line. */
		char *nl = strchr(t, '\n');
		if (nl)
			memmove(t, nl + 1, strlen(nl + 1) + 1);
	}
	return t;
}

int
slurm_query(const char *id, const char *jobcomp, struct slurm_job *j,
    char *err, size_t errlen)
{
	char out[16384];
	char idarg[80];
	snprintf(idarg, sizeof(idarg), "%s", id);
	char *sc[] = { "scontrol", "show", "job", "-o", idarg, NULL };
	int rc = slurm_cmd(sc, out, sizeof(out), SLURM_TIMEOUT_MS);
	if (rc == 0 && slurm_parse_scontrol(out, j) == 0 && strcmp(j->id, id) == 0)
		return 1;
	if (rc != 0 && strstr(out, "Invalid job id") == NULL) {
		/* The controller did not answer (down, munge, timeout). */
		slurm_last_words(out, err, errlen);
		return -1;
	}
	/* Forgotten by the controller (MinJobAge passed): accounting, if
	 * the cluster keeps it, else the completion records. */
	char *sa[] = { "sacct", "-n", "-P", "-X", "-j", idarg,
	    "-o", "JobID,State,ExitCode,Reason,NodeList", NULL };
	if (slurm_cmd(sa, out, sizeof(out), SLURM_TIMEOUT_MS) == 0 &&
	    slurm_parse_sacct(out, id, j) == 0)
		return 1;
	char path[PATH_MAX];
	if (jobcomp && jobcomp[0])
		snprintf(path, sizeof(path), "%s", jobcomp);
	else
		jobcomp_path(path, sizeof(path));
	if (path[0]) {
		char *t = read_tail(path);
		int found = t && slurm_parse_jobcomp(t, id, j) == 0;
		free(t);
		if (found)
			return 1;
	}
	return 0;
}

void
slurm_cancel_argv(const char *id, int sig, char *argv[8], char sigarg[32], char idarg[80])
{
	snprintf(idarg, 80, "%s", id);
	int k = 0;
	argv[k++] = "scancel";
	if (sig != 0 && sig != SIGKILL) {
		snprintf(sigarg, 32, "--signal=%d", sig);
		argv[k++] = sigarg;
		argv[k++] = sig == SIGUSR1 || sig == SIGUSR2 ? "--batch" : "--full";
	}
	argv[k++] = idarg;
	argv[k] = NULL;
}

int
slurm_cancel(const char *id, int sig, char *err, size_t errlen)
{
	char out[4096], sigarg[32], idarg[80], *argv[8];
	slurm_cancel_argv(id, sig, argv, sigarg, idarg);
	int rc = slurm_cmd(argv, out, sizeof(out), SLURM_TIMEOUT_MS);
	if (rc != 0) {
		slurm_last_words(out, err, errlen);
		if (err[0] == '\0')
			snprintf(err, errlen, "scancel exited with status %d", rc);
		return -1;
	}
	/* scancel exits 0 but warns for a job that already ended. */
	slurm_last_words(out, err, errlen);
	return 0;
}
