#!/bin/bash
# probe/job-oom: jobs/probe.py (tiny engine) reports the memory of one
# forward and backward on the longest example, growing with the LoRA rank;
# the tiny engine's GPU-memory stand-in fails like a CUDA OOM (oom event,
# exit 3) in the phase where the card would fill: load, forward, or (train,
# test-only oom_at_step) the optimizer step; a train launch that dies in
# load reports no loop_started, one that dies in the loop does.
set -eu
: "${TOP:?}" "${TEST_TMP:?}"
PY=/usr/bin/python3
J=$TOP/jobs
cd "$TEST_TMP"
. "$TOP/tests/lib.sh"

$PY "$TOP/tests/fixtures/gen_gemma3.py" base >/dev/null
$PY "$TOP/tests/fixtures/gen_corpus.py" corpus.jsonl --n 12 --filler 20
printf '{"base":"%s/base","corpus":"%s/corpus.jsonl","output_dir":"%s/tok"}\n' \
    "$TEST_TMP" "$TEST_TMP" "$TEST_TMP" >tok.json
$PY "$J/tokenize_corpus.py" --config tok.json --events tok.ev || fail "tokenize"

conf() {	# conf FILE EXTRA-MEMBERS
	printf '{"engine":"tiny","base":"%s/base","tokens":"%s/tok/tokens.npz","gradient_accumulation_steps":1,"num_train_epochs":1%s}\n' \
	    "$TEST_TMP" "$TEST_TMP" "${2:+,$2}" >"$1"
}
run() {		# run PROG NAME: rc, NAME.ev
	set +e
	PL_WORKDIR=$TEST_TMP/w-$2 $PY "$J/$1.py" --config $2.json --events $2.ev 2>$2.err
	rc=$?
	set -e
}
field() { $PY -c 'import json,sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["type"] == sys.argv[2]: print(e[sys.argv[3]])' "$@"; }

conf r4.json '"lora_r":4'
conf r64.json '"lora_r":64'
run probe r4; [ $rc -eq 0 ] || { cat r4.ev r4.err; fail "probe r4 exit $rc"; }
run probe r64; [ $rc -eq 0 ] || { cat r64.ev; fail "probe r64 exit $rc"; }
p4=$(field r4.ev memory peak_mb); p64=$(field r64.ev memory peak_mb)
s4=$(field r4.ev memory pre_step_mb)
echo "probe peak: r4 $p4 MB (pre-step $s4), r64 $p64 MB"
awk -v a="$p4" -v b="$p64" -v s="$s4" 'BEGIN { exit !(s > 0 && a > s && b > a) }' \
    || fail "peak does not grow with rank or pre-step >= peak"
[ "$(field r4.ev memory tokens)" = "$($PY -c 'import json;print(json.load(open("tok/stats.json"))["longest"]["tokens"])')" ] \
    || fail "the probe did not use the longest example"
! grep -q '"name":"loss"' r4.ev || fail "the probe ran an optimizer step"

# A card between pre-step and peak: OOM in the forward.
cap=$(awk -v a="$p4" -v s="$s4" 'BEGIN { printf "%.1f", (a + s) / 2 }')
conf fwd.json "\"lora_r\":4,\"gpu_capacity_mb\":$cap"
run probe fwd
[ $rc -eq 3 ] || { cat fwd.ev; fail "forward OOM: exit $rc, want 3"; }
[ "$(field fwd.ev oom phase)" = forward ] || { cat fwd.ev; fail "forward OOM: wrong phase"; }
[ "$(field fwd.ev oom capacity_mb)" = "$cap" ] || fail "oom capacity_mb is not the card's"
! grep -q '"type":"memory"' fwd.ev || fail "an OOM probe reported memory"

# A card smaller than the weights: OOM in load, and train reports no
# loop_started (the daemon's launch-failure case).
conf load.json '"lora_r":4,"gpu_capacity_mb":0.5'
run probe load
[ $rc -eq 3 ] && [ "$(field load.ev oom phase)" = load ] || { cat load.ev; fail "load OOM"; }
cp load.json tload.json
run train tload
[ $rc -eq 3 ] && [ "$(field tload.ev oom phase)" = load ] || { cat tload.ev; fail "train load OOM"; }
! grep -q '"loop_started"' tload.ev || fail "loop_started before a load OOM"

# Test-only injection: OOM at the third optimizer step, after loop_started.
conf step.json '"lora_r":4,"oom_at_step":3'
run train step
[ $rc -eq 3 ] || { cat step.ev; fail "step OOM: exit $rc"; }
[ "$(field step.ev oom phase)" = step ] || fail "step OOM: wrong phase"
grep -q '"loop_started"' step.ev || fail "no loop_started before a mid-run OOM"
[ "$(field step.ev progress step | tail -n 1)" = 2 ] || fail "steps after the OOM"

# A card that fits: train runs and reports its real peak.
conf fits.json "\"lora_r\":4,\"gpu_capacity_mb\":$(awk -v a="$p4" 'BEGIN { print a * 2 }')"
run train fits
[ $rc -eq 0 ] || { tail -n 3 fits.ev; fail "train on a card that fits: exit $rc"; }
real=$(field fits.ev memory peak_mb)
echo "train real peak $real MB (probe $p4 MB)"
awk -v a="$p4" -v r="$real" 'BEGIN { exit !(r > 0 && r < 2 * a) }' || fail "real peak $real"
echo "probe/job-oom: OK"
