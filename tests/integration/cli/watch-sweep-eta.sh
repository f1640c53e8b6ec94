#!/bin/bash
# watch's time left covers a sweep's every variant: a sweep of three
# trainings on the one gpu (6 progress steps of a second each) and their
# bakes (a second each), after a run of the same spec unswept that gives
# the history. While the first variant trains, `pipelinectl --json watch`
# says the run's time left counts the other variants' queued trainings
# and bakes too (their history is the unswept jobs'), knows every job's
# estimate, and does not take the trainings that wait for the gpu held
# by the run's own training for a wait on another run. Runs against the
# real daemon and CLI of this tree.
. "$(dirname "$0")/../../lib.sh"
cd "$TEST_TMP"
pl_start
# spec NAME [SWEEP]: prep, train (on the gpu) and bake.
spec() {
	local step='echo "{\"type\":\"progress\",\"step\":$i,\"total\":6,\"unit\":\"optimizer-steps\"}" >>"$PL_EVENTS"'
	{
		printf '[run]\nname = %s\n\n[prep]\nstage = exec\ncommand = true\n\n' "$1"
		printf '[train]\nstage = exec\nafter = prep\nresources = gpu\nenv = R=4\n'
		printf 'command = for i in 1 2 3 4 5 6; do sleep 1; %s; done\n' "$step"
		[ -n "${2:-}" ] && printf 'sweep = %s\n' "$2"
		printf '\n[bake]\nstage = exec\nafter = train\ncommand = sleep 1\n'
	} >"$1.ini"
}
spec sw-v0
pctl submit sw-v0.ini >/dev/null || fail "submit sw-v0"
wait_run sw-v0 succeeded 60
spec sw-v1 "env: R=8 R=16 R=32"
pctl check sw-v1.ini | grep -qF "OK (run sw-v1, 7 jobs)" || fail "check sw-v1: $(pctl check sw-v1.ini 2>&1)"
pctl submit sw-v1.ini >/dev/null || fail "submit sw-v1"
pctl --json watch sw-v1 >watch.json 2>watch.err &
WATCH=$!
wait_run sw-v1 succeeded 90
wait "$WATCH" || fail "watch sw-v1 exited $?: $(cat watch.err)"
# The estimates given while train-1 ran, once watch knew why train-2
# and train-3 wait (the gpu, held by train-1).
/usr/bin/python3 - watch.json <<'PY' || fail "watch's estimates do not cover every variant: $(grep -E 'watch\.(eta|wait)' watch.json)"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
waited = False
checked = 0
for o in lines:
    if o.get("type") == "watch.wait" and o.get("job") == "train-2":
        assert o["wait"]["reason"] == "resource" and o["wait"]["held_by"] == ["sw-v1/train-1"], o
        waited = True
    if o.get("type") != "watch.eta" or o.get("job") != "train-1":
        continue
    if not waited or o["done"] < 2 or o["done"] >= 6:
        continue
    # train-1's rest, two trainings of about 6 s and three bakes of
    # about 1 s: about 21 - done seconds, one after another.
    assert o["run_unknown_jobs"] == 0, o
    assert "run_waiting_job" not in o, o
    assert 21 - o["done"] - 4 <= o["run_left_s"] <= 21 - o["done"] + 6, o
    checked += 1
assert waited, "no watch.wait for train-2"
assert checked > 0, "no estimate while train-1 ran"
print("checked", checked, "estimates")
PY
pl_stop
echo "cli/watch-sweep-eta: ok"
