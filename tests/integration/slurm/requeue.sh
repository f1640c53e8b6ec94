#!/bin/bash
# A training job on the node is killed (scancel --signal=KILL) and Slurm
# requeues it (scontrol requeue, as a preemption or a node failure with
# --requeue does): the same Slurm job runs the batch script again, which
# resumes from the newest complete checkpoint (PL_RESUME_FROM) instead of
# starting over. The daemon follows the job through CANCELLED, PENDING
# (requeued) and RUNNING to its end in the same attempt, and the feed shows
# the requeue. The trainer is a small stand-in that speaks pipeline-job(7)
# and writes its checkpoints with jobs/pljob/ (tests/standins/slurm_train_standin.py).
# run.sh: alone (one Slurm cluster for all the slurm tests).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/slurm.sh"
trap 'pl_kill9 2>/dev/null; slurm_stop' EXIT
pl_conf "max_jobs = 8"
pl_start
S=$TEST_TMP/specs; mkdir -p "$S"; O=$TEST_TMP/out; mkdir -p "$O"


cat > "$S/tr.ini" <<INI
[train]
stage = exec
executor = slurm
time = 10
env = PLJOB_DIR=$TOP/jobs TRAIN_OUT=$O/train
command = /usr/bin/python3 $TOP/tests/standins/slurm_train_standin.py
INI
pctl submit "$S/tr.ini" >/dev/null || fail "submit"
ck=$TEST_TMP/state/runs/tr/train/work/checkpoints
for _ in $(seq 1 200); do [ -f "$ck/checkpoint-8/COMPLETE" ] && break; sleep 0.1; done
[ -f "$ck/checkpoint-8/COMPLETE" ] || fail "no checkpoint-8 (train: $(cat "$O/train" 2>/dev/null))"
id=$(db "SELECT ext_id FROM procs")
scancel --signal=KILL "$id" || fail "scancel"
# The daemon polls every second: it sees the job CANCELLED before the
# requeue, and must not take that for the end (it waits 3 s for one).
sleep 1.5
scontrol requeue "$id" || fail "requeue"
# A requeued job waits for a begin time Slurm sets some time ahead (once
# the requeue has gone through); let it go now.
# A requeued job waits for a begin time Slurm sets some time ahead; let it
# go once the requeue has gone through, but not within the second the old
# run's credential was revoked (slurmd would refuse to launch it: "Job
# credential revoked").
release_requeued "$id" || fail "the requeued job does not run: $(scontrol show job -o "$id")"
case $(slurm_field "$id" JobState) in
RUNNING|COMPLETED) ;;
*) fail "the requeued job does not run: $(scontrol show job -o "$id")";;
esac
note "Slurm job $id killed at $(ls "$ck" | grep -c '^checkpoint-[0-9]*$') checkpoints and requeued"
wait_run tr succeeded 60
[ "$(slurm_field "$id" Restarts)" = 1 ] || fail "Slurm counts $(slurm_field "$id" Restarts) restarts"
[ "$(slurm_field "$id" JobState)" = COMPLETED ] || fail "Slurm says $(slurm_field "$id" JobState)"
head -n 1 "$O/train" | grep -qx "start 0 restart 0" || fail "first run: $(head -n 1 "$O/train")"
second=$(sed -n 2p "$O/train")
case "$second" in
"start "*" restart 1") ;;
*) fail "no resumed run: $(cat "$O/train")";;
esac
step=${second#start }; step=${step%% *}
[ "$step" -ge 8 ] && [ $((step % 4)) -eq 0 ] && [ "$step" -lt 24 ] ||
    fail "resumed from step $step, not from a checkpoint of the first run"
[ "$(tail -n 1 "$O/train")" = "done 24" ] || fail "training did not finish: $(cat "$O/train")"
[ "$(wc -l < "$O/train")" = 3 ] || fail "the trainer ran more than twice: $(cat "$O/train")"
log=$TEST_TMP/state/runs/tr/train/job.log
grep -q "resuming from $ck/checkpoint-$step" "$log" || fail "the job log does not show the resume point"
grep -q "Slurm requeued job $id" "$log" || fail "the job log does not show the requeue"
[ "$(db "SELECT attempts FROM jobs")" = 1 ] || fail "the requeue became a new attempt"
[ "$(db "SELECT count(*) FROM procs")" = 1 ] || fail "a second Slurm job was submitted"
db "SELECT data FROM events WHERE type='job.proc'" | grep -q 'requeued, restart 1' ||
    fail "the feed does not show the requeue: $(db "SELECT data FROM events WHERE type='job.proc'")"
[ "$(db "SELECT progress_done FROM jobs")" = 24.0 ] || fail "progress: $(db "SELECT progress_done FROM jobs")"
integrity_ok
events_gapless
pl_stop
echo "slurm/requeue: ok (resumed from step $step)"
