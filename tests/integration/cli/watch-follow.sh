#!/bin/bash
# watch --follow follows a run through its revisions: `pipelinectl watch
# RUN --follow`, opened after RUN's first revision failed, shows that
# revision's end and stays open; a resubmit makes RUN@2, which it then
# follows (with --plain a line saying so, with --json a watch.revision
# object) to its end, and on to RUN@3. Without --follow, watch RUN ends at
# the revision's end (exit 6), and watch RUN@1 stays on revision 1 (it
# shows none of RUN@2's events); --follow with RUN@N is refused. Runs
# against the real daemon and CLI of this tree.
. "$(dirname "$0")/../../lib.sh"
cd "$TEST_TMP"
pl_start
# spec EXIT: one job that exits EXIT after it prints its revision's name.
spec() {
	printf '[run]\nname = r\n[a]\nstage = exec\ncommand = echo in $PL_RUN; sleep 0.5; exit %s\n' "$1" >r.ini
}
spec 3
pctl submit r.ini >/dev/null || fail "submit r"
wait_run r failed 30
pctl watch r --plain >once.out 2>&1 && fail "watch r exited 0 for a failed run"
grep -q ' run r failed' once.out || fail "watch r: $(cat once.out)"
pctl watch r --follow --plain >plain.out 2>plain.err &
WP=$!
pctl --json watch r --follow >json.out 2>json.err &
WJ=$!
for _ in $(seq 50); do grep -q ' run r failed' plain.out && grep -q '"state":"failed"' json.out && break; sleep 0.1; done
grep -q ' run r failed' plain.out || fail "watch --follow did not show r's end: $(cat plain.out plain.err)"
sleep 1
kill -0 $WP 2>/dev/null || fail "watch --plain --follow ended with the revision: $(cat plain.out plain.err)"
kill -0 $WJ 2>/dev/null || fail "watch --json --follow ended with the revision: $(cat json.err)"
spec 0
[ "$(pctl submit r.ini)" = r@2 ] || fail "the resubmit is not r@2"
wait_run r@2 succeeded 30
for _ in $(seq 50); do grep -q ' run r@2 succeeded' plain.out && grep -q '"run":"r@2".*"state":"succeeded"' json.out && break; sleep 0.1; done
cat plain.out
grep -q 'following run r@2 (revision 2)' plain.out || fail "watch --plain did not say it follows r@2"
grep -q ' run r@2 succeeded' plain.out || fail "watch --plain did not follow r@2 to its end: $(cat plain.out)"
grep -q '"type":"watch.revision","run":"r@2","revision":2' json.out || fail "no watch.revision for r@2: $(cat json.out)"
grep -q '"run":"r@2","type":"run.state","state":"succeeded"' json.out || fail "watch --json did not follow r@2: $(cat json.out)"
kill -0 $WP 2>/dev/null || fail "watch --follow ended after r@2"
spec 0
[ "$(pctl submit r.ini)" = r@3 ] || fail "the resubmit is not r@3"
wait_run r@3 succeeded 30
for _ in $(seq 50); do grep -q ' run r@3 succeeded' plain.out && break; sleep 0.1; done
grep -q ' run r@3 succeeded' plain.out || fail "watch --plain did not follow r@3: $(cat plain.out)"
kill $WP $WJ
wait $WP $WJ 2>/dev/null
# The revisions' events are each their own: r@1's failure is not shown as
# r@2's, and r@2's job ran once in r@2's lines.
[ "$(grep -c ' a succeeded' plain.out)" = 2 ] || fail "not two successes (r@2, r@3): $(cat plain.out)"
# Pinned: r@1 shows its own end and nothing of r@2 or r@3.
pctl watch r@1 --plain >pinned.out 2>&1 && fail "watch r@1 exited 0"
grep -q ' run r failed' pinned.out || fail "watch r@1: $(cat pinned.out)"
grep -q 'succeeded\|r@2' pinned.out && fail "watch r@1 showed a later revision: $(cat pinned.out)"
out=$(pctl watch r@1 --follow 2>&1) && fail "--follow with r@1 accepted"
echo "$out" | grep -qF -- "--follow follows a run's newest revisions: name the run without @N" ||
    fail "--follow with r@1: $out"
pl_stop
echo "cli/watch-follow: ok"
