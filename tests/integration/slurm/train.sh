#!/bin/bash
# The real train stage (tiny engine) with executor = slurm: its launch is a
# Slurm job. After checkpoint-25 the job is killed on the node
# (scancel --signal=KILL) and requeued (scontrol requeue); the batch script
# resumes jobs/train.py from checkpoint-25 (PL_RESUME_FROM) in the same
# Slurm job, launch and attempt. The stored loss curve holds every step once
# and the adapter is bit-identical to an uninterrupted run's, so the
# training was resumed, not started over. The daemon is split (as root with
# a group): train runs in a stage process, which submits the launch itself;
# a kill -9 of the daemon meanwhile loses nothing. A member's run of the
# same training is the member's Slurm job, with the same adapter, and the
# member's cancel of another reaches Slurm.
# run.sh: alone (one Slurm cluster for all the slurm tests).
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
. "$TOP/tests/lib/slurm.sh"
trap 'cleanup; pl_kill9 2>/dev/null || true; slurm_stop || true' EXIT
setup_tokens 40
common=(engine=tiny base="$BASE" tokens="$TOKENS" max_steps=45 save_steps=25
    gradient_accumulation_steps=1 lora_r=4 launch_backoff=0.1)
adapter_sha() {
	sed -n 's/^job.artifact {"name":"adapter".*"sha256":"\([0-9a-f]*\)".*/\1/p' "$1"
}
"$CTL" stage train -w "$TEST_TMP/ref" "${common[@]}" >"$TEST_TMP/ref.out" 2>&1 ||
    { cat "$TEST_TMP/ref.out"; die "the uninterrupted run failed"; }
ref=$(adapter_sha "$TEST_TMP/ref.out")
[ -n "$ref" ] || die "no adapter from the uninterrupted run"

mkdir -p "$TEST_TMP/specs"
{
	echo "[train]"
	echo "executor = slurm"
	echo "time = 10"
	echo "mem = 2G"
	for kv in "${common[@]}"; do echo "${kv%%=*} = ${kv#*=}"; done
} >"$TEST_TMP/specs/st.ini"
# A split daemon (the tests' default as root) runs train in a stage
# process on this host, which submits the launch to Slurm itself.
pl_conf
pl_start
pctl submit "$TEST_TMP/specs/st.ini" >/dev/null || die "submit"
ck=$TEST_TMP/state/runs/st/train/work/checkpoints
for _ in $(seq 1 1200); do [ -f "$ck/checkpoint-25/COMPLETE" ] && break; sleep 0.05; done
[ -f "$ck/checkpoint-25/COMPLETE" ] || die "no checkpoint-25"
sp=$TEST_TMP/state/runs/st/train/attempt-1/pl-stage
for _ in $(seq 1 100); do ls "$sp"/.shim/*/slurm.jobid >/dev/null 2>&1 && break; sleep 0.05; done
id=$(cat "$sp"/.shim/*/slurm.jobid) || die "no Slurm job id recorded by the stage process"
[ -n "$id" ] || die "an empty Slurm job id"
# The job's message says where its launch is, as for the daemon's own.
for _ in $(seq 1 100); do
	msg=$(db "SELECT message FROM jobs WHERE name = 'train'")
	case $msg in *" as slurm job $id"*) break;; esac
	sleep 0.1
done
case $msg in launch-*" as slurm job $id"*) ;; *) die "the job's message while Slurm runs it: $msg";; esac
scancel --signal=KILL "$id" || die "scancel"
scontrol requeue "$id" || die "requeue"
# A requeued job waits for a begin time Slurm sets some time ahead; let it
# go once the requeue has gone through, but not within the second the old
# run's credential was revoked (slurmd would refuse to launch it: "Job
# credential revoked").
release_requeued "$id" || die "the requeued job does not run: $(scontrol show job -o "$id")"
note "Slurm job $id killed after checkpoint-25, requeued and running again"
# The daemon killed outright while Slurm runs the launch: its stage
# process, under the run's shim here, goes on waiting for the Slurm job,
# and the daemon started again re-adopts it.
pl_kill9
pl_start
wait_run st succeeded 120
log=$TEST_TMP/state/runs/st/train/job.log
grep -q "resuming from $ck/checkpoint-25" "$log" || die "the batch script did not resume from checkpoint-25"
grep -q "re-adopted pl-stage" "$log" || die "the restarted daemon did not re-adopt the stage process"
[ "$(db "SELECT count(*) FROM attempts")" = 1 ] || die "the restart made a new attempt"
ev=$(ls "$sp"/*/events)
grep -q "\"type\": *\"resumed\", *\"step\": *25" "$ev" || die "train.py did not report resuming at step 25"
scontrol show job -o "$id" | grep -q "Restarts=1" || die "Slurm did not restart job $id"
[ "$(ls "$sp"/.shim/*/slurm.jobid | wc -l)" = 1 ] || die "the requeue became a new launch"
set -- $(db "SELECT count(*), count(DISTINCT step), min(step), max(step) FROM metrics WHERE name = 'loss'" | tr '|' ' ')
[ "$*" = "45 45 1 45" ] || die "stored loss curve: rows, distinct steps, min, max = $*"
got=$(db "SELECT sha256 FROM artifacts WHERE name = 'adapter'")
[ "$got" = "$ref" ] || die "the adapter after the requeue ($got) differs from the uninterrupted run's ($ref)"
integrity_ok
events_gapless
pl_stop

# A member's run of the same training: its stage process, the member's,
# submits the launch as the member, whose Slurm job it then is, and the
# adapter is the same.
. "$TOP/tests/lib/member.sh"
member_daemon
{ printf '[run]\nname = stm\n'; cat "$TEST_TMP/specs/st.ini"; } > specs/stm.ini
chmod 0644 specs/stm.ini
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/stm.ini >/dev/null || die "the member could not submit"
wait_run stm succeeded 120
sp=$TEST_TMP/state/runs/stm/train/attempt-1/pl-stage
id=$(cat "$sp"/.shim/*/slurm.jobid) || die "no Slurm job id recorded by the member's stage process"
uid=$(slurm_field "$id" UserId | sed -n 's/.*(\([0-9]*\))$/\1/p')
[ "$uid" = "$nobody" ] || die "Slurm job $id is uid $uid's, not the member's ($nobody)"
for f in "$sp"/*/exit.json "$sp"/.shim/*/job.sbatch; do
	[ "$(stat -c %u "$f")" = "$nobody" ] || die "$f is uid $(stat -c %u "$f")'s, not the member's"
done
got=$(db "SELECT a.sha256 FROM artifacts a JOIN runs r ON r.id = a.run_id
    WHERE r.name = 'stm' AND a.name = 'adapter'")
[ "$got" = "$ref" ] || die "the member's adapter ($got) differs from the uninterrupted run's ($ref)"
note "the member's training ran as Slurm job $id, the member's"
# The member cancels a longer training while Slurm runs it: the stage
# process cancels its Slurm job, as the member.
sed -e 's/^name = stm$/name = stc/' -e 's/^max_steps = .*/max_steps = 100000/' specs/stm.ini > specs/stc.ini
chmod 0644 specs/stc.ini
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/stc.ini >/dev/null || die "the member could not submit stc"
sp=$TEST_TMP/state/runs/stc/train/attempt-1/pl-stage
for _ in $(seq 1 300); do
	id=$(cat "$sp"/.shim/*/slurm.jobid 2>/dev/null) && [ "$(slurm_state "$id")" = RUNNING ] && break
	sleep 0.1
done
[ "$(slurm_state "$id")" = RUNNING ] || die "stc: Slurm job ${id:-?} does not run"
as_member "$PIPELINECTL" -f "$PL_CONF" cancel stc >/dev/null || die "the member could not cancel stc"
# (pipelinectl status exits non-zero for a cancelled run: not wait_run
# under gpu_stages.sh's pipefail.)
for _ in $(seq 1 300); do
	st=$(run_state stc) || true
	[ "$st" = cancelled ] && break
	sleep 0.1
done
[ "$st" = cancelled ] || die "stc is ${st:-?}, not cancelled"
slurm_stopped stc "$id" "$TEST_TMP"
pl_stop
echo "slurm/train: ok"
