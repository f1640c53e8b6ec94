#!/bin/bash
# kill -9 of pipelined while jobs run: after a restart every job completes
# exactly once, a job that ended during the outage gets its true exit
# status from the shim's record, a job whose shim vanished is retried by
# policy, event ids stay gapless and the store passes integrity_check.
. "$(dirname "$0")/../lib.sh"
pl_conf "max_jobs = 8"
pl_start
S=$TEST_TMP/specs; mkdir -p "$S"; O=$TEST_TMP/out; mkdir -p "$O"

cat > "$S/crash.ini" <<INI
[j1]
stage = exec
command = echo start >> $O/j1; for i in 1 2 3 4; do echo "{\"type\":\"progress\",\"step\":\$i,\"total\":4}" >> \$PL_EVENTS; sleep 1; done; echo end >> $O/j1
[j2]
stage = exec
command = echo start >> $O/j2; sleep 4; echo end >> $O/j2
[j3]
stage = exec
command = echo start >> $O/j3; sleep 4; echo end >> $O/j3
[after]
stage = exec
after = j1, j2, j3
command = echo start >> $O/after
INI
cat > "$S/outage.ini" <<INI
[quick]
stage = exec
command = sleep 1.5; exit 7
INI
cat > "$S/vanish.ini" <<INI
[victim]
stage = exec
retries = 1
retry_backoff = 0.1s
command = echo attempt \$PL_ATTEMPT >> $O/victim; [ \$PL_ATTEMPT -ge 2 ] || sleep 60
INI
pctl submit "$S/crash.ini" >/dev/null
pctl submit "$S/outage.ini" >/dev/null
pctl submit "$S/vanish.ini" >/dev/null
for _ in $(seq 1 50); do
	n=$(db "SELECT count(*) FROM jobs WHERE state='running'")
	[ "$n" = 5 ] && break
	sleep 0.1
done
[ "$n" = 5 ] || fail "expected 5 running jobs, have $n"
sleep 0.5
pl_kill9
note "daemon killed with 5 jobs running"
# While it is down: the victim's shim and job vanish without a record.
vdir=$(ls -d "$TEST_TMP"/state/runs/vanish/victim/attempt-1/main)
vshim=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["shim_pid"])' "$vdir/shim.json")
vpg=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pgid"])' "$vdir/shim.json")
kill -9 "$vshim" "-$vpg"
sleep 2.5   # quick ends (status 7) while the daemon is down
[ -f "$TEST_TMP/state/runs/outage/quick/attempt-1/main/exit.json" ] || fail "the shim did not record quick's exit"
pl_start
note "daemon restarted"
wait_run crash succeeded 30
wait_run outage failed 30
wait_run vanish succeeded 30
for j in j1 j2 j3; do
	[ "$(grep -c start "$O/$j")" = 1 ] || fail "$j started $(grep -c start "$O/$j") times"
	[ "$(grep -c end "$O/$j")" = 1 ] || fail "$j ended $(grep -c end "$O/$j") times"
done
[ "$(wc -l < "$O/after")" = 1 ] || fail "after ran $(wc -l < "$O/after") times"
pctl status outage | grep -q "exited with status 7" || { pctl status outage; fail "quick's true exit status not recorded"; }
[ "$(cat "$O/victim")" = "attempt 1
attempt 2" ] || fail "the vanished job was not retried once: $(cat "$O/victim")"
# j1's progress made it to the store across the restart, each step once.
[ "$(db "SELECT progress_done FROM jobs WHERE name='j1'")" = 4.0 ] || fail "j1 progress not complete"
steps=$(db "SELECT count(*) FROM events WHERE job='j1' AND type='job.progress'")
[ "$steps" = 4 ] || fail "j1 progress events: $steps, wanted each of 4 steps once"
integrity_ok
events_gapless
# A second kill while idle, then a restart: the same truth.
before=$(db "SELECT group_concat(name||':'||state) FROM jobs ORDER BY id")
pl_kill9
pl_start
after=$(db "SELECT group_concat(name||':'||state) FROM jobs ORDER BY id")
[ "$before" = "$after" ] || fail "state changed across an idle restart"
events_gapless
# SIGTERM stops the daemon but leaves a running job under its shim; the
# next daemon re-adopts it and it completes once.
cat > "$S/term.ini" <<INI
[sleeper]
stage = exec
command = echo start >> $O/sleeper; sleep 2; echo end >> $O/sleeper
INI
pctl submit "$S/term.ini" >/dev/null
for _ in $(seq 1 50); do [ -s "$O/sleeper" ] && break; sleep 0.1; done
pl_stop
out=$(pctl status 2>&1) && fail "pipelinectl status succeeded with no daemon"
[ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "pipelined is not running" || fail "no-daemon message: $out"
shim=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["shim_pid"])' "$TEST_TMP/state/runs/term/sleeper/attempt-1/main/shim.json")
kill -0 "$shim" 2>/dev/null || fail "SIGTERM took the job's shim down"
pl_start
wait_run term succeeded 30
[ "$(cat "$O/sleeper")" = "start
end" ] || fail "the job did not run exactly once across SIGTERM: $(cat "$O/sleeper")"
events_gapless
# The shim zygote (the one long-lived pipeline-shim -Z that forks the
# per-job shims) killed: the next job gets a new zygote and runs; a program
# that does not exist is recorded by its shim as exit status 127.
printf '[first]\nstage = exec\ncommand = true\n' > "$S/zyg1.ini"
pctl submit "$S/zyg1.ini" >/dev/null
wait_run zyg1 succeeded 30
zyg=$(pgrep -f "pipeline-shim -Z" -P "$PL_PID" | head -1)
[ -n "$zyg" ] || fail "no shim zygote under the daemon"
kill -9 "$zyg"
cat > "$S/zyg.ini" <<INI
[after-zygote]
stage = exec
command = echo ran >> $O/zyg
[missing]
stage = exec
command = /nonexistent/program
INI
pctl submit "$S/zyg.ini" >/dev/null
wait_run zyg failed 30
[ "$(cat "$O/zyg")" = ran ] || fail "no job ran after the zygote was killed"
[ "$(db "SELECT state FROM jobs WHERE name = 'after-zygote'")" = succeeded ] || fail "after-zygote did not succeed"
ex=$(cat "$TEST_TMP/state/runs/zyg/missing/attempt-1/main/exit.json")
echo "$ex" | grep -q '"status":127' || fail "missing program: exit record $ex"
grep -q "cannot run /nonexistent/program" "$TEST_TMP/state/runs/zyg/missing/job.log" || fail "missing program: no message in the job log"
zyg2=$(pgrep -f "pipeline-shim -Z" -P "$PL_PID" | head -1)
[ -n "$zyg2" ] && [ "$zyg2" != "$zyg" ] || fail "no new zygote"
integrity_ok
pl_stop
echo ok
