#!/bin/bash
# e2e/demo-state.sh: tests/tools/demo.sh (`make demo`) removes its state
# directory when the demo succeeds, keeps it when the demo fails or when
# DEMO_KEEP=1, and says which in its last line. The demo is run for real
# with DEMO_SPEC (a private daemon, a spec of exec jobs: no Ollama, no ML
# environment), its directory under TMPDIR, here the test's own.
. "$(dirname "$0")/../../lib.sh"
export TMPDIR=$TEST_TMP/tmp
mkdir -p "$TMPDIR"
printf '[run]\nname = ok\n[a]\nstage = exec\ncommand = true\n' >"$TEST_TMP/ok.ini"
printf '[run]\nname = bad\n[a]\nstage = exec\ncommand = false\n' >"$TEST_TMP/bad.ini"
dirs() { find "$TMPDIR" -mindepth 1 -maxdepth 1 -name 'pipelined-demo.*'; }
# demo SPEC [VAR=VALUE...]: run it; rc, its output in out, its last line in last.
demo() {
	local spec=$1
	shift
	env "$@" DEMO_SPEC="$spec" "$TOP/tests/tools/demo.sh" >"$TEST_TMP/demo.out" 2>&1
	rc=$?
	last=$(tail -n 1 "$TEST_TMP/demo.out")
	echo "-- $spec $*: exit $rc; $last"
}

# Succeeds: removed, and said so.
demo "$TEST_TMP/ok.ini"
[ "$rc" = 0 ] || { cat "$TEST_TMP/demo.out"; fail "the demo of ok.ini failed"; }
grep -q "== run ok succeeded" "$TEST_TMP/demo.out" || fail "the demo did not run ok: $(cat "$TEST_TMP/demo.out")"
[ -z "$(dirs)" ] || fail "a successful demo left $(dirs)"
[[ $last == "== the demo's state directory $TMPDIR/pipelined-demo."*" was removed (DEMO_KEEP=1 keeps it)" ]] ||
    fail "the last line of a successful demo: $last"

# kept WHAT LINE: the one demo directory is there with its store, and the
# last line is LINE with @D@ for that directory and * for its size; then it
# is removed.
kept() {
	local d want
	d=$(dirs)
	[ -n "$d" ] && [ -e "$d/state/pipelined.db" ] || fail "$1 did not keep its state: '$d'"
	want=${2//@D@/$d}
	# shellcheck disable=SC2053
	[[ $last == $want ]] || fail "the last line of $1: $last"
	rm -rf "$d"
}
# DEMO_KEEP=1: kept, and its place said.
demo "$TEST_TMP/ok.ini" DEMO_KEEP=1
[ "$rc" = 0 ] || fail "the demo of ok.ini with DEMO_KEEP=1 failed"
kept "DEMO_KEEP=1" "== DEMO_KEEP=1: the demo's state and logs are kept in @D@ (*)"
# Fails: kept, with the exit status and the place.
demo "$TEST_TMP/bad.ini"
[ "$rc" = 1 ] || fail "the demo of a failing spec exited $rc"
kept "a failed demo" "== the demo failed (exit 1): its state and logs are kept in @D@ (*); remove it with rm -rf @D@"
# No daemon of the demos is left.
pgrep -f "$TMPDIR/pipelined-demo" && fail "a demo's daemon is still running"
echo ok
