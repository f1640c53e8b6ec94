#!/bin/bash
# control/access.sh: one rule for every door (pipelined(8) SECURITY). With the
# daemon as root, a group, an admin_group and the HTTP listener on:
#  - a member of the group sees and acts on its own runs only: another
#    member's run is not in its list, and its status, logs, values,
#    artifacts, metrics, cancel and retry are answered as for a run that
#    does not exist (ENOENT, HTTP 404: control/not-yours holds the answers
#    equal), on the control socket, the feed (watch) and the HTTP listener
#    alike; the
#    other's run is not cancelled, not retried, its log not read;
#  - a member of admin_group (not root) sees and acts on every run;
#  - a local user outside the group gets nothing over HTTP on loopback
#    without a credential (401: no job log, no spec text), and its own
#    login link's session sees no run but its own (404 for root's job log
#    and spec text, nothing of them in /api/runs or the event stream);
#  - /metrics (every run's labels) is refused to a user's session.
# Users: pl-alice, pl-bob (members), pl-carol (admin_group), nobody.
. "$(dirname "$0")/../../lib.sh"
[ "$(id -u)" = 0 ] || { echo "needs root to switch uids"; exit 77; }
trap 'pl_kill9 2>/dev/null' EXIT
pl_group plsubmit pladmin
pl_user pl-alice pl-bob pl-carol
gid=$(getent group plsubmit | cut -d: -f3)
agid=$(getent group pladmin | cut -d: -f3)
as() {	# as USER GROUPS -- CMD...: run CMD with those credentials only ("" GROUPS: none)
	local u=$1 g=$2; shift 3
	if [ "$1" = ctl ]; then shift; set -- "$PIPELINECTL" -f "$PL_CONF" "$@"; fi
	if [ -n "$g" ]; then
		setpriv --reuid="$u" --regid=nogroup --groups="$g" "$@"
	else
		setpriv --reuid="$u" --regid=nogroup --clear-groups "$@"
	fi
}
PORT=$(free_port)
TOKEN=access-test-token-0123456789
pl_conf "group = plsubmit" "admin_group = pladmin" "http_listen = 127.0.0.1:$PORT" "http_token = $TOKEN"
pl_start
chmod 0755 "$TEST_TMP" "$TEST_TMP/run"
chmod 0666 "$TEST_TMP/run/control.sock"
U=http://127.0.0.1:$PORT
ctl() { "$PIPELINECTL" -f "$PL_CONF" "$@"; }

# alice's run: a log line only she may read, a value, and a job still
# running (for cancel); bob's and root's runs.
mkdir -p "$TEST_TMP/specs"
cat >"$TEST_TMP/specs/a1.ini" <<'INI'
[sec]
stage = exec
command = echo ALICE-SECRET-LINE; echo '{"type":"metric","name":"alicemetric","step":1,"value":42}' >> $PL_EVENTS
[long]
stage = exec
after = sec
command = sleep 60
INI
printf '[b]\nstage = exec\ncommand = echo BOB-LINE\n' >"$TEST_TMP/specs/b1.ini"
printf '[r]\nstage = exec\ncommand = echo ROOT-SECRET-LINE\n' >"$TEST_TMP/specs/r1.ini"
chmod 0755 "$TEST_TMP/specs"; chmod 0644 "$TEST_TMP"/specs/*.ini
as pl-alice "$gid" -- ctl submit "$TEST_TMP/specs/a1.ini" >/dev/null || fail "alice could not submit"
as pl-bob "$gid" -- ctl submit "$TEST_TMP/specs/b1.ini" >/dev/null || fail "bob could not submit"
ctl submit "$TEST_TMP/specs/r1.ini" >/dev/null || fail "root could not submit"
wait_run b1 succeeded
wait_run r1 succeeded
for i in $(seq 100); do [ "$(job_state a1 long)" = running ] && break; sleep 0.1; done
[ "$(job_state a1 long)" = running ] || fail "a1's long job is not running"
[ "$(db "SELECT submitter FROM runs WHERE name = 'a1'")" = "$(id -u pl-alice)" ] || fail "a1's submitter is not alice"

# Alice sees her own.
as pl-alice "$gid" -- ctl logs a1 sec | grep -q ALICE-SECRET-LINE || fail "alice cannot read her own log"
as pl-alice "$gid" -- ctl metrics a1 sec | grep -q 42 || fail "alice cannot read her own metrics"

# Bob, a member too, sees and does nothing of alice's run, nor of root's.
list=$(as pl-bob "$gid" -- ctl list) || fail "bob's list failed"
echo "$list" | grep -q b1 || fail "bob's list lacks his own run: $list"
echo "$list" | grep -qE "a1|r1" && fail "bob's list shows others' runs: $list"
for cmd in "status a1" "logs a1 sec" "values a1" "artifacts a1" "metrics a1 sec" "cancel a1" "retry a1" \
    "logs r1 r" "status r1"; do
	out=$(as pl-bob "$gid" -- ctl $cmd 2>&1) && fail "bob could $cmd: $out"
	echo "$out" | grep -q "ENOENT" || fail "bob's $cmd was not answered ENOENT: $out"
	echo "$out" | grep -qE "ALICE|ROOT-SECRET|alicemetric" && fail "bob's $cmd showed the other's data: $out"
done
[ "$(job_state a1 long)" = running ] || fail "bob's cancel reached alice's run"
[ "$(db "SELECT attempts FROM jobs j JOIN runs r ON r.id = j.run_id WHERE r.name = 'a1' AND j.name = 'sec'")" = 1 ] ||
	fail "bob's retry ran alice's job again"
# The feed: bob's watch of every run replays and follows his own run's
# lines only; his watch of alice's run, and a "viewer" of his choosing
# (the daemon's own field), are refused.
feed_raw() {	# feed_raw REQUEST_JSON: what the feed sends in 2 s
	/usr/bin/python3 - "$TEST_TMP/run/feed.sock" "$1" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall((sys.argv[2] + "\n").encode())
s.settimeout(0.3)
out, end = b"", time.time() + 2
while time.time() < end:
    try:
        b = s.recv(65536)
        if not b:
            break
        out += b
    except socket.timeout:
        pass
sys.stdout.write(out.decode(errors="replace"))
PY
}
export -f feed_raw
export TEST_TMP
w=$(as pl-bob "$gid" -- bash -c 'feed_raw "{\"verb\":\"watch\",\"version\":1,\"since\":0}"')
echo "$w" | grep -q '"run":"b1"' || fail "bob's watch lacks his own run: $(echo "$w" | head -3)"
echo "$w" | grep -qE '"run":"(a1|r1)"' && fail "bob's watch shows others' runs"
w=$(as pl-bob "$gid" -- bash -c 'feed_raw "{\"verb\":\"watch\",\"version\":1,\"run\":\"a1\"}"')
echo "$w" | grep -q ENOENT || fail "bob's watch of a1 was not answered ENOENT: $w"
w=$(as pl-bob "$gid" -- bash -c "feed_raw '{\"verb\":\"watch\",\"version\":1,\"viewer\":$(id -u pl-alice)}'")
echo "$w" | grep -q EPERM || fail "bob's watch as alice was not refused: $w"
w=$(as pl-bob "$gid" -- timeout 5 "$PIPELINECTL" -f "$PL_CONF" watch a1 2>&1) && fail "bob could watch a1"
echo "$w" | grep -q ENOENT || fail "pipelinectl watch a1 as bob: $w"

# An admin (pl-carol in admin_group, not root) sees and acts on all.
as pl-carol "$agid" -- ctl logs a1 sec | grep -q ALICE-SECRET-LINE || fail "the admin cannot read alice's log"
as pl-carol "$agid" -- ctl list | grep -q r1 || fail "the admin's list lacks root's run"
as pl-carol "$agid" -- ctl cancel a1 >/dev/null || fail "the admin could not cancel alice's run"
wait_run a1 cancelled 30

# HTTP, loopback: a local user outside the group (nobody).
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
[ "$(code "$U/api/log?run=r1&job=r")" = 401 ] || fail "the job log without a credential: not 401"
[ "$(code "$U/api/run?run=r1")" = 401 ] || fail "the spec text without a credential: not 401"
link=$(as nobody "" -- ctl web 2>/dev/null) || fail "nobody's pipelinectl web failed"
curl -s -o /dev/null -c "$TEST_TMP/nobody.jar" "$link"
grep -q pl_session "$TEST_TMP/nobody.jar" || fail "nobody's link gave no session"
J="-b $TEST_TMP/nobody.jar"
[ "$(code $J "$U/api/log?run=r1&job=r")" = 404 ] || fail "nobody's session read root's job log"
[ "$(code $J "$U/api/run?run=a1")" = 404 ] || fail "nobody's session read alice's spec text"
curl -s $J "$U/api/runs" | grep -qE "a1|b1|r1" && fail "nobody's session lists others' runs"
[ "$(code $J "$U/metrics")" = 403 ] || fail "a user's session read /metrics"
curl -s --max-time 3 $J "$U/api/events" | grep -qE '"run":"(a1|b1|r1)"' && fail "nobody's event stream shows others' runs"
# Bob's session sees his run and not alice's.
link=$(as pl-bob "$gid" -- ctl web 2>/dev/null) || fail "bob's pipelinectl web failed"
curl -s -o /dev/null -c "$TEST_TMP/bob.jar" "$link"
J="-b $TEST_TMP/bob.jar"
curl -s $J "$U/api/runs" | grep -q '"b1"' || fail "bob's session does not list his run"
curl -s $J "$U/api/runs" | grep -qE '"(a1|r1)"' && fail "bob's session lists others' runs"
[ "$(code $J "$U/api/log?run=b1&job=b")" = 200 ] || fail "bob's session cannot read his own log"
[ "$(code $J "$U/api/log?run=a1&job=sec")" = 404 ] || fail "bob's session read alice's log"
ev=$(curl -s --max-time 3 $J "$U/api/events")
echo "$ev" | grep -q '"run":"b1"' || fail "bob's event stream lacks his run"
echo "$ev" | grep -qE '"run":"(a1|r1)"' && fail "bob's event stream shows others' runs"
# The token sees all.
curl -s -H "Authorization: Bearer $TOKEN" "$U/api/runs" | grep -q '"a1"' || fail "the token does not see every run"
integrity_ok
pl_stop
echo ok
