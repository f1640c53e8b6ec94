#!/bin/bash
# A spec with errors is refused whole, every error listed as
# file:line: key: message, by pipelinectl check and by the daemon.
. "$(dirname "$0")/../lib.sh"
pl_conf
spec=$TEST_TMP/broken.ini
cat > "$spec" <<'INI'
[run]
name = broken
colour = blue

[a]
stage = exec
command = true
retries = lots
timeout = forever

[b]
stage = nosuchstage
after = a

[c]
stage = exec
after = zz
command = true
frob = 1

[d]
stage = exec
after = e
command = true
resources = gpu:9, tpu

[e]
stage = exec
after = d
command = true
env = NOEQUALS

[f]
stage = exec
INI
out=$(pctl check "$spec" 2>&1) && fail "check accepted a broken spec"
expect() { echo "$out" | grep -qF "$1" || fail "missing: $1
in:
$out"; }
expect "broken.ini:3: colour: unknown key in [run]"
expect "broken.ini:8: retries: must be an integer from 0 to 1000, not \"lots\""
expect "broken.ini:9: timeout: bad duration \"forever\""
expect "broken.ini:12: stage: unknown stage \"nosuchstage\" in [b]"
expect "broken.ini:17: after: names no job: \"zz\""
expect "broken.ini:19: frob: unknown key for stage exec (known: command, cwd, env)"
expect "broken.ini:25: resources: needs 9 of \"gpu\" but its capacity is 1"
expect "broken.ini:25: resources: unknown resource \"tpu\""
expect "broken.ini:31: env: \"NOEQUALS\" is not NAME=value"
expect "broken.ini:34: command: required by stage exec but not set"
expect "dependency cycle: d -> e -> d"
pctl --json check "$spec" | grep -q '"ok":false' || fail "check --json"
# A shell line without its "command =", and one past inih's 200 bytes:
# each is reported on its own line with its own text (the reader once
# glued the next line into the first and read past the end at the last).
long=$(printf 'y%.0s' $(seq 1 300))
printf '[a]\nstage = exec\necho a; echo b\ncommand = true\n%s\necho c; echo d' "$long" \
    > "$TEST_TMP/noeq.ini"
out=$(pctl check "$TEST_TMP/noeq.ini" 2>&1) && fail "check accepted lines without ="
syn="syntax error (expected [section] or key = value)"
expect "noeq.ini:3: -: $syn: echo a; echo b"
expect "noeq.ini:5: -: $syn: ${long:0:60}..."
expect "noeq.ini:6: -: $syn: echo c; echo d"
[ "$(echo "$out" | grep -cF "$syn")" = 3 ] || fail "not one error per line: $out"
echo "$out" | grep -q "unknown key" && fail "a line glued into a key: $out"
# The daemon refuses it whole with the same list; nothing is stored.
pl_start
out=$(pctl submit "$spec" 2>&1) && fail "the daemon accepted a broken spec"
expect "broken.ini:19: frob: unknown key for stage exec"
[ "$(db "SELECT count(*) FROM runs")" = 0 ] || fail "a refused spec left a run"
# A good spec is accepted; the same name twice is refused.
cat > "$TEST_TMP/fine.ini" <<'INI'
[only]
stage = exec
command = true
INI
pctl check "$TEST_TMP/fine.ini" | grep -q "OK (run fine, 1 jobs)" || fail "check of a good spec"
pctl submit "$TEST_TMP/fine.ini" >/dev/null || fail "submit"
out=$(pctl submit "$TEST_TMP/fine.ini" 2>&1) && fail "a duplicate run name was accepted"
echo "$out" | grep -q "a run named fine exists" || fail "duplicate: $out"
[ "$(pctl submit --name fine2 "$TEST_TMP/fine.ini")" = fine2 ] || fail "submit --name"
wait_run fine2 succeeded
pl_stop
echo ok
