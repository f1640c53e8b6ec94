#!/bin/bash
# DAG semantics on a real daemon: a diamond, a 100-way fan-out, failure
# propagation, retries with backoff, a timeout, cancel, and resource
# exclusivity checked from the jobs' own timestamps.
. "$(dirname "$0")/../../lib.sh"
pl_conf "max_jobs = 8"
pl_start
S=$TEST_TMP/specs; mkdir -p "$S"; O=$TEST_TMP/out; mkdir -p "$O"

# --- diamond: order from the jobs' own records
cat > "$S/diamond.ini" <<INI
[a]
stage = exec
command = echo a >> $O/order
[b]
stage = exec
after = a
command = sleep 0.3; echo b >> $O/order
[c]
stage = exec
after = a
command = echo c >> $O/order
[d]
stage = exec
after = b, c
command = echo d >> $O/order
INI
[ "$(pctl submit "$S/diamond.ini")" = "diamond" ] || fail "submit did not print the run name"
wait_run diamond succeeded
[ "$(head -1 "$O/order")" = a ] || fail "a did not run first"
[ "$(tail -1 "$O/order")" = d ] || fail "d did not run last"
[ "$(wc -l < "$O/order")" = 4 ] || fail "diamond ran $(wc -l < "$O/order") jobs"
note "diamond ok"

# --- 100-way fan-out
{
	echo "[root]"; echo "stage = exec"; echo "command = true"
	for i in $(seq 1 100); do
		echo "[leaf$i]"; echo "stage = exec"; echo "after = root"; echo "command = echo $i >> $O/fan"
	done
	echo "[sink]"; echo "stage = exec"
	printf 'after ='; for i in $(seq 1 100); do printf ' leaf%d' "$i"; done; echo
	echo "command = wc -l < $O/fan > $O/fan.count"
} > "$S/fan.ini"
pctl submit "$S/fan.ini" >/dev/null || fail "fan submit"
wait_run fan succeeded 120
[ "$(cat "$O/fan.count")" = 100 ] || fail "fan-out: sink saw $(cat "$O/fan.count") leaves"
[ "$(sort -n "$O/fan" | uniq | wc -l)" = 100 ] || fail "fan-out: leaves ran twice or not at all"
note "fan-out ok"

# --- failure propagation: b fails, c (after b) and d (after c) are skipped
cat > "$S/prop.ini" <<INI
[a]
stage = exec
command = true
[b]
stage = exec
after = a
command = echo broken >&2; exit 4
[c]
stage = exec
after = b
command = touch $O/c-ran
[d]
stage = exec
after = c
command = touch $O/d-ran
[e]
stage = exec
after = a
command = true
INI
pctl submit "$S/prop.ini" >/dev/null
wait_run prop failed
[ "$(job_state prop b)" = failed ] || fail "b not failed"
[ "$(job_state prop c)" = skipped ] || fail "c not skipped"
[ "$(job_state prop d)" = skipped ] || fail "d not skipped"
[ "$(job_state prop e)" = succeeded ] || fail "e (independent) did not succeed"
[ ! -e "$O/c-ran" ] && [ ! -e "$O/d-ran" ] || fail "a dependent of a failed job ran"
pctl status prop | grep -q "exited with status 4" || fail "status does not show the exit status"
pctl logs prop b | grep -q broken || fail "logs does not show the job's stderr"
note "propagation ok"

# --- retries with exponential backoff: fails twice, succeeds on the third
cat > "$S/retry.ini" <<INI
[flaky]
stage = exec
retries = 3
retry_backoff = 1s
command = date +%s.%N >> $O/flaky; [ \$(wc -l < $O/flaky) -ge 3 ]
INI
pctl submit "$S/retry.ini" >/dev/null
wait_run retry succeeded 30
[ "$(wc -l < "$O/flaky")" = 3 ] || fail "flaky ran $(wc -l < "$O/flaky") times, wanted 3"
/usr/bin/python3 - "$O/flaky" <<'PY' || fail "backoff not exponential"
import sys
t = [float(x) for x in open(sys.argv[1])]
d1, d2 = t[1] - t[0], t[2] - t[1]
print("# retry gaps %.2fs %.2fs" % (d1, d2))
assert d1 >= 0.9, d1
assert d2 >= 1.9, d2
PY
[ "$(db "SELECT count(*) FROM attempts a JOIN jobs j ON j.id=a.job_id JOIN runs r ON r.id=j.run_id WHERE r.name='retry'")" = 3 ] || fail "3 attempts not stored"
note "retries ok"

# --- retries exhausted
cat > "$S/exhaust.ini" <<INI
[never]
stage = exec
retries = 2
retry_backoff = 0.2s
command = echo x >> $O/never; exit 1
INI
pctl submit "$S/exhaust.ini" >/dev/null
wait_run exhaust failed 30
[ "$(wc -l < "$O/never")" = 3 ] || fail "never ran $(wc -l < "$O/never") times, wanted 1 + 2 retries"
note "retries exhausted ok"

# --- timeout: SIGTERM to the process group, then SIGKILL after the grace
cat > "$S/tmo.ini" <<INI
[slow]
stage = exec
timeout = 1s
command = trap 'echo got-term >> $O/tmo; sleep 30' TERM; sleep 30 & wait
INI
pctl submit "$S/tmo.ini" >/dev/null
wait_run tmo failed 30
pctl status tmo | grep -q "timed out" || fail "timeout not reported"
grep -q got-term "$O/tmo" || fail "the job did not get SIGTERM"
note "timeout ok"

# --- cancel: a running job is stopped, pending ones are cancelled
cat > "$S/cancel.ini" <<INI
[long]
stage = exec
command = sleep 60
[after_long]
stage = exec
after = long
command = touch $O/after-long
INI
pctl submit "$S/cancel.ini" >/dev/null
for _ in $(seq 1 50); do [ "$(job_state cancel long)" = running ] && break; sleep 0.1; done
pctl cancel cancel | grep -q cancelling || fail "cancel reply"
wait_run cancel cancelled 30
[ "$(job_state cancel long)" = cancelled ] || fail "long not cancelled"
[ "$(job_state cancel after_long)" = cancelled ] || fail "after_long not cancelled"
[ ! -e "$O/after-long" ] || fail "a job after a cancelled one ran"
pg=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pgid"])' "$TEST_TMP/state/runs/cancel/long/attempt-1/.shim/main/shim.json")
for _ in $(seq 1 30); do kill -0 -- "-$pg" 2>/dev/null || break; sleep 0.1; done
kill -0 -- "-$pg" 2>/dev/null && fail "the cancelled job's process group $pg survived"
note "cancel ok"

# --- resources: three gpu jobs never overlap; the others do not wait
cat > "$S/res.ini" <<INI
[g1]
stage = exec
resources = gpu
command = date +%s.%N > $O/g1; sleep 0.5; date +%s.%N >> $O/g1
[g2]
stage = exec
resources = gpu:1
command = date +%s.%N > $O/g2; sleep 0.5; date +%s.%N >> $O/g2
[g3]
stage = exec
resources = gpu
command = date +%s.%N > $O/g3; sleep 0.5; date +%s.%N >> $O/g3
[free]
stage = exec
command = date +%s.%N > $O/free; sleep 0.5; date +%s.%N >> $O/free
INI
pctl submit "$S/res.ini" >/dev/null
wait_run res succeeded 30
/usr/bin/python3 - "$O" <<'PY' || fail "gpu jobs overlapped"
import sys, itertools
iv = {}
for n in ("g1", "g2", "g3", "free"):
    a, b = [float(x) for x in open(sys.argv[1] + "/" + n)]
    iv[n] = (a, b)
for x, y in itertools.combinations(("g1", "g2", "g3"), 2):
    (a, b), (c, d) = iv[x], iv[y]
    assert b <= c or d <= a, (x, y, iv[x], iv[y])
# free ran alongside some gpu job
assert any(iv["free"][0] < iv[g][1] and iv[g][0] < iv["free"][1] for g in ("g1", "g2", "g3"))
PY
note "resources ok"

# --- retry RUN re-runs only what did not succeed and keeps artifacts
cat > "$S/again.ini" <<INI
[make]
stage = exec
command = echo once >> $O/make-count; echo data > out.txt; echo '{"type":"artifact","name":"out","path":"out.txt"}' >> \$PL_EVENTS
[use]
stage = exec
after = make
command = test -e $O/allow-use
INI
pctl submit "$S/again.ini" >/dev/null
wait_run again failed 30
touch "$O/allow-use"
pctl retry again | grep -q "1 job queued again" || fail "retry reply"
wait_run again succeeded 30
[ "$(wc -l < "$O/make-count")" = 1 ] || fail "retry re-ran a job that had succeeded"
pctl artifacts again | grep -q " out " || fail "the finished job's artifact was lost"
note "retry ok"

# --- a command of plain words that starts with a shell builtin runs
# through the shell, as make runs it: `exit 0` succeeds, `exit 3` fails
# with status 3 (run directly, both were "not found", 127); `true` still
# runs without a shell.
cat > "$S/builtin.ini" <<INI
[ok]
stage = exec
command = exit 0
[cd]
stage = exec
command = cd /
[three]
stage = exec
command = exit 3
INI
pctl submit "$S/builtin.ini" >/dev/null
wait_run builtin failed 30
[ "$(job_state builtin ok)" = succeeded ] || fail "command = exit 0: $(job_state builtin ok)"
[ "$(job_state builtin cd)" = succeeded ] || fail "command = cd /: $(job_state builtin cd)"
pctl status builtin | grep -q "exited with status 3" || fail "exit 3: $(pctl status builtin)"
note "shell builtins ok"

integrity_ok
events_gapless
pl_stop
echo "ok"
