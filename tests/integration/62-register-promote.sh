#!/bin/bash
# 62-register-promote.sh: register, bake and promote through the Ollama
# stand-in (tests/standins/ollama_standin.py) whose /api/chat forwards to a
# real llama-server serving the tiny fixture GGUF:
#   - register v1 from a GGUF: blob uploaded, tag created from
#     etc/Modelfile.tmpl, weights/manifest/uploaded digests recorded;
#   - register v2 from the same GGUF with previous_tag = v1: refused (same
#     weights as the previous version); from a different GGUF: accepted;
#   - a server that picks another template than the one given: refused;
#   - a bake through the ollama backend (num_ctx on every request), and a
#     prompt the server silently cut (G01) reported as a bake error;
#   - gate with promote = yes copies v2 to the alias and reads its digest
#     back, equal to v2's.
set -eu
: "${TOP:?}" "${TEST_TMP:?}"
. "$TOP/tests/integration/data/bake/lib.sh"
STANDIN_PID=
cleanup() {
	[ -n "$STANDIN_PID" ] && kill "$STANDIN_PID" 2>/dev/null
	stop_llama
}
trap cleanup EXIT
cd "$TEST_TMP"

tiny_gguf "$TEST_TMP/v1.gguf" 1234
tiny_gguf "$TEST_TMP/v2.gguf" 4321
cmp -s v1.gguf v2.gguf && fail "the two fixture GGUFs are identical"
start_llama "$TEST_TMP/v1.gguf" 1024 1

start_standin() {
	rm -f port
	python3 "$TOP/tests/standins/ollama_standin.py" --port-file "$TEST_TMP/port" \
	    --upstream "$LLAMA_URL" --blobs-dir "$TEST_TMP/blobs" --log "$TEST_TMP/standin.log" \
	    "$@" >standin.out 2>&1 &
	STANDIN_PID=$!
	for _ in $(seq 1 100); do [ -s port ] && break; sleep 0.05; done
	[ -s port ] || { cat standin.out; fail "stand-in did not start"; }
	OURL=http://127.0.0.1:$(cat port)
}
stop_standin() { kill "$STANDIN_PID"; wait "$STANDIN_PID" 2>/dev/null || true; STANDIN_PID=; }
value() {	# value FILE KEY
	/usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("job.value "):
        v = json.loads(line[len("job.value "):])
        if v["key"] == sys.argv[2]:
            print(v["value"])' "$1" "$2" | tail -n 1
}

start_standin
reg=(modelfile="$TOP/etc/Modelfile.tmpl" "url=$OURL" num_ctx=1024)

# 1. Register v1.
stage register gguf="$TEST_TMP/v1.gguf" tag=router:v1 "${reg[@]}" >reg1.out 2>&1 ||
    { cat reg1.out; fail "register v1"; }
sha1=$(sha256sum v1.gguf | cut -d' ' -f1)
[ "$(value reg1.out register.uploaded)" = "$sha1" ] || fail "uploaded digest not recorded"
[ "$(value reg1.out register.weights)" = "$sha1" ] || fail "weights digest is not the upload's"
m1=$(value reg1.out register.manifest)
[ "$(curl -s "$OURL/api/tags" | /usr/bin/python3 -c 'import json,sys; print([m["digest"] for m in json.load(sys.stdin)["models"] if m["name"]=="router:v1"][0])')" = "$m1" ] ||
    fail "manifest digest differs from /api/tags"
[ -f "blobs/sha256-$sha1" ] || fail "blob not uploaded"
grep -q '"event": "create"' standin.log || fail "no create"

# 2. The same weights under a new tag, with v1 as the previous version:
# refused, as the v3-from-v2 sed mistake should have been.
if stage register gguf="$TEST_TMP/v1.gguf" tag=router:v2 previous_tag=router:v1 \
    "${reg[@]}" >reg2.out 2>&1; then
	cat reg2.out; fail "the previous version's weights were registered as v2"
fi
grep -q "the previous version's" reg2.out || { cat reg2.out; fail "refusal not explained"; }
# Re-registering v2 over a loaded tag unloads it first.
curl -s "$OURL/api/generate" -d '{"model":"router:v2","keep_alive":-1}' >/dev/null
stage register gguf="$TEST_TMP/v2.gguf" tag=router:v2 previous_tag=router:v1 \
    "${reg[@]}" >reg3.out 2>&1 || { cat reg3.out; fail "register v2"; }
grep -q '"event": "unload", "model": "router:v2"' standin.log || fail "loaded v2 not unloaded before create"
m2=$(value reg3.out register.manifest)
[ "$m2" != "$m1" ] || fail "v2 has v1's manifest"

# 3. A server that picks its own template: refused.
stop_standin
start_standin --prefer-gguf-template
if stage register gguf="$TEST_TMP/v2.gguf" tag=router:v3 "${reg[@]/url=*/url=$OURL}" \
    >reg4.out 2>&1; then
	cat reg4.out; fail "a template other than the given one was accepted"
fi
grep -q "chose a template other than" reg4.out || { cat reg4.out; fail "template refusal not explained"; }
stop_standin

# 4. Bake through the ollama backend: every request carries num_ctx.
start_standin
stage register gguf="$TEST_TMP/v2.gguf" tag=router:v2 "${reg[@]/url=*/url=$OURL}" >reg5.out 2>&1 ||
    { cat reg5.out; fail "register v2 again"; }
bake=(backend=ollama "url=$OURL" model=router:v2 "cases=$BAKE_DATA/cases.jsonl"
    "system=$BAKE_DATA/system.txt" "capabilities=$BAKE_DATA/capabilities.txt"
    "stats=$BAKE_DATA/stats.json" num_ctx=1024 max_tokens=64 passes=2)
stage bake "${bake[@]}" >bake.out 2>&1 || { cat bake.out; fail "bake via ollama"; }
value bake.out bake.summary >"$TEST_TMP/cand.json"
/usr/bin/python3 - cand.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["backend"] == "ollama" and s["complete"] and s["runnable"] == 10, s
# the stand-in reports size_vram == size with nothing else loaded (G22)
assert s["speed_comparable"] is True, s["speed_note"]
PY
grep -q '"event": "chat"' standin.log || fail "no chat reached the stand-in"

# 4b. G22: another model loaded beside ours makes the speed not comparable;
# with evict = yes (the default) the bake unloads it first.
stop_standin
start_standin --loaded embed:latest
stage register gguf="$TEST_TMP/v2.gguf" tag=router:v2 "${reg[@]/url=*/url=$OURL}" >/dev/null 2>&1 ||
    fail "register v2 on a fresh stand-in"
g22=("${bake[@]/url=*/url=$OURL}")
stage bake "${g22[@]/passes=2/passes=1}" evict=no >g22a.out 2>&1 || { cat g22a.out; fail "bake evict=no"; }
value g22a.out bake.summary | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
assert s["speed_comparable"] is False and "other model" in s["speed_note"], s["speed_note"]'
grep -q '"event": "unload", "model": "embed:latest"' standin.log && fail "evict=no evicted"
stage bake "${g22[@]/passes=2/passes=1}" keep_alive=-1 >g22b.out 2>&1 || { cat g22b.out; fail "bake evict=yes"; }
grep -q '"event": "unload", "model": "embed:latest"' standin.log || fail "the other model was not evicted (G22)"
value g22b.out bake.summary | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
assert s["speed_comparable"] is True, s["speed_note"]'

# 4b'. G22: our model itself only partly in VRAM (size_vram < size): the
# speed is not comparable even with nothing else loaded.
stop_standin
start_standin --vram-fraction 0.5
stage register gguf="$TEST_TMP/v2.gguf" tag=router:v2 "${reg[@]/url=*/url=$OURL}" >/dev/null 2>&1 ||
    fail "register v2 on a half-VRAM stand-in"
g22=("${bake[@]/url=*/url=$OURL}")
stage bake "${g22[@]/passes=2/passes=1}" >g22c.out 2>&1 || { cat g22c.out; fail "bake on a half-VRAM model"; }
value g22c.out bake.summary | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
assert s["speed_comparable"] is False and "size_vram" in s["speed_note"], s["speed_note"]
print("# half on the CPU:", s["speed_note"])'

# 4c. num_ctx above the model's trained context would be capped silently:
# refused before the first case.
stop_standin
start_standin --context-length 512
stage register gguf="$TEST_TMP/v2.gguf" tag=router:v2 "${reg[@]/url=*/url=$OURL}" >/dev/null 2>&1 ||
    fail "register v2 on a 512-token stand-in"
nlog=$(wc -l <standin.log)
if stage bake "${bake[@]/url=*/url=$OURL}" >ctx.out 2>&1; then
	cat ctx.out; fail "num_ctx 1024 accepted for a 512-token model"
fi
grep -q "num_ctx 1024 exceeds the model's trained context 512" ctx.out || { cat ctx.out; fail "context cap not explained"; }
tail -n +"$((nlog + 1))" standin.log | grep -q '"event": "chat"' && fail "cases ran before the context check"

# 5. G01: a server that cuts an over-long prompt and answers 200.
stop_standin
start_standin --cut-prompts
/usr/bin/python3 - "$BAKE_DATA/cases.jsonl" >long.jsonl <<'PY'
import json, sys
print(open(sys.argv[1]).readline(), end="")
print(json.dumps({"id": "long-1", "kind": "route", "user": " ".join(
    "open the folder named docs number %d" % i for i in range(400)),
    "expect": {"capability": "open_folder", "args": {"path": "docs"}}}))
PY
stage register gguf="$TEST_TMP/v2.gguf" tag=router:v2 "${reg[@]/url=*/url=$OURL}" >/dev/null 2>&1
cut=("${bake[@]/url=*/url=$OURL}")
cut=("${cut[@]/cases=*/cases=$TEST_TMP/long.jsonl}")
if stage bake "${cut[@]/passes=2/passes=1}" >cut.out 2>&1; then
	cat cut.out; fail "a silently cut prompt was scored"
fi
grep -q "case long-1.*the server cut it (G01)" cut.out || { tail -3 cut.out; fail "silent cut not detected"; }

# 6. Promote: the alias gets v2's manifest, read back.
stage register gguf="$TEST_TMP/v1.gguf" tag=router:v1 "${reg[@]/url=*/url=$OURL}" >/dev/null 2>&1
curl -s "$OURL/api/copy" -d '{"source":"router:v1","destination":"router:prod"}' >/dev/null
curl -s "$OURL/api/generate" -d '{"model":"router:prod","keep_alive":-1}' >/dev/null
/usr/bin/python3 - cand.json inc.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
# the incumbent: same case set, one held-out route worse
s["model"] = "router:v1"
cid = next(k for k, r in s["rows"].items() if r[0] & 2 and r[0] & 8 and not r[0] & 1)
s["rows"][cid][2] = 0
s["rows"] = s["rows"]
json.dump(s, open(sys.argv[2], "w"))
c = json.load(open(sys.argv[1]))
c["rows"][cid][2] = 3
json.dump(c, open(sys.argv[1], "w"))
PY
# Ten cases, four held out for both: min_fair_cases 4 lets the fair slice decide.
stage gate candidate="$TEST_TMP/cand.json" incumbent="$TEST_TMP/inc.json" promote=yes \
    alias=router:prod "url=$OURL" min_fair_cases=4 >gate.out 2>&1 || { cat gate.out; fail "gate promote"; }
ad=$(value gate.out gate.alias_digest)
tags=$(curl -s "$OURL/api/tags")
v2d=$(echo "$tags" | /usr/bin/python3 -c 'import json,sys; print([m["digest"] for m in json.load(sys.stdin)["models"] if m["name"]=="router:v2"][0])')
pd=$(echo "$tags" | /usr/bin/python3 -c 'import json,sys; print([m["digest"] for m in json.load(sys.stdin)["models"] if m["name"]=="router:prod"][0])')
[ -n "$ad" ] && [ "$ad" = "$v2d" ] && [ "$pd" = "$v2d" ] || fail "alias digest $ad / $pd is not v2's $v2d"
grep -q '"event": "unload", "model": "router:prod"' standin.log || fail "the alias was not unloaded before the copy"
echo "62-register-promote: ok"
