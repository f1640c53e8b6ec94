#!/bin/bash
# Bad plugins are refused with one clear log line each, their partial
# registrations undone, and the daemon keeps serving. A stage struct
# larger than the host's (a newer header) is refused naming the plugin; a
# plugin that hands host->spawn() an older, shorter struct pl_spawn and
# struct pl_exit (tests/plugins/old_spawn.c) works, the host reading
# nothing past their sizes, and one of a size the host does not know gets
# an error naming the plugin. Runs against the real daemon and shim.
. "$(dirname "$0")/../../lib.sh"
P=$TEST_TMP/plugins; mkdir -p "$P"
cp "$TOP/plugins/exec.so" "$P/"
for b in bad_abi no_symbol init_fails host_abi big_stage old_spawn; do cp "$TOP/tests/plugins/$b.so" "$P/"; done
cp "$TOP/tests/plugins/good_extra.so" "$P/writable.so"; chmod 0664 "$P/writable.so"
chmod 0755 "$P"/exec.so "$P"/bad_abi.so "$P"/no_symbol.so "$P"/init_fails.so "$P"/host_abi.so \
    "$P"/big_stage.so "$P"/old_spawn.so
PL_PLUGIN_DIR=$P pl_conf
pl_start
L=$TEST_TMP/pipelined.out
grep -q "bad_abi.so: refused: init failed: ABI version mismatch: stage struct of ABI 42" "$L" || fail "bad_abi not refused clearly"
grep -q "no_symbol.so: refused: no entry symbol pl_plugin_init" "$L" || fail "no_symbol not refused"
grep -q "init_fails.so: refused: init failed: input/output error" "$L" || fail "init_fails not refused"
grep -q "host_abi.so: refused: init failed: ABI version mismatch (host speaks ABI 2)" "$L" || fail "host_abi not refused"
grep -q "big_stage.so: refused: init failed: ABI version mismatch: stage struct of ABI 2 size 72 (host: ABI 2 size 56 to 64): built for a newer host" "$L" ||
    fail "big_stage not refused clearly"
grep -q "writable.so: refused: file is group- or world-writable (mode 0664)" "$L" || fail "writable not refused"
[ "$(grep -c "refused" "$L")" = 6 ] || fail "expected exactly 6 refusals"
grep -q "loaded 2 plugins (2 stages)" "$L" || fail "exec.so and old_spawn.so should be the only plugins loaded"
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
# The shorter structs: the child ran in the job's directory, without the
# environment entry and the timeout past the struct's end, and nothing
# past struct pl_exit's size was written.
printf '[old]\nstage = old_spawn\n' >"$TEST_TMP/old.ini"
pctl submit "$TEST_TMP/old.ini" >/dev/null || fail "submit old_spawn"
wait_run old succeeded
# Sizes the host does not know: refused, naming the plugin.
printf '[run]\nname = big\n[old]\nstage = old_spawn\nspawn_size = 4096\n' >"$TEST_TMP/big.ini"
printf '[run]\nname = small\n[old]\nstage = old_spawn\nexit_size = 4\n' >"$TEST_TMP/small.ini"
pctl submit "$TEST_TMP/big.ini" >/dev/null && pctl submit "$TEST_TMP/small.ini" >/dev/null ||
    fail "submit old_spawn with bad sizes"
wait_run big failed
wait_run small failed
pctl logs big old | grep -qF "spawn: $P/old_spawn.so: struct pl_spawn of ABI 2 size 4096 (host: ABI 2 size 24 to 72): built for a newer host" ||
    fail "a larger pl_spawn not refused naming the plugin: $(pctl logs big old)"
pctl logs small old | grep -qF "spawn: $P/old_spawn.so: struct pl_exit of ABI 2 size 4 (host: ABI 2 size 24 to 288)" ||
    fail "a too small pl_exit not refused naming the plugin: $(pctl logs small old)"
# The same refusals by pipelinectl's own loader.
PIPELINED_CONF=$PL_CONF "$PIPELINECTL" stage --list 2>&1 | grep -q "^exec" || fail "stage --list"
pl_stop
echo ok
