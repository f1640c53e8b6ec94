#!/bin/bash
# Key bounds in the ABI (struct pl_key min and max, PL_KEY_MIN/PL_KEY_MAX):
# pipelinectl check and the daemon's submit refuse a value outside them as
# file:line: key, for the real stage plugins (bake, gate, merge, train,
# tensor_fix), and accept the values at the bounds.
. "$(dirname "$0")/../lib.sh"
P=$TEST_TMP/plugins
mkdir -p "$P"
for s in bake gate merge train tensor_fix exec; do cp "$TOP/plugins/$s.so" "$P/"; done
chmod 0755 "$P"/*.so
PL_PLUGIN_DIR=$P pl_conf
D=$TEST_TMP/d
mkdir -p "$D/base"
echo '{"id": "a", "kind": "route", "user": "x", "expect": {"capability": "search"}}' >"$D/cases.jsonl"
: >"$D/system.txt"; echo search >"$D/caps.txt"
echo '{"architectures": ["Gemma3ForCausalLM"]}' >"$D/base/config.json"
bad=$TEST_TMP/bounds.ini
cat >"$bad" <<INI
[bake]
model = m
cases = $D/cases.jsonl
system = $D/system.txt
capabilities = $D/caps.txt
passes = 33
concurrency = 0
num_ctx = 255

[gate]
after = bake
tie_pp = 100.5
min_fair_cases = 0

[merge]
stage = merge
after = gate
base = $D/base
adapter = $D/base
threads = -1

[tensor_fix]
after = merge
expect_kept = -2
INI
out=$(pctl check "$bad" 2>&1) && fail "out-of-range values passed check"
echo "$out"
want() { echo "$out" | grep -qF -- "$1" || fail "check lacks: $1"; }
want "bounds.ini:6: passes: 33 is out of range: must be between 1 and 32"
want "bounds.ini:7: concurrency: 0 is out of range: must be between 1 and 64"
want "bounds.ini:8: num_ctx: 255 is out of range: must be 256 or more"
want "bounds.ini:12: tie_pp: 100.5 is out of range: must be between 0 and 100"
want "bounds.ini:13: min_fair_cases: 0 is out of range: must be 1 or more"
want "bounds.ini:20: threads: -1 is out of range: must be 0 or more"
want "bounds.ini:24: expect_kept: -2 is out of range: must be 0 or more"
[ "$(echo "$out" | wc -l)" -eq 7 ] || fail "expected exactly 7 problems"
# The same through the daemon.
pl_start
out2=$(pctl submit "$bad" 2>&1) && fail "the daemon accepted out-of-range values"
echo "$out2" | grep -qF "bounds.ini:6: passes: 33 is out of range: must be between 1 and 32" ||
    fail "submit: $out2"
# At the bounds: accepted.
sed -i 's/^passes = 33/passes = 32/; s/^concurrency = 0/concurrency = 64/; s/^num_ctx = 255/num_ctx = 256/;
    s/^tie_pp = 100.5/tie_pp = 100/; s/^min_fair_cases = 0/min_fair_cases = 1/; s/^threads = -1/threads = 0/;
    s/^expect_kept = -2/expect_kept = 0/' "$bad"
pctl check "$bad" || fail "values at their bounds were refused"
pl_stop
echo ok
