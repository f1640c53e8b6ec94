#!/bin/bash
# Start-up tells the truth: `pipelined -n` checks every path the
# configuration names and that http_listen is free, naming file:line and
# key; a detached start exits 0 only once the daemon serves, and non-zero
# with the reason on the terminal when it cannot (a log directory that
# does not exist, a store that cannot be opened, a port in use); a second
# daemon on the same state directory says which pid runs there; a daemon
# killed with SIGKILL leaves no lock behind.
. "$(dirname "$0")/../../lib.sh"

conf() {	# conf FILE [extra [daemon] lines]: a minimal configuration
	local f=$1; shift
	{
		echo "[daemon]"
		echo "state_dir = $TEST_TMP/state"
		echo "control_socket = $TEST_TMP/run/control.sock"
		echo "feed_socket = $TEST_TMP/run/feed.sock"
		echo "plugin_dir = $TOP/plugins"
		echo "shim = $TOP/daemon/pipeline-shim"
		echo "jobs_dir = $TOP/jobs"
		for l in "$@"; do echo "$l"; done
	} > "$f"
}
daemon_pid() { cat "$TEST_TMP/state/pipelined.pid" 2>/dev/null; }
stop_daemon() {
	local p; p=$(daemon_pid)
	[ -n "$p" ] && kill -TERM "$p" 2>/dev/null
	for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
	fail "daemon $p did not stop"
}
trap 'p=$(daemon_pid); [ -n "$p" ] && kill -9 "$p" 2>/dev/null; true' EXIT

# 1. A log file in a directory that does not exist: -n fails naming the
# line and key, and a detached start fails with the same line, exit 1.
c=$TEST_TMP/nolog.conf
conf "$c" "log_file = $TEST_TMP/nosuch/pipelined.log"
out=$("$PIPELINED" -n -f "$c" 2>&1) && fail "-n accepted a missing log directory: $out"
echo "$out" | grep -qF "nolog.conf:8: log_file: $TEST_TMP/nosuch: No such file or directory" ||
	fail "-n: $out"
out=$("$PIPELINED" -f "$c" 2>&1) && fail "a detached start with no log directory exited 0"
echo "$out" | grep -qF "nolog.conf:8: log_file:" || fail "start: $out"
[ ! -e "$TEST_TMP/run/control.sock" ] || fail "a failed start left a socket"

# 2. Every other path, each with its key: a state_dir that is a file, a
# plugin_dir that does not exist, a shim that is not executable, a socket
# path too long for sun_path, a python not in PATH.
touch "$TEST_TMP/afile" "$TEST_TMP/noexec"
long=$TEST_TMP/$(printf 'd%.0s' $(seq 1 120))/control.sock
c=$TEST_TMP/paths.conf
{
	echo "[daemon]"
	echo "state_dir = $TEST_TMP/afile"
	echo "control_socket = $long"
	echo "feed_socket = $TEST_TMP/run/feed.sock"
	echo "plugin_dir = $TEST_TMP/noplugins"
	echo "shim = $TEST_TMP/noexec"
	echo "jobs_dir = $TOP/jobs"
	echo "python = no-such-python3"
	echo "log_file = $TEST_TMP/x.log"
} > "$c"
out=$("$PIPELINED" -n -f "$c" 2>&1) && fail "-n accepted bad paths: $out"
for want in "paths.conf:2: state_dir: $TEST_TMP/afile: not a directory" \
    "paths.conf:3: control_socket: $long: too long for a Unix socket" \
    "paths.conf:5: plugin_dir: $TEST_TMP/noplugins: No such file or directory" \
    "paths.conf:6: shim: $TEST_TMP/noexec: not executable" \
    "paths.conf:8: python: no-such-python3: not found in PATH"; do
	echo "$out" | grep -qF "$want" || fail "missing \"$want\" in: $out"
done
[ "$(echo "$out" | wc -l)" = 5 ] || fail "expected 5 errors, got: $out"

# 3. http_listen in use by another program: -n and the start both say so.
port=$(free_port)
/usr/bin/python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(30)' "$port" &
holder=$!
for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
c=$TEST_TMP/port.conf
conf "$c" "log_file = $TEST_TMP/x.log" "http_listen = 127.0.0.1:$port"
out=$("$PIPELINED" -n -f "$c" 2>&1) && fail "-n accepted a port in use"
echo "$out" | grep -qF "port.conf:9: http_listen: 127.0.0.1:$port: address in use" || fail "-n: $out"
out=$("$PIPELINED" -f "$c" 2>&1) && fail "a start on a port in use exited 0"
echo "$out" | grep -qF "address in use" || fail "start: $out"
kill "$holder"; wait "$holder" 2>/dev/null

# 4. A failure only the daemon itself meets (the store cannot be opened:
# its file is a directory) reaches the terminal from the detached child,
# and its exit status is the parent's.
mkdir -p "$TEST_TMP/state/pipelined.db"
c=$TEST_TMP/good.conf
conf "$c" "log_file = $TEST_TMP/x.log" "http_listen = 127.0.0.1:$port" "http_token = startup-token-0123456"
out=$("$PIPELINED" -f "$c" 2>&1) && fail "a start whose store cannot open exited 0"
echo "$out" | grep -qF "pipelined: cannot open the store $TEST_TMP/state/pipelined.db" || fail "start: $out"
rmdir "$TEST_TMP/state/pipelined.db"

# 5. A good detached start returns only once the daemon serves: the
# control socket and the page answer at once, with no polling.
"$PIPELINED" -f "$c" || fail "a good detached start failed"
"$PIPELINECTL" -s "$TEST_TMP/run/control.sock" status >/dev/null || fail "not serving when the start returned"
curl -sf -o /dev/null -H "Authorization: Bearer startup-token-0123456" "http://127.0.0.1:$port/metrics" || fail "http not serving when the start returned"
first=$(daemon_pid)
kill -0 "$first" || fail "no daemon at the pid file's pid $first"

# 6. A second daemon on the same configuration, detached or not: exit 1
# naming the first; -n still passes and says which daemon runs there.
out=$("$PIPELINED" -f "$c" 2>&1) && fail "a second detached daemon exited 0"
echo "$out" | grep -qF "another pipelined runs (pid $first) on $TEST_TMP/state" || fail "second: $out"
out=$("$PIPELINED" -d -f "$c" 2>&1) && fail "a second foreground daemon exited 0"
echo "$out" | grep -qF "another pipelined runs (pid $first)" || fail "second -d: $out"
out=$("$PIPELINED" -n -f "$c" 2>&1) || fail "-n beside a running daemon failed: $out"
echo "$out" | grep -qF "pipelined (pid $first) runs on this configuration" || fail "-n: $out"
"$PIPELINECTL" -s "$TEST_TMP/run/control.sock" status >/dev/null || fail "the first daemon stopped serving"

# 7. SIGKILL: the lock goes with the process; the stale pid file does not
# stop the next start.
kill -9 "$first"
for _ in $(seq 1 50); do kill -0 "$first" 2>/dev/null || break; sleep 0.1; done
[ "$(daemon_pid)" = "$first" ] || fail "the pid file changed"
"$PIPELINED" -f "$c" || fail "start after kill -9 failed"
[ "$(daemon_pid)" != "$first" ] || fail "the pid file still names the killed daemon"
"$PIPELINECTL" -s "$TEST_TMP/run/control.sock" status >/dev/null || fail "not serving after the restart"
stop_daemon
echo "ok"
