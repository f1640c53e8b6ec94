#!/bin/bash
# The slurm executor on a real single-node Slurm (tests/tools/slurm-cluster.sh):
# jobs of a DAG go through sbatch; success with events read from the job
# directory; a failing job and its retry (two Slurm jobs, the first FAILED
# with the real exit status); a job held pending by an unsatisfiable request
# (a partition's time limit) shows Slurm's reason on the feed and in
# `pipelinectl status`; a submission sbatch refuses fails with sbatch's message;
# `pipelinectl cancel` scancels queued and running jobs; a slurm job holds no
# local resource; a job over its memory limit ends with the class oom.
# run.sh: alone (one Slurm cluster for all the slurm tests).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/slurm.sh"
trap 'pl_kill9 2>/dev/null; slurm_stop' EXIT
pl_conf "max_jobs = 8"
printf '[slurm]\npartition = debug\n' >> "$PL_CONF"
pl_start
S=$TEST_TMP/specs; mkdir -p "$S"; O=$TEST_TMP/out; mkdir -p "$O"


# --- success and a failing job with its retry, after it in the DAG
cat > "$S/basic.ini" <<INI
[hello]
stage = exec
executor = slurm
command = echo "job \$SLURM_JOB_ID on \$SLURMD_NODENAME" > $O/hello; for i in 1 2 3; do echo "{\"type\":\"progress\",\"step\":\$i,\"total\":3}" >> \$PL_EVENTS; done
[flaky]
stage = exec
executor = slurm
after = hello
retries = 1
retry_backoff = 0.1s
command = echo "attempt \$PL_ATTEMPT in \$SLURM_JOB_ID" >> $O/flaky; [ \$PL_ATTEMPT -ge 2 ] || exit 5
INI
pctl submit "$S/basic.ini" >/dev/null || fail "submit basic"
wait_run basic succeeded 60
grep -q "^job [0-9][0-9]* on " "$O/hello" || fail "hello did not run under Slurm: $(cat "$O/hello")"
hid=$(ext_ids basic hello)
[ -n "$hid" ] || fail "no Slurm job id stored for hello"
grep -q "^job $hid on " "$O/hello" || fail "stored job id $hid is not the one that ran: $(cat "$O/hello")"
[ "$(slurm_state "$hid")" = COMPLETED ] || fail "Slurm says hello is $(slurm_state "$hid")"
[ "$(db "SELECT progress_done FROM jobs WHERE name='hello'")" = 3.0 ] ||
    [ "$(db "SELECT progress_done FROM jobs WHERE name='hello'")" = 3 ] ||
    fail "hello's progress events were not read: $(db "SELECT progress_done FROM jobs WHERE name='hello'")"
fids=$(ext_ids basic flaky | tr '\n' ' ')
set -- $fids
[ $# -eq 2 ] || fail "flaky: expected two Slurm jobs, got '$fids'"
[ "$1" != "$2" ] || fail "flaky: the retry reused Slurm job $1"
[ "$(slurm_state "$1")" = FAILED ] || fail "flaky attempt 1: Slurm says $(slurm_state "$1")"
[ "$(slurm_state "$2")" = COMPLETED ] || fail "flaky attempt 2: Slurm says $(slurm_state "$2")"
scontrol show job -o "$1" | grep -q "ExitCode=5:0" || fail "flaky attempt 1: Slurm did not record exit 5"
[ "$(db "SELECT status FROM procs WHERE ext_id='$1'")" = 5 ] || fail "flaky attempt 1: stored status is not 5"
grep -q "exited with status 5" "$TEST_TMP/state/runs/basic/flaky/job.log" ||
    fail "flaky's log does not give the first attempt's status"
[ "$(wc -l < "$O/flaky")" = 2 ] || fail "flaky ran $(wc -l < "$O/flaky") times"
note "success, failure and retry ok (Slurm jobs $hid, $fids)"

# --- pending with a reason, sbatch refusal, cancel, and no local resource
cat > "$S/held.ini" <<INI
[stuck]
stage = exec
executor = slurm
partition = short
time = 30
command = touch $O/stuck-ran
[refused]
stage = exec
executor = slurm
sbatch_options = --gres=nosuch:1
command = touch $O/refused-ran
[long]
stage = exec
executor = slurm
resources = gpu
command = echo started > $O/long; sleep 60; touch $O/long-finished
[local]
stage = exec
resources = gpu
command = sleep 2; touch $O/local-done
INI
pctl submit "$S/held.ini" >/dev/null || fail "submit held"
sid=""; reason=""
for _ in $(seq 1 100); do
	reason=$(db "SELECT data FROM events WHERE type='job.proc' AND job='stuck' AND data LIKE '%queued%' ORDER BY id DESC LIMIT 1")
	case "$reason" in *Partition*) break;; esac
	sleep 0.1
done
case "$reason" in
*PartitionTimeLimit*|*PartitionConfig*) ;;
*) fail "stuck: no pending reason on the feed (last job.proc event: '$reason')";;
esac
sid=$(ext_ids held stuck)
squeue -h -j "$sid" -o %r | grep -q Partition || fail "Slurm does not hold $sid for its partition"
for _ in $(seq 1 30); do pctl status held | grep -q "queued as $sid: Partition" && break; sleep 0.1; done
pctl status held | grep -q "queued as $sid: Partition" ||
    fail "status does not show why stuck waits: $(pctl status held)"
note "stuck is pending: $reason"
for _ in $(seq 1 100); do [ -f "$O/long" ] && [ -f "$O/local-done" ] && break; sleep 0.1; done
[ -f "$O/long" ] || fail "long never started on the node"
[ -f "$O/local-done" ] || fail "the local gpu job did not run while the slurm job held gpu (it must not)"
[ "$(job_state held refused)" = failed ] || { sleep 2; [ "$(job_state held refused)" = failed ]; } ||
    fail "refused: $(job_state held refused)"
grep -q "sbatch refused the job: .*[Ii]nvalid" "$TEST_TMP/state/runs/held/refused/job.log" ||
    fail "refused: the job log lacks sbatch's message: $(cat "$TEST_TMP/state/runs/held/refused/job.log")"
[ ! -e "$O/refused-ran" ] || fail "refused ran"
lid=$(ext_ids held long)
[ "$(slurm_state "$lid")" = RUNNING ] || fail "long: Slurm says $(slurm_state "$lid")"
pctl cancel held >/dev/null || fail "cancel"
wait_run held cancelled 30
for id in "$sid" "$lid"; do
	st=$(slurm_state "$id")
	case "$st" in CANCELLED|FAILED) ;; *) fail "Slurm job $id is $st after cancel";; esac
done
squeue -h -j "$sid,$lid" -t PD,R,CG | grep -q . && fail "cancelled jobs still in the queue: $(squeue -h -j "$sid,$lid")"
[ ! -e "$O/stuck-ran" ] || fail "stuck ran"
[ ! -e "$O/long-finished" ] || fail "long was not stopped"
[ "$(db "SELECT end_class FROM procs WHERE ext_id='$sid'")" = cancelled ] || fail "stuck: end class is not cancelled"
grep -q "Slurm job $lid CANCELLED" "$TEST_TMP/state/runs/held/long/job.log" || fail "long's log does not show Slurm's ending"
note "pending reason, refusal, cancel and resources ok"

# --- a job over its --mem is killed by Slurm and recorded as out of memory
cat > "$S/mem.ini" <<INI
[hog]
stage = exec
executor = slurm
mem = 100M
command = /usr/bin/python3 -c 'import time; a = [bytearray(1 << 20) for _ in range(400)]; time.sleep(3); print("survived")'
INI
pctl submit "$S/mem.ini" >/dev/null || fail "submit mem"
wait_run mem failed 60
[ "$(db "SELECT end_class FROM procs WHERE ext_id='$(ext_ids mem hog)'")" = oom ] ||
    fail "hog: end class '$(db "SELECT end_class FROM procs WHERE ext_id='$(ext_ids mem hog)'")', not oom"
grep -q "class oom" "$TEST_TMP/state/runs/mem/hog/job.log" || fail "hog's log does not say out of memory"
grep -q survived "$TEST_TMP/state/runs/mem/hog/job.log" && fail "hog was not stopped at its memory limit"
note "memory limit ok"
integrity_ok
events_gapless
pl_stop
echo "slurm/jobs: ok"
