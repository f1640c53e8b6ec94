#!/bin/bash
# dag-compare.sh TOP [TOP...]: two or more builds of pipelined against
# make -j2 on the DAG of dag-bench.sh (N `true` jobs, a chain and a
# fan-out, max_jobs = 2), alternated in the same session: each of R rounds
# runs make, then every build (the builds' order reversed every other
# round, so that none always runs right after make). Each TOP is a built
# tree (daemon/pipelined, daemon/pipeline-shim, plugins/); a build to
# compare against is made with `git worktree add DIR REV && make -C DIR`.
# Every daemon keeps its state on one freshly made ext4 with its default
# journal (root, mkfs.ext4 and a loop device needed), as dag-bench.sh's
# second run does. Prints, per round, make's time, each build's time and
# ratio to make, and the CPU its daemon used per job (its own threads,
# from /proc/PID/stat: what the machine's load moves least), with the
# load average; then, per shape and build, the median ratio and the range.
#   R=9 tests/bench/dag-compare.sh /path/to/base "$PWD"
#   BENCH_CONF="group = plsubmit" R=5 tests/bench/dag-compare.sh BASE "$PWD"
#                                   (multi-user daemons: root's runs;
#                                   BENCH_MEMBER=1 too: nobody's, a member's)
#   BENCH_CONF="group = plsubmit;user = _pipelined" BENCH_CONF_2="group = plsubmit" \
#       BENCH_MEMBER=1 tests/bench/dag-compare.sh "$PWD" "$PWD"
#                                   (BENCH_CONF_K: build K's lines instead:
#                                   one build, two configurations)
#   BENCH_SPLIT_1=0 R=5 tests/bench/dag-compare.sh "$PWD" "$PWD"
#                                   (the split's cost: build 1 a daemon
#                                   root alone, one process, build 2 the
#                                   tests' default as root, split, its
#                                   daemon process _pipelined: root's runs;
#                                   BENCH_SPLIT_K is pl_conf's PL_SPLIT)
# Again at efe8dc4 (R=9, load 0.7-1.8): chain 2.16x alone, 2.16x split
# (per round, median 1.031), fanout 2.67x and 2.69x (1.027; its ninth
# round lost to a full image, since made larger).
# Measured (2026-12-07, dadd651, quiet 2 cores, load 0.1-0.6), R=9, the
# split's cost: chain median 2.26x make -j2 root alone, 2.23x split
# (0.99); fanout 2.82x and 2.97x (1.05); the daemon's CPU 0.63-0.90
# ms/job alone, 0.64-0.93 split (the parent's not counted: it acts
# once a run for root's runs, its shim).
# A member's runs before and after the split (2026-12-07, quiet 2 cores,
# load 0.3-1.4, R=9, BENCH_MEMBER=1 BENCH_CONF="group = plsubmit"; build
# 1 50fd632^, the last commit before the privileged parent, build 2 this
# tree, whose daemon process is _pipelined): at 8727923 chain 2.19x make
# -j2 before, 2.46x after (1.12), fanout 2.57x and 2.99x (1.16): three
# round trips a job (two PRIV_FCHOWN, the events file through the
# member's file server) and STATUS= to the parent on the loop thread.
# With one PRIV_FCHOWN a job, the events file the daemon made held open,
# and no STATUS= without systemd: chain 2.14x and 2.30x (1.075; per
# round, median 1.078, range 1.05-1.15), fanout 2.65x and 2.90x (1.094;
# per round 1.065, range 0.93-1.14); the daemon's CPU 0.54-0.74 ms/job
# before, 0.62-0.83 after (the parent's counted).
set -eu
[ $# -ge 1 ] || { echo "usage: $0 TOP [TOP...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$0: needs root (a loop-mounted ext4)" >&2; exit 77; }
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/dag_bench.sh"
N=${N:-1000}
R=${R:-5}
W=$(mktemp -d /var/tmp/dagcompare.XXXXXX)
MNT=$W/mnt
PIDS=""
cleanup() {
	for p in $PIDS; do kill -TERM "$p" 2>/dev/null || true; done
	for p in $PIDS; do wait "$p" 2>/dev/null || true; done
	mountpoint -q "$MNT" && umount "$MNT"
	rm -rf "$W"
}
trap cleanup EXIT
# BENCH_MEMBER=1: the runs submitted by nobody as a member of plsubmit
# (with BENCH_CONF="group = plsubmit"): their work and process
# directories given to the member, through the parent when split.
AS=""
# Searchable: a split daemon's daemon process (_pipelined, the tests'
# default as root) reaches its state directory below it.
chmod 0711 "$W"
if [ -n "${BENCH_MEMBER:-}" ]; then
	AS="setpriv --reuid=nobody --regid=nogroup --groups=$(getent group plsubmit | cut -d: -f3)"
	chmod 0755 "$W"
fi
mkdir "$MNT"
# Inodes for every round's runs of every build (about 10 a job, the
# events file the daemon makes included: R rounds x 2 shapes x builds x
# N jobs), not the default ratio's; and blocks (six directories and
# three small files a job, 4 KiB each: 2 GB ran out at R=9 with two
# builds).
truncate -s 6G "$W/img"
mkfs.ext4 -q -F -N $(( (R * 2 * $# * N * 12) + 65536 )) "$W/img"
mount -o loop "$W/img" "$MNT"

for shape in chain fanout; do
	dag_spec "$shape" "$shape" true "$N" >"$W/$shape.ini"
	dag_makefile "$shape" "$N" >"$W/$shape.mk"
done

k=0
for top in "$@"; do
	k=$((k + 1))
	T=$MNT/d$k
	mkdir -p "$T"
	# The tests' configuration for this build (lib.sh, in a subshell:
	# its globals and its EXIT trap stay there), as dag-bench.sh has it.
	# BENCH_CONF: more daemon lines, ';'-separated ("group = plsubmit":
	# a daemon split in two, its privileged parent starting the shims);
	# BENCH_CONF_K, where set, build K's instead.
	(TOP=$top TEST_TMP=$T; . "$HERE/../lib.sh"; trap - EXIT
	 sp=BENCH_SPLIT_$k
	 PL_SPLIT=${!sp-${PL_SPLIT:-1}}
	 c=BENCH_CONF_$k
	 IFS=';' read -r -a extra <<< "${!c-${BENCH_CONF:-}}"
	 pl_conf "max_jobs = 2" "log_level = warn" ${extra[@]+"${extra[@]}"})
	ln -s pipelined.conf "$T/conf"
	"$top/daemon/pipelined" -d -f "$T/conf" >"$T/out" 2>&1 &
	PIDS="$PIDS $!"
	eval "DPID$k=$!"
	for _ in $(seq 1 100); do
		[ -S "$T/run/control.sock" ] &&
		    "$top/daemon/pipelinectl" -f "$T/conf" status >/dev/null 2>&1 && break
		sleep 0.1
	done
	[ -z "$AS" ] || { chmod 0755 "$T/run"; chmod 0666 "$T/run/control.sock"; }
done

now() { date +%s.%N; }
# Clock ticks of the daemon's process and, split in two, of its daemon
# process (the privileged parent's oldest pipelined child: its file
# servers, kept idle between jobs, are pipelined children too) too.
cpu() {
	local c
	c=$(pgrep -o -P "$1" -x pipelined || true)
	cat "/proc/$1/stat" ${c:+"/proc/$c/stat"} | awk '{ s += $14 + $15 } END { print s }'
}
tck=$(getconf CLK_TCK)
: >"$W/ratios"
for shape in chain fanout; do
	for r in $(seq 1 "$R"); do
		t0=$(now); make -s -j2 -f "$W/$shape.mk" >/dev/null; t1=$(now)
		m=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
		line=$(printf '%-6s round %d  load %s  make %.2fs' "$shape" "$r" \
		    "$(cut -d' ' -f1 /proc/loadavg)" "$m")
		order=$(seq 1 $#)
		[ $((r % 2)) = 0 ] && order=$(seq $# -1 1)
		for k in $order; do
			top=${!k}
			T=$MNT/d$k
			dp=DPID$k
			dp=${!dp}
			c0=$(cpu "$dp")
			t0=$(now)
			$AS "$top/daemon/pipelinectl" -f "$T/conf" submit --name "$shape-$r" "$W/$shape.ini" >/dev/null
			if ! $AS "$top/daemon/pipelinectl" -f "$T/conf" watch "$shape-$r" --plain >/dev/null; then
				# A run that did not succeed is no figure: say why, go on.
				echo "$shape round $r build $k: the run did not succeed:"
				"$top/daemon/pipelinectl" -f "$T/conf" status "$shape-$r" | grep -v succeeded | head -5
				continue
			fi
			t1=$(now)
			c1=$(cpu "$dp")
			line="$line$(awk -v k="$k" -v a="$t0" -v b="$t1" -v m="$m" -v c="$((c1 - c0))" \
			    -v t="$tck" -v n="$N" 'BEGIN { printf "  build %d %.2fs %.2fx (daemon %.2f ms/job)",
			    k, b - a, (b - a) / m, c * 1000 / t / n }')"
			awk -v s="$shape" -v k="$k" -v a="$t0" -v b="$t1" -v m="$m" \
			    'BEGIN { print s, k, (b - a) / m }' >>"$W/ratios"
		done
		echo "$line"
	done
done
k=0
for top in "$@"; do
	k=$((k + 1))
	for shape in chain fanout; do
		awk -v s="$shape" -v k="$k" -v top="$top" '
		$1 == s && $2 == k { v[++n] = $3 }
		END {
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
				if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
			printf "%-6s build %d (%s): median %.2fx make -j2, range %.2f-%.2fx, %d rounds\n",
			    s, k, top, med, v[1], v[n], n
		}' "$W/ratios"
	done
done
