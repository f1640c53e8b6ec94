/*
 * test_hash.c: plugins/lib/io/hash.c. The streaming plc_sha256 contexts
 * (SHA-NI where the CPU has it, and the EVP fallback forced) against
 * OpenSSL's one-shot digest: known vectors, every length around the block
 * and padding boundaries, random splits, and update2 with two streams of
 * different lengths and partial blocks, including the same buffer twice.
 * Then the directory digest: plc_sha256_dir_known with every digest
 * supplied equals plc_sha256_dir, a wrong supplied digest changes it, and
 * plc_tree_bytes equals its byte count. Last plc_sha256_path_ctl, the hash
 * of a path someone else names: the same digests as plc_sha256_file and
 * plc_sha256_dir; a FIFO (which would block an open), a link, a FIFO or a
 * link below a directory refused, each named; the cap; stop(). Then the
 * same through a plc_fs of the test's (what a file server does) with a
 * known() hook, and plc_tree_bytes_ctl.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plio.h"
#include "runner.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Hash buf[0..n) through a context in random pieces. */
static void
pieces(const unsigned char *buf, size_t n, char hex[65])
{
	struct plc_sha256 c;
	CHECK(plc_sha256_init(&c) == 0);
	for (size_t off = 0; off < n;) {
		size_t k = rnd() % 5 == 0 ? rnd() % 200 : rnd() % (n - off + 1);
		if (k > n - off)
			k = n - off;
		plc_sha256_update(&c, buf + off, k);
		off += k;
	}
	plc_sha256_final(&c, hex);
}

/* Two streams through update2 in random (unequal) pieces. */
static void
pieces2(const unsigned char *a, size_t na, const unsigned char *b, size_t nb,
    char ha[65], char hb[65])
{
	struct plc_sha256 x, y;
	CHECK(plc_sha256_init(&x) == 0 && plc_sha256_init(&y) == 0);
	size_t i = 0, j = 0;
	while (i < na || j < nb) {
		size_t ka = rnd() % 4 == 0 ? rnd() % 70 : rnd() % (na - i + 1);
		size_t kb = rnd() % 3 == 0 ? ka : rnd() % (nb - j + 1);
		if (ka > na - i)
			ka = na - i;
		if (kb > nb - j)
			kb = nb - j;
		plc_sha256_update2(&x, a + i, ka, &y, b + j, kb);
		i += ka;
		j += kb;
	}
	plc_sha256_final(&x, ha);
	plc_sha256_final(&y, hb);
}

static void
contexts(const char *mode)
{
	static const struct { const char *in, *hex; } vec[] = {
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
	};
	char hex[65], want[65], h2[65], w2[65];
	for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
		pieces((const unsigned char *)vec[i].in, strlen(vec[i].in), hex);
		CHECK(strcmp(hex, vec[i].hex) == 0);
	}
	size_t big = 3 << 20;
	unsigned char *buf = malloc(big);
	for (size_t i = 0; i < big; i++)
		buf[i] = (unsigned char)(rnd() >> 24);
	int bad = 0;
	/* Every length through three blocks (padding at 55/56/63/64). */
	for (size_t n = 0; n <= 200; n++) {
		plc_sha256_buf(buf + n, n, want);
		pieces(buf + n, n, hex);
		if (strcmp(hex, want) != 0 && bad++ < 3)
			fprintf(stderr, "FAIL %s: length %zu\n", mode, n);
	}
	for (int r = 0; r < 40; r++) {
		size_t n = rnd() % big, off = rnd() % (big - n + 1);
		plc_sha256_buf(buf + off, n, want);
		pieces(buf + off, n, hex);
		if (strcmp(hex, want) != 0 && bad++ < 3)
			fprintf(stderr, "FAIL %s: %zu bytes at %zu\n", mode, n, off);
	}
	for (int r = 0; r < 60; r++) {
		size_t na = r < 20 ? rnd() % 300 : rnd() % (big / 2);
		size_t nb = r % 3 == 0 ? na : r < 20 ? rnd() % 300 : rnd() % (big / 2);
		size_t oa = rnd() % (big - na + 1), ob = rnd() % (big - nb + 1);
		if (r % 5 == 0 && oa + nb <= big)
			ob = oa;   /* the same bytes, as the file hasher hashes them */
		plc_sha256_buf(buf + oa, na, want);
		plc_sha256_buf(buf + ob, nb, w2);
		pieces2(buf + oa, na, buf + ob, nb, hex, h2);
		if ((strcmp(hex, want) != 0 || strcmp(h2, w2) != 0) && bad++ < 3)
			fprintf(stderr, "FAIL %s: update2 %zu at %zu and %zu at %zu\n", mode, na, oa,
			    nb, ob);
	}
	/* A context dropped without a digest. */
	struct plc_sha256 c;
	CHECK(plc_sha256_init(&c) == 0);
	plc_sha256_update(&c, buf, 1000);
	plc_sha256_discard(&c);
	free(buf);
	CHECK(bad == 0);
	fprintf(stderr, "ok   contexts (%s)\n", mode);
}

struct known_arg {
	const char *name;   /* the one file whose digest is supplied wrong */
	int calls;
};

static int
known(void *arg, const char *rel, uint64_t size, char hex[65])
{
	struct known_arg *k = arg;
	char full[4096];
	k->calls++;
	if (k->name && strcmp(rel, k->name) == 0) {
		memset(hex, 'a', 64);
		hex[64] = '\0';
		return 1;
	}
	if (strcmp(rel, "sub/skip") == 0)
		return 0;   /* hashed by plc_sha256_dir_known itself */
	snprintf(full, sizeof(full), "%s", rel);
	(void)size;
	return plc_sha256_file(full, hex) == 0 ? 1 : -1;
}

static void
directory(void)
{
	const char *t = getenv("TEST_TMP");
	char dir[4096], cwd[4096], a[65], b[65], c[65];
	uint64_t na = 0, nb = 0, nt = 0;
	snprintf(dir, sizeof(dir), "%s/hash.XXXXXX", t ? t : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "cd %s && mkdir -p sub/deeper && printf x > one && "
	    "head -c 100000 /dev/urandom > sub/two && : > sub/deeper/empty && "
	    "printf skip > sub/skip", dir);
	CHECK(system(cmd) == 0);
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK(chdir(dir) == 0);   /* known() opens names relative to the directory */
	struct known_arg k = { NULL, 0 };
	CHECK(plc_sha256_dir(dir, a, &na) == 0);
	CHECK(plc_sha256_dir_known(dir, b, &nb, known, &k) == 0);
	CHECK(strcmp(a, b) == 0 && na == nb && na == 100005 && k.calls == 4);
	CHECK(plc_tree_bytes(dir, &nt) == 0 && nt == na);
	k.name = "sub/two";
	CHECK(plc_sha256_dir_known(dir, c, NULL, known, &k) == 0);
	CHECK(strcmp(a, c) != 0);
	CHECK(chdir(cwd) == 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	fprintf(stderr, "ok   directory digests\n");
}

/* The contexts with SHA-NI where the CPU has it (else EVP, said so), and
 * with EVP. */
static void
case_shani(void)
{
	int shani = plc_sha256_use_shani(1);

	contexts(shani ? "SHA-NI" : "EVP, no SHA-NI on this CPU");
}

static void
case_evp(void)
{
	CHECK(plc_sha256_use_shani(0) == 0);
	contexts("EVP");
}

/* The directory digests, SHA-NI on where the CPU has it. */
static void
case_directory(void)
{
	plc_sha256_use_shani(1);
	directory();
}

static int
stop_after(void *arg)
{
	int *n = arg;
	return --*n < 0;
}

static void
case_path_ctl(void)
{
	const char *t = getenv("TEST_TMP");
	char dir[4096], p[4200], cmd[8192], a[65], b[65];
	uint64_t na = 0, nb = 0;
	struct plc_hash_ctl ctl = { 0 };
	snprintf(dir, sizeof(dir), "%s/pathctl.XXXXXX", t ? t : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(cmd, sizeof(cmd), "cd %s && mkdir -p d/sub && printf x > d/one && "
	    "head -c 3000000 /dev/urandom > d/sub/two && : > d/sub/empty && "
	    "head -c 5000 /dev/urandom > f", dir);
	CHECK(system(cmd) == 0);
#define P(...) (snprintf(p, sizeof(p), __VA_ARGS__), p)
	/* The same digests as the plain functions. */
	CHECK(plc_sha256_path_ctl(P("%s/f", dir), a, &na, &ctl) == 0, "%s", ctl.why);
	CHECK(plc_sha256_file(p, b) == 0 && strcmp(a, b) == 0 && na == 5000);
	CHECK(plc_sha256_path_ctl(P("%s/d", dir), a, &na, &ctl) == 0, "%s", ctl.why);
	CHECK(plc_sha256_dir(p, b, &nb) == 0 && strcmp(a, b) == 0 && na == nb && na == 3000001);
	/* A FIFO: refused before an open could block. */
	CHECK(mkfifo(P("%s/fifo", dir), 0644) == 0);
	CHECK(plc_sha256_path_ctl(p, a, &na, &ctl) == -1 && errno == EINVAL);
	CHECK(strstr(ctl.why, "/fifo: a FIFO, not a regular file or a directory: refused") != NULL,
	    "%s", ctl.why);
	/* A link, to a file the caller may read. */
	CHECK(symlink("f", P("%s/l", dir)) == 0);
	CHECK(plc_sha256_path_ctl(p, a, &na, &ctl) == -1 && errno == ELOOP);
	CHECK(strstr(ctl.why, "/l: a symbolic link") != NULL, "%s", ctl.why);
	/* Below a directory: a FIFO, then a link. */
	CHECK(mkfifo(P("%s/d/sub/p", dir), 0644) == 0);
	CHECK(plc_sha256_path_ctl(P("%s/d", dir), a, &na, &ctl) == -1 && errno == EINVAL);
	CHECK(strstr(ctl.why, "/d/sub/p: a FIFO") != NULL, "%s", ctl.why);
	CHECK(unlink(P("%s/d/sub/p", dir)) == 0 && symlink("../one", P("%s/d/sub/l", dir)) == 0);
	CHECK(plc_sha256_path_ctl(P("%s/d", dir), a, &na, &ctl) == -1 && errno == ELOOP);
	CHECK(strstr(ctl.why, "/d/sub/l: a symbolic link") != NULL, "%s", ctl.why);
	CHECK(unlink(P("%s/d/sub/l", dir)) == 0);
	/* The cap: a file over it, a directory whose files add up over it. */
	ctl.max = 4096;
	CHECK(plc_sha256_path_ctl(P("%s/f", dir), a, &na, &ctl) == -1 && errno == EFBIG);
	CHECK(strstr(ctl.why, "5000 bytes, over the cap of 4096 bytes") != NULL, "%s", ctl.why);
	ctl.max = 2000000;
	CHECK(plc_sha256_path_ctl(P("%s/d", dir), a, &na, &ctl) == -1 && errno == EFBIG);
	CHECK(strstr(ctl.why, "over the cap of 2000000 bytes") != NULL, "%s", ctl.why);
	/* stop(): asked before each chunk of 1 MiB and each file. */
	int n = 2;
	ctl = (struct plc_hash_ctl){ .stop = stop_after, .arg = &n };
	CHECK(plc_sha256_path_ctl(P("%s/d", dir), a, &na, &ctl) == -1 && errno == ECANCELED);
	CHECK(strstr(ctl.why, "cancelled or timed out") != NULL, "%s", ctl.why);
	n = 1000;
	CHECK(plc_sha256_path_ctl(P("%s/d", dir), a, &na, &ctl) == 0, "%s", ctl.why);
#undef P
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

/* A plc_fs that counts its calls and does them itself: what a file
 * server would do, with the caller's rights. */
static int fs_calls;

static int
fs_statat(void *arg, int dfd, const char *name, struct stat *st)
{
	(void)arg;
	fs_calls++;
	return fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW);
}

static int
fs_openat(void *arg, int dfd, const char *name, int dir, int beneath)
{
	(void)arg, (void)beneath;
	fs_calls++;
	return openat(dfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC |
	    (dir ? O_DIRECTORY : 0));
}

/* known() for plc_hash_ctl: the file named wrong gets a's, "fail" -1. */
static int
ctl_known(void *arg, const char *path, uint64_t *size, char hex[65])
{
	const char *wrong = arg;
	struct stat st;
	if (strstr(path, "/fail") != NULL) {
		errno = EIO;
		return -1;
	}
	if (wrong == NULL || strstr(path, wrong) == NULL || stat(path, &st) == -1)
		return 0;
	memset(hex, 'a', 64);
	hex[64] = '\0';
	*size = (uint64_t)st.st_size;
	return 1;
}

/* plc_hash_ctl's fs and known: every lookup and open through fs, the same
 * digest; a digest known replaces the file's, an error of known fails
 * the hash; plc_tree_bytes_ctl counts what plc_tree_bytes does and
 * refuses what plc_sha256_path_ctl refuses. */
static void
case_path_ctl_fs(void)
{
	const char *t = getenv("TEST_TMP");
	char dir[4096], p[4200], cmd[8192], a[65], b[65];
	uint64_t na = 0, nb = 0;
	struct plc_fs fs = { fs_statat, fs_openat, NULL };
	struct plc_hash_ctl ctl = { .fs = &fs };
	snprintf(dir, sizeof(dir), "%s/pathfs.XXXXXX", t ? t : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(cmd, sizeof(cmd), "cd %s && mkdir -p d/sub && printf x > d/one && "
	    "head -c 30000 /dev/urandom > d/sub/two && : > d/sub/empty", dir);
	CHECK(system(cmd) == 0);
#define P(...) (snprintf(p, sizeof(p), __VA_ARGS__), p)
	CHECK(plc_sha256_path_ctl(P("%s/d", dir), a, &na, &ctl) == 0, "%s", ctl.why);
	CHECK(plc_sha256_dir(p, b, &nb) == 0 && strcmp(a, b) == 0 && na == nb && na == 30001);
	/* The top, each entry looked at, each directory and file opened. */
	CHECK(fs_calls >= 2 + 4 + 1 + 3, "%d calls", fs_calls);
	ctl.known = ctl_known;
	ctl.known_arg = "/sub/two";
	CHECK(plc_sha256_path_ctl(p, b, &nb, &ctl) == 0 && strcmp(a, b) != 0 && nb == 30001);
	ctl.known_arg = NULL;
	CHECK(plc_sha256_path_ctl(p, b, &nb, &ctl) == 0 && strcmp(a, b) == 0);
	CHECK(system((snprintf(cmd, sizeof(cmd), ": > %s/d/fail", dir), cmd)) == 0);
	CHECK(plc_sha256_path_ctl(p, b, &nb, &ctl) == -1 && errno == EIO &&
	    strstr(ctl.why, "/d/fail: ") != NULL, "%s", ctl.why);
	CHECK(unlink(P("%s/d/fail", dir)) == 0);
	ctl.known = NULL;
	uint64_t tb = 0, tc = 0;
	CHECK(plc_tree_bytes(P("%s/d", dir), &tb) == 0);
	fs_calls = 0;
	CHECK(plc_tree_bytes_ctl(p, &tc, &ctl) == 0 && tb == tc && tc == 30001 && fs_calls > 0,
	    "%s", ctl.why);
	CHECK(plc_tree_bytes_ctl(P("%s/d/sub/two", dir), &tc, &ctl) == 0 && tc == 30000);
	CHECK(mkfifo(P("%s/d/sub/p", dir), 0644) == 0);
	CHECK(plc_tree_bytes_ctl(P("%s/d", dir), &tc, &ctl) == -1 && errno == EINVAL &&
	    strstr(ctl.why, "/d/sub/p: a FIFO") != NULL, "%s", ctl.why);
#undef P
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

static const struct unit_case cases[] = {
	UNIT_CASE(shani),
	UNIT_CASE(evp),
	UNIT_CASE(directory),
	UNIT_CASE(path_ctl),
	UNIT_CASE(path_ctl_fs),
	UNIT_END
};

int
main(int argc, char **argv)
{
	return unit_main(argc, argv, cases);
}
