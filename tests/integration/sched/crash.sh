#!/bin/bash
# kill -9 of pipelined while jobs run: after a restart every job completes
# exactly once, a job that ended during the outage gets its true exit
# status from the shim's record, a job whose shim vanished is retried by
# policy, event ids stay gapless and the store passes integrity_check.
# run.sh: alone (kill -9 while jobs run: the moments are timed).
. "$(dirname "$0")/../../lib.sh"
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
vdir=$(ls -d "$TEST_TMP"/state/runs/vanish/victim/attempt-1/.shim/main)
vshim=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["shim_pid"])' "$vdir/shim.json")
vpg=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pgid"])' "$vdir/shim.json")
kill -9 "$vshim" "-$vpg"
sleep 2.5   # quick ends (status 7) while the daemon is down
[ -f "$TEST_TMP/state/runs/outage/quick/attempt-1/.shim/main/exit.json" ] || fail "the shim did not record quick's exit"
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
shim=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["shim_pid"])' "$TEST_TMP/state/runs/term/sleeper/attempt-1/.shim/main/shim.json")
kill -0 "$shim" 2>/dev/null || fail "SIGTERM took the job's shim down"
pl_start
wait_run term succeeded 30
[ "$(cat "$O/sleeper")" = "start
end" ] || fail "the job did not run exactly once across SIGTERM: $(cat "$O/sleeper")"
events_gapless
# A run's processes have one shim, the run's (pipeline-shim -G, a child
# of the daemon's pid: a split daemon's parent starts it, with -o and its
# daemon process's uid before -G): two jobs running at once share it,
# another run has its own; a program that does not exist is recorded as
# exit status 127.
cat > "$S/grp.ini" <<INI
[p1]
stage = exec
command = sleep 1.5
[p2]
stage = exec
command = sleep 1.5
[missing]
stage = exec
command = /nonexistent/program
INI
printf '[q1]\nstage = exec\ncommand = sleep 1.5\n' > "$S/other.ini"
pctl submit "$S/grp.ini" >/dev/null
pctl submit "$S/other.ini" >/dev/null
G=$TEST_TMP/state/runs
for _ in $(seq 1 50); do
	[ -f "$G/grp/p1/attempt-1/.shim/main/shim.json" ] && [ -f "$G/grp/p2/attempt-1/.shim/main/shim.json" ] &&
	    [ -f "$G/other/q1/attempt-1/.shim/main/shim.json" ] && break
	sleep 0.1
done
key() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
s1=$(key "$G/grp/p1/attempt-1/.shim/main/shim.json" shim_pid)
s2=$(key "$G/grp/p2/attempt-1/.shim/main/shim.json" shim_pid)
s3=$(key "$G/other/q1/attempt-1/.shim/main/shim.json" shim_pid)
[ "$s1" = "$s2" ] || fail "two jobs of a run have different shims: $s1 $s2"
[ "$s1" != "$s3" ] || fail "two runs share a shim"
tr '\0' ' ' < "/proc/$s1/cmdline" | grep -Eq "pipeline-shim (-o [0-9]+ )?-G " ||
    fail "$s1 is not a run shim: $(tr '\0' ' ' < "/proc/$s1/cmdline")"
[ "$(ps -o ppid= -p "$s1" | tr -d ' ')" = "$PL_PID" ] || fail "the run shim $s1 is not the daemon's ($PL_PID) child"
[ "$(ps -o ppid= -p "$(key "$G/grp/p1/attempt-1/.shim/main/shim.json" child_pid)" | tr -d ' ')" = "$s1" ] ||
    fail "p1's process is not the run shim's child"
wait_run grp failed 30
wait_run other succeeded 30
ex=$(cat "$G/grp/missing/attempt-1/.shim/main/exit.json")
echo "$ex" | grep -q '"status":127' || fail "missing program: exit record $ex"
grep -q "cannot run /nonexistent/program" "$G/grp/missing/job.log" || fail "missing program: no message in the job log"
# Once its run has ended, the run's shim goes.
alive() { ps -o stat= -p "$1" 2>/dev/null | grep -qv '^Z'; }   # a zombie waits to be reaped: gone
for _ in $(seq 1 50); do alive "$s1" || break; sleep 0.1; done
alive "$s1" && fail "the shim of an ended run is still there"
# A run shim killed while its run waits (a retry's backoff): the next
# attempt gets a new one.
cat > "$S/rshim.ini" <<INI
[flaky]
stage = exec
retries = 1
retry_backoff = 2s
command = [ \$PL_ATTEMPT -ge 2 ]
INI
pctl submit "$S/rshim.ini" >/dev/null
for _ in $(seq 1 50); do [ -f "$G/rshim/flaky/attempt-1/.shim/main/exit.json" ] && break; sleep 0.1; done
old=$(key "$G/rshim/flaky/attempt-1/.shim/main/shim.json" shim_pid)
kill -9 "$old"
wait_run rshim succeeded 30
new=$(key "$G/rshim/flaky/attempt-2/.shim/main/shim.json" shim_pid)
[ "$new" != "$old" ] || fail "the retry ran under the killed shim's pid"
integrity_ok
pl_stop
echo ok
