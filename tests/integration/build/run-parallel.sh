#!/bin/bash
# build/run-parallel.sh: tests/run.sh runs tests side by side, and the ones
# marked "# run.sh: alone" with nothing beside them. In a tree of planted
# tests (a copy of run.sh, an ORDER, tests that record when they start and
# end): with -j 3, three 2-second tests overlap (the run takes about 2 s,
# not 6); an alone test overlaps none; -j 1 runs one at a time; the output
# is a line per test, a failure's log tail and "N passed, N failed", and
# the exit status is 1 when a test failed; a bad -j is refused.
. "$(dirname "$0")/../../lib.sh"
T=$TEST_TMP/tree
mkdir -p "$T/tests/integration/p" "$T/tests/tools"
cp "$TOP/tests/run.sh" "$T/tests/"
printf '#!/bin/sh\nexit 0\n' >"$T/tests/tools/lint-man.sh"
W=$TEST_TMP/when
# plant NAME SECS [alone|fail]: a test that records its start and end.
plant() {
	{
		echo '#!/bin/bash'
		[ "${3:-}" = alone ] && echo '# run.sh: alone (planted).'
		echo "echo \"$1 start \$(date +%s.%N)\" >>$W"
		echo "sleep $2"
		echo "echo \"$1 end \$(date +%s.%N)\" >>$W"
		[ "${3:-}" = fail ] && echo 'echo "planted failure"; exit 3'
		echo 'exit 0'
	} >"$T/tests/integration/p/$1.sh"
	chmod +x "$T/tests/integration/p/$1.sh"
	echo "p/$1" >>"$T/tests/integration/ORDER"
}
plant a 2; plant b 2; plant c 2; plant solo 1 alone; plant d 1; plant e 1 fail

# overlap X Y: whether X's and Y's intervals overlap.
overlap() {
	awk -v x="$1" -v y="$2" '$1 == x && $2 == "start" { xs = $3 } $1 == x && $2 == "end" { xe = $3 }
	    $1 == y && $2 == "start" { ys = $3 } $1 == y && $2 == "end" { ye = $3 }
	    END { exit !(xs < ye && ys < xe) }' "$W"
}

t0=$(date +%s.%N)
"$T/tests/run.sh" -j 3 p/ >"$TEST_TMP/j3.out" 2>&1
rc=$?
t1=$(date +%s.%N)
cat "$TEST_TMP/j3.out"
[ $rc -eq 1 ] || fail "-j 3: exit $rc with a failed test, not 1"
kept=$(sed -n 's/.*temporary files kept in \(\/tmp\/pltest\.[A-Za-z0-9]*\)).*/\1/p' "$TEST_TMP/j3.out")
[ -n "$kept" ] && rm -rf "$kept"
[ "$(tail -n 1 "$TEST_TMP/j3.out")" = "5 passed, 1 failed" ] || fail "-j 3: the last line is not \"5 passed, 1 failed\""
[ "$(grep -c '^PASS p/' "$TEST_TMP/j3.out")" = 5 ] || fail "-j 3: not five PASS lines"
grep -q '^FAIL p/e (exit 3, ' "$TEST_TMP/j3.out" || fail "-j 3: no FAIL line for p/e"
grep -q '^    | planted failure$' "$TEST_TMP/j3.out" || fail "-j 3: the failure's log tail is missing"
overlap a b && overlap b c && overlap a c || fail "-j 3: a, b and c did not run side by side: $(cat "$W")"
for x in a b c d e; do
	overlap solo $x && fail "-j 3: the alone test ran beside $x: $(cat "$W")"
done
# a, b, c side by side (2 s), solo (1 s), d and e (1 s): about 4 s, 9 s one at a time.
awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 7) }' || fail "-j 3 took $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s"

rm -f "$W"
"$T/tests/run.sh" -j 1 p/a p/b p/c >"$TEST_TMP/j1.out" 2>&1 || fail "-j 1: $(cat "$TEST_TMP/j1.out")"
overlap a b || overlap b c || overlap a c && fail "-j 1 ran tests side by side: $(cat "$W")"
[ "$(tail -n 1 "$TEST_TMP/j1.out")" = "3 passed, 0 failed" ] || fail "-j 1: $(cat "$TEST_TMP/j1.out")"

out=$("$T/tests/run.sh" -j x p/a 2>&1) && fail "-j x was accepted"
echo "$out" | grep -q -- '-j x: not a number of tests' || fail "-j x: $out"
note "-j 3: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s for 8 s of planted tests"
