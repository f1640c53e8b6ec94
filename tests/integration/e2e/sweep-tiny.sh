#!/bin/bash
# e2e/sweep-tiny.sh: a sweep of three LoRA ranks through the whole tiny
# lifecycle on a real daemon and the REAL Ollama (tests/lib/e2e.sh):
# etc/examples/tiny.ini as a first release (no previous, no incumbent)
# with `sweep = lora_r: 8 16 32` in [train]. corpus_check and tokenize
# run once and are shared; the probe once per rank (probe-r8 ..: lora_r is
# memory-relevant, pipeline.ini(5) SWEEPS); train .. bake once per variant
# (train-r8 .. bake-r32), each registering its own tag
# (router:tiny-v2-r8 ..) and baking it; one gate ranks the three and
# gives one verdict; pipelinectl report shows the leaderboard, a row a
# variant with its values, and status each variant job's values; a
# passing verdict promotes the winner's tag to router:latest.
# run.sh: alone (three trainings).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/e2e.sh"
trap 'e2e_stop; pl_kill9 2>/dev/null' EXIT
cd "$TEST_TMP"
e2e_prepare "$TEST_TMP/e2e"
SPEC=$TEST_TMP/e2e/spec/sweep.ini
/usr/bin/python3 - "$E2E_V2" "$SPEC" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
t = t.replace("name = tiny-v2\nprevious = tiny-v1\n", "name = tiny-sweep\n")
t = re.sub(r"\n# The incumbent, on the same case set.*?\n(?=\n# The release rule)", "\n", t, flags=re.S)
t = t.replace("[train]\n", "[train]\nsweep = lora_r: 8 16 32\n")
t = t.replace("[gate]\nafter = bake, bake-incumbent\n", "[gate]\nafter = bake\nincumbent = none\n")
assert "[bake-incumbent]" not in t and "sweep = " in t and "incumbent = none" in t, t
open(sys.argv[2], "w").write(t)
PY
pl_conf "python = /usr/bin/python3" "max_jobs = 2"
pl_start
pctl check "$SPEC" >check.txt || { cat check.txt; fail "check"; }
cat check.txt
grep -qF "sweep of [train]" check.txt && grep -qE "^  lora_r=16 +train-r16 merge-r16 .* bake-r16$" check.txt ||
    fail "check does not list the variants"
t0=$(date +%s)
pctl submit "$SPEC" >/dev/null || fail "submit"
st=$(wait_end tiny-sweep 1800)
note "tiny-sweep ended $st in $(( $(date +%s) - t0 )) s"
pctl status tiny-sweep | tee status.txt
for j in corpus_check tokenize probe-r8 probe-r16 probe-r32; do
	[ "$(job_state tiny-sweep $j)" = succeeded ] || fail "shared job $j did not succeed"
done
# The shared jobs ran once: one job of each name, one attempt each.
[ "$(db "SELECT group_concat(name || ':' || attempts, ' ') FROM (SELECT name, attempts FROM jobs WHERE name IN ('corpus_check','tokenize') OR stage = 'probe' ORDER BY name)")" = "corpus_check:1 probe-r16:1 probe-r32:1 probe-r8:1 tokenize:1" ] ||
    fail "the shared jobs did not run once: $(db "SELECT name, attempts FROM jobs")"
[ "$(db "SELECT count(*) FROM jobs WHERE stage = 'train'")" = 3 ] || fail "not three train jobs"
for r in 8 16 32; do
	for j in train merge tensor_fix convert quantize verify register bake; do
		[ "$(job_state tiny-sweep $j-r$r)" = succeeded ] || { pctl logs tiny-sweep $j-r$r | tail -20; fail "$j-r$r did not succeed"; }
	done
	grep -qE "^train-r$r +train \(lora_r=$r\) " status.txt || fail "status lacks train-r$r's values"
	curl -sf "$OURL/api/tags" | grep -q "router:tiny-v2-r$r" || fail "router:tiny-v2-r$r not registered"
done
[ "$(db "SELECT count(*) FROM vals WHERE key = 'gate.verdict'")" = 1 ] || fail "not one verdict"
pctl report tiny-sweep >report.txt || { cat report.txt; fail "report"; }
cat report.txt
grep -q "^verdict tiny-sweep/gate: " report.txt || fail "no verdict"
grep -q "^leaderboard tiny-sweep/gate: 3 variants" report.txt || fail "no leaderboard"
for r in 8 16 32; do
	grep -qE "^  [123] +tiny-sweep/bake-r$r +lora_r=$r " report.txt || fail "no leaderboard row for r$r"
done
pctl --json report tiny-sweep >report.json || fail "report --json"
/usr/bin/python3 - report.json "$st" <<'PY' || fail "the verdict does not hold up"
import json, sys
v = json.load(open(sys.argv[1]))["verdicts"][0]
lb = v["sweep"]["leaderboard"]
assert len(lb) == 3 and sorted(x["values"] for x in lb) == ["lora_r=16", "lora_r=32", "lora_r=8"], lb
assert [x["verdict"] for x in lb[1:]] == ["lost", "lost"], lb
assert v["candidate"]["bake"] == lb[0]["bake"], (v["candidate"], lb[0])
want = "succeeded" if v["pass"] else "rejected"
assert sys.argv[2] == want, (sys.argv[2], v["verdict"])
print("winner", lb[0]["values"], v["verdict"])
PY
# A passing verdict moved router:latest to the winner's own tag.
win=$(/usr/bin/python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))["verdicts"][0]
print(v["sweep"]["leaderboard"][0]["values"].split("=")[1] if v["pass"] else "")' report.json)
if [ -n "$win" ]; then
	digest() { curl -s "$OURL/api/tags" | /usr/bin/python3 -c 'import json, sys
print(([m["digest"] for m in json.load(sys.stdin)["models"] if m["name"] == sys.argv[1]] + [""])[0])' "$1"; }
	[ -n "$(digest router:latest)" ] && [ "$(digest router:latest)" = "$(digest "router:tiny-v2-r$win")" ] ||
	    fail "router:latest is not router:tiny-v2-r$win, the winner's tag"
	note "router:latest is router:tiny-v2-r$win"
fi
integrity_ok
pl_stop
echo "e2e/sweep-tiny: ok"
