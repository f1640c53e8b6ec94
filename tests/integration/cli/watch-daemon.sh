#!/bin/bash
# watch says at once that the daemon went away, that it is reconnecting
# and until when, resumes by itself when the daemon is back and says so:
# the daemon is killed -9 while a run's job runs (watched on a terminal at
# 80 columns under tmux, with --plain and with --json); within two
# seconds each says it is gone and reconnecting, for two minutes; the
# daemon started again re-adopts the job, each says it is back and
# follows the run to its end, exit 0. Without a daemon that comes back,
# watch gives up with exit 5 (pipelinectl(1) EXIT STATUS) once its
# reconnection window is over; that takes two minutes and is left to the
# page.
# Runs against the real daemon and CLI of this tree and Debian's tmux.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/tmux.sh"
cd "$TEST_TMP"
pl_start
trap 'tmux_kill; pl_kill9' EXIT
printf '[run]\nname = d\n[a]\nstage = exec\ncommand = while [ ! -e %s/go ]; do sleep 0.1; done\n[b]\nstage = exec\nafter = a\ncommand = true\n' \
    "$TEST_TMP" >d.ini
pctl submit d.ini >/dev/null || fail "submit d"
for _ in $(seq 50); do [ "$(job_state d a)" = running ] && break; sleep 0.1; done
watch_all d
sleep 1.5
pl_kill9
sleep 2
tmux_until w gone.txt . 1
grep -Eq '^pipelined is gone; reconnecting until [0-9:]{8}, 1m5[0-9]s left \(connection refused\)$' gone.txt ||
    fail "the terminal view does not say the daemon is gone: $(cat gone.txt)"
awk 'length($0) > 79 { exit 1 }' gone.txt || fail "a line as wide as the terminal: $(cat gone.txt)"
grep -Eq '^[0-9:]{8} pipelined is gone \(.*\); reconnecting every second until [0-9:]{8} \(2m00s\)$' plain.out ||
    fail "watch --plain does not say the daemon is gone: $(cat plain.out)"
grep -q '"type":"watch.daemon","state":"gone",.*"retry_s":120' json.out ||
    fail "watch --json does not say the daemon is gone: $(tail -3 json.out)"
kill -0 $WATCH_PLAIN 2>/dev/null || fail "watch --plain gave up at once: $(cat plain.err)"
pl_start
sleep 2
tmux_until w back.txt . 1
grep -Eq '^pipelined is back after [0-9]+s; following the run again$' back.txt ||
    fail "the terminal view does not say the daemon is back: $(cat back.txt)"
grep -q 'pipelined is gone' back.txt && fail "the terminal view still says the daemon is gone: $(cat back.txt)"
grep -Eq '^[0-9:]{8} pipelined is back after [0-9]+s; following run d again after event [0-9]+$' plain.out ||
    fail "watch --plain does not say the daemon is back: $(cat plain.out)"
grep -q '"type":"watch.daemon","state":"back",.*"since":' json.out ||
    fail "watch --json does not say the daemon is back: $(tail -3 json.out)"
touch go
wait_run d succeeded 30
wait $WATCH_PLAIN || fail "watch --plain exited $?: $(cat plain.out plain.err)"
wait $WATCH_JSON || fail "watch --json exited $?: $(cat json.err)"
tail -1 plain.out | grep -q ' run d succeeded' || fail "watch --plain did not follow to the end: $(cat plain.out)"
tmux_until w screen.txt '^rc='
grep -q '^rc=0' screen.txt || fail "watch on a terminal: $(cat screen.txt)"
# Every event once: the resumed feed starts after the last one seen.
[ "$(grep -c '"type":"run.state".*"succeeded"' json.out)" = 1 ] || fail "watch --json: events twice: $(cat json.out)"
pl_stop
echo ok
