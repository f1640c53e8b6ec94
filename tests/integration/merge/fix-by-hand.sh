#!/bin/bash
# merge and tensor_fix by hand (`pipelinectl stage`, no daemon) on the tiny
# fixtures: a sharded conditional base with a DoRA adapter and a causal base
# with an rsLoRA adapter, checked against the float64 numpy reference; the
# tensor fix of the merged checkpoint with the Gemma 3 defaults (its output's
# digest, which the stage computes, checked against the directory's), then
# the GGUF converter takes it. An adapter whose base_model_name_or_path names
# another model merges by structure with a warning. The exit status is the
# outcome: a wrong count, a collision and an adapter whose recorded base
# identity (pipeline-base.json) is another base's fail with their message,
# and leave nothing behind.
. "$(dirname "$0")/../../lib.sh"
trap - EXIT
G=$TOP/tests/fixtures/gen_gemma3.py
F=$TEST_TMP/fx
/usr/bin/python3 "$G" "$F/cond" --shards 2 --adapter dora --adapter other-base || fail "fixture"
/usr/bin/python3 "$G" "$F/text" --layout causal --adapter rslora || fail "fixture"
cd "$TEST_TMP" || exit 1
st() { "$PIPELINECTL" stage "$@"; }

"$PIPELINECTL" stage merge --help | grep -q '^  threads ' || fail "merge --help lacks threads"
"$PIPELINECTL" stage merge --help | grep -q '^  check_base ' && fail "merge --help still lists check_base"
"$PIPELINECTL" stage tensor_fix --help | grep -q '^  expect_kept ' || fail "tensor_fix --help lacks expect_kept"

st merge base=fx/cond adapter=fx/cond/adapters/dora output=out/merged >merge.out 2>&1 ||
	{ cat merge.out; fail "merge (sharded, DoRA) failed"; }
grep -q '"name":"merged"' merge.out || fail "no merged artifact printed"
grep -q '"unit":"tensors"' merge.out || fail "no progress printed"
[ -f out/merged/model.safetensors.index.json ] || fail "the sharded output has no index"
/usr/bin/python3 "$TOP/tests/fixtures/ref_merge.py" fx/cond fx/cond/adapters/dora out/merged >ref.out ||
	{ tail -5 ref.out; fail "DoRA merge differs from the reference"; }
tail -n 1 ref.out

st merge base=fx/text adapter=fx/text/adapters/rslora output=out/text >text.out 2>&1 ||
	{ cat text.out; fail "merge (causal, rsLoRA) failed"; }
/usr/bin/python3 "$TOP/tests/fixtures/ref_merge.py" fx/text fx/text/adapters/rslora out/text >ref2.out ||
	{ tail -5 ref2.out; fail "rsLoRA merge differs from the reference"; }
tail -n 1 ref2.out

st tensor_fix input=out/merged output=out/fixed >fix.out 2>&1 || { cat fix.out; fail "tensor_fix failed"; }
grep -q '"dropped":39,"kept":54' fix.out || { cat fix.out; fail "tensor_fix counts"; }
grep -q '"name":"manifest"' fix.out || fail "no manifest artifact"
# The stage hands the host the output's digest (artifact_digest), hashed
# while copying: it is the directory digest of pipeline-plugin(3), and the
# host's size is the files'.
got=$(sed -n 's/^job.artifact {"name":"fixed",.*"size":\([0-9]*\),"sha256":"\([0-9a-f]*\)".*/\2 \1/p' fix.out)
want=$(artifact_digest out/fixed)
[ "$got" = "$want" ] || fail "the fixed artifact is \"$got\", its directory \"$want\""
st convert input=out/fixed output=out/model.gguf >conv.out 2>&1 || { cat conv.out; fail "convert refused the fixed checkpoint"; }

# Failures: the exit status, the message, nothing left.
st tensor_fix input=out/merged output=bad/fixed expect_dropped=439 expect_kept=444 >e1.out 2>&1 &&
	fail "a wrong count was accepted"
grep -q "39 of 93 tensors dropped and 54 kept, expected 439 dropped and 444 kept" e1.out ||
	{ cat e1.out; fail "wrong-count message"; }
st tensor_fix input=out/merged output=bad/fixed rename="model.language_model.layers.1.=x. model.language_model.layers.2.=x." >e2.out 2>&1 &&
	fail "a rename collision was accepted"
grep -q 'rename collision: "model.language_model.layers.1.input_layernorm.weight" and "model.language_model.layers.2.input_layernorm.weight"' e2.out ||
	{ cat e2.out; fail "collision message"; }
# A name is not an identity: the structure decides, the name is a warning.
st merge base=fx/cond adapter=fx/cond/adapters/other-base output=out/other >e3.out 2>&1 ||
	{ cat e3.out; fail "an adapter naming another base was refused"; }
grep -q 'warn.*names its base "google/gemma-3-4b-it".*merging by structure' e3.out ||
	{ cat e3.out; fail "other-base: no warning"; }
# The identity our train stage records beside an adapter: another base's
# config and tensor index digests are refused, naming both.
cp -r fx/text/adapters/rslora ident
oc=$(sha256sum fx/cond/config.json | cut -c1-64)
printf '{"base": "fx/cond", "config_sha256": "%s", "tensors_sha256": "%064d"}\n' "$oc" 0 >ident/pipeline-base.json
st merge base=fx/text adapter=ident output=bad/merged >e4.out 2>&1 &&
	fail "an adapter trained on another base was merged"
tc=$(sha256sum fx/text/config.json | cut -c1-64)
grep -q "pipeline-base.json: the adapter was trained on base fx/cond (config.json $oc, tensor index 0\{64\}), not on .*fx/text (config.json $tc, tensor index [0-9a-f]\{64\})" e4.out ||
	{ cat e4.out; fail "identity message"; }
[ -z "$(ls -A bad 2>/dev/null)" ] || { ls -la bad; fail "files left behind by failed stages"; }
note "by hand: merge (DoRA, sharded; rsLoRA), tensor_fix, convert, three refusals, a name warning"
