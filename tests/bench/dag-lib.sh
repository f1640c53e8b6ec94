# tests/bench/dag-lib.sh: sourced by the DAG benchmarks (dag-bench.sh,
# metrics-bench.sh, web-bench.sh).
#
# dag_spec SHAPE NAME COMMAND N: a run spec on standard output, run NAME,
# N exec jobs of COMMAND: a chain (each after the one before) or a fan-out
# (every job after j0).
#
# dag_makefile SHAPE N: the same DAG as a Makefile for make -jJ, each job
# `true` (make runs it without a shell).
dag_spec() {
	local shape=$1 name=$2 cmd=$3 n=$4 k
	echo "[run]"; echo "name = $name"
	echo "[j0]"; echo "stage = exec"; echo "command = $cmd"
	for k in $(seq 1 $((n - 1))); do
		echo "[j$k]"; echo "stage = exec"; echo "command = $cmd"
		if [ "$shape" = chain ]; then echo "after = j$((k - 1))"; else echo "after = j0"; fi
	done
}

dag_makefile() {
	local shape=$1 n=$2 i
	printf 'all:'; for i in $(seq 0 $((n - 1))); do printf ' j%d' "$i"; done; echo
	echo "j0:"; printf '\t@true\n'
	for i in $(seq 1 $((n - 1))); do
		if [ "$shape" = chain ]; then echo "j$i: j$((i - 1))"; else echo "j$i: j0"; fi
		printf '\t@true\n'
	done
	printf '.PHONY: all'; for i in $(seq 0 $((n - 1))); do printf ' j%d' "$i"; done; echo
}
