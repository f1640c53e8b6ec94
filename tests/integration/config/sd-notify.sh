#!/bin/bash
# config/sd-notify.sh: the service manager's notifications (pipelined(8)
# SYSTEMD), heard on a NOTIFY_SOCKET of the test's own (a Python datagram
# listener standing in for systemd) by a split daemon, whose privileged
# parent passes them on: READY=1 once it serves, STATUS= lines at most
# about once a second however fast its jobs start and end (a 40-job chain
# of short jobs changes the count twice a job), the last one saying that no
# job runs, and STOPPING=1 on SIGTERM. Without NOTIFY_SOCKET the daemon
# sends its parent no STATUS at all (strace counts the parent's
# messages), so a DAG of short jobs pays no round trip to the parent
# for a status nobody hears.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null; [ -n "${LS:-}" ] && kill "$LS" 2>/dev/null; [ -n "${ST:-}" ] && kill "$ST" 2>/dev/null' EXIT
sock=$TEST_TMP/notify.sock
/usr/bin/python3 - "$sock" "$TEST_TMP/notes" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        msg = s.recv(4096).decode()
        out.write("%.3f %s\n" % (time.monotonic(), msg.replace("\n", " ")))
PY
LS=$!
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || fail "the listener did not bind $sock"

{
	echo "[run]"; echo "name = chain"
	for k in $(seq 0 39); do
		echo "[j$k]"; echo "stage = exec"; echo "command = sleep 0.05"
		[ "$k" = 0 ] || echo "after = j$((k - 1))"
	done
} > "$TEST_TMP/chain.ini"

pl_conf
NOTIFY_SOCKET=$sock pl_start
for _ in $(seq 50); do grep -q "READY=1" "$TEST_TMP/notes" 2>/dev/null && break; sleep 0.1; done
grep -q " READY=1$" "$TEST_TMP/notes" || fail "no READY=1: $(cat "$TEST_TMP/notes" 2>/dev/null)"
t0=$(date +%s.%N)
pctl submit "$TEST_TMP/chain.ini" >/dev/null || fail "submit"
wait_run chain succeeded 60
t1=$(date +%s.%N)
sleep 1.5
n=$(grep -c " STATUS=" "$TEST_TMP/notes" || true)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", b - a + 1 }')
note "$n STATUS lines for 40 jobs in about ${secs}s"
# Two a second at most (the count before the run, then one a second),
# and the last one the idle daemon's.
[ "$n" -ge 2 ] || fail "$n STATUS lines: none while the jobs ran"
[ "$n" -le $((secs + 3)) ] || fail "$n STATUS lines for a ${secs}s run: not throttled: $(grep STATUS "$TEST_TMP/notes" | head -5)"
grep " STATUS=" "$TEST_TMP/notes" | tail -1 | grep -q "STATUS=0 jobs running" ||
	fail "the last STATUS is not the idle daemon's: $(grep STATUS "$TEST_TMP/notes" | tail -1)"
pl_stop
for _ in $(seq 50); do grep -q "STOPPING=1" "$TEST_TMP/notes" && break; sleep 0.1; done
grep -q " STOPPING=1$" "$TEST_TMP/notes" || fail "no STOPPING=1"

# Without NOTIFY_SOCKET: no STATUS message from the daemon to its parent.
command -v strace >/dev/null || { echo "no strace"; exit 77; }
rm -rf "$TEST_TMP/state"
pl_conf
pl_start
strace -qq -e trace=recvmsg -p "$PL_PID" -o "$TEST_TMP/msgs" 2>/dev/null &
ST=$!
for _ in $(seq 50); do grep -q TracerPid:.*[1-9] "/proc/$PL_PID/status" && break; sleep 0.1; done
pctl submit "$TEST_TMP/chain.ini" >/dev/null || fail "submit"
wait_run chain succeeded 60
kill "$ST"; wait "$ST" 2>/dev/null; ST=""
grep -q 'STATUS=' "$TEST_TMP/msgs" && fail "the daemon sent STATUS without a NOTIFY_SOCKET: $(grep -c STATUS= "$TEST_TMP/msgs") times"
pl_stop
echo "config/sd-notify: ok"
