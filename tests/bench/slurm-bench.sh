#!/bin/bash
# tests/bench/slurm-bench.sh: what the slurm executor costs over the local
# one on the single-node test cluster (tests/tools/slurm-cluster.sh; root).
#   1. a chain of N trivial jobs (each waits for the previous one's end):
#      seconds per job, local and slurm: submit, schedule, the node's start,
#      and the daemon seeing the end (poll_interval);
#   2. N independent trivial jobs: wall seconds for all, local and slurm
#      (the node runs as many at once as it has CPUs).
# Prints figures; asserts nothing. N: BENCH_N (default 10).
set -eu
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
TEST_TMP=${TEST_TMP:-$(mktemp -d /tmp/bench-slurm.XXXXXX)}
export TOP TEST_TMP
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/slurm.sh"
trap 'pl_kill9 2>/dev/null; slurm_stop' EXIT
N=${BENCH_N:-10}
pl_conf "max_jobs = 32"
pl_start
S=$TEST_TMP/specs; mkdir -p "$S"

spec() { # spec NAME EXECUTOR chain|fan
	{
		for i in $(seq 1 "$N"); do
			echo "[j$i]"; echo "stage = exec"; echo "executor = $2"; echo "command = true"
			if [ "$3" = chain ] && [ "$i" -gt 1 ]; then echo "after = j$((i - 1))"; fi
		done
	} > "$S/$1.ini"
}
run() { # run NAME: wall seconds
	local t0 t1
	t0=$(date +%s.%N)
	pctl submit "$S/$1.ini" >/dev/null
	wait_run "$1" succeeded 600 >/dev/null
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }'
}
for ex in local slurm; do
	spec "chain-$ex" "$ex" chain
	spec "fan-$ex" "$ex" fan
	c=$(run "chain-$ex"); f=$(run "fan-$ex")
	awk -v ex="$ex" -v c="$c" -v f="$f" -v n="$N" 'BEGIN {
		printf "%-6s chain of %d: %6.2f s (%.2f s per job)   %d independent: %6.2f s\n",
		    ex, n, c, c / n, n, f }'
done
pl_stop
