#!/bin/bash
# tests/run.sh: run every test of the project, each in its own process with a
# timeout, and end with the summary line "N passed, N failed".
#
#   tests/run.sh [PATTERN...]     only tests whose name contains a PATTERN
#
# Tests: tests/unit/test_* binaries, tests/integration/*.sh scripts (sorted),
# the man-page lint. A test exits 0 (pass), 77 (skipped: a precondition is
# missing; counted as a failure when CI=true, since CI installs everything)
# or anything else (fail). Each test gets its own TEST_TMP directory.
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
export TOP
cd "$TOP"
OUT="$TOP/tests/out"
mkdir -p "$OUT"   # not wiped: other runs may be writing logs here
TIMEOUT_UNIT=${TIMEOUT_UNIT:-120}
TIMEOUT_INTEG=${TIMEOUT_INTEG:-1800}

tests=()
for t in tests/unit/test_*; do
	case "$t" in *.c|*.o|*.d|*.h) continue;; esac
	[ -x "$t" ] && tests+=("$t")
done
for t in tests/fuzz/replay_*; do
	case "$t" in *.o|*.d) continue;; esac
	[ -x "$t" ] && tests+=("$t")
done
for t in tests/integration/*.sh; do [ -f "$t" ] && tests+=("$t"); done
tests+=("tests/tools/lint-man.sh")

want() {
	[ $# -eq 0 ] && return 0
	for p in "${PATTERNS[@]}"; do case "$1" in *"$p"*) return 0;; esac; done
	return 1
}
PATTERNS=("$@")

pass=0; fail=0; skip=0; failed=()
for t in "${tests[@]}"; do
	[ ${#PATTERNS[@]} -gt 0 ] && ! want "$t" && continue
	name=${t#tests/}
	log="$OUT/${name//\//_}.log"
	tmp=$(mktemp -d /tmp/pltest.XXXXXX)
	case "$t" in tests/unit/*) lim=$TIMEOUT_UNIT;; *) lim=$TIMEOUT_INTEG;; esac
	start=$(date +%s.%N)
	args=()
	case "$t" in tests/fuzz/replay_*) args=("tests/fuzz/corpus/${t#tests/fuzz/replay_}");; esac
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
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
if [ $skip -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ $fail -eq 0 ]
