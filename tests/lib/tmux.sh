# tests/lib/tmux.sh: pipelinectl on a terminal, for the tests of
# tests/integration/cli that read its screens (watch-tmux, watch-eta,
# watch-retry, watch-daemon, pending-reason, first-hour), through a tmux
# server of the test's own (Debian's tmux; its capture-pane reads the
# screen as the terminal shows it). Sourced after tests/lib.sh; the
# caller's trap on EXIT calls tmux_kill.
#   tmux_watch NAME COLS ARGS...   pipelinectl ARGS (with the test's
#                                  configuration) in session NAME, COLS
#                                  wide and 24 high, TERM=screen; "rc=N"
#                                  follows on the screen when it exits
#   tmux_until NAME FILE PATTERN [TENTHS]
#                                  the screen into FILE until a line of it
#                                  matches PATTERN (grep -E), for up to
#                                  TENTHS tenths of a second (50); 1 when
#                                  it never did
#   tmux_norm FILE [SED-ARGS...]   the screen in FILE with the figures
#                                  that change from run to run written
#                                  <T> (a time left), <R> (a rate) and
#                                  <HH:MM> (an expected end), SED-ARGS
#                                  (sed -E expressions) applied too, and
#                                  without its blank lines at the bottom,
#                                  to compare with a golden
#   tmux_kill                      the server and its sessions
#   watch_all RUN                  pipelinectl watch RUN three ways at
#                                  once: --plain into plain.out, --json
#                                  into json.out (their stderr into
#                                  plain.err, json.err; their pids in
#                                  WATCH_PLAIN, WATCH_JSON), and on an
#                                  80-column terminal, session w
command -v tmux >/dev/null || fail "tmux is not installed (etc/deps.sh installs it)"
TMUX_CMD="tmux -L pltest$$ -f /dev/null"

tmux_watch() {
	local name=$1 cols=$2 args
	shift 2
	printf -v args ' %q' "$@"
	$TMUX_CMD new-session -d -s "$name" -x "$cols" -y 24 \
	    "TERM=screen ${TMUX_ENV:-} '$PIPELINECTL' -f '$PL_CONF'$args; echo rc=\$?; sleep 600" ||
	    fail "tmux new-session $name at $cols columns"
}

tmux_until() {
	local name=$1 file=$2 pat=$3 n=${4:-50}
	for _ in $(seq "$n"); do
		$TMUX_CMD capture-pane -p -t "$name" >"$file"
		grep -Eq "$pat" "$file" && return 0
		sleep 0.1
	done
	return 1
}

tmux_norm() {
	local f=$1
	shift
	sed -E -e 's/[0-9]+(h[0-9]{2}m|m[0-9]{2}s|s) left/<T> left/g' \
	    -e 's/(, )[0-9][0-9.e+-]*( optimizer-steps)?\/s/\1<R>\2\/s/g' \
	    -e 's/about [0-9]{2}:[0-9]{2}/about <HH:MM>/' "$@" \
	    -e :a -e '/^\n*$/{$d;N;ba' -e '}' "$f"
}

tmux_kill() {
	$TMUX_CMD kill-server 2>/dev/null || true
}

watch_all() {
	pctl watch "$1" --plain >plain.out 2>plain.err &
	WATCH_PLAIN=$!
	pctl --json watch "$1" >json.out 2>json.err &
	WATCH_JSON=$!
	tmux_watch w 80 watch "$1"
}
