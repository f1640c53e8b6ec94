#!/bin/bash
# tests/run.sh: run every test of the project, each in its own process with a
# timeout, and end with the summary line "N passed, N failed".
#
#   tests/run.sh [PATTERN...]          the tests a PATTERN selects
#   tests/run.sh --list [PATTERN...]   print their names, run nothing
#
# Tests and their names: the unit tests (tests/unit/test_NAME, named
# unit/NAME; each runs its cases, each case in a process of its own), the
# fuzz corpora's replays (fuzz/replay_NAME), the integration tests
# (tests/integration/DIR/NAME.sh, named DIR/NAME, in the order of
# tests/integration/ORDER) and the man-page lint (tools/lint-man).
# A PATTERN that is a test's whole name selects that test alone
# (sched/crash, unit/core_store); unit/NAME/CASE runs one case of a unit
# test (test_NAME --case CASE); any other PATTERN selects every test whose
# name or path contains it (sched/, train, unit/). A PATTERN that selects
# nothing stops the run before anything runs (exit 2).
#
# A test exits 0 (pass), 77 (skipped: a precondition is missing; counted
# as a failure when CI=true, since CI installs everything) or anything else
# (fail). Each test gets its own TEST_TMP directory; its output goes to
# tests/out/NAME.log (a / of the name written _).
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
export TOP
cd "$TOP"
OUT="$TOP/tests/out"
mkdir -p "$OUT"   # not wiped: other runs may be writing logs here
TIMEOUT_UNIT=${TIMEOUT_UNIT:-120}
TIMEOUT_INTEG=${TIMEOUT_INTEG:-1800}

LIST=
[ "${1:-}" = --list ] && { LIST=1; shift; }

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
done < <(find tests/integration -name '*.sh' ! -path 'tests/helpers/*' | sort)
# No two tests share a NAME, in any directory: a name finds one test.
for d in $(find tests/integration -name '*.sh' ! -path 'tests/helpers/*' -printf '%f\n' |
    sort | uniq -d); do
	echo "run.sh: two integration tests are named ${d%.sh}:" \
	    $(find tests/integration -name "$d" ! -path 'tests/helpers/*') >&2
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

pass=0; fail=0; skip=0; failed=()
for i in "${!tests[@]}"; do
	want "$i" || continue
	t=${tests[$i]}; name=${names[$i]}
	[ -n "$CASE" ] && name=$name/$CASE
	[ -n "$LIST" ] && { echo "$name"; continue; }
	log="$OUT/${name//\//_}.log"
	tmp=$(mktemp -d /tmp/pltest.XXXXXX)
	case "$t" in tests/unit/*) lim=$TIMEOUT_UNIT;; *) lim=$TIMEOUT_INTEG;; esac
	start=$(date +%s.%N)
	args=()
	case "$t" in tests/fuzz/replay_*) args=("tests/fuzz/corpus/${t#tests/fuzz/replay_}");; esac
	[ -n "$CASE" ] && args=(--case "$CASE")
	TEST_TMP="$tmp" timeout -k 10 "$lim" "$t" "${args[@]}" >"$log" 2>&1 </dev/null
	rc=$?
	secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1)); echo "PASS $name (${secs}s)"
		rm -rf "$tmp"
	elif [ $rc -eq 77 ] && [ "${CI:-}" != "true" ]; then
		skip=$((skip + 1)); echo "SKIP $name: $(tail -n 1 "$log")"
		rm -rf "$tmp"
	else
		fail=$((fail + 1)); failed+=("$name")
		[ $rc -eq 124 ] && echo "FAIL $name (timed out after ${lim}s)" || echo "FAIL $name (exit $rc, ${secs}s)"
		tail -n 40 "$log" | sed 's/^/    | /'
		echo "    (whole log: $log; temporary files kept in $tmp)"
	fi
done
[ -n "$LIST" ] && exit 0
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
if [ $skip -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ $fail -eq 0 ]
