#!/bin/bash
# e2e/lifecycle.sh: the whole release lifecycle on a real daemon, twice, back to
# back: etc/examples/tiny/v1.ini (tiny-v1, no previous version)
# then etc/examples/tiny.ini (tiny-v2, previous = tiny-v1, 36 training
# examples instead of 24), each
#   corpus_check -> tokenize -> probe -> train (tiny engine) -> merge -> tensor_fix
#   -> convert -> quantize -> verify -> register -> bake [-> bake-incumbent]
#   -> gate
# against the Gemma3ForConditionalGeneration fixture base; register, bake
# and gate run against the REAL Ollama (tests/lib/e2e.sh: ollama_start),
# which serves each tag through etc/Modelfile.tmpl's TEMPLATE, and register
# checks that template against tokenize's prompt tokens.
# Checks: every job up to the gate succeeds in both runs; verify passes
# both (v2's digests differ from v1's); v2's gate compared v2 with v1 on
# one case set and stored a verdict, and the run's outcome is that verdict
# (promote: succeeded and router:latest is v2's manifest; otherwise rejected
# at the gate only); the export is numerically right
# (tests/helpers/check_export.py): the Q8_0 GGUF served by
# llama.cpp gives the trained response on >= 90% of train-flagged cases
# and agrees with the PyTorch model (tiny engine, merged weights) on the
# top-1 token at >= 99% of the positions of every training example (each
# distinct prefix once), for v1 and v2.
# run.sh: alone (the whole lifecycle, twice).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/e2e.sh"
trap 'e2e_stop; pl_kill9 2>/dev/null' EXIT
cd "$TEST_TMP"
# The committed data is what its generator writes.
/usr/bin/python3 "$TOP/tests/helpers/gen_tiny_data.py" gen || fail "gen_tiny_data.py"
for f in gen/*; do
	cmp -s "$f" "$TOP/etc/examples/tiny/${f#gen/}" || fail "etc/examples/tiny/${f#gen/} is not what tests/helpers/gen_tiny_data.py writes"
done
e2e_prepare "$TEST_TMP/e2e"
pl_conf "python = /usr/bin/python3" "max_jobs = 2"
pl_start

t0=$(date +%s)
pctl submit "$E2E_V1" >/dev/null || fail "submit tiny-v1"
wait_run tiny-v1 succeeded 900
t1=$(date +%s)
note "tiny-v1 succeeded in $((t1 - t0)) s"
pctl submit "$E2E_V2" >/dev/null || fail "submit tiny-v2"
st=
for _ in $(seq 1 9000); do
	st=$(pctl --json status tiny-v2 | sed -n 's/.*"run":{[^}]*"state":"\([a-z]*\)".*/\1/p')
	case "$st" in succeeded|failed|cancelled|rejected) break;; esac
	sleep 0.1
done
t2=$(date +%s)
note "tiny-v2 ended $st in $((t2 - t1)) s"
pctl status tiny-v2
for j in corpus_check tokenize probe train merge tensor_fix convert quantize verify register bake bake-incumbent; do
	[ "$(job_state tiny-v2 $j)" = succeeded ] || { pctl logs tiny-v2 $j | tail -20; fail "tiny-v2 job $j did not succeed"; }
done

# corpus_check compared tiny-v2's corpus with tiny-v1's: 12 examples added.
pctl values tiny-v2 corpus_check | grep -q '"examples":{"added":12,"removed":0,"changed":0,"unchanged":24}' ||
    { pctl values tiny-v2 corpus_check; fail "tiny-v2: corpus_check's changes since tiny-v1"; }

# Verify passed on both, and v2's digests are compared with v1's.
pctl values tiny-v1 verify >v1.verify || fail "values tiny-v1 verify"
pctl values tiny-v2 verify >v2.verify || fail "values tiny-v2 verify"
/usr/bin/python3 - v1.verify v2.verify <<'PY' || fail "verify values"
import json, sys
def val(p):
    for line in open(p):
        if "{" in line and line.split()[1:2] == ["verify"]:
            return json.loads(line[line.index("{"):])
    raise SystemExit("%s: no verify value: %s" % (p, open(p).read()))
v1, v2 = val(sys.argv[1]), val(sys.argv[2])
assert v1["ok"] is True and v1["reasons"] == [], v1
assert v2["ok"] is True and v2["reasons"] == [], v2
# v2 was compared with v1: the GGUF, the adapter and the merged weights
for what in ("gguf", "adapter", "merged"):
    assert any(c.startswith(what + " sha256") and "differs from the previous version's" in c
               for c in v2["checked"]), (what, v2["checked"])
    assert v2[what]["sha256"] != v1[what]["sha256"], what
print("verify: both pass; v2's gguf, adapter and merged digests differ from v1's")
PY

# The gate: both bakes on one case set, a verdict with its numbers.
pctl report tiny-v2 >report.txt || { cat report.txt; fail "report tiny-v2"; }
cat report.txt
grep -q "tiny-v2/bake-incumbent" report.txt || fail "the report lacks the incumbent's bake"
grep -q "^verdict tiny-v2/gate: " report.txt || fail "no verdict for tiny-v2"
pctl --json report tiny-v2 >report.json || fail "report --json"
verdict=$(/usr/bin/python3 - report.json "$st" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["same_case_set"] is True, "the two bakes are on different case sets"
v = r["verdicts"][0]
b = {x["bake"]: x for x in r["bakes"]}
assert set(b) == {"tiny-v2/bake", "tiny-v2/bake-incumbent"}, b.keys()
assert b["tiny-v2/bake"]["model"] == "router:tiny-v2", b["tiny-v2/bake"]
assert b["tiny-v2/bake-incumbent"]["model"] == "router:tiny-v1", b["tiny-v2/bake-incumbent"]
# the run's outcome is the verdict's
want = "succeeded" if v["pass"] else "rejected"
assert sys.argv[2] == want, "run ended %s with verdict %s" % (sys.argv[2], v)
print(v["verdict"])
PY
) || fail "the report does not hold up"
note "tiny-v2 verdict: $verdict"
tags=$(curl -s "$OURL/api/tags")
alias_d=$(echo "$tags" | /usr/bin/python3 -c 'import json,sys; print([m["digest"] for m in json.load(sys.stdin)["models"] if m["name"]=="router:latest"][0])')
v1_d=$(echo "$tags" | /usr/bin/python3 -c 'import json,sys; print([m["digest"] for m in json.load(sys.stdin)["models"] if m["name"]=="router:tiny-v1"][0])')
v2_d=$(echo "$tags" | /usr/bin/python3 -c 'import json,sys; print([m["digest"] for m in json.load(sys.stdin)["models"] if m["name"]=="router:tiny-v2"][0])')
if [ "$st" = succeeded ]; then
	[ "$alias_d" = "$v2_d" ] || fail "promoted, but router:latest is not tiny-v2"
else
	[ "$(job_state tiny-v2 gate)" = rejected ] || fail "tiny-v2 failed before its gate"
	[ "$alias_d" = "$v1_d" ] || fail "not promoted, but router:latest is not tiny-v1"
fi

# Item 3: the export is numerically right, for both versions.
for r in tiny-v1 tiny-v2; do
	gguf=$(artifact_path $r quantize gguf)
	merged=$(artifact_path $r merge merged)
	toks=$(artifact_path $r tokenize tokens)
	[ -f "$gguf" ] && [ -d "$merged" ] && [ -f "$toks" ] || fail "$r: artifacts not found ($gguf, $merged, $toks)"
	/usr/bin/python3 "$TOP/tests/helpers/check_export.py" --gguf "$gguf" --merged "$merged" \
	    --tokens "$toks" --cases "$TEST_TMP/e2e/spec/tiny/cases.jsonl" --label $r ||
	    fail "$r: the served Q8_0 export does not reproduce the tiny engine"
done

# Resubmit tiny-v2 with three cases added to its case file: its next
# revision, tiny-v2@2, runs only what reads the cases (corpus_check, the
# two bakes, each asking the server only the three new cases) and the
# gate, which never reuses and decides; every other job is reused
# from tiny-v2, the GGUF the same bytes. The probe may run again too (a
# few seconds): its key holds the probe/real pairs of earlier trainings,
# and tiny-v2's own training added one; explain must say that is why.
cases=$TEST_TMP/e2e/spec/tiny/cases.jsonl
ncases=$(grep -c . "$cases")
/usr/bin/python3 - "$cases" <<'PY' || fail "three more cases"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
with open(sys.argv[1], "a") as f:
    for c in lines[:3]:
        c = dict(c, id=c["id"] + "-again", user="please " + c["user"])
        f.write(json.dumps(c) + "\n")
PY
t3=$(date +%s)
rev=$(pctl submit "$E2E_V2") || fail "resubmit tiny-v2"
[ "$rev" = tiny-v2@2 ] || fail "the resubmit made $rev, not tiny-v2@2"
for _ in $(seq 1 9000); do
	st2=$(run_state tiny-v2@2)
	case "$st2" in succeeded|failed|cancelled|rejected) break;; esac
	sleep 0.1
done
note "tiny-v2@2 ended $st2 in $(($(date +%s) - t3)) s (tiny-v2: $((t2 - t1)) s)"
pctl status tiny-v2@2
for j in corpus_check bake bake-incumbent; do
	[ "$(job_state tiny-v2@2 $j)" = succeeded ] || fail "tiny-v2@2: $j did not run: $(job_state tiny-v2@2 $j)"
done
if [ "$(job_state tiny-v2@2 probe)" != reused ]; then
	pctl explain tiny-v2@2 probe >probe.why
	grep -q "^compared probe_pair history: " probe.why ||
	    { cat probe.why; fail "tiny-v2@2: probe ran, and not for its calibration history"; }
	grep -E "^(ran: )?(code|key|input|server) [^ :]+: " probe.why &&
	    { cat probe.why; fail "tiny-v2@2: probe ran for more than its calibration history"; }
	note "tiny-v2@2: probe ran again: its calibration pairs grew by tiny-v2's training"
fi
for j in tokenize train merge tensor_fix convert quantize verify register; do
	[ "$(job_state tiny-v2@2 $j)" = reused ] ||
	    { pctl explain tiny-v2@2 $j; fail "tiny-v2@2: $j was not reused: $(job_state tiny-v2@2 $j)"; }
done
# Each bake, the candidate's and the incumbent's, took the shared cases'
# results as stored and asked the server only the three new ones; the
# gate decided on the new case set.
val() {	# val RUN JOB KEY
	db "SELECT v.value FROM vals v JOIN jobs j ON j.id = v.job_id JOIN runs r ON r.id = v.run_id
	    WHERE r.name = '$1' AND j.name = '$2' AND v.key = '$3' ORDER BY v.id DESC LIMIT 1"
}
for j in bake bake-incumbent; do
	val tiny-v2@2 $j bake.reuse | grep -qx "$ncases of $((ncases + 3)) cases reused from tiny-v2/$j, 3 run" ||
	    fail "tiny-v2@2 $j: bake.reuse is \"$(val tiny-v2@2 $j bake.reuse)\""
	for id in $(head -n "$ncases" "$cases" | /usr/bin/python3 -c 'import json, sys
for l in sys.stdin: print(json.loads(l)["id"])'); do
		[ "$(val tiny-v2@2 $j "case/$id")" = "$(val tiny-v2 $j "case/$id")" ] ||
		    fail "tiny-v2@2 $j: the row of case $id is not tiny-v2's"
	done
done
case "$(job_state tiny-v2@2 gate)" in succeeded|rejected) ;; *) fail "tiny-v2@2: the gate did not decide";; esac
[ "$(val tiny-v2@2 bake bake.case_set)" = "$(val tiny-v2@2 bake-incumbent bake.case_set)" ] ||
    fail "tiny-v2@2: the bakes' case sets differ"
[ "$(artifact_path tiny-v2@2 quantize gguf)" = "$(artifact_path tiny-v2 quantize gguf)" ] ||
	fail "tiny-v2@2's GGUF is not tiny-v2's"
[ "$(db "SELECT a.sha256 FROM artifacts a JOIN runs r ON r.id = a.run_id JOIN jobs j ON j.id = a.job_id
	WHERE r.name = 'tiny-v2@2' AND j.name = 'quantize' AND a.name = 'gguf'")" = \
  "$(db "SELECT a.sha256 FROM artifacts a JOIN runs r ON r.id = a.run_id JOIN jobs j ON j.id = a.job_id
	WHERE r.name = 'tiny-v2' AND j.name = 'quantize' AND a.name = 'gguf'")" ] || fail "the GGUF digests differ"
pctl explain tiny-v2@2 bake | grep -qi "cases" || { pctl explain tiny-v2@2 bake; fail "explain of bake does not name the cases"; }
integrity_ok
pl_stop
echo "e2e/lifecycle: ok"
