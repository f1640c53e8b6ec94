#!/bin/bash
# A pending job says why it waits, and no estimate pretends it does not:
# with one gpu (pipelined.conf [resources]) held by run holder's train,
# run wait's train (after prep) and run third's train wait for it.
#   - status says so in the job's message: the resource, its use, the run
#     and job that hold it, the place in the queue (1st, 2nd); --json as
#     the job's "wait" object; a job after another of its run waits for it;
#   - watch says it on the job's line and, on the run's line, that the time
#     left is unknown while the job waits (an earlier run of the same jobs
#     took a second: never "1s left"), on a terminal at 80 columns (tmux);
#     --plain prints a line when the reason changes, --json a "watch.wait"
#     object;
#   - once the gpu is free the jobs run in their order and the watch ends
#     with the run, exit 0.
# Runs against the real daemon and CLI of this tree and Debian's tmux.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/tmux.sh"
cd "$TEST_TMP"
PL_RESOURCES="gpu = 1" pl_conf
pl_start
trap tmux_kill EXIT
# spec NAME GATE: prep, train on the gpu until GATE exists, pack.
spec() {
	printf '[run]\nname = %s\n[prep]\nstage = exec\ncommand = true\n[train]\nstage = exec\nafter = prep\nresources = gpu\ncommand = while [ ! -e %s ]; do sleep 0.1; done\n[pack]\nstage = exec\nafter = train\ncommand = true\n' \
	    "$1" "$2" >"$1.ini"
}
# The same jobs earlier, done in a second: the history watch estimates by.
touch open
spec wait0 "$TEST_TMP/open"
pctl submit wait0.ini >/dev/null && wait_run wait0 succeeded 30
printf '[run]\nname = holder\n[train]\nstage = exec\nresources = gpu\ncommand = while [ ! -e %s/free ]; do sleep 0.1; done\n' \
    "$TEST_TMP" >holder.ini
pctl submit holder.ini >/dev/null || fail "submit holder"
for _ in $(seq 50); do [ "$(job_state holder train)" = running ] && break; sleep 0.1; done
spec wait "$TEST_TMP/open"
spec third "$TEST_TMP/open"
pctl submit wait.ini >/dev/null || fail "submit wait"
pctl submit third.ini >/dev/null || fail "submit third"
for _ in $(seq 50); do [ "$(job_state wait prep)" = succeeded ] && [ "$(job_state third prep)" = succeeded ] && break; sleep 0.1; done

pctl status wait >st.out
grep -Eq '^train +exec +pending +0 +- +waits for gpu \(1 of 1 in use\): held by run holder \(train\); 1st in line$' st.out ||
    fail "status does not say why train waits: $(cat st.out)"
grep -Eq '^pack +exec +pending +0 +- +waits for job train$' st.out || fail "status of pack: $(cat st.out)"
pctl status third | grep -Eq '^train .*waits for gpu \(1 of 1 in use\): held by run holder \(train\); 2nd in line$' ||
    fail "status of third: $(pctl status third)"
pctl --json status wait >st.json
/usr/bin/python3 - st.json <<'PY' || fail "status --json: $(cat st.json)"
import json, sys
j = {x["name"]: x for x in json.load(open(sys.argv[1]))["jobs"]}
w = j["train"]["wait"]
assert w == {"reason": "resource", "resource": "gpu", "need": 1, "used": 1, "capacity": 1,
             "place": 1, "held_by": ["holder/train"], "holders": 1}, w
assert j["pack"]["wait"] == {"reason": "after", "job": "train"}, j["pack"]
assert "wait" not in j["prep"], j["prep"]
PY

watch_all wait
tmux_until w screen.txt '^run wait: running, time left unknown' 100
awk 'length($0) > 79 { exit 1 }' screen.txt || fail "a line as wide as the terminal: $(cat screen.txt)"
grep -Eq '^train +pending +\[\.+\] waits for gpu, held by holder/train; 1st in line$' screen.txt ||
    fail "watch does not say why train waits: $(cat screen.txt)"
grep -Eq '^run wait: running, time left unknown while train waits for gpu, 1st in line$' screen.txt ||
    fail "the run's line does not say its time left is unknown: $(cat screen.txt)"
grep -q ' left' screen.txt && grep -v 'time left unknown' screen.txt | grep -q ' left' &&
    fail "an estimate while train waits: $(cat screen.txt)"
for _ in $(seq 50); do grep -q 'train waits' plain.out && grep -q watch.wait json.out && break; sleep 0.1; done
grep -Eq '^[0-9:]{8} train waits for gpu \(1 of 1 in use\): held by run holder \(train\); 1st in line$' plain.out ||
    fail "watch --plain does not say why train waits: $(cat plain.out)"
grep -q '"type":"watch.wait","job":"train",.*"reason":"resource","resource":"gpu"' json.out ||
    fail "watch --json has no watch.wait: $(cat json.out)"

touch free
wait_run wait succeeded 30
wait_run third succeeded 30
wait $WATCH_PLAIN || fail "watch --plain exited $?: $(cat plain.out)"
wait $WATCH_JSON || fail "watch --json exited $?"
tmux_until w screen.txt '^rc='
grep -q '^rc=0' screen.txt || fail "watch on a terminal: $(cat screen.txt)"
pl_stop
echo ok
