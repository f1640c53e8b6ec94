#!/bin/bash
# A sweep's variants take the one gpu in their order: when a variant's
# training ends, the gpu is kept for that variant's bake (which asks for
# it too) rather than given to the next variant's training, and the
# light job between them runs alone. While it runs, status says why the
# next training waits ("kept for bake-1"), and watch does not take that
# wait for one on another run. A bake that asks for no gpu runs beside
# the next training, as before. exec jobs that log when they start and
# end, against a real pipelined.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
cd "$TEST_TMP"
# spec NAME BAKE_RESOURCES: prep, then per variant train (gpu), light
# (none), bake (BAKE_RESOURCES).
spec() {
	local log="$TEST_TMP/$1.log" res=""
	[ -n "$2" ] && res="resources = $2"
	cat >"$1.ini" <<INI
[run]
name = $1

[prep]
stage = exec
command = true

[train]
stage = exec
after = prep
resources = gpu
env = V=0
command = sh -c 'echo "start \$PL_JOB" >>$log; sleep 2; echo "end \$PL_JOB" >>$log'
sweep = env: V=1 V=2 V=3

[light]
stage = exec
after = train
command = sh -c 'echo "start \$PL_JOB" >>$log; sleep 3; echo "end \$PL_JOB" >>$log'

[bake]
stage = exec
after = light
$res
command = sh -c 'echo "start \$PL_JOB" >>$log; sleep 2; echo "end \$PL_JOB" >>$log'
INI
}
pl_start
spec kept gpu
pctl submit kept.ini >/dev/null || fail "submit kept"
# While light-1 runs, train-2 waits for the gpu kept for bake-1.
for i in $(seq 100); do
	grep -q "start light-1" kept.log 2>/dev/null && ! grep -q "end light-1" kept.log && break
	sleep 0.1
done
grep -q "start light-1" kept.log || fail "light-1 did not start: $(cat kept.log 2>&1)"
pctl --json status kept >st.json || fail "status kept"
pctl status kept >st.txt
/usr/bin/python3 - st.json <<'PY' || fail "train-2's wait while light-1 runs: $(grep -A12 '"train-2"' st.json | head -30)"
import json, sys
jobs = {j["name"]: j for j in json.load(open(sys.argv[1]))["jobs"]}
assert jobs["light-1"]["state"] == "running", jobs["light-1"]["state"]
w = jobs["train-2"]["wait"]
assert w["reason"] == "resource" and w["resource"] == "gpu", w
assert w["used"] == 0 and w["capacity"] == 1 and w["held_by"] == [], w
assert w["kept_for"] == "bake-1" and w["kept"] == 1, w
PY
grep -q "train-2 .*kept for bake-1" st.txt || fail "status does not say why train-2 waits: $(cat st.txt)"
wait_run kept succeeded 90
# The order: each variant's chain whole before the next one's training.
got=$(tr '\n' ' ' <kept.log)
want="start train-1 end train-1 start light-1 end light-1 start bake-1 end bake-1 start train-2 end train-2 start light-2 end light-2 start bake-2 end bake-2 start train-3 end train-3 start light-3 end light-3 start bake-3 end bake-3 "
[ "$got" = "$want" ] || fail "kept: the variants interleaved: $got"
note "gpu bakes: train-1 .. bake-1, then train-2 .. bake-2, then train-3 .. bake-3"

# A bake on no gpu: the next training starts when the last one ends, and
# the earlier variant's light job and bake run beside it.
spec free ""
pctl submit free.ini >/dev/null || fail "submit free"
wait_run free succeeded 90
# train-2 starts before light-1 ends: they run side by side.
order=$(grep -n -e "start train-2" -e "end light-1" free.log | cut -d: -f2 | tr '\n' ' ')
[ "$order" = "start train-2 end light-1 " ] ||
	fail "free: light-1 did not run beside train-2: $(tr '\n' ' ' <free.log)"
note "no-gpu bakes: train-2 beside light-1 and bake-1"
pl_stop
echo ok
