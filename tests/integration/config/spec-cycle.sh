#!/bin/bash
# A dependency cycle of 300 and of 5,000 jobs (each line of its path
# longer than any fixed buffer) is refused with one readable error naming
# the cycle, cut with "..." and its length, by pipelinectl check and by
# the daemon on submit; the daemon keeps running and takes the next spec.
# (The path was once built with strncat into 2 KB on the stack, and a
# size that wrapped past the end: the check crashed, and the daemon with
# it.)
. "$(dirname "$0")/../../lib.sh"
pl_conf
# cycle N FILE: N exec jobs, each after the one before, the first after
# the last.
cycle() {
	local n=$1 i
	{
		echo "[run]"
		echo "name = cycle$n"
		for i in $(seq 0 $((n - 1))); do
			printf '\n[cycle_job_%04d]\nstage = exec\ncommand = true\n' "$i"
			printf 'after = cycle_job_%04d\n' $(((i + n - 1) % n))
		done
	} > "$2"
}
# expect_cycle N OUT: one error line that names the cycle from its first
# job, cut readably, with the number of jobs in it.
expect_cycle() {
	local n=$1 out=$2 last line
	last=$(printf 'cycle_job_%04d' $((n - 1)))
	line=$(echo "$out" | grep -F "dependency cycle") || fail "no cycle error for $n jobs: ${out:0:2000}"
	[ "$(echo "$line" | wc -l)" = 1 ] || fail "not one cycle line: ${line:0:2000}"
	# The error is the after line of the job that closes the cycle
	# (cycle_job_0001, after cycle_job_0000, on line 12).
	echo "$line" | grep -qF "cycle$n.ini:12: after: dependency cycle of $n jobs: cycle_job_0000 -> $last -> " ||
	    fail "cycle line: ${line:0:300}"
	echo "$line" | grep -qE -- '[^.]\.\.\. \(and back to cycle_job_0000\)' ||
	    fail "cycle line not cut readably: ${line: -200}"
	[ "${#line}" -lt 1200 ] || fail "cycle line of ${#line} bytes"
}
for n in 300 5000; do
	spec=$TEST_TMP/cycle$n.ini
	cycle "$n" "$spec"
	out=$(pctl check "$spec" 2>&1)
	rc=$?
	[ "$rc" -lt 128 ] || fail "pipelinectl check died with $rc on a $n-job cycle"
	[ "$rc" != 0 ] || fail "check accepted a $n-job cycle"
	expect_cycle "$n" "$out"
done
# A short cycle reads whole.
printf '[a]\nstage = exec\ncommand = true\nafter = b\n[b]\nstage = exec\ncommand = true\nafter = a\n' \
    > "$TEST_TMP/short.ini"
out=$(pctl check "$TEST_TMP/short.ini" 2>&1) && fail "check accepted a short cycle"
echo "$out" | grep -qF "short.ini:8: after: dependency cycle: a -> b -> a" || fail "short cycle: $out"

# The daemon: refused with the same error, and it keeps running.
pl_start
for n in 300 5000; do
	out=$(pctl submit "$TEST_TMP/cycle$n.ini" 2>&1) && fail "the daemon accepted a $n-job cycle"
	kill -0 "$PL_PID" 2>/dev/null || fail "the daemon died on a $n-job cycle: $(tail -5 "$TEST_TMP/pipelined.out")"
	expect_cycle "$n" "$out"
done
[ "$(db "SELECT count(*) FROM runs")" = 0 ] || fail "a refused spec left a run"
printf '[only]\nstage = exec\ncommand = true\n' > "$TEST_TMP/fine.ini"
pctl submit "$TEST_TMP/fine.ini" >/dev/null || fail "submit after the cycles"
wait_run fine succeeded
pl_stop
echo ok
