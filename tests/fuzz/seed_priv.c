/* seed_priv.c: writes the priv fuzz target's seeds (tests/fuzz/corpus/priv/,
 * fuzz_priv.c's input: a byte for the number of descriptors, then the
 * message) from priv.h's own structs, so that a change of the messages'
 * layout (PRIV_NGROUPS, a field) is followed by running it again:
 *
 *   cc -D_GNU_SOURCE -Idaemon/lib -Idaemon/server -Iinclude -Iplugins/lib/io \
 *       -I/usr/include/cjson -o /tmp/seed_priv \
 *       tests/fuzz/seed_priv.c && /tmp/seed_priv tests/fuzz/corpus/priv
 *
 * Every seed is a message the decoder takes; "garbage" (random bytes) is
 * not written here. Not built by make: it writes files of the tree. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "priv.h"

static const char *dir;
static int bad;

static void
seed(const char *name, int nfd, union priv_msg *m, uint32_t type, uint32_t id, size_t len)
{
	char path[4096];
	unsigned char n = (unsigned char)nfd;
	m->h.type = type;
	m->h.len = (uint32_t)len;
	m->h.id = id;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (f == NULL || fwrite(&n, 1, 1, f) != 1 || fwrite(m, len, 1, f) != 1 || fclose(f) != 0) {
		perror(path);
		bad = 1;
	}
	memset(m, 0, sizeof(*m));
}

static void
owner(struct priv_owner *o, uint32_t uid, uint32_t gid, uint32_t group)
{
	o->uid = uid;
	o->gid = gid;
	o->ngroups = 1;
	o->groups[0] = group;
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: seed_priv DIR\n");
		return 2;
	}
	dir = argv[1];
	union priv_msg m;
	memset(&m, 0, sizeof(m));
	owner(&m.shim.owner, 1000, 1000, 995);
	seed("shim-start", 0, &m, PRIV_SHIM_START, 1, sizeof(m.shim));
	m.shim.owner.kind = PRIV_OWNER_ROOT;
	seed("shim-start-root", 0, &m, PRIV_SHIM_START, 1, sizeof(m.shim));
	owner(&m.shim.owner, 1000, 1000, 995);
	strcpy(m.shim.cgroup, "pipelined-probe-4242-1");
	seed("shim-start-cgroup", 0, &m, PRIV_SHIM_START, 1, sizeof(m.shim));
	static const char rdir[] = "/var/lib/pipelined/runs/r/j/attempt-1/.shim/main";
	m.sig.mode = PRIV_SIG_CHILD;
	m.sig.sig = SIGTERM;
	memcpy(m.sig.rdir, rdir, sizeof(rdir));
	seed("signal", 0, &m, PRIV_SIGNAL, 1, sizeof(m.sig));
	m.sig.mode = PRIV_SIG_ORPHANS;
	m.sig.sig = SIGKILL;
	memcpy(m.sig.rdir, rdir, sizeof(rdir));
	seed("signal-orphans", 0, &m, PRIV_SIGNAL, 1, sizeof(m.sig));
	m.chown.uid = 1000;
	m.chown.gid = 1000;
	m.chown.count = 1;
	seed("fchown", 1, &m, PRIV_FCHOWN, 1, sizeof(m.chown));
	/* A job's work directory, context file and process directory at once. */
	m.chown.uid = 1000;
	m.chown.gid = 1000;
	m.chown.count = 3;
	seed("fchown-3", 3, &m, PRIV_FCHOWN, 1, sizeof(m.chown));
	snprintf(m.notify.text, sizeof(m.notify.text), "STATUS=3 jobs running, 2 plugin stages");
	seed("notify", 0, &m, PRIV_NOTIFY, 1, sizeof(m.notify));
	seed("vouch", 1, &m, PRIV_VOUCH, 1, sizeof(m.vouch));
	owner(&m.sbatch.owner, 65534, 65534, 65534);
	seed("sbatch", 1, &m, PRIV_SBATCH, 1, sizeof(m.sbatch));
	owner(&m.scancel.owner, 65534, 65534, 65534);
	snprintf(m.scancel.id, sizeof(m.scancel.id), "4242");
	seed("scancel", 0, &m, PRIV_SCANCEL, 2, sizeof(m.scancel));
	owner(&m.scancel.owner, 65534, 65534, 65534);
	m.scancel.sig = SIGUSR1;
	snprintf(m.scancel.id, sizeof(m.scancel.id), "4242");
	seed("scancel-usr1", 0, &m, PRIV_SCANCEL, 3, sizeof(m.scancel));
	/* Root's own runs' Slurm jobs: the owner root's, all ids 0. */
	m.sbatch.owner.kind = PRIV_OWNER_ROOT;
	seed("sbatch-root", 1, &m, PRIV_SBATCH, 4, sizeof(m.sbatch));
	m.scancel.owner.kind = PRIV_OWNER_ROOT;
	snprintf(m.scancel.id, sizeof(m.scancel.id), "4243");
	seed("scancel-root", 0, &m, PRIV_SCANCEL, 5, sizeof(m.scancel));
	snprintf(m.check.path, sizeof(m.check.path), "/home/ann/specs/v18.ini");
	seed("check", 2, &m, PRIV_CHECK, 4, sizeof(m.check));
	owner(&m.files.owner, 65534, 65534, 65534);
	seed("files", 0, &m, PRIV_FILES, 6, sizeof(m.files));
	m.files.owner.kind = PRIV_OWNER_ROOT;
	seed("files-root", 0, &m, PRIV_FILES, 7, sizeof(m.files));
	memset(&m, 0, sizeof(m));
	snprintf(m.rmtree.path, sizeof(m.rmtree.path), "v18/train/work/ckpt");
	seed("rmtree", 0, &m, PRIV_RMTREE, 8, sizeof(m.rmtree));
	owner(&m.cgroup.owner, 65534, 65534, 65534);
	m.cgroup.op = PRIV_CG_MAKE;
	m.cgroup.bytes = 12LL << 30;
	seed("cgroup", 0, &m, PRIV_CGROUP, 9, sizeof(m.cgroup));
	m.cgroup.op = PRIV_CG_REMOVE;
	snprintf(m.cgroup.name, sizeof(m.cgroup.name), "pipelined-probe-4242-1");
	seed("cgroup-remove", 0, &m, PRIV_CGROUP, 10, sizeof(m.cgroup));
	return bad;
}
