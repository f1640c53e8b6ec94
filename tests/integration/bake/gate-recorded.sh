#!/bin/bash
# bake/gate-recorded.sh: the gate stage on recorded bake results (results
# files as the bake writes them), by hand (`pipelinectl stage gate`, no
# server): a guard veto, a fair-slice win, a fair-slice tie broken by
# overall accuracy (both ways), a fair-slice loss, two bakes whose held-out
# sets differ where held-out and fair slice disagree (the fair slice
# decides), a fair slice below min_fair_cases refused with its numbers, a
# case-set mismatch refused, an incomplete bake refused; the verdict and
# its numbers (the paired comparison too) are stored.
set -eu
: "${TOP:?}" "${TEST_TMP:?}"
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/bake.sh"
cd "$TEST_TMP"

# mk NAME CASESET COMPLETE ROWS...: a results file. A row is
# ID:KIND:HELD:MASK (kind r|g, held 0|1, mask of 3 passes).
mk() {
	/usr/bin/python3 - "$@" <<'PY'
import json, sys
name, case_set, complete = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
rows = {}
for spec in sys.argv[4:]:
    cid, kind, held, mask = spec.split(":")
    flags = (kind == "g") | int(held) << 1 | 8
    rows[cid] = [flags, 3, int(mask), 0 if complete else 1, 1.5, "guard:x" if kind == "g" else "x"]
json.dump({"case_set": case_set, "passes": 3, "model": "router:" + name,
    "complete": complete, "speed_comparable": True, "rows": rows}, open(name + ".json", "w"))
PY
}

# gate NAME CAND INC [key=value...]: run the gate by hand; exit status and output kept.
gate() {
	local out=$1 c=$2 i=$3
	shift 3
	set +e
	stage gate "candidate=$TEST_TMP/$c.json" "incumbent=$TEST_TMP/$i.json" "$@" >"$out.out" 2>&1
	echo $? >"$out.rc"
	set -e
}
verdict() {
	/usr/bin/python3 - "$1.out" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("job.value "):
        v = json.loads(line[len("job.value "):])
        if v["key"] == "gate.verdict":
            print(json.loads(v["value"])["verdict"])
PY
}
expect() {	# expect NAME RC VERDICT [grep pattern]
	local rc
	rc=$(cat "$1.rc")
	[ "$rc" = "$2" ] || { cat "$1.out"; fail "$1: exit $rc, wanted $2"; }
	[ "$(verdict "$1")" = "$3" ] || { cat "$1.out"; fail "$1: verdict '$(verdict "$1")', wanted '$3'"; }
	[ -z "${4:-}" ] || grep -q -- "$4" "$1.out" || { cat "$1.out"; fail "$1: no '$4'"; }
}

# Ten held-out routes and a held-out guard; r9 is train-flagged.
base="r0:r:1:7 r1:r:1:7 r2:r:1:7 r3:r:1:7 r4:r:1:7 r5:r:1:7 r6:r:1:7 r7:r:1:7 r8:r:1:7"

# 1. The veto (F17): better on held-out routes, but breaches in one pass of
# three a held-out guard the incumbent passes every time (F15).
mk inc1 S 1 $base r9:r:0:7 g1:g:1:7 r0:r:1:0
mk cand1 S 1 $base r9:r:0:7 g1:g:1:6
gate veto cand1 inc1
expect veto 1 veto "breached (g1)"

# 2. A fair-slice win: the same, with the incumbent breaching that guard
# too. Both held out the same ten cases, so the fair slice is that set;
# ten is below the default min_fair_cases (20), so the gate refuses ...
mk inc2 S 1 $base r9:r:0:7 g1:g:1:3 r0:r:1:0
gate small cand1 inc2
expect small 1 "fair slice too small" "fair slice of 10 cases is below min_fair_cases 20"
grep -q "fair slice 96.67% vs 86.67%" small.out || { cat small.out; fail "small: no numbers"; }
# ... and with min_fair_cases = 10 the candidate wins on it.
gate win cand1 inc2 min_fair_cases=10
expect win 0 promote "fair slice +"

# 3. A tie within 0.5 pp broken by overall. 200 held-out cases: the
# candidate loses one case-pass there (-0.17 pp) but wins three on a
# train-flagged case.
rows_c="" rows_i=""
for i in $(seq 0 199); do rows_c="$rows_c h$i:r:1:7"; rows_i="$rows_i h$i:r:1:7"; done
mk cand3 S 1 ${rows_c/h0:r:1:7/h0:r:1:3} t1:r:0:7
mk inc3 S 1 $rows_i t1:r:0:0
gate tie cand3 inc3
expect tie 0 promote "fair-slice tie"
# ... and the same tie with overall not higher: no release.
mk inc3b S 1 $rows_i t1:r:0:7
gate tie2 cand3 inc3b
expect tie2 1 "tie, overall not higher" "is not higher"
# ... and with tie_pp 0 the same numbers are a fair-slice loss.
gate strict cand3 inc3 tie_pp=0
expect strict 1 "fair slice lower"

# 4. A held-out loss beyond the tie.
mk cand4 S 1 $base r9:r:0:7 g1:g:1:7 r1:r:1:0 r2:r:1:0
mk inc4 S 1 $base r9:r:0:0 g1:g:1:7
gate loss cand4 inc4 min_fair_cases=10
expect loss 1 "fair slice lower" "fair slice -"

# 4b. Held-out sets that differ (each model's is what its own corpus
# lacks): 25 cases neither trained on, where the candidate passes 24 and
# the incumbent 22, and 10 the incumbent trained on (held out for the
# candidate alone), which the candidate fails. Held-out says -19.43 pp
# (24/35 against 22/25); the fair slice says +8 pp, and decides.
rows_c="" rows_i=""
for i in $(seq 0 24); do rows_c="$rows_c f$i:r:1:7"; rows_i="$rows_i f$i:r:1:7"; done
rows_c=${rows_c/f0:r:1:7/f0:r:1:0}
for i in 1 2 3; do rows_i=${rows_i/f$i:r:1:7/f$i:r:1:0}; done
for i in $(seq 0 9); do rows_c="$rows_c t$i:r:1:0"; rows_i="$rows_i t$i:r:0:7"; done
mk cand5 S 1 $rows_c
mk inc5 S 1 $rows_i
gate differ cand5 inc5
expect differ 0 promote "fair slice +8.00 pp"
grep -q "held-out 68.57% of 35 vs 88.00% of 25" differ.out || { cat differ.out; fail "differ: held-out figures not logged"; }
grep -q "candidate alone 3, incumbent alone 1, McNemar p 0.625" differ.out ||
    { cat differ.out; fail "differ: no paired comparison"; }

# 5. Different case sets are never compared.
mk other T 1 $base r9:r:0:7 g1:g:1:7
gate mismatch cand1 other
[ "$(cat mismatch.rc)" = 1 ] || fail "case-set mismatch accepted"
grep -q "case sets differ" mismatch.out || { cat mismatch.out; fail "mismatch not explained"; }
grep -q "gate.verdict" mismatch.out && fail "a verdict was stored across case sets"

# 6. An incomplete bake (bake errors) is refused.
mk broken S 0 $base r9:r:0:7 g1:g:1:7
gate incomplete broken inc1
[ "$(cat incomplete.rc)" = 1 ] && grep -q "incomplete" incomplete.out || { cat incomplete.out; fail "incomplete bake accepted"; }

# 7. The verdict carries every number behind it.
/usr/bin/python3 - win.out differ.out <<'PY'
import json, sys
def verdict(path):
    for line in open(path):
        if line.startswith("job.value "):
            v = json.loads(line[len("job.value "):])
            if v["key"] == "gate.verdict":
                return json.loads(v["value"])
d = verdict(sys.argv[1])
for k in ("candidate", "incumbent", "d_fair_pp", "d_held_out_pp", "d_overall_pp",
          "fair_slice", "min_fair_cases", "tie_pp", "case_set"):
    assert k in d, k
assert d["candidate"]["guard_breaches"] == 1 and d["incumbent"]["guard_breaches"] == 1, d
assert d["fair_slice"]["cases"] == 10 and d["min_fair_cases"] == 10, d["fair_slice"]
assert abs(d["d_fair_pp"] - (29/30 - 26/30) * 100) < 1e-9, d["d_fair_pp"]
d = verdict(sys.argv[2])
f = d["fair_slice"]
assert f["cases"] == 25 and f["candidate_only"] == 3 and f["incumbent_only"] == 1, f
assert f["both"] == 21 and f["neither"] == 0 and abs(f["mcnemar_p"] - 0.625) < 1e-12, f
assert abs(f["candidate"]["acc"] - 24/25) < 1e-12 and abs(f["incumbent"]["acc"] - 22/25) < 1e-12, f
assert d["candidate"]["held_out_cases"] == 35 and d["incumbent"]["held_out_cases"] == 25, d
assert abs(d["d_held_out_pp"] - (24/35 - 22/25) * 100) < 1e-9, d["d_held_out_pp"]
assert abs(d["d_fair_pp"] - 8) < 1e-9 and d["pass"] is True, d
PY
echo "bake/gate-recorded: ok"
