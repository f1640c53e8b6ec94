#!/bin/bash
# watch follows a run's current state: an ended state that a later retry
# superseded is not the end. A run cancelled and then retried is watched
# (with --plain, --json and on a terminal under tmux) while its retried
# job runs: watch does not stop at the replayed "cancelled" (exit 7) but
# follows the retry until the run succeeds, and exits 0. A run that
# failed, was retried and failed again is watched after it ended: watch
# goes past the first failure to the second, shows the second attempt's
# message and exits 6.
# Runs against the real daemon and CLI of this tree and Debian's tmux.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/tmux.sh"
cd "$TEST_TMP"
pl_start
trap tmux_kill EXIT
cat >r.ini <<INI
[run]
name = r
[a]
stage = exec
command = while [ ! -e $TEST_TMP/go ]; do sleep 0.1; done; echo done
INI
pctl submit r.ini >/dev/null || fail "submit r"
for _ in $(seq 50); do [ "$(job_state r a)" = running ] && break; sleep 0.1; done
pctl cancel r >/dev/null || fail "cancel r"
wait_run r cancelled 30
pctl retry r >/dev/null || fail "retry r"
for _ in $(seq 50); do [ "$(job_state r a)" = running ] && break; sleep 0.1; done
[ "$(job_state r a)" = running ] || fail "the retried job does not run: $(pctl status r)"
watch_all r
sleep 2
kill -0 $WATCH_PLAIN 2>/dev/null || fail "watch --plain ended while the retried job runs: $(cat plain.out plain.err)"
kill -0 $WATCH_JSON 2>/dev/null || fail "watch --json ended while the retried job runs: $(cat json.err)"
tmux_until w screen.txt . 1
grep -q '^rc=' screen.txt && fail "watch on a terminal ended while the retried job runs: $(cat screen.txt)"
grep -q '^run r: running' screen.txt || fail "the terminal view does not say the run runs: $(cat screen.txt)"
grep -q '^a  *running' screen.txt || fail "the terminal view does not show the job running: $(cat screen.txt)"
grep -q ' run r cancelled' plain.out || fail "the plain lines do not show the old cancel: $(cat plain.out)"
touch go
wait $WATCH_PLAIN || fail "watch --plain exited $? for a run that succeeded: $(cat plain.out plain.err)"
wait $WATCH_JSON || fail "watch --json exited $?"
tail -1 plain.out | grep -q ' run r succeeded' || fail "watch --plain did not end at the success: $(cat plain.out)"
tail -1 json.out | grep -q '"type":"run.state".*"state":"succeeded"' || fail "watch --json: $(tail -2 json.out)"
tmux_until w screen.txt '^rc='
grep -q '^rc=0' screen.txt || fail "watch on a terminal: $(cat screen.txt)"
grep -q '^run r: succeeded' screen.txt || fail "watch on a terminal: $(cat screen.txt)"

# Failed, retried, failed again: watched afterwards, the second failure.
printf '[run]\nname = f\n[b]\nstage = exec\ncommand = if [ -e %s/twice ]; then echo second >&2; exit 4; fi; echo first >&2; exit 3\n' \
    "$TEST_TMP" >f.ini
pctl submit f.ini >/dev/null || fail "submit f"
wait_run f failed 30
touch twice
pctl retry f >/dev/null || fail "retry f"
wait_run f failed 30
pctl watch f >f.out 2>f.err
rc=$?
[ $rc = 6 ] || fail "watch of a run that failed again: exit $rc: $(cat f.out f.err)"
[ "$(grep -c ' run f failed' f.out)" = 2 ] || fail "watch stopped before the second failure: $(cat f.out)"
grep -q "b: the command exited with status 4" f.out || fail "watch does not show the second attempt's message: $(cat f.out)"
pl_stop
echo ok
