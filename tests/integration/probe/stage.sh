#!/bin/bash
# probe/stage.sh: the probe stage with the real jobs/probe.py (tiny engine and
# its GPU-memory stand-in):
#  1. a probe that fits stores its value, the prediction being probe x
#     (1 - 4.7%) rounded up (no calibration pairs yet);
#  2. a prediction above budget_mb - margin_mb fails before training, with
#     the numbers and the highest rank predicted to fit;
#  3. a probe that does not fit the card at all fails as out of memory;
#  4. the host-memory cap (G20): a probe over host_mem_cap is killed and
#     reported as such, or, where no cgroup can be made, the stage refuses
#     to run uncapped unless host_mem_cap = off;
#  5. train stores its real peak with the probe's figure as a calibration
#     pair.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
setup_tokens 40
common=(engine=tiny base="$BASE" tokens="$TOKENS" lora_r=8)

probe() {
	local name=$1; shift
	set +e
	"$CTL" stage probe -w "$TEST_TMP/$name" "${common[@]}" "$@" >"$TEST_TMP/$name.out" 2>&1
	rc=$?
	set -e
	cat "$TEST_TMP/$name.out"
}
value_of() { # value_of FILE KEY: the stored value's JSON text
	sed -n "s/^job.value {\"key\":\"$2\",\"value\":\"\(.*\)\"}$/\1/p" "$1" | sed 's/\\"/"/g'
}

# --- 1
probe fits budget_mb=100 margin_mb=10
[ "$rc" -eq 0 ] || die "a probe well inside its budget failed"
v=$(value_of "$TEST_TMP/fits.out" probe)
[ -n "$v" ] || die "no probe value stored"
"$PYD" - "$v" <<'EOF' || die "the stored prediction is wrong"
import json, math, sys
v = json.loads(sys.argv[1])
want = math.ceil(round(v["probe_mb"] * (1 - 0.047), 6))
assert v["over_estimate_pct"] == 4.7 and v["pairs"] == 0, v
assert v["predicted_mb"] == want, (v["predicted_mb"], want)
assert v["budget_mb"] == 100 and v["margin_mb"] == 10 and v["max_rank"] == 8, v
assert v["recipe"] == "tiny:base", v
EOF
grep -q 'info: probe: predicted peak .* fits budget_mb 100 - margin_mb 10 = 90 MB' "$TEST_TMP/fits.out" ||
    die "no log of the fit"

# --- 2: a budget just under the prediction of the probe above.
p=$("$PYD" -c 'import json,sys; print(json.loads(sys.argv[1])["probe_mb"])' "$v")
set -- $("$PYD" - "$p" <<'EOF'
import math, sys
p = float(sys.argv[1])
pred = lambda mb: math.ceil(mb * 0.953 - 1e-9)
budget = pred(p) - 1
rank = next((r for r in range(8, 0, -1) if pred(p - (8 - r) * 0.2) <= budget), 0)
print(budget, rank, pred(p))
EOF
)
budget=$1 fit=$2 pred=$3
[ "$fit" -gt 0 ] && [ "$fit" -lt 8 ] || die "test setup: expected a rank between 1 and 7 to fit, got $fit"
probe refused budget_mb="$budget" margin_mb=0 mb_per_rank=0.2
[ "$rc" -ne 0 ] || die "a probe predicted over its budget succeeded"
grep -q "stage probe: failed: probe: predicted peak $pred MB (probe $p MB x (1 - 4.7%), over_estimate: no probe/real pairs yet for unnamed-gpu, tiny:base) exceeds budget_mb $budget - margin_mb 0 = $budget MB at lora_r 8; the highest rank predicted to fit is lora_r $fit (~0.2 MB per rank, F31)" \
    "$TEST_TMP/refused.out" || die "the refusal does not give the numbers and lora_r $fit"

# --- 3
probe oom gpu_capacity_mb=3
[ "$rc" -ne 0 ] || die "a probe over the card's capacity succeeded"
grep -q 'stage probe: failed: probe: out of GPU memory in [a-z]*: [0-9.]* MB needed of 3.00 MB at lora_r 8; the probe alone needs at least that' "$TEST_TMP/oom.out" ||
    die "the out-of-memory is not reported with its numbers"

# --- 4
probe capped budget_mb=100 margin_mb=10 host_mem_cap=60M
if grep -q "cannot cap the probe's host memory" "$TEST_TMP/capped.out"; then
	[ "$rc" -ne 0 ] || die "refused but succeeded"
	grep -q 'set host_mem_cap = off to run it without a cap' "$TEST_TMP/capped.out" ||
	    die "the refusal does not say how to override it"
	probe uncapped budget_mb=100 margin_mb=10 host_mem_cap=off
	[ "$rc" -eq 0 ] || die "host_mem_cap = off did not run the probe"
	grep -q 'warning: probe: host_mem_cap = off' "$TEST_TMP/uncapped.out" || die "no warning when uncapped"
else
	[ "$rc" -ne 0 ] || die "a probe over its 60M host-memory cap succeeded"
	grep -q 'info: probe: host memory capped at 60M (\(cgroup v1\|cgroup v2\|systemd scope\)' "$TEST_TMP/capped.out" ||
	    die "no log of the cap"
	grep -q 'stage probe: failed: probe: killed by the host-memory cap of 60M .*(G20)' "$TEST_TMP/capped.out" ||
	    die "the kill by the cap is not reported as such"
	cg=$(sed -n 's/^info: probe: host memory capped at 60M (cgroup v[12] \(.*\))$/\1/p' "$TEST_TMP/capped.out")
	if [ -n "$cg" ]; then
		[ -e "$cg" ] && die "the probe's cgroup $cg was left behind"
		case "$cg" in */pipelined-probe-*) ;; *) die "odd cgroup name $cg";; esac
	fi
fi

# --- 5
"$CTL" stage train -w "$TEST_TMP/train" "${common[@]}" max_steps=3 gradient_accumulation_steps=1 \
    probe_mb=20 gpu=test-gpu >"$TEST_TMP/train.out" 2>&1 || { cat "$TEST_TMP/train.out"; die "train failed"; }
pair=$(value_of "$TEST_TMP/train.out" probe_pair)
"$PYD" - "$pair" <<'EOF' || die "bad calibration pair: $pair"
import json, sys
v = json.loads(sys.argv[1])
assert v["gpu"] == "test-gpu" and v["recipe"] == "tiny:base", v
assert v["probe_mb"] == 20 and 0 < v["real_mb"] < 20 and v["lora_r"] == 8, v
EOF
echo "ok"
