#!/bin/bash
# ollama/sweep-promote.sh: a sweep's gate promotes the winning variant's
# tag, against the REAL Ollama (tests/lib.sh: ollama_start) and a real
# daemon. Two variants of a training stand-in (exec: each gives a GGUF
# of its own, the tiny fixture with two seeds) each register their own
# tag (router:sw-1, router:sw-2, from [register]'s tag = router:sw) and
# bake it through Ollama on route cases (no guard: a first release that
# passes); the gate names the tag to promote as the spec's register does
# (tag = router:sw), which the sweep turns into the winner's: the alias
# ends up on the winning variant's registered tag, whose manifest it
# has, and not on the unswept name. A gate's tag that no variant
# registers is refused at its line.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/bake.sh"
trap 'pl_stop; ollama_stop' EXIT
cd "$TEST_TMP"
tiny_gguf "$TEST_TMP/a.gguf" 1234
tiny_gguf "$TEST_TMP/b.gguf" 4321
grep '"kind":"route"' "$BAKE_DATA/cases.jsonl" >routes.jsonl
ollama_start
ollama_modelfile "$TOP/etc/Modelfile.tmpl" "$TEST_TMP/Modelfile.tmpl"
pl_start
# spec NAME GATE_TAG
spec() {
	cat <<INI
[run]
name = $1

[train]
stage = exec
env = G=a
sweep = env: G=a G=b
command = cp $TEST_TMP/\$G.gguf model.gguf && echo '{"type":"artifact","name":"gguf","path":"model.gguf"}' >>\$PL_EVENTS

[register]
after = train
gguf = train.gguf
tag = router:sw
modelfile = $TEST_TMP/Modelfile.tmpl
num_ctx = 1024
url = $OURL
tokens = none

[bake]
after = register
url = $OURL
model = router:sw
cases = $TEST_TMP/routes.jsonl
system = $BAKE_DATA/system.txt
capabilities = $BAKE_DATA/capabilities.txt
stats = $BAKE_DATA/stats.json
num_ctx = 1024
max_tokens = 64
passes = 1

[gate]
after = bake
incumbent = none
promote = yes
alias = router:latest
tag = $2
url = $OURL
INI
}
spec sw router:sw >sw.ini
pctl check sw.ini >check.txt || { cat check.txt; fail "check sw"; }
pctl submit sw.ini >/dev/null || fail "submit sw"
st=$(wait_end sw 300)
pctl status sw
[ "$st" = succeeded ] || { pctl logs sw gate; fail "sw ended $st"; }
for v in 1 2; do
	curl -sf "$OURL/api/tags" | grep -q "\"name\":\"router:sw-$v\"" || fail "router:sw-$v not registered"
done
pctl --json report sw >report.json || fail "report --json"
win=$(/usr/bin/python3 - report.json <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))["verdicts"][0]
lb = v["sweep"]["leaderboard"]
assert v["pass"] and lb[0]["verdict"] == "promote" and v["alias"] == "router:latest", v
print(lb[0]["bake"].split("/bake-")[1])
PY
) || fail "no promoting verdict"
tag_digest() {	# tag_digest TAG: the manifest digest /api/tags lists
	curl -s "$OURL/api/tags" | /usr/bin/python3 -c '
import json, sys
print(([m["digest"] for m in json.load(sys.stdin)["models"] if m["name"] == sys.argv[1]] + [""])[0])' "$1"
}
note "the winner is variant $win"
pctl logs sw gate | grep -q "promoted router:sw-$win to router:latest" ||
    { pctl logs sw gate; fail "the gate did not promote the winner's tag router:sw-$win"; }
[ -n "$(tag_digest router:latest)" ] && [ "$(tag_digest router:latest)" = "$(tag_digest "router:sw-$win")" ] ||
    fail "router:latest is $(tag_digest router:latest), not router:sw-$win's $(tag_digest "router:sw-$win")"
[ "$(tag_digest "router:sw-1")" != "$(tag_digest "router:sw-2")" ] || fail "the variants' tags are the same model"
[ -z "$(tag_digest router:sw)" ] || fail "the unswept tag router:sw exists"

# A gate's tag that no variant registers cannot follow the winner.
spec sw2 router:other >sw2.ini
for how in local daemon; do
	if [ $how = local ]; then out=$("$PIPELINECTL" -f /dev/null check sw2.ini 2>&1)
	else out=$(pctl submit sw2.ini 2>&1); fi && fail "sw2: accepted ($how)"
	echo "$out" | grep -qF "sw2.ini:36: tag: router:other is no tag a variant of the sweep in [train] registers" ||
	    fail "sw2 ($how): $out"
done
echo "ollama/sweep-promote: ok"
