#!/bin/bash
# tests/bench/prefix-bench.sh: train's shared_prefix against the plain loop
# (jobs/train.py, engine = hf, device = cpu: the pinned environment's real
# transformers Gemma 3, PEFT LoRA, bitsandbytes nf4 and 8-bit AdamW), the
# same tokens both ways, side by side in one run: the rounds alternate
# plain and shared, each a fresh train.py process of STEPS optimizer steps.
# Per step (train's metrics step_cpu_s, step_wall_s and peak_mb, the
# process's peak resident set with the peak reset each step; step 1 left
# out as warm-up; medians over the rounds' steps): CPU seconds, wall
# seconds and peak RSS of each, the ratios shared / plain, and beside them
# the ratio the token counts predict (train's shared_prefix event:
# prefix once plus the suffixes over the examples' tokens).
#
# Two corpora with the reference's proportions scaled down: a 1,200-token
# shared system prompt, 300-token user turns, 26-token answers,
# gradient_accumulation_steps 8 (SHAPE=1200); and the system prompt cut to
# about half of each prompt (SHAPE=half). Targets: CPU at most
# 0.4x at the first shape; peak RSS above the plain loop's by no more than
# the prefix's kept state.
#
#   tests/bench/prefix-bench.sh [STEPS] [ROUNDS]
#
# SHAPES=router trains the router demo's own corpus
# (etc/examples/router/corpus-v1.jsonl) with the demo's settings (float32,
# AdamW, two threads, r16; BASE should be the real Gemma 3 270M). MODES
# (default "no yes1 yes"): the plain loop, shared prefixes one suffix at a
# time (suffix_batch 1, the default) and shared prefixes with a step's suffixes in one
# forward (suffix_batch 8); ratios are against the first mode.
#
# PRECISION=fp32 runs the 1200 and half shapes with those settings too
# (the recipe's nf4 is too slow on a CPU for the real model at 1,200
# tokens: see below).
#
# Environment: BASE (a Gemma 3 checkpoint, e.g. the real Gemma 3 270M of
# tests/tools/realbase.sh --path; default: the medium fixture of
# tests/fixtures/gen_gemma3.py, 8 layers, sliding window 64; SIZE=tiny
# for the tiny one, 4 layers, window 16), SHAPES
# (default "1200 half"), BENCH_TMP (default: a fresh directory, removed
# after), LORA_R (default 16); FILLER_1200, FILLER_HALF and USER_WORDS
# (default 320, 60 and 80: the words of gen_corpus.py's shared filler and
# user turn that give the shapes' token counts with the fixtures' small
# tokenizer; with the real Gemma 3 tokenizer 1100, 230 and 275).
#
# Measured (2026-12-03, the tiny fixture, SIZE=tiny, 3 steps x 1 round,
# load 15-17 on 2 cores shared with other work, so the wall figures mean
# little and the CPU seconds are the steadier figure): shape 1200 (prefix
# 1,040 tokens, prompts 1,237-1,314, answers 30, 81.6% of the prompt
# tokens shared): CPU 34.24 -> 9.11 s per step, 0.266x (token counts
# predict 0.303x); wall 0.250x; peak RSS 686 -> 652 MB, 0.95x (the shared
# step holds one suffix at a time, the plain step a whole example).
# Shape half (2 steps, load 11-15; prefix 355 tokens, prompts 552-627,
# answers 31, 60.4% shared): CPU 10.13 -> 5.43 s, 0.536x (predicted
# 0.504x); wall 0.521x; peak RSS 645 -> 624 MB, 0.97x.  The
# medium fixture was not measured.
# The real Gemma 3 270M (2026-12-04, 2 cores shared with a make check, both
# runs at nice 19): at the recipe's settings (nf4, 8-bit AdamW, one
# thread) and the 1200 shape (FILLER_1200=1100 USER_WORDS=275: prefix
# 1,006 tokens with the real tokenizer, prompts 1,251-1,263) one plain step
# did not finish in 24 minutes, and the run was stopped.  At the router's
# own shape instead (etc/examples/router, corpus-check.jsonl: a 430-token
# shared system prompt, 97.0% of the prompt tokens, 20-token replies; the
# demo's settings, float32, AdamW, two threads; jobs/train.py run by hand
# on its tokens.npz, 4 steps of 8 examples each way, steps 2-4): CPU 85.7
# -> 25.8 s per step, 0.301x (token counts predict 0.185x: the suffixes'
# attention to the prefix's keys, the response logits and the optimizer
# step do not shrink with the prefix); wall 48.3 -> 15.4 s; peak RSS 4,035
# -> 2,886 MB, 0.72x.  The four steps' losses were equal to 4 decimals
# (4.861, 4.2891, 2.8392, 1.7962 both ways) and the adapters after them
# within 9.3e-7 of the median update per tensor at the median element and
# 0.015 at the largest (4.6e-6 absolute, under 1% of one step's learning
# rate; tests/helpers/prefix_adapters.py).
# suffix_batch (2026-12-04, the real Gemma 3 270M, SHAPES=router
# MODES="yes1 yes", 4 steps x 1 round, 2 cores shared with a .ci/run
# building Ollama, load 3): prefix 413 tokens, prompts 420-445, answers
# median 17; one suffix at a time 6.38 s wall and 8.40 s CPU a step, the
# step's 8 suffixes in one forward 5.37 s and 8.20 s: wall 0.841x, CPU
# 0.976x (the same arithmetic in fewer, larger matrix products, which two
# threads share better); peak RSS 2,848 -> 3,789 MB, 1.33x (eight
# suffixes' activations and logits at once); the four losses equal to 5
# digits (4.7524, 4.923, 3.3286, 2.5308).
# The real Gemma 3 270M at these two shapes (2026-12-04, nothing else
# running, PRECISION=fp32 FILLER_1200=1100 FILLER_HALF=230 USER_WORDS=275,
# 3 steps x 1 round, steps 2-3): shape 1200 (prefix 1,212 tokens, prompts
# 1,504-1,517, answers median 15, 80.3% shared; token counts predict
# 0.304x): CPU 88.37 s a step plain, 30.18 s shared one suffix at a time
# (0.342x, within the 0.4x target), 33.12 s with suffix_batch 8 (0.375x);
# wall 44.55, 15.21, 17.07 s; peak RSS 7,521, 4,400 (0.585x) and 9,879 MB
# (1.31x). Shape half (prefix 311 tokens, prompts 602-617, 51.1% shared;
# predicted 0.564x): CPU 31.07, 18.57 (0.598x), 18.53 s (0.596x); wall
# 15.63, 9.34, 9.55 s; peak RSS 4,251, 3,094 (0.728x), 7,281 MB (1.71x).
# The three losses equal to 5 digits in all three modes at both shapes.
# So a batch of 300-token suffixes buys nothing and costs memory:
# suffix_batch defaults to 1, and the router demo, whose suffixes are 20
# tokens, sets 8.
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PY=$("$TOP/tests/tools/pyenv.sh" --python)
STEPS=${1:-4}
ROUNDS=${2:-2}
T=${BENCH_TMP:-$(mktemp -d /tmp/prefixbench.XXXXXX)}
[ -n "${BENCH_TMP:-}" ] || trap 'rm -rf "$T"' EXIT
cd "$T"
if [ -z "${BASE:-}" ]; then
	BASE=$T/base
	[ -f "$BASE/config.json" ] || /usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$BASE" --size "${SIZE:-medium}" \
	    --layout causal >/dev/null
fi
echo "# base $BASE; load $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; $STEPS steps x $ROUNDS rounds each way"
MODES=${MODES:-no yes1 yes}
for shape in ${SHAPES:-1200 half}; do
	# Words of the fixture corpus to tokens: about 3.7 (its small
	# SentencePiece model); the token counts printed are the real ones.
	# The recipe's settings (nf4, 8-bit AdamW, one thread), but for the
	# router's shape: the demo's (float32, AdamW, two threads, r16).
	# PRECISION=fp32 gives every shape the demo's settings.
	recipe='"optim": "paged_adamw_8bit", "threads": 1, "learning_rate": 0.0002'
	fp32='"optim": "adamw_torch", "threads": 2, "learning_rate": 0.0005, "load_in_4bit": false,
 "dtype": "float32", "gradient_checkpointing": false, "lm_head_bf16": false, "mlp_chunk": 0'
	[ "${PRECISION:-recipe}" = fp32 ] && recipe=$fp32
	corpus=$T/c-$shape.jsonl
	case $shape in
	1200) sf=${FILLER_1200:-320} uw=${USER_WORDS:-80};;
	half) sf=${FILLER_HALF:-60} uw=${USER_WORDS:-80};;
	router)
		corpus=$TOP/etc/examples/router/corpus-v1.jsonl
		recipe=$fp32;;
	*) echo "prefix-bench: SHAPES: $shape is not 1200, half or router" >&2; exit 2;;
	esac
	[ "$shape" = router ] ||
	    /usr/bin/python3 "$TOP/tests/fixtures/gen_corpus.py" "$corpus" --n 32 --shared-filler $sf --user-words $uw
	"$TOP/daemon/pipelinectl" stage tokenize -w "tok-$shape" base="$BASE" corpus="$corpus" >"tok-$shape.out" 2>&1 ||
	    { cat "tok-$shape.out"; exit 1; }
	# Modes: no (the plain loop), yes (shared prefixes, suffix_batch 8:
	# a step's suffixes in one forward), yes1 (shared, suffix_batch 1, the
	# default: one suffix at a time).
	for mode in $MODES; do
		case $mode in
		no) sp=no sb="";;
		yes) sp=yes sb=', "suffix_batch": 8';;
		yes1) sp=yes sb=', "suffix_batch": 1';;
		*) echo "prefix-bench: MODES: $mode is not no, yes or yes1" >&2; exit 2;;
		esac
		cat >"cfg-$shape-$mode.json" <<JSON
{"engine": "hf", "device": "cpu", "base": "$BASE", "tokens": "$T/tok-$shape/tokens.npz",
 "max_steps": $STEPS, "save_steps": 0, "gradient_accumulation_steps": 8, "warmup_steps": 1,
 "lora_r": ${LORA_R:-16}, "lora_alpha": ${LORA_R:-16}, $recipe, "shared_prefix": "$sp"$sb}
JSON
	done
	for r in $(seq 1 "$ROUNDS"); do
		for mode in $MODES; do
			mkdir -p "w-$shape-$mode-$r"
			PL_WORKDIR=$T/w-$shape-$mode-$r "$PY" "$TOP/jobs/train.py" --config "cfg-$shape-$mode.json" \
			    --events "ev-$shape-$mode-$r" 2>"err-$shape-$mode-$r" ||
			    { cat "err-$shape-$mode-$r"; exit 1; }
		done
	done
	"$PY" - "$T" "$shape" "$ROUNDS" $MODES <<'PYX'
import glob, json, os, statistics, sys
t, shape, rounds, modes = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
st = json.load(open(os.path.join(t, "tok-%s" % shape, "stats.json")))
fig, pred, loss = {}, None, {}
for mode in modes:
    m = {"step_cpu_s": [], "step_wall_s": [], "peak_mb": []}
    for r in range(1, rounds + 1):
        for line in open(os.path.join(t, "ev-%s-%s-%d" % (shape, mode, r))):
            e = json.loads(line)
            if e["type"] == "metric" and e["name"] in m and e["step"] > 1:
                m[e["name"]].append(e["value"])
            if e["type"] == "metric" and e["name"] == "loss" and r == 1:
                loss.setdefault(mode, []).append(e["value"])
            if e["type"] == "shared_prefix" and e.get("on"):
                pred = e["predicted_ratio"]
    fig[mode] = {k: statistics.median(v) for k, v in m.items()}
print("shape %s: shared prefix %d tokens, prompts %d-%d tokens, answers median %g, share %.1f%%; "
      "predicted ratio from token counts %s" % (shape, st["shared_prefix_tokens"], st["prompt"]["min"],
      st["prompt"]["max"], st["response_span"]["median"], 100 * st["shared_prefix_share"],
      "%.3f" % pred if pred else "-"))
names = {"no": "plain", "yes": "shared", "yes1": "shared sb1"}
ref = modes[0]
print("  %-12s" % "" + "".join("%12s" % names[m] for m in modes) +
      "".join("%12s" % ("%s/%s" % (m, ref)) for m in modes[1:]))
for k, label in (("step_cpu_s", "CPU s/step"), ("step_wall_s", "wall s/step"), ("peak_mb", "peak RSS MB")):
    print("  %-12s" % label + "".join("%12.2f" % fig[m][k] for m in modes) +
          "".join("%12.3f" % (fig[m][k] / fig[ref][k]) for m in modes[1:]))
for m in modes:
    print("  losses %-10s %s" % (names[m], " ".join("%.5g" % x for x in loss.get(m, []))))
PYX
done
