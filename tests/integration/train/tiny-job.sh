#!/bin/bash
# train/tiny-job: the tiny engine is the real Gemma 3 forward, and it
# really trains.  Its forward agrees with llama.cpp (llama-server on an F32
# GGUF made by llama.cpp's own converter, tests/tools/llama-oracle.sh) on
# the top-1 token at 99% or more of the positions and on the log-probabilities,
# for the shared fixture (tests/fixtures, all sliding layers) and for a 6-layer
# base with a global layer and linear RoPE scaling (tests/fixtures/make_tiny_base.py).
# jobs/train.py trains it on a routing corpus: the loss falls;
# every step reports loss, lr, grad_norm and peak_mb once; the schedule is
# transformers' linear warmup; checkpoints appear every save_steps with a
# verifying COMPLETE marker, a tampered or unmarked one is passed over; the
# adapter is a PEFT directory with PEFT's key names that the tiny engine's
# forward loads back, it changes the model's predictions, and the merge
# stage folds it into a base that predicts the same.
set -eu
: "${TOP:?}" "${TEST_TMP:?}"
PY=/usr/bin/python3
J=$TOP/jobs
cd "$TEST_TMP"
. "$TOP/tests/lib.sh"

$PY "$TOP/tests/fixtures/gen_gemma3.py" base >/dev/null
$PY "$TOP/tests/fixtures/gen_corpus.py" corpus.jsonl --n 24
printf '{"base":"%s/base","corpus":"%s/corpus.jsonl","output_dir":"%s/tok"}\n' \
    "$TEST_TMP" "$TEST_TMP" "$TEST_TMP" >tok.json
$PY "$J/tokenize_corpus.py" --config tok.json --events tok.ev || { cat tok.ev; fail "tokenize"; }

mkdir -p work
cat >train.json <<JSON
{"engine":"tiny","base":"$TEST_TMP/base","tokens":"$TEST_TMP/tok/tokens.npz",
 "lora_r":8,"lora_alpha":16,"learning_rate":0.01,"warmup_steps":3,
 "gradient_accumulation_steps":2,"num_train_epochs":3,"save_steps":10,"seed":3407}
JSON
PL_WORKDIR=$TEST_TMP/work PL_EVENTS=$TEST_TMP/train.ev $PY "$J/train.py" --config train.json \
    || { tail -n 5 train.ev; fail "train exited $?"; }

$PY - "$TEST_TMP" <<'PY'
import json, os, sys
sys.path.append(os.environ["TOP"] + "/jobs")
import pljob
t = sys.argv[1]
ev = [json.loads(l) for l in open(t + "/train.ev")]
types = [e["type"] for e in ev]
assert types[0] == "started" and types[-1] == "done", types[:3] + types[-3:]
assert types.index("loop_started") < types.index("metric")
total = 36  # 24 examples / 2 per step * 3 epochs
m = {}
for e in ev:
    if e["type"] == "metric":
        key = (e["name"], e["step"])
        assert key not in m, "metric %s reported twice" % (key,)
        m[key] = e["value"]
for name in ("loss", "lr", "grad_norm", "peak_mb"):
    steps = sorted(s for (n, s) in m if n == name)
    assert steps == list(range(1, total + 1)), (name, steps[:3], len(steps))
# transformers' get_linear_schedule_with_warmup: 0 at the first step.
want = [0.01 * i / 3 if i < 3 else 0.01 * (total - i) / (total - 3) for i in range(total)]
got = [m[("lr", s)] for s in range(1, total + 1)]
assert all(abs(a - b) < 1e-12 for a, b in zip(got, want)), (got[:5], want[:5])
loss = [m[("loss", s)] for s in range(1, total + 1)]
first, last = sum(loss[:5]) / 5, sum(loss[-5:]) / 5
print("loss: first five %.3f, last five %.3f" % (first, last))
assert last < 0.75 * first, "the loss did not fall: %.3f -> %.3f" % (first, last)
mem = [e for e in ev if e["type"] == "memory"][0]
assert 0 < mem["pre_step_mb"] < mem["peak_mb"], mem
cks = [e for e in ev if e["type"] == "checkpoint"]
assert [c["step"] for c in cks] == [10, 20, 30], cks
for c in cks:
    assert pljob.verify_checkpoint(c["path"]) is None, c
# The adapter: PEFT's files and key names for the conditional layout.
art = [e for e in ev if e["type"] == "artifact" and e["name"] == "adapter"][0]["path"]
assert sorted(os.listdir(art)) == ["adapter_config.json", "adapter_model.safetensors"], os.listdir(art)
cfg, ten = pljob.read_adapter_dir(art)
assert cfg["peft_type"] == "LORA" and cfg["r"] == 8 and cfg["lora_alpha"] == 16 and not cfg["use_rslora"]
assert sorted(cfg["target_modules"]) == sorted(pljob.LORA_TARGETS)
hdr, meta, _ = pljob.read_safetensors_header(art + "/adapter_model.safetensors")
assert meta == {"format": "pt"}, meta
assert len(ten) == 4 * 7 * 2, len(ten)  # 4 layers x 7 projections x A, B
k = "base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight"
assert ten[k].shape == (8, 64), ten[k].shape
k = "base_model.model.model.language_model.layers.3.mlp.down_proj.lora_B.weight"
assert ten[k].shape == (64, 8) and abs(ten[k]).max() > 0, "lora_B did not train"
print("events, schedule, checkpoints and adapter OK")
PY

# Checkpoint integrity: newest-checkpoint picks 30; tamper with it and it
# falls back to 20; remove 20's marker and it falls back to 10.
ck=work/checkpoints
[ "$($PY "$J/pljob" newest-checkpoint $ck)" = "$ck/checkpoint-30" ] || fail "newest is not 30"
printf 'x' >>$ck/checkpoint-30/optimizer.pt
[ "$($PY "$J/pljob" newest-checkpoint $ck 2>why)" = "$ck/checkpoint-20" ] || fail "tampered 30 not skipped"
grep -q "checkpoint-30: skipped: optimizer.pt: sha256" why || { cat why; fail "no reason for skipping 30"; }
rm $ck/checkpoint-20/COMPLETE
[ "$($PY "$J/pljob" newest-checkpoint $ck 2>why)" = "$ck/checkpoint-10" ] || fail "unmarked 20 not skipped"
grep -q "checkpoint-20: skipped: no COMPLETE marker" why || fail "no reason for skipping 20"
: >$ck/checkpoint-10/unlisted
$PY "$J/pljob" verify-checkpoint $ck/checkpoint-10 2>why && fail "an unlisted file passed"
grep -q "unlisted \['unlisted'\]" why || { cat why; fail "no reason for the unlisted file"; }
rm $ck/checkpoint-10/unlisted
$PY "$J/pljob" verify-checkpoint $ck/checkpoint-10 || fail "checkpoint-10 does not verify"

# The adapter loads into the tiny forward (tiny.py top1) and changes the
# predictions on a training prompt.
$PY - "$TEST_TMP" <<'PY' >ids.json
import json, os, sys
sys.path.append(os.environ["TOP"] + "/jobs")
import pljob
ex = pljob.load_tokens(sys.argv[1] + "/tok/tokens.npz")
print(json.dumps([[int(x) for x in ex[0]["input_ids"]]]))
PY
$PY "$J/engines/tiny.py" top1 base <ids.json >plain.json
$PY "$J/engines/tiny.py" top1 base work/adapter <ids.json >tuned.json
$PY - <<'PY'
import json, os, sys
sys.path.append(os.environ["TOP"] + "/jobs")
import pljob
ids = json.load(open("ids.json"))[0]
ex = pljob.load_tokens("tok/tokens.npz")[0]
n = ex["response_len"]
plain, tuned = json.load(open("plain.json"))[0], json.load(open("tuned.json"))[0]
want = ids[len(ids) - n:]
hit_p = sum(a == b for a, b in zip(plain[len(ids) - n - 1:-1], want))
hit_t = sum(a == b for a, b in zip(tuned[len(ids) - n - 1:-1], want))
print("response tokens predicted: base %d/%d, tuned %d/%d" % (hit_p, n, hit_t, n))
assert hit_t > hit_p, "the adapter did not improve the response predictions"
PY
# The adapter is what the rest of the pipeline reads: the merge stage
# (pipelinectl stage merge) folds it into the base, and the merged model
# (BF16, so rounded) predicts what base + adapter predicts, at every
# position that is not a near-tie (top-2 margin 0.05 nats or less).
"$TOP/daemon/pipelinectl" stage merge base="$TEST_TMP/base" adapter="$TEST_TMP/work/adapter" \
    output="$TEST_TMP/merged" >merge.out 2>&1 || { cat merge.out; fail "merge stage"; }
$PY "$J/engines/tiny.py" top1 base work/adapter --logprobs 2 <ids.json >with-adapter.json
$PY "$J/engines/tiny.py" top1 merged --logprobs 2 <ids.json >merged.json
$PY - <<'PY'
import json
a, m = json.load(open("with-adapter.json"))[0], json.load(open("merged.json"))[0]
n = sum(1 for x in a if x[0][1] - x[1][1] > 0.05)
bad = [(i, x, y) for i, (x, y) in enumerate(zip(a, m))
       if x[0][1] - x[1][1] > 0.05 and (x[0][0] != y[0][0] or abs(x[0][1] - y[0][1]) > 0.05)]
print("merged vs base + adapter: %d of %d positions compared, %d differ" % (n, len(a), len(bad)))
assert n > 0.9 * len(a) and not bad, bad[:3]
PY

# The forward against llama.cpp.
eval "$("$TOP/tests/tools/llama-oracle.sh" --env)" || fail "llama-oracle.sh"
$PY "$TOP/tests/fixtures/gen_gemma3.py" fx --layout causal >/dev/null
$PY "$TOP/tests/fixtures/make_tiny_base.py" six --layout causal --layers 6
$PY "$TOP/tests/fixtures/gen_corpus.py" fwd.jsonl --n 3 --filler 20
LLAMA_PID=
trap '[ -n "$LLAMA_PID" ] && kill $LLAMA_PID 2>/dev/null; true' EXIT
for m in fx six; do
	PYTHONPATH=$LLAMA_SRC:$GGUF_PY $PY -B "$TOP/tests/standins/convert_stubbed.py" \
	    "$LLAMA_SRC/convert_hf_to_gguf.py" $m --outtype f32 --outfile $m.gguf >$m.conv.log 2>&1 \
	    || { tail -n 20 $m.conv.log; fail "convert $m"; }
	printf '{"base":"%s/%s","corpus":"%s/fwd.jsonl","output_dir":"%s/tok-%s"}\n' \
	    "$TEST_TMP" $m "$TEST_TMP" "$TEST_TMP" $m >tok-$m.json
	$PY "$J/tokenize_corpus.py" --config tok-$m.json --events tok-$m.ev || fail "tokenize for $m"
	port=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"$LLAMA_BIN/llama-server" -m $m.gguf -c 512 -np 1 -t 1 --host 127.0.0.1 --port $port \
	    >$m.server.log 2>&1 &
	LLAMA_PID=$!
	for i in $(seq 300); do
		curl -sf http://127.0.0.1:$port/health >/dev/null 2>&1 && break
		kill -0 $LLAMA_PID 2>/dev/null || { tail $m.server.log; fail "llama-server died"; }
		sleep 0.1
	done
	echo -n "$m: "
	$PY "$TOP/tests/fixtures/llama_forward_check.py" $m http://127.0.0.1:$port tok-$m/tokens.npz \
	    || fail "the tiny forward disagrees with llama.cpp on $m"
	kill $LLAMA_PID; wait $LLAMA_PID 2>/dev/null || true
	LLAMA_PID=
done
echo "train/tiny-job: OK"
