#!/bin/bash
# train/hf-shared-prefix.sh: train's shared_prefix (jobs/engines/prefix.py) on
# the hf engine, the CPU, the pinned environment's real transformers Gemma 3,
# PEFT LoRA and bitsandbytes, against the plain loop:
#  1. tokenize (pipelinectl stage, Debian's python3) finds the shared
#     prefixes of a corpus with two system prompts: two groups, recorded in
#     tokens.npz (prefix_group, prefix_len), stats.json and the stored
#     "stats" value (shared_prefix_tokens, shared_prefix_share); an
#     example with a system prompt of its own is plain; and, on token
#     arrays made here, an example of a group whose tokens part from the
#     others' early does not shorten their prefix: it is plain;
#  2. one step's per-example losses and LoRA gradients equal the plain
#     loop's: float32 compute within 1e-5 (losses) and 1e-4 (gradients,
#     relative to the tensor's largest), and the recipe (nf4, double
#     quantization, bfloat16 compute, 8-bit AdamW, the chunked MLP) within
#     2e-2, a few bfloat16 roundings (8 mantissa bits: 3.9e-3 each), on a
#     base whose layers alternate sliding (window 16) and global attention
#     and a prefix of over 300 tokens, far past the window; with gradient
#     checkpointing and without, sdpa and eager; the suffixes one at a
#     time (suffix_batch 1, the default), of different lengths in one
#     left-padded forward (8) and in uneven batches (3);
#  3. 20 optimizer steps both ways (float32 compute, AdamW): in every
#     adapter tensor the median |shared - plain| stays under 1e-4 of the
#     tensor's median update (float level) and the largest under 1e-2
#     (measured 5e-5 and 3.7e-3 on two corpora: an element whose gradient
#     is near its float noise gets an Adam update, normalized, that can
#     change by up to one step's learning rate; 1e-2 of the median update
#     is about a hundredth of one step's);
#  4. a run checkpointed with shared_prefix = yes at step 10 resumes with
#     shared_prefix = no (the checkpoint format and the configuration
#     digest do not change): twice, bit-identical, and within the bound of
#     3. of the plain run;
#  5. auto: on for this corpus (share over 25%), off with lora_dropout > 0
#     and said why; the probe reports shared_prefix_tokens; train's log
#     line and the metric prefix_speedup; a bad value is refused by check.
# run.sh: alone (the hf engine on every core, 20 steps twice).
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
"$TOP/tests/tools/pyenv.sh" --check >/dev/null 2>&1 || {
	echo "SKIP: the pinned environment is not built (make pyenv)"
	exit 77
}
PY=$("$TOP/tests/tools/pyenv.sh" --python)
D=$TOP/tests/helpers
J=$TOP/jobs
cd "$TEST_TMP"
stack_note "$PY"

# --- 1. tokenize
"$PYD" "$TOP/tests/fixtures/gen_gemma3.py" base >/dev/null || die "gen_gemma3"
# Layers 1 and 3 global, 0 and 2 sliding (window 16): both kinds.
"$PYD" - base/config.json <<'PYX' || die "config"
import json, sys
c = json.load(open(sys.argv[1]))
c["text_config"]["sliding_window_pattern"] = 2
json.dump(c, open(sys.argv[1], "w"), indent=1)
PYX
"$PYD" "$TOP/tests/fixtures/gen_corpus.py" corpus.jsonl --n 24 --shared-filler 60 --systems 2 --user-words 8
# An outlier: its system prompt is its group's with the user turn folded
# in, so it parts from the group inside the prompt, at its own place.
"$PYD" - corpus.jsonl <<'PYX'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ex = lines[4]
ex["messages"][0]["content"] = ex["messages"][0]["content"][:-40] + " odd " + ex["messages"][0]["content"][-40:]
open(sys.argv[1], "w").write("".join(json.dumps(l) + "\n" for l in lines))
PYX
"$CTL" stage tokenize -w tok base=base corpus=corpus.jsonl >tok.out 2>&1 || { cat tok.out; die "tokenize"; }
"$PYD" - tok/tokens.npz tok/stats.json tok.out <<'PYX' || die "the recorded prefixes are wrong"
import json, sys
import numpy as np
z = np.load(sys.argv[1])
st = json.load(open(sys.argv[2]))
g, L = z["prefix_group"], z["prefix_len"]
groups = st["shared_prefix"]["groups"]
print("groups", groups, "plain", st["shared_prefix"]["plain"], "share", st["shared_prefix_share"])
assert len(groups) == 2, groups
assert sorted(x["examples"] for x in groups) == [11, 12], groups
assert st["shared_prefix"]["plain"] == 1 and g[4] == -1 and L[4] == 0, (g, L)
off, ids, pl = z["offsets"], z["input_ids"], z["prompt_len"]
for k in range(2):
    mem = [i for i in range(len(g)) if g[i] == k]
    P = int(L[mem[0]])
    assert all(L[i] == P for i in mem) and P > 300, (k, P)
    head = ids[off[mem[0]]:off[mem[0]] + P]
    assert all((ids[off[i]:off[i] + P] == head).all() and P < pl[i] for i in mem)
    # The longest: one token more would part at least two members.
    nxt = {int(ids[off[i] + P]) for i in mem}
    assert len(nxt) > 1 or any(P + 1 >= pl[i] for i in mem), nxt
assert st["shared_prefix_tokens"] == max(x["tokens"] for x in groups)
share = float(L.sum()) / float(pl.sum())
assert abs(st["shared_prefix_share"] - share) < 1e-5, (st["shared_prefix_share"], share)
out = open(sys.argv[3]).read()
assert '\\"shared_prefix_tokens\\":%d' % st["shared_prefix_tokens"] in out, "the stats value lacks the prefix"
assert 'job.metric {"name":"shared_prefix_share"' in out
PYX
TOK=$TEST_TMP/tok/tokens.npz
"$PYD" - "$J" <<'PYX' || die "shared_prefixes on made-up tokens"
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import tokenize_corpus as tc
head = list(range(10, 60))
ids = [np.array(head + [100 + i] * 8 + [7, 8]) for i in range(5)]
ids.append(np.array(head[:5] + [99] * 50))           # parts at token 5
ids.append(np.array([1, 2, 3, 4, 5, 6]))             # no system message
plen = [len(x) - 2 for x in ids]
g, L, groups = tc.shared_prefixes(ids, plen, ["s"] * 6 + [None])
assert groups == [{"tokens": 50, "examples": 5}], groups
assert g == [0] * 5 + [-1, -1] and L == [50] * 5 + [0, 0], (g, L)
# Identical prompts: the prefix stops one token short of them.
g, L, groups = tc.shared_prefixes([np.arange(9)] * 3, [7] * 3, ["s"] * 3)
assert groups == [{"tokens": 6, "examples": 3}], groups
PYX

# --- 2. one step, per-example losses and gradients
f32='"load_in_4bit": false, "dtype": "float32", "lm_head_bf16": false, "optim": "adamw_torch"'
printf '{"base": "%s/base", "device": "cpu", "lora_r": 4, "lora_alpha": 8, "gradient_accumulation_steps": 4, %s}\n' \
    "$TEST_TMP" "$f32" >f32.json
printf '{"base": "%s/base", "device": "cpu", "lora_r": 4, "lora_alpha": 8, "gradient_accumulation_steps": 4, "mlp_chunk": 64}\n' \
    "$TEST_TMP" >bf16.json
eq() { # eq NAME CONFIG TOLERANCES... [KEY=VALUE...]
	local name=$1; shift
	"$PY" "$D/prefix_equal.py" "$TOK" "$@" >"eq-$name.out" 2>&1 || { cat "eq-$name.out"; die "step equality: $name"; }
	grep '^step\|^largest' "eq-$name.out" | sed "s/^/$name: /"
}
eq f32 f32.json
eq f32-eager f32.json attn_implementation=eager
# suffix_batch: the default (1) runs a group's suffixes one at a time; 8
# all of them, of different lengths, in one left-padded forward; 3 in
# uneven batches; each against the plain loop.
eq f32-sb8 f32.json suffix_batch=8 --need-padding
eq f32-sb3-eager f32.json suffix_batch=3 attn_implementation=eager --step 2 --need-padding
eq f32-nockpt f32.json gradient_checkpointing=false --step 2
eq recipe bf16.json --loss-tol 2e-2 --grad-tol 2e-2
eq recipe-sb8 bf16.json suffix_batch=8 --loss-tol 2e-2 --grad-tol 2e-2
# The control: the same check must fail when the sliding layers see the
# whole prefix (a mask without the window), the error a windowed cache of
# the model's config makes the other way round.
"$PY" - "$D/prefix_equal.py" "$TOK" f32.json "$J" >eq-control.out 2>&1 <<'PYX' && die "the control passed: the check cannot see the window"
import runpy, sys
sys.path.insert(0, sys.argv[4])
from engines import prefix
orig = prefix.masks
def nowindow(*a):
    m, pos = orig(*a)
    m["sliding_attention"] = m["full_attention"]
    return m, pos
prefix.masks = nowindow
script = sys.argv[1]
sys.argv = sys.argv[1:4]
runpy.run_path(script, run_name="__main__")
PYX
grep '^largest' eq-control.out | sed 's/^/control (no window): /'
awk '/^largest relative loss difference/ { if ($5 > 1e-3) ok = 1 } END { exit !ok }' eq-control.out ||
    { cat eq-control.out; die "the control did not show the window's error"; }

# --- 3. 20 optimizer steps both ways
train_cfg() { # train_cfg OUT SHARED_PREFIX [extra JSON]
	printf '{"engine": "hf", "base": "%s/base", "tokens": "%s", "device": "cpu", "lora_r": 4, "lora_alpha": 8,
 "learning_rate": 0.005, "warmup_steps": 1, "gradient_accumulation_steps": 4, "max_steps": 20,
 "save_steps": 5, "shared_prefix": "%s", %s%s}\n' "$TEST_TMP" "$TOK" "$2" "$f32" "${3:-}" >"$1"
}
train_cfg plain.json no
train_cfg shared.json yes
mkdir -p plain sp
PL_WORKDIR=$TEST_TMP/plain "$PY" "$J/train.py" --config plain.json --events plain.ev >plain.err 2>&1 &
pid=$!
PL_WORKDIR=$TEST_TMP/sp "$PY" "$J/train.py" --config shared.json --events shared.ev >shared.err 2>&1 ||
    { cat shared.err; die "shared training"; }
wait $pid || { cat plain.err; die "plain training"; }
grep -q 'train: shared prefix: on: shared_prefix = yes' shared.err || die "train's log has no shared-prefix line"
grep -q '"type":"metric","name":"prefix_speedup","step":20' shared.ev || die "no prefix_speedup metric"
grep -q '"name":"prefix_speedup"' plain.ev && die "the plain run sent prefix_speedup"
"$PY" "$D/prefix_adapters.py" plain.json plain/adapter sp/adapter --bound 1e-2 \
    >adapters.out 2>&1 || { cat adapters.out; die "the adapters after 20 steps differ"; }
grep '^largest' adapters.out

# --- 4. resume across the setting
mkdir -p r1 r2
cp -r sp/checkpoints r1/ && cp -r sp/checkpoints r2/
train_cfg resume.json no
for r in r1 r2; do
	PL_WORKDIR=$TEST_TMP/$r PL_RESUME_FROM=$TEST_TMP/sp/checkpoints/checkpoint-10 \
	    "$PY" "$J/train.py" --config resume.json --events $r.ev >$r.err 2>&1 || { cat $r.err; die "resume $r"; }
done
grep -q '"type":"resumed","step":10' r1.ev || die "no resume at step 10"
cmp -s r1/adapter/adapter_model.safetensors r2/adapter/adapter_model.safetensors ||
    die "two plain resumes of a shared-prefix checkpoint differ"
"$PY" "$D/prefix_adapters.py" plain.json plain/adapter r1/adapter --bound 1e-2 \
    >resume.out 2>&1 || { cat resume.out; die "the resumed adapter is not the plain run's"; }

# --- 5. auto, dropout, probe, check
train_cfg auto.json auto ', "max_steps": 1, "save_steps": 0'
mkdir -p auto drop
PL_WORKDIR=$TEST_TMP/auto "$PY" "$J/train.py" --config auto.json --events auto.ev >auto.err 2>&1 || { cat auto.err; die "auto"; }
grep -q 'train: shared prefix: on: prefixes cover' auto.err || die "auto did not turn the mode on"
train_cfg drop.json auto ', "max_steps": 1, "save_steps": 0, "lora_dropout": 0.1'
PL_WORKDIR=$TEST_TMP/drop "$PY" "$J/train.py" --config drop.json --events drop.ev >drop.err 2>&1 || { cat drop.err; die "dropout"; }
grep -q 'train: shared prefix: off: lora_dropout 0.1 > 0' drop.err || die "auto with dropout did not fall back"
printf '{"engine": "hf", "base": "%s/base", "tokens": "%s", "device": "cpu", "lora_r": 4, %s}\n' \
    "$TEST_TMP" "$TOK" "$f32" >probe.json
PL_WORKDIR=$TEST_TMP "$PY" "$J/probe.py" --config probe.json --events probe.ev >probe.err 2>&1 || { cat probe.err; die "probe"; }
grep -q '"type":"memory".*"shared_prefix_tokens":[1-9]' probe.ev || die "the probe did not measure the shared mode"
printf '[run]\nname = x\n[tokenize]\nbase = %s/base\ncorpus = %s/corpus.jsonl\n[train]\nafter = tokenize\nbase = %s/base\nshared_prefix = maybe\n' \
    "$TEST_TMP" "$TEST_TMP" "$TEST_TMP" >bad.ini
"$CTL" check bad.ini >bad.out 2>&1 && die "shared_prefix = maybe passed check"
grep -q 'shared_prefix.*"maybe" is not auto, yes or no' bad.out || { cat bad.out; die "check's message"; }
echo "PASS: shared prefix: tokenize's groups, one step and 20 steps equal to the plain loop, resume across the setting, auto"
