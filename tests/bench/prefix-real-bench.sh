#!/bin/bash
# tests/bench/prefix-real-bench.sh: shared-prefix training against the plain
# loop on the real Gemma 3 270M (tests/tools/realbase.sh), through a
# private daemon and the REAL Ollama (tests/lib/e2e.sh: router_prepare),
# the whole way to the served answers (where the real base is
# available): two runs of etc/examples/router/v1.ini, the same
# tokens and settings (corpus-check.jsonl, float32, AdamW, LoRA r16 on the
# seven projections), STEPS optimizer steps of ACCUM examples each, one
# with shared_prefix = no and one with shared_prefix = yes; each merged,
# converted, quantized to Q8_0, registered and baked (one pass, the 69
# router cases, greedy) as the demo does.  Compared:
#   - the per-step training losses (train's loss metric) of the two runs:
#     the largest relative difference, asserted under LOSS_TOL;
#   - the two adapters, tensor by tensor, against the size of the run's
#     updates (tests/helpers/prefix_adapters.py: the largest
#     |shared - plain| over the tensor's median update under ADAPTER_BOUND,
#     the median element's under 1e-4); the bound is the fixtures' of
#     train/hf-shared-prefix (1e-2) and the reason the same: float32 sums
#     in another order differ at 1e-7 of a value, and Adam's normalized
#     update turns a gradient near its float noise into at most one step's
#     learning rate, about a hundredth of the median update over 20 steps;
#   - the bakes: every case's answer text and outcome, asserted equal.
# Also printed: each run's train wall time per step (the store's job
# times; the CPU ratio itself is tests/bench/prefix-bench.sh's figure).
#
#   tests/bench/prefix-real-bench.sh
#
# Environment: STEPS (default 20), ACCUM (default 4), LOSS_TOL (default
# 1e-4), ADAPTER_BOUND (default 1e-2).  Exit status 1 when a comparison
# fails.
#
# Measured (2026-12-04, 2 cores, nothing else running; STEPS 20, ACCUM 4):
# the 20 steps' losses equal to 2.3e-6 relative (5.0335 ... 0.5371 both
# ways); the adapters within 6.2e-4 of the median update at the largest
# element and 8.2e-6 at the median (bound 1e-2 and 1e-4); train 588 s
# plain against 215 s shared (0.365x wall, loading included).  The bakes
# did NOT agree: 57 of 69 answers the same, 12 different (plain passed 15,
# shared 16): after 20 steps of 4 examples the model is still near ties
# between tokens, and float-level differences in the merged weights cross
# Q8_0's rounding and flip greedy choices.  So the script exits 1: the
# target of the same answers does not hold on the real base at this
# training length, and the assertion stays as the target states it.
# At the demo's own length (STEPS=30 ACCUM=8, suffix_batch 8 as v1.ini
# sets it; 2026-12-04, a 2-core machine 3-4x faster at training, nothing
# else running): the 30 losses equal to 1.1e-5 relative (4.8611 ...
# 0.3134 both ways); the adapters within 2.0e-3 of the median update at
# the largest element and 1.6e-5 at the median; train 379.9 s plain
# against 155.3 s shared (0.409x wall, loading included).  The bakes
# again 57 of 69 the same, 12 different (plain passed 22, shared 23): in
# 11 of the 12 the outcome was the same (8 misses both ways with other
# wrong answers, 2 passes with other words, 1 forbidden call with another
# path) and the texts part where the model is unsure; one case passed
# only with the shared adapter (f-para-06).  Longer training did not
# make the answers equal: float-order differences in training flip greedy
# choices wherever the model is near a tie, as two plain runs with
# different (equally valid) summation orders would.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
export TOP
TEST_TMP=$(mktemp -d /tmp/prefix-real-bench.XXXXXX)
export TEST_TMP
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/e2e.sh"
trap 'e2e_stop; pl_kill9 2>/dev/null' EXIT
cd "$TEST_TMP"
STEPS=${STEPS:-20}
ACCUM=${ACCUM:-4}
LOSS_TOL=${LOSS_TOL:-1e-4}
ADAPTER_BOUND=${ADAPTER_BOUND:-1e-2}
router_daemon "$TEST_TMP/e2e"
R=$ROUTER_DIR

# mkspec MODE SHARED: v1.ini as run router-MODE, tag router:MODE, with no
# incumbent (no previous run or tag, no gate), STEPS steps of ACCUM.
mkspec() {
	/usr/bin/python3 - "$R/v1.ini" "$1" "$2" "$STEPS" "$ACCUM" >"$R/$1.ini" <<'PY'
import sys
src, mode, shared, steps, accum = sys.argv[1:]
sec, out, seen = None, [], set()
for line in open(src):
    s = line.strip()
    if s.startswith("["):
        sec = s.strip("[]")
    if sec == "gate":
        continue
    key = s.split("=", 1)[0].strip() if "=" in s and not s.startswith("#") else None
    if key in ("previous", "previous_tag", "max_steps", "shared_prefix"):
        continue
    if sec == "run" and key == "name":
        line = "name = router-%s\n" % mode
    elif sec == "run" and key == "description":
        line = "description = router v1, shared_prefix = %s (tests/bench/prefix-real-bench.sh)\n" % shared
    elif sec == "corpus_check" and key == "corpus":
        line = "corpus = corpus-check.jsonl\n"
    elif sec == "register" and key == "tag":
        line = "tag = router:%s\n" % mode
    elif sec == "bake" and key == "passes":
        line = "passes = 1\n"
    elif sec in ("probe", "train") and key == "gradient_accumulation_steps":
        line = "gradient_accumulation_steps = %s\nmax_steps = %s\nshared_prefix = %s\n" % (accum, steps, shared)
        seen.add(sec)
    elif key is not None:
        seen.add((sec, key))
    out.append(line)
assert seen >= {"probe", "train", ("bake", "model")}, seen
print("".join(out).replace("model = router:v1", "model = router:%s" % mode), end="")
PY
	[ -s "$R/$1.ini" ] || fail "mkspec $1"
	pctl check "$R/$1.ini" >/dev/null || fail "pipelinectl check $1.ini"
}
mkspec plain no
mkspec shared yes
for mode in plain shared; do
	t=$(date +%s)
	pctl submit "$R/$mode.ini" >/dev/null || fail "submit router-$mode"
	wait_run "router-$mode" succeeded 7200
	note "router-$mode succeeded in $(( $(date +%s) - t )) s"
	pctl --json status "router-$mode" >"$mode.status.json"
	pctl --json metrics "router-$mode" train loss >"$mode.loss.json" || fail "metrics router-$mode"
	pctl --json values "router-$mode" bake >"$mode.bake.json" || fail "values router-$mode bake"
done

# Every comparison runs and prints its figures; the first that failed is
# reported at the end.
failed=""
/usr/bin/python3 - "$STEPS" "$LOSS_TOL" <<'PY' || failed="the losses or the bakes differ"
import json, sys
steps, tol = int(sys.argv[1]), float(sys.argv[2])
def train_s(mode):
    for j in json.load(open(mode + ".status.json"))["jobs"]:
        if j["name"] == "train":
            return j["finished"] - j["started"]
def losses(mode):
    return {int(m["step"]): m["value"] for m in json.load(open(mode + ".loss.json"))["metrics"]}
def cases(mode):
    return {v["key"][5:]: json.loads(v["value"]) for v in json.load(open(mode + ".bake.json"))["values"]
            if v["key"].startswith("case/")}
tp, ts = train_s("plain"), train_s("shared")
print("# train: plain %.1f s, shared %.1f s for %d steps (%.1f and %.1f s a step, wall, with loading): %.3fx"
      % (tp, ts, steps, tp / steps, ts / steps, ts / tp))
lp, ls = losses("plain"), losses("shared")
assert sorted(lp) == sorted(ls) == list(range(1, steps + 1)), (sorted(lp), sorted(ls))
worst = max(abs(ls[s] - lp[s]) / abs(lp[s]) for s in lp)
print("# losses, %d steps: plain %s; shared %s; largest relative difference %.3g (bound %g)"
      % (steps, " ".join("%.4f" % lp[s] for s in sorted(lp)), " ".join("%.4f" % ls[s] for s in sorted(ls)), worst, tol))
cp, cs = cases("plain"), cases("shared")
assert sorted(cp) == sorted(cs) and len(cp) >= 40, (len(cp), len(cs))
same = diff = 0
for k in sorted(cp):
    a = [(p["outcome"], p["output"]) for p in cp[k]["passes"]]
    b = [(p["outcome"], p["output"]) for p in cs[k]["passes"]]
    if a == b:
        same += 1
    else:
        diff += 1
        print("# case %s: plain %r, shared %r" % (k, a, b))
npass = lambda c: sum(1 for x in c.values() if x["passed"])
print("# bakes: %d of %d cases answered the same (plain passed %d, shared %d)" % (same, len(cp), npass(cp), npass(cs)))
sys.exit(0 if worst <= tol and diff == 0 else 1)
PY

ap=$(artifact_path router-plain train adapter)
as=$(artifact_path router-shared train adapter)
cfg=$(dirname "$ap")/train.config.json
[ -d "$ap" ] && [ -d "$as" ] && [ -f "$cfg" ] || fail "adapters or config: $ap $as $cfg"
"$ROUTER_PY" "$TOP/tests/helpers/prefix_adapters.py" "$cfg" "$ap" "$as" --bound "$ADAPTER_BOUND" \
    >adapters.out 2>&1 || failed=${failed:-"the adapters differ beyond the bound"}
sed 's/^/# /' adapters.out
[ -z "$failed" ] || fail "$failed"
echo "PASS: shared_prefix = yes trained the plain loop's adapter on the real Gemma 3 270M ($STEPS steps of $ACCUM), and both served the same answers"
