#!/bin/bash
# 65-register-daemon.sh: register as a daemon job, against the REAL Ollama
# (tests/lib.sh: ollama_start): without previous_tag, the weights the previous run ([run]
# previous) registered are what the new tag must differ from, read from the
# store. The same GGUF again is refused; a new one is registered. (The
# train/serve template check is in 62-register-promote.sh and 70-e2e.sh.)
. "$(dirname "$0")/../lib.sh"
. "$TOP/tests/integration/data/bake/lib.sh"
trap 'pl_stop; ollama_stop' EXIT
cd "$TEST_TMP"
tiny_gguf "$TEST_TMP/a.gguf" 1234
tiny_gguf "$TEST_TMP/b.gguf" 4321
ollama_start
ollama_modelfile "$TOP/etc/Modelfile.tmpl" "$TEST_TMP/Modelfile.tmpl"
pl_start

spec() {	# spec RUN PREVIOUS GGUF TAG
	cat <<INI
[run]
name = $1
${2:+previous = $2}

[register]
gguf = $3
tag = $4
modelfile = $TEST_TMP/Modelfile.tmpl
num_ctx = 1024
url = $OURL
# No training in these runs: nothing to check the template against.
tokens = none
INI
}
spec r1 "" "$TEST_TMP/a.gguf" router:r1 >r1.ini
pctl submit r1.ini >/dev/null || fail "submit r1"
wait_run r1 succeeded 60
w1=$(pctl --json values r1 register | /usr/bin/python3 -c '
import json, sys
print([v["value"] for v in json.load(sys.stdin)["values"] if v["key"] == "register.weights"][0])')
# The cgo engine (0.24) stores the GGUF as uploaded; 0.30 and later may
# rewrite it, so the weights are a blob of the server's.
case $("$TOP/tests/tools/ollama.sh" --version) in
0.24.*) [ "$w1" = "$(sha256sum a.gguf | cut -d" " -f1)" ] || fail "r1 stored weights $w1" ;;
*) [ -f "$TEST_TMP/ollama/models/blobs/sha256-$w1" ] || fail "r1 stored weights $w1, no blob of the server" ;;
esac

spec r2 r1 "$TEST_TMP/a.gguf" router:r2 >r2.ini
pctl submit r2.ini >/dev/null || fail "submit r2"
wait_run r2 failed 60
pctl logs r2 register >r2.log 2>&1
grep -q "the previous version's (previous run)" r2.log || { cat r2.log; fail "r2 not refused for r1's weights"; }

spec r3 r1 "$TEST_TMP/b.gguf" router:r3 >r3.ini
pctl submit r3.ini >/dev/null || fail "submit r3"
wait_run r3 succeeded 60
curl -s "$OURL/api/tags" | grep -q '"name":"router:r3"' || fail "router:r3 is not on the server"
echo "65-register-daemon: ok"
