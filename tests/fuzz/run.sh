#!/bin/bash
# tests/fuzz/run.sh: run the libFuzzer targets (`make fuzz` builds them),
# each for SECONDS, JOBS at a time (default 2), starting from its seed
# corpus, and print per target the executions, the coverage libFuzzer
# reported last (cov: edges, ft: features) and the findings.
#
#   tests/fuzz/run.sh SECONDS [NAME...]     NAME as in tests/fuzz/fuzz_NAME
#
# A finding (a crash, a sanitizer report, a leak, an input running over
# 25 s, or one taking over 2 GB) stops its target and is left as
# tests/fuzz/findings/NAME-crash-SHA1 (-leak-, -timeout-, -oom-): replay
# it with tests/fuzz/fuzz_NAME FILE, fix the cause, and add the file to
# tests/fuzz/corpus/NAME/, whose replay runs in `make check`. New inputs
# the fuzzer keeps go to tests/fuzz/NAME.corpus-new/ (not in git; merge
# the interesting ones into the corpus by hand), each target's output to
# tests/fuzz/findings/NAME.log. Exits 1 when a target found something.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
cd "$TOP"
if [ $# -lt 1 ] || ! [ "$1" -gt 0 ] 2>/dev/null; then
	echo "usage: tests/fuzz/run.sh SECONDS [NAME...]" >&2
	exit 2
fi
secs=$1
shift
JOBS=${JOBS:-2}
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	for f in tests/fuzz/fuzz_*.c; do
		n=${f#tests/fuzz/fuzz_}
		names+=("${n%.c}")
	done
fi
for n in "${names[@]}"; do
	if [ ! -x "tests/fuzz/fuzz_$n" ]; then
		echo "tests/fuzz/run.sh: tests/fuzz/fuzz_$n is not built (make fuzz)" >&2
		exit 2
	fi
done
F=tests/fuzz/findings
mkdir -p "$F"

one() {
	local n=$1
	mkdir -p "tests/fuzz/$n.corpus-new"
	rm -f "$F/$n.log"
	"tests/fuzz/fuzz_$n" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 \
	    -print_final_stats=1 -artifact_prefix="$F/$n-" \
	    "tests/fuzz/$n.corpus-new" "tests/fuzz/corpus/$n" >"$F/$n.log" 2>&1
}

echo "fuzzing ${#names[@]} targets for ${secs}s each, $JOBS at a time (logs in $F/)"
start=$(date +%s)
running=0
for n in "${names[@]}"; do
	# A finding of an earlier run is kept under another name, so the
	# summary names only this run's.
	for old in "$F/$n"-crash-* "$F/$n"-leak-* "$F/$n"-timeout-* "$F/$n"-oom-*; do
		[ -e "$old" ] && mv "$old" "$old.old"
	done
	one "$n" &
	running=$((running + 1))
	if [ $running -ge "$JOBS" ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait

found=0
printf '%-18s %12s %8s %8s  %s\n' target executions cov ft findings
for n in "${names[@]}" ; do
	log=$F/$n.log
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	last=$(grep -E '^#[0-9]+.* cov: ' "$log" | tail -n 1)
	cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
	ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
	[ -z "$execs" ] && execs=$(echo "$last" | sed -n 's/^#\([0-9]*\).*/\1/p')
	what=$(ls "$F/$n"-crash-* "$F/$n"-leak-* "$F/$n"-timeout-* "$F/$n"-oom-* 2>/dev/null |
	    grep -v '\.old$' | tr '\n' ' ')
	if [ -n "$what" ]; then
		found=1
		why=$(grep -m 1 -E '^(SUMMARY|==[0-9]+==ERROR)|runtime error' "$log" | cut -c 1-160)
		what="$what($why)"
	elif ! grep -q '^Done [0-9]* runs' "$log"; then
		found=1
		what="none, but it did not end normally (see $log)"
	else
		what=none
	fi
	printf '%-18s %12s %8s %8s  %s\n' "$n" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$what"
done
echo "($(( $(date +%s) - start ))s in all)"
exit $found
