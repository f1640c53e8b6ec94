#!/bin/bash
# `user` in pipelined.conf: a daemon started as root hands its state
# directory and its sockets' directory to that user and becomes it for
# good before it opens the store; every run's jobs then run as that user.
# Checked against a real pipelined started as root: its uids, gids and
# groups; a job's uid; a cancel (the signal is the user's to send); a kill
# -9 in the middle of a job and the restart that adopts it; nothing of
# root's left in the state directory; and the configurations refused
# (no such user, root, a port below 1024), and the one beside group
# accepted.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
[ "$(id -u)" = 0 ] || { echo "needs root to become another user"; exit 77; }
pl_user _pipelined
uid=$(id -u _pipelined); gid=$(id -g _pipelined)
# The user reaches its state directory through the test's.
chmod 0711 "$TEST_TMP"
O=$TEST_TMP/out; mkdir -p "$O"; chmod 0777 "$O"

# Refused before anything starts, each naming the file, line and key.
pl_conf "user = no-such-user-here"
out=$("$PIPELINED" -n -f "$PL_CONF" 2>&1) && fail "a missing user was accepted"
echo "$out" | grep -q "pipelined.conf:[0-9]*: user: no such user \"no-such-user-here\"" ||
	fail "no such user: $out"
pl_conf "user = root"
out=$("$PIPELINED" -n -f "$PL_CONF" 2>&1) && fail "user = root was accepted"
echo "$out" | grep -q ": user: \"root\" is root" || fail "root: $out"
pl_group plsubmit
# Beside group the daemon is split, and only its daemon process becomes
# the user (job/split-user): accepted.
pl_conf "user = _pipelined" "group = plsubmit"
out=$("$PIPELINED" -n -f "$PL_CONF" 2>&1) || fail "user beside group was refused: $out"
pl_conf "user = _pipelined" "http_listen = 127.0.0.1:80" "http_token = 0123456789abcdef0123"
out=$("$PIPELINED" -n -f "$PL_CONF" 2>&1) && fail "a port below 1024 was accepted"
echo "$out" | grep -q ": http_listen: port 80 is below 1024" || fail "port: $out"

# An earlier start as root left the store and a run behind, root's: a
# daemon root alone (PL_SPLIT=0: no group, one process), since a split
# one's store is _pipelined's; this test's subject is the `user`
# deployment that follows it.
PL_SPLIT=0 pl_conf
pl_start
cat > "$TEST_TMP/before.ini" <<INI
[one]
stage = exec
command = id -u > $O/before.uid
INI
pctl submit "$TEST_TMP/before.ini" >/dev/null
wait_run before succeeded 30
[ "$(cat "$O/before.uid")" = 0 ] || fail "root's daemon ran its job as $(cat "$O/before.uid")"
pl_stop
[ "$(stat -c %u "$TEST_TMP/state/pipelined.db")" = 0 ] || fail "the store was not root's"

pl_conf "user = _pipelined"
pl_start
# All three uids and gids the user's, its groups its own: no root left.
read -r _ ru eu su fu < <(grep '^Uid:' "/proc/$PL_PID/status")
read -r _ rg eg sg fg < <(grep '^Gid:' "/proc/$PL_PID/status")
[ "$ru $eu $su $fu" = "$uid $uid $uid $uid" ] || fail "the daemon's uids: $ru $eu $su $fu, wanted $uid"
[ "$rg $eg $sg $fg" = "$gid $gid $gid $gid" ] || fail "the daemon's gids: $rg $eg $sg $fg, wanted $gid"
groups=$(grep '^Groups:' "/proc/$PL_PID/status" | cut -f2 | tr -s ' ' '\n' | grep -v '^$' | sort -n | tr '\n' ' ')
want=$(id -G _pipelined | tr ' ' '\n' | sort -n | tr '\n' ' ')
[ "$groups" = "$want" ] || fail "the daemon's groups: $groups, wanted $want"
grep -q "became _pipelined (uid $uid): root given up" "$TEST_TMP/pipelined.out" ||
	fail "the log does not say root was given up"
# Nothing in the state directory is root's any more, the store included,
# and the earlier run is still there.
left=$(find "$TEST_TMP/state" -user root)
[ -z "$left" ] || fail "root still owns: $left"
[ "$(run_state before)" = succeeded ] || fail "the earlier run is gone: $(pctl status)"
[ "$(stat -c %U "$TEST_TMP/run")" = _pipelined ] || fail "the sockets' directory is not the user's"

# A job runs as the user; a cancel reaches it.
cat > "$TEST_TMP/who.ini" <<INI
[who]
stage = exec
command = id -u > $O/who.uid; touch made-here
[sleeper]
stage = exec
after = who
command = echo \$\$ > $O/sleeper.pid; exec sleep 300
INI
pctl submit "$TEST_TMP/who.ini" >/dev/null
for _ in $(seq 1 100); do [ -s "$O/sleeper.pid" ] && break; sleep 0.1; done
[ -s "$O/sleeper.pid" ] || fail "the second job did not start: $(pctl status who)"
[ "$(cat "$O/who.uid")" = "$uid" ] || fail "the job ran as uid $(cat "$O/who.uid"), wanted $uid"
[ -f "$TEST_TMP/state/runs/who/who/work/made-here" ] || fail "the job could not write its work directory"
spid=$(cat "$O/sleeper.pid")
pctl cancel who >/dev/null || fail "cancel refused"
wait_run who cancelled 30
for _ in $(seq 1 50); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$spid" 2>/dev/null && fail "the cancelled job's process $spid still runs"

# kill -9 while a job runs: the restarted daemon, the user again, adopts
# it and it ends as it would have.
cat > "$TEST_TMP/adopt.ini" <<INI
[slow]
stage = exec
command = echo \$\$ > $O/adopt.pid; sleep 3; id -u > $O/adopt.uid
INI
pctl submit "$TEST_TMP/adopt.ini" >/dev/null
for _ in $(seq 1 100); do [ -s "$O/adopt.pid" ] && break; sleep 0.1; done
[ -s "$O/adopt.pid" ] || fail "the slow job did not start"
pl_kill9
pl_start
read -r _ ru eu su fu < <(grep '^Uid:' "/proc/$PL_PID/status")
[ "$ru $eu $su $fu" = "$uid $uid $uid $uid" ] || fail "the restarted daemon's uids: $ru $eu $su $fu"
wait_run adopt succeeded 60
[ "$(cat "$O/adopt.uid")" = "$uid" ] || fail "the adopted job ran as $(cat "$O/adopt.uid")"
[ "$(db "SELECT attempts FROM jobs j JOIN runs r ON r.id = j.run_id WHERE r.name = 'adopt'")" = 1 ] ||
	fail "the job ran again instead of being adopted"
left=$(find "$TEST_TMP/state" -user root)
[ -z "$left" ] || fail "root owns, after the restart: $left"
integrity_ok || fail "the store is not intact"
pl_stop
note "the daemon ran as $uid:$gid; its jobs as $uid; cancel and a kill -9 adoption held"
