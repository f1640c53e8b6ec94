#!/bin/bash
# job/split-user.sh: `user = _pipelined` beside `group` (pipelined(8)
# SECURITY): a daemon started as root is split in two, the privileged
# parent stays root, and the daemon process becomes _pipelined for good
# before the store, the plugins, the sockets and every thread. Checked
# against a real daemon: the daemon process's uids, gids and fsuid in
# /proc, in every thread; the parent root; the state directory a root
# daemon alone left handed over at the first such start, the parent's
# own priv.owners in a directory of root's; a job that runs
# across the switch adopted and cancelled; group without user taking
# _pipelined; a member's exec run
# and root's own run each as its owner, and root's spec check; a cancel; kill -9 of the daemon process and of
# the parent, each ending both, and the restart adopting the job, which
# ran once; a reload; a shared sockets' directory refused.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
. "$TOP/tests/lib/member.sh"
pl_user _pipelined
uid=$(id -u _pipelined); ugid=$(id -g _pipelined)
O=$TEST_TMP/out; mkdir -p "$O"; chmod 0777 "$O"

# A daemon that is root alone (no group: one process) ran first: its
# store, root's, is what the first start as _pipelined finds.
mkdir -p "$TEST_TMP/specs"
PL_SPLIT=0 pl_conf
pl_start
printf '[run]\nname = before\n[x]\nstage = exec\ncommand = id -u > %s/before.uid\n' "$O" \
	> "$TEST_TMP/specs/before.ini"
pctl submit "$TEST_TMP/specs/before.ini" >/dev/null || fail "before: submit"
wait_run before succeeded 30
[ "$(cat "$O/before.uid")" = 0 ] || fail "before: ran as $(cat "$O/before.uid")"
# A job that runs across the switch: its shim's records, root's, are
# read by the daemon process that adopts it, and a cancel reaches it.
printf '[run]\nname = across\n[x]\nstage = exec\ncommand = echo $$ > %s/across.pid; exec sleep 300\n' \
	"$O" > "$TEST_TMP/specs/across.ini"
pctl submit "$TEST_TMP/specs/across.ini" >/dev/null || fail "across: submit"
wait_run across running 20
for _ in $(seq 50); do [ -s "$O/across.pid" ] && break; sleep 0.1; done
pl_stop
[ "$(stat -c %u "$TEST_TMP/state/pipelined.db")" = 0 ] || fail "the store was not root's"

# group without user, started as root: the daemon process is _pipelined
# all the same (pipelined.conf(5) user), and refused were it missing
# (config/conf checks the refusal's words).
pl_conf "group = plsubmit"
out=$("$PIPELINED" -nv -f "$PL_CONF" 2>&1) || fail "group alone refused: $out"
echo "$out" | grep -qx "user = _pipelined" || fail "group alone: user is not _pipelined: $out"

# The same configuration with user = _pipelined: accepted, and split.
pl_conf "group = plsubmit" "user = _pipelined"
out=$("$PIPELINED" -n -f "$PL_CONF" 2>&1) || fail "user beside group refused: $out"
member_daemon "user = _pipelined"
D=$(split_daemon_pid)
[ -n "$D" ] && [ "$(echo "$D" | wc -w)" = 1 ] || fail "no one daemon process under the parent $PL_PID: '$D'"
read -r _ ru eu su fu < <(grep '^Uid:' "/proc/$PL_PID/status")
[ "$ru $eu $su $fu" = "0 0 0 0" ] || fail "the parent's uids: $ru $eu $su $fu, wanted root's"
# Every thread of the daemon process: all four uids and gids the user's.
n=0
for t in /proc/"$D"/task/*; do
	read -r _ ru eu su fu < <(grep '^Uid:' "$t/status")
	read -r _ rg eg sg fg < <(grep '^Gid:' "$t/status")
	[ "$ru $eu $su $fu" = "$uid $uid $uid $uid" ] || fail "thread $t: uids $ru $eu $su $fu, wanted $uid"
	[ "$rg $eg $sg $fg" = "$ugid $ugid $ugid $ugid" ] || fail "thread $t: gids $rg $eg $sg $fg, wanted $ugid"
	grep -q '^CapEff:\s*0*$' "$t/status" || fail "thread $t: capabilities left: $(grep ^Cap "$t/status")"
	n=$((n + 1))
done
[ "$n" -gt 1 ] || fail "the daemon process has $n thread"
groups=$(grep '^Groups:' "/proc/$D/status" | cut -f2 | tr -s ' ' '\n' | grep -v '^$' | sort -n | tr '\n' ' ')
want=$(id -G _pipelined | tr ' ' '\n' | sort -n | tr '\n' ' ')
[ "$groups" = "$want" ] || fail "the daemon process's groups: $groups, wanted $want"
grep -q "became _pipelined (uid $uid): root given up; the privileged parent keeps it" \
	"$TEST_TMP/pipelined.out" || fail "the log does not say root was given up"
note "the parent $PL_PID root, the daemon process $D _pipelined in all $n threads"
# The sockets: the directory plsubmit's and closed to others, the gate
# (member_daemon opened it to all after the start: closed again here).
grep -q "sock_listen: chown" "$TEST_TMP/pipelined.out" &&
	fail "a socket not given to the group: $(grep sock_listen "$TEST_TMP/pipelined.out")"
[ "$(stat -c '%U %G' "$TEST_TMP/run")" = "_pipelined plsubmit" ] ||
	fail "the sockets' directory: $(stat -c '%U %G %a' "$TEST_TMP/run")"
[ "$(stat -c '%a' "$TEST_TMP/run/feed.sock")" = 666 ] || fail "the feed socket not open behind its gate"
chmod 0750 "$TEST_TMP/run"
nobody_out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$PIPELINECTL" -f "$PL_CONF" status 2>&1) &&
	fail "a user outside plsubmit reached the control socket: $nobody_out"
as_member "$PIPELINECTL" -f "$PL_CONF" status >/dev/null || fail "a member cannot reach the control socket"
chmod 0755 "$TEST_TMP/run"

# The state directory handed over, the store included; the parent's own
# file moved into state/priv, root's and nobody else's.
[ "$(stat -c %u "$TEST_TMP/state")" = "$uid" ] || fail "state_dir is not the user's"
[ "$(stat -c %u "$TEST_TMP/state/pipelined.db")" = "$uid" ] || fail "the store is not the user's"
[ "$(stat -c '%u %a' "$TEST_TMP/state/priv")" = "0 700" ] ||
	fail "state/priv: $(stat -c '%U %a' "$TEST_TMP/state/priv"), wanted root's 700"
[ "$(stat -c '%u %a' "$TEST_TMP/state/priv/priv.owners")" = "0 600" ] ||
	fail "priv.owners: not root's 600 in state/priv"
[ -e "$TEST_TMP/state/priv.owners" ] && fail "priv.owners left in the user's state_dir"
[ "$(run_state before)" = succeeded ] || fail "the earlier run is gone"
[ "$(run_state across)" = running ] || fail "across: not adopted: $(pctl status across)"
apid=$(cat "$O/across.pid")
pctl cancel across >/dev/null || fail "across: cancel"
wait_run across cancelled 20
for _ in $(seq 50); do kill -0 "$apid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$apid" 2>/dev/null && fail "across: the job adopted across the switch outlived its cancel"
note "state_dir handed over; priv.owners root's in state/priv"

# A member's run and root's own run, each as its owner.
member_exec m1 "id -u > $O/m1.uid; touch made-here"
wait_run m1 succeeded 30
[ "$(cat "$O/m1.uid")" = "$nobody" ] || fail "m1: ran as $(cat "$O/m1.uid"), wanted $nobody"
[ -f "$TEST_TMP/state/runs/m1/x/work/made-here" ] || fail "m1: the job could not write its work directory"
[ "$(stat -c %u "$TEST_TMP/state/runs/m1/x/work")" = "$nobody" ] || fail "m1: the work directory is not the member's"
R=$TEST_TMP/out-root; mkdir -p "$R"; chmod 0700 "$R"
printf '[run]\nname = r1\n[x]\nstage = exec\ncommand = id -u > %s/r1.uid\n' "$R" > specs/r1.ini
pctl submit specs/r1.ini >/dev/null || fail "r1: root could not submit"
wait_run r1 succeeded 30
[ "$(cat "$R/r1.uid")" = 0 ] || fail "r1: root's run ran as $(cat "$R/r1.uid")"
# Root's spec check: the parent's, as root (the daemon process is not).
out=$(pctl check specs/r1.ini 2>&1) || fail "r1: root's check failed: $out"
note "a member's run as $nobody, root's as 0"

# Cancel: through the parent, the job stops.
member_exec c1 "echo \$\$ > $O/c1.pid; exec sleep 300"
wait_run c1 running 20
for _ in $(seq 50); do [ -s "$O/c1.pid" ] && break; sleep 0.1; done
cpid=$(cat "$O/c1.pid")
as_member "$PIPELINECTL" -f "$PL_CONF" cancel c1 >/dev/null || fail "c1: cancel"
wait_run c1 cancelled 20
for _ in $(seq 50); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$cpid" 2>/dev/null && fail "c1: the job's sleep outlived its cancel"
note "cancel: the job stopped"

# kill -9 of the daemon process: the parent follows; the restart adopts
# the job, which runs once.
split_kill9 daemon k1
D=$(split_daemon_pid)
[ "$(stat -c %u "/proc/$D")" = "$uid" ] || fail "the restarted daemon process is not _pipelined's"
note "kill -9 of the daemon process: both ended, the restart adopted the job: it ran once"

# kill -9 of the parent: the daemon process follows.
split_kill9 parent k2
note "kill -9 of the parent: both ended, the restart adopted the job: it ran once"

# SIGHUP to the parent: both read the configuration again, the daemon
# process as the user, and it stays the user.
kill -HUP "$PL_PID"
for _ in $(seq 50); do grep -q "reload: configuration" "$TEST_TMP/pipelined.out" && break; sleep 0.1; done
grep -q "reload: configuration $PL_CONF loaded" "$TEST_TMP/pipelined.out" ||
	fail "no reload: $(grep reload "$TEST_TMP/pipelined.out")"
[ "$(stat -c %u "/proc/$(split_daemon_pid)")" = "$uid" ] || fail "after the reload, not _pipelined's"
member_exec h1 "true"
wait_run h1 succeeded 30

grep -q 'privileged parent: refused' "$TEST_TMP/pipelined.out" &&
	fail "the parent refused the daemon: $(grep 'privileged parent' "$TEST_TMP/pipelined.out")"
integrity_ok || fail "the store is not intact"
pl_stop

# A sockets' directory of root's that holds other files: not given to
# the user (nor to the group), and the start stops naming it.
mkdir -p "$TEST_TMP/other"; touch "$TEST_TMP/other/keep"
pl_conf "group = plsubmit" "user = _pipelined" "control_socket = $TEST_TMP/other/control.sock"
out=$(timeout 20 "$PIPELINED" -d -f "$PL_CONF" 2>&1) && fail "a shared sockets' directory was taken"
echo "$out" | grep -q "control_socket: $TEST_TMP/other is not _pipelined's and holds more than sockets" ||
	fail "no reason given: $out"
[ "$(stat -c %u "$TEST_TMP/other")" = 0 ] || fail "the shared directory was handed over"
note "split with user = _pipelined: the parent root, the daemon process _pipelined; runs, cancel, kills held"
