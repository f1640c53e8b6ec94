#!/bin/bash
# tests/run.sh: run every test of the project, each in its own process with a
# timeout, several side by side, and end with the summary line "N passed,
# N failed".
#
#   tests/run.sh [-j N] [PATTERN...]   the tests a PATTERN selects
#   tests/run.sh --list [PATTERN...]   print their names, run nothing
#
# Tests and their names: the unit tests (tests/unit/test_NAME, named
# unit/NAME; each runs its cases, each case in a process of its own), the
# fuzz corpora's replays (fuzz/replay_NAME), the fuzz smoke (fuzz/smoke-NAME:
# each built libFuzzer target for 20 s, tests/fuzz/smoke.sh), the integration tests
# (tests/integration/DIR/NAME.sh, named DIR/NAME, in the order of
# tests/integration/ORDER) and the man-page lint (tools/lint-man).
# A PATTERN that is a test's whole name selects that test alone
# (sched/crash, unit/core_store); unit/NAME/CASE runs one case of a unit
# test (test_NAME --case CASE); any other PATTERN selects every test whose
# name or path contains it (sched/, train, unit/). A PATTERN that selects
# nothing stops the run before anything runs (exit 2).
#
# Up to N tests run at once (-j N; the environment's JOBS, else one more
# than the machine's processors: most tests mostly wait, for a daemon, a
# server or a sleep), started from the end of the order above (the
# costliest first), and each one's line is printed when it ends. An integration test with the line
#
#   # run.sh: alone
#
# (the real model's, the ones that kill -9 at a chosen moment, the ones
# that time what they check) runs with nothing beside it: such tests run
# one at a time, in order, after all the others have ended. -j 1 runs one
# test at a time, in order.
#
# A test exits 0 (pass), 77 (skipped: a precondition is missing; counted
# as a failure when CI=true, since CI installs everything) or anything else
# (fail). Each test gets its own TEST_TMP directory; its output goes to
# tests/out/NAME.log (a / of the name written _). The output: a line per
# test (PASS, SKIP or FAIL, in the order they end), a failure's last 40
# lines of log, and the summary; the exit status is 0 when none failed.
#
# Measured (2026-12-06, e7dc9f4, each a clean clone's .ci/run with the
# caches warm, back to back on 2 quiet cores; 200 tests): make check
# 2,795 s one at a time (JOBS=1), 2,485 s side by side (the default, 3).
# The 169 tests not marked alone took 1,117 s one at a time (the fuzz
# smoke 340 s of it) and about 535 s side by side; the 31 alone tests
# 1,626 s and 1,900 s, run the same way in both (the difference is
# noise: e2e/router-real 357 s and 421 s).
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
export TOP
cd "$TOP"
OUT="$TOP/tests/out"
mkdir -p "$OUT"   # not wiped: other runs may be writing logs here
TIMEOUT_UNIT=${TIMEOUT_UNIT:-120}
TIMEOUT_INTEG=${TIMEOUT_INTEG:-1800}

LIST=
NJOBS=${JOBS:-$(($(nproc 2>/dev/null || echo 1) + 1))}
while [ $# -gt 0 ]; do
	case "$1" in
	--list) LIST=1; shift;;
	-j) [ $# -ge 2 ] || { echo "run.sh: -j needs a number of tests" >&2; exit 2; }
		NJOBS=$2; shift 2;;
	-j*) NJOBS=${1#-j}; shift;;
	--) shift; break;;
	*) break;;
	esac
done
case "$NJOBS" in
''|*[!0-9]*|0) echo "run.sh: -j $NJOBS: not a number of tests (1 or more)" >&2; exit 2;;
esac
# wait -n -p (which test ended) is bash 5.1's.
if [ "$NJOBS" -gt 1 ] && { [ "${BASH_VERSINFO[0]}" -lt 5 ] ||
    { [ "${BASH_VERSINFO[0]}" -eq 5 ] && [ "${BASH_VERSINFO[1]}" -lt 1 ]; }; }; then
	echo "run.sh: bash $BASH_VERSION runs one test at a time (-j needs 5.1)" >&2
	NJOBS=1
fi

# tests (paths) and names (their names), in the order they run.
tests=(); names=()
add() { tests+=("$1"); names+=("$2"); }
for t in tests/unit/test_*; do
	case "$t" in *.c|*.o|*.d|*.h) continue;; esac
	[ -x "$t" ] && add "$t" "unit/${t#tests/unit/test_}"
done
for t in tests/fuzz/replay_*; do
	case "$t" in *.o|*.d) continue;; esac
	[ -x "$t" ] && add "$t" "fuzz/${t#tests/fuzz/}"
done
# The fuzz smoke: every built libFuzzer target for 20 s (tests/fuzz/smoke.sh).
for t in tests/fuzz/fuzz_*; do
	case "$t" in *.c|*.o|*.d|*.h) continue;; esac
	[ -x "$t" ] && add "$t" "fuzz/smoke-${t#tests/fuzz/fuzz_}"
done
# The integration tests in ORDER's order; a test that ORDER does not list,
# or a line of it that names no test, stops the run before anything runs.
ORDER=tests/integration/ORDER
bad=0
while read -r n; do
	case "$n" in ''|'#'*) continue;; esac
	if [ -f "tests/integration/$n.sh" ]; then
		add "tests/integration/$n.sh" "$n"
	else
		echo "run.sh: $ORDER: $n: no such test (tests/integration/$n.sh)" >&2; bad=1
	fi
done <"$ORDER"
while read -r t; do
	n=${t#tests/integration/}; n=${n%.sh}
	case "$n" in */*) ;; *)
		echo "run.sh: $t: an integration test goes into the directory of its subsystem (tests/integration/DIR/NAME.sh)" >&2
		bad=1; continue;;
	esac
	grep -qxF -- "$n" "$ORDER" || { echo "run.sh: $t is not listed in $ORDER" >&2; bad=1; }
	[ "$(grep -cxF -- "$n" "$ORDER")" -le 1 ] || { echo "run.sh: $ORDER lists $n twice" >&2; bad=1; }
done < <(find tests/integration -name '*.sh' | sort)
# No two tests share a NAME, in any directory: a name finds one test.
for d in $(find tests/integration -name '*.sh' -printf '%f\n' | sort | uniq -d); do
	echo "run.sh: two integration tests are named ${d%.sh}:" \
	    $(find tests/integration -name "$d") >&2
	bad=1
done
[ $bad -eq 0 ] || exit 2
add tests/tools/lint-man.sh tools/lint-man

PATTERNS=("$@")
# exact P: whether P is a test's whole name, or a unit test's case.
exact() {
	local n
	for n in "${names[@]}"; do
		[ "$1" = "$n" ] && return 0
		case "$n" in unit/*) [ "${1%/*}" = "$n" ] && return 0;; esac
	done
	return 1
}
EXACT=()
for k in "${!PATTERNS[@]}"; do
	if exact "${PATTERNS[$k]}"; then EXACT[$k]=1; else EXACT[$k]=; fi
done
# selects K I: whether pattern K selects test I; sets CASE when the pattern
# names one of a unit test's cases.
selects() {
	local p=${PATTERNS[$1]} t=${tests[$2]} n=${names[$2]}
	CASE=
	[ "$p" = "$n" ] && return 0
	case "$n" in unit/*) [ "${p%/*}" = "$n" ] && { CASE=${p##*/}; return 0; };; esac
	[ -n "${EXACT[$1]}" ] && return 1
	case "$n $t" in *"$p"*) return 0;; esac
	return 1
}
# want I: whether test I is selected (every test when there is no pattern).
want() {
	local k
	CASE=
	[ ${#PATTERNS[@]} -eq 0 ] && return 0
	for k in "${!PATTERNS[@]}"; do selects "$k" "$1" && return 0; done
	return 1
}
# A pattern that selects no test is a typing error, said before anything runs.
for k in "${!PATTERNS[@]}"; do
	hit=
	for i in "${!tests[@]}"; do selects "$k" "$i" && { hit=1; break; }; done
	[ -n "$hit" ] || { echo "run.sh: no test is named or matches ${PATTERNS[$k]} (tests/run.sh --list lists them)" >&2; bad=1; }
done
[ $bad -eq 0 ] || exit 2

# alone I: whether test I asks to run with nothing beside it.
alone() {
	case "${tests[$1]}" in tests/integration/*) ;; *) return 1;; esac
	grep -qE '^# run\.sh: alone([^[:alnum:]]|$)' "${tests[$1]}"
}

# The tests to run, in order: their index, case and whether alone.
sel=(); selcase=(); selalone=()
for i in "${!tests[@]}"; do
	want "$i" || continue
	name=${names[$i]}
	[ -n "$CASE" ] && name=$name/$CASE
	[ -n "$LIST" ] && { echo "$name"; continue; }
	sel+=("$i"); selcase+=("$CASE")
	if alone "$i"; then selalone+=(1); else selalone+=(""); fi
done
[ -n "$LIST" ] && exit 0

pass=0; fail=0; skip=0; failed=()
# The running tests, by the pid of their timeout(1): the index into sel,
# the start time, the name, the log, the temporary directory, the limit.
declare -A r_k=() r_start=() r_name=() r_log=() r_tmp=() r_lim=()
# Each test is its timeout's process group (timeout(1) makes one): an
# interrupted run.sh takes the running tests with it.
stop_all() {
	local p
	for p in "${!r_k[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
	echo "run.sh: interrupted; $pass passed, $fail failed before it" >&2
	exit 130
}
trap stop_all INT TERM HUP

# start K: start the selected test K in the background.
start() {
	local k=$1 i=${sel[$1]} case=${selcase[$1]} t run name log tmp lim args=()
	t=${tests[$i]}; name=${names[$i]}
	[ -n "$case" ] && name=$name/$case
	log="$OUT/${name//\//_}.log"
	tmp=$(mktemp -d /tmp/pltest.XXXXXX)
	case "$t" in tests/unit/*) lim=$TIMEOUT_UNIT;; *) lim=$TIMEOUT_INTEG;; esac
	run=$t
	case "$t" in
	tests/fuzz/replay_*) args=("tests/fuzz/corpus/${t#tests/fuzz/replay_}");;
	tests/fuzz/fuzz_*) run=tests/fuzz/smoke.sh; args=("${t#tests/fuzz/fuzz_}");;
	esac
	[ -n "$case" ] && args=(--case "$case")
	TEST_TMP="$tmp" timeout -k 10 "$lim" "$run" "${args[@]}" >"$log" 2>&1 </dev/null &
	r_k[$!]=$k; r_start[$!]=$(date +%s.%N); r_name[$!]=$name; r_log[$!]=$log
	r_tmp[$!]=$tmp; r_lim[$!]=$lim
}

# reap: wait for a running test to end and print its line.
reap() {
	local p rc name log tmp secs
	wait -n -p p
	rc=$?
	if [ -z "${p:-}" ] && [ "$rc" -eq 127 ]; then
		# No child left to wait for: nothing can end the ones listed.
		for p in "${!r_k[@]}"; do
			fail=$((fail + 1)); failed+=("${r_name[$p]}")
			echo "FAIL ${r_name[$p]} (lost: run.sh has no such child)"
			unset "r_k[$p]"
		done
		return 0
	fi
	[ -n "${p:-}" ] && [ -n "${r_k[$p]+x}" ] || return 0
	name=${r_name[$p]}; log=${r_log[$p]}; tmp=${r_tmp[$p]}
	secs=$(awk -v a="${r_start[$p]}" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1)); echo "PASS $name (${secs}s)"
		rm -rf "$tmp"
	elif [ $rc -eq 77 ] && [ "${CI:-}" != "true" ]; then
		skip=$((skip + 1)); echo "SKIP $name: $(tail -n 1 "$log")"
		rm -rf "$tmp"
	else
		fail=$((fail + 1)); failed+=("$name")
		[ $rc -eq 124 ] && echo "FAIL $name (timed out after ${r_lim[$p]}s)" ||
			echo "FAIL $name (exit $rc, ${secs}s)"
		tail -n 40 "$log" | sed 's/^/    | /'
		echo "    (whole log: $log; temporary files kept in $tmp)"
	fi
	unset "r_k[$p]" "r_start[$p]" "r_name[$p]" "r_log[$p]" "r_tmp[$p]" "r_lim[$p]"
}

# The others side by side first, then the alone ones one at a time: a
# test that must run alone in the middle would leave the slots idle while
# the ones before it end. Side by side they start from the end of the
# list, the costliest first (ORDER puts the cheap ones first): a long test
# started last would run on alone while the slots beside it stay idle.
order=("${!sel[@]}")
if [ "$NJOBS" -gt 1 ]; then
	order=()
	for ((k = ${#sel[@]} - 1; k >= 0; k--)); do order+=("$k"); done
fi
for k in "${order[@]}"; do
	[ -z "${selalone[$k]}" ] || [ "$NJOBS" -eq 1 ] || continue
	while [ ${#r_k[@]} -ge "$NJOBS" ]; do reap; done
	start "$k"
done
while [ ${#r_k[@]} -gt 0 ]; do reap; done
for k in "${!sel[@]}"; do
	[ -n "${selalone[$k]}" ] && [ "$NJOBS" -gt 1 ] || continue
	start "$k"
	reap
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
if [ $skip -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ $fail -eq 0 ]
