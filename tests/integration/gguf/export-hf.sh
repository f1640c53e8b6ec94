#!/bin/bash
# gguf/export-hf.sh: the export against real transformers and real llama.cpp.
# The tiny conditional fixture gets a plain LoRA adapter merged by our
# merge stage; transformers' own Gemma3ForConditionalGeneration (5.5, the
# pinned environment, float32) runs the merged checkpoint, and llama-server
# (the oracle build) serves our convert's F16 file and our quantize's Q8_0
# file of it. Over 400 positions (four sequences of 100 tokens, longer
# than the sliding window of 16) the next-token log-probabilities are
# compared (tests/helpers/hf_export_check.py): top-1 agreement and the largest
# |delta log-prob| of the top-1 token, printed and asserted. F16: within
# 0.01 nats, every position with a top-2 margin over 0.02 nats agrees, at
# least 99% in all. Q8_0: within 0.1 nats, every position with a margin
# over 0.2 nats agrees, at least 90% in all. The fixture's weights are
# random, so its next-token distribution is nearly flat (most top-2
# margins are hundredths of a nat) and Q8_0's rounding (about 0.4% of a
# block's largest weight) moves log-probabilities by a few hundredths of a
# nat: near-ties flip there. A broken export (a tensor, a norm, the rope,
# the window) moves them by tenths to whole nats and fails both.
# run.sh: alone (the real transformers against llama-server).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gguf.sh"
cd "$TEST_TMP"

fixture cond --layout conditional --adapter plain
"$PCTL" stage merge -w "$TEST_TMP/work/merge" base=cond adapter=cond/adapters/plain \
    output="$TEST_TMP/merged" >merge.out 2>&1 || { cat merge.out; fail "merge"; }
stage convert input=merged output=$TEST_TMP/m-f16.gguf || { cat convert.out; fail "convert"; }
stage quantize input=m-f16.gguf output=$TEST_TMP/m-q8.gguf || { cat quantize.out; fail "quantize"; }
# Three sequences of 100 tokens: <bos>, then the fixture's own corpus.
"$PL_PY" - merged/tokenizer.model seqs.json <<'PY' || fail "sequences"
import json, sys
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
text = ["The operator starts the run before the night shift and checks the loss in the morning.",
        "A merged checkpoint is converted, quantized and served; the answers must not change.",
        "Every tensor is written once, fsynced, and renamed into place when it is whole.",
        "Bad input gets a clear error naming the file, the line and the key."]
seqs = []
for t in text:
    ids = [2] + sp.encode(" ".join([t] * 20))
    seqs.append(ids[:100])
assert len(seqs) == 4 and all(len(s) == 100 for s in seqs)
json.dump(seqs, open(sys.argv[2], "w"))
PY
export LLAMA_BIN
"$PL_PY" "$TOP/tests/helpers/hf_export_check.py" merged seqs.json m-f16.gguf F16 0.01 0.99 >f16.out 2>&1 ||
    { cat f16.out; fail "F16 export differs from transformers"; }
"$PL_PY" "$TOP/tests/helpers/hf_export_check.py" merged seqs.json m-q8.gguf Q8_0 0.1 0.90 >q8.out 2>&1 ||
    { cat q8.out; fail "Q8_0 export differs from transformers"; }
note "$(grep '^F16: top-1' f16.out)"
note "$(grep '^Q8_0: top-1' q8.out)"
