#!/bin/bash
# Bad plugins are refused with one clear log line each, their partial
# registrations undone, and the daemon keeps serving.
. "$(dirname "$0")/../lib.sh"
P=$TEST_TMP/plugins; mkdir -p "$P"
cp "$TOP/plugins/exec.so" "$P/"
for b in bad_abi no_symbol init_fails host_abi; do cp "$TOP/tests/plugins/$b.so" "$P/"; done
cp "$TOP/tests/plugins/good_extra.so" "$P/writable.so"; chmod 0664 "$P/writable.so"
chmod 0755 "$P"/exec.so "$P"/bad_abi.so "$P"/no_symbol.so "$P"/init_fails.so "$P"/host_abi.so
PL_PLUGIN_DIR=$P pl_conf
pl_start
L=$TEST_TMP/pipelined.out
grep -q "bad_abi.so: refused: init failed: ABI version mismatch: stage struct of ABI 42" "$L" || fail "bad_abi not refused clearly"
grep -q "no_symbol.so: refused: no entry symbol pl_plugin_init" "$L" || fail "no_symbol not refused"
grep -q "init_fails.so: refused: init failed: input/output error" "$L" || fail "init_fails not refused"
grep -q "host_abi.so: refused: init failed: ABI version mismatch (host speaks ABI 1)" "$L" || fail "host_abi not refused"
grep -q "writable.so: refused: file is group- or world-writable (mode 0664)" "$L" || fail "writable not refused"
[ "$(grep -c "refused" "$L")" = 5 ] || fail "expected exactly 5 refusals"
grep -q "loaded 1 plugin (1 stage)" "$L" || fail "exec.so should be the only plugin loaded"
# The failed init's registration was undone: its stage is unknown.
cat > "$TEST_TMP/half.ini" <<INI
[x]
stage = half_registered
INI
out=$(pctl submit "$TEST_TMP/half.ini" 2>&1) && fail "a stage of a refused plugin was accepted"
echo "$out" | grep -q 'unknown stage "half_registered"' || fail "unexpected: $out"
# Still serving.
cat > "$TEST_TMP/ok.ini" <<INI
[x]
stage = exec
command = true
INI
pctl submit "$TEST_TMP/ok.ini" >/dev/null || fail "submit after bad plugins"
wait_run ok succeeded
# The same refusals by pipelinectl's own loader.
PIPELINED_CONF=$PL_CONF "$PIPELINECTL" stage --list 2>&1 | grep -q "^exec" || fail "stage --list"
pl_stop
echo ok
