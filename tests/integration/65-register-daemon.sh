#!/bin/bash
# 65-register-daemon.sh: register as a daemon job, against the Ollama
# stand-in: without previous_tag, the weights the previous run ([run]
# previous) registered are what the new tag must differ from, read from the
# store. The same GGUF again is refused; a new one is registered.
. "$(dirname "$0")/../lib.sh"
. "$TOP/tests/integration/data/bake/lib.sh"
STANDIN_PID=
trap '[ -n "$STANDIN_PID" ] && kill "$STANDIN_PID" 2>/dev/null; pl_stop' EXIT
cd "$TEST_TMP"
tiny_gguf "$TEST_TMP/a.gguf" 1234
tiny_gguf "$TEST_TMP/b.gguf" 4321
python3 "$TOP/tests/standins/ollama_standin.py" --port-file "$TEST_TMP/port" \
    --blobs-dir "$TEST_TMP/blobs" --log "$TEST_TMP/standin.log" >standin.out 2>&1 &
STANDIN_PID=$!
for _ in $(seq 1 100); do [ -s port ] && break; sleep 0.05; done
OURL=http://127.0.0.1:$(cat port)
pl_start

spec() {	# spec RUN PREVIOUS GGUF TAG
	cat <<INI
[run]
name = $1
${2:+previous = $2}

[register]
gguf = $3
tag = $4
modelfile = $TOP/etc/Modelfile.tmpl
num_ctx = 1024
url = $OURL
INI
}
spec r1 "" "$TEST_TMP/a.gguf" router:r1 >r1.ini
pctl submit r1.ini >/dev/null || fail "submit r1"
wait_run r1 succeeded 60
w1=$(pctl --json values r1 register | /usr/bin/python3 -c '
import json, sys
print([v["value"] for v in json.load(sys.stdin)["values"] if v["key"] == "register.weights"][0])')
[ "$w1" = "$(sha256sum a.gguf | cut -d" " -f1)" ] || fail "r1 stored weights $w1"

spec r2 r1 "$TEST_TMP/a.gguf" router:r2 >r2.ini
pctl submit r2.ini >/dev/null || fail "submit r2"
wait_run r2 failed 60
pctl logs r2 register >r2.log 2>&1
grep -q "the previous version's (previous run)" r2.log || { cat r2.log; fail "r2 not refused for r1's weights"; }

spec r3 r1 "$TEST_TMP/b.gguf" router:r3 >r3.ini
pctl submit r3.ini >/dev/null || fail "submit r3"
wait_run r3 succeeded 60
echo "65-register-daemon: ok"
