/* test_core_util.c: the daemon's small parsers and helpers (util.c), owner_fs_enter()
 * among them. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pld.h"
#include "plio.h"
#include "runner.h"

/* Another thread's view while the main thread holds an owner's rights:
 * it still opens a root-only file (the switch is the calling thread's). */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase, other_ok;
static const char *secret_path;

static void *
other_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	while (phase != 1)
		pthread_cond_wait(&cv, &mu);
	int fd = open(secret_path, O_RDONLY | O_CLOEXEC);
	other_ok = fd >= 0;
	if (fd >= 0)
		close(fd);
	phase = 2;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* owner_fs_enter/leave (as root): a root-only file is refused to the
 * owner's rights on this thread only, and readable again after. */
static void
case_owner_fs(void)
{
	if (geteuid() != 0)
		UNIT_SKIP("owner_fs_enter needs root");
	char path[] = "/tmp/test_core_util.XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0 && fchmod(fd, 0600) == 0);
	close(fd);
	secret_path = path;
	struct owner_fs save;
	CHECK(owner_fs_enter(NULL, &save) == 0);
	CHECK(owner_fs_enter("0:0", &save) == 0);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0);
	CHECK(owner_fs_enter("65534:65534:65534", &save) == 1);
	errno = 0;
	CHECK(open(path, O_RDONLY) == -1 && errno == EACCES);
	pthread_mutex_lock(&mu);
	phase = 1;
	pthread_cond_broadcast(&cv);
	while (phase != 2)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	CHECK(other_ok == 1);
	owner_fs_leave(&save);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	pthread_join(t, NULL);
	unlink(path);
}

static void
case_parsers(void)
{
	double d;
	int64_t i;
	int b;
	CHECK(parse_duration("90", &d) == 0 && d == 90);
	CHECK(parse_duration("1.5m", &d) == 0 && d == 90);
	CHECK(parse_duration("2h", &d) == 0 && d == 7200);
	CHECK(parse_duration("1d", &d) == 0 && d == 86400);
	CHECK(parse_duration("250ms", &d) == 0 && d == 0.25);
	CHECK(parse_duration("-1", &d) == -1);
	CHECK(parse_duration("5 min", &d) == -1);
	CHECK(parse_duration("", &d) == -1);
	CHECK(parse_duration("soon", &d) == -1);
	CHECK(parse_size("8M", &i) == 0 && i == 8 << 20);
	CHECK(parse_size("2G", &i) == 0 && i == 2LL << 30);
	CHECK(parse_size("1.5K", &i) == 0 && i == 1536);
	CHECK(parse_size("100MB", &i) == 0 && i == 100 << 20);
	CHECK(parse_size("100MiB", &i) == 0 && i == 100 << 20);
	CHECK(parse_size("7Q", &i) == -1);
	CHECK(parse_size("M", &i) == -1);
	CHECK(parse_size("8191P", &i) == -1);   /* no such unit */
	CHECK(parse_size("8388608T", &i) == -1 && parse_size("1e300", &i) == -1); /* past int64 */
	CHECK(parse_size("8388607T", &i) == 0 && i == 8388607LL << 40);
	CHECK(parse_bool("yes", &b) == 0 && b == 1);
	CHECK(parse_bool("Off", &b) == 0 && b == 0);
	CHECK(parse_bool("maybe", &b) == -1);
	CHECK(parse_int("42", &i) == 0 && i == 42);
	CHECK(parse_int("4x", &i) == -1);
	CHECK(parse_double("1e3", &d) == 0 && d == 1000);
	CHECK(parse_double("nan", &d) == -1);
}

static void
case_names(void)
{
	int n;
	char **v;

	CHECK(valid_name("v18") && valid_name("bake-incumbent") && valid_name("a.b_c"));
	CHECK(!valid_name("") && !valid_name(".hidden") && !valid_name("a b") && !valid_name("a/b"));
	v = split_list(" a, b  c,,d ", &n);
	CHECK(n == 4 && strcmp(v[0], "a") == 0 && strcmp(v[3], "d") == 0 && v[4] == NULL);
	strv_free(v);
	v = split_list(NULL, &n);
	CHECK(n == 0 && v[0] == NULL);
	strv_free(v);
}

static void
case_paths(void)
{
	char *p = path_resolve("/a/b/../c", "./d/../e");
	CHECK(strcmp(p, "/a/c/e") == 0);
	free(p);
	p = path_resolve("/x", "/abs/./y");
	CHECK(strcmp(p, "/abs/y") == 0);
	free(p);
	p = path_resolve("rel", "../../up");
	CHECK(strcmp(p, "../up") == 0);
	free(p);
}

static void
case_proc_starttime(void)
{
	CHECK(proc_starttime(getpid()) > 0);
	CHECK(proc_starttime(999999999) == 0);
}

static void
case_mkdirs_and_conf(void)
{
	/* plc_mkdirs: mkdir -p from the leaf up. */
	char tmpl[] = "/tmp/test_core_util.XXXXXX", d2[PATH_MAX];
	CHECK(mkdtemp(tmpl) != NULL);
	snprintf(d2, sizeof(d2), "%s/a/b/c/", tmpl);
	CHECK(plc_mkdirs(d2, 0750) == 0);
	struct stat sb;
	snprintf(d2, sizeof(d2), "%s/a/b/c", tmpl);
	CHECK(stat(d2, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 0777) == 0750);
	CHECK(plc_mkdirs(d2, 0750) == 0); /* exists */
	snprintf(d2, sizeof(d2), "%s/a/file", tmpl);
	FILE *f = fopen(d2, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	snprintf(d2, sizeof(d2), "%s/a/file/sub", tmpl);
	CHECK(plc_mkdirs(d2, 0750) == -1 && errno == ENOTDIR);
	/* pipelined.conf: a line past inih's 200 bytes is an error at its own
	 * line (it was handed on in pieces, numbered as lines of their own),
	 * and a feed_queue_max past int is refused. */
	snprintf(d2, sizeof(d2), "%s/pipelined.conf", tmpl);
	f = fopen(d2, "w");
	CHECK(f != NULL);
	if (f) {
		fprintf(f, "[daemon]\n# %0250d\nmax_jobs = 0\n[resources]\ngpu = 1\n"
		    "feed_queue_max = 4G\n", 0);
		fclose(f);
	}
	struct conf conf;
	char *errs = NULL, want[PATH_MAX * 3];
	CHECK(conf_load(&conf, d2, &errs) == -1);
	/* A long line is read whole (a 250-byte comment here). */
	snprintf(want, sizeof(want), "%s:3: max_jobs: ", d2);
	CHECK(errs && strncmp(errs, want, strlen(want)) == 0);
	CHECK(errs && strstr(errs, ":6: feed_queue_max: ") != NULL);
	CHECK(conf.nres == 1 && conf.res[0].capacity == 1);
	if (errs && strncmp(errs, want, strlen(want)) != 0)
		fprintf(stderr, "got:\n%s", errs);
	free(errs);
	conf_free(&conf);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
	CHECK(system(cmd) == 0);
}

static void
case_utf8_clean(void)
{
	/* utf8_clean: valid text is left alone; each bad byte (a lone
	 * continuation, an overlong form, a surrogate, a cut sequence)
	 * becomes U+FFFD. */
	CHECK(utf8_clean("plain \xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80") == NULL);
	char *u = utf8_clean("a\xff" "b\xc0\xaf" "c\xed\xa0\x80" "d\xe2\x82");
	CHECK(u && strcmp(u, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c"
	    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "d\xef\xbf\xbd\xef\xbf\xbd") == 0);
	free(u);
}

static void
case_nul(void)
{
	/* nul_line and json_has_nul. */
	CHECK(nul_line("a\nb\nc\0d", 7) == 3 && nul_line("abc", 3) == 0);
	CHECK(json_has_nul("{\"t\":\"x\\u0000y\"}") == 1);
	CHECK(json_has_nul("{\"t\":\"x\\\\u0000y\"}") == 0);   /* an escaped backslash */
	CHECK(json_has_nul("{\"t\":\"\\n\\u00001\"}") == 1);
}

/* path_trusted (as root): the walk resolves ".", "..", relative and
 * absolute links of root's, allows a sticky directory and a path that does
 * not exist yet, and refuses another user's directory, a directory others
 * may write, another user's link to root's file, and a link loop. */
static void
case_path_trusted(void)
{
	if (geteuid() != 0)
		UNIT_SKIP("path_trusted's owners need root");
	char t[] = "/tmp/pathtrusted.XXXXXX", p[PATH_MAX], want[PATH_MAX], why[512];
	CHECK(mkdtemp(t) != NULL);
	CHECK(chmod(t, 0755) == 0);
	char *r;
#define P(...) (snprintf(p, sizeof(p), __VA_ARGS__), p)
	CHECK(mkdir(P("%s/a", t), 0755) == 0 && mkdir(P("%s/a/b", t), 0755) == 0);
	CHECK(symlink("a/b", P("%s/rel", t)) == 0);          /* root's, relative */
	CHECK(symlink(t, P("%s/a/abs", t)) == 0);            /* root's, absolute */
	snprintf(want, sizeof(want), "%s/a/b/new/file", t);
	r = path_trusted(P("%s/./a/abs/rel/../b/new/file", t), 0, why, sizeof(why));
	CHECK(r != NULL && strcmp(r, want) == 0);
	free(r);
	/* Sticky and anyone's (1777): allowed; 0777: refused. */
	CHECK(mkdir(P("%s/sticky", t), 0755) == 0 && chmod(p, 01777) == 0);
	r = path_trusted(P("%s/sticky/x", t), 0, why, sizeof(why));
	CHECK(r != NULL);
	free(r);
	CHECK(chmod(P("%s/sticky", t), 0777) == 0);
	CHECK(path_trusted(P("%s/sticky/x", t), 0, why, sizeof(why)) == NULL);
	CHECK(strstr(why, "writable by its group or others") != NULL);
	/* Writable by root's group (a umask of 002): allowed; by another
	 * group: refused. */
	CHECK(chmod(P("%s/sticky", t), 0775) == 0 && chown(p, 0, 0) == 0);
	r = path_trusted(P("%s/sticky/x", t), 0, why, sizeof(why));
	CHECK(r != NULL);
	free(r);
	CHECK(chown(P("%s/sticky", t), 0, 65534) == 0);
	CHECK(path_trusted(P("%s/sticky/x", t), 0, why, sizeof(why)) == NULL);
	/* Another user's directory; another user's link to root's directory;
	 * the same link is followed when its owner is the trusted uid. */
	CHECK(mkdir(P("%s/theirs", t), 0755) == 0 && chown(p, 65534, 65534) == 0);
	CHECK(path_trusted(P("%s/theirs/x", t), 0, why, sizeof(why)) == NULL);
	CHECK(strstr(why, "a directory of another owner") != NULL);
	snprintf(want, sizeof(want), "%s/a", t);
	CHECK(symlink(want, P("%s/planted", t)) == 0 && lchown(p, 65534, 65534) == 0);
	CHECK(path_trusted(P("%s/planted/b", t), 0, why, sizeof(why)) == NULL);
	CHECK(strstr(why, "a symbolic link of uid 65534") != NULL);
	r = path_trusted(P("%s/planted/b", t), 65534, why, sizeof(why));
	CHECK(r != NULL);
	free(r);
	/* A loop; a file used as a directory. */
	CHECK(symlink("loop", P("%s/loop", t)) == 0);
	CHECK(path_trusted(P("%s/loop/x", t), 0, why, sizeof(why)) == NULL);
	CHECK(close(open(P("%s/f", t), O_CREAT | O_WRONLY | O_CLOEXEC, 0644)) == 0);
	CHECK(path_trusted(P("%s/f/x", t), 0, why, sizeof(why)) == NULL);
	CHECK(strstr(why, strerror(ENOTDIR)) != NULL);
#undef P
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", t);
	CHECK(system(cmd) == 0);
}

/* path_trusted (as root), a path that does not exist yet: in a directory
 * no one else may write, any part of it may be missing; in a sticky one
 * that others may write (/tmp), only the last component (the stage makes
 * it with O_EXCL and rename): a missing directory above it is refused,
 * naming it, since another user could make it after the check. Once root
 * made it, the walk passes; once another user did, it names that
 * directory. A path through a sticky directory reached by ".." or by a
 * relative link is judged the same way. */
static void
case_path_trusted_missing(void)
{
	if (geteuid() != 0)
		UNIT_SKIP("path_trusted's owners need root");
	char t[] = "/tmp/pathmissing.XXXXXX", p[PATH_MAX], why[1024];
	CHECK(mkdtemp(t) != NULL);
	CHECK(chmod(t, 0755) == 0);
	char *r;
#define P(...) (snprintf(p, sizeof(p), __VA_ARGS__), p)
	r = path_trusted(P("%s/new/deeper/file", t), 0, why, sizeof(why));
	CHECK(r != NULL, "root's own directory, a missing subtree: %s", why);
	free(r);
	CHECK(mkdir(P("%s/common", t), 0755) == 0 && chmod(p, 01777) == 0);
	r = path_trusted(P("%s/common/file", t), 0, why, sizeof(why));
	CHECK(r != NULL, "the last component missing in a sticky directory: %s", why);
	free(r);
	r = path_trusted(P("%s/common/file/", t), 0, why, sizeof(why));
	CHECK(r != NULL, "a trailing slash is no component: %s", why);
	free(r);
	CHECK(path_trusted(P("%s/common/new/file", t), 0, why, sizeof(why)) == NULL);
	CHECK(strstr(why, "common/new: not there yet") != NULL &&
	    strstr(why, "a directory others may write") != NULL, "%s", why);
	CHECK(mkdir(P("%s/a", t), 0755) == 0);
	CHECK(path_trusted(P("%s/a/../common/new/file", t), 0, why, sizeof(why)) == NULL,
	    "through \"..\"");
	CHECK(symlink("common", P("%s/c", t)) == 0);
	CHECK(path_trusted(P("%s/c/new/file", t), 0, why, sizeof(why)) == NULL,
	    "through a relative link");
	/* Made by root: walked through. Made by another user: refused. */
	CHECK(mkdir(P("%s/common/new", t), 0755) == 0);
	r = path_trusted(P("%s/common/new/file", t), 0, why, sizeof(why));
	CHECK(r != NULL, "root's directory in the sticky one: %s", why);
	free(r);
	CHECK(chown(P("%s/common/new", t), 65534, 65534) == 0);
	CHECK(path_trusted(P("%s/common/new/file", t), 0, why, sizeof(why)) == NULL);
	CHECK(strstr(why, "a directory of another owner") != NULL, "%s", why);
#undef P
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", t);
	CHECK(system(cmd) == 0);
}

/* A split daemon's state directory is its daemon process's user's: root's
 * own runs trust that user's directories and links there and nowhere
 * else, and a link of that user's must not lead out of it. */
static void
case_path_trusted_state(void)
{
	if (geteuid() != 0)
		UNIT_SKIP("path_trusted's owners need root");
	char t[] = "/tmp/pathbelow.XXXXXX", p[PATH_MAX], st[PATH_MAX], why[1024];
	CHECK(mkdtemp(t) != NULL);
	CHECK(chmod(t, 0755) == 0);
	char *r;
	uid_t u = 65534;
#define P(...) (snprintf(p, sizeof(p), __VA_ARGS__), p)
	snprintf(st, sizeof(st), "%s/state", t);
	CHECK(mkdir(st, 0755) == 0 && chown(st, u, u) == 0);
	CHECK(mkdir(P("%s/runs", st), 0755) == 0 && chown(p, u, u) == 0);
	CHECK(mkdir(P("%s/other", t), 0755) == 0 && chown(p, u, u) == 0);
	r = path_trusted_below(P("%s/runs/v1/out", st), u, st, why, sizeof(why));
	CHECK(r != NULL, "the user's directories in its state directory: %s", why);
	free(r);
	CHECK(path_trusted(P("%s/runs/v1/out", st), 0, why, sizeof(why)) == NULL,
	    "root's alone: the user's state directory");
	CHECK(path_trusted_below(P("%s/other/x", t), u, st, why, sizeof(why)) == NULL,
	    "the user's directory outside its state directory");
	CHECK(strstr(why, "other: a directory of another owner") != NULL, "%s", why);
	/* A prefix of the name is not a directory above: state2 is not below state. */
	CHECK(mkdir(P("%s/state2", t), 0755) == 0 && chown(p, u, u) == 0);
	CHECK(path_trusted_below(P("%s/state2/x", t), u, st, why, sizeof(why)) == NULL,
	    "a sibling whose name starts with the state directory's");
	/* The user's link to root's /etc: out of the tree, refused; to its
	 * own tree, followed. */
	CHECK(symlink("/etc", P("%s/runs/out", st)) == 0 && lchown(p, u, u) == 0);
	CHECK(path_trusted_below(P("%s/runs/out/passwd", st), u, st, why, sizeof(why)) == NULL,
	    "the user's link out of its state directory");
	CHECK(strstr(why, "/etc/passwd: led to by a link of uid 65534's") != NULL, "%s", why);
	CHECK(symlink("/etc", P("%s/runs/gone", st)) == 0 && lchown(p, u, u) == 0);
	CHECK(path_trusted_below(P("%s/runs/gone/nosuch", st), u, st, why, sizeof(why)) == NULL,
	    "the user's link out of its state directory, to a missing file");
	CHECK(symlink("v1", P("%s/runs/latest", st)) == 0 && lchown(p, u, u) == 0);
	CHECK(mkdir(P("%s/runs/v1", st), 0755) == 0 && chown(p, u, u) == 0);
	r = path_trusted_below(P("%s/runs/latest/out", st), u, st, why, sizeof(why));
	CHECK(r != NULL && strcmp(r, P("%s/runs/v1/out", st)) == 0,
	    "the user's link within its state directory: %s", r != NULL ? r : why);
	free(r);
#undef P
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", t);
	CHECK(system(cmd) == 0);
}

static const struct unit_case cases[] = {
	UNIT_CASE(parsers),
	UNIT_CASE(names),
	UNIT_CASE(paths),
	UNIT_CASE(proc_starttime),
	UNIT_CASE(mkdirs_and_conf),
	UNIT_CASE(utf8_clean),
	UNIT_CASE(nul),
	UNIT_CASE(owner_fs),
	UNIT_CASE(path_trusted),
	UNIT_CASE(path_trusted_missing),
	UNIT_CASE(path_trusted_state),
	UNIT_END
};

int
main(int argc, char **argv)
{
	return unit_main(argc, argv, cases);
}
