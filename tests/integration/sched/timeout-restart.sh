#!/bin/bash
# A job's timeout survives a daemon restart (kill -9): the deadline is
# stored when the attempt starts, and the restarted daemon, re-entering the
# job (exec is adoptable), ends it at that deadline, not a whole timeout
# after the restart. A real daemon and shim; the job is sleep.
# run.sh: alone (it times a deadline across a restart).
. "$(dirname "$0")/../../lib.sh"
pl_conf
pl_start
cat >"$TEST_TMP/t.ini" <<INI
[slow]
stage = exec
timeout = 8s
command = sleep 60
INI
pctl submit "$TEST_TMP/t.ini" >/dev/null || fail "submit"
for _ in $(seq 1 50); do [ "$(job_state t slow)" = running ] && break; sleep 0.1; done
[ "$(job_state t slow)" = running ] || fail "the job did not start"
dl=$(db "SELECT deadline - started FROM attempts")
[ "${dl%.*}" = 8 ] || [ "${dl%.*}" = 7 ] || fail "the stored deadline is $dl s after the start, not 8"
sleep 4
pl_kill9
pl_start
wait_run t failed 30
# The attempt ran from its start to the stored deadline (8 s, plus the
# poll and the kill), not 4 + 8 = 12 s.
took=$(db "SELECT finished - started FROM attempts")
/usr/bin/python3 -c "import sys; t = float(sys.argv[1]); sys.exit(0 if 7.5 <= t < 10.5 else 1)" "$took" ||
    fail "the timed-out attempt took $took s, not its 8 s timeout"
[ "$(db "SELECT count(*) FROM attempts")" = 1 ] || fail "the job ran more than once"
db "SELECT message FROM attempts" | grep -q "timed out after 8s" || fail "not timed out: $(db 'SELECT message FROM attempts')"
grep -q "re-entered after a daemon restart" "$TEST_TMP/state/runs/t/slow/job.log" || fail "the job was not re-entered"
integrity_ok
pl_stop
echo ok
