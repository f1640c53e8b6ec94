/* memcap.c: a host-memory cap for spawned processes (see memcap.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plio.h"
#include "memcap.h"

const char *
memcap_kind_str(int kind)
{
	switch (kind) {
	case MEMCAP_V2: return "cgroup v2";
	case MEMCAP_V1: return "cgroup v1";
	case MEMCAP_SYSTEMD: return "systemd scope";
	default: return "none";
	}
}

int64_t
memcap_parse_size(const char *s)
{
	if (s == NULL)
		return -1;
	if (strcasecmp(s, "off") == 0 || strcasecmp(s, "no") == 0 ||
	    strcasecmp(s, "none") == 0)
		return 0;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno != 0 || v <= 0)
		return -1;
	int64_t mult = 1;
	switch (toupper((unsigned char)*end)) {
	case '\0': break;
	case 'K': mult = 1LL << 10; end++; break;
	case 'M': mult = 1LL << 20; end++; break;
	case 'G': mult = 1LL << 30; end++; break;
	case 'T': mult = 1LL << 40; end++; break;
	default: return -1;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0')
		return -1;
	return (int64_t)(v * (double)mult);
}

static int
write_str(const char *dir, const char *file, const char *val)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd == -1)
		return -1;
	int rc = plc_write_all(fd, val, strlen(val));
	int saved = errno;
	close(fd);
	errno = saved;
	return rc;
}

/* The caller's cgroup path for a v1 controller ("memory") or for v2
 * (controller NULL: the "0::" line). */
static int
own_cgroup(const char *controller, char *path, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	char line[4096];
	int found = -1;
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c2 == NULL)
			continue;
		*c1 = *c2 = '\0';
		const char *ctrls = c1 + 1, *p = c2 + 1;
		if (controller == NULL) {
			if (strcmp(line, "0") == 0 && *ctrls == '\0') {
				snprintf(path, len, "%s", p);
				found = 0;
			}
			continue;
		}
		char buf[512];
		snprintf(buf, sizeof(buf), "%s", ctrls);
		for (char *s = NULL, *t = strtok_r(buf, ",", &s); t; t = strtok_r(NULL, ",", &s))
			if (strcmp(t, controller) == 0) {
				snprintf(path, len, "%s", p);
				found = 0;
			}
	}
	fclose(f);
	return found;
}

/* Where the hierarchy holding cgroup path cg is mounted: fstype "cgroup2",
 * or "cgroup" with option opt. The mount's root may be a subtree (a
 * container), in which case cg is taken relative to it. */
static int
cgroup_dir(const char *fstype, const char *opt, const char *cg, char *out,
    size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[8192];
	int found = -1;
	if (f == NULL)
		return -1;
	while (found == -1 && fgets(line, sizeof(line), f) != NULL) {
		char *fields[12] = { 0 };
		int n = 0;
		char *sep = strstr(line, " - ");
		if (sep == NULL)
			continue;
		*sep = '\0';
		for (char *s = NULL, *t = strtok_r(line, " ", &s); t && n < 6; t = strtok_r(NULL, " ", &s))
			fields[n++] = t;
		char *rest = sep + 3, *s2 = NULL;
		char *fs = strtok_r(rest, " \n", &s2);
		strtok_r(NULL, " \n", &s2);               /* source */
		char *super = strtok_r(NULL, " \n", &s2);
		if (n < 5 || fs == NULL || strcmp(fs, fstype) != 0)
			continue;
		if (opt != NULL) {
			int has = 0;
			char buf[1024];
			snprintf(buf, sizeof(buf), "%s", super ? super : "");
			for (char *s = NULL, *t = strtok_r(buf, ",", &s); t; t = strtok_r(NULL, ",", &s))
				if (strcmp(t, opt) == 0)
					has = 1;
			if (!has)
				continue;
		}
		const char *root = fields[3], *mnt = fields[4];
		size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
		if (rl > 0 && (strncmp(cg, root, rl) != 0 || (cg[rl] != '/' && cg[rl] != '\0')))
			continue;
		snprintf(out, len, "%s%s", mnt, cg + rl);
		found = 0;
	}
	fclose(f);
	return found;
}

static int
make_group(struct memcap *mc, const char *parent, const char *name)
{
	static unsigned seq;
	snprintf(mc->dir, sizeof(mc->dir), "%s/pipelined-%s-%ld-%u", parent, name,
	    (long)getpid(), __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
	if (mkdir(mc->dir, 0755) == -1)
		return -1;
	snprintf(mc->procs, sizeof(mc->procs), "%s/cgroup.procs", mc->dir);
	return 0;
}

/* The caller's own cgroup v2 directory, where it delegates the memory
 * controller. */
static int
v2_parent(char *parent, size_t plen, char *why, size_t len)
{
	char cg[PATH_MAX], ctl[PATH_MAX];
	if (own_cgroup(NULL, cg, sizeof(cg)) == -1 ||
	    cgroup_dir("cgroup2", NULL, cg, parent, plen) == -1) {
		snprintf(why, len, "cgroup v2: not mounted for this process");
		return -1;
	}
	snprintf(ctl, sizeof(ctl), "%s/cgroup.subtree_control", parent);
	char *sub = plc_read_file(ctl, NULL, 4096);
	int has = sub != NULL && (strncmp(sub, "memory", 6) == 0 || strstr(sub, " memory") != NULL);
	free(sub);
	if (!has) {
		snprintf(why, len, "cgroup v2: %s does not delegate the memory controller",
		    parent);
		return -1;
	}
	return 0;
}

/* The caller's own cgroup v1 memory directory. */
static int
v1_parent(char *parent, size_t plen, char *why, size_t len)
{
	char cg[PATH_MAX];
	if (own_cgroup("memory", cg, sizeof(cg)) == -1 ||
	    cgroup_dir("cgroup", "memory", cg, parent, plen) == -1) {
		snprintf(why, len, "cgroup v1: no memory hierarchy mounted");
		return -1;
	}
	return 0;
}

static int
try_v2(struct memcap *mc, char *why, size_t len)
{
	char parent[PATH_MAX], val[64];
	if (v2_parent(parent, sizeof(parent), why, len) == -1)
		return -1;
	if (make_group(mc, parent, "probe") == -1) {
		snprintf(why, len, "cgroup v2: mkdir in %s: %s", parent, strerror(errno));
		return -1;
	}
	snprintf(val, sizeof(val), "%lld", (long long)mc->bytes);
	if (write_str(mc->dir, "memory.max", val) == -1) {
		snprintf(why, len, "cgroup v2: %s/memory.max: %s", mc->dir, strerror(errno));
		rmdir(mc->dir);
		return -1;
	}
	write_str(mc->dir, "memory.swap.max", "0");   /* absent without swap */
	mc->kind = MEMCAP_V2;
	return 0;
}

static int
try_v1(struct memcap *mc, char *why, size_t len)
{
	char parent[PATH_MAX], val[64];
	if (v1_parent(parent, sizeof(parent), why, len) == -1)
		return -1;
	if (make_group(mc, parent, "probe") == -1) {
		snprintf(why, len, "cgroup v1: mkdir in %s: %s", parent, strerror(errno));
		return -1;
	}
	snprintf(val, sizeof(val), "%lld", (long long)mc->bytes);
	if (write_str(mc->dir, "memory.limit_in_bytes", val) == -1) {
		snprintf(why, len, "cgroup v1: %s/memory.limit_in_bytes: %s", mc->dir,
		    strerror(errno));
		rmdir(mc->dir);
		return -1;
	}
	/* memsw counts memory plus swap: the same figure means no swap. It
	 * only exists with swap accounting on. */
	write_str(mc->dir, "memory.memsw.limit_in_bytes", val);
	mc->kind = MEMCAP_V1;
	return 0;
}

static int
try_systemd(struct memcap *mc, char *why, size_t len)
{
	struct stat st;
	if (stat("/run/systemd/system", &st) == -1 || !S_ISDIR(st.st_mode)) {
		snprintf(why, len, "systemd: not running");
		return -1;
	}
	if (access("/usr/bin/systemd-run", X_OK) == -1 && access("/bin/systemd-run", X_OK) == -1) {
		snprintf(why, len, "systemd: no systemd-run");
		return -1;
	}
	snprintf(mc->prop[0], sizeof(mc->prop[0]), "MemoryMax=%lld", (long long)mc->bytes);
	snprintf(mc->prop[1], sizeof(mc->prop[1]), "MemorySwapMax=0");
	mc->kind = MEMCAP_SYSTEMD;
	return 0;
}

/* Whether this process is in the cgroup directory dir already (its
 * v2 or v1 memory cgroup ends in dir's last component, a name of the
 * parent's own pattern). */
static int
in_group(const char *dir)
{
	char cg[PATH_MAX];
	const char *leaf = strrchr(dir, '/');
	size_t n;
	for (int v = 2; v >= 1; v--) {
		if (own_cgroup(v == 2 ? NULL : "memory", cg, sizeof(cg)) == -1)
			continue;
		const char *mine = strrchr(cg, '/');
		if (leaf != NULL && mine != NULL && strcmp(mine, leaf) == 0 &&
		    (n = strlen(cg)) <= strlen(dir) && strcmp(dir + strlen(dir) - n, cg) == 0)
			return 1;
	}
	return 0;
}

int
memcap_create(struct memcap *mc, int64_t bytes, const char *name, char *why,
    size_t len)
{
	char w2[512] = "", w1[512] = "", ws[512] = "", wg[PATH_MAX + 64] = "";
	(void)name;
	memset(mc, 0, sizeof(*mc));
	mc->bytes = bytes;
	/* The group the daemon's privileged parent made, capped at the same
	 * size, which it moved this process's shim into: this process and
	 * what it spawns are in it already. */
	const char *given = getenv("PL_MEMCAP_DIR");
	if (given != NULL && *given == '/' && strlen(given) + 32 < sizeof(mc->dir)) {
		char mx[PATH_MAX];
		snprintf(mc->dir, sizeof(mc->dir), "%s", given);
		snprintf(mc->procs, sizeof(mc->procs), "%s/cgroup.procs", given);
		snprintf(mx, sizeof(mx), "%s/memory.max", given);
		if (in_group(given)) {
			mc->kind = access(mx, F_OK) == 0 ? MEMCAP_V2 : MEMCAP_V1;
			mc->given = 1;
			return 0;
		}
		snprintf(wg, sizeof(wg), "PL_MEMCAP_DIR %s: not this process's cgroup; ", given);
		mc->dir[0] = mc->procs[0] = '\0';
	}
	if (try_v2(mc, w2, sizeof(w2)) == 0 || try_v1(mc, w1, sizeof(w1)) == 0 ||
	    try_systemd(mc, ws, sizeof(ws)) == 0)
		return 0;
	snprintf(why, len, "%s%s; %s; %s", wg, w2, w1, ws);
	return -1;
}

int
memcap_make_root(struct memcap *mc, int64_t bytes, char *why, size_t len)
{
	char w2[512] = "", w1[512] = "";
	memset(mc, 0, sizeof(*mc));
	mc->bytes = bytes;
	if (try_v2(mc, w2, sizeof(w2)) == -1 && try_v1(mc, w1, sizeof(w1)) == -1) {
		snprintf(why, len, "%s; %s", w2, w1);
		return -1;
	}
	return 0;
}

int
memcap_move(const char *dir, pid_t pid)
{
	char val[32];
	snprintf(val, sizeof(val), "%ld\n", (long)pid);
	return write_str(dir, "cgroup.procs", val);
}

int
memcap_leaf_ok(const char *leaf)
{
	static const char pre[] = "pipelined-probe-";
	if (strncmp(leaf, pre, sizeof(pre) - 1) != 0)
		return 0;
	const char *p = leaf + sizeof(pre) - 1;
	int dash = 0, digits = 0;
	for (; *p != '\0'; p++) {
		if (*p == '-' && digits > 0 && !dash) {
			dash = 1;
			digits = 0;
		} else if (isdigit((unsigned char)*p) && digits < 10)
			digits++;
		else
			return 0;
	}
	return dash && digits > 0;
}

int
memcap_dir_ok(const char *dir)
{
	char parent[PATH_MAX], why[512];
	const char *leaf = strrchr(dir, '/');
	if (leaf == NULL || !memcap_leaf_ok(leaf + 1))
		return 0;
	size_t n = (size_t)(leaf - dir);
	for (int v = 2; v >= 1; v--)
		if ((v == 2 ? v2_parent : v1_parent)(parent, sizeof(parent), why,
		    sizeof(why)) == 0 && strlen(parent) == n && strncmp(dir, parent, n) == 0)
			return 1;
	return 0;
}

int
memcap_remove_leaf(const char *leaf)
{
	char parent[PATH_MAX], dir[PATH_MAX + 64], why[512];
	int e = ENOENT;
	if (!memcap_leaf_ok(leaf)) {
		errno = EINVAL;
		return -1;
	}
	for (int v = 2; v >= 1; v--) {
		if ((v == 2 ? v2_parent : v1_parent)(parent, sizeof(parent), why,
		    sizeof(why)) == -1)
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", parent, leaf);
		if (rmdir(dir) == 0)
			return 0;
		if (errno != ENOENT)
			e = errno;
	}
	errno = e;
	return -1;
}

const char *const *
memcap_argv(struct memcap *mc, const char *const *argv)
{
	int n = 0, k = 0;
	while (argv[n] != NULL)
		n++;
	if (n + 12 > (int)(sizeof(mc->argv) / sizeof(mc->argv[0])))
		return NULL;
	if (mc->kind == MEMCAP_SYSTEMD) {
		mc->argv[k++] = "systemd-run";
		mc->argv[k++] = "--scope";
		mc->argv[k++] = "--quiet";
		mc->argv[k++] = "-p";
		mc->argv[k++] = mc->prop[0];
		mc->argv[k++] = "-p";
		mc->argv[k++] = mc->prop[1];
		mc->argv[k++] = "--";
	} else if (mc->given) {
		/* In the group already (memcap_create()). */
	} else {
		/* The shell joins the group, then becomes the command: the
		 * shim's child is the capped process itself. A failure to
		 * join is reported as an error event and exit status 1. */
		mc->argv[k++] = "/bin/sh";
		mc->argv[k++] = "-c";
		mc->argv[k++] =
		    "echo $$ > \"$0\" 2>/dev/null || { "
		    "m=\"cannot join the memory cgroup $0\"; echo \"$m\" >&2; "
		    "[ -n \"$PL_EVENTS\" ] && printf '{\"type\":\"error\",\"message\":\"%s\"}\\n' "
		    "\"$m\" >> \"$PL_EVENTS\"; exit 1; }; exec \"$@\"";
		mc->argv[k++] = mc->procs;
	}
	for (int i = 0; i < n; i++)
		mc->argv[k++] = argv[i];
	mc->argv[k] = NULL;
	return mc->argv;
}

static uint64_t
read_u64(const char *dir, const char *file)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	char *s = plc_read_file(path, NULL, 4096);
	uint64_t v = s ? strtoull(s, NULL, 10) : 0;
	free(s);
	return v;
}

/* "key N" lines (memory.events, memory.oom_control). */
static uint64_t
read_keyed(const char *dir, const char *file, const char *key)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	char *s = plc_read_file(path, NULL, 65536);
	uint64_t v = 0;
	size_t kl = strlen(key);
	for (char *p = s; p != NULL && *p != '\0'; ) {
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
			v = strtoull(p + kl + 1, NULL, 10);
			break;
		}
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	free(s);
	return v;
}

void
memcap_finish(struct memcap *mc, uint64_t *peak, int *oom_kills)
{
	*peak = 0;
	*oom_kills = 0;
	if (mc->kind == MEMCAP_V2) {
		*peak = read_u64(mc->dir, "memory.peak");
		*oom_kills = (int)read_keyed(mc->dir, "memory.events", "oom_kill");
	} else if (mc->kind == MEMCAP_V1) {
		*peak = read_u64(mc->dir, "memory.max_usage_in_bytes");
		*oom_kills = (int)read_keyed(mc->dir, "memory.oom_control", "oom_kill");
		if (*oom_kills == 0 && read_u64(mc->dir, "memory.failcnt") > 0 &&
		    *peak + (1 << 20) >= (uint64_t)mc->bytes)
			*oom_kills = -1;   /* hit the limit; the kernel has no count */
	}
	if ((mc->kind == MEMCAP_V1 || mc->kind == MEMCAP_V2) && !mc->given) {
		/* The last process may take a moment to leave the group. */
		for (int i = 0; i < 50 && rmdir(mc->dir) == -1 && errno == EBUSY; i++) {
			struct timespec ts = { 0, 100 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
	mc->kind = MEMCAP_NONE;
}
