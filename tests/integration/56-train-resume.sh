#!/bin/bash
# 56-train-resume.sh: a trainer killed with SIGKILL at step 37 inside the
# training loop is relaunched by the train stage from the newest complete
# checkpoint (step 25, checked by its COMPLETE marker and hashes); the
# final adapter is bit-identical to an uninterrupted run's, and the loss
# events of both segments cover every step, the replayed steps 26-37 with
# the same values (G30: the store keeps one row per step). A corrupted
# newer checkpoint is passed over, not resumed from.
. "$(dirname "$0")/data/gpu_stages_lib.sh"
setup_tokens 40
WRAP=$TOP/tests/integration/data/standin_gpu_contention.sh
common=(engine=tiny base="$BASE" tokens="$TOKENS" max_steps=45 save_steps=25
    gradient_accumulation_steps=1 lora_r=4 launch_backoff=0.1)

adapter_sha() {
	sed -n 's/^job.artifact {"name":"adapter".*"sha256":"\([0-9a-f]*\)".*/\1/p' "$1"
}
# loss_steps EVENTS: "step value" per loss metric line.
loss_steps() {
	sed -n 's/.*"type":"metric","name":"loss","step":\([0-9]*\),"value":\([^,}]*\).*/\1 \2/p' "$1"
}

# The uninterrupted reference run.
"$CTL" stage train -w "$TEST_TMP/ref" "${common[@]}" >"$TEST_TMP/ref.out" 2>&1 ||
    { cat "$TEST_TMP/ref.out"; die "the uninterrupted run failed"; }
ref=$(adapter_sha "$TEST_TMP/ref.out")
[ -n "$ref" ] || die "no adapter from the uninterrupted run"

# The killed run: launch-1 is killed -9 at step 37.
set +e
STANDIN_KILL_AT_STEP=37 STANDIN_KILL_ONCE=$TEST_TMP/killed \
"$CTL" stage train -w "$TEST_TMP/kill" "${common[@]}" python="$WRAP" \
    >"$TEST_TMP/kill.out" 2>&1
rc=$?
set -e
grep -v '^job.metric\|^job.progress' "$TEST_TMP/kill.out"
[ "$rc" -eq 0 ] || die "the killed run did not finish (exit $rc)"
[ -e "$TEST_TMP/killed" ] || die "the fault was never injected"
grep -q 'launch-1 died inside the training loop (killed by signal 9' "$TEST_TMP/kill.out" ||
    die "no report of the kill inside the loop"
grep -q "launch-2 resumes from $TEST_TMP/kill/checkpoints/checkpoint-25 (step 25)" "$TEST_TMP/kill.out" ||
    die "launch-2 did not resume from checkpoint-25"
got=$(adapter_sha "$TEST_TMP/kill.out")
[ "$got" = "$ref" ] || die "resumed adapter $got differs from the uninterrupted run's $ref"

# Every step once across the segments; the replayed ones agree.
e1=$TEST_TMP/kill/.pl/launch-1/events
e2=$TEST_TMP/kill/.pl/launch-2/events
loss_steps "$e1" >"$TEST_TMP/l1"
loss_steps "$e2" >"$TEST_TMP/l2"
[ "$(head -1 "$TEST_TMP/l1" | cut -d' ' -f1)" = 1 ] && [ "$(tail -1 "$TEST_TMP/l1" | cut -d' ' -f1)" = 37 ] ||
    die "launch-1's losses are not steps 1..37"
[ "$(head -1 "$TEST_TMP/l2" | cut -d' ' -f1)" = 26 ] && [ "$(tail -1 "$TEST_TMP/l2" | cut -d' ' -f1)" = 45 ] ||
    die "launch-2's losses are not steps 26..45"
sort -n -u -k1,1 "$TEST_TMP/l1" "$TEST_TMP/l2" | cut -d' ' -f1 | tr '\n' ' ' >"$TEST_TMP/steps"
[ "$(cat "$TEST_TMP/steps")" = "$(seq -s ' ' 1 45) " ] || die "steps covered: $(cat "$TEST_TMP/steps")"
replayed=$(awk 'NR == FNR { a[$1] = $2; next }
    ($1 in a) { n++; if (a[$1] != $2) { print "step " $1 ": " a[$1] " vs " $2 > "/dev/stderr"; bad++ } }
    END { print (bad ? -1 : n) }' "$TEST_TMP/l1" "$TEST_TMP/l2")
[ "$replayed" -ge 0 ] || die "a replayed step's loss differs between the segments"
[ "$replayed" -eq 12 ] || die "expected 12 replayed steps (26..37), saw $replayed"

# A newer checkpoint whose file no longer hashes as recorded is passed over.
mkdir -p "$TEST_TMP/bad/checkpoints"
cp -r "$TEST_TMP/kill/checkpoints/checkpoint-25" "$TEST_TMP/bad/checkpoints/"
cp -r "$TEST_TMP/kill/checkpoints/checkpoint-25" "$TEST_TMP/bad/checkpoints/checkpoint-30"
f=$(ls "$TEST_TMP/bad/checkpoints/checkpoint-30" | grep -v COMPLETE | head -1)
printf 'x' >>"$TEST_TMP/bad/checkpoints/checkpoint-30/$f"
"$CTL" stage train -w "$TEST_TMP/bad" "${common[@]}" >"$TEST_TMP/bad.out" 2>&1 ||
    { cat "$TEST_TMP/bad.out"; die "the run with a corrupt checkpoint failed"; }
grep -q "checkpoint $TEST_TMP/bad/checkpoints/checkpoint-30 passed over: $f: sha256" "$TEST_TMP/bad.out" ||
    die "the corrupt checkpoint was not reported"
grep -q "launch-1 resumes from $TEST_TMP/bad/checkpoints/checkpoint-25 (step 25)" "$TEST_TMP/bad.out" ||
    die "did not resume from the complete checkpoint-25"
[ "$(adapter_sha "$TEST_TMP/bad.out")" = "$ref" ] || die "the adapter after resuming from 25 differs"
echo "ok"
