#!/bin/bash
# bake/spec-check.sh: `pipelinectl check` refuses bake and gate
# sections with every error named by file, line and key, the case file and
# capability list included (a typo in a case is found at submit, not after
# the training run); a good spec passes.
set -eu
: "${TOP:?}" "${TEST_TMP:?}"
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/bake.sh"
cd "$TEST_TMP"
printf '%s\n' '{"id":"a","kind":"route","user":"x","expect":{"capability":"search"}}' \
    '{"id":"b","kind":"route","channel":"ops","user":"y","expect":{"capability":"serch"}}' >typo.jsonl
cat >bad.ini <<INI
[bake]
backend = vllm
model = tiny
cases = $TEST_TMP/typo.jsonl
system = $TEST_TMP/missing-system.txt
capabilities = $BAKE_DATA/capabilities.txt
disabled = play_music, teleport
passes = 0
stats = none

[gate]
after = bake
incumbent = none
promote = yes
tie_pp = -1
INI
if "$PCTL" check bad.ini >bad.out 2>&1; then cat bad.out; fail "a bad spec passed"; fi
cat bad.out
for want in \
    'bad.ini:2: backend: must be ollama or openai' \
    'bad.ini:8: passes: 0 is out of range: must be between 1 and 32' \
    'bad.ini:5: system: .*missing-system.txt' \
    'bad.ini:7: disabled: teleport is not in' \
    'bad.ini:4: cases: .*typo.jsonl:2: case b: expect.capability: "serch"' \
    'bad.ini:15: tie_pp: -1 is out of range: must be between 0 and 100' \
    'bad.ini:11: alias: promote = yes needs an alias'; do
	grep -q -- "$want" bad.out || fail "no error matching: $want"
done
cat >good.ini <<INI
[bake]
backend = openai
model = tiny
cases = $BAKE_DATA/cases.jsonl
system = $BAKE_DATA/system.txt
capabilities = $BAKE_DATA/capabilities.txt
stats = $BAKE_DATA/stats.json

[bake-incumbent]
stage = bake
backend = openai
model = tiny
cases = $BAKE_DATA/cases.jsonl
system = $BAKE_DATA/system.txt
capabilities = $BAKE_DATA/capabilities.txt
stats = none

[gate]
after = bake, bake-incumbent
INI
"$PCTL" check good.ini >good.out 2>&1 || { cat good.out; fail "a good spec was refused"; }
echo "bake/spec-check: ok"
