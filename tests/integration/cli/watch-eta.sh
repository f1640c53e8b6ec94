#!/bin/bash
# watch keeps the time left in sight at 80 columns: under tmux at 80 and
# at 120 columns, `pipelinectl watch` of a release-like run while its
# train job is at step 3 of 6 (progress in optimizer-steps with a loss,
# then held until the test lets it go) leaves the screens of
# tests/golden/watch-eta-80.txt and watch-eta-120.txt, the figures that
# change from run to run (durations, rates, the clock) written <T>, <R>
# and <HH:MM>: the train line keeps its time left and the run line its
# time left and expected end, the other fields shortened first (the
# units, the rate, the count of jobs without an estimate); no line
# wraps. An earlier run of the same jobs but the last gives the history.
# Runs against the real daemon and CLI of this tree and Debian's tmux.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/tmux.sh"
cd "$TEST_TMP"
pl_start
trap tmux_kill EXIT
# spec NAME GATE [LAST]: tokenize-corpus, train (steps 1-3, GATE, 4-6),
# export-gguf and, with LAST, publish.
spec() {
	local step='echo "{\"type\":\"progress\",\"step\":$i,\"total\":6,\"unit\":\"optimizer-steps\"}" >>"$PL_EVENTS"; echo "{\"type\":\"metric\",\"name\":\"loss\",\"step\":$i,\"value\":3.672}" >>"$PL_EVENTS"'
	{
		printf '[run]\nname = %s\n' "$1"
		printf '[tokenize-corpus]\nstage = exec\ncommand = true\n'
		printf '[train]\nstage = exec\nafter = tokenize-corpus\n'
		printf 'command = for i in 1 2 3; do %s; sleep 0.4; done; while [ ! -e %s ]; do sleep 0.1; done; for i in 4 5 6; do %s; done\n' \
		    "$step" "$2" "$step"
		printf '[export-gguf]\nstage = exec\nafter = train\ncommand = true\n'
		[ -n "${3:-}" ] && printf '[publish]\nstage = exec\nafter = export-gguf\ncommand = true\n'
	} >"$1.ini"
}
touch open
spec release-v17 "$TEST_TMP/open"
pctl submit release-v17.ini >/dev/null || fail "submit release-v17"
wait_run release-v17 succeeded 30
spec release-v18-candidate "$TEST_TMP/go" last
pctl submit release-v18-candidate.ini >/dev/null || fail "submit release-v18-candidate"
for w in 80 120; do
	tmux_watch "w$w" "$w" watch release-v18-candidate
done
for w in 80 120; do
	# At step 3, and the reasons to wait asked for (the feed quiet).
	tmux_until "w$w" "screen-$w.txt" ' 3/6' 100
	tmux_until "w$w" "screen-$w.txt" 'waits for job export-gguf' 100
	sleep 1.2 # a redraw by the clock: the screen holds still
	tmux_until "w$w" "screen-$w.txt" . 1
	tmux_norm "screen-$w.txt" >"got-$w.txt"
	diff -u "$TOP/tests/golden/watch-eta-$w.txt" "got-$w.txt" ||
	    fail "watch at $w columns left another screen than tests/golden/watch-eta-$w.txt: $(cat "screen-$w.txt")"
	awk -v w="$w" 'length($0) > w - 1 { exit 1 }' "screen-$w.txt" || fail "a line as wide as the terminal at $w columns"
	grep -Eq '^train .* [0-9hms]+ left$' "screen-$w.txt" || fail "the train line lost its time left at $w columns"
	grep -Eq '^run release-v18-candidate: running, .*[0-9hms]+ left, ends about [0-9]{2}:[0-9]{2}' "screen-$w.txt" ||
	    fail "the run line lost its time left at $w columns"
done
touch go
wait_run release-v18-candidate succeeded 30
for w in 80 120; do
	tmux_until "w$w" "screen-$w.txt" '^rc='
	grep -q '^rc=0' "screen-$w.txt" || fail "watch at $w columns: $(cat "screen-$w.txt")"
done
pl_stop
echo ok
