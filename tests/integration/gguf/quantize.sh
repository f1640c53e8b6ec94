#!/bin/bash
# gguf/quantize.sh: the native quantize stage against llama-quantize itself:
# from F16, BF16 and F32 inputs of the tiny fixtures, with one thread and
# with several, our Q8_0 must be byte-identical to llama-quantize's (same
# rounding, same tensors left unquantized, same KV updates, same tensor
# order and alignment), including a tensor whose ne[0] forces the F16
# fallback. tool = llama-quantize must give the same bytes through the
# stage. A Q8_0 input is copied as llama-quantize copies it. Refused: another
# quantized type, NaN weights; neither leaves
# an output.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gguf.sh"
cd "$TEST_TMP"

fixture cond --layout conditional
fixture causal --layout causal --seed 5
for c in cond causal; do
	for t in f16 bf16 f32; do
		[ "$c" = causal ] && [ "$t" != f16 ] && continue
		stage convert input=$c output=$TEST_TMP/$c-$t.gguf outtype=$t || { cat convert.out; fail "convert"; }
	done
done
# An extra 2-D weight with ne[0] = 48 (not a multiple of 32): Q8_0 is
# impossible, llama-quantize falls back to F16.
gtool edit cond-f32.gguf odd-f32.gguf extra=blk.0.extra_proj.weight:48:8 || fail "edit"

for f in cond-f16 cond-bf16 cond-f32 causal-f16 odd-f32; do
	"$LLAMA_BIN/llama-quantize" $f.gguf ref-$f-q8.gguf Q8_0 2 >lq.log 2>&1 ||
	    { tail -20 lq.log; fail "llama-quantize $f"; }
	for n in 1 2 3; do
		stage quantize input=$f.gguf output=$TEST_TMP/$f-q8-$n.gguf threads=$n ||
		    { cat quantize.out; fail "quantize $f threads=$n"; }
		cmp ref-$f-q8.gguf $f-q8-$n.gguf || fail "$f threads=$n: not identical to llama-quantize"
	done
	note "$f: identical to llama-quantize ($(stat -c %s ref-$f-q8.gguf) bytes; $(grep -o '[0-9]* to Q8_0, [0-9]* copied[^;]*' quantize.out))"
done
grep -q '1 to F16' quantize.out || { cat quantize.out; fail "odd-f32: no F16 fallback reported"; }
"$PCTL" gguf odd-f32-q8-1.gguf | grep -q 'blk.0.extra_proj.weight *F16 *\[48, 8\]' ||
    fail "odd-f32: extra_proj is not F16"

# The default output lands in the work directory and is registered.
stage quantize input=$TEST_TMP/causal-f16.gguf || { cat quantize.out; fail "default output"; }
cmp "$TEST_TMP/work/quantize/model-q8_0.gguf" ref-causal-f16-q8.gguf || fail "default output differs"
grep -q "job.artifact {\"name\":\"gguf\",\"path\":\"$TEST_TMP/work/quantize/model-q8_0.gguf\"" quantize.out ||
    { cat quantize.out; fail "artifact not registered"; }

# llama-quantize through the stage.
stage quantize input=cond-bf16.gguf output=$TEST_TMP/via-tool.gguf tool=llama-quantize \
    "llama_quantize=$LLAMA_BIN/llama-quantize" threads=2 || { cat quantize.out; fail "tool = llama-quantize"; }
cmp via-tool.gguf ref-cond-bf16-q8.gguf || fail "tool = llama-quantize: different bytes"
stage quantize input=cond-f16.gguf output=$TEST_TMP/x.gguf type=Q4_K && fail "native Q4_K accepted"
grep -q 'writes Q8_0 only' quantize.out || { cat quantize.out; fail "Q4_K: message"; }

# Refusals.
# A Q8_0 input is copied as llama-quantize copies it; another quantized
# type is refused (llama-quantize wants --allow-requantize).
"$LLAMA_BIN/llama-quantize" cond-f16-q8-1.gguf ref-again.gguf Q8_0 2 >lq.log 2>&1 || fail "llama-quantize Q8_0 again"
stage quantize input=cond-f16-q8-1.gguf output=$TEST_TMP/again.gguf || { cat quantize.out; fail "Q8_0 again"; }
cmp again.gguf ref-again.gguf || fail "Q8_0 input: not what llama-quantize makes of it"
"$LLAMA_BIN/llama-quantize" cond-f16.gguf q4.gguf Q4_0 2 >lq.log 2>&1 || fail "llama-quantize Q4_0"
stage quantize input=q4.gguf output=$TEST_TMP/requant.gguf && fail "requantized Q4_0"
grep -q 'tensor [a-z0-9_.]* is already Q4_0; requantizing is not supported' quantize.out ||
    { cat quantize.out; fail "requantize: message"; }
gtool edit cond-f16.gguf nan.gguf nan=blk.2.ffn_down.weight || fail "edit nan"
stage quantize input=nan.gguf output=$TEST_TMP/nan-q8.gguf && fail "NaN quantized"
grep -q 'tensor blk.2.ffn_down.weight: element 0 (row 0, column 0) is NaN' quantize.out ||
    { cat quantize.out; fail "NaN: message"; }
[ ! -e requant.gguf ] && [ ! -e nan-q8.gguf ] || fail "a refused quantize left its output"
ls -a | grep -q '\.tmp\.' && fail "a temporary was left behind" || true
note "refusals ok"
