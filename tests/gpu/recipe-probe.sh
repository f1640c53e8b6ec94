#!/bin/bash
# tests/gpu/recipe-probe.sh: the recipe's GPU memory on a machine with an
# NVIDIA GPU, against the reference program's measured figures. Real
# transformers, PEFT and bitsandbytes with CUDA torch; jobs/probe.py and
# jobs/train.py run by hand (pipeline-job(7); no daemon, nothing to build).
#
#   tests/gpu/recipe-probe.sh [--wheels DIR | --venv DIR] [--out DIR]
#                             [--ranks "16 64 112"] [--steps 30]
#                             [--tokens 7177] [--prefix 5000] [--dry-run]
#
#  1. The environment: --venv DIR uses DIR/bin/python as it is; --wheels
#     DIR builds OUT/venv from the wheels in DIR alone (pip --no-index
#     --find-links DIR -r jobs/requirements.in: the machine has no network;
#     the lock's hashes are for this project's build machine, so the
#     names in requirements.in, not the lock, pick them); neither: the
#     project's pinned environment (tests/tools/pyenv.sh). jobs/doctor.py
#     --device cuda must pass before anything else runs.
#  2. A checkpoint with gemma-3-4b's shapes and random weights
#     (tests/fixtures/gen_gemma3.py --size 4b, conditional layout, the
#     vision tower included, as unsloth/gemma-3-4b-it).
#  3. A token file of synthetic examples of --tokens tokens (7,177: the
#     longest example of the 2026-09-21 corpus) with a 128-token response
#     (the recipe's longest span, whose logits logits_to_keep keeps):
#     memory depends on shapes, not on what the tokens say.  The examples
#     share their first --prefix tokens (5,000: the reference's system
#     prompt is most of each prompt), recorded as tokenize records them
#     (prefix_group, prefix_len).
#  4. jobs/probe.py (engine hf, device cuda, the recipe: nf4, double quant,
#     bf16 compute, non-reentrant checkpointing, sdpa, bf16 lm_head, the
#     2048-token MLP chunks, save_on_cpu with pinned memory,
#     logits_to_keep, token_type_ids) at each rank, alpha = rank, once
#     with shared_prefix = no (the plain loop's step) and once with
#     shared_prefix = yes (the prefix's kept state and keys/values plus one
#     suffix: train's peak in that mode).
#  5. jobs/train.py, --steps optimizer steps at r16 (one example per
#     step: gradient_accumulation_steps 1, so 30 steps fit the time;
#     paged_adamw_8bit, no checkpoints).
#  6. A table: each peak MB (torch.cuda.max_memory_allocated) and the MB
#     in use before the step, beside the reference program's.
#
# The whole must finish within 8 minutes on an H200; each phase prints its
# seconds. --dry-run checks the arguments and the environment choice,
# writes the config files and prints the plan, and runs nothing heavy
# (it runs on a machine without a GPU).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
WHEELS= VENV= OUT= RANKS="16 64 112" STEPS=30 NTOK=7177 PFX=5000 DRY=0
usage() {
	sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case "$1" in
	--wheels) [ $# -ge 2 ] || usage; WHEELS=$2; shift 2;;
	--venv) [ $# -ge 2 ] || usage; VENV=$2; shift 2;;
	--out) [ $# -ge 2 ] || usage; OUT=$2; shift 2;;
	--ranks) [ $# -ge 2 ] || usage; RANKS=$2; shift 2;;
	--steps) [ $# -ge 2 ] || usage; STEPS=$2; shift 2;;
	--tokens) [ $# -ge 2 ] || usage; NTOK=$2; shift 2;;
	--prefix) [ $# -ge 2 ] || usage; PFX=$2; shift 2;;
	--dry-run) DRY=1; shift;;
	-h|--help) usage;;
	*) echo "recipe-probe: unknown argument $1" >&2; usage;;
	esac
done
[ -z "$WHEELS" ] || [ -z "$VENV" ] || { echo "recipe-probe: --wheels and --venv exclude each other" >&2; exit 2; }
[ -z "$WHEELS" ] || [ -d "$WHEELS" ] || { echo "recipe-probe: --wheels $WHEELS: not a directory" >&2; exit 2; }
[ -z "$VENV" ] || [ -x "$VENV/bin/python" ] || { echo "recipe-probe: --venv $VENV: no bin/python" >&2; exit 2; }
for r in $RANKS; do
	case "$r" in ''|*[!0-9]*) echo "recipe-probe: --ranks: $r is not a rank" >&2; exit 2;; esac
done
case "$STEPS$NTOK$PFX" in *[!0-9]*) echo "recipe-probe: --steps and --tokens take numbers" >&2; exit 2;; esac
[ "$NTOK" -gt 128 ] || { echo "recipe-probe: --tokens must exceed the 128-token response" >&2; exit 2; }
[ "$PFX" -gt 0 ] && [ "$PFX" -lt $((NTOK - 128)) ] || { echo "recipe-probe: --prefix must be inside the prompt" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d /tmp/recipe-probe.XXXXXX)}
mkdir -p "$OUT"
t0=$(date +%s)
phase() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }

# The reference program's figures (4-bit, every memory fix, 7,177 tokens,
# one forward and backward, no optimizer step; peak allocated MB and MB in
# use before the step): r16 and r64 on an RTX 3060 Ti under CUDA; r112 on
# an RX 7900 XTX under ROCm (the 3060 Ti was not probed at r112; the two
# vendors agreed within 1.2% at r16 and r64). Real training at r16 (v1-v5,
# examples up to 6,447 tokens): peaks 4926 to 5117 MB.
ref_peak() { case $1 in 16) echo 5788.9;; 64) echo 6465.0;; 96) echo 6884.8;; 112) echo 7194.5;; 128) echo 7395.9;; *) echo -;; esac; }
ref_pre() { case $1 in 16) echo 3222.1;; 64) echo 3597.3;; 96) echo 3847.8;; 112) echo 3974.5;; 128) echo 4099.7;; *) echo -;; esac; }
REF_TRAIN="4926-5117"

# ---- 1. the environment ------------------------------------------------
if [ -n "$VENV" ]; then
	PY=$VENV/bin/python
	how="the environment at $VENV"
elif [ -n "$WHEELS" ]; then
	PY=$OUT/venv/bin/python
	how="a venv built in $OUT/venv from the wheels in $WHEELS (no index)"
else
	how="the pinned environment (tests/tools/pyenv.sh)"
	PY=
fi
phase "environment: $how"
recipe='"engine": "hf", "device": "cuda", "cuda_device": 0, "load_in_4bit": true,
 "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true, "bnb_4bit_compute_dtype": "bfloat16",
 "gradient_checkpointing": true, "attn_implementation": "sdpa", "lm_head_bf16": true, "mlp_chunk": 2048,
 "save_on_cpu": true, "pin_memory": true, "logits_to_keep": true, "token_type_ids": true,
 "lora_dropout": 0, "use_rslora": false, "seed": 3407'
for r in $RANKS; do
	for m in no yes; do
		printf '{%s,\n "base": "%s/base", "tokens": "%s/tokens.npz", "lora_r": %d, "lora_alpha": %d, "shared_prefix": "%s"}\n' \
		    "$recipe" "$OUT" "$OUT" "$r" "$r" "$m" >"$OUT/probe-r$r-$m.json"
	done
done
printf '{%s,\n "base": "%s/base", "tokens": "%s/tokens.npz", "lora_r": 16, "lora_alpha": 16,
 "output_dir": "%s/train", "max_steps": %d, "save_steps": 0, "gradient_accumulation_steps": 1,
 "warmup_steps": 5, "learning_rate": 0.0002, "optim": "paged_adamw_8bit", "shared_prefix": "no"}\n' \
    "$recipe" "$OUT" "$OUT" "$OUT" "$STEPS" >"$OUT/train.json"
for f in "$OUT"/probe-r*.json "$OUT/train.json"; do
	/usr/bin/env python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$f" ||
	    { echo "recipe-probe: $f is not JSON" >&2; exit 1; }
done
if [ $DRY = 1 ]; then
	echo "dry run: $OUT; ranks $RANKS; $STEPS steps at r16; $NTOK tokens, $PFX shared"
	for r in $RANKS; do echo "  probe r$r plain and shared prefix: reference peak (plain) $(ref_peak "$r") MB, pre-step $(ref_pre "$r") MB"; done
	echo "  train r16: reference real peaks $REF_TRAIN MB"
	exit 0
fi
if [ -n "$WHEELS" ] && [ ! -x "$PY" ]; then
	python3 -m venv "$OUT/venv"
	"$PY" -m pip install -q --no-index --find-links "$WHEELS" -r "$TOP/jobs/requirements.in"
fi
[ -n "$PY" ] || PY=$("$TOP/tests/tools/pyenv.sh" --python)
phase "doctor ($PY)"
"$PY" "$TOP/jobs/doctor.py" --device cuda --label recipe-probe

# ---- 2. the checkpoint, 3. the tokens ------------------------------------
phase "gemma-3-4b shapes, random weights: $OUT/base"
[ -f "$OUT/base/model.safetensors" ] || "$PY" "$TOP/tests/fixtures/gen_gemma3.py" "$OUT/base" --size 4b >/dev/null
"$PY" - "$OUT/tokens.npz" "$NTOK" "$PFX" <<'PY'
import sys
import numpy as np
path, n, pfx, resp, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), 128, 4
rng = np.random.default_rng(7177)
head = np.concatenate([[2], rng.integers(365, 262144, pfx - 1)])
ids = np.concatenate([np.concatenate([head, rng.integers(365, 262144, n - pfx)]) for _ in range(k)]).astype(np.int32)
np.savez(path, input_ids=ids, offsets=np.arange(k + 1, dtype=np.int64) * n,
         prompt_len=np.full(k, n - resp, dtype=np.int32), response_len=np.full(k, resp, dtype=np.int32),
         keys=np.array(["synthetic-%d" % i for i in range(k)]),
         prefix_group=np.zeros(k, dtype=np.int32), prefix_len=np.full(k, pfx, dtype=np.int32))
PY

# ---- 4. the probes, 5. training ------------------------------------------
mem() { # mem EVENTS: "peak pre" of the memory event
	sed -n 's/.*"type":"memory","peak_mb":\([0-9.]*\),"pre_step_mb":\([0-9.]*\).*/\1 \2/p' "$1" | tail -1
}
for r in $RANKS; do
	for m in no yes; do
		phase "probe r$r shared_prefix=$m"
		if PL_WORKDIR=$OUT "$PY" "$TOP/jobs/probe.py" --config "$OUT/probe-r$r-$m.json" --events "$OUT/probe-r$r-$m.ev"; then
			grep -q '"shared_prefix_tokens":'"$([ $m = yes ] && echo "$PFX" || echo 0)" "$OUT/probe-r$r-$m.ev" ||
			    echo "recipe-probe: probe r$r-$m did not run the mode asked for" >&2
			echo "r$r-$m $(mem "$OUT/probe-r$r-$m.ev")" >>"$OUT/results"
		else
			echo "r$r-$m OOM-or-failed (exit $?): $(grep '"type":"\(oom\|error\)"' "$OUT/probe-r$r-$m.ev" | tail -1)" | tee -a "$OUT/results"
		fi
	done
done
phase "train r16, $STEPS steps"
mkdir -p "$OUT/train"
if PL_WORKDIR=$OUT/train "$PY" "$TOP/jobs/train.py" --config "$OUT/train.json" --events "$OUT/train.ev"; then
	echo "train $(mem "$OUT/train.ev")" >>"$OUT/results"
else
	echo "train failed (exit $?): $(grep '"type":"\(oom\|error\)"' "$OUT/train.ev" | tail -1)" | tee -a "$OUT/results"
fi

# ---- 6. the table ----------------------------------------------------------
phase "results ($("$PY" -c 'import torch; print(torch.cuda.get_device_name(0))'))"
printf '%-16s %12s %12s   %-22s %s\n' what "peak MB" "pre-step MB" "reference peak MB" "reference pre-step MB"
while read -r what peak pre; do
	case $what in
	r*-no) r=${what#r}; r=${r%-no}; printf '%-16s %12s %12s   %-22s %s\n' "probe r$r plain" "$peak" "$pre" "$(ref_peak "$r")" "$(ref_pre "$r")";;
	r*-yes) r=${what#r}; r=${r%-yes}; printf '%-16s %12s %12s   %-22s %s\n' "probe r$r shared" "$peak" "$pre" - -;;
	train) printf '%-16s %12s %12s   %-22s %s\n' "train r16 x$STEPS" "$peak" "$pre" "$REF_TRAIN (real runs)" -;;
	esac
done <"$OUT/results"
phase "done"
