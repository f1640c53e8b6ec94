#!/bin/bash
# The real train stage (tiny engine) with executor = slurm: its launch is a
# Slurm job. After checkpoint-25 the job is killed on the node
# (scancel --signal=KILL) and requeued (scontrol requeue); the batch script
# resumes jobs/train.py from checkpoint-25 (PL_RESUME_FROM) in the same
# Slurm job, launch and attempt. The stored loss curve holds every step once
# and the adapter is bit-identical to an uninterrupted run's, so the
# training was resumed, not started over.
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
# process, whose programs run on this host only: the spec is refused at
# its executor line, never run where it did not ask.
pl_conf
pl_start
out=$(pctl submit "$TEST_TMP/specs/st.ini" 2>&1) && die "a split daemon took executor = slurm for train"
echo "$out" | grep -q "st.ini:2: executor: slurm runs stage train's programs as batch jobs only from the daemon, and this daemon runs the stage in a stage process (it is split" ||
	die "the split daemon's refusal: $out"
pl_stop
# The Slurm launch itself, on a daemon root alone, whose stages run in the
# daemon (PL_SPLIT=0: the deployment that runs them).
rm -rf "$TEST_TMP/state"
PL_SPLIT=0 pl_conf
pl_start
pctl submit "$TEST_TMP/specs/st.ini" >/dev/null || die "submit"
ck=$TEST_TMP/state/runs/st/train/work/checkpoints
for _ in $(seq 1 1200); do [ -f "$ck/checkpoint-25/COMPLETE" ] && break; sleep 0.05; done
[ -f "$ck/checkpoint-25/COMPLETE" ] || die "no checkpoint-25"
id=$(db "SELECT ext_id FROM procs")
scancel --signal=KILL "$id" || die "scancel"
scontrol requeue "$id" || die "requeue"
# A requeued job waits for a begin time Slurm sets some time ahead; let it
# go once the requeue has gone through, but not within the second the old
# run's credential was revoked (slurmd would refuse to launch it: "Job
# credential revoked").
release_requeued "$id" || die "the requeued job does not run: $(scontrol show job -o "$id")"
note "Slurm job $id killed after checkpoint-25, requeued and running again"
wait_run st succeeded 120
log=$TEST_TMP/state/runs/st/train/job.log
grep -q "resuming from $ck/checkpoint-25" "$log" || die "the batch script did not resume from checkpoint-25"
ev=$(ls "$TEST_TMP"/state/runs/st/train/attempt-1/*/events)
grep -q "\"type\": *\"resumed\", *\"step\": *25" "$ev" || die "train.py did not report resuming at step 25"
scontrol show job -o "$id" | grep -q "Restarts=1" || die "Slurm did not restart job $id"
[ "$(db "SELECT count(*) FROM procs")" = 1 ] || die "the requeue became a new launch"
set -- $(db "SELECT count(*), count(DISTINCT step), min(step), max(step) FROM metrics WHERE name = 'loss'" | tr '|' ' ')
[ "$*" = "45 45 1 45" ] || die "stored loss curve: rows, distinct steps, min, max = $*"
got=$(db "SELECT sha256 FROM artifacts WHERE name = 'adapter'")
[ "$got" = "$ref" ] || die "the adapter after the requeue ($got) differs from the uninterrupted run's ($ref)"
integrity_ok
events_gapless
pl_stop
echo "slurm/train: ok"
