/* fuzz_priv.c: the privileged parent's decoder and handler (priv.c) on
 * arbitrary messages: the first byte is how many descriptors come with
 * it (/dev/null, up to 3), the rest the message. A message the decoder
 * takes has its type's exact length, the header's length, a zero word,
 * and its strings NUL-terminated in their fields; the handler answers
 * every message with the request's type (0 for a refused one) and closes
 * every descriptor it was given. The rules refuse every act (no group, no
 * job_user, nothing vouched for, a state directory that does not exist),
 * so the target starts, signals and changes nothing (a file server
 * included; a cgroup neither made nor removed: a parent that serves no
 * owner removes none). The same bytes go to the file server's decoder. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pld.h"
#include "server.h"
#include "priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct priv_rules r = {
		.group = (gid_t)-1, .admin_group = (gid_t)-1, .job_uid = (uid_t)-1,
		.daemon_uid = 0, .shim = "/nonexistent/pipeline-shim",
		.state_dir = "/nonexistent/priv-fuzz", .since = 1, .vouchfd = -1,
	};
	if (size < 1)
		return 0;
	int nfd = data[0] % 4, fds[3];
	for (int i = 0; i < nfd; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	/* A copy of its own size: a read past it is ASan's to see. */
	size_t n = size - 1;
	uint8_t *m = malloc(n ? n : 1);
	memcpy(m, data + 1, n);
	char why[160];
	int t = priv_decode(m, n, nfd, why, sizeof(why));
	if (t != -1) {
		struct priv_hdr h;
		memcpy(&h, m, sizeof(h));
		if (h.len != n || h.zero != 0 || (uint32_t)t != h.type)
			abort();
		if (t == PRIV_SIGNAL &&
		    memchr(((const struct priv_signal *)(void *)m)->rdir, '\0', PATH_MAX) == NULL)
			abort();
		if (t == PRIV_SCANCEL &&
		    memchr(((const struct priv_scancel *)(void *)m)->id, '\0', 32) == NULL)
			abort();
		if (t == PRIV_CGROUP &&
		    memchr(((const struct priv_cgroup *)(void *)m)->name, '\0', 64) == NULL)
			abort();
		if (t == PRIV_CHECK &&
		    memchr(((const struct priv_check *)(void *)m)->path, '\0', PATH_MAX) == NULL)
			abort();
	} else if (why[0] == '\0')
		abort();
	/* The same bytes as a file server's request: decoded only (the
	 * server's acts open files; the unit test drives them). */
	int op = pfs_decode(m, n, nfd, why, sizeof(why));
	if (op != -1 && (n != sizeof(struct pfs_req) ||
	    memchr(((const struct pfs_req *)(void *)m)->path, '\0', PATH_MAX) == NULL))
		abort();
	struct priv_reply rep;
	int rfd = -2;
	priv_handle(&r, m, n, fds, nfd, &rep, &rfd);
	if (rfd != -1 || (rep.err == 0 && t != PRIV_NOTIFY) || rep.h.type != (uint32_t)(t == -1 ? 0 : t) ||
	    rep.h.len != sizeof(rep))
		abort();
	for (int i = 0; i < nfd; i++)
		if (fcntl(fds[i], F_GETFD) != -1)
			abort();	/* the handler closes what it was given */
	free(m);
	return 0;
}
