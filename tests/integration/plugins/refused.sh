#!/bin/bash
# Bad plugins are refused with one clear log line each, naming the file
# and, for another ABI, the host's and the plugin's, their partial
# registrations undone, and the daemon keeps serving. A plugin of an older
# or a newer ABI (tests/plugins/old_abi.c, new_abi.c) is refused before
# its init runs; a stage struct larger than the host's (a newer header) is
# refused; a key default that is no value of its key is refused at
# registration (bad_default.c), as are a default that is none of its key's
# choices (bad_choice.c) and choices on a key that is not a string
# (choice_type.c). A plugin that hands host->spawn() a struct
# pl_spawn and struct pl_exit of the host's size works
# (tests/plugins/spawn_size.c), and one of another size, larger or the
# shortest an older host took, gets an error naming the plugin. Runs
# against the real daemon and shim.
. "$(dirname "$0")/../../lib.sh"
P=$TEST_TMP/plugins; mkdir -p "$P"
cp "$TOP/plugins/exec.so" "$P/"
for b in bad_abi no_symbol init_fails host_abi big_stage spawn_size old_abi new_abi bad_default bad_choice choice_type; do
	cp "$TOP/tests/plugins/$b.so" "$P/"
	chmod 0755 "$P/$b.so"
done
chmod 0755 "$P"/exec.so
cp "$TOP/tests/plugins/good_extra.so" "$P/writable.so"; chmod 0664 "$P/writable.so"
PL_PLUGIN_DIR=$P pl_conf
pl_start
L=$TEST_TMP/pipelined.out
refused() { grep -qF "$P/$1: refused: $2" "$L" || fail "$1 not refused clearly: $(grep -F "$1" "$L")"; }
refused bad_abi.so "init failed: ABI version mismatch: stage struct of ABI 44 (host: ABI 4)"
refused no_symbol.so "no entry symbol pl_plugin_init"
refused init_fails.so "init failed: input/output error"
refused host_abi.so "init failed: ABI version mismatch: plugin of an ABI it does not state (no pl_plugin_abi) refused the host (host: ABI 4)"
refused big_stage.so "init failed: ABI version mismatch: stage struct of ABI 4 size 88 (host: ABI 4 size 80): built for a newer host"
refused old_abi.so "ABI version mismatch: plugin of ABI 3 (host: ABI 4): built for an older host"
refused new_abi.so "ABI version mismatch: plugin of ABI 5 (host: ABI 4): built for a newer host"
refused bad_default.so 'init failed: invalid argument or spec value: stage "bad_default": key count: default bad value "many": expected an integer'
refused bad_choice.so 'init failed: invalid argument or spec value: stage "bad_choice": key mode: default "fast" is not auto, yes or no'
refused choice_type.so 'init failed: invalid argument or spec value: stage "choice_type": key level: choices on a key that is not a string, or empty'
refused writable.so "file is group- or world-writable (mode 0664)"
[ "$(grep -c "refused" "$L")" = 11 ] || fail "expected exactly 11 refusals"
grep -q "loaded 2 plugins (2 stages)" "$L" || fail "exec.so and spawn_size.so should be the only plugins loaded"
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
# Structs of the host's size: the child ran and its ending came back.
printf '[sized]\nstage = spawn_size\n' >"$TEST_TMP/sized.ini"
pctl submit "$TEST_TMP/sized.ini" >/dev/null || fail "submit spawn_size"
wait_run sized succeeded
# Sizes other than the host's: refused, naming the plugin (24: the
# shortest struct pl_spawn an older host took, through argv).
printf '[run]\nname = big\n[old]\nstage = spawn_size\nspawn_size = 4096\n' >"$TEST_TMP/big.ini"
printf '[run]\nname = short\n[old]\nstage = spawn_size\nspawn_size = 24\n' >"$TEST_TMP/short.ini"
printf '[run]\nname = small\n[old]\nstage = spawn_size\nexit_size = 4\n' >"$TEST_TMP/small.ini"
for r in big short small; do
	pctl submit "$TEST_TMP/$r.ini" >/dev/null || fail "submit spawn_size with a bad size ($r)"
done
wait_run big failed
wait_run short failed
wait_run small failed
pctl logs big old | grep -qF "spawn: $P/spawn_size.so: struct pl_spawn of ABI 4 size 4096 (host: ABI 4 size 72): built for a newer host" ||
    fail "a larger pl_spawn not refused naming the plugin: $(pctl logs big old)"
pctl logs short old | grep -qF "spawn: $P/spawn_size.so: struct pl_spawn of ABI 4 size 24 (host: ABI 4 size 72)" ||
    fail "a shorter pl_spawn not refused naming the plugin: $(pctl logs short old)"
pctl logs small old | grep -qF "spawn: $P/spawn_size.so: struct pl_exit of ABI 4 size 4 (host: ABI 4 size 288)" ||
    fail "a too small pl_exit not refused naming the plugin: $(pctl logs small old)"
# The same refusals by pipelinectl's own loader.
PIPELINED_CONF=$PL_CONF "$PIPELINECTL" stage --list 2>&1 | grep -q "^exec" || fail "stage --list"
pl_stop
echo ok
