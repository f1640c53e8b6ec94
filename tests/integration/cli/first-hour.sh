#!/bin/bash
# An operator's first hour, on terminals of 80 and 120 columns under tmux,
# with the installed programs only:
#  - make install PREFIX= DESTDIR= of the built tree (no rebuild), the
#    installed configuration given state, sockets and log under the test's
#    directory, the installed daemon started from it; it runs the
#    installed hello example;
#  - a run of exec jobs (one earlier run of the same jobs gives the
#    history) watched at 80 and 120 columns: the screens of
#    tests/golden/first-hour-80.txt and first-hour-120.txt, the figures
#    that change from run to run written <T> and <HH:MM> and the running
#    job's bar (its share of the time day-1 took) emptied: every job with
#    its state and bar, why the last one waits, the run's time left and
#    expected end, no line wrapped;
#  - the run cancelled from another pane: each watch says cancelled and
#    exits 7 (pipelinectl(1) EXIT STATUS);
#  - pipelinectl retry, watched again at both widths: watch follows the
#    retried run to its success and exits 0, past the old cancel;
#  - max_jobs changed in the installed configuration and SIGHUP: the log
#    says the reload is in force;
#  - a reboot's stand-in: the daemon killed -9 while a job sleeps, started
#    again from the installed binary re-enters the job in its attempt;
#    watch shows the run resumed to its end, exit 0.
# Runs against the installed daemon and CLI of this tree and Debian's tmux.
# run.sh: alone (kill -9 of the daemon mid-run, and a time left read while the history still covers it).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/tmux.sh"
cd "$TEST_TMP"
I=$TEST_TMP/prefix
# On any exit the gated jobs end too.
trap 'touch "$TEST_TMP/g1" "$TEST_TMP/g2" "$TEST_TMP/g3"; tmux_kill; pl_kill9' EXIT

# ---- install, configure, start ---------------------------------------------
built=$(stat -c %Y "$TOP/daemon/pipelined" "$TOP/daemon/pipelinectl" "$TOP/plugins/exec.so")
make -s -C "$TOP" install PREFIX="$I" SYSCONFDIR="$I/etc" DESTDIR= >/dev/null || fail "make install"
[ "$(stat -c %Y "$TOP/daemon/pipelined" "$TOP/daemon/pipelinectl" "$TOP/plugins/exec.so")" = "$built" ] ||
    fail "make install rebuilt the programs"
PIPELINED=$I/sbin/pipelined
PIPELINECTL=$I/bin/pipelinectl
PL_CONF=$I/etc/pipelined.conf
mkdir -p "$TEST_TMP/state" "$TEST_TMP/run"
sed -i -e "s|^state_dir = .*|state_dir = $TEST_TMP/state|" \
    -e "s|^control_socket = .*|control_socket = $TEST_TMP/run/control.sock|" \
    -e "s|^feed_socket = .*|feed_socket = $TEST_TMP/run/feed.sock|" \
    -e "/^\[resources\]/i log_file = $TEST_TMP/pipelined.log\nmax_jobs = 4" "$PL_CONF"
"$PIPELINED" -n -f "$PL_CONF" >/dev/null || fail "the installed configuration does not check"
pl_start
grep -q "from $I/lib/pipelined/plugins" "$TEST_TMP/pipelined.out" ||
    fail "the daemon did not load the installed plugins: $(cat "$TEST_TMP/pipelined.out")"
pctl submit "$I/share/pipelined/examples/hello.ini" >/dev/null || fail "submit the installed hello example"
wait_run hello succeeded 30

# spec NAME GATE: fetch, train (6 s, then until GATE is there), publish.
spec() {
	{
		printf '[run]\nname = %s\n' "$1"
		printf '[fetch]\nstage = exec\ncommand = sleep 1\n'
		printf '[train]\nstage = exec\nafter = fetch\n'
		printf 'command = sleep 6; while [ ! -e %s ]; do sleep 0.1; done\n' "$2"
		printf '[publish]\nstage = exec\nafter = train\ncommand = true\n'
	} >"$1.ini"
}
# watch_running S RUN: RUN watched at 80 and 120 columns in sessions S80 and
# S120, until both show train running, after fetch succeeded, and watch on.
watch_running() {
	local w
	for w in 80 120; do
		tmux_watch "$1$w" "$w" watch "$2"
	done
	for w in 80 120; do
		tmux_until "$1$w" "$1-$w.txt" '^train +running' 100 ||
		    fail "watch of $2 at $w columns never showed train running: $(cat "$1-$w.txt")"
		grep -q '^rc=' "$1-$w.txt" && fail "watch of $2 at $w columns ended while train runs: $(cat "$1-$w.txt")"
		grep -q "^run $2: running" "$1-$w.txt" || fail "watch of $2 at $w columns: $(cat "$1-$w.txt")"
		grep -Eq '^fetch +succeeded' "$1-$w.txt" || fail "watch of $2 at $w columns: $(cat "$1-$w.txt")"
	done
}
# watched_to_end S RUN: both watches of watch_running followed RUN to its
# success and exited 0.
watched_to_end() {
	local w j
	for w in 80 120; do
		tmux_until "$1$w" "$1-$w.txt" '^rc=' 200 || fail "watch of $2 at $w columns did not end: $(cat "$1-$w.txt")"
		grep -q '^rc=0$' "$1-$w.txt" || fail "watch of $2 at $w columns: $(cat "$1-$w.txt")"
		grep -q "^run $2: succeeded" "$1-$w.txt" || fail "watch of $2 at $w columns: $(cat "$1-$w.txt")"
		for j in fetch train publish; do
			grep -Eq "^$j +succeeded" "$1-$w.txt" || fail "$j of $2 not succeeded at $w columns: $(cat "$1-$w.txt")"
		done
	done
}
touch g1
spec day-1 "$TEST_TMP/g1"
pctl submit day-1.ini >/dev/null || fail "submit day-1"
wait_run day-1 succeeded 30

# ---- a run watched at 80 and 120 columns ------------------------------------
spec day-2 "$TEST_TMP/g2"
pctl submit day-2.ini >/dev/null || fail "submit day-2"
# While train sleeps its first 6 s, as long as it took in day-1: the
# history still covers it.
watch_running w day-2
for w in 80 120; do
	# The reasons to wait asked for (every two seconds while a job waits).
	tmux_until "w$w" "w-$w.txt" '^publish .* waits for job train$' 50 ||
	    fail "watch at $w columns does not say why publish waits: $(cat "w-$w.txt")"
	tmux_until "w$w" "w-$w.txt" '^run day-2: running, [0-9hms]+ left' 30 ||
	    fail "watch at $w columns shows no time left: $(cat "w-$w.txt")"
	# The running job's bar is its share of the time day-1 took: emptied.
	tmux_norm "w-$w.txt" -e '/^[a-z-]+ +running +\[/{s/#/./g;s/>/./;}' >"got-$w.txt"
	diff -u "$TOP/tests/golden/first-hour-$w.txt" "got-$w.txt" ||
	    fail "watch at $w columns left another screen than tests/golden/first-hour-$w.txt: $(cat "w-$w.txt")"
	awk -v w="$w" 'length($0) > w - 1 { exit 1 }' "w-$w.txt" || fail "a line as wide as the terminal at $w columns"
	grep -Eq '^run day-2: running, [0-9hms]+ left, ends about [0-9]{2}:[0-9]{2}$' "w-$w.txt" ||
	    fail "the run line lost its time left at $w columns: $(cat "w-$w.txt")"
done

# ---- cancelled from another pane --------------------------------------------
tmux_watch ctl 80 cancel day-2
tmux_until ctl ctl.txt '^rc=' 100 || fail "pipelinectl cancel did not end: $(cat ctl.txt)"
grep -q '^rc=0' ctl.txt || fail "pipelinectl cancel: $(cat ctl.txt)"
for w in 80 120; do
	tmux_until "w$w" "w-$w.txt" '^rc=' 100 || fail "watch at $w columns did not end at the cancel: $(cat "w-$w.txt")"
	grep -q '^rc=7$' "w-$w.txt" || fail "watch of a cancelled run at $w columns: $(cat "w-$w.txt")"
	grep -q '^run day-2: cancelled' "w-$w.txt" || fail "watch at $w columns does not say cancelled: $(cat "w-$w.txt")"
	grep -Eq '^train +cancelled' "w-$w.txt" || fail "watch at $w columns: train not cancelled: $(cat "w-$w.txt")"
done

# ---- retried and watched again -----------------------------------------------
pctl retry day-2 >/dev/null || fail "retry day-2"
watch_running r day-2
touch g2
watched_to_end r day-2

# ---- reload ------------------------------------------------------------------
# The daemon runs with -d, as the installed unit runs it: its log is its
# standard error, pipelined.out.
L=$TEST_TMP/pipelined.out
n=$(grep -c "reload: configuration" "$L")
sed -i 's/^max_jobs = 4$/max_jobs = 2/' "$PL_CONF"
grep -qx "max_jobs = 2" "$PL_CONF" || fail "max_jobs not changed in $PL_CONF"
kill -HUP "$PL_PID"
for _ in $(seq 100); do
	[ "$(grep -c "reload: configuration" "$L")" -gt "$n" ] && break
	sleep 0.1
done
grep "reload: configuration" "$L" | tail -1 |
    grep -q "reload: configuration $PL_CONF loaded: every value is in force" ||
    fail "the log does not say the reload is in force: $(grep reload: "$L")"

# ---- a reboot's stand-in: kill -9 while a job sleeps ------------------------
spec day-3 "$TEST_TMP/g3"
pctl submit day-3.ini >/dev/null || fail "submit day-3"
for _ in $(seq 100); do [ "$(job_state day-3 train)" = running ] && break; sleep 0.1; done
[ "$(job_state day-3 train)" = running ] || fail "train of day-3 does not run: $(pctl status day-3)"
pl_kill9
pl_start
watch_running k day-3
# The job was taken up where it was, in its first attempt.
grep -q "run day-3: re-entering job train (attempt 1)" "$TEST_TMP/pipelined.out" ||
    fail "the restarted daemon did not re-enter train: $(grep day-3 "$TEST_TMP/pipelined.out")"
touch g3
watched_to_end k day-3
pl_stop
echo ok
