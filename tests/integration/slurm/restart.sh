#!/bin/bash
# kill -9 of pipelined while one slurm job runs on the node and another
# waits in the queue behind it; while the daemon is down the running one
# ends (status 3). After a restart both are re-adopted by their Slurm job
# ids: the one that ended meanwhile gets its real outcome, the queued one
# runs exactly once and succeeds; nothing is submitted twice, events stay
# gapless and the store passes integrity_check.
# run.sh: alone (one Slurm cluster for all the slurm tests).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/slurm.sh"
trap 'pl_kill9 2>/dev/null; slurm_stop' EXIT
pl_conf "max_jobs = 8"
pl_start
S=$TEST_TMP/specs; mkdir -p "$S"; O=$TEST_TMP/out; mkdir -p "$O"
ncpu=$(sinfo -h -N -o %c | head -n 1)


# busy takes every CPU of the node, so waiter queues behind it.
cat > "$S/busy.ini" <<INI
[runner]
stage = exec
executor = slurm
sbatch_options = --cpus-per-task=$ncpu
command = echo start >> $O/runner; for i in 1 2 3 4; do echo "{\"type\":\"progress\",\"step\":\$i,\"total\":4}" >> \$PL_EVENTS; sleep 1; done; echo end >> $O/runner; exit 3
INI
cat > "$S/line.ini" <<INI
[waiter]
stage = exec
executor = slurm
command = echo "ran in \$SLURM_JOB_ID" >> $O/waiter; sleep 2
INI
pctl submit "$S/busy.ini" >/dev/null || fail "submit busy"
rid=""
for _ in $(seq 1 100); do
	rid=$(ext_ids busy runner)
	[ -n "$rid" ] && [ "$(slurm_state "$rid")" = RUNNING ] && break
	sleep 0.1
done
[ "$(slurm_state "$rid")" = RUNNING ] || fail "runner never ran (Slurm job '$rid')"
pctl submit "$S/line.ini" >/dev/null || fail "submit line"
wid=""
for _ in $(seq 1 100); do
	wid=$(ext_ids line waiter)
	[ -n "$wid" ] && [ "$(slurm_state "$wid")" = PENDING ] && break
	sleep 0.1
done
[ "$(slurm_state "$wid")" = PENDING ] || fail "waiter is not queued (Slurm job '$wid': $(slurm_state "$wid"))"
pl_kill9
note "daemon killed: runner $rid running, waiter $wid queued ($(squeue -h -j "$wid" -o %r))"
# While it is down, runner ends (status 3) and waiter starts.
for _ in $(seq 1 100); do
	case $(slurm_state "$rid") in RUNNING|COMPLETING|"") sleep 0.1;; *) break;; esac
done
[ "$(slurm_state "$rid")" = FAILED ] || fail "runner: Slurm says $(slurm_state "$rid") while the daemon is down"
pl_start
note "daemon restarted; waiter is $(slurm_state "$wid")"
wait_run busy failed 30
wait_run line succeeded 30
[ "$(db "SELECT status FROM procs WHERE ext_id='$rid'")" = 3 ] || fail "runner's stored status is not 3"
pctl status busy | grep -q "exited with status 3" || fail "busy's status does not show the real exit: $(pctl status busy)"
[ "$(db "SELECT attempts FROM jobs j JOIN runs r ON r.id = j.run_id WHERE r.name='busy'")" = 1 ] ||
    fail "runner was attempted again"
[ "$(wc -l < "$O/runner")" = 2 ] || fail "runner ran $(grep -c start "$O/runner") times"
[ "$(db "SELECT count(*) FROM procs WHERE executor='slurm'")" = 2 ] || fail "a job was submitted twice"
[ "$(cat "$O/waiter")" = "ran in $wid" ] || fail "waiter: $(cat "$O/waiter")"
[ "$(slurm_state "$wid")" = COMPLETED ] || fail "waiter: Slurm says $(slurm_state "$wid")"
[ "$(db "SELECT max(events_offset) > 0 FROM procs WHERE ext_id='$rid'")" = 1 ] || fail "runner's events were not read"
integrity_ok
events_gapless
pl_stop
echo "slurm/restart: ok"
