#!/bin/bash
# dag-bench.sh: DAG overhead. 1,000 exec jobs of `true`, as a chain and as
# a fan-out, through pipelined (max_jobs = 2) and through an equivalent
# Makefile run with make -j2, in the same run; prints jobs/s for each and
# the ratio pipelined/make (target: within 2x of make).
#   N=1000 tests/bench/dag-bench.sh
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
N=${N:-1000}
export TEST_TMP=$(mktemp -d /tmp/dagbench.XXXXXX)
. "$TOP/tests/lib.sh"
pl_conf "max_jobs = 2" "log_level = warn"
pl_start
gen_spec() {  # shape name
	local shape=$1 f=$TEST_TMP/$2.ini
	{
		echo "[run]"; echo "name = $2"
		echo "[j0]"; echo "stage = exec"; echo "command = true"
		for i in $(seq 1 $((N - 1))); do
			echo "[j$i]"; echo "stage = exec"; echo "command = true"
			if [ "$shape" = chain ]; then echo "after = j$((i - 1))"; else echo "after = j0"; fi
		done
	} > "$f"
	echo "$f"
}
gen_make() {
	local shape=$1 f=$TEST_TMP/$2.mk
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
for shape in chain fanout; do
	spec=$(gen_spec $shape "$shape")
	mk=$(gen_make $shape "$shape")
	t0=$(now); make -s -j2 -f "$mk" >/dev/null; t1=$(now)
	make_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')
	t0=$(now); pctl submit "$spec" >/dev/null; pctl watch "$shape" --plain >/dev/null; t1=$(now)
	pl_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')
	awk -v n="$N" -v s="$shape" -v m="$make_s" -v p="$pl_s" 'BEGIN{
		printf "%-7s %d jobs: make -j2 %.2fs (%.0f jobs/s), pipelined %.2fs (%.0f jobs/s), ratio %.2fx\n",
		    s, n, m, n/m, p, n/p, p/m }'
done
pl_stop
rm -rf "$TEST_TMP"
