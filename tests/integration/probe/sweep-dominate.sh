#!/bin/bash
# probe/sweep-dominate.sh: a sweep's probes measure from the largest set
# down, and a set that a larger one fits is not measured: memory only
# grows with lora_r. A sweep of lora_r 8 16 512 after a probe, on a real
# daemon with the real jobs/probe.py and train (tiny engine), budget_mb
# 40 - margin_mb 10: probe-r512 runs first and is rejected (about 50 MB),
# so probe-r16, which comes after it, is measured and fits; probe-r8,
# after both, fits by probe-r16's figure without a measure (its value
# says by which, with no probe_mb, so train-r8 stores no calibration
# pair). The r16 and r8 variants train once each, r512's are pruned.
# Resubmitted with lora_r 4 too, only r4's probe and training run.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
trap reap EXIT
cd "$TEST_TMP"
setup_tokens 40
pl_conf
pl_start
cat >"$TEST_TMP/dom.ini" <<INI
[run]
name = dom

[probe]
engine = tiny
base = $BASE
tokens = $TOKENS
lora_r = 8
budget_mb = 40
margin_mb = 10
host_mem_cap = off

[train]
after = probe
engine = tiny
base = $BASE
tokens = $TOKENS
max_steps = 2
gpu_capacity_mb = 64
sweep = lora_r: 8 16 512
INI
pctl check "$TEST_TMP/dom.ini" >check.txt || { cat check.txt; fail "check"; }
grep -qF "OK (run dom, 6 jobs)" check.txt || { cat check.txt; fail "not 3 probes and 3 trainings"; }
pctl submit "$TEST_TMP/dom.ini" >/dev/null || fail "submit"
wait_run dom succeeded 300
pctl status dom | tee status.txt
grep -qE "^probe-r512 +probe \(lora_r=512\) +rejected .*exceeds budget_mb 40 - margin_mb 10" status.txt ||
	fail "probe-r512 was not rejected with its figures"
grep -qE "^train-r512 +train \(lora_r=512\) +skipped .*pruned: probe-r512" status.txt ||
	fail "train-r512 was not pruned"
for r in 8 16; do
	grep -qE "^probe-r$r +probe \(lora_r=$r\) +succeeded" status.txt || fail "probe-r$r did not succeed"
	grep -qE "^train-r$r +train \(lora_r=$r\) +succeeded" status.txt || fail "train-r$r did not succeed"
done
# The order: r512 measured first, then r16, then r8.
[ "$(db "SELECT group_concat(name, ' ') FROM (SELECT j.name FROM jobs j JOIN attempts a
    ON a.job_id = j.id WHERE j.stage = 'probe' ORDER BY a.started, a.id)")" = "probe-r512 probe-r16 probe-r8" ] ||
	fail "the probes did not run from the largest set down: $(db "SELECT j.name, a.started FROM jobs j JOIN attempts a ON a.job_id = j.id WHERE j.stage = 'probe'")"
pctl --json values dom probe-r16 >v16.json || fail "values probe-r16"
pctl --json values dom probe-r8 >v8.json || fail "values probe-r8"
/usr/bin/python3 - v16.json v8.json <<'PY' || fail "probe-r16 measured and probe-r8 fits by it: $(cat v16.json v8.json)"
import json, sys
def probe(f):
    for v in json.load(open(f))["values"]:
        if v["key"] == "probe":
            return json.loads(v["value"])
    raise SystemExit("%s: no probe value" % f)
p16, p8 = probe(sys.argv[1]), probe(sys.argv[2])
assert p16.get("probe_mb", 0) > 0 and p16["lora_r"] == 16 and "fits_by" not in p16, p16
assert p8["fits_by"] == "probe-r16" and "probe_mb" not in p8 and p8["lora_r"] == 8, p8
assert p8["fits_by_predicted_mb"] == p16["predicted_mb"], (p8, p16)
PY
pctl logs dom probe-r8 | grep -qF "fits without a measure: probe-r16" || fail "probe-r8's log does not say so"
pctl logs dom train-r8 | grep -qF "no probe figure" || fail "train-r8 stored a calibration pair from another set's probe"
pctl logs dom train-r16 | grep -qF "calibration pair for" || fail "train-r16 stored no calibration pair"
# One more rank, below the others: only its variant trains (the
# trainings whose keys did not change are reused; the probes run again,
# cheaply, since train-r16 added a calibration pair that their keys
# count), and its probe fits by a measured one's figure.
sed -i 's/^sweep = lora_r: 8 16 512$/sweep = lora_r: 8 16 512 4/' "$TEST_TMP/dom.ini"
rev=$(pctl submit "$TEST_TMP/dom.ini") || fail "resubmit"
[ "$rev" = dom@2 ] || fail "the resubmit made $rev"
wait_run dom@2 succeeded 300
pctl status dom@2 | tee status2.txt
for j in train-r8 train-r16; do
	[ "$(job_state dom@2 $j)" = reused ] || fail "dom@2: $j was not reused"
done
[ "$(job_state dom@2 train-r4)" = succeeded ] || fail "dom@2: train-r4 did not run"
pctl logs dom@2 probe-r4 | grep -qF "fits without a measure: probe-r16" ||
	fail "dom@2: probe-r4 did not fit by probe-r16: $(pctl logs dom@2 probe-r4 | tail -5)"
pl_stop
echo "probe/sweep-dominate: ok"
