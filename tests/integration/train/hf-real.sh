#!/bin/bash
# train/hf-real.sh: engine = hf at real scale, on the real base (Gemma 3 270M
# from tests/tools/realbase.sh: 262144-token vocabulary with tied
# embeddings, 18 layers of which 15 slide over a 512-token window, Gemma 3's
# real chat template), trained on the CPU in float32 (no 4-bit: LoRA on the
# seven projections, AdamW), as the router demo trains it, through a real
# pipelined running tokenize -> probe -> train:
#  - the trainer computes logits only for the response span (the engine
#    fails a step whose model returns more positions than logits_to_keep);
#  - it is killed with SIGKILL right after the loss of a random step inside
#    the loop (HF_KILL_STEP picks it); the stage resumes from the newest
#    checkpoint complete at the kill, the replayed steps' losses equal the
#    first segment's, the store holds every loss step once, and the final
#    adapter is bit-identical to an uninterrupted run's on the same tokens;
#  - the adapter directory loads with peft.PeftModel.from_pretrained on the
#    base and gives the trainer's logits (tests/helpers/hf_adapter_check.py).
# Short on purpose: 4 examples of about 560 tokens (past the window), one
# per optimizer step; the response's logits only.
# run.sh: alone (the real model).
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
"$TOP/tests/tools/pyenv.sh" --check >/dev/null 2>&1 || {
	echo "SKIP: the pinned environment is not built (make pyenv)"
	exit 77
}
PY=$("$TOP/tests/tools/pyenv.sh" --python)
trap reap EXIT
set +e +o pipefail

BASE=$("$TOP/tests/tools/realbase.sh" --path) || die "tests/tools/realbase.sh failed"
note "real base $BASE"
CORPUS=$TEST_TMP/corpus.jsonl
# A system prompt of 440 filler words: about 560 tokens an example, past
# the 512-token window of the sliding layers.
"$PYD" "$TOP/tests/fixtures/gen_corpus.py" "$CORPUS" --n 4 --filler 440 >/dev/null || die "gen_corpus"
# 4 examples, 1 per optimizer step, 1 epoch: steps 1..4, a checkpoint at
# each; the kill comes after the loss of step 1..3.
STEPS=4
KILL=${HF_KILL_STEP:-$((1 + RANDOM % 3))}
note "the trainer is killed after step $KILL's loss"
hf=(engine=hf device=cpu threads=2 load_in_4bit=false dtype=float32
    optim=adamw_torch lora_r=4 lora_alpha=8 learning_rate=0.005 warmup_steps=1
    num_train_epochs=1 gradient_accumulation_steps=1)
mkdir -p "$TEST_TMP/specs"
{
	printf '[run]\nname = v1\n[tokenize]\nbase = %s\ncorpus = %s\n' "$BASE" "$CORPUS"
	printf '[probe]\nafter = tokenize\npython = %s\nbase = %s\n' "$PY" "$BASE"
	printf 'budget_mb = 100000\nhost_mem_cap = off\ngpu = cpu\n'
	printf '%s\n' "${hf[@]/=/ = }"
	printf '[train]\nafter = probe\npython = %s\nbase = %s\nlaunch_backoff = 0.1\nsave_steps = 1\n' \
	    "$TOP/tests/standins/gpu_contention_standin.sh" "$BASE"
	printf '%s\n' "${hf[@]/=/ = }"
} >"$TEST_TMP/specs/v1.ini"
export STANDIN_PY=$PY STANDIN_KILL_AT_STEP=$KILL STANDIN_KILL_NOSTALL=1
export STANDIN_KILL_ONCE=$TEST_TMP/killed
pl_conf
pl_start
"$CTL" -f "$PL_CONF" check "$TEST_TMP/specs/v1.ini" >/dev/null || die "the spec does not check"
pctl submit "$TEST_TMP/specs/v1.ini" >/dev/null || die "submitting v1"
wait_run v1 succeeded 900
[ -e "$STANDIN_KILL_ONCE" ] || die "the trainer was not killed"
pctl logs v1 train >"$TEST_TMP/train.log"
hf_killed_resume_checks 1
"$PYD" -c 'import sys, numpy as np
o = np.load(sys.argv[1])["offsets"]
n = int(np.diff(o).min())
print("# shortest example %d tokens" % n)
sys.exit(0 if n > 512 else 1)' "$TOK" || die "an example fits in the sliding window: the window is not exercised"

"$PY" "$TOP/tests/helpers/hf_adapter_check.py" "$TOK" \
    "$R/work/train.config.json" "$R/work/adapter" >"$TEST_TMP/check.out" 2>&1
rc=$?
grep -v 'kernels\|Loading weights\|rope_parameters' "$TEST_TMP/check.out"
[ $rc = 0 ] || die "the adapter does not load with PeftModel.from_pretrained or gives other logits"
grep -q '(Gemma3ForCausalLM): PeftModel vs trainer max |dlogprob| 0,' "$TEST_TMP/check.out" ||
    die "the real base's adapter was not checked"
integrity_ok
echo "ok"
