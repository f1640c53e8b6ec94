#!/bin/bash
# gguf/llama-load.sh: llama.cpp loads what the native stages write. For both
# fixture layouts, llama-simple loads the F16 file of convert and the Q8_0
# file of quantize, reads the hyperparameters and special tokens they
# declare (as its loader prints them), and generates 16 tokens.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gguf.sh"
cd "$TEST_TMP"

fixture cond --layout conditional
fixture causal --layout causal
for c in cond causal; do
	stage convert input=$c output=$TEST_TMP/$c-f16.gguf || { cat convert.out; fail "convert $c"; }
	stage quantize input=$c-f16.gguf output=$TEST_TMP/$c-q8.gguf || { cat quantize.out; fail "quantize $c"; }
	vocab=$(/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c.get("text_config", c)["vocab_size"])' $c/config.json)
	for f in $c-f16 $c-q8; do
		timeout 120 "$LLAMA_BIN/llama-simple" -m $f.gguf -n 16 "hello world" >$f.simple 2>$f.err ||
		    { tail -30 $f.err; fail "llama-simple could not run $f"; }
		for want in "arch *= gemma3" "n_layer *= 4" "n_embd *= 64" "n_head *= 4" "n_head_kv *= 2" \
		    "n_swa *= 16" "n_vocab *= $vocab" "BOS token *= 2 '<bos>'" "EOS token *= 1 '<eos>'" \
		    "EOT token *= 106 '<end_of_turn>'" "n_embd_head_k *= 32" "f_norm_rms_eps *= 1.0e-06" \
		    "file type *= $([ $f = $c-q8 ] && echo Q8_0 || echo F16)"; do
			grep -q "print_info: $want" $f.err || { grep print_info $f.err; fail "$f: llama.cpp did not read \"$want\""; }
		done
		# The prompt, then generated text.
		out=$(cat $f.simple)
		case "$out" in "<bos>hello world"?*) ;; *) fail "$f: no generated text: $out";; esac
		grep -Eq 'eval time = .* / +15 runs' $f.err || { tail -8 $f.err; fail "$f: 16 tokens were not generated"; }
		note "$f: loaded, generated: ${out#<bos>hello world}"
	done
done
