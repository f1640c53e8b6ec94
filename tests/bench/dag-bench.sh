#!/bin/bash
# dag-bench.sh: DAG overhead. 1,000 exec jobs of `true`, as a chain and as
# a fan-out, through pipelined (max_jobs = 2) and through an equivalent
# Makefile run with make -j2, in the same run; prints jobs/s for each and
# the ratio pipelined/make (target: within 2x of make): the medians of R
# alternated runs (make, pipelined, make, ...), and the range of the runs'
# ratios, since one run on a shared two-core machine varies by 20%.
#
# pipelined keeps per-job state on disk (a job directory, its work and
# process directories, the job log, the shim's records: about seven inode
# creations per job), make none, so the file system under the state
# directory matters. The run is made twice for pipelined: with the state
# directory on the machine's /tmp, and, when run as root with mkfs.ext4 and
# a loop device available, on a freshly made ext4 with its default journal
# (what /var/lib usually is). On an ext4 mounted without a journal (this
# project's CI machine), the kernel skips every inode freed in the last
# dirty_expire_centisecs (read as seconds: 3000 s) when it allocates one
# (ialloc.c: recently_deleted), so creating a file gets slower the more the
# machine deleted lately: the /tmp figure varies with what ran before.
# Last, one fan-out run under strace -c gives the system calls per job,
# a figure the machine's load does not move.
#
# Figures (1,000 jobs, fresh journaled ext4, make and three builds of the
# daemon alternated in each of R runs: 79ee2f6 before the O_NOFOLLOW
# walk, 08e52d1 with it, and the run directory held open; medians, the
# range of the runs' ratios in brackets; the machine shared, load 5-14):
#   chain   79ee2f6 1.88x [1.23-2.35]  08e52d1 2.42x [1.16-4.79]  now 2.30x [1.21-2.99]  (R=5)
#   chain   79ee2f6 1.92x [1.39-4.28]  08e52d1 2.34x [1.66-4.55]  now 2.20x [1.53-3.85]  (R=9)
#   fan-out 79ee2f6 1.93x [1.56-2.99]  08e52d1 2.63x [1.95-3.44]  now 2.57x [1.82-3.76]  (R=5)
# The daemon's system calls per job (strace -f, fan-out, sched_yield, which
# libuv's uv_async_send spins on, left out): 57.6 at 79ee2f6, 86.1 at
# 08e52d1, 62.7 now; its shim's 27.9 then, 31.9 since (the child's start
# time read for shim.json, the log's checks). The part of the slow-down
# that the system calls do not explain is not found yet. After the
# architecture step (no global, the scheduler's state in sched.c), with
# nothing else running (R=5, load 2 from the bench itself): fresh ext4
# chain 1.65x [1.65-1.73], fan-out 2.04x [1.93-2.25]; /tmp chain 1.98x,
# fan-out 1.72x; 141.9 system calls per job against make's 191.1.
# Privilege separation (stages of other users' runs in pipeline-stage;
# exec, PL_STAGE_SPAWN_ONLY, stays in the daemon), measured against the
# build before it (e752f18) in the same session, alternated base, now,
# base, now, R=3, the machine otherwise idle: fresh ext4 chain 2.16x,
# 2.20x before and 2.15x, 2.24x after; fan-out 2.74x, 2.69x before and
# 3.09x, 2.78x after; 140.6 system calls per job against make's 189.7.
# (/tmp drifted from 2.8x to 4.7x over the four runs on both builds, the
# recently-deleted inode effect above.) Both builds are above the 2x of
# the earlier measurement on this day's machine.
# At the privilege separation step (both shapes above 2x of make): where
# a job's time goes, by perf record -g of the daemon on the chain, fresh
# ext4: the daemon's threads used 0.69 ms of CPU a job (perf sched
# timehist: the job thread), the run's shim 0.31 ms, `true` ~0.5 ms; of
# the daemon's, ~70% in the kernel: the four mkdirs of a job (its
# directory, work, attempt-N, the process's; ext4 allocates a block for
# each) ~10%, SQLite ~12% (one commit a job, in WAL with
# synchronous=NORMAL: no fsync per commit, 19 fdatasyncs of checkpoints
# in 1,000 jobs), and on the chain the scheduling pass's own loop over
# every open job (all 999 others) for each job's end, 3% of the samples,
# touching a struct sjob of over 8 KiB each. Fixed:
# a pass visits only the jobs that may start (ready bits, sched.c), a
# job's directories are made on its own thread outside the scheduler's
# and the store's locks, struct sjob lost 8 KiB of path buffers, `after`
# is resolved through one hash map, and an attempt's deadline goes in
# with its start (one UPDATE less). Durability unchanged: every state
# change still commits before it is announced and before the process
# starts. Measured with tests/bench/dag-compare.sh (base = c8d3b0a,
# now = this change; make, base, now alternated, the order of the two
# builds reversed every other round; fresh ext4), on a machine shared
# with six other sessions: load 20-30 on its 2 cores throughout, so the
# wall-clock ratios are the load's more than the daemon's; the daemon's
# CPU per job is the figure the load moves least:
#   chain   R=7, load 20-25: base median 4.41x [3.05-5.18], now 3.48x [2.89-5.24];
#           CPU 0.85 ms/job base (median, 0.79-0.94), now 0.77 (0.73-0.80), now < base in 7 of 7
#   chain   R=5, load 25-30: base 3.67x [2.49-5.23], now 3.93x [2.18-6.06];
#           CPU 0.84 base (0.77-0.89), now 0.75 (0.71-0.79), now < base in 5 of 5
#   fan-out R=4, load 28-29: base 4.91x [2.90-5.41], now 4.54x [2.83-5.43];
#           CPU 0.76 base (0.75-0.77), now 0.74 (0.73-0.74)
#   fan-out R=2, load 22-23: base 2.66x [2.04-3.28], now 3.07x [2.53-3.60];
#           CPU base 0.78, 0.81, now 0.80, 0.83
# (the second session's script ended without a word in its fifth fan-out
# round: set -e, most likely a run that did not succeed, not confirmed,
# its state went with the file system; dag-compare.sh now says why a run
# did not succeed and goes on). So the chain's daemon costs 9-11% less CPU a job;
# the fan-out's, where a pass never scanned (it stops at max_jobs), is
# unchanged within the noise. System calls per job (strace -f -c of the
# daemon's threads and all they start, N=300): chain 144.8 base, 144.1
# now; fan-out 154.0, 155.5: the change is in user time (the pass's scan,
# one statement), not in what the kernel is asked. Whether either shape
# is within 2x of make on a quiet machine is not measured this session:
# at this load make itself ran 2-5x slower than alone, and no run was
# quiet. What is left per job is mostly the file system (seven inode
# creations, four of them directories) and the hops between processes
# (job thread -> shim -> job -> shim -> job thread, against make's
# make -> job -> make), each a wake-up that waits for a CPU under load.
# Quiet at last (2026-12-04, a faster 2-core machine, nothing else
# running), dag-bench.sh R=5: chain 1.58x make -j2 on /tmp (pairs
# 1.55-1.60x), 1.55x on fresh ext4 (1.44-1.58x); fan-out 1.77x on /tmp
# (1.71-1.81x), 1.85x on ext4 (1.76-1.95x): within the 2x target in every
# pair; 139.7 system calls a job against make's 191.1. The cost of the
# privilege separation, dag-compare.sh R=5 against e752f18 (the build
# before it), fresh ext4: chain 1.53x before, 1.49x after; fan-out 1.82x
# before, 1.84x after (1.01x); the daemon's CPU 0.31-0.37 ms a job on
# both.
# The privileged parent (a daemon with group set split in two: the
# parent starts the runs' shims; a member's work and process directories
# are given to the member through it, two round trips a job),
# BENCH_CONF="group = plsubmit" dag-compare.sh R=5 against 9526054 (the
# build before it), fresh ext4, load 7-9: root's runs chain 2.18x make
# before, 2.00x after, fan-out 2.78x before, 1.98x after, the daemon's
# CPU 0.51-0.66 ms a job before, 0.48-0.66 after; a member's runs
# (BENCH_MEMBER=1) chain 1.52x before, 1.61x after (1.06), fan-out 2.50x
# before, 2.26x after, the CPU of the daemon and its parent 0.60 ms a job
# before, 0.69 after for the chain (medians; 0.70 and 0.76 for the
# fan-out): the round trips cost about 0.07 ms a job of CPU.
# The root boundary's next steps (root's stages out of a split daemon,
# a member's spec files checked by a process of the member's, an owner's
# files read through a file server of the owner's), BENCH_CONF="group =
# plsubmit" BENCH_MEMBER=1 dag-compare.sh R=3 against 702cb7f (the build
# before them), fresh ext4, load 1.2-1.5: chain 2.73x make before, 2.95x
# after (1.08), fan-out 4.04x before, 3.82x after (0.95); the daemon's
# CPU 0.64-1.00 ms a job before, 0.74-1.03 after. The first cut asked
# the parent for a file server for every job's reuse decision (a fork of
# the parent a job, to read the plugin's digest as the owner): 0.4 ms a
# job more, chain 1.85x before against 4.05x; the code's digests are the
# daemon's own now and a server is started at its first request. With
# the daemon process under a user of its own as well (BENCH_CONF="group
# = plsubmit;user = _pipelined", the same session): chain 3.50x, fan-out
# 4.79x, the daemon's CPU 1.17-1.27 ms a job: each job's events file,
# the member's, is read through a file server of the member's (a fork a
# job): about 20% over the split daemon that stays root, above the 10%
# the split may cost; user is not the default yet.
# Why exec stays in the daemon (moved here from HACKING.md): with
# stage_process = all (PL_STAGE_PROCESS=all tests/bench/dag-bench.sh) a
# 1,000-job DAG of `true` pays an extra exec per job, at load 15 14-21x
# make -j2 against about 2x in the daemon, and 427 system calls a job
# against 148. Why one shim per run: an exec costs ~1 ms here (ld.so
# start-up, cpuid traps in a VM), and a shim per job cost more than the
# 1,000 jobs of `true` themselves.
#   N=1000 tests/bench/dag-bench.sh
#   BENCH_CONF="group = plsubmit" tests/bench/dag-bench.sh   (multi-user: the
#                                   privileged parent; root submits)
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/tests/lib/dag_bench.sh"
N=${N:-1000}
R=${R:-5}       # runs of each side, alternated; medians reported
GEN=$(mktemp -d /tmp/dagbench-gen.XXXXXX)
MNT=""
cleanup() {
	[ -n "$MNT" ] && { umount "$MNT"; rm -rf "$MNT" "$MNT.img"; }
	rm -rf "$GEN"
}
trap cleanup EXIT
gen_spec() {  # shape name
	dag_spec "$1" "$2" true "$N" >"$GEN/$2.ini"
	echo "$GEN/$2.ini"
}
gen_make() {
	dag_makefile "$1" "$N" >"$GEN/$2.mk"
	echo "$GEN/$2.mk"
}
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{print b-a}'; }

# A journaled ext4 for the second pipelined run, when this machine can.
if [ "$(id -u)" = 0 ] && command -v mkfs.ext4 >/dev/null && command -v losetup >/dev/null; then
	MNT=$(mktemp -d /var/tmp/dagbench-ext4.XXXXXX)
	if ! { truncate -s 2G "$MNT.img" && mkfs.ext4 -q -F "$MNT.img" &&
	    mount -o loop "$MNT.img" "$MNT"; } 2>/dev/null; then
		rm -rf "$MNT" "$MNT.img"; MNT=""
	fi
fi

for shape in chain fanout; do
	gen_spec $shape "$shape" >/dev/null
	gen_make $shape "$shape" >/dev/null
done
for base in /tmp ${MNT:+"$MNT"}; do
	export TEST_TMP=$(mktemp -d "$base/dagbench.XXXXXX")
	. "$TOP/tests/lib.sh"
	trap 'pl_kill9 2>/dev/null || true; cleanup' EXIT   # lib.sh sets its own
	# BENCH_CONF: more daemon lines, ';'-separated ("group = plsubmit":
	# the daemon split in two, its privileged parent starting the shims).
	IFS=';' read -r -a extra <<< "${BENCH_CONF:-}"
	pl_conf "max_jobs = 2" "log_level = warn" ${extra[@]+"${extra[@]}"}
	pl_start
	where=$(df --output=fstype "$TEST_TMP" | tail -1)
	[ "$base" = /tmp ] && where="/tmp, $where" || where="fresh ext4 with journal"
	for shape in chain fanout; do
		ms="" ps=""
		for k in $(seq 1 "$R"); do
			# make right before pipelined: the same conditions for both.
			t0=$(now); make -s -j2 -f "$GEN/$shape.mk" >/dev/null; t1=$(now)
			ms="$ms $(secs "$t0" "$t1")"
			t0=$(now)
			pctl submit --name "$shape-$k" "$GEN/$shape.ini" >/dev/null
			pctl watch "$shape-$k" --plain >/dev/null
			t1=$(now)
			ps="$ps $(secs "$t0" "$t1")"
		done
		# Medians of R alternated pairs, and the range of the pairs' ratios.
		awk -v n="$N" -v s="$shape" -v ms="$ms" -v ps="$ps" -v w="$where" '
		function med(a, k,   t, i, j) {
			for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
				if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
			return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
		}
		BEGIN{
			k = split(ms, M); split(ps, P)
			lo = 1e9; hi = 0
			for (i = 1; i <= k; i++) { r = P[i] / M[i]; if (r < lo) lo = r; if (r > hi) hi = r }
			m = med(M, k); p = med(P, k)
			printf "%-7s %d jobs: make -j2 %.2fs (%.0f jobs/s), pipelined %.2fs (%.0f jobs/s), ratio %.2fx (pairs %.2f-%.2fx, %d runs)  [state on %s]\n",
			    s, n, m, n/m, p, n/p, p/m, lo, hi, k, w }'
	done
	# System calls per job, which the machine's load does not change:
	# one more fan-out run with strace -c following the daemon's threads
	# and everything it starts (its run shim, the jobs), against make's
	# tree the same way.
	if [ "$base" = /tmp ] && command -v strace >/dev/null; then
		strace -qq -f -c -o "$GEN/make.sc" make -s -j2 -f "$GEN/fanout.mk" >/dev/null
		strace -qq -f -c -o "$GEN/pl.sc" $(ls /proc/"$PL_PID"/task | sed 's/^/-p /') &
		sp=$!
		sleep 1   # attached
		pctl submit --name fanout-strace "$GEN/fanout.ini" >/dev/null
		pctl watch fanout-strace --plain >/dev/null
		kill -INT "$sp"; wait "$sp" || true
		calls() { awk '$NF == "total" { print $4 }' "$1"; }
		awk -v n="$N" -v m="$(calls "$GEN/make.sc")" -v p="$(calls "$GEN/pl.sc")" 'BEGIN{
			printf "fanout  %d jobs: system calls per job (strace -f -c): make -j2 %.1f, pipelined with its shim and jobs %.1f, ratio %.2fx\n", n, m/n, p/n, p/m }'
	fi
	pl_stop
	rm -rf "$TEST_TMP"
done
# The floor under the per-job cost: the same `true` jobs started through the
# run shim alone, without the daemon (shim-floor.py), against make.
BASE=${MNT:-/tmp} /usr/bin/python3 "$TOP/tests/bench/shim-floor.py"
BASE=${MNT:-/tmp} J=1 /usr/bin/python3 "$TOP/tests/bench/shim-floor.py"
