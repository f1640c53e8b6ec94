/*
 * mapguard.c: reading a mapped file without dying of SIGBUS (plio.h).
 *
 * A page of a file mapping that lies past the file's end (the file was
 * truncated or overwritten after it was mapped) or that the disk cannot
 * read raises SIGBUS at the instruction that touches it. The default
 * action kills the process, and in pipelined that is every job and the
 * control socket, for one bad input. A thread that is about to touch a
 * mapping sets a guard (a sigjmp_buf of its own); the handler, installed
 * once for the process, jumps back to it, and the caller fails the one
 * job with a message naming the file.
 *
 * Neither pipelined (libuv installs handlers only for the signals it is
 * asked about: TERM, INT, HUP) nor pipelinectl handles SIGBUS, so the
 * handler is normally the only one. Each plugin links its own copy of
 * this file (hidden visibility, RTLD_LOCAL), so several copies may each
 * install their handler, with their own guard variables: a handler that
 * finds no guard of its copy passes the signal to the handler that was
 * installed before it, and the first one, finding none either, restores
 * the default action; so a fault in a guarded thread of any copy reaches
 * its guard, and a fault nobody guards still kills the process with its
 * core, as before.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>

#include "plio.h"

/* The guard of this thread, read by the handler. initial-exec: a plugin
 * is dlopen'ed, and its thread-local variables would otherwise be
 * allocated on first use (__tls_get_addr, malloc), which a signal
 * handler must not do; initial-exec ones live in the static TLS block,
 * allocated with the thread. */
#define PLC_TLS __thread __attribute__((tls_model("initial-exec")))
static PLC_TLS sigjmp_buf *guard;
static PLC_TLS int unblocked;       /* SIGBUS was unblocked in this thread */

static struct sigaction previous;   /* the action before ours */
static int ready;                   /* __atomic: previous is written */
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Async-signal-safe: reads thread-locals, calls sigaction(2), raise(3)
 * and the previous handler. */
static void
on_sigbus(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *jb = guard;

	/* A fault (si_code > 0), not a SIGBUS sent with kill(2). */
	if (jb != NULL && si != NULL && si->si_code > 0) {
		guard = NULL;
		/* The jump restores the mask of sigsetjmp(jb, 1): if SIGBUS
		 * was blocked then, the next plc_guard_begin() unblocks it. */
		unblocked = 0;
		siglongjmp(*jb, 1);
	}
	/* A fault of another copy's guard, in the moment when this copy's
	 * handler is in place and sigaction(2) has not yet written previous
	 * in the installing thread. */
	while (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE))
		;
	if (previous.sa_flags & SA_SIGINFO) {
		previous.sa_sigaction(sig, si, uc);
		return;
	}
	if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
		previous.sa_handler(sig);
		return;
	}
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGBUS, &dfl, NULL);
	/* A fault happens again when the handler returns, now under the
	 * default action; a signal that was sent is sent again (it stays
	 * pending until the handler returns). */
	if (si == NULL || si->si_code <= 0)
		raise(SIGBUS);
}

static void
install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	/* One call: the swap is atomic, so copies installing at once in
	 * two threads still chain. */
	sigaction(SIGBUS, &sa, &previous);
	__atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
}

void
plc_guard_begin(sigjmp_buf *jb)
{
	pthread_once(&once, install);
	/* A SIGBUS that a thread blocks is not delivered to the handler:
	 * the kernel kills the process. */
	if (!unblocked) {
		sigset_t s;
		sigemptyset(&s);
		sigaddset(&s, SIGBUS);
		pthread_sigmask(SIG_UNBLOCK, &s, NULL);
		unblocked = 1;
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	guard = jb;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

void
plc_guard_end(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	guard = NULL;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}
