#!/bin/bash
# The events quota of an attempt (pipelined.conf(5) events_max_lines and
# events_max_size), against a real pipelined running as root and runs of
# nobody, a member of its group. Before, a job program's lines went to
# the store without a bound (27 MB of them filled the state file system).
#   1. a program writing 5,000 lines under a quota of 1,000: the job fails
#      within seconds naming events_max_lines, its program stopped; the
#      store holds at most 1,000 of its events, and the daemon answers;
#   2. 300 KiB of lines under a quota of 64 KiB: the job fails naming
#      events_max_size; the store holds less than 64 KiB of its lines;
#   3. a daemon killed -9 and started again: the re-entered job keeps its
#      count (the quota is the attempt's), the run stays failed, nothing
#      more of the flood is stored;
#   4. a run within both quotas succeeds with every line stored.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
. "$TOP/tests/lib/member.sh"
member_daemon "events_max_lines = 1000" "events_max_size = 64K"
jobmsg() { db "SELECT message FROM jobs WHERE run_id = (SELECT id FROM runs WHERE name = '$1')"; }
nev() { db "SELECT count(*) FROM events WHERE run = '$1' AND type = 'job.log'"; }
# flood N PAD: N log lines of about PAD bytes each, then a minute's sleep.
flood() { echo "/usr/bin/python3 -c 'import os; f = os.open(os.environ[\"PL_EVENTS\"], os.O_WRONLY | os.O_APPEND | os.O_CREAT); [os.write(f, (\"{\\\"type\\\":\\\"log\\\",\\\"i\\\":%d,\\\"pad\\\":\\\"%s\\\"}\\n\" % (i, \"x\" * $2)).encode()) for i in range($1)]' && sleep 60"; }

# 1. Lines.
t0=$SECONDS
member_exec lines "$(flood 5000 10)"
wait_run lines failed 20
note "lines: failed after $((SECONDS - t0))s: $(jobmsg lines)"
case "$(jobmsg lines)" in *"events quota: the job's programs reported more than 1000 event lines in this attempt (events_max_lines); "*" stopped"*) ;;
	*) fail "lines: the message does not name the quota: $(jobmsg lines)";; esac
n=$(nev lines)
[ "$n" -le 1000 ] && [ "$n" -ge 900 ] || fail "lines: $n of the flood's events stored, want 1000 at most (and the first ones)"
pctl status >/dev/null || fail "the daemon does not answer"

# 2. Bytes.
member_exec bytes "$(flood 3000 100)"
wait_run bytes failed 20
case "$(jobmsg bytes)" in *"more than 65536 bytes of event lines in this attempt (events_max_size)"*) ;;
	*) fail "bytes: the message does not name the quota: $(jobmsg bytes)";; esac
b=$(db "SELECT coalesce(sum(length(data)), 0) FROM events WHERE run = 'bytes' AND type = 'job.log'")
[ "$b" -lt 65536 ] && [ "$(nev bytes)" -gt 100 ] || fail "bytes: $b bytes in $(nev bytes) of the flood's events stored"

# 3. A restart while the flood's program is still there (the job is
# re-entered: exec may be): the attempt's count is kept.
cat > "$TEST_TMP/specs/slow.py" <<'PY'
import os, time
f = os.open(os.environ["PL_EVENTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
for i in range(2000):
    os.write(f, b'{"type":"log","i":%d}\n' % i)
    time.sleep(0.003)
time.sleep(60)
PY
chmod 0644 "$TEST_TMP/specs/slow.py"
member_exec again "/usr/bin/python3 $TEST_TMP/specs/slow.py"
for _ in $(seq 100); do [ "$(nev again)" -gt 300 ] && break; sleep 0.05; done
before=$(nev again)
[ "$before" -gt 0 ] && [ "$before" -lt 1000 ] || fail "again: $before lines stored before the kill"
pl_kill9
sleep 1
member_daemon "events_max_lines = 1000" "events_max_size = 64K"
wait_run again failed 30
n=$(nev again)
[ "$n" -le 1000 ] || fail "again: $n events stored across the restart ($before before it), over the attempt's quota of 1000"
note "again: $before lines stored before the kill -9, $n in all"
[ "$(db "SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id JOIN runs r ON r.id = j.run_id
	WHERE r.name = 'again'")" = 1 ] || fail "again: the attempt was not the one re-entered"
case "$(jobmsg again)" in *"(events_max_lines)"*) ;; *) fail "again: $(jobmsg again)";; esac

# 4. Within the quotas.
member_exec fits "$(flood 500 10 | sed 's/ && sleep 60//')"
wait_run fits succeeded 20
[ "$(nev fits)" = 500 ] || fail "fits: $(nev fits) of 500 lines stored"
kill -0 "$PL_PID" || fail "the daemon died"
integrity_ok
events_gapless
echo ok
