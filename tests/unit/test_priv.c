/* test_priv.c: the privileged parent's checks (priv.c), driven through
 * priv_handle() as the parent's loop drives it: every message type
 * decoded, and refused short, long, with garbage, a string without its
 * NUL, a stray byte, the wrong number of descriptors; a shim refused for
 * uid 0 and for a user who is neither job_user nor a member, started
 * (a real pipeline-shim, pinned: it refuses a request for root or
 * another owner, runs the owner's) for a member and for root once root
 * vouched; a signal refused for a process no shim of the parent's
 * started, for pgid 1, for a records directory outside the state
 * directory or writable by others; an fchown refused to root, to a
 * non-member and of a FIFO, done for a member; sbatch refused for a
 * non-member, uid 0 and a FIFO, run as a member with the script on its
 * standard input and a clean environment, its job id taken and garbage
 * refused; scancel only of a job submitted for the same uid; root's own
 * runs' sbatch and scancel only once root vouched and without job_user,
 * run as root; an owner of
 * 100 groups read, vouched for and pinned whole; priv.owners bounded, at
 * start and while jobs are submitted; a shim start answered by a real
 * parent while a slow sbatch (a stand-in) runs; a spec's file checks
 * refused for a connection of uid 0, for no socket and for a text not
 * sealed or too large, and run for a member by a real pipeline-stage
 * --check as the member (its own 0600 file checks, root's is Permission
 * denied); a daemon process of its own user: its uid the configuration's,
 * fchown of its files, priv.owners in a directory of root's; a file
 * server refused for uid 0 and a non-member, started for a member as the
 * member (every uid, not dumpable), its requests decoded whole, answering
 * as the member would (root's 0600 file EACCES, ENOENT, a FIFO and a link
 * refused, nothing above a directory), a directory hashed through it to
 * root's own digest, ended when its socket closes; one its owner stopped
 * answers EIO past the timeout, and nothing after; gc's removals in the
 * parent's helpers, four at a time, a fifth refused, the parent's loop
 * free while they are held; a probe's memory cgroup
 * refused malformed (size, owner, operation, a name not its own) and to
 * a non-member, made for a member below the parent's own cgroup, capped
 * and joined by the member, and removed. Needs root. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <pthread.h>
#include <stddef.h>
#include <poll.h>
#include <sys/fanotify.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pld.h"
#include "server.h"
#include "access.h"
#include "exec.h"
#include "plio.h"
#include "priv.h"
#include "memcap.h"
#include "runner.h"

#define NOBODY 65534
#define NOGRP 65534
#define NOTAGROUP 4242424	/* a gid nobody is a member of */

/* Every case's directory is below top, made by main and removed when
 * the cases are done. */
static char top[64], tmp[96];
static struct priv_rules rules;

static void
setup(gid_t group)
{
	if (geteuid() != 0)
		UNIT_SKIP("needs root");
	snprintf(tmp, sizeof(tmp), "%s/case.XXXXXX", top);
	CHECK(top[0] != '\0' && mkdtemp(tmp) != NULL);
	memset(&rules, 0, sizeof(rules));
	rules.group = group;
	rules.admin_group = (gid_t)-1;
	rules.job_uid = (uid_t)-1;
	rules.daemon_uid = 0;
	rules.vouchfd = -1;
	rules.since = 1;	/* every process started after the parent */
	snprintf(rules.shim, sizeof(rules.shim), "%s/../../daemon/pipeline-shim", self_dir());
	CHECK(realpath(tmp, rules.state_dir) != NULL);
}

/* One message through the parent: the reply's err; *rfd the descriptor
 * that came back (closed unless asked for). */
static int
handle(const void *m, size_t n, int fd, int *rfd)
{
	struct priv_reply rep;
	int r = -1, fds[1] = { fd };
	priv_handle(&rules, m, n, fds, fd >= 0 ? 1 : 0, &rep, &r);
	if (rfd)
		*rfd = r;
	else if (r >= 0)
		close(r);
	if (rep.err == 0 && rep.pid > 0 && r >= 0 && rfd == NULL)
		waitpid(rep.pid, NULL, 0);
	return rep.err;
}

static void
hdr(union priv_msg *m, uint32_t type, size_t len)
{
	memset(m, 0, sizeof(*m));
	m->h.type = type;
	m->h.len = (uint32_t)len;
	m->h.id = 7;
}

/* A user owner with its gid as its one group. */
static void
owner_one(struct priv_owner *o, uid_t uid, gid_t gid)
{
	o->uid = uid;
	o->gid = gid;
	o->ngroups = 1;
	o->groups[0] = gid;
}

/* A string field f of m (n bytes, nfd descriptors): refused without its
 * NUL and with a byte after it, taken as good. */
static void
string_field(union priv_msg *m, size_t n, int nfd, char *f, size_t flen, const char *good)
{
	char why[160];
	memset(f, '1', flen);
	CHECK(priv_decode(m, n, nfd, why, sizeof(why)) == -1, "no NUL");
	memset(f, 0, flen);
	strcpy(f, good);
	f[strlen(good) + 2] = '7';
	CHECK(priv_decode(m, n, nfd, why, sizeof(why)) == -1, "a stray byte");
	f[strlen(good) + 2] = '\0';
	CHECK(priv_decode(m, n, nfd, why, sizeof(why)) == (int)m->h.type, "%s", why);
}

static void
case_decode(void)
{
	union priv_msg m;
	char why[160], junk[sizeof(m) + 8];
	static const struct { uint32_t type; size_t len; int nfd; } ok[] = {
		{ PRIV_SHIM_START, sizeof(struct priv_shim_start), 0 },
		{ PRIV_SIGNAL, sizeof(struct priv_signal), 0 },
		{ PRIV_FCHOWN, sizeof(struct priv_fchown), 1 },
		{ PRIV_NOTIFY, sizeof(struct priv_notify), 0 },
		{ PRIV_VOUCH, sizeof(struct priv_vouch), 1 },
		{ PRIV_SBATCH, sizeof(struct priv_sbatch), 1 },
		{ PRIV_SCANCEL, sizeof(struct priv_scancel), 0 },
		{ PRIV_CHECK, sizeof(struct priv_check), 2 },
		{ PRIV_FILES, sizeof(struct priv_files), 0 },
		{ PRIV_RMTREE, sizeof(struct priv_rmtree), 0 },
		{ PRIV_CGROUP, sizeof(struct priv_cgroup), 0 },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		hdr(&m, ok[i].type, ok[i].len);
		if (ok[i].type == PRIV_SIGNAL) {
			m.sig.sig = SIGTERM;
			strcpy(m.sig.rdir, "/x/.shim/p");
		}
		if (ok[i].type == PRIV_NOTIFY)
			strcpy(m.notify.text, "READY=1");
		if (ok[i].type == PRIV_FCHOWN)
			m.chown.count = 1;
		if (ok[i].type == PRIV_CHECK)
			strcpy(m.check.path, "/home/ann/v18.ini");
		if (ok[i].type == PRIV_FILES)
			owner_one(&m.files.owner, NOBODY, NOGRP);
		if (ok[i].type == PRIV_RMTREE)
			strcpy(m.rmtree.path, "r/j/work/a.bin");
		if (ok[i].type == PRIV_CGROUP) {
			owner_one(&m.cgroup.owner, NOBODY, NOGRP);
			m.cgroup.bytes = 64 << 20;
		}
		if (ok[i].type == PRIV_SBATCH || ok[i].type == PRIV_SCANCEL) {
			m.sbatch.owner.uid = NOBODY;	/* the same place in both */
			m.sbatch.owner.gid = NOGRP;
			strcpy(m.scancel.id, "42");
		}
		CHECK(priv_decode(&m, ok[i].len, ok[i].nfd, why, sizeof(why)) == (int)ok[i].type,
		    "type %u: %s", ok[i].type, why);
		/* Short, long, the header's length another, a descriptor
		 * more or less, a stray header word. */
		CHECK(priv_decode(&m, ok[i].len - 1, ok[i].nfd, why, sizeof(why)) == -1);
		memcpy(junk, &m, ok[i].len);
		m.h.len = (uint32_t)ok[i].len + 1;
		memcpy(junk, &m, sizeof(m.h));
		CHECK(priv_decode(junk, ok[i].len + 1, ok[i].nfd, why, sizeof(why)) == -1);
		m.h.len = (uint32_t)ok[i].len - 4;
		CHECK(priv_decode(&m, ok[i].len, ok[i].nfd, why, sizeof(why)) == -1);
		m.h.len = (uint32_t)ok[i].len;
		CHECK(priv_decode(&m, ok[i].len, ok[i].nfd + 1, why, sizeof(why)) == -1);
		if (ok[i].nfd)
			CHECK(priv_decode(&m, ok[i].len, 0, why, sizeof(why)) == -1);
		m.h.zero = 1;
		CHECK(priv_decode(&m, ok[i].len, ok[i].nfd, why, sizeof(why)) == -1);
	}
	/* Garbage: no header, unknown types. */
	CHECK(priv_decode("abc", 3, 0, why, sizeof(why)) == -1);
	memset(junk, 0xa5, sizeof(junk));
	CHECK(priv_decode(junk, sizeof(junk), 0, why, sizeof(why)) == -1);
	hdr(&m, 0, sizeof(m.h));
	CHECK(priv_decode(&m, sizeof(m.h), 0, why, sizeof(why)) == -1);
	hdr(&m, PRIV_NTYPES, sizeof(m.h));
	CHECK(priv_decode(&m, sizeof(m.h), 0, why, sizeof(why)) == -1);
	/* Strings: no NUL in the field, a byte after it, relative. */
	hdr(&m, PRIV_SIGNAL, sizeof(m.sig));
	m.sig.sig = SIGTERM;
	memset(m.sig.rdir, 'a', sizeof(m.sig.rdir));
	m.sig.rdir[0] = '/';
	CHECK(priv_decode(&m, sizeof(m.sig), 0, why, sizeof(why)) == -1);
	memset(m.sig.rdir, 0, sizeof(m.sig.rdir));
	strcpy(m.sig.rdir, "/a");
	m.sig.rdir[10] = 'x';
	CHECK(priv_decode(&m, sizeof(m.sig), 0, why, sizeof(why)) == -1);
	memset(m.sig.rdir, 0, sizeof(m.sig.rdir));
	strcpy(m.sig.rdir, "a/.shim/p");
	CHECK(priv_decode(&m, sizeof(m.sig), 0, why, sizeof(why)) == -1);
	/* Numbers: a signal not sent, a mode unknown. */
	strcpy(m.sig.rdir, "/a/.shim/p");
	m.sig.sig = SIGSTOP;
	CHECK(priv_decode(&m, sizeof(m.sig), 0, why, sizeof(why)) == -1);
	m.sig.sig = 0;
	CHECK(priv_decode(&m, sizeof(m.sig), 0, why, sizeof(why)) == -1);
	m.sig.sig = SIGTERM;
	m.sig.mode = 2;
	CHECK(priv_decode(&m, sizeof(m.sig), 0, why, sizeof(why)) == -1);
	/* Owners: too many groups, a group past the count, root with ids. */
	hdr(&m, PRIV_SHIM_START, sizeof(m.shim));
	m.shim.owner.ngroups = PRIV_NGROUPS + 1;
	CHECK(priv_decode(&m, sizeof(m.shim), 0, why, sizeof(why)) == -1);
	m.shim.owner.ngroups = 1;
	m.shim.owner.groups[1] = 5;
	CHECK(priv_decode(&m, sizeof(m.shim), 0, why, sizeof(why)) == -1);
	hdr(&m, PRIV_SHIM_START, sizeof(m.shim));
	m.shim.owner.kind = PRIV_OWNER_ROOT;
	m.shim.owner.uid = 5;
	CHECK(priv_decode(&m, sizeof(m.shim), 0, why, sizeof(why)) == -1);
	m.shim.owner.kind = 2;
	m.shim.owner.uid = 0;
	CHECK(priv_decode(&m, sizeof(m.shim), 0, why, sizeof(why)) == -1);
	/* Slurm's owners: a user, no id 0 (uid, gid, a group); or root's own
	 * runs, all ids 0. */
	hdr(&m, PRIV_SBATCH, sizeof(m.sbatch));
	owner_one(&m.sbatch.owner, NOBODY, NOGRP);
	CHECK(priv_decode(&m, sizeof(m.sbatch), 1, why, sizeof(why)) == PRIV_SBATCH, "%s", why);
	m.sbatch.owner.groups[0] = 0;
	CHECK(priv_decode(&m, sizeof(m.sbatch), 1, why, sizeof(why)) == -1, "group 0");
	m.sbatch.owner.groups[0] = NOGRP;
	m.sbatch.owner.gid = 0;
	CHECK(priv_decode(&m, sizeof(m.sbatch), 1, why, sizeof(why)) == -1, "gid 0");
	m.sbatch.owner.gid = NOGRP;
	m.sbatch.owner.uid = 0;
	CHECK(priv_decode(&m, sizeof(m.sbatch), 1, why, sizeof(why)) == -1, "uid 0");
	hdr(&m, PRIV_SBATCH, sizeof(m.sbatch));
	m.sbatch.owner.kind = PRIV_OWNER_ROOT;
	CHECK(priv_decode(&m, sizeof(m.sbatch), 1, why, sizeof(why)) == PRIV_SBATCH, "root: %s",
	    why);
	m.sbatch.owner.uid = NOBODY;
	CHECK(priv_decode(&m, sizeof(m.sbatch), 1, why, sizeof(why)) == -1, "root, a uid");
	m.sbatch.owner.uid = 0;
	m.sbatch.owner.ngroups = 1;
	CHECK(priv_decode(&m, sizeof(m.sbatch), 1, why, sizeof(why)) == -1, "root, a group");
	hdr(&m, PRIV_SCANCEL, sizeof(m.scancel));
	m.scancel.owner.kind = PRIV_OWNER_ROOT;
	strcpy(m.scancel.id, "42");
	CHECK(priv_decode(&m, sizeof(m.scancel), 0, why, sizeof(why)) == PRIV_SCANCEL, "root: %s",
	    why);
	m.scancel.owner.gid = NOGRP;
	CHECK(priv_decode(&m, sizeof(m.scancel), 0, why, sizeof(why)) == -1, "root, a gid");
	/* A job id: digits only, NUL-terminated, nothing after; a signal
	 * the daemon sends. */
	hdr(&m, PRIV_SCANCEL, sizeof(m.scancel));
	m.scancel.owner.uid = NOBODY;
	m.scancel.owner.gid = NOGRP;
	static const char *const badid[] = { "", "12a", "1;c", "-1", " 1", "1 " };
	for (size_t i = 0; i < sizeof(badid) / sizeof(badid[0]); i++) {
		strcpy(m.scancel.id, badid[i]);
		CHECK(priv_decode(&m, sizeof(m.scancel), 0, why, sizeof(why)) == -1, "id '%s'",
		    badid[i]);
		memset(m.scancel.id, 0, sizeof(m.scancel.id));
	}
	string_field(&m, sizeof(m.scancel), 0, m.scancel.id, sizeof(m.scancel.id), "42");
	m.scancel.sig = SIGSTOP;
	CHECK(priv_decode(&m, sizeof(m.scancel), 0, why, sizeof(why)) == -1, "SIGSTOP");
	m.scancel.sig = SIGUSR1;
	m.scancel.owner.uid = 0;
	CHECK(priv_decode(&m, sizeof(m.scancel), 0, why, sizeof(why)) == -1, "scancel as uid 0");
	/* Check: a path, NUL-terminated, nothing after; both descriptors. */
	hdr(&m, PRIV_CHECK, sizeof(m.check));
	CHECK(priv_decode(&m, sizeof(m.check), 2, why, sizeof(why)) == -1, "no path");
	string_field(&m, sizeof(m.check), 2, m.check.path, sizeof(m.check.path), "v18.ini");
	CHECK(priv_decode(&m, sizeof(m.check), 1, why, sizeof(why)) == -1, "the text missing");
	/* Notify: only the three lines. */
	hdr(&m, PRIV_NOTIFY, sizeof(m.notify));
	strcpy(m.notify.text, "MAINPID=1");
	CHECK(priv_decode(&m, sizeof(m.notify), 0, why, sizeof(why)) == -1);
	strcpy(m.notify.text, "STATUS=a\nREADY=1");
	CHECK(priv_decode(&m, sizeof(m.notify), 0, why, sizeof(why)) == -1);
	/* Refused by the handler too, with the request's id and EINVAL. */
	struct priv_reply rep;
	int rfd;
	priv_handle(&rules, &m, sizeof(m.notify), NULL, 0, &rep, &rfd);
	CHECK(rep.err == EINVAL && rep.h.id == 7 && rfd == -1);
}

/* A shim start's reply; the shim's socket in *rfd when rfd is not NULL
 * (else closed, the shim reaped). */
static int
shim_start_rfd(uint32_t kind, uid_t uid, gid_t gid, uint32_t ngroups, const uint32_t *groups,
    int *rfd)
{
	union priv_msg m;
	hdr(&m, PRIV_SHIM_START, sizeof(m.shim));
	m.shim.owner.kind = kind;
	m.shim.owner.uid = uid;
	m.shim.owner.gid = gid;
	m.shim.owner.ngroups = ngroups;
	for (uint32_t i = 0; i < ngroups && i < PRIV_NGROUPS; i++)
		m.shim.owner.groups[i] = groups[i];
	return handle(&m, sizeof(m.shim), -1, rfd);
}

static int
shim_start(uint32_t kind, uid_t uid, gid_t gid, uint32_t ngroups, const uint32_t *groups)
{
	return shim_start_rfd(kind, uid, gid, ngroups, groups, NULL);
}

static void
case_shim_refused(void)
{
	setup(NOTAGROUP);
	uint32_t g0[1] = { 0 }, gn[1] = { NOGRP };
	CHECK(shim_start(PRIV_OWNER_USER, 0, 0, 0, NULL) == EPERM, "uid 0");
	CHECK(shim_start(PRIV_OWNER_USER, NOBODY, NOGRP, 1, gn) == EPERM, "a non-member");
	CHECK(shim_start(PRIV_OWNER_ROOT, 0, 0, 0, NULL) == EPERM, "root, not vouched for");
	/* A member, but root's group among its groups, or gid 0. */
	setup(NOGRP);
	CHECK(shim_start(PRIV_OWNER_USER, NOBODY, NOGRP, 1, g0) == EPERM, "group 0");
	CHECK(shim_start(PRIV_OWNER_USER, NOBODY, 0, 0, NULL) == EPERM, "gid 0");
	CHECK(shim_start(PRIV_OWNER_USER, 0, NOGRP, 1, gn) == EPERM, "uid 0, a member's gid");
}

/* One request to a run's shim on socket s: `true` as owner (NULL: no
 * -u), in a process directory of its own. The shim's reply: 0 when it
 * took it (the pipe closed once the process ended, with no reply), or
 * the errno it refused it with. */
static int
shim_ask(int s, const char *owner)
{
	static int k;
	char dir[PATH_MAX], log[PATH_MAX + 8];
	snprintf(dir, sizeof(dir), "%s/p%d", tmp, k++);
	CHECK(mkdir(dir, 0700) == 0);
	snprintf(log, sizeof(log), "%s/log", dir);
	char *argv[12];
	int a = 0;
	argv[a++] = "pipeline-shim";
	argv[a++] = "-d";
	argv[a++] = dir;
	argv[a++] = "-l";
	argv[a++] = log;
	if (owner) {
		argv[a++] = "-u";
		argv[a++] = (char *)owner;
	}
	argv[a++] = "--";
	argv[a++] = "/bin/true";
	argv[a] = NULL;
	char *envp[] = { "PATH=/bin:/usr/bin", NULL };
	size_t len;
	int rq = shim_request_fd(argv, envp, &len), pfd[2];
	CHECK(rq >= 0 && pipe(pfd) == 0);
	char one = 1;
	struct iovec iov = { .iov_base = &one, .iov_len = 1 };
	union { char b[CMSG_SPACE(2 * sizeof(int))]; struct cmsghdr align; } c;
	memset(&c, 0, sizeof(c));
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.b,
		.msg_controllen = sizeof(c.b) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
	int fds[2] = { pfd[1], rq };
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	CHECK(sendmsg(s, &m, 0) == 1);
	close(pfd[1]);
	close(rq);
	struct shim_reply rep;
	ssize_t n = read(pfd[0], &rep, sizeof(rep));
	close(pfd[0]);
	return n == (ssize_t)sizeof(rep) ? rep.err : n == 0 ? 0 : -1;
}

/* A real shim: pinned to its owner (its command line says so, and it
 * refuses requests for anyone else). */
static void
case_shim_member(void)
{
	setup(NOGRP);	/* nobody's own group: a member by the database */
	union priv_msg m;
	hdr(&m, PRIV_SHIM_START, sizeof(m.shim));
	owner_one(&m.shim.owner, NOBODY, NOGRP);
	struct priv_reply rep;
	int rfd;
	priv_handle(&rules, &m, sizeof(m.shim), NULL, 0, &rep, &rfd);
	CHECK(rep.err == 0 && rep.pid > 0 && rfd >= 0, "%s", rep.why);
	if (rep.pid <= 0)
		return;
	CHECK(priv_shim_known(&rules, rep.pid, rep.start));
	CHECK(!priv_shim_known(&rules, rep.pid, rep.start + 1));
	/* An earlier parent's shim started in this parent's own clock tick
	 * (a restart right after a submit): known; one tick later, only if
	 * this parent started it. */
	uint64_t since = rules.since;
	rules.since = rep.start + 100;
	CHECK(priv_shim_known(&rules, 4242, rules.since), "a shim of the parent's own start tick");
	CHECK(!priv_shim_known(&rules, 4242, rules.since + 1), "a shim after the parent's start");
	rules.since = since;
	char path[64], cmd[256] = "";
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)rep.pid);
	/* Read again while the exec is under way (an empty command line). */
	ssize_t n = -1;
	for (int i = 0; i < 100 && n <= 0; i++) {
		int fd = open(path, O_RDONLY);
		n = fd >= 0 ? read(fd, cmd, sizeof(cmd) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n <= 0)
			usleep(10000);
	}
	for (ssize_t i = 0; i < n; i++)
		if (cmd[i] == '\0')
			cmd[i] = ' ';
	CHECK(strstr(cmd, "-u 65534:65534:65534 -G 3") != NULL, "%zd %s", n, cmd);
	/* Pinned: a request as root (no -u) or for another owner is refused
	 * with EPERM; the owner's runs. */
	CHECK(shim_ask(rfd, NULL) == EPERM, "no -u");
	CHECK(shim_ask(rfd, "0:0") == EPERM, "root");
	CHECK(shim_ask(rfd, "65534:65534:65534,0") == EPERM, "another group");
	CHECK(shim_ask(rfd, "65534:65534:65534") == 0, "the owner");
	close(rfd);
	waitpid(rep.pid, NULL, 0);
}

/* Root: a shim of root's only once root vouched (its own connection),
 * and never while job_user is set. */
/* Root vouched for: this process's own connection, whose credentials
 * (uid 0) the parent reads. */
static void
vouch_root(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	union priv_msg m;
	hdr(&m, PRIV_VOUCH, sizeof(m.vouch));
	CHECK(handle(&m, sizeof(m.vouch), sv[0], NULL) == 0);
	close(sv[1]);
}

static void
case_shim_root_vouched(void)
{
	setup(NOTAGROUP);
	vouch_root();
	union priv_msg m;
	CHECK(shim_start(PRIV_OWNER_ROOT, 0, 0, 0, NULL) == 0, "root vouched for");
	CHECK(shim_start(PRIV_OWNER_USER, 0, 0, 0, NULL) == EPERM, "uid 0 pinned");
	rules.job_uid = NOBODY;
	CHECK(shim_start(PRIV_OWNER_ROOT, 0, 0, 0, NULL) == EPERM, "job_user set");
	/* A descriptor that is no socket vouches for nobody. */
	int fd = open("/dev/null", O_RDONLY);
	hdr(&m, PRIV_VOUCH, sizeof(m.vouch));
	CHECK(handle(&m, sizeof(m.vouch), fd, NULL) == EINVAL);
}

/* An owner of many supplementary groups (the shim and the control socket
 * take SHIM_NGROUPS): the control socket reads them all, the parent
 * vouches for them and starts the owner's shim pinned with every one,
 * and the shim runs the owner's request. Nobody, its own group and 99
 * more, set on a process that then connects to us as nobody (the
 * credentials a connection carries are those of its connect()). */
#define MANY 100
static void
case_shim_many_groups(void)
{
	setup(NOGRP);
	uint32_t g[MANY];
	gid_t kg[MANY];
	char owner[24 + 11 * MANY];
	size_t n = (size_t)snprintf(owner, sizeof(owner), "%u:%u", NOBODY, NOGRP);
	for (int i = 0; i < MANY; i++) {
		/* Ascending: the order the kernel gives them back in. */
		g[i] = kg[i] = i == 0 ? NOGRP : NOTAGROUP + (uint32_t)i;
		n += (size_t)snprintf(owner + n, sizeof(owner) - n, "%c%u", i ? ',' : ':', g[i]);
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "test_priv.%d", (int)getpid());
	socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
	    strlen(sa.sun_path + 1));
	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&sa, sl) == 0 && listen(ls, 1) == 0);
	pid_t kid = fork();
	if (kid == 0) {
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		char b;
		if (setgroups(MANY, kg) == -1 || setresgid(NOGRP, NOGRP, NOGRP) == -1 ||
		    setresuid(NOBODY, NOBODY, NOBODY) == -1 ||
		    connect(s, (struct sockaddr *)&sa, sl) == -1)
			_exit(1);
		(void)!read(s, &b, 1);
		_exit(0);
	}
	int c = accept(ls, NULL, NULL);
	CHECK(kid > 0 && c >= 0);
	close(ls);
	/* The control socket's view of the peer: every group, none cut. */
	struct access_peer p;
	CHECK(access_peer_of(c, &p, NULL) == 0 && p.ngroups == MANY, "the control socket read "
	    "%d of the peer's %d groups", p.ngroups, MANY);
	union priv_msg m;
	hdr(&m, PRIV_VOUCH, sizeof(m.vouch));
	CHECK(handle(&m, sizeof(m.vouch), dup(c), NULL) == 0, "vouched for");
	close(c);
	waitpid(kid, NULL, 0);
	/* Not a member by the group database (NOTAGROUP's are nobody's):
	 * only the vouch lets it through, with every group. */
	int rfd = -1;
	CHECK(shim_start_rfd(PRIV_OWNER_USER, NOBODY, NOGRP, MANY, g, &rfd) == 0,
	    "a shim of %d groups", MANY);
	if (rfd < 0)
		return;
	CHECK(shim_ask(rfd, owner) == 0, "the owner's request");
	/* One group fewer is another owner: refused by the pinned shim. */
	*strrchr(owner, ',') = '\0';
	CHECK(shim_ask(rfd, owner) == EPERM, "a group cut");
	close(rfd);
	waitpid(-1, NULL, 0);	/* the shim, our one child left */
	/* Past the limit: refused whole by the decoder, never cut. */
	hdr(&m, PRIV_SHIM_START, sizeof(m.shim));
	m.shim.owner.ngroups = PRIV_NGROUPS + 1;
	CHECK(handle(&m, sizeof(m.shim), -1, NULL) == EINVAL);
}

/* A records directory below the state directory, 0700, with a shim.json
 * naming these. */
static void
record(const char *rdir, pid_t shim, uint64_t sstart, pid_t child, pid_t pgid, uint64_t cstart)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", rdir);
	CHECK(plc_mkdirs(path, 0700) == 0);
	snprintf(path, sizeof(path), "%s/shim.json", rdir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "{\"shim_pid\":%d,\"shim_start\":%llu,\"child_pid\":%d,\"pgid\":%d,"
	    "\"child_start\":%llu}\n", (int)shim, (unsigned long long)sstart, (int)child, (int)pgid,
	    (unsigned long long)cstart);
	fclose(f);
}

static int
sig(const char *rdir, uint32_t mode)
{
	union priv_msg m;
	hdr(&m, PRIV_SIGNAL, sizeof(m.sig));
	m.sig.mode = mode;
	m.sig.sig = SIGTERM;
	snprintf(m.sig.rdir, sizeof(m.sig.rdir), "%s", rdir);
	return handle(&m, sizeof(m.sig), -1, NULL);
}

static void
case_signal_refused(void)
{
	setup(NOGRP);
	/* A process of ours, in a group of its own: no shim started it. */
	pid_t kid = fork();
	if (kid == 0) {
		setpgid(0, 0);
		pause();
		_exit(0);
	}
	setpgid(kid, kid);
	usleep(20000);
	uint64_t kstart = proc_starttime(kid), self = proc_starttime(getpid());
	char rdir[PATH_MAX];
	snprintf(rdir, sizeof(rdir), "%s/runs/r/j/attempt-1/.shim/main", rules.state_dir);
	record(rdir, getpid(), self, kid, kid, kstart);
	CHECK(sig(rdir, PRIV_SIG_CHILD) == EPERM, "a pid no shim of ours started");
	CHECK(sig(rdir, PRIV_SIG_ORPHANS) == EPERM, "its group");
	/* Started before the parent (an earlier one's, adopted): still not
	 * the child of the shim its record names. */
	rules.since = ~0ULL;
	record(rdir, 1, 1, kid, kid, kstart);
	CHECK(sig(rdir, PRIV_SIG_CHILD) == EPERM, "not the named shim's child");
	/* pgid 1, pid 1; a start time that is not the process's. */
	record(rdir, getpid(), self, 1, 1, 1);
	CHECK(sig(rdir, PRIV_SIG_CHILD) == EPERM && sig(rdir, PRIV_SIG_ORPHANS) == EPERM, "pgid 1");
	record(rdir, getpid(), self, kid, kid, kstart + 1);
	CHECK(sig(rdir, PRIV_SIG_ORPHANS) == EPERM, "another start time");
	/* Where the records lie: outside the state directory, not a .shim
	 * directory, writable by others, through a link. */
	char out[PATH_MAX], link[PATH_MAX];
	snprintf(out, sizeof(out), "/tmp/.shim");
	CHECK(sig("/tmp/.shim", PRIV_SIG_CHILD) == EPERM, "outside");
	snprintf(out, sizeof(out), "%s/runs/r/j/attempt-1/main", rules.state_dir);
	record(out, 1, 1, kid, kid, kstart);
	CHECK(sig(out, PRIV_SIG_CHILD) == EPERM, "not .shim");
	chmod(rdir, 0777);
	CHECK(sig(rdir, PRIV_SIG_CHILD) == EPERM, "writable by others");
	chmod(rdir, 0700);
	snprintf(link, sizeof(link), "%s/runs/r/j/attempt-1/.shim/ln", rules.state_dir);
	CHECK(symlink(rdir, link) == 0);
	CHECK(sig(link, PRIV_SIG_CHILD) == EPERM, "a link");
	/* The child lives on: nothing was signalled. */
	int st;
	CHECK(waitpid(kid, &st, WNOHANG) == 0, "the process was signalled");
	/* Adopted, and the named shim's child (we are its parent): signalled. */
	record(rdir, getpid(), self, kid, kid, kstart);
	CHECK(sig(rdir, PRIV_SIG_CHILD) == 0);
	CHECK(waitpid(kid, &st, 0) == kid && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
}

static int
chown_to(int fd, uid_t uid, gid_t gid)
{
	union priv_msg m;
	hdr(&m, PRIV_FCHOWN, sizeof(m.chown));
	m.chown.uid = uid;
	m.chown.gid = gid;
	m.chown.count = 1;
	return handle(&m, sizeof(m.chown), fd, NULL);
}

/* PRIV_FCHOWN with count descriptors declared and nfd attached. */
static int
chown_n(const int *fds, int nfd, uint32_t count, uid_t uid, gid_t gid)
{
	union priv_msg m;
	struct priv_reply rep;
	int r = -1, own[4];
	hdr(&m, PRIV_FCHOWN, sizeof(m.chown));
	m.chown.uid = uid;
	m.chown.gid = gid;
	m.chown.count = count;
	for (int i = 0; i < nfd; i++)
		own[i] = dup(fds[i]);
	priv_handle(&rules, &m, sizeof(m.chown), own, nfd, &rep, &r);
	return rep.err;
}

static void
case_fchown(void)
{
	setup(NOTAGROUP);
	char path[PATH_MAX], fifo[PATH_MAX];
	snprintf(path, sizeof(path), "%s/f", tmp);
	snprintf(fifo, sizeof(fifo), "%s/p", tmp);
	int fd = open(path, O_RDWR | O_CREAT, 0600);
	CHECK(fd >= 0 && mkfifo(fifo, 0600) == 0);
	struct stat st;
	CHECK(chown_to(dup(fd), NOBODY, NOGRP) == EPERM, "a non-member");
	CHECK(chown_to(dup(fd), 0, 0) == EPERM, "root");
	setup(NOGRP);
	int pfd = open(fifo, O_RDONLY | O_NONBLOCK);
	CHECK(chown_to(pfd, NOBODY, NOGRP) == EPERM, "a FIFO");
	CHECK(chown_to(dup(fd), NOBODY, 0) == EPERM, "gid 0");
	CHECK(fstat(fd, &st) == 0 && st.st_uid == 0);
	CHECK(chown_to(dup(fd), NOBODY, NOGRP) == 0, "a member");
	CHECK(fstat(fd, &st) == 0 && st.st_uid == NOBODY && st.st_gid == NOGRP);
	close(fd);

	/* Several in one message (a job's work directory, context file and
	 * process directory): each checked, the first refused ending it. */
	char d1[PATH_MAX], f2[PATH_MAX], d3[PATH_MAX];
	snprintf(d1, sizeof(d1), "%s/work", tmp);
	snprintf(f2, sizeof(f2), "%s/ctx", tmp);
	snprintf(d3, sizeof(d3), "%s/main", tmp);
	CHECK(mkdir(d1, 0750) == 0 && mkdir(d3, 0750) == 0);
	int three[3] = { open(d1, O_PATH | O_DIRECTORY), open(f2, O_WRONLY | O_CREAT, 0600),
		open(d3, O_PATH | O_DIRECTORY) };
	CHECK(three[0] >= 0 && three[1] >= 0 && three[2] >= 0);
	CHECK(chown_n(three, 2, 3, NOBODY, NOGRP) == EINVAL, "two attached, three declared");
	CHECK(chown_n(three, 3, 4, NOBODY, NOGRP) == EINVAL, "four declared");
	CHECK(chown_n(three, 1, 0, NOBODY, NOGRP) == EINVAL, "none declared");
	CHECK(fstat(three[0], &st) == 0 && st.st_uid == 0, "given on a malformed message");
	pfd = open(fifo, O_RDONLY | O_NONBLOCK);
	int bad3[3] = { three[0], pfd, three[2] };
	CHECK(chown_n(bad3, 3, 3, NOBODY, NOGRP) == EPERM, "a FIFO among three");
	CHECK(fstat(three[2], &st) == 0 && st.st_uid == 0, "the one after a refused one given");
	CHECK(chown_n(three, 3, 3, NOBODY, NOGRP) == 0, "three of a member's");
	for (int i = 0; i < 3; i++) {
		CHECK(fstat(three[i], &st) == 0 && st.st_uid == NOBODY && st.st_gid == NOGRP,
		    "descriptor %d not given", i + 1);
		close(three[i]);
	}
	close(pfd);
}

/* Slurm's commands in a directory of their own ([slurm] bin_dir): a
 * sbatch that records who ran it, with what environment and standard
 * input, and answers as the script asks (a job id, garbage, an error);
 * a scancel that records its arguments. */
static char sbin[PATH_MAX];

static void
fake_slurm(void)
{
	snprintf(sbin, sizeof(sbin), "%s/bin", tmp);
	CHECK(mkdir(sbin, 0777) == 0 && chmod(sbin, 0777) == 0 && chmod(tmp, 0755) == 0);
	snprintf(rules.slurm_bin, sizeof(rules.slurm_bin), "%s", sbin);
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/sbatch", sbin);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "#!/bin/sh\nd=$(dirname \"$0\")\ncat > \"$d/stdin\"\n"
	    "{ id -u; id -g; id -G; env; echo \"args $*\"; } > \"$d/who\"\n"
	    "case $(cat \"$d/stdin\") in\n"
	    "*GARBAGE*) echo 'sbatch: warning: a line'; echo 'job 12';;\n"
	    "*REFUSE*) echo 'sbatch: error: Batch job submission failed: Invalid' >&2; exit 1;;\n"
	    "*) echo 'sbatch: warning: a line'; echo '4242;cluster';;\nesac\n");
	fclose(f);
	snprintf(path, sizeof(path), "%s/scancel", sbin);
	f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "#!/bin/sh\necho \"$(id -u) $*\" >> \"$(dirname \"$0\")/cancelled\"\n");
	fclose(f);
	snprintf(path, sizeof(path), "%s/sbatch", sbin);
	CHECK(chmod(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/scancel", sbin);
	CHECK(chmod(path, 0755) == 0);
}

/* sbatch of a script whose text is text (NULL: a FIFO) as owner o; the
 * reply's err, its why in why. */
static int
sbatch_as(const char *text, const struct priv_owner *o, char *why, size_t whylen)
{
	char path[PATH_MAX];
	int fd;
	snprintf(path, sizeof(path), "%s/job.sbatch", tmp);
	unlink(path);
	if (text == NULL) {
		CHECK(mkfifo(path, 0600) == 0);
		fd = open(path, O_RDWR);
	} else {
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	}
	union priv_msg m;
	hdr(&m, PRIV_SBATCH, sizeof(m.sbatch));
	m.sbatch.owner = *o;
	struct priv_reply rep;
	int rfd, fds[1] = { fd };
	priv_handle(&rules, &m, sizeof(m.sbatch), fds, 1, &rep, &rfd);
	CHECK(rfd == -1 && rep.h.type == PRIV_SBATCH);
	snprintf(why, whylen, "%s", rep.why);
	return rep.err;
}

/* The same as uid:gid, a user with gid its one group. */
static int
sbatch(const char *text, uid_t uid, gid_t gid, char *why, size_t whylen)
{
	struct priv_owner o;
	memset(&o, 0, sizeof(o));
	owner_one(&o, uid, gid);
	return sbatch_as(text, &o, why, whylen);
}

/* scancel of job id as uid (0: root's own runs' owner, PRIV_OWNER_ROOT). */
static int
scancel(const char *id, uid_t uid, int signo)
{
	union priv_msg m;
	hdr(&m, PRIV_SCANCEL, sizeof(m.scancel));
	m.scancel.owner.kind = uid == 0 ? PRIV_OWNER_ROOT : PRIV_OWNER_USER;
	m.scancel.owner.uid = uid;
	m.scancel.owner.gid = uid == 0 ? 0 : NOGRP;
	m.scancel.sig = signo;
	snprintf(m.scancel.id, sizeof(m.scancel.id), "%s", id);
	return handle(&m, sizeof(m.scancel), -1, NULL);
}

/* sbatch runs as the owner, never as a non-member, reads the script on
 * its standard input, gets the parent's PATH and SLURM_CONF and nothing
 * else of its environment; its job id comes back; garbage and Slurm's
 * refusal are refused with sbatch's words. scancel runs as the owner of
 * a job the parent submitted for that uid, and for no other job. */
static void
case_slurm(void)
{
	char why[160], path[PATH_MAX + 16];
	setup(NOTAGROUP);
	fake_slurm();
	CHECK(sbatch("#!/bin/sh\ntrue\n", NOBODY, NOGRP, why, sizeof(why)) == EPERM,
	    "a non-member: %s", why);
	snprintf(path, sizeof(path), "%s/who", sbin);
	CHECK(access(path, F_OK) == -1, "sbatch ran for a non-member");
	setup(NOGRP);
	fake_slurm();
	CHECK(sbatch(NULL, NOBODY, NOGRP, why, sizeof(why)) == EINVAL, "a FIFO: %s", why);
	setenv("SLURM_CONF", "/etc/slurm/test.conf", 1);
	setenv("PL_LEAK", "1", 1);
	CHECK(sbatch("#!/bin/sh\ntrue\n", NOBODY, NOGRP, why, sizeof(why)) == 0, "%s", why);
	CHECK(strcmp(why, "4242") == 0, "job id '%s'", why);
	snprintf(path, sizeof(path), "%s/who", sbin);
	char *who = plc_read_file(path, NULL, 65536);
	CHECK(who != NULL && strncmp(who, "65534\n65534\n65534\n", 18) == 0, "%s", who ? who : "(none)");
	CHECK(who != NULL && strstr(who, "SLURM_CONF=/etc/slurm/test.conf\n") != NULL &&
	    strstr(who, "PL_LEAK") == NULL && strstr(who, "args --parsable\n") != NULL, "%s", who ? who : "(none)");
	free(who);
	snprintf(path, sizeof(path), "%s/stdin", sbin);
	char *in = plc_read_file(path, NULL, 65536);
	CHECK(in != NULL && strcmp(in, "#!/bin/sh\ntrue\n") == 0, "stdin: %s", in ? in : "(none)");
	free(in);
	unsetenv("PL_LEAK");
	/* A reply that is no job id; Slurm's refusal, in its words. */
	CHECK(sbatch("GARBAGE", NOBODY, NOGRP, why, sizeof(why)) == EIO, "garbage");
	CHECK(strstr(why, "no job id") != NULL, "%s", why);
	CHECK(sbatch("REFUSE", NOBODY, NOGRP, why, sizeof(why)) == EIO, "refused");
	CHECK(strstr(why, "Invalid") != NULL, "%s", why);
	/* scancel: the job submitted, as its owner; another id, or the same
	 * id for another uid, refused. */
	CHECK(scancel("4242", NOBODY, 0) == 0);
	CHECK(scancel("4242", NOBODY, SIGUSR1) == 0);
	CHECK(scancel("4243", NOBODY, 0) == EPERM, "a job the parent did not submit");
	CHECK(scancel("12", NOBODY, 0) == EPERM, "the garbage's number");
	CHECK(scancel("4242", 1, 0) == EPERM, "another uid");
	snprintf(path, sizeof(path), "%s/cancelled", sbin);
	char *c = plc_read_file(path, NULL, 65536);
	CHECK(c != NULL && strcmp(c, "65534 4242\n65534 --signal=10 --batch 4242\n") == 0, "%s", c ? c : "(none)");
	free(c);
	unsetenv("SLURM_CONF");
}

/* Root's own runs' sbatch (PRIV_OWNER_ROOT): by the parent's rule for
 * root's shims, refused until root vouched for itself (its own
 * connection, whose credentials the parent reads) and while job_user is
 * set (root's runs are then job_user's); then run as root, uid and
 * groups unchanged, in the same clean environment, the script on its
 * standard input, and the job id remembered for uid 0: root's scancel
 * goes through for that id alone, and a member's uid cannot cancel it. */
static void
case_slurm_root(void)
{
	char why[160], path[PATH_MAX + 16];
	struct priv_owner root;
	memset(&root, 0, sizeof(root));
	root.kind = PRIV_OWNER_ROOT;
	setup(NOGRP);
	fake_slurm();
	snprintf(path, sizeof(path), "%s/who", sbin);
	CHECK(sbatch_as("#!/bin/sh\ntrue\n", &root, why, sizeof(why)) == EPERM,
	    "root, not vouched for: %s", why);
	CHECK(strstr(why, "root submitted nothing") != NULL, "%s", why);
	CHECK(access(path, F_OK) == -1, "sbatch ran for root not vouched for");
	CHECK(scancel("4242", 0, 0) == EPERM, "scancel for root not vouched for");
	vouch_root();
	rules.job_uid = NOBODY;
	CHECK(sbatch_as("#!/bin/sh\ntrue\n", &root, why, sizeof(why)) == EPERM,
	    "root with job_user set: %s", why);
	CHECK(strstr(why, "job_user") != NULL, "%s", why);
	CHECK(access(path, F_OK) == -1, "sbatch ran for root with job_user set");
	rules.job_uid = (uid_t)-1;
	setenv("SLURM_CONF", "/etc/slurm/test.conf", 1);
	setenv("PL_LEAK", "1", 1);
	CHECK(sbatch_as("#!/bin/sh\nroot\n", &root, why, sizeof(why)) == 0, "%s", why);
	unsetenv("PL_LEAK");
	CHECK(strcmp(why, "4242") == 0, "job id '%s'", why);
	char *who = plc_read_file(path, NULL, 65536);
	CHECK(who != NULL && strncmp(who, "0\n0\n", 4) == 0, "%s", who ? who : "(none)");
	CHECK(who != NULL && strstr(who, "SLURM_CONF=/etc/slurm/test.conf\n") != NULL &&
	    strstr(who, "PL_LEAK") == NULL && strstr(who, "args --parsable\n") != NULL, "%s",
	    who ? who : "(none)");
	free(who);
	snprintf(path, sizeof(path), "%s/stdin", sbin);
	char *in = plc_read_file(path, NULL, 65536);
	CHECK(in != NULL && strcmp(in, "#!/bin/sh\nroot\n") == 0, "stdin: %s", in ? in : "(none)");
	free(in);
	CHECK(sbatch_as(NULL, &root, why, sizeof(why)) == EINVAL, "a FIFO: %s", why);
	/* scancel: root's job as root; an id the parent did not answer, or
	 * root's job for a member's uid, refused. */
	CHECK(scancel("4243", 0, 0) == EPERM, "a job the parent did not submit");
	CHECK(scancel("4242", NOBODY, 0) == EPERM, "root's job as a member");
	CHECK(scancel("4242", 0, SIGUSR1) == 0);
	rules.job_uid = NOBODY;
	CHECK(scancel("4242", 0, 0) == EPERM, "root's scancel with job_user set");
	rules.job_uid = (uid_t)-1;
	snprintf(path, sizeof(path), "%s/cancelled", sbin);
	char *c = plc_read_file(path, NULL, 65536);
	CHECK(c != NULL && strcmp(c, "0 --signal=10 --batch 4242\n") == 0, "%s", c ? c : "(none)");
	free(c);
	unsetenv("SLURM_CONF");
}

/* The lines of state_dir/priv.owners, and how many are sbatch's. */
static int
owners_lines(int *sbatch)
{
	char path[PATH_MAX + 16], line[4096];
	snprintf(path, sizeof(path), "%s/priv.owners", rules.state_dir);
	FILE *f = fopen(path, "r");
	int n = 0;
	*sbatch = 0;
	while (f != NULL && fgets(line, sizeof(line), f)) {
		n++;
		*sbatch += strncmp(line, "sbatch ", 7) == 0;
	}
	if (f != NULL)
		fclose(f);
	return f != NULL ? n : -1;
}

/* A configuration of this state directory, group NOGRP, the shim of
 * the rules and Slurm's commands in sbin. */
static void
conf_here(struct conf *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->state_dir, sizeof(c->state_dir), "%s", rules.state_dir);
	snprintf(c->shim, sizeof(c->shim), "%s", rules.shim);
	c->gid = NOGRP;
	c->admin_gid = (gid_t)-1;
	c->job_uid = (uid_t)-1;
	c->all = cJSON_CreateObject();
	cJSON_AddStringToObject(c->all, "slurm.bin_dir", sbin);
}

/* The parent's start, as priv_start() makes it: its rules read from
 * conf_here(). */
static void
owners_start(void)
{
	struct conf c;
	conf_here(&c);
	rules.since = 0;
	rules.vouchfd = -1;
	priv_rules_load(&rules, &c);
	cJSON_Delete(c.all);
	rules.since = 1;
	CHECK(rules.vouchfd >= 0, "priv.owners not opened");
}

/* priv.owners stays bounded: the parent's start writes only what it
 * keeps (the owners vouched for, the newest PRIV_SJOBS Slurm jobs), and
 * a file grown past twice that while the parent runs is written again
 * the same way; each time in a new file renamed over the old one, so a
 * parent killed meanwhile leaves one or the other, and a leftover of
 * such a kill (a link, even) is neither followed nor read. */
#define SJ_BASE 9000000000ULL	/* ids no pid of the fake sbatch takes */
static void
case_owners_bounded(void)
{
	setup(NOGRP);
	fake_slurm();
	char path[PATH_MAX + 16], tmpf[PATH_MAX + 32], bait[PATH_MAX + 16];
	/* A quick sbatch: a job id of its own (its pid) and nothing else. */
	snprintf(path, sizeof(path), "%s/sbatch", sbin);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL && fputs("#!/bin/sh\necho $$\n", f) >= 0 && fclose(f) == 0);
	snprintf(path, sizeof(path), "%s/priv.owners", rules.state_dir);
	/* Where plc_atomic_open() writes the new file, which this process
	 * (the parent here) would have left had it been killed there. */
	snprintf(tmpf, sizeof(tmpf), "%s/.priv.owners.tmp.%d", rules.state_dir, (int)getpid());
	snprintf(bait, sizeof(bait), "%s/bait", rules.state_dir);
	/* Two owners (one twice), a line of garbage, three tables of jobs. */
	f = fopen(path, "w");
	CHECK(f != NULL && chmod(path, 0600) == 0);
	fprintf(f, "65534:65534:65534\n1000:1000\n65534:65534:65534\n\n");
	for (unsigned long long i = 0; i < 3 * PRIV_SJOBS; i++)
		fprintf(f, "sbatch %llu 65534\n", SJ_BASE + i);
	fclose(f);
	f = fopen(bait, "w");
	CHECK(f != NULL && fputs("bait\n", f) >= 0 && fclose(f) == 0);
	CHECK(symlink(bait, tmpf) == 0);
	owners_start();
	int sb, n = owners_lines(&sb);
	CHECK(n == 2 + PRIV_SJOBS && sb == PRIV_SJOBS, "at start: %d lines, %d of sbatch", n, sb);
	char *b = plc_read_file(bait, NULL, 4096);
	CHECK(b != NULL && strcmp(b, "bait\n") == 0, "the leftover's link was followed");
	free(b);
	struct stat st;
	CHECK(lstat(tmpf, &st) == -1 && errno == ENOENT, "a temporary file left");
	CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
	    (st.st_mode & 0777) == 0600);
	/* What it kept: the newest jobs, not the oldest. */
	char id[32];
	snprintf(id, sizeof(id), "%llu", SJ_BASE + 3 * PRIV_SJOBS - 1);
	CHECK(scancel(id, NOBODY, 0) == 0, "the newest job forgotten");
	snprintf(id, sizeof(id), "%llu", SJ_BASE + 2 * PRIV_SJOBS - 1);
	CHECK(scancel(id, NOBODY, 0) == EPERM, "an old job kept");
	/* A restart's parent reads what this one wrote. */
	close(rules.vouchfd);
	owners_start();
	n = owners_lines(&sb);
	CHECK(n == 2 + PRIV_SJOBS && sb == PRIV_SJOBS, "again: %d lines, %d of sbatch", n, sb);
	/* Jobs submitted while the parent runs: the file never holds more
	 * than twice the table (and the owners), and is written again. */
	char why[160];
	int most = 0;
	for (int i = 0; i < PRIV_SJOBS + 8; i++) {
		CHECK(sbatch("#!/bin/sh\ntrue\n", NOBODY, NOGRP, why, sizeof(why)) == 0, "%s", why);
		n = owners_lines(&sb);
		most = n > most ? n : most;
		if (n > 2 + 2 * PRIV_SJOBS) {
			CHECK(0, "after %d jobs: %d lines", i + 1, n);
			break;
		}
	}
	n = owners_lines(&sb);
	CHECK(n < 2 + 2 * PRIV_SJOBS && most <= 2 + 2 * PRIV_SJOBS, "%d lines, %d at most", n, most);
	CHECK(scancel(why, NOBODY, 0) == 0, "the last job forgotten");
	close(rules.vouchfd);
	owners_start();
	CHECK(scancel(why, NOBODY, 0) == 0, "the last job forgotten across a restart");
}

/* A slow sbatch does not hold the parent up: a real parent (priv_start():
 * this case's process becomes it, its child the daemon's side and the
 * rest of the case) runs a stand-in sbatch that answers after 5 s
 * (tests/standins/sbatch_slow_standin.sh), and a shim start asked for
 * meanwhile, from another thread, is answered while that sbatch still
 * runs; then the sbatch's job id comes back and the parent knows it (its
 * scancel goes through). */
static int
no_reload(struct priv_rules *r)
{
	return 0;
}

/* A real parent of conf_here()'s, this process its daemon process from
 * now on: whether one acts. */
static int
parent_start(void)
{
	static struct conf c;	/* the parent's for good */
	char path[PATH_MAX + 64];
	conf_here(&c);
	snprintf(path, sizeof(path), "%s/pid", tmp);
	int pidfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	CHECK(pidfd >= 0);
	CHECK(priv_start(&c, no_reload, pidfd, NULL) == 0 && priv_active(), "no parent");
	return priv_active();
}

static volatile int slow_done;
static char slow_id[32], slow_err[160];
static int slow_fd, slow_rc = -2;

static void *
slow_sbatch(void *arg)
{
	slow_rc = priv_sbatch("65534:65534:65534", slow_fd, slow_id, sizeof(slow_id), slow_err,
	    sizeof(slow_err));
	slow_done = 1;
	return NULL;
}

static void
case_slurm_slow(void)
{
	char path[PATH_MAX + 64];
	setup(NOGRP);
	fake_slurm();
	/* The stand-in, copied where nobody runs it from. */
	snprintf(path, sizeof(path), "%s/../standins/sbatch_slow_standin.sh", self_dir());
	char *text = plc_read_file(path, NULL, 65536);
	CHECK(text != NULL, "%s", path);
	if (text == NULL)
		return;
	snprintf(path, sizeof(path), "%s/sbatch", sbin);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL && fputs(text, f) >= 0 && fclose(f) == 0 && chmod(path, 0755) == 0);
	free(text);
	if (!parent_start())
		return;
	/* The daemon's side from here on. */
	snprintf(path, sizeof(path), "%s/job.sbatch", tmp);
	slow_fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(slow_fd >= 0 && write(slow_fd, "#!/bin/sh\ntrue\n", 15) == 15);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, slow_sbatch, NULL) == 0);
	snprintf(path, sizeof(path), "%s/started", sbin);
	for (int i = 0; i < 1000 && access(path, F_OK) == -1; i++)
		usleep(10000);
	CHECK(access(path, F_OK) == 0, "the stand-in sbatch never started");
	pid_t pid;
	uint64_t start;
	double t0 = plc_mono_secs();
	int fd = priv_shim_start(rules.shim, "65534:65534:65534", NULL, &pid, &start);
	double took = plc_mono_secs() - t0;
	int during = !slow_done;
	CHECK(fd >= 0, "the shim start failed: %s", strerror(errno));
	CHECK(during, "the shim start was answered only after the sbatch (%.1f s)", took);
	if (fd >= 0)
		close(fd);
	pthread_join(th, NULL);
	CHECK(slow_rc == 0 && strcmp(slow_id, "4243") == 0, "sbatch: %d '%s' %s", slow_rc,
	    slow_id, slow_err);
	char err[160];
	CHECK(priv_scancel("65534:65534:65534", "4243", 0, err, sizeof(err)) == 0, "scancel: %s",
	    err);
}

/* A connection of nobody's (a member of group NOGRP) to us, made by a
 * child that takes nobody's ids and connects: its descriptor (the child
 * waits until it is closed, then is reaped by the caller). */
static int
nobody_conn(pid_t *kid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "test_priv.c.%d", (int)getpid());
	socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
	    strlen(sa.sun_path + 1));
	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), c;
	gid_t g = NOGRP;
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sl) == -1 || listen(ls, 1) == -1)
		return -1;
	if ((*kid = fork()) == 0) {
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		char b;
		if (setgroups(1, &g) == -1 || setresgid(NOGRP, NOGRP, NOGRP) == -1 ||
		    setresuid(NOBODY, NOBODY, NOBODY) == -1 ||
		    connect(s, (struct sockaddr *)&sa, sl) == -1)
			_exit(1);
		(void)!read(s, &b, 1);
		_exit(0);
	}
	c = accept(ls, NULL, NULL);
	close(ls);
	return c;
}

/* A spec's text in a memfd, sealed with seals (0: none). */
static int
spec_memfd(const char *text, int seals)
{
	int fd = memfd_create("spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd == -1 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
	    (seals && fcntl(fd, F_ADD_SEALS, seals) == -1))
		return -1;
	return fd;
}

/* PRIV_CHECK through the parent: its reply's err, the answer read from
 * the descriptor that came back into out (the helper reaped). */
static int
check_as(int conn, int tfd, const char *path, char *out, size_t outlen)
{
	union priv_msg m;
	struct priv_reply rep;
	int fds[2] = { conn, tfd }, rfd = -1;
	hdr(&m, PRIV_CHECK, sizeof(m.check));
	snprintf(m.check.path, sizeof(m.check.path), "%s", path);
	priv_handle(&rules, &m, sizeof(m.check), fds, 2, &rep, &rfd);
	out[0] = '\0';
	if (rfd >= 0) {
		size_t k = 0;
		ssize_t got;
		while (k < outlen - 1 && (got = read(rfd, out + k, outlen - 1 - k)) > 0)
			k += (size_t)got;
		out[k] = '\0';
		close(rfd);
	}
	if (rep.pid > 0)
		waitpid(rep.pid, NULL, 0);
	CHECK((rep.err == 0) == (rfd >= 0), "err %d, descriptor %d", rep.err, rfd);
	return rep.err;
}

/* A spec's file checks: refused for a connection of uid 0 (root's are
 * the daemon's), for no socket, for a text not sealed or too large; for
 * a member, pipeline-stage --check run as the member, its answer on the
 * descriptor that comes back: the member's own 0600 file checks, root's
 * is Permission denied. */
static void
case_check(void)
{
	setup(NOGRP);
	char spec[PATH_MAX], mine[PATH_MAX], roots[PATH_MAX], out[8192];
	char text[2 * PATH_MAX];
	FILE *f;
	CHECK(chmod(tmp, 0755) == 0);
	snprintf(rules.stage, sizeof(rules.stage), "%s/../../daemon/pipeline-stage", self_dir());
	/* The configuration file root's alone: the check is handed what it
	 * needs of it. */
	snprintf(rules.conf_path, sizeof(rules.conf_path), "%s/p.conf", tmp);
	snprintf(rules.plugin_dir, sizeof(rules.plugin_dir), "%s/../../plugins", self_dir());
	rules.max_spec_bytes = 4096;
	rules.max_spec_jobs = 100;
	rules.max_variants = 16;
	CHECK((f = fopen(rules.conf_path, "w")) != NULL);
	fprintf(f, "[daemon]\nnotify_secret = x\n");
	fclose(f);
	chmod(rules.conf_path, 0600);
	snprintf(mine, sizeof(mine), "%s/mine.jsonl", tmp);
	snprintf(roots, sizeof(roots), "%s/roots.jsonl", tmp);
	for (int i = 0; i < 2; i++) {
		CHECK((f = fopen(i ? roots : mine, "w")) != NULL);
		fprintf(f, "{\"key\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}, "
		    "{\"role\": \"assistant\", \"content\": \"y\"}]}\n");
		fclose(f);
		chmod(i ? roots : mine, 0600);
	}
	CHECK(chown(mine, NOBODY, NOGRP) == 0);
	snprintf(spec, sizeof(spec), "%s/s.ini", tmp);
	static const int sealed = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;

	/* Root's own connection, and no socket at all. */
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	snprintf(text, sizeof(text), "[c]\nstage = corpus_check\ncorpus = %s\n", mine);
	CHECK(check_as(sv[0], spec_memfd(text, sealed), spec, out, sizeof(out)) == EPERM,
	    "uid 0");
	close(sv[1]);
	CHECK(check_as(open("/dev/null", O_RDONLY), spec_memfd(text, sealed), spec, out,
	    sizeof(out)) == EINVAL, "no socket");

	/* A member's. */
	pid_t kid = -1;
	int c = nobody_conn(&kid);
	CHECK(c >= 0);
	CHECK(check_as(dup(c), spec_memfd(text, 0), spec, out, sizeof(out)) == EINVAL,
	    "not sealed");
	CHECK(check_as(dup(c), spec_memfd(text, F_SEAL_GROW | F_SEAL_SHRINK), spec, out,
	    sizeof(out)) == EINVAL, "writable");
	char big[5000];
	memset(big, '#', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK(check_as(dup(c), spec_memfd(big, sealed), spec, out, sizeof(out)) == EINVAL,
	    "past max_spec_bytes");
	CHECK(check_as(dup(c), spec_memfd(text, sealed), spec, out, sizeof(out)) == 0);
	CHECK(strcmp(out, "{\"ok\":true}\n") == 0, "the member's own file: %s", out);
	snprintf(text, sizeof(text), "[c]\nstage = corpus_check\ncorpus = %s\n", roots);
	CHECK(check_as(dup(c), spec_memfd(text, sealed), spec, out, sizeof(out)) == 0);
	CHECK(strstr(out, "\"ok\":false") && strstr(out, "s.ini:3: corpus: ") &&
	    strstr(out, "roots.jsonl: Permission denied"), "root's file: %s", out);
	close(c);
	waitpid(kid, NULL, 0);
}

/* A daemon process of its own user (pipelined.conf(5) user beside
 * group): the parent takes that uid from the configuration, not its own;
 * an fchown takes a file of that user's (a path descriptor too) and
 * refuses one of root's; priv.owners moves from the state directory,
 * which is the user's, into state_dir/priv, made root's and 0700, and a
 * priv directory that is not root's is not used. */
#define DUSER 4243	/* the daemon's user's uid */
static void
case_daemon_user(void)
{
	setup(NOGRP);
	char path[PATH_MAX + 32], priv[PATH_MAX + 8];
	snprintf(path, sizeof(path), "%s/priv.owners", rules.state_dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0 && write(fd, "7:7\n", 4) == 4);
	close(fd);
	struct conf c;
	conf_here(&c);
	snprintf(c.user, sizeof(c.user), "someone");
	c.user_uid = DUSER;
	rules.since = 0;
	priv_rules_load(&rules, &c);
	CHECK(rules.daemon_uid == DUSER, "daemon_uid %u", (unsigned)rules.daemon_uid);
	CHECK(rules.vouchfd >= 0, "priv.owners not opened");
	snprintf(priv, sizeof(priv), "%s/priv", rules.state_dir);
	struct stat st;
	CHECK(stat(priv, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
	    (st.st_mode & 0777) == 0700, "state_dir/priv");
	CHECK(access(path, F_OK) == -1, "priv.owners left in the state directory");
	snprintf(path, sizeof(path), "%s/priv/priv.owners", rules.state_dir);
	char *t = plc_read_file(path, NULL, 4096);
	CHECK(t != NULL && strcmp(t, "7:7\n") == 0, "priv.owners not moved: %s", t ? t : "(none)");
	free(t);
	/* fchown: a file of the daemon's user's, by a path descriptor too. */
	snprintf(path, sizeof(path), "%s/d", rules.state_dir);
	CHECK(mkdir(path, 0750) == 0 && chown(path, DUSER, DUSER) == 0);
	fd = open(path, O_PATH | O_DIRECTORY);
	CHECK(chown_to(fd, NOBODY, NOGRP) == 0, "the daemon user's directory");
	CHECK(stat(path, &st) == 0 && st.st_uid == NOBODY && st.st_gid == NOGRP);
	snprintf(path, sizeof(path), "%s/r", rules.state_dir);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	CHECK(chown_to(fd, NOBODY, NOGRP) == EPERM, "a file of root's, the daemon not root");
	/* A priv directory the user could have swapped in: not used. */
	close(rules.vouchfd);
	CHECK(chown(priv, DUSER, DUSER) == 0);
	rules.since = 0;
	priv_rules_load(&rules, &c);
	CHECK(rules.vouchfd == -1, "priv.owners opened in a directory of the user's");
	cJSON_Delete(c.all);
}

/* The file server's requests decoded: each op with its flags, refused
 * short, with a flag or a descriptor it does not take, a path without
 * its NUL or with a stray byte, relative without a directory. */
static void
case_files_decode(void)
{
	struct pfs_req q;
	char why[160];
	memset(&q, 0, sizeof(q));
	q.op = PFS_STATAT;
	strcpy(q.path, "/etc/passwd");
	CHECK(pfs_decode(&q, sizeof(q), 0, why, sizeof(why)) == PFS_STATAT, "%s", why);
	CHECK(pfs_decode(&q, sizeof(q) - 1, 0, why, sizeof(why)) == -1, "short");
	CHECK(pfs_decode("abc", 3, 0, why, sizeof(why)) == -1, "garbage");
	CHECK(pfs_decode(&q, sizeof(q), 1, why, sizeof(why)) == -1, "a descriptor more");
	q.flags = PFS_AT;
	CHECK(pfs_decode(&q, sizeof(q), 0, why, sizeof(why)) == -1, "no descriptor");
	CHECK(pfs_decode(&q, sizeof(q), 1, why, sizeof(why)) == PFS_STATAT, "%s", why);
	q.flags = PFS_DIR;
	CHECK(pfs_decode(&q, sizeof(q), 0, why, sizeof(why)) == -1, "a flag of open's");
	q.flags = 0;
	q.op = PFS_OPENAT;
	q.flags = PFS_BENEATH;
	CHECK(pfs_decode(&q, sizeof(q), 0, why, sizeof(why)) == -1, "beneath nothing");
	q.flags = 0x80;
	CHECK(pfs_decode(&q, sizeof(q), 0, why, sizeof(why)) == -1, "an unknown flag");
	q.flags = PFS_FOLLOW;
	CHECK(pfs_decode(&q, sizeof(q), 0, why, sizeof(why)) == -1, "an open that follows");
	q.flags = 0;
	q.op = PFS_NOPS;
	CHECK(pfs_decode(&q, sizeof(q), 0, why, sizeof(why)) == -1, "an unknown op");
	q.op = PFS_REALPATH;
	strcpy(q.path, "etc/passwd");
	CHECK(pfs_decode(&q, sizeof(q), 0, why, sizeof(why)) == -1, "relative");
	memset(q.path, 'a', sizeof(q.path));
	q.path[0] = '/';
	CHECK(pfs_decode(&q, sizeof(q), 0, why, sizeof(why)) == -1, "no NUL");
	memset(q.path, 0, sizeof(q.path));
	strcpy(q.path, "/a");
	q.path[9] = 'x';
	CHECK(pfs_decode(&q, sizeof(q), 0, why, sizeof(why)) == -1, "a stray byte");
	q.path[9] = '\0';
	CHECK(pfs_decode(&q, sizeof(q), 0, why, sizeof(why)) == PFS_REALPATH, "%s", why);
	/* The server answers garbage with EINVAL and closes what came. */
	struct pfs_rep rep;
	int fds[1] = { open("/dev/null", O_RDONLY) }, rfd;
	pfs_handle("abc", 3, fds, 1, &rep, &rfd);
	CHECK(rep.err == EINVAL && rfd == -1 && fcntl(fds[0], F_GETFD) == -1);
}

/* PRIV_FILES: a server started for a member only (never uid 0, never a
 * non-member), running as the member for good and not dumpable; what it
 * answers is what the member meets: its own files opened (a directory
 * hashed to the digest root gets), root's 0600 file EACCES, a missing
 * one ENOENT, a FIFO and a link refused without blocking; it ends when
 * its socket is closed. */
static int
files_start(uid_t uid, gid_t gid, int *s, pid_t *pid)
{
	union priv_msg m;
	struct priv_reply rep;
	int r = -1;
	hdr(&m, PRIV_FILES, sizeof(m.files));
	owner_one(&m.files.owner, uid, gid);
	priv_handle(&rules, &m, sizeof(m.files), NULL, 0, &rep, &r);
	*s = r;
	*pid = rep.pid;
	return rep.err;
}

static void
case_files(void)
{
	int s;
	pid_t pid;
	setup(NOTAGROUP);
	CHECK(files_start(0, 0, &s, &pid) == EINVAL, "uid 0");
	CHECK(files_start(NOBODY, NOGRP, &s, &pid) == EPERM, "a non-member");
	setup(NOGRP);
	CHECK(chmod(tmp, 0711) == 0);
	char mine[PATH_MAX], a[PATH_MAX + 8], sub[PATH_MAX + 8], b[PATH_MAX + 16];
	char secret[PATH_MAX], fifo[PATH_MAX], link[PATH_MAX], none[PATH_MAX];
	snprintf(mine, sizeof(mine), "%s/mine", tmp);
	snprintf(a, sizeof(a), "%s/a", mine);
	snprintf(sub, sizeof(sub), "%s/sub", mine);
	snprintf(b, sizeof(b), "%s/b", sub);
	snprintf(secret, sizeof(secret), "%s/secret", tmp);
	snprintf(fifo, sizeof(fifo), "%s/fifo", tmp);
	snprintf(link, sizeof(link), "%s/link", tmp);
	snprintf(none, sizeof(none), "%s/none", tmp);
	CHECK(mkdir(mine, 0700) == 0 && mkdir(sub, 0700) == 0 && mkfifo(fifo, 0600) == 0 &&
	    symlink(a, link) == 0);
	CHECK(plc_write_file_atomic(a, "hello\n", 6, 0600) == 0 &&
	    plc_write_file_atomic(b, "bee\n", 4, 0600) == 0 &&
	    plc_write_file_atomic(secret, "root's\n", 7, 0600) == 0 && chmod(secret, 0600) == 0);
	CHECK(chown(mine, NOBODY, NOGRP) == 0 && chown(sub, NOBODY, NOGRP) == 0 &&
	    chown(a, NOBODY, NOGRP) == 0 && chown(b, NOBODY, NOGRP) == 0 &&
	    chown(fifo, NOBODY, NOGRP) == 0 && chmod(a, 0600) == 0 && chmod(b, 0600) == 0);

	CHECK(files_start(NOBODY, NOGRP, &s, &pid) == 0 && s >= 0 && pid > 0);
	struct stat st;
	struct owner_files of;
	memset(&of, 0, sizeof(of));
	owner_files_use(&of, s);
	char *r = owner_files_realpath(&of, a);
	CHECK(r != NULL && strcmp(r, a) == 0);
	free(r);
	/* Once it answered: the member's ids for good; not dumpable (its /proc files root's). */
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	int uids = 0;
	while (f != NULL && fgets(line, sizeof(line), f))
		if (strncmp(line, "Uid:", 4) == 0)
			uids = strcmp(line, "Uid:\t65534\t65534\t65534\t65534\n") == 0;
	if (f != NULL)
		fclose(f);
	CHECK(uids, "the server runs as nobody, every id");
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	CHECK(stat(path, &st) == 0 && st.st_uid == 0, "the server is not dumpable");

	CHECK(owner_files_stat(&of, a, &st, 1) == 0 && st.st_size == 6 && st.st_uid == NOBODY);
	CHECK(owner_files_stat(&of, secret, &st, 1) == 0 && st.st_uid == 0, "stat: by x on tmp");
	CHECK(owner_files_stat(&of, none, &st, 1) == -1 && errno == ENOENT);
	CHECK(owner_files_stat(&of, link, &st, 1) == 0 && S_ISLNK(st.st_mode));
	CHECK(owner_files_stat(&of, link, &st, 0) == 0 && S_ISREG(st.st_mode) && st.st_size == 6);
	int fd = of.fs->openat(of.fs->arg, AT_FDCWD, a, 0, 0);
	char buf[16] = "";
	CHECK(fd >= 0 && read(fd, buf, sizeof(buf)) == 6 && memcmp(buf, "hello\n", 6) == 0);
	if (fd >= 0)
		close(fd);
	errno = 0;
	CHECK(of.fs->openat(of.fs->arg, AT_FDCWD, secret, 0, 0) == -1 && errno == EACCES,
	    "root's 0600 file: %s", strerror(errno));
	CHECK(of.fs->openat(of.fs->arg, AT_FDCWD, none, 0, 0) == -1 && errno == ENOENT);
	CHECK(of.fs->openat(of.fs->arg, AT_FDCWD, fifo, 0, 0) == -1 && errno == EINVAL, "a FIFO");
	CHECK(of.fs->openat(of.fs->arg, AT_FDCWD, link, 0, 0) == -1 && errno == ELOOP, "a link");
	CHECK(of.fs->openat(of.fs->arg, AT_FDCWD, mine, 0, 0) == -1, "a directory, not asked for");
	int dfd = of.fs->openat(of.fs->arg, AT_FDCWD, mine, 1, 0);
	CHECK(dfd >= 0);
	fd = of.fs->openat(of.fs->arg, dfd, "sub/b", 0, 1);
	CHECK(fd >= 0 && read(fd, buf, sizeof(buf)) == 4, "beneath");
	if (fd >= 0)
		close(fd);
	CHECK(of.fs->openat(of.fs->arg, dfd, "../secret", 0, 1) == -1, "above its directory");
	close(dfd);
	/* The same digest as root's own walk, through the server. */
	char h1[65], h2[65], h3[65];
	uint64_t n1 = 0, n2 = 0, n3 = 0;
	struct plc_hash_ctl c1 = { 0 }, c2 = { .fs = of.fs }, c3 = { .fs = of.fs };
	CHECK(plc_sha256_path_ctl(mine, h1, &n1, &c1) == 0, "%s", c1.why);
	CHECK(plc_sha256_path_ctl(mine, h2, &n2, &c2) == 0, "%s", c2.why);
	CHECK(strcmp(h1, h2) == 0 && n1 == 10 && n2 == 10);
	CHECK(plc_tree_bytes_ctl(mine, &n3, &c3) == 0 && n3 == 10, "%s", c3.why);
	CHECK(plc_sha256_path_ctl(secret, h3, &n3, &c3) == -1 && errno == EACCES);
	CHECK(plc_sha256_path_ctl(fifo, h3, &n3, &c3) == -1 && errno == EINVAL);
	/* Closed: the server ends. */
	owner_files_close(&of);
	int status = -1;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* Stopped by its owner: no wait past the timeout (made short here),
	 * EIO, and the socket shut, so a late reply answers nothing. */
	CHECK(files_start(NOBODY, NOGRP, &s, &pid) == 0 && s >= 0);
	owner_files_use(&of, s);
	CHECK(owner_files_stat(&of, a, &st, 1) == 0);
	struct timeval tv = { .tv_usec = 200000 };
	CHECK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	CHECK(kill(pid, SIGSTOP) == 0);
	errno = 0;
	CHECK(owner_files_stat(&of, a, &st, 1) == -1 && errno == EIO, "%s", strerror(errno));
	CHECK(kill(pid, SIGCONT) == 0);
	errno = 0;
	CHECK(owner_files_stat(&of, a, &st, 1) == -1 && errno == EIO, "after: %s",
	    strerror(errno));
	owner_files_close(&of);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status), "the server ended");
}

/* PRIV_RMTREE: gc's removal below state_dir/runs as root. Refused by
 * the decoder: absolute, one component, an empty one, "." or "..", a
 * stray byte after the path. Removed: a member's file in its 0750 work
 * directory, a directory artifact whole, a path already gone (done).
 * Not followed: a link on the way (ELOOP or ENOTDIR, the file it points
 * at kept), state_dir/runs itself a link; a link as the last name is
 * removed, not what it points at. */
static int
rmtree_of(const char *rel)
{
	union priv_msg m;
	hdr(&m, PRIV_RMTREE, sizeof(m.rmtree));
	snprintf(m.rmtree.path, sizeof(m.rmtree.path), "%s", rel);
	return handle(&m, sizeof(m.rmtree), -1, NULL);
}

static void
case_rmtree(void)
{
	setup(NOGRP);
	union priv_msg m;
	char why[160], p[PATH_MAX + 64], keep[PATH_MAX + 64], runs[PATH_MAX + 8];
	static const char *const bad[] = { "/etc/passwd", "r", "r//a", "r/./a", "r/../../x",
	    "../x/y", "r/j/", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		hdr(&m, PRIV_RMTREE, sizeof(m.rmtree));
		strcpy(m.rmtree.path, bad[i]);
		CHECK(priv_decode(&m, sizeof(m.rmtree), 0, why, sizeof(why)) == -1, "%s", bad[i]);
		CHECK(rmtree_of(bad[i]) == EINVAL, "%s handled", bad[i]);
	}
	hdr(&m, PRIV_RMTREE, sizeof(m.rmtree));
	strcpy(m.rmtree.path, "r/j/a");
	m.rmtree.path[10] = 'x';
	CHECK(priv_decode(&m, sizeof(m.rmtree), 0, why, sizeof(why)) == -1, "a stray byte");

	snprintf(runs, sizeof(runs), "%s/runs", rules.state_dir);
	snprintf(p, sizeof(p), "%s/r/j/work/d/e", runs);
	CHECK(plc_mkdirs(p, 0750) == 0);
	snprintf(p, sizeof(p), "%s/r/j/work/a.bin", runs);
	int fd = open(p, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/r/j/work/d/e/f", runs);
	CHECK((fd = open(p, O_WRONLY | O_CREAT, 0600)) >= 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/r/j/work", runs);
	CHECK(chown(p, NOBODY, NOGRP) == 0 && chmod(p, 0750) == 0);
	CHECK(rmtree_of("r/j/work/a.bin") == 0);
	snprintf(p, sizeof(p), "%s/r/j/work/a.bin", runs);
	CHECK(access(p, F_OK) == -1 && errno == ENOENT, "a.bin removed");
	CHECK(rmtree_of("r/j/work/d") == 0);
	snprintf(p, sizeof(p), "%s/r/j/work/d", runs);
	CHECK(access(p, F_OK) == -1 && errno == ENOENT, "d removed whole");
	CHECK(rmtree_of("r/j/work/gone") == 0 && rmtree_of("r/nojob/work/x") == 0, "gone: done");

	/* Outside the runs: a file the links point at. */
	snprintf(keep, sizeof(keep), "%s/outside", tmp);
	CHECK(mkdir(keep, 0755) == 0);
	snprintf(p, sizeof(p), "%s/outside/a.bin", tmp);
	CHECK((fd = open(p, O_WRONLY | O_CREAT, 0600)) >= 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/r/j/work/sub", runs);
	CHECK(symlink(keep, p) == 0);
	int e = rmtree_of("r/j/work/sub/a.bin");
	CHECK(e == ELOOP || e == ENOTDIR, "a link on the way: %s", strerror(e));
	snprintf(p, sizeof(p), "%s/outside/a.bin", tmp);
	CHECK(access(p, F_OK) == 0, "the file a link points at kept");
	CHECK(rmtree_of("r/j/work/sub") == 0);
	snprintf(p, sizeof(p), "%s/r/j/work/sub", runs);
	struct stat st;
	CHECK(lstat(p, &st) == -1 && errno == ENOENT, "the link itself removed");
	snprintf(p, sizeof(p), "%s/outside/a.bin", tmp);
	CHECK(access(p, F_OK) == 0, "not what it pointed at");

	/* state_dir/runs a link: nothing below it is reached. */
	snprintf(p, sizeof(p), "%s/runs.real", rules.state_dir);
	CHECK(rename(runs, p) == 0 && symlink(keep, runs) == 0);
	snprintf(p, sizeof(p), "%s/outside/r/j", tmp);
	CHECK(plc_mkdirs(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/outside/r/j/x", tmp);
	CHECK((fd = open(p, O_WRONLY | O_CREAT, 0600)) >= 0);
	close(fd);
	e = rmtree_of("r/j/x");
	CHECK(e == ELOOP || e == ENOTDIR, "runs a link: %s", strerror(e));
	CHECK(access(p, F_OK) == 0, "a file through runs, a link, kept");
}

/* PRIV_RMTREE in the parent's helpers (a real parent, priv_start()):
 * five removals asked for at once, each held in open(2) of its
 * directory by a fanotify permission event the case answers. Four run
 * in helpers (priv.c: PRIV_RMTREES), the fifth is refused at once,
 * EAGAIN, not done in the loop; a shim start is answered while the four
 * are held; released, the four are done and the fifth's tree is there. */
#define RM_HELD 4
static int fan = -1;
static volatile int fan_held, fan_release, fan_stop;
static volatile int rm_rc[RM_HELD], rm_done[RM_HELD];

static void *
fan_thread(void *arg)
{
	int pending[64], np = 0;
	char buf[4096] __attribute__((aligned(8)));
	while (!fan_stop) {
		if (fan_release)
			for (; np > 0; np--) {
				struct fanotify_response r = { .fd = pending[np - 1],
					.response = FAN_ALLOW };
				if (write(fan, &r, sizeof(r)) == -1)
					break;
				close(pending[np - 1]);
			}
		struct pollfd p = { .fd = fan, .events = POLLIN };
		if (poll(&p, 1, 50) <= 0)
			continue;
		ssize_t n = read(fan, buf, sizeof(buf));
		for (struct fanotify_event_metadata *e = (void *)buf; n > 0 && FAN_EVENT_OK(e, n);
		    e = FAN_EVENT_NEXT(e, n)) {
			if (!fan_release && np < 64) {
				pending[np++] = e->fd;
				fan_held++;
				continue;
			}
			struct fanotify_response r = { .fd = e->fd, .response = FAN_ALLOW };
			if (write(fan, &r, sizeof(r)) == -1)
				break;
			close(e->fd);
		}
	}
	return NULL;
}

static void *
rm_thread(void *arg)
{
	int k = (int)(intptr_t)arg;
	char rel[64], why[256];
	snprintf(rel, sizeof(rel), "r/j%d/d", k);
	rm_rc[k] = priv_rmtree(rel, why, sizeof(why)) == 0 ? 0 : errno;
	rm_done[k] = 1;
	return NULL;
}

static void
case_rmtree_helpers(void)
{
	char p[PATH_MAX + 64], why[256];
	setup(NOGRP);
	for (int k = 0; k <= RM_HELD; k++) {
		snprintf(p, sizeof(p), "%s/runs/r/j%d/d", rules.state_dir, k);
		CHECK(plc_mkdirs(p, 0750) == 0);
		snprintf(p, sizeof(p), "%s/runs/r/j%d/d/f", rules.state_dir, k);
		int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		CHECK(fd >= 0);
		close(fd);
	}
	if (!parent_start())
		return;
	if ((fan = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY)) == -1)
		UNIT_SKIP("fanotify: %s", strerror(errno));
	for (int k = 0; k <= RM_HELD; k++) {
		snprintf(p, sizeof(p), "%s/runs/r/j%d/d", rules.state_dir, k);
		CHECK(fanotify_mark(fan, FAN_MARK_ADD, FAN_OPEN_PERM | FAN_ONDIR, AT_FDCWD, p) == 0,
		    "%s: %s", p, strerror(errno));
	}
	pthread_t ft, th[RM_HELD];
	CHECK(pthread_create(&ft, NULL, fan_thread, NULL) == 0);
	for (int k = 0; k < RM_HELD; k++) {
		CHECK(pthread_create(&th[k], NULL, rm_thread, (void *)(intptr_t)k) == 0);
		for (int i = 0; i < 1000 && fan_held < k + 1; i++)
			usleep(10000);
		CHECK(fan_held == k + 1, "removal %d not held: %d held", k, fan_held);
	}
	/* The fifth: refused at once, its tree left. */
	double t0 = plc_mono_secs();
	errno = 0;
	CHECK(priv_rmtree("r/j4/d", why, sizeof(why)) == -1 && errno == EAGAIN,
	    "a fifth removal: %s (%s)", strerror(errno), why);
	CHECK(plc_mono_secs() - t0 < 5, "the fifth's refusal waited");
	/* The parent's loop is free. */
	pid_t pid;
	uint64_t start;
	int fd = priv_shim_start(rules.shim, "65534:65534:65534", NULL, &pid, &start);
	CHECK(fd >= 0, "a shim start while four removals are held: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
	int done = 0;
	for (int k = 0; k < RM_HELD; k++)
		done += rm_done[k];
	CHECK(done == 0 && fan_held == RM_HELD, "%d removals ended while held", done);
	fan_release = 1;
	for (int k = 0; k < RM_HELD; k++) {
		pthread_join(th[k], NULL);
		CHECK(rm_rc[k] == 0, "removal %d: %s", k, strerror(rm_rc[k]));
		snprintf(p, sizeof(p), "%s/runs/r/j%d/d", rules.state_dir, k);
		CHECK(access(p, F_OK) == -1 && errno == ENOENT, "%s removed", p);
	}
	snprintf(p, sizeof(p), "%s/runs/r/j4/d/f", rules.state_dir);
	CHECK(access(p, F_OK) == 0, "the fifth's tree left");
	fan_stop = 1;
	pthread_join(ft, NULL);
	close(fan);
}

/* PRIV_CGROUP: a memory cgroup for a member's probe. Refused by the
 * decoder: no size, one too small or too large, root's owner or a user of
 * uid 0, an unknown operation, the zero word, a name with a make, and a
 * removal of a name not the parent's pattern (a path, a dot, no number)
 * or with a size or an owner. Refused to a non-member. Made for a member
 * where this host lets root make a memory cgroup below its own: all of
 * it root's (a process of the member's cannot join it), the cap in
 * memory.max (v2) or memory.limit_in_bytes (v1). A shim start naming a
 * cgroup: refused by the decoder for a name not the parent's pattern or
 * root's own shim; refused by the parent for one it did not make (or
 * made and removed); for the one it made, the shim is in it when its
 * socket comes back. Then removed, empty. */
static int
cgroup_msg(union priv_msg *m, uint32_t op, uid_t uid, gid_t gid, int64_t bytes,
    const char *name)
{
	char why[160];
	hdr(m, PRIV_CGROUP, sizeof(m->cgroup));
	m->cgroup.op = op;
	if (uid != (uid_t)-1)
		owner_one(&m->cgroup.owner, uid, gid);
	m->cgroup.bytes = bytes;
	snprintf(m->cgroup.name, sizeof(m->cgroup.name), "%s", name);
	return priv_decode(m, sizeof(m->cgroup), 0, why, sizeof(why));
}

static void
case_cgroup(void)
{
	setup(NOGRP);
	union priv_msg m;
	struct priv_reply rep;
	int rfd;
	CHECK(cgroup_msg(&m, PRIV_CG_MAKE, NOBODY, NOGRP, 64 << 20, "") == PRIV_CGROUP);
	CHECK(cgroup_msg(&m, PRIV_CG_MAKE, NOBODY, NOGRP, 0, "") == -1, "no size");
	CHECK(cgroup_msg(&m, PRIV_CG_MAKE, NOBODY, NOGRP, PRIV_CG_MIN - 1, "") == -1, "small");
	CHECK(cgroup_msg(&m, PRIV_CG_MAKE, NOBODY, NOGRP, PRIV_CG_MAX + 1, "") == -1, "large");
	CHECK(cgroup_msg(&m, PRIV_CG_MAKE, NOBODY, NOGRP, -1, "") == -1, "negative");
	CHECK(cgroup_msg(&m, PRIV_CG_MAKE, 0, 0, 64 << 20, "") == -1, "uid 0");
	CHECK(cgroup_msg(&m, PRIV_CG_MAKE, (uid_t)-1, 0, 64 << 20, "") == -1, "no owner");
	cgroup_msg(&m, PRIV_CG_MAKE, (uid_t)-1, 0, 64 << 20, "");
	m.cgroup.owner.kind = PRIV_OWNER_ROOT;
	CHECK(priv_decode(&m, sizeof(m.cgroup), 0, rep.why, sizeof(rep.why)) == -1, "root's");
	CHECK(cgroup_msg(&m, PRIV_CG_MAKE, NOBODY, NOGRP, 64 << 20, "pipelined-probe-1-2") == -1,
	    "a name with a make");
	CHECK(cgroup_msg(&m, 2, NOBODY, NOGRP, 64 << 20, "") == -1, "op 2");
	cgroup_msg(&m, PRIV_CG_MAKE, NOBODY, NOGRP, 64 << 20, "");
	m.cgroup.zero = 1;
	CHECK(priv_decode(&m, sizeof(m.cgroup), 0, rep.why, sizeof(rep.why)) == -1, "zero");
	CHECK(cgroup_msg(&m, PRIV_CG_REMOVE, (uid_t)-1, 0, 0, "pipelined-probe-12-3") ==
	    PRIV_CGROUP);
	static const char *const bad[] = { "", "x", "pipelined-probe-", "pipelined-probe-1",
	    "pipelined-probe--1", "pipelined-probe-1-", "pipelined-probe-1-2/x",
	    "../pipelined-probe-1-2", "pipelined-probe-1-2-3", "pipelined-probe-1-x",
	    "pipelined-probe-12345678901-1", "/sys/fs/cgroup/memory" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(cgroup_msg(&m, PRIV_CG_REMOVE, (uid_t)-1, 0, 0, bad[i]) == -1, "%s", bad[i]);
	CHECK(cgroup_msg(&m, PRIV_CG_REMOVE, (uid_t)-1, 0, 1, "pipelined-probe-1-2") == -1,
	    "a removal with a size");
	CHECK(cgroup_msg(&m, PRIV_CG_REMOVE, NOBODY, NOGRP, 0, "pipelined-probe-1-2") == -1,
	    "a removal with an owner");

	cgroup_msg(&m, PRIV_CG_MAKE, 4242, NOTAGROUP, 64 << 20, "");
	priv_handle(&rules, &m, sizeof(m.cgroup), NULL, 0, &rep, &rfd);
	CHECK(rep.err == EPERM && rfd == -1, "a non-member: %s", strerror(rep.err));

	/* Can root make one here at all? */
	struct memcap probe;
	char why[1024];
	if (memcap_make_root(&probe, 64 << 20, why, sizeof(why)) == -1)
		UNIT_SKIP("no memory cgroup can be made here: %s", why);
	rmdir(probe.dir);

	cgroup_msg(&m, PRIV_CG_MAKE, NOBODY, NOGRP, 64 << 20, "");
	priv_handle(&rules, &m, sizeof(m.cgroup), NULL, 0, &rep, &rfd);
	CHECK(rep.err == 0, "a member's: %s", rep.why);
	char dir[sizeof(rep.why)], f[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", rep.why);
	struct stat st;
	CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0, "%s: root's", dir);
	snprintf(f, sizeof(f), "%s/cgroup.procs", dir);
	CHECK(stat(f, &st) == 0 && st.st_uid == 0, "cgroup.procs root's");
	snprintf(f, sizeof(f), "%s/memory.max", dir);
	if (access(f, F_OK) == -1)
		snprintf(f, sizeof(f), "%s/memory.limit_in_bytes", dir);
	char *cap = plc_read_file(f, NULL, 64);
	CHECK(cap != NULL && strtoll(cap, NULL, 10) == 64 << 20, "%s: %s", f, cap ? cap : "?");
	free(cap);
	/* The member cannot join it itself. */
	pid_t pid = fork();
	if (pid == 0) {
		char procs[PATH_MAX], me[32];
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
		snprintf(me, sizeof(me), "%d\n", (int)getpid());
		if (setgroups(0, NULL) == -1 || setgid(NOGRP) == -1 || setuid(NOBODY) == -1)
			_exit(2);
		int fd = open(procs, O_WRONLY);
		_exit(fd == -1 || write(fd, me, strlen(me)) == -1 ? 0 : 3);
	}
	int status;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the member did not join %s: status %d", dir, WEXITSTATUS(status));

	/* A shim start into a cgroup: a name not the parent's pattern, or
	 * root's own shim, refused by the decoder. */
	const char *leaf = strrchr(dir, '/') + 1;
	hdr(&m, PRIV_SHIM_START, sizeof(m.shim));
	owner_one(&m.shim.owner, NOBODY, NOGRP);
	snprintf(m.shim.cgroup, sizeof(m.shim.cgroup), "%s", leaf);
	CHECK(priv_decode(&m, sizeof(m.shim), 0, rep.why, sizeof(rep.why)) == PRIV_SHIM_START,
	    "%s", rep.why);
	snprintf(m.shim.cgroup, sizeof(m.shim.cgroup), "../%s", leaf);
	CHECK(priv_decode(&m, sizeof(m.shim), 0, rep.why, sizeof(rep.why)) == -1, "a path");
	hdr(&m, PRIV_SHIM_START, sizeof(m.shim));
	m.shim.owner.kind = PRIV_OWNER_ROOT;
	snprintf(m.shim.cgroup, sizeof(m.shim.cgroup), "%s", leaf);
	CHECK(priv_decode(&m, sizeof(m.shim), 0, rep.why, sizeof(rep.why)) == -1, "root's");
	/* One the parent did not make: refused, no shim. */
	hdr(&m, PRIV_SHIM_START, sizeof(m.shim));
	owner_one(&m.shim.owner, NOBODY, NOGRP);
	snprintf(m.shim.cgroup, sizeof(m.shim.cgroup), "pipelined-probe-%d-999999",
	    (int)getpid());
	priv_handle(&rules, &m, sizeof(m.shim), NULL, 0, &rep, &rfd);
	CHECK(rep.err == EPERM && rfd == -1 && strstr(rep.why, "not one this parent made"),
	    "not made: %s: %s", strerror(rep.err), rep.why);
	/* The one it made: the shim is in it once its socket is back. */
	memset(m.shim.cgroup, 0, sizeof(m.shim.cgroup));
	snprintf(m.shim.cgroup, sizeof(m.shim.cgroup), "%s", leaf);
	priv_handle(&rules, &m, sizeof(m.shim), NULL, 0, &rep, &rfd);
	CHECK(rep.err == 0 && rep.pid > 0 && rfd >= 0, "made: %s", rep.why);
	if (rep.err == 0 && rep.pid > 0) {
		char path[64], want[80];
		snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)rep.pid);
		snprintf(want, sizeof(want), "/%s\n", leaf);
		char *cg = plc_read_file(path, NULL, 65536);
		CHECK(cg != NULL && strstr(cg, want) != NULL, "the shim in %s: %s", leaf,
		    cg ? cg : "?");
		free(cg);
		snprintf(f, sizeof(f), "%s/cgroup.procs", dir);
		char *procs = plc_read_file(f, NULL, 65536);
		snprintf(want, sizeof(want), "%d\n", (int)rep.pid);
		CHECK(procs != NULL && (strncmp(procs, want, strlen(want)) == 0 ||
		    strstr(procs, want) != NULL), "%s lists the shim %d", f, (int)rep.pid);
		free(procs);
		close(rfd);
		waitpid(rep.pid, NULL, 0);
	}
	cgroup_msg(&m, PRIV_CG_REMOVE, (uid_t)-1, 0, 0, strrchr(dir, '/') + 1);
	int e = EBUSY;
	for (int i = 0; i < 50 && (e = handle(&m, sizeof(m.cgroup), -1, NULL)) == EBUSY; i++)
		usleep(100000);
	CHECK(e == 0, "removed: %s", strerror(e));
	CHECK(access(dir, F_OK) == -1 && errno == ENOENT, "%s gone", dir);
	CHECK(handle(&m, sizeof(m.cgroup), -1, NULL) == ENOENT, "gone: ENOENT");
	/* Removed: no shim starts in it any more. */
	hdr(&m, PRIV_SHIM_START, sizeof(m.shim));
	owner_one(&m.shim.owner, NOBODY, NOGRP);
	snprintf(m.shim.cgroup, sizeof(m.shim.cgroup), "%s", strrchr(dir, '/') + 1);
	priv_handle(&rules, &m, sizeof(m.shim), NULL, 0, &rep, &rfd);
	CHECK(rep.err == EPERM && rfd == -1, "removed: %s: %s", strerror(rep.err), rep.why);

	/* At most 64 of its own at once: the 65th refused, EAGAIN, until one
	 * is removed. */
	static char made[64][sizeof(rep.why)];
	int n = 0;
	for (; n < 64; n++) {
		cgroup_msg(&m, PRIV_CG_MAKE, NOBODY, NOGRP, 64 << 20, "");
		priv_handle(&rules, &m, sizeof(m.cgroup), NULL, 0, &rep, &rfd);
		if (rep.err != 0)
			break;
		snprintf(made[n], sizeof(made[n]), "%s", rep.why);
	}
	CHECK(n == 64, "64 made: %d, then %s", n, rep.why);
	cgroup_msg(&m, PRIV_CG_MAKE, NOBODY, NOGRP, 64 << 20, "");
	priv_handle(&rules, &m, sizeof(m.cgroup), NULL, 0, &rep, &rfd);
	CHECK(rep.err == EAGAIN && strstr(rep.why, "64 of the parent's already") != NULL,
	    "the 65th: %s: %s", strerror(rep.err), rep.why);
	for (int i = 0; i < n; i++) {
		cgroup_msg(&m, PRIV_CG_REMOVE, (uid_t)-1, 0, 0, strrchr(made[i], '/') + 1);
		CHECK(handle(&m, sizeof(m.cgroup), -1, NULL) == 0, "%s removed", made[i]);
	}
	cgroup_msg(&m, PRIV_CG_MAKE, NOBODY, NOGRP, 64 << 20, "");
	priv_handle(&rules, &m, sizeof(m.cgroup), NULL, 0, &rep, &rfd);
	CHECK(rep.err == 0, "one made again once they are removed: %s", rep.why);
	cgroup_msg(&m, PRIV_CG_REMOVE, (uid_t)-1, 0, 0, strrchr(rep.why, '/') + 1);
	CHECK(handle(&m, sizeof(m.cgroup), -1, NULL) == 0, "removed");
}

static const struct unit_case cases[] = {
	UNIT_CASE(decode),
	UNIT_CASE(shim_refused),
	UNIT_CASE(shim_member),
	UNIT_CASE(shim_root_vouched),
	UNIT_CASE(shim_many_groups),
	UNIT_CASE(signal_refused),
	UNIT_CASE(fchown),
	UNIT_CASE(daemon_user),
	UNIT_CASE(slurm),
	UNIT_CASE(slurm_root),
	UNIT_CASE_TIMEOUT(owners_bounded, 120),
	UNIT_CASE(slurm_slow),
	UNIT_CASE(check),
	UNIT_CASE(files_decode),
	UNIT_CASE(files),
	UNIT_CASE(rmtree),
	UNIT_CASE(rmtree_helpers),
	UNIT_CASE(cgroup),
	UNIT_END
};

int
main(int argc, char **argv)
{
	snprintf(top, sizeof(top), "/tmp/test_priv.XXXXXX");
	/* 0711: a case's own directory says who else may go below it. */
	if (geteuid() != 0 || mkdtemp(top) == NULL || chmod(top, 0711) == -1)
		top[0] = '\0';
	int rc = unit_main(argc, argv, cases);
	if (top[0] != '\0' && plc_rmtree_at(AT_FDCWD, top, 16) == -1)
		fprintf(stderr, "test_priv: removing %s: %s\n", top, strerror(errno));
	return rc;
}
