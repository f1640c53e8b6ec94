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
# Why exec stays in the daemon (moved here from HACKING.md): with
# stage_process = all (PL_STAGE_PROCESS=all tests/bench/dag-bench.sh) a
# 1,000-job DAG of `true` pays an extra exec per job, at load 15 14-21x
# make -j2 against about 2x in the daemon, and 427 system calls a job
# against 148. Why one shim per run: an exec costs ~1 ms here (ld.so
# start-up, cpuid traps in a VM), and a shim per job cost more than the
# 1,000 jobs of `true` themselves.
#   N=1000 tests/bench/dag-bench.sh
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/tests/bench/dag-lib.sh"
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
	local shape=$1 f=$GEN/$2.mk
	{
		printf 'all:'; for i in $(seq 0 $((N - 1))); do printf ' j%d' "$i"; done; echo
		echo "j0:"; printf '\t@true\n'
		for i in $(seq 1 $((N - 1))); do
			if [ "$shape" = chain ]; then echo "j$i: j$((i - 1))"; else echo "j$i: j0"; fi
			printf '\t@true\n'
		done
		printf '.PHONY: all'; for i in $(seq 0 $((N - 1))); do printf ' j%d' "$i"; done; echo
	} > "$f"
	echo "$f"
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
	pl_conf "max_jobs = 2" "log_level = warn"
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
