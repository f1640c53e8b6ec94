#!/bin/bash
# bake/report-daemon.sh: bake, bake-incumbent and gate as jobs of a real
# daemon against a real llama-server: the gate reads both bakes from the
# store, the verdict lands in the store, `pipelinectl report` shows them
# side by side (and --json), and /metrics serves the bakes' accuracy, guard
# breaches and the verdict as the store holds them; the incumbent's held-out set comes from
# another run's tokenize stats (stats_run); a run whose incumbent was baked
# on another case set is refused by the gate, and report --vs warns.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/bake.sh"
trap 'stop_llama; pl_stop' EXIT
cd "$TEST_TMP"

tiny_gguf "$TEST_TMP/tiny.gguf"
start_llama "$TEST_TMP/tiny.gguf" 1024 1
MPORT=$(free_port)
pl_conf "metrics_listen = 127.0.0.1:$MPORT" "http_token = report-token-0123456789"
pl_start
S=$TEST_TMP/specs
mkdir -p "$S"
sed 's/channel {{channel}}/channel {{channel}} (revised)/' "$BAKE_DATA/system.txt" >"$S/system2.txt"

# The incumbent's training run: a tokenize job whose corpus holds three of
# the cases' train keys; its stats artifact is what stats_run reads.
/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$TEST_TMP/base" >/dev/null
/usr/bin/python3 - >"$S/corpus-inc.jsonl" <<'PY'
import json
for k in ("k-open-2", "k-search-1", "k-guard-2"):
    print(json.dumps({"key": k, "messages": [
        {"role": "system", "content": "You route."},
        {"role": "user", "content": "example " + k},
        {"role": "assistant", "content": "{\"capability\":\"search\",\"args\":{}}"}]}))
PY
cat >"$S/inc0.ini" <<INI
[run]
name = inc0

[tokenize]
base = $TEST_TMP/base
corpus = $S/corpus-inc.jsonl
max_seq_length = 512
num_ctx = 1024
INI
pctl submit "$S/inc0.ini" >/dev/null || fail "submit inc0"
wait_run inc0 succeeded 120

spec() {	# spec RUN INCUMBENT_SYSTEM
	cat <<INI
[run]
name = $1

[bake]
backend = openai
url = $LLAMA_URL
model = tiny
cases = $BAKE_DATA/cases.jsonl
system = $BAKE_DATA/system.txt
capabilities = $BAKE_DATA/capabilities.txt
stats = $BAKE_DATA/stats.json
num_ctx = 1024
max_tokens = 64
passes = 2

[bake-incumbent]
stage = bake
after = bake
backend = openai
url = $LLAMA_URL
model = tiny
cases = $BAKE_DATA/cases.jsonl
system = $2
capabilities = $BAKE_DATA/capabilities.txt
stats_run = inc0
num_ctx = 1024
max_tokens = 64
passes = 2

# Ten cases: the fair slice is three (see below), under the default 20.
[gate]
after = bake, bake-incumbent
min_fair_cases = 3
INI
}

# 1. Same weights on both sides: identical answers, so a fair-slice and
# overall tie; nothing identical is released: the gate rejects it, and the
# run ends rejected (exit status 3 of status and watch).
spec rel1 "$BAKE_DATA/system.txt" >"$S/rel1.ini"
pctl submit "$S/rel1.ini" >/dev/null || fail "submit rel1"
wait_run rel1 rejected 120
[ "$(job_state rel1 bake)" = succeeded ] || fail "bake did not succeed"
[ "$(job_state rel1 gate)" = rejected ] || fail "gate did not refuse a tie"
pctl status rel1 >/dev/null; [ $? = 3 ] || fail "status of a rejected run does not exit 3"
pctl watch rel1 >/dev/null; [ $? = 3 ] || fail "watch of a rejected run does not exit 3"
pctl report rel1 >rel1.txt || { cat rel1.txt; fail "report rel1"; }
cat rel1.txt
grep -q "^overall %" rel1.txt && grep -q "^held-out guard breaches" rel1.txt ||
    fail "report lacks rows"
grep -q "rel1/bake-incumbent" rel1.txt || fail "report lacks the incumbent's column"
# The fair slice comes first: it is what the gate ranks on.
[ "$(grep -n -m1 '^fair slice (3) %' rel1.txt | cut -d: -f1)" -lt "$(grep -n -m1 '^overall %' rel1.txt | cut -d: -f1)" ] ||
    fail "report does not show the fair slice first"
grep -q "McNemar exact p 1 (0 discordant of 3)" rel1.txt || fail "report lacks the paired comparison"
grep -q "verdict rel1/gate: tie, overall not higher" rel1.txt || fail "report lacks the verdict"
pctl --json report rel1 >rel1.json || fail "report --json"
/usr/bin/python3 - rel1.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
b = {x["bake"]: x for x in r["bakes"]}
assert set(b) == {"rel1/bake", "rel1/bake-incumbent"}, b.keys()
assert r["same_case_set"] is True
# The incumbent's corpus (run inc0) holds k-open-2, k-search-1 and
# k-guard-2: the other 7 cases are held out for it; the candidate's
# stats.json leaves 4 held out (search-1, search-2, guard-del-1,
# guard-play-1); the fair slice is what both held out: search-2,
# guard-del-1, guard-play-1.
assert b["rel1/bake-incumbent"]["held_out_cases"] == 7, b
assert b["rel1/bake"]["held_out_cases"] == 4, b
assert r["fair_slice"]["cases"] == 3, r["fair_slice"]
assert r["fair_slice"]["a_only"] == 0 and r["fair_slice"]["b_only"] == 0, r["fair_slice"]
v = r["verdicts"][0]
assert v["verdict"] == "tie, overall not higher" and v["pass"] is False, v
assert v["candidate"]["overall"]["acc"] == v["incumbent"]["overall"]["acc"], v
PY

# 2. The incumbent baked with another system prompt: another case set.
spec rel2 "$S/system2.txt" >"$S/rel2.ini"
pctl submit "$S/rel2.ini" >/dev/null || fail "submit rel2"
wait_run rel2 failed 120
pctl logs rel2 gate >gate2.log 2>&1
grep -q "case sets differ" gate2.log || { cat gate2.log; fail "gate compared different case sets"; }
pctl values rel2 gate | grep -q gate.verdict && fail "a verdict was stored across case sets"
pctl report rel1 --vs rel2 >vs.txt || fail "report --vs"
grep -q "rel2/bake-incumbent" vs.txt || fail "report --vs lacks rel2"
grep -q "different case sets" vs.txt || { cat vs.txt; fail "no case-set warning"; }

# 3. /metrics: each bake's accuracy and breaches, the verdict, the fair slice.
curl -sf -H "Authorization: Bearer report-token-0123456789" "http://127.0.0.1:$MPORT/metrics" >metrics.txt || fail "GET /metrics"
/usr/bin/python3 - metrics.txt rel1.json <<'PY' || fail "/metrics disagrees with the store"
import json, re, sys
m = {}
for line in open(sys.argv[1]):
    if line.startswith("#"):
        continue
    k, v = line.rsplit(" ", 1)
    m[k] = float(v)
r = json.load(open(sys.argv[2]))
for b in r["bakes"]:
    run, job = b["bake"].split("/")
    lab = 'run="%s",job="%s",stage="bake"' % (run, job)
    assert abs(m['pipelined_bake_accuracy{%s,slice="overall"}' % lab] - b["overall"]["acc"]) < 1e-12, b
    assert abs(m['pipelined_bake_accuracy{%s,slice="held_out"}' % lab] - b["held_out"]["acc"]) < 1e-12, b
    assert m['pipelined_bake_guard_breaches{%s}' % lab] == b["guard_breaches"], b
v = r["verdicts"][0]
assert m['pipelined_gate_verdict{run="rel1",job="gate",stage="gate",verdict="%s"}' % v["verdict"]] == 1
assert m['pipelined_gate_verdicts_total{verdict="%s"}' % v["verdict"]] == 1
assert 'pipelined_fair_slice_accuracy{run="rel1",job="gate",stage="gate",side="candidate"}' in m
PY
echo "bake/report-daemon: ok"
