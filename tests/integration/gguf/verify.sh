#!/bin/bash
# gguf/verify.sh: the verify stage. By hand: the same digest as the previous
# version fails naming both files (G24), a different one passes with every
# check listed; a tensor left F16, a missing norm, a missing EOS id and an
# unquantized file each fail naming what is wrong; identical adapters fail
# too. Then on a real daemon, convert -> quantize -> verify for v1, v2 built
# from the same checkpoint with previous = v1 (fails, naming both runs and
# paths: the G24 accident), and v3 from another checkpoint (passes); the
# result is stored as a value and published as a job.verify event.
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/gguf.sh"
cd "$TEST_TMP"

fixture a --layout causal --seed 1
fixture b --layout causal --seed 2
for c in a b; do
	stage convert input=$c output=$TEST_TMP/$c-f16.gguf || { cat convert.out; fail "convert $c"; }
	stage quantize input=$c-f16.gguf output=$TEST_TMP/$c.gguf || { cat quantize.out; fail "quantize $c"; }
done
cp a.gguf a-copy.gguf
sha_a=$(sha256sum a.gguf | cut -d' ' -f1)
sha_b=$(sha256sum b.gguf | cut -d' ' -f1)

# Same digest: fails, both paths named, G24.
stage verify input=a.gguf previous_gguf=a-copy.gguf && fail "identical digest passed"
grep -q "failed: gguf $TEST_TMP/a.gguf (by-hand) has the same sha256 $sha_a as $TEST_TMP/a-copy.gguf .*(G24)" verify.out ||
    { cat verify.out; fail "identical digest: message"; }
# Different: passes, with the digests and the checks in the value.
stage verify input=a.gguf previous_gguf=b.gguf || { cat verify.out; fail "different digest failed"; }
sed -n 's/^job.value {"key":"verify","value":\(.*\)}$/\1/p' verify.out >value.json
/usr/bin/python3 - value.json "$sha_a" "$sha_b" <<'PY' || { cat verify.out; fail "verify value"; }
import json, sys
v = json.loads(json.load(open(sys.argv[1])))
assert v["ok"] is True and v["reasons"] == [], v
assert v["gguf"]["sha256"] == sys.argv[2] and v["previous_gguf"]["sha256"] == sys.argv[3], v
assert v["tensors"] == 54 and v["weights"] == 29 and v["norms"] == 25 and v["vocab"] == 768, v
text = " ".join(v["checked"])
for w in ("differs from the previous version", "architecture gemma3", "54 tensors",
          "29 2-D weights are Q8_0", "25 norms are F32", "768 tokens = token_embd rows",
          "special ids present"):
    assert w in text, (w, v["checked"])
PY
grep -q '^job.verify {"reasons":\[\]' verify.out || fail "no job.verify event printed"

# Structural defects, each named.
defect() {	# defect FILE PATTERN
	stage verify input=$1 previous_gguf=b.gguf && fail "$1 passed"
	grep -q -- "$2" verify.out || { cat verify.out; fail "$1: message lacks \"$2\""; }
	note "$1: $(grep -m1 'failed:' verify.out)"
}
gtool edit a.gguf f16.gguf f16=blk.1.attn_q.weight || fail edit
defect f16.gguf "tensor blk.1.attn_q.weight is F16, expected Q8_0"
gtool edit a.gguf nonorm.gguf drop=blk.2.ffn_norm.weight || fail edit
defect nonorm.gguf "tensor blk.2.ffn_norm.weight is missing"
grep -q '53 tensors, expected 54 for 4 layers' verify.out || fail "nonorm: tensor count"
gtool edit a.gguf noeos.gguf delkv=tokenizer.ggml.eos_token_id || fail edit
defect noeos.gguf "tokenizer.ggml.eos_token_id is missing"
gtool edit a.gguf badid.gguf setu32=tokenizer.ggml.bos_token_id:9999 || fail edit
defect badid.gguf "tokenizer.ggml.bos_token_id = 9999 is outside the 768-token vocabulary"
defect a-f16.gguf "tensor token_embd.weight is F16, expected Q8_0"
head -c 100000 a.gguf >trunc.gguf
defect trunc.gguf "trunc.gguf: .*runs past the end of the file"
stage verify input=a-f16.gguf type=F16 previous_gguf=b-f16.gguf || { cat verify.out; fail "type = F16"; }

# Adapters compared the same way.
mkdir -p ad1 ad2
echo weights >ad1/adapter_model.safetensors
cp ad1/adapter_model.safetensors ad2/
stage verify input=a.gguf previous_gguf=b.gguf adapter=ad1 previous_adapter=ad2 && fail "same adapter passed"
grep -q "failed: adapter $TEST_TMP/ad1 (by-hand) has the same sha256 .* as $TEST_TMP/ad2" verify.out ||
    { cat verify.out; fail "adapter: message"; }
echo other >ad2/adapter_model.safetensors
stage verify input=a.gguf previous_gguf=b.gguf adapter=ad1 previous_adapter=ad2 ||
    { cat verify.out; fail "different adapters failed"; }
note "by hand ok"

# On a daemon: previous = v1 from the store.
pl_start
spec() {	# spec NAME PREVIOUS CKPT
	{
		echo "[run]"
		echo "name = $1"
		[ -n "$2" ] && echo "previous = $2"
		echo "[convert]"
		echo "stage = convert"
		echo "input = $TEST_TMP/$3"
		echo "[quantize]"
		echo "stage = quantize"
		echo "after = convert"
		echo "[verify]"
		echo "stage = verify"
		echo "after = quantize"
	} >$1.ini
}
spec v1 "" a
pctl submit v1.ini >/dev/null || fail "submit v1"
wait_run v1 succeeded 120
spec v2 v1 a
pctl submit v2.ini >/dev/null || fail "submit v2"
wait_run v2 failed 120
[ "$(job_state v2 verify)" = failed ] || fail "v2: verify did not fail"
# status of a failed run exits 6 (pipelinectl(1) EXIT STATUS), and still prints it.
rc=0
pctl --json status v2 >v2.json || rc=$?
[ "$rc" = 6 ] || fail "status of the failed run v2 exited $rc, not 6"
grep -q "has the same sha256 $sha_a as .*/model-q8_0.gguf (v1).*(G24)" v2.json ||
    { cat v2.json; fail "v2: failure does not name v1 and G24"; }
grep -q "(v2) has the same sha256" v2.json || fail "v2: failure does not name v2"
spec v3 v1 b
pctl submit v3.ini >/dev/null || fail "submit v3"
wait_run v3 succeeded 120
pctl --json values v3 >v3.json
/usr/bin/python3 - v3.json "$sha_a" "$sha_b" <<'PY' || { cat v3.json; fail "v3: verify value"; }
import json, sys
d = json.load(open(sys.argv[1]))
v = [json.loads(x["value"]) for x in d["values"] if x["key"] == "verify"][0]
assert v["ok"] and v["run"] == "v3" and v["previous"] == "v1", v
assert v["gguf"]["sha256"] == sys.argv[3], v
assert v["previous_gguf"]["sha256"] == sys.argv[2] and v["previous_gguf"]["run"] == "v1", v
PY
[ "$(db "SELECT count(*) FROM events WHERE run = 'v3' AND type = 'job.verify';")" = 1 ] ||
    fail "v3: no job.verify event on the feed"
pl_stop
# tests/lib.sh's exit trap kills a daemon still running; this one stopped.
trap - EXIT
note "daemon ok"
