#!/bin/bash
# e2e/router-real.sh: a real model learns, end to end.
# Gemma 3 270M, the real pretrained base (tests/tools/realbase.sh, built
# from the registry into the cache), through a real daemon and the REAL
# Ollama (tests/lib/e2e.sh: router_prepare), shortened to v1 against v0:
#   router-v0 (etc/examples/router/v0.ini, one bake pass): the base
#     converted, quantized, verified, registered and baked on the router's
#     case set;
#   router-v1 (v1.ini with corpus-check.jsonl, the first 72 of v1's 156
#     examples, CHECK_EPOCHS epochs of 8-example steps, one bake pass):
#     tokenize -> probe -> train (engine hf, device cpu, LoRA r16, shared
#     prefix) -> merge -> tensor_fix -> convert -> quantize -> verify ->
#     register -> bake -> bake-v0 (router-v0 on the same case file:
#     router-v0's bake reused) -> gate against it.
# One bake pass each, not the demo's two: greedy answers of one build on
#   one machine repeat, and the second pass is most of a minute of v1's
#   bake and two of v0's (v0 answers up to max_tokens).
# Asserted:
#   - learning: the gate's verdict is promote, and on the fair slice (the
#     cases neither model was trained on: 63 here, phrased outside the
#     corpus's templates, guards, context, capabilities v1 never saw) v1's
#     accuracy beats v0's by at least MARGIN_PP points with McNemar's p
#     under 0.01.  Measured (2026-12-04, this machine quiet): v1 25.4%,
#     v0 4.8% of 63 cases, +20.6 pp, 13 cases v1 alone passed and 0 v0
#     alone, p 0.00024.  Training on the CPU is deterministic (seeded, the
#     same threads) and the answers greedy, so the figures move only when
#     the code, the data or a pinned version does; MARGIN_PP = 12 leaves
#     that room and still fails a v1 that learned half as much, and p <
#     0.01 fails a difference the case set cannot tell from chance;
#   - the export: the F16 GGUF (convert's, served as its own tag) and the
#     Q8_0 GGUF (the registered router:v1) served by Ollama against
#     transformers' forward of the merged checkpoint, along Ollama's greedy
#     answers to the fair slice's requests (tests/helpers/ollama_export_check.py):
#     top-1 agreement and the largest |delta log-prob| (F16: >= 0.99 and
#     <= F16_DLP nats; Q8_0: >= 0.95 and <= Q8_DLP nats).  Measured
#     (2026-12-04): F16 356 of 359 positions, largest 0.038 nats; Q8_0 303
#     of 314, 0.439 nats.  The three F16 disagreements are all where the
#     answer's JSON has closed: the pretrained base never trained the
#     embeddings of <end_of_turn> and the unused tokens, so after 18 LoRA
#     steps (LoRA trains no embedding) transformers still puts only about 3%
#     on <end_of_turn> there, and a flat tail of such tokens (-3.4 to -4.7
#     nats each) orders differently after F16's rounding.  The Q8_0 ones
#     are inside answers to requests the model never saw, where the top
#     two tokens are within a few tenths of a nat.  Greedy answers on one
#     build repeat, so the room left (0.6 and 1.5 points of agreement,
#     0.012 and 0.06 nats) is for a change of code or pinned version, and
#     a wrong tensor, scale or tokenizer fails by far more;
#   - the tokenizer (realbase.sh's own check, reused): the base's record
#     of it (realbase.sh --checks), and real_base.py check-tokens on the
#     exported F16 GGUF (llama-server) against the merged checkpoint's
#     tokenizer: every hard string tokenized alike.
# Cost: 627 s (10.4 minutes) in .ci/run on 2026-12-04, with other work on
#   the machine: v0 with its one-pass bake and the preparation about 145 s,
#   v1 336 s (training 18 steps of 8 examples about 267 s, its bake 60 s),
#   the exports' and the tokenizer's checks about 145 s (357 s before the
#   export check kept only the answer's logits); each run's time is
#   printed as a note.
# run.sh: alone (the real model).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/e2e.sh"
trap 'e2e_stop; pl_kill9 2>/dev/null' EXIT
cd "$TEST_TMP"
CHECK_EPOCHS=2
MARGIN_PP=12
MAX_P=0.01
F16_DLP=0.05
Q8_DLP=0.5
T0=$(date +%s)
router_daemon "$TEST_TMP/e2e"
R=$ROUTER_DIR

sed -e 's/^passes = 2$/passes = 1/' "$R/v0.ini" >"$R/v0-check.ini"
grep -q "^passes = 1$" "$R/v0-check.ini" || fail "v0-check.ini: passes not substituted"
pctl submit "$R/v0-check.ini" >/dev/null || fail "submit router-v0"
wait_run router-v0 succeeded 1200
t1=$(date +%s)
note "router-v0 succeeded in $((t1 - T0)) s (with preparation)"

# v1 shortened: the check corpus, CHECK_EPOCHS epochs (v1.ini's max_steps,
# the demo's cut of the full corpus, is dropped: the epochs decide here).
sed -e 's/^corpus = corpus-v1.jsonl$/corpus = corpus-check.jsonl/' \
    -e "s/^num_train_epochs = 2\$/num_train_epochs = $CHECK_EPOCHS/" \
    -e '/^max_steps = /d' \
    -e 's/^passes = 2$/passes = 1/' \
    -e 's/^description = .*/description = router v1 (make check): corpus-check, gated against the base/' \
    "$R/v1.ini" >"$R/v1-check.ini"
grep -q "^corpus = corpus-check.jsonl" "$R/v1-check.ini" || fail "v1-check.ini: corpus not substituted"
grep -q "^passes = 1$" "$R/v1-check.ini" || fail "v1-check.ini: passes not substituted"
[ "$(grep -c "^num_train_epochs = $CHECK_EPOCHS\$" "$R/v1-check.ini")" = 2 ] || fail "v1-check.ini: epochs not substituted"
! grep -q "^max_steps" "$R/v1-check.ini" || fail "v1-check.ini: max_steps not dropped"
pctl check "$R/v1-check.ini" >/dev/null || fail "pipelinectl check v1-check.ini"
pctl submit "$R/v1-check.ini" >/dev/null || fail "submit router-v1"
wait_run router-v1 succeeded 3600
t2=$(date +%s)
note "router-v1 succeeded in $((t2 - t1)) s"
pctl report router-v1 --vs router-v0 || fail "report"

# Learning: promote, and the fair-slice margin.
pctl --json values router-v1 gate >gate.json || fail "values router-v1 gate"
/usr/bin/python3 - gate.json "$MARGIN_PP" "$MAX_P" <<'PY' || fail "router-v1 did not learn enough"
import json, sys
vals = json.load(open(sys.argv[1]))["values"]
v = json.loads([x["value"] for x in vals if x["key"] == "gate.verdict"][0])
f = v["fair_slice"]
c, i = f["candidate"]["acc"] * 100, f["incumbent"]["acc"] * 100
print("# gate: %s (%s); fair slice %d cases: v1 %.1f%%, v0 %.1f%%, +%.1f pp, McNemar p %.3g (%d:%d)"
      % (v["verdict"], v.get("reason", ""), f["cases"], c, i, c - i, f["mcnemar_p"],
         f["candidate_only"], f["incumbent_only"]))
assert v["verdict"] == "promote", v["verdict"]
assert f["cases"] >= 40, f["cases"]
assert c - i >= float(sys.argv[2]), "margin %.1f pp < %s" % (c - i, sys.argv[2])
assert f["mcnemar_p"] < float(sys.argv[3]), "McNemar p %.3g >= %s" % (f["mcnemar_p"], sys.argv[3])
PY

# The export against transformers, through Ollama.
merged=$(artifact_path router-v1 merge merged)
f16=$(artifact_path router-v1 convert gguf)
[ -d "$merged" ] && [ -f "$f16" ] || fail "artifacts: $merged $f16"
ollama_create router:v1-f16 "$f16"
/usr/bin/python3 - "$R/cases.jsonl" "$R/system.txt" >prompts.json <<'PY'
import json, sys
system = open(sys.argv[2]).read().replace("{{channel}}", "default")
out = []
for l in open(sys.argv[1]):
    c = json.loads(l)
    if not c["id"].startswith("f-"):
        continue
    out.append([{"role": "system", "content": system}] + c.get("setup", []) +
               [{"role": "user", "content": c["user"]}])
json.dump(out[::3], sys.stdout)
PY
"$ROUTER_PY" "$TOP/tests/helpers/ollama_export_check.py" "$OURL" router:v1-f16 "$merged" prompts.json F16 \
    "$F16_DLP" 0.99 >f16.out 2>&1 || { cat f16.out; fail "F16 export check"; }
tail -1 f16.out | sed 's/^/# /'
"$ROUTER_PY" "$TOP/tests/helpers/ollama_export_check.py" "$OURL" router:v1 "$merged" prompts.json Q8_0 \
    "$Q8_DLP" 0.95 >q8.out 2>&1 || { cat q8.out; fail "Q8_0 export check"; }
tail -1 q8.out | sed 's/^/# /'
# The tokenizer: the base's own check (tests/tools/realbase.sh --checks:
# transformers' tokenizer and tokenizer.model against llama.cpp on the
# original GGUF) passed when it was made, and the same check
# (real_base.py check-tokens) holds for the exported F16 GGUF, whose
# tokenizer convert wrote from the merged checkpoint's tokenizer.model,
# served by llama-server against transformers' tokenizer of the merged
# checkpoint.
"$TOP/tests/tools/realbase.sh" --checks >base-checks.json || fail "realbase.sh --checks"
/usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["tokens"]["strings"] >= 10, d' \
    base-checks.json || fail "the base's tokenizer check is not recorded"
eval "$("$TOP/tests/tools/llama-oracle.sh" --env)" || fail "llama-oracle.sh"
port=$(free_port)
"$LLAMA_BIN/llama-server" -m "$f16" --host 127.0.0.1 --port "$port" -c 1024 -np 1 -t 1 \
    >llama-server.log 2>&1 &
LPID=$!
for _ in $(seq 1 600); do
	curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
	kill -0 $LPID 2>/dev/null || { cat llama-server.log; fail "llama-server exited"; }
	sleep 0.1
done
PYTHONPATH=$GGUF_PY "$ROUTER_PY" -B "$TOP/tests/fixtures/real_base.py" check-tokens "$merged" \
    "http://127.0.0.1:$port" tokens.json >tokens.out 2>&1 || { kill $LPID; cat tokens.out; fail "tokenizer of the exported GGUF"; }
kill $LPID 2>/dev/null
grep 'real_base.py: tokens' tokens.out | sed 's/^/# /'
note "e2e/router-real took $(( $(date +%s) - T0 )) s"
echo "PASS: a real Gemma 3 270M learned the router (v1 promoted over v0); the F16 and Q8_0 exports served by Ollama agree with transformers"
