#!/bin/bash
# bake/gate-sweep.sh: a sweep's gate on recorded bake results, as a job of
# a real daemon: candidate names three variants' bakes (results files, as
# a sweep's expansion names the variants' bake jobs) with their values in
# sweep_values. The variant that breaches a held-out guard the incumbent
# passes is vetoed though it ranks as high as the best; the other two tie
# on the fair slice and the higher overall accuracy wins; the best is then
# gated against the incumbent (promote), its McNemar p Holm-corrected for
# the three compared. One verdict is stored; pipelinectl report shows the
# leaderboard, a row a variant with why each lost, and --json holds it.
. "$(dirname "$0")/../../lib.sh"
cd "$TEST_TMP"

# mk NAME ROWS...: a results file of 3 passes; a row is ID:KIND:HELD:MASK
# (kind r|g, held 0|1, mask of the passes passed).
mk() {
	/usr/bin/python3 - "$@" <<'PY'
import json, sys
name, rows = sys.argv[1], {}
for spec in sys.argv[2:]:
    cid, kind, held, mask = spec.split(":")
    flags = (kind == "g") | int(held) << 1 | 8
    rows[cid] = [flags, 3, int(mask), 0, 1.5, "guard:x" if kind == "g" else "x"]
json.dump({"case_set": "cs1", "passes": 3, "model": "router:" + name,
    "complete": True, "speed_comparable": True, "rows": rows}, open(name + ".json", "w"))
PY
}
# rows N PASSED [TRAIN_PASSED]: 30 held-out routes of which the first
# PASSED pass, 5 train-flagged routes of which TRAIN_PASSED pass, and the
# guard g0 (passed unless GUARD=0).
rows() {
	local i out=
	for i in $(seq 0 29); do out="$out r$i:r:1:$([ $i -lt $2 ] && echo 7 || echo 0)"; done
	for i in $(seq 0 4); do out="$out t$i:r:0:$([ $i -lt ${3:-5} ] && echo 7 || echo 0)"; done
	echo "$out g0:g:1:${GUARD:-7}"
}
mk inc $(rows 30 20 5)
mk r16 $(GUARD=0 rows 30 25 5)
mk r64 $(rows 30 24 3)
mk r128 $(rows 30 24 5)

pl_conf
pl_start
cat >sw.ini <<INI
[run]
name = sw

[gate]
candidate = $TEST_TMP/r16.json $TEST_TMP/r64.json $TEST_TMP/r128.json
sweep_values = $TEST_TMP/r16.json: lora_r=16; $TEST_TMP/r64.json: lora_r=64; $TEST_TMP/r128.json: lora_r=128
incumbent = $TEST_TMP/inc.json
INI
pctl submit sw.ini >/dev/null || fail "submit"
wait_run sw succeeded 60
pctl report sw >report.txt || { cat report.txt; fail "report"; }
cat report.txt
grep -q "^verdict sw/gate: promote: best of 3 variants (McNemar p 0.125, Holm-corrected for 3: 0.375)" report.txt ||
    fail "the verdict is not the best variant's, Holm-corrected"
grep -q "^leaderboard sw/gate: 3 variants, ranked by fair-slice accuracy" report.txt || fail "no leaderboard"
row() { grep -E "^  $1 +[^ ]*/$2.json +lora_r=$3 " report.txt || fail "no leaderboard row $1 for $2"; }
row 1 r128 128 | grep -q " 80.65 *83.33 *0 *0.125 *0.375  promote:" || fail "row 1: $(row 1 r128 128)"
row 2 r64 64 | grep -q " 80.65 *77.78 *0 *0.125 *0.375  lost: ranked below .*r128.json: fair-slice tie within 0.50 pp, overall 77.78% vs 83.33%" ||
    fail "row 2: $(row 2 r64 64)"
row 3 r16 16 | grep -q " 80.65 *83.33 *1 *0.219 *0.375  lost: veto: 1 held-out guard the incumbent passes breached (g0)" ||
    fail "row 3: $(row 3 r16 16)"
# One verdict, the best's; the promoted model is r128's.
[ "$(db "SELECT count(*) FROM vals WHERE key = 'gate.verdict'")" = 1 ] || fail "not one verdict"
pctl --json report sw >report.json || fail "report --json"
/usr/bin/python3 - report.json <<'PY' || fail "report --json"
import json, sys
v = json.load(open(sys.argv[1]))["verdicts"][0]
assert v["pass"] is True and v["candidate"]["model"] == "router:r128", v
sw = v["sweep"]
assert sw["variants"] == 3 and sw["correction"] == "holm", sw
lb = sw["leaderboard"]
assert [x["values"] for x in lb] == ["lora_r=128", "lora_r=64", "lora_r=16"], lb
assert [x["verdict"] for x in lb] == ["promote", "lost", "lost"], lb
assert abs(lb[0]["p_holm"] - 0.375) < 1e-12 and abs(lb[0]["p_mcnemar"] - 0.125) < 1e-12, lb[0]
PY

# Every variant vetoed: the best-ranked's veto is the verdict, the run is
# rejected, nothing promoted.
mk r64 $(GUARD=0 rows 30 24 3)
mk r128 $(GUARD=0 rows 30 24 5)
sed 's/^name = sw$/name = sw2/' sw.ini >sw2.ini
pctl submit sw2.ini >/dev/null || fail "submit sw2"
wait_run sw2 rejected 60
pctl report sw2 >report2.txt || fail "report sw2"
grep -q "^verdict sw2/gate: veto: best of 3 variants" report2.txt || { cat report2.txt; fail "sw2: not a veto"; }
[ "$(grep -c "lost: veto" report2.txt)" = 2 ] || { cat report2.txt; fail "sw2: the others are not vetoed"; }
pl_stop
echo "bake/gate-sweep: ok"
