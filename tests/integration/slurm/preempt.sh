#!/bin/bash
# Preemption: a training job (the stand-in of tests/standins/slurm_train_standin.py)
# holds every CPU of the node in the default partition when a job of the
# higher-priority "urgent" partition arrives; Slurm preempts the training
# and requeues it (PreemptMode=REQUEUE). When it runs again, in the same
# Slurm job and attempt, it resumes from its newest complete checkpoint;
# the feed shows it queued again with Slurm's reason, and the run succeeds.
# Then the same for a node failure (the node set DOWN under the job).
# run.sh: alone (one Slurm cluster for all the slurm tests).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/slurm.sh"
trap 'pl_kill9 2>/dev/null; slurm_stop' EXIT
pl_conf "max_jobs = 8"
pl_start
S=$TEST_TMP/specs; mkdir -p "$S"; O=$TEST_TMP/out; mkdir -p "$O"
ncpu=$(sinfo -h -N -o %c | head -n 1)
cat > "$S/pre.ini" <<INI
[train]
stage = exec
executor = slurm
sbatch_options = --cpus-per-task=$ncpu
env = PLJOB_DIR=$TOP/jobs TRAIN_OUT=$O/train
command = /usr/bin/python3 $TOP/tests/standins/slurm_train_standin.py
INI
pctl submit "$S/pre.ini" >/dev/null || fail "submit"
ck=$TEST_TMP/state/runs/pre/train/work/checkpoints
for _ in $(seq 1 200); do [ -f "$ck/checkpoint-8/COMPLETE" ] && break; sleep 0.1; done
[ -f "$ck/checkpoint-8/COMPLETE" ] || fail "no checkpoint-8 (train: $(cat "$O/train" 2>/dev/null))"
id=$(ext_ids pre train)
[ "$(slurm_state "$id")" = RUNNING ] || fail "train is $(slurm_state "$id")"
uid=$(sbatch --parsable -p urgent -c 1 -o /dev/null --wrap 'sleep 2') || fail "urgent sbatch"
for _ in $(seq 1 50); do [ "$(slurm_field "$id" Restarts)" = 1 ] && break; sleep 0.1; done
[ "$(slurm_field "$id" Restarts)" = 1 ] || fail "train was not preempted: $(scontrol show job -o "$id")"
grep -q "JOB $id ON .* DUE TO PREEMPTION" "$TEST_TMP/state/runs/pre/train/job.log" ||
    fail "the job log does not show the preemption"
note "Slurm job $id preempted by $uid"
release_requeued "$id" || fail "the preempted job does not run again: $(scontrol show job -o "$id")"
wait_run pre succeeded 60
[ "$(slurm_state "$uid")" = COMPLETED ] || fail "the urgent job: $(slurm_state "$uid")"
second=$(sed -n 2p "$O/train")
case "$second" in "start "*" restart 1") ;; *) fail "no resumed run: $(cat "$O/train")";; esac
step=${second#start }; step=${step%% *}
[ "$step" -ge 8 ] && [ $((step % 4)) -eq 0 ] && [ "$step" -lt 24 ] || fail "resumed from step $step"
[ "$(tail -n 1 "$O/train")" = "done 24" ] || fail "training did not finish: $(cat "$O/train")"
db "SELECT data FROM events WHERE type='job.proc'" | grep -q '"state":"queued","reason":"[A-Za-z]* (requeued, restart 1)"' ||
    fail "the feed does not show the requeue: $(db "SELECT data FROM events WHERE type='job.proc'")"
[ "$(db "SELECT attempts FROM jobs")" = 1 ] || fail "the preemption became a new attempt"
[ "$(db "SELECT count(*) FROM procs")" = 1 ] || fail "a second Slurm job was submitted"
[ "$(db "SELECT end_class FROM procs")" = "" ] || fail "end class '$(db "SELECT end_class FROM procs")' for a job that completed"
note "preemption ok (resumed from step $step)"

# --- node failure: the node goes DOWN under the training; Slurm requeues
# it (--requeue) and it resumes once the node is back.
node=$(sinfo -h -N -o %N | head -n 1)
cp "$S/pre.ini" "$S/nf.ini"
pctl submit "$S/nf.ini" >/dev/null || fail "submit nf"
ck=$TEST_TMP/state/runs/nf/train/work/checkpoints
for _ in $(seq 1 200); do [ -f "$ck/checkpoint-8/COMPLETE" ] && break; sleep 0.1; done
[ -f "$ck/checkpoint-8/COMPLETE" ] || fail "nf: no checkpoint-8"
id=$(ext_ids nf train)
scontrol update NodeName="$node" State=DOWN Reason=pipelined-test || fail "node down"
for _ in $(seq 1 50); do [ "$(slurm_field "$id" Restarts)" = 1 ] && break; sleep 0.1; done
[ "$(slurm_field "$id" Restarts)" = 1 ] || fail "nf: not requeued after the node failed: $(scontrol show job -o "$id")"
# ReturnToService=2 brings the node back when its slurmd registers; help it.
scontrol update NodeName="$node" State=RESUME 2>/dev/null || true
grep -q "JOB $id ON .* DUE TO NODE FAILURE" "$TEST_TMP/state/runs/nf/train/job.log" ||
    fail "the job log does not show the node failure"
release_requeued "$id" || fail "nf: the requeued job does not run: $(scontrol show job -o "$id")"
wait_run nf succeeded 60
n=$(grep -c '^start ' "$O/train")
last=$(grep '^start ' "$O/train" | tail -n 1)
case "$last" in "start "*" restart 1") ;; *) fail "nf: no resumed run: $(cat "$O/train")";; esac
step=${last#start }; step=${step%% *}
[ "$step" -ge 8 ] && [ $((step % 4)) -eq 0 ] || fail "nf: resumed from step $step"
[ "$n" = 4 ] || fail "the trainer started $n times over both runs, not 4"
[ "$(db "SELECT count(*) FROM procs")" = 2 ] || fail "nf: a second Slurm job was submitted"
note "node failure ok (resumed from step $step)"
integrity_ok
events_gapless
pl_stop
echo "slurm/preempt: ok"
