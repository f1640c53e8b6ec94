#!/bin/bash
# 66-register-bake-standin.sh: what only the Ollama STAND-IN
# (tests/standins/ollama_standin.py, not Ollama; its /api/chat forwards to
# a real llama-server serving the tiny fixture GGUF) can show to register
# and bake; the rest runs against the real Ollama in 62-register-promote.sh
# and 62-register-template.sh (which template the server applies):
#   - G22: another model loaded beside ours, and our model only partly in
#     VRAM (size_vram < size): the speed is not comparable (a CPU server has
#     no VRAM at all);
#   - G01 the way some releases do it: a server that cuts an over-long
#     prompt and answers 200 (the pinned release refuses it with HTTP 400).
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
stop_standin() { [ -z "$STANDIN_PID" ] || { kill "$STANDIN_PID"; wait "$STANDIN_PID" 2>/dev/null || true; }; STANDIN_PID=; }
value() {	# value FILE KEY
	/usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("job.value "):
        v = json.loads(line[len("job.value "):])
        if v["key"] == sys.argv[2]:
            print(v["value"])' "$1" "$2" | tail -n 1
}

# url= is replaced by each stand-in's own below.
OURL=http://127.0.0.1:0
reg=(modelfile="$TOP/etc/Modelfile.tmpl" "url=$OURL" num_ctx=1024 tokens=none)
bake=(backend=ollama "url=$OURL" model=router:v2 "cases=$BAKE_DATA/cases.jsonl"
    "system=$BAKE_DATA/system.txt" "capabilities=$BAKE_DATA/capabilities.txt"
    "stats=$BAKE_DATA/stats.json" num_ctx=1024 max_tokens=64 passes=2)

# 2. G22: another model loaded beside ours makes the speed not comparable;
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

# 2'. G22: our model itself only partly in VRAM (size_vram < size): the
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

# 3. G01: a server that cuts an over-long prompt and answers 200.
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

echo "66-register-bake-standin: ok"
