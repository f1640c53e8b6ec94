#!/bin/bash
# train/hf-train.sh: engine = hf, the recipe itself, trained on the CPU with
# the real libraries of the pinned environment (transformers' own Gemma 3,
# PEFT LoRA on the seven targets, bitsandbytes nf4 with double quantization
# and its 8-bit AdamW, non-reentrant gradient checkpointing, the chunked
# MLP, logits_to_keep, token_type_ids, the bf16 lm_head; device = cpu),
# through a real pipelined running tokenize -> probe -> train:
#  - the trainer is killed with SIGKILL right after the loss of a random
#    step inside the loop (HF_KILL_STEP picks it; the trainer is not held,
#    so the kill lands in the next step or in a checkpoint being written);
#    the stage resumes from the newest checkpoint complete at the kill, the
#    replayed steps' losses equal the first segment's, the store holds every
#    loss step once, and the final adapter is bit-identical to an
#    uninterrupted run's on the same tokens;
#  - the adapter directory loads with peft.PeftModel.from_pretrained on the
#    base and gives the trainer's logits (tests/helpers/
#    hf_adapter_check.py), for this Gemma3ForConditionalGeneration base and
#    for a Gemma3ForCausalLM one trained by hand.
# run.sh: alone (the hf engine on every core, killed and resumed).
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
"$TOP/tests/tools/pyenv.sh" --check >/dev/null 2>&1 || {
	echo "SKIP: the pinned environment is not built (make pyenv)"
	exit 77
}
PY=$("$TOP/tests/tools/pyenv.sh" --python)
stack_note "$PY"
trap reap EXIT
set +e +o pipefail

BASE=$TEST_TMP/base
CORPUS=$TEST_TMP/corpus.jsonl
"$PYD" "$TOP/tests/fixtures/gen_gemma3.py" "$BASE" >/dev/null || die "gen_gemma3"
"$PYD" "$TOP/tests/fixtures/gen_corpus.py" "$CORPUS" --n 8 >/dev/null || die "gen_corpus"
# 8 examples, 2 per optimizer step, 2 epochs: steps 1..8, checkpoints at
# 2, 4 and 6; the kill comes after the loss of step 2..7.
STEPS=8
KILL=${HF_KILL_STEP:-$((2 + RANDOM % 6))}
note "the trainer is killed after step $KILL's loss"
hf=(engine=hf device=cpu lora_r=4 lora_alpha=8 learning_rate=0.005 warmup_steps=1
    num_train_epochs=2 gradient_accumulation_steps=2 optim=paged_adamw_8bit)
mkdir -p "$TEST_TMP/specs"
{
	printf '[run]\nname = v1\n[tokenize]\nbase = %s\ncorpus = %s\n' "$BASE" "$CORPUS"
	printf '[probe]\nafter = tokenize\npython = %s\nbase = %s\n' "$PY" "$BASE"
	# The probe's host-memory cap is 58's subject; a CPU probe measures
	# the process's resident set against this budget.
	printf 'budget_mb = 100000\nhost_mem_cap = off\ngpu = cpu\n'
	printf '%s\n' "${hf[@]/=/ = }"
	printf '[train]\nafter = probe\npython = %s\nbase = %s\nlaunch_backoff = 0.1\nsave_steps = 2\n' \
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
pctl logs v1 probe >"$TEST_TMP/probe.log"
grep -v '^job.metric\|^job.progress' "$TEST_TMP/train.log"
grep -q 'info: probe: {"gpu":"cpu","recipe":"hf:base","probe_mb":[1-9]' "$TEST_TMP/probe.log" ||
    die "the probe reported no memory"
hf_killed_resume_checks 2

# The causal layout, by hand, two steps; then both adapters through PEFT.
"$PYD" "$TOP/tests/fixtures/gen_gemma3.py" "$TEST_TMP/text" --layout causal >/dev/null || die "gen_gemma3 causal"
# The same tokenizer (768 pieces), so the same tokens.
"$CTL" stage train -w "$TEST_TMP/causal" python="$PY" base="$TEST_TMP/text" tokens="$TOK" \
    "${hf[@]}" max_steps=2 >"$TEST_TMP/causal.out" 2>&1 || { cat "$TEST_TMP/causal.out"; die "training the causal base"; }
"$PY" "$TOP/tests/helpers/hf_adapter_check.py" "$TOK" \
    "$R/work/train.config.json" "$R/work/adapter" \
    "$TEST_TMP/causal/train.config.json" "$TEST_TMP/causal/adapter" >"$TEST_TMP/check.out" 2>&1
rc=$?
grep -v 'kernels\|Loading weights\|rope_parameters' "$TEST_TMP/check.out"
[ $rc = 0 ] || die "an adapter does not load with PeftModel.from_pretrained or gives other logits"
grep -q '(Gemma3ForConditionalGeneration): PeftModel vs trainer' "$TEST_TMP/check.out" &&
    grep -q '(Gemma3ForCausalLM): PeftModel vs trainer' "$TEST_TMP/check.out" || die "not both layouts checked"
integrity_ok
echo "ok"
