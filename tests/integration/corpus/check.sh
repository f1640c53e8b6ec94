#!/bin/bash
# corpus/check.sh: the corpus_check stage. A clean corpus passes with no
# finding; corpora that each plant one defect are caught by that check and
# name the example's key and line: a label conflict (F14), a near conflict,
# exact and near duplicates with their counts, a capability of the enum
# without examples or below min_examples (F27), a target outside the enum
# (F19), guards without counterweights and too large a guard share (F13),
# guard cases without a guard target (F12), a case held out by its key
# whose request the corpus holds (F11), a differing system prompt, a target
# that is not the routing call, roles out of order, a duplicate key, a line
# that is not JSON. A policy of warn or off changes the outcome, not the
# count. The example corpora of etc/examples/tiny fail no check. Then, on a
# daemon, two runs: the values, `pipelinectl report` with the changes since
# the previous run per capability and the cases added, and the event that
# watch prints.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_stop' EXIT
cd "$TEST_TMP"
D=$TOP/etc/examples/tiny
CAPS=$D/capabilities.txt
CASES=$D/cases.jsonl

# The generator: a clean corpus of the tiny router's shape (the tiny
# system prompt, five acting capabilities and clarify guards with their
# counterweights), and each defect planted into a copy of it.
/usr/bin/python3 - "$TEST_TMP" <<'PY'
import json, sys
out = sys.argv[1]
SYS = ("Router of channel default. One JSON call: open_folder(path), delete_file(path), "
       "search(query), play_music(title), set_timer(minutes).")
def ex(key, user, cap, args, system=SYS, extra=None):
    m = [{"role": "system", "content": system}] if system is not None else []
    m += extra or []
    m += [{"role": "user", "content": user},
          {"role": "assistant", "content": json.dumps({"capability": cap, "args": args},
                                                      separators=(",", ":"))}]
    return {"key": key, "messages": m}
folders = ["docs", "src", "photos", "music", "build", "logs"]
files = ["notes.txt", "old.log", "draft.md", "cache.bin", "a.out", "report.pdf"]
queries = ["lora rank", "gguf files", "cpu speed", "release notes", "held out", "quantization"]
songs = ["blue moon", "night train", "river song", "golden hour", "slow rain", "city lights"]
clean = []
for i, f in enumerate(folders):
    clean.append(ex("open-%d" % i, "please open the %s folder for me" % f, "open_folder", {"path": f}))
for i, f in enumerate(files):
    clean.append(ex("del-%d" % i, "remove the file called %s right now" % f, "delete_file", {"path": f}))
for i, q in enumerate(queries):
    clean.append(ex("search-%d" % i, "look up everything about %s on the web" % q, "search", {"query": q}))
for i, s in enumerate(songs):
    clean.append(ex("play-%d" % i, "put on the song named %s in the kitchen" % s, "play_music", {"title": s}))
for i, m in enumerate([5, 10, 20, 45, 15, 30]):
    clean.append(ex("timer-%d" % i, "start a countdown timer of %d minutes" % m, "set_timer", {"minutes": m}))
# Guards (negation) with their counterweights: negations that act.
for i, f in enumerate(files[:4]):
    clean.append(ex("guard-%d" % i, "do not delete %s under any circumstances" % f, "clarify", {}))
clean.append(ex("cw-0", "dont open photos, open the music folder instead", "open_folder", {"path": "music"}))
clean.append(ex("cw-1", "no not that one, search for lora rank please", "search", {"query": "lora rank"}))
def write(name, rows, raw=None):
    with open("%s/%s.jsonl" % (out, name), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        for line in raw or []:
            f.write(line + "\n")
write("clean", clean)
write("conflict", clean + [ex("conf-1", "Please open the DOCS folder, for me!", "search", {"query": "docs"})])
write("nearconflict", clean + [ex("nconf-1", "please open the docs folder for me now", "delete_file", {"path": "docs"})])
write("dup", clean + [ex("dup-1", "please open the docs folder for me", "open_folder", {"path": "Docs "}),
                      ex("dup-2", "please open the docs folder for me", "open_folder", {"path": "docs"})])
write("neardup", clean + [ex("ndup-1", "please open the docs folder for me now", "open_folder", {"path": "docs"})])
write("few", [r for r in clean if not r["key"].startswith("timer-") or r["key"] == "timer-0"])
write("none", [r for r in clean if not r["key"].startswith("play-")])
write("unknown", clean + [ex("unk-1", "turn the lights in the hall off", "lights_off", {})])
write("nocw", [r for r in clean if not r["key"].startswith("cw-")])
write("share", clean + [ex("g-%d" % i, "what about thing number %d here" % i, "clarify", {}) for i in range(40)])
write("noguard", [r for r in clean if not r["key"].startswith(("guard-", "cw-"))])
write("sysprompt", clean + [ex("sys-1", "turn the volume of the radio up a bit", "search", {"query": "volume"},
                               system="You are a helpful assistant.")])
write("fence", clean + [{"key": "fence-1", "messages": [{"role": "system", "content": SYS},
    {"role": "user", "content": "find me the weather for tomorrow"},
    {"role": "assistant", "content": "```json\n{\"capability\":\"search\",\"args\":{}}\n```"}]}])
write("shape", clean + [{"key": "shape-1", "messages": [{"role": "system", "content": SYS},
    {"role": "user", "content": "find me the weather for tomorrow"},
    {"role": "assistant", "content": "{\"capability\":\"search\",\"args\":[\"weather\"]}"}]}])
write("order", clean + [{"key": "order-1", "messages": [{"role": "system", "content": SYS},
    {"role": "user", "content": "find me the weather for tomorrow"},
    {"role": "user", "content": "and for friday too"},
    {"role": "assistant", "content": "{\"capability\":\"search\",\"args\":{}}"}]}])
write("dupkey", clean + [ex("open-1", "what is on the calendar for today", "search", {"query": "calendar"})])
write("badline", clean, raw=['{"key": "broken-1", "messages": [', 'not json at all'])
# Leakage: cases that name no train key, one whose request is a corpus
# example's (the same after normalisation), one near-identical.
with open(out + "/cases.jsonl", "w") as f:
    for c in [
        {"id": "c-open", "kind": "route", "user": "open the docs folder",
         "expect": {"capability": "open_folder", "args": {"path": "docs"}}},
        {"id": "c-keyed", "kind": "route", "user": "please open the src folder for me",
         "expect": {"capability": "open_folder"}, "train_key": "open-1"},
        {"id": "c-leak", "kind": "route", "user": "Please open the photos folder for me.",
         "expect": {"capability": "open_folder"}},
        {"id": "c-near", "kind": "route", "user": "please open the music folder for me today",
         "expect": {"capability": "open_folder"}},
        {"id": "c-guard", "kind": "guard", "user": "never delete anything", "forbid": ["delete_file"]},
    ]:
        f.write(json.dumps(c) + "\n")
        if c["id"] in ("c-open", "c-keyed", "c-guard"):
            with open(out + "/cases-clean.jsonl", "a") as g:
                g.write(json.dumps(c) + "\n")
PY
MYCASES=$TEST_TMP/cases.jsonl

# cc NAME [key=value...]: the stage by hand on NAME.jsonl; rc in $rc,
# output in NAME.out, the summary value in NAME.sum.
cc() {
	local name=$1 corpus=$2; shift 2
	set +e
	"$PIPELINECTL" stage corpus_check -w "$TEST_TMP/w-$name" corpus="$TEST_TMP/$corpus.jsonl" \
	    capabilities="$CAPS" "$@" >"$TEST_TMP/$name.out" 2>&1
	rc=$?
	set -e
	sed -n 's/^job.value {"key":"corpus_check.summary","value":"\(.*\)"}$/\1/p' \
	    "$TEST_TMP/$name.out" | sed 's/\\"/"/g' >"$TEST_TMP/$name.sum"
	[ -s "$TEST_TMP/$name.sum" ] || { cat "$TEST_TMP/$name.out"; fail "$name: no summary value"; }
}
# count NAME CHECK: the summary's count of a check.
count() {
	/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checks"][sys.argv[2]]["count"])' \
	    "$TEST_TMP/$1.sum" "$2"
}
# expect NAME CHECK N RC REGEX: the check counted N, the stage exited RC,
# and the log names the finding (key and line) as REGEX says.
expect() {
	local name=$1 check=$2 n=$3 want_rc=$4 re=$5
	[ "$(count "$name" "$check")" = "$n" ] || { cat "$TEST_TMP/$name.out"; fail "$name: $check counted $(count "$name" "$check"), not $n"; }
	[ "$rc" = "$want_rc" ] || { cat "$TEST_TMP/$name.out"; fail "$name: exit $rc, not $want_rc"; }
	grep -Eq -- "corpus_check: $check: $re" "$TEST_TMP/$name.out" ||
	    { cat "$TEST_TMP/$name.out"; fail "$name: no $check finding matching: $re"; }
	grep -q "\"check\":\"$check\"" "$TEST_TMP/w-$name/findings.jsonl" || fail "$name: $check not in findings.jsonl"
	# No other check found anything.
	/usr/bin/python3 - "$TEST_TMP/$name.sum" "$check" <<'PY' || { cat "$TEST_TMP/$name.out"; fail "$name: another check found something"; }
import json, sys
s = json.load(open(sys.argv[1]))
others = {k: v["count"] for k, v in s["checks"].items() if k != sys.argv[2] and v["count"]}
sys.exit(1 if others else 0)
PY
	note "$name: $check $n, exit $rc"
}

# The clean corpus: nothing, exit 0, result ok.
cc clean clean cases="$TEST_TMP/cases-clean.jsonl"
[ "$rc" = 0 ] || { cat clean.out; fail "the clean corpus failed"; }
grep -q '"result":"ok"' clean.sum || { cat clean.out; fail "the clean corpus has findings"; }
grep -q '"counterweights":2' clean.sum || fail "clean: counterweights not counted"

# Each defect, by its check, with its key and line.
cc conflict conflict
expect conflict conflicts 1 1 'example open-0 \(line 1\): -> open_folder; the same request with 2 different calls: conf-1 \(line 37\) -> search'
grep -q 'stage corpus_check: failed: corpus_check: 1 conflicts' conflict.out || fail "conflict: the failure does not say why"
cc conflict-warn conflict conflicts=warn
expect conflict-warn conflicts 1 0 'example open-0'
cc conflict-off conflict conflicts=off
[ "$(count conflict-off conflicts)" = 0 ] && [ "$rc" = 0 ] || fail "conflicts=off still counted"
cc nearconflict nearconflict
expect nearconflict near_conflicts 1 0 'example nconf-1 \(line 37\): -> delete_file; near-identical to example open-0 \(line 1\) -> open_folder \(similarity 0\.8'
cc dup dup
expect dup duplicates 2 0 'example dup-[12] \(line 3[78]\): duplicates example open-0 \(line 1\)'
grep -q '"exact":2' dup.sum || fail "dup: the exact count is not 2"
cc neardup neardup
expect neardup near_duplicates 1 0 'example ndup-1 \(line 37\): near-identical to example open-0 \(line 1\), both -> open_folder'
cc few few
expect few coverage 1 0 'capability set_timer has 1 example, fewer than min_examples 3'
cc none none
expect none coverage 1 0 'capability play_music has no examples \(F27'
cc unknown unknown
expect unknown unknown_capability 1 1 'example unk-1 \(line 37\): -> lights_off, which is not in the enum .*F19'
cc nocw nocw
expect nocw guards 1 0 'example guard-0 \(line 31\): 4 guard examples of the negation form and 0 counterweights'
cc share share
expect share guards 1 0 'example guard-0 \(line 31\): 44 of 76 examples \(58%\) are guard targets'
cc noguard noguard cases="$MYCASES" leakage=off coverage=off
expect noguard guards 1 0 'the case file has guard cases \(c-guard first, line 5\) and the corpus no guard target.*F12'
cc sysprompt sysprompt
expect sysprompt system_prompt 1 0 'example sys-1 \(line 37\): its system prompt differs'
cc fence fence
expect fence structure 1 1 'example fence-1 \(line 37\): the target is not a JSON object \(a code fence'
cc shape shape
expect shape structure 1 1 'example shape-1 \(line 37\): the target.s "args" is not an object'
cc order order
expect order structure 1 1 'example order-1 \(line 37\): roles out of order: message 2 is the user.s'
cc dupkey dupkey
expect dupkey structure 1 1 'example open-1 \(line 37\): duplicate key \(first on line 2\)'
cc badline badline
expect badline structure 2 1 'line 37: not a JSON object'

# Leakage: c-keyed leaves the fair slice by its key (counted, no
# finding); c-leak (equal after normalisation) and c-near are held out by
# key and trained: two findings; c-open is not in the corpus.
cc leak-clean clean cases="$MYCASES"
[ "$rc" = 0 ] || fail "leakage fails by default"
cc leak clean cases="$MYCASES"
expect leak leakage 2 0 'example open-2 \(line 3\): the same request as case c-leak \(.*cases.jsonl line 3\), which carries no train key'
grep -q 'near-identical to case c-near' leak.out || fail "leak: the near leak is not named"
/usr/bin/python3 - leak.sum <<'PY' || fail "leak: the counts are wrong"
import json, sys
l = json.load(open(sys.argv[1]))["leakage"]
assert l == {"cases": 5, "by_train_key": 1, "equal": 2, "near": 1, "undeclared": 2}, l
PY

# The example corpora: no check fails (the tiny router's negation guards
# have no counterweights, a warning the check is right to give: F13).
for v in v1 v2; do
	cp "$D/corpus-$v.jsonl" "$TEST_TMP/tiny-$v.jsonl"
	cc tiny-$v tiny-$v cases="$CASES"
	[ "$rc" = 0 ] || { cat tiny-$v.out; fail "etc/examples/tiny/corpus-$v.jsonl fails corpus_check"; }
	/usr/bin/python3 - tiny-$v.sum <<'PY' || fail "tiny-$v: unexpected findings"
import json, sys
s = json.load(open(sys.argv[1]))
found = {k: v["count"] for k, v in s["checks"].items() if v["count"]}
assert found == {"guards": 1}, found
assert s["leakage"]["undeclared"] == 0, s["leakage"]
PY
done
note "tiny corpora: no failing check"

# Bad keys are refused before the run.
set +e
"$PIPELINECTL" stage corpus_check -w "$TEST_TMP/w-bad" corpus="$TEST_TMP/clean.jsonl" \
    conflicts=maybe near_threshold=1.5 >bad.out 2>&1
rc=$?
set -e
[ "$rc" != 0 ] && grep -q 'conflicts.*"maybe" is not fail, warn or off' bad.out &&
    grep -q 'near_threshold.*1.5 is not above 0 and at most 1' bad.out || { cat bad.out; fail "bad keys not refused"; }

# On a daemon: run a (previous) and run b; b's diff per capability and
# its cases added, in the values and in report; the event on the feed.
WPORT=$(free_port)
pl_conf "http_listen = 127.0.0.1:$WPORT" "http_token = corpus-token-0123456789"
pl_start
cp "$CASES" cases-a.jsonl
{ cat "$CASES"; echo '{"id": "t9-01", "kind": "route", "user": "open the zz folder", "expect": {"capability": "open_folder"}}'; } >cases-b.jsonl
/usr/bin/python3 - <<'PY'
import json
rows = [json.loads(l) for l in open("clean.jsonl")]
b = [r for r in rows if r["key"] != "play-0"]			# removed
b[0]["messages"][-1]["content"] = '{"capability":"open_folder","args":{"path":"docs2"}}'  # changed
b.append(json.loads(json.dumps(rows[1])))
b[-1]["key"] = "open-new"
b[-1]["messages"][1]["content"] = "please open the new folder for me"		# added
open("corpus-b.jsonl", "w").write("".join(json.dumps(r) + "\n" for r in b))
PY
for r in a b; do
	corpus=clean.jsonl; [ $r = b ] && corpus=corpus-b.jsonl
	prev=""; [ $r = b ] && prev="previous = ra"
	cat >"r$r.ini" <<INI
[run]
name = r$r
$prev

[corpus_check]
corpus = $TEST_TMP/$corpus
cases = $TEST_TMP/cases-$r.jsonl
capabilities = $CAPS
INI
	pctl submit "r$r.ini" >/dev/null || fail "submit r$r"
	wait_run "r$r" succeeded 60
done
pctl values rb | grep -q 'corpus_check.diff' || fail "rb: no corpus_check.diff value"
pctl report rb >report.out 2>&1 || { cat report.out; fail "report rb failed"; }
cat report.out
grep -Eq '^corpus +rb/corpus_check: ok, [0-9]+ examples' report.out || fail "report: no corpus line"
grep -Eq '^  open_folder +\+1 -0 ~1' report.out || fail "report: open_folder's changes"
grep -Eq '^  play_music +\+0 -1 ~0' report.out || fail "report: play_music's changes"
grep -Eq 'cases since ra: \+1 -0 ~0' report.out || fail "report: the cases added"
pctl report rb --json >report.json
/usr/bin/python3 - <<'PY' || fail "report --json: the corpus figures"
import json
r = json.load(open("report.json"))
c = r["corpus"][0]
assert c["summary"]["result"] == "ok" and c["diff"]["examples"] == {"added": 1, "removed": 1, "changed": 1, "unchanged": 34}, c
assert c["diff"]["cases"]["added_ids"] == ["t9-01"], c
PY
# The status page's run document carries both values for the page's
# corpus table.
curl -sf -H "Authorization: Bearer corpus-token-0123456789" "http://127.0.0.1:$WPORT/api/run?run=rb" >run.json || fail "GET /api/run?run=rb"
/usr/bin/python3 - <<'PY' || fail "/api/run: the corpus_check values"
import json
d = json.load(open("run.json"))
keys = {(v["job"], v["key"]) for v in d["values"]}
assert ("corpus_check", "corpus_check.summary") in keys and ("corpus_check", "corpus_check.diff") in keys, keys
s = [v["value"] for v in d["values"] if v["key"] == "corpus_check.summary"][0]
assert s["result"] == "ok" and s["examples"] == 36, s
PY
pctl watch ra --plain >watch.out 2>&1 || true
grep -q 'corpus_check corpus: ok, 36 examples' watch.out || { cat watch.out; fail "watch does not show the counts"; }
echo "PASS"
