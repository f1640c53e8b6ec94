#!/bin/bash
# gguf/convert.sh: the native convert stage, by hand, on every layout of the
# tiny fixture (conditional, causal, sharded; BF16, and F16 and F32 copies)
# and every outtype. Each file is read back with gguf-py and checked two
# ways: every KV and tensor against the spec (HACKING.md: Gemma 3 to GGUF,
# computed from the checkpoint with numpy and sentencepiece), and against
# what the real llama.cpp convert_hf_to_gguf.py (on the pinned environment's
# real torch and transformers) writes from the same checkpoint: every
# tensor byte-identical, every KV equal but the differences pipeline.ini(5)
# lists under convert, which must be exactly those. Then the refusals: an unsupported
# architecture (named, pointing to tool = llama.cpp), a missing layer, a
# shape that contradicts config.json, no tokenizer.model, NaN weights; none
# leaves an output behind.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gguf.sh"
cd "$TEST_TMP"

fixture cond --layout conditional
fixture causal --layout causal
fixture sharded --layout causal --shards 3 --seed 77
# Large enough for the write engine's every part: hundreds of pieces in
# flight between the two workers and the hasher, more than its ring of
# slots, over two files, converted (f16) and copied as stored (bf16).
fixture medium --size medium --layout causal --shards 2 --seed 5

# The same checkpoint stored as F16 and as F32: other +1 arithmetic for the
# norms (half for F16, as torch adds), the raw copy path for F16 -> f16.
for dt in F16 F32; do
	cp -r causal causal-$dt
	/usr/bin/python3 - causal-$dt/model.safetensors $dt <<'PY'
import json, os, struct, sys
import numpy as np
sys.path.insert(0, os.path.join(os.environ["TOP"], "jobs"))
import pljob
p, dt = sys.argv[1], sys.argv[2]
b = open(p, "rb").read()
h, meta, base = pljob.read_safetensors_header(p)
out, off, hdr = [], 0, {}
for k in sorted(h, key=lambda k: h[k]["data_offsets"][0]):
    v = h[k]
    raw = b[base + v["data_offsets"][0]:base + v["data_offsets"][1]]
    a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    a = a.astype(np.float16 if dt == "F16" else np.float32).tobytes()
    hdr[k] = {"dtype": dt, "shape": v["shape"], "data_offsets": [off, off + len(a)]}
    out.append(a)
    off += len(a)
if meta:
    hdr["__metadata__"] = meta
j = json.dumps(hdr).encode()
j += b" " * (-len(j) % 8)
open(p, "wb").write(struct.pack("<Q", len(j)) + j + b"".join(out))
PY
done

# A tokenizer.json beside tokenizer.model: its post-processor decides
# tokenizer.ggml.add_sep_token, which the reference writes from it. tj has
# Gemma 3's real templates (a pair is "<bos> A <bos> B": no separator,
# false); tjsep puts the EOS token between the two (true).
for v in tj tjsep; do
	cp -r causal $v
	/usr/bin/python3 - $v/tokenizer.json $v <<'PY'
import json, sys
bos = {"SpecialToken": {"id": "<bos>", "type_id": 0}}
mid = {"SpecialToken": {"id": "<bos>" if sys.argv[2] == "tj" else "<eos>", "type_id": 1}}
seq = lambda s, t: {"Sequence": {"id": s, "type_id": t}}
pp = {"type": "TemplateProcessing", "single": [bos, seq("A", 0)],
      "pair": [bos, seq("A", 0), mid, seq("B", 1)],
      "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}}
json.dump({"version": "1.0", "added_tokens": [], "post_processor": pp}, open(sys.argv[1], "w"))
PY
done

# Linear rope scaling, as gemma-3-4b has it.
cp -r causal rope
sed -i 's/"rope_scaling": null/"rope_scaling": {"rope_type": "linear", "factor": 8.0}/' rope/config.json
grep -q '"factor": 8.0' rope/config.json || fail "rope: config edit"

# The differences from the reference, as the manual lists them.
gtool listed "$TOP/man/pipeline.ini.5" >listed
[ "$(wc -l <listed)" -ge 1 ] || fail "pipeline.ini(5) lists no convert differences"
for c in cond causal sharded causal-F16 causal-F32 rope medium tj tjsep; do
	for t in f16 bf16 f32; do
		case $c:$t in cond:*|*:f16|medium:bf16) ;; *) continue ;; esac
		stage convert input=$c output=$TEST_TMP/$c-$t.gguf outtype=$t ||
		    { cat convert.out; fail "convert $c $t"; }
		grep -q '^job.artifact {"name":"gguf"' convert.out || fail "$c $t: no gguf artifact"
		# The digest the stage hashed while writing is the file's.
		got=$(sed -n 's/^job.artifact {"name":"gguf",.*"sha256":"\([0-9a-f]*\)".*/\1/p' convert.out)
		[ "$got" = "$(sha256sum <$c-$t.gguf | cut -d' ' -f1)" ] ||
		    fail "$c $t: artifact digest \"$got\" is not the file's"
		gtool spec $c-$t.gguf $c $t >spec.out || { cat spec.out; fail "$c $t: not as the spec says"; }
		ref_convert $c ref-$c-$t.gguf $t
		gtool compare $c-$t.gguf ref-$c-$t.gguf listed >cmp.out ||
		    { cat cmp.out; fail "$c $t: differs from convert_hf_to_gguf.py not as listed"; }
		# The medium fixture's name (gemma-3-medium-text) gives the
		# reference a basename and a finetune: the optional entries.
		[ $c != medium ] || grep -q '^compare: general.basename: only in the reference' cmp.out ||
		    { cat cmp.out; fail "medium $t: the reference wrote no general.basename"; }
		note "$c $t: $(tail -1 spec.out); $(tail -1 cmp.out)"
	done
done
# The conditional layout drops the vision tower; a second conversion
# gives the same bytes.
stage convert input=cond output=$TEST_TMP/cond-again.gguf || { cat convert.out; fail "convert again"; }
grep -q '\\"skipped\\":39' convert.out || { cat convert.out; fail "vision tensors not skipped"; }
cmp -s cond-f16.gguf cond-again.gguf || fail "convert is not deterministic"
"$PCTL" gguf tj-f16.gguf | grep -q 'tokenizer.ggml.add_sep_token = false$' ||
    fail "tj: add_sep_token = false not written (Gemma 3's pair template)"
"$PCTL" gguf tjsep-f16.gguf | grep -q 'tokenizer.ggml.add_sep_token = true$' ||
    fail "tjsep: add_sep_token = true not written (EOS between the pair)"
"$PCTL" gguf causal-f16.gguf | grep -q 'add_sep_token' &&
    fail "causal: add_sep_token written with no tokenizer.json to take it from"
"$PCTL" gguf rope-f16.gguf >list.out || fail "pipelinectl gguf rope"
grep -q "gemma3.rope.scaling.type = 'linear'" list.out && grep -q 'gemma3.rope.scaling.factor = 8$' list.out ||
    { grep rope list.out; fail "rope scaling not written"; }
"$PCTL" gguf cond-f16.gguf >list.out || fail "pipelinectl gguf"
grep -q 'token_embd.weight *F16 *\[64, 776\]' list.out || { cat list.out; fail "listing"; }
grep -q "tokenizer.ggml.add_space_prefix = false" list.out || fail "listing: add_space_prefix"
"$PCTL" --json gguf cond-f16.gguf | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
t = {x["name"]: x for x in d["tensors"]}
assert t["token_embd.weight"]["shape"] == [64, 776] and t["token_embd.weight"]["type"] == "F16"
k = {x["key"]: x for x in d["kv"]}
assert k["tokenizer.ggml.tokens"]["n"] == 776 and k["tokenizer.ggml.tokens"]["truncated"]
assert k["gemma3.block_count"]["value"] == 4
' || fail "pipelinectl --json gguf"

# Transformers' defaults for the fields config.json leaves out.
cp -r causal sparse
/usr/bin/python3 - sparse/config.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
for k in ("max_position_embeddings", "rope_local_base_freq", "rms_norm_eps", "rope_theta",
          "sliding_window_pattern"):
    c.pop(k)
json.dump(c, open(sys.argv[1], "w"))
PY
stage convert input=sparse output=$TEST_TMP/sparse.gguf || { cat convert.out; fail "sparse config"; }
gtool spec sparse.gguf sparse f16 >spec.out || { cat spec.out; fail "sparse: defaults"; }
"$PCTL" gguf sparse.gguf >list.out
grep -q 'gemma3.context_length = 131072' list.out || fail "context_length default"
grep -q 'gemma3.rope.freq_base_swa = 10000' list.out || fail "freq_base_swa default"

# The external option: llama.cpp's converter through the stage (on the
# pinned environment), its log in the job log, its output checked and
# registered like ours.
stage convert input=causal output=$TEST_TMP/via-llama.gguf tool=llama.cpp "llama_cpp=$LLAMA_SRC" \
    "python=$PL_PY" || { cat convert.out; fail "tool = llama.cpp"; }
grep -q 'Model successfully exported' convert.out || { cat convert.out; fail "tool = llama.cpp: log not captured"; }
cmp via-llama.gguf ref-causal-f16.gguf || fail "tool = llama.cpp: not the converter's output"
grep -q '^job.artifact {"name":"gguf"' convert.out || fail "tool = llama.cpp: no artifact"

# Refusals, each naming what is wrong, none leaving a file.
refuse() {	# refuse CKPT PATTERN
	if stage convert input=$1 output=$TEST_TMP/refused.gguf; then
		fail "$1: converted"
	fi
	grep -q -- "$2" convert.out || { cat convert.out; fail "$1: message lacks \"$2\""; }
	[ ! -e refused.gguf ] || fail "$1: left refused.gguf"
	ls -a | grep -q 'refused.gguf.tmp' && fail "$1: left a temporary" || true
	note "$1 refused: $(grep -m1 'failed:' convert.out)"
}
cp -r causal llama
sed -i 's/Gemma3ForCausalLM/LlamaForCausalLM/' llama/config.json
refuse llama "architecture LlamaForCausalLM is not supported.*tool = llama.cpp"
cp -r causal layers
sed -i 's/"num_hidden_layers": 4/"num_hidden_layers": 5/' layers/config.json
refuse layers "no model.layers.4.input_layernorm.weight"
cp -r causal shape
sed -i 's/"intermediate_size": 256/"intermediate_size": 128/' shape/config.json
refuse shape "tensor model.layers.0.mlp.[a-z_]*.weight has shape \[[0-9, ]*\], config.json implies \[[0-9, ]*128[0-9, ]*\]"
cp -r causal notok
rm notok/tokenizer.model
refuse notok "no tokenizer.model"
cp -r causal nan
/usr/bin/python3 - nan/model.safetensors <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.environ["TOP"], "jobs"))
import pljob
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
h, _, base = pljob.read_safetensors_header(p)
o = base + h["model.layers.1.mlp.up_proj.weight"]["data_offsets"][0]
b[o + 6:o + 8] = b"\xc0\x7f"     # element 3 of a BF16 tensor: NaN
open(p, "wb").write(b)
PY
refuse nan "model.layers.1.mlp.up_proj.weight: element 3 is NaN"
stage convert input=causal outtype=f8 && fail "outtype f8 accepted"
grep -q 'outtype' convert.out || { cat convert.out; fail "outtype f8: message"; }
note "all refusals ok"
