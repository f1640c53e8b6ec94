#!/bin/bash
# 61-gate-recorded.sh: the gate stage on recorded bake results (results
# files as the bake writes them): a guard veto, a held-out win, a held-out
# tie broken by overall accuracy (both ways), a held-out loss, a case-set
# mismatch refused, an incomplete bake refused; the verdict and its numbers
# are stored.
set -eu
: "${TOP:?}" "${TEST_TMP:?}"
. "$TOP/tests/integration/data/bake/lib.sh"
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

# 2. A held-out win: the same, with the incumbent breaching that guard too.
mk inc2 S 1 $base r9:r:0:7 g1:g:1:3 r0:r:1:0
gate win cand1 inc2
expect win 0 promote "held-out +"

# 3. A tie within 0.5 pp broken by overall. 200 held-out cases: the
# candidate loses one case-pass there (-0.17 pp) but wins three on a
# train-flagged case.
rows_c="" rows_i=""
for i in $(seq 0 199); do rows_c="$rows_c h$i:r:1:7"; rows_i="$rows_i h$i:r:1:7"; done
mk cand3 S 1 ${rows_c/h0:r:1:7/h0:r:1:3} t1:r:0:7
mk inc3 S 1 $rows_i t1:r:0:0
gate tie cand3 inc3
expect tie 0 promote "held-out tie"
# ... and the same tie with overall not higher: no release.
mk inc3b S 1 $rows_i t1:r:0:7
gate tie2 cand3 inc3b
expect tie2 1 "tie, overall not higher" "is not higher"
# ... and with tie_pp 0 the same numbers are a held-out loss.
gate strict cand3 inc3 tie_pp=0
expect strict 1 "held-out lower"

# 4. A held-out loss beyond the tie.
mk cand4 S 1 $base r9:r:0:7 g1:g:1:7 r1:r:1:0 r2:r:1:0
mk inc4 S 1 $base r9:r:0:0 g1:g:1:7
gate loss cand4 inc4
expect loss 1 "held-out lower" "held-out -"

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
/usr/bin/python3 - win.out <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("job.value "):
        v = json.loads(line[len("job.value "):])
        if v["key"] == "gate.verdict":
            d = json.loads(v["value"])
for k in ("candidate", "incumbent", "d_held_out_pp", "d_overall_pp", "fair_slice", "tie_pp", "case_set"):
    assert k in d, k
assert d["candidate"]["guard_breaches"] == 1 and d["incumbent"]["guard_breaches"] == 1, d
assert d["fair_slice"]["cases"] == 10, d["fair_slice"]
assert abs(d["d_held_out_pp"] - (29/30 - 26/30) * 100) < 1e-9, d["d_held_out_pp"]
PY
echo "61-gate-recorded: ok"
