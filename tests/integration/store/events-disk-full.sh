#!/bin/bash
# Event lines that fill the disk (pipelined(8) SECURITY, What a job
# program reports): a member's exec program writes 2.5 MB of lines at once
# into its events file on a 4 MB tmpfs holding the state directory, with
# the events quota out of the way. The daemon stores batches until a
# commit fails; it stops (exit 1) as for every failed commit, after it
# left the mark attempt-1/main.events-failed-OFFSET at the stored offset.
# With a little space freed (200 KiB: room for small commits, not for the
# lines) the restarted daemon does not read those lines again: the job
# fails naming them and the daemon stays up. Before, the restart read the
# same lines from the stored offset, failed the same commit and stopped
# again: a stop-restart loop for as long as the lines were there. Root is
# needed to mount the tmpfs; the run is nobody's.
. "$(dirname "$0")/../../lib.sh"
[ "$(id -u)" = 0 ] || { echo "not root: cannot mount a tmpfs"; exit 77; }
. "$TOP/tests/lib/member.sh"
mkdir -p "$TEST_TMP/state"
mount -t tmpfs -o size=4m tmpfs "$TEST_TMP/state" || { echo "cannot mount a tmpfs"; exit 77; }
trap 'pl_kill9; umount -l "$TEST_TMP/state" 2>/dev/null' EXIT
chmod 0755 "$TEST_TMP/state"
dd if=/dev/zero of="$TEST_TMP/state/spare" bs=4k count=50 2>/dev/null
quota="events_max_lines = 1000000000"
member_daemon "$quota" "events_max_size = 1G"
cat > specs/flood.py <<'PY'
import os, time
f = os.open(os.environ["PL_EVENTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
line = b'{"type":"log","pad":"%s"}\n' % (b"x" * 180)
try:
    for _ in range(125):
        os.write(f, line * 100)
except OSError as e:
    print("flood:", e)
time.sleep(120)
PY
chmod 0644 specs/flood.py
member_exec flood "/usr/bin/python3 $TEST_TMP/specs/flood.py"
for _ in $(seq 300); do kill -0 "$PL_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$PL_PID" 2>/dev/null && fail "the daemon serves on after its commit failed on a full disk"
wait "$PL_PID"; rc=$?
PL_PID=
[ "$rc" = 1 ] || fail "the daemon exited $rc after a failed commit, not 1"
grep -q "a commit failed (database or disk is full); stopping" "$TEST_TMP/pipelined.out" ||
	fail "the daemon's log does not say why it stopped"
# The mark names the process whose lines failed: main, or pl-stage when
# the suite runs every stage in a stage process (PL_STAGE_PROCESS=all).
mark=$(cd "$TEST_TMP/state/runs/flood/x" && ls attempt-1/ | grep '\.events-failed-[0-9]*$')
[ -n "$mark" ] || fail "no mark of the lines that failed: $(ls -la "$TEST_TMP/state/runs/flood/x/attempt-1";
	tail -5 "$TEST_TMP/state/runs/flood/x/job.log"; tail -3 "$TEST_TMP/pipelined.out")"
off=${mark##*-}
proc=${mark%%.events-failed-*}
stored=$(db "SELECT events_offset FROM procs WHERE name = '$proc'")
[ "${stored:-0}" = "$off" ] || fail "the mark is at $off, the stored offset at ${stored:-none}"
size=$(stat -c %s "$TEST_TMP/state/runs/flood/x/attempt-1/$proc/events")
[ "$size" -gt $((off + 400000)) ] || fail "only $((size - off)) bytes unread: the test's flood is too small"
note "stopped at byte $off of $size of the events file; mark $mark"
# A little space back, not enough for the lines; the restart.
rm -f "$TEST_TMP/state/spare"
member_daemon "$quota" "events_max_size = 1G"
wait_run flood failed 30
for _ in $(seq 30); do kill -0 "$PL_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$PL_PID" 2>/dev/null || fail "the restarted daemon stopped again: $(tail -3 "$TEST_TMP/pipelined.out")"
msg=$(db "SELECT message FROM jobs WHERE name = 'x'")
case "$msg" in *"events: $proc's event lines from byte $off could not be stored before the daemon's restart"*) ;;
	*) fail "the job's message does not name the lines: $msg";; esac
[ "$(db "SELECT events_offset FROM procs WHERE name = '$proc'")" = "$off" ] ||
	fail "the lines were read after all: offset $(db "SELECT events_offset FROM procs WHERE name = '$proc'")"
pctl status >/dev/null || fail "the daemon does not answer"
note "the restart: $msg"
integrity_ok
events_gapless
pl_stop
echo ok
