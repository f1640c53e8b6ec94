#!/bin/bash
# probe/sweep-prune.sh: a sweep over lora_r and lora_alpha after a probe,
# on a real daemon with the real jobs/probe.py and train (tiny engine):
# the probe runs once per lora_r (the memory-relevant key), not once per
# variant; the rank its probe predicts over budget_mb - margin_mb (512:
# about 50 MB against 30; 8: about 15) is pruned: its probe is rejected
# with the figures, its variants' trainings are skipped, not failed, and
# the run succeeds with the variants that fit trained once each.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
trap reap EXIT
cd "$TEST_TMP"
setup_tokens 40
pl_conf
pl_start
cat >"$TEST_TMP/prune.ini" <<INI
[run]
name = prune

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
sweep = lora_r: 8 512; lora_alpha: 16 32
INI
pctl check "$TEST_TMP/prune.ini" >check.txt || { cat check.txt; fail "check"; }
grep -qF "OK (run prune, 6 jobs)" check.txt || { cat check.txt; fail "not 2 probes and 4 trainings"; }
pctl submit "$TEST_TMP/prune.ini" >/dev/null || fail "submit"
wait_run prune succeeded 300
pctl status prune | tee status.txt
[ "$(db "SELECT count(*) FROM jobs WHERE stage = 'probe'")" = 2 ] || fail "not one probe per rank"
grep -qE "^probe-r8 +probe \(lora_r=8\) +succeeded" status.txt || fail "probe-r8 did not succeed"
grep -qE "^probe-r512 +probe \(lora_r=512\) +rejected .*probe: predicted peak [0-9]+ MB \(probe [0-9.]+ MB .* exceeds budget_mb 40 - margin_mb 10 = 30 MB at lora_r 512" status.txt ||
    fail "probe-r512 was not rejected with its figures"
for a in 16 32; do
	grep -qE "^train-r8-alpha$a +train \(lora_r=8 lora_alpha=$a\) +succeeded" status.txt || fail "train-r8-alpha$a"
	grep -qE "^train-r512-alpha$a +train \(lora_r=512 lora_alpha=$a\) +skipped .*pruned: probe-r512 predicts it will not fit" status.txt ||
	    fail "train-r512-alpha$a was not pruned"
	[ "$(db "SELECT attempts FROM jobs WHERE name = 'train-r8-alpha$a'")" = 1 ] || fail "train-r8-alpha$a ran more than once"
done
pl_stop
echo "probe/sweep-prune: ok"
