#!/bin/bash
# watch on a terminal redraws correctly at any width of 60 columns and more:
# under tmux at 60 and at 160 columns, `pipelinectl watch` of
# tests/fixtures/cli/wide.ini (a long job name, progress in a unit of its
# own with a loss, so lines longer than 60 columns while it runs, a job that
# fails) leaves exactly the screen of tests/golden/watch-60.txt and
# watch-160.txt: no line wrapped, no line of an earlier draw left behind,
# the failed job's message and the logs command to run, exit status 6;
# the states coloured, and not with NO_COLOR.
# tmux's capture-pane reads the screen as the terminal shows it. Runs
# against the real daemon and CLI of this tree and Debian's tmux.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/tmux.sh"
cd "$TEST_TMP"
pl_start
trap tmux_kill EXIT
pctl submit "$TOP/tests/fixtures/cli/wide.ini" >/dev/null || fail "submit wide"
# Both watch from the run's first event, while it runs: every progress
# event redraws.
for w in 60 160; do
	tmux_watch "w$w" "$w" watch wide
done
for w in 60 160; do
	tmux_until "w$w" "screen-$w.txt" '^rc=' 300
	# The screen without its blank lines at the bottom.
	sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' "screen-$w.txt" >"got-$w.txt"
	diff -u "$TOP/tests/golden/watch-$w.txt" "got-$w.txt" ||
	    fail "watch at $w columns left another screen than tests/golden/watch-$w.txt"
	awk -v w="$w" 'length($0) > w - 1 { exit 1 }' "got-$w.txt" || fail "a line as wide as the terminal at $w columns"
	# The states in colour on the terminal: green succeeded, red failed.
	$TMUX_CMD capture-pane -e -p -t "w$w" >"colour-$w.txt"
	grep -q $'\033\[32msucceeded' "colour-$w.txt" || fail "no green succeeded at $w columns: $(cat -v "colour-$w.txt")"
	grep -q $'\033\[1;31mfailed\|\033\[1m\033\[31mfailed\|\033\[31m\033\[1mfailed' "colour-$w.txt" ||
	    fail "no red failed at $w columns: $(cat -v "colour-$w.txt")"
done
# status speaks the stage's own unit as watch does (the store kept it).
pctl status wide | grep -Eq '^train +exec +succeeded +1 +[0-9]+s +6/6 optimizer-steps' ||
    fail "status does not show the job's own unit: $(pctl status wide)"
# NO_COLOR: the same screen, no colour.
TMUX_ENV=NO_COLOR=1 tmux_watch nc 100 watch wide
tmux_until nc nc.txt '^rc=' 100
$TMUX_CMD capture-pane -e -p -t nc >nc.txt
grep -q '^rc=6' nc.txt || fail "watch with NO_COLOR: $(cat -v nc.txt)"
grep -q $'\033\[3[0-9]m' nc.txt && fail "colour despite NO_COLOR: $(cat -v nc.txt)"
pl_stop
echo ok
