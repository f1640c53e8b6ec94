#!/bin/bash
# A job's reuse key hashes its inputs before its stage runs, on the job's
# thread: a large input is hashed as a job's artifacts are, so a cancel
# or the job's timeout stops the hash between chunks instead of waiting
# for the whole file. A 48 GB sparse input (minutes of hashing here) is
# cancelled a second into its key: the run ends cancelled within seconds;
# another of the same, under a 2 s timeout, fails on its timeout. Against
# a real pipelined.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
big=$TEST_TMP/big.bin
truncate -s 48G "$big" || { echo "cannot make a sparse file here"; exit 77; }
pl_start
spec() {	# spec NAME [KEY = VALUE]
	printf '[run]\nname = %s\n[k]\nstage = exec\nreuse = yes\ninput = %s\ncommand = true\n%s\n' \
	    "$1" "$big" "${2:-}" > "$TEST_TMP/$1.ini"
}
spec c1
pctl submit "$TEST_TMP/c1.ini" >/dev/null || fail "submit c1"
sleep 1
[ "$(run_state c1)" = running ] || fail "c1 is not hashing its input: $(pctl status c1)"
t0=$SECONDS
pctl cancel c1 >/dev/null || fail "cancel c1"
[ "$(wait_end c1 20)" = cancelled ] || fail "c1 did not end cancelled within 20 s of its cancel: $(pctl status c1)"
note "cancelled while hashing 48 GB: ended in $((SECONDS - t0)) s"
spec t1 "timeout = 2s"
t0=$SECONDS
pctl submit "$TEST_TMP/t1.ini" >/dev/null || fail "submit t1"
st=$(wait_end t1 25)
[ "$st" = failed ] || fail "t1 ended $st under a 2 s timeout while hashing: $(pctl status t1)"
note "a 2 s timeout while hashing 48 GB: failed in $((SECONDS - t0)) s"
kill -0 "$PL_PID" || fail "the daemon died"
pl_stop
echo ok
