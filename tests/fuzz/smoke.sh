#!/bin/bash
# tests/fuzz/smoke.sh NAME: the fuzz smoke test of one target, which
# tests/run.sh runs as fuzz/smoke-NAME for every built tests/fuzz/fuzz_NAME
# (make fuzz): libFuzzer for SMOKE_SECONDS (default 20) from a copy of
# tests/fuzz/corpus/NAME in TEST_TMP (the repository's corpus is not
# written), so a harness that aborts on valid input or a new crash fails
# make check. A finding is kept in TEST_TMP (run.sh keeps a failed test's
# files): replay it with tests/fuzz/fuzz_NAME FILE, fix the cause, and add
# it to the corpus. Longer runs: tests/fuzz/run.sh.
set -u
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
TEST_TMP=${TEST_TMP:-$(mktemp -d /tmp/pltest.XXXXXX)}
n=${1:?usage: tests/fuzz/smoke.sh NAME}
bin=$TOP/tests/fuzz/fuzz_$n
[ -x "$bin" ] || { echo "$bin is not built (make fuzz)"; exit 1; }
mkdir -p "$TEST_TMP/corpus" "$TEST_TMP/findings"
[ -d "$TOP/tests/fuzz/corpus/$n" ] && cp -R "$TOP/tests/fuzz/corpus/$n/." "$TEST_TMP/corpus/"
"$bin" -max_total_time="${SMOKE_SECONDS:-20}" -timeout=25 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$TEST_TMP/findings/" "$TEST_TMP/corpus" \
    >"$TEST_TMP/fuzz.log" 2>&1
rc=$?
grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|Done )' "$TEST_TMP/fuzz.log"
found=$(ls "$TEST_TMP/findings")
# libFuzzer exits 77 on a finding by default, which is a skip to run.sh:
# any finding, or any other end than a normal one, fails.
if [ $rc -ne 0 ] || [ -n "$found" ] || ! grep -q '^Done [0-9]* runs' "$TEST_TMP/fuzz.log"; then
	grep -m 5 -E '^(SUMMARY|==[0-9]+==ERROR)|runtime error|deadly signal' "$TEST_TMP/fuzz.log"
	tail -n 30 "$TEST_TMP/fuzz.log"
	echo "FAIL: fuzz_$n: exit $rc, findings: ${found:-none} (in $TEST_TMP/findings)"
	exit 1
fi
echo ok
