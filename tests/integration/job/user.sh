#!/bin/bash
# Jobs run as their submitter (SO_PEERCRED at submit, stored with the
# run): a non-root member of the submit group (setpriv) gets its own uid
# and groups in its job programs, which cannot read /etc/shadow or write
# /etc but can write their work and process directories; the daemon still
# reads what they wrote (events). Root's submissions stay root unless
# job_user is set. The owner is kept across a daemon restart. Against a
# real pipelined running as root.
. "$(dirname "$0")/../../lib.sh"
# The files a job may or may not write in /etc are named for this run of
# the test (TEST_TMP's name): another run beside it has its own.
E=/etc/${TEST_TMP##*/}
trap 'pl_kill9 2>/dev/null; rm -f "$E-member" "$E-rootrun" "$E-jobuser"' EXIT
[ "$(id -u)" = 0 ] || { echo "needs root to switch uids"; exit 77; }
pl_group plsubmit
gid=$(getent group plsubmit | cut -d: -f3)
nobody=$(id -u nobody); nogroup=$(getent group nogroup | cut -d: -f3)
as_member() { setpriv --reuid=nobody --regid=nogroup --groups="$gid" "$@"; }
O=$TEST_TMP/out; mkdir -p "$O"; chmod 0777 "$O"
chmod 0755 "$TEST_TMP"
pl_conf "group = plsubmit"
pl_start
chmod 0755 "$TEST_TMP/run"; chmod 0666 "$TEST_TMP/run/control.sock"

# spec NAME: a job that says who it is and tries what it may not do.
spec() {
	rm -f "$E-$1"
	cat > "$TEST_TMP/$1.ini" <<INI
[who]
stage = exec
command = id -u > $O/$1.uid; id -G > $O/$1.groups; id -g > $O/$1.gid; if cat /etc/shadow > /dev/null 2>&1; then echo read-shadow >> $O/$1.bad; fi; if touch $E-$1 2>/dev/null; then echo wrote-etc >> $O/$1.bad; fi; touch made-here; echo '{"type":"progress","step":1,"total":1}' >> \$PL_EVENTS
[next]
stage = exec
after = who
command = id -u > $O/$1.next
INI
	chmod 0644 "$TEST_TMP/$1.ini"
}
# ran_as NAME UID: what the jobs of run NAME said.
ran_as() {
	[ "$(cat "$O/$1.uid")" = "$2" ] || fail "$1: the job ran as uid $(cat "$O/$1.uid"), wanted $2"
	[ "$(cat "$O/$1.next")" = "$2" ] || fail "$1: the second job ran as uid $(cat "$O/$1.next"), wanted $2"
	[ "$(db "SELECT progress_done FROM jobs j JOIN runs r ON r.id = j.run_id WHERE r.name = '$1' AND j.name = 'who'")" = 1.0 ] ||
		fail "$1: the job's event did not reach the store"
	local w=$TEST_TMP/state/runs/$1/who/work
	[ -f "$w/made-here" ] || fail "$1: the job could not write its work directory"
	[ "$(stat -c %u "$w")" = "$2" ] || fail "$1: its work directory is owned by $(stat -c %u "$w")"
	[ "$(stat -c %u "$TEST_TMP/state/runs/$1/who/attempt-1/main/events")" = "$2" ] ||
		fail "$1: its events file is owned by $(stat -c %u "$TEST_TMP/state/runs/$1/who/attempt-1/main/events")"
}

# A member of the submit group: its uid, its groups; no shadow, no /etc.
spec member
as_member "$PIPELINECTL" -f "$PL_CONF" submit "$TEST_TMP/member.ini" >/dev/null || fail "the member could not submit"
wait_run member succeeded 30
ran_as member "$nobody"
[ "$(cat "$O/member.gid")" = "$nogroup" ] || fail "member: gid $(cat "$O/member.gid"), wanted $nogroup"
[ "$(tr ' ' '\n' < "$O/member.groups" | sort -n | tr '\n' ' ')" = "$(printf '%s\n' "$nogroup" "$gid" | sort -n | tr '\n' ' ')" ] ||
	fail "member: groups $(cat "$O/member.groups"), wanted $nogroup and $gid"
[ ! -e "$O/member.bad" ] || fail "member: the job did what it may not: $(cat "$O/member.bad")"
[ ! -e "$E-member" ] || fail "member: the job wrote /etc"
note "a group member's job ran as uid $nobody, groups $(cat "$O/member.groups")"

# Root's own submission: root, as documented (no job_user set).
spec rootrun
pctl submit "$TEST_TMP/rootrun.ini" >/dev/null
wait_run rootrun succeeded 30
[ "$(cat "$O/rootrun.uid")" = 0 ] || fail "rootrun: uid $(cat "$O/rootrun.uid") without job_user"
pl_stop

# job_user: root's submissions run as that user; the owner outlives a
# restart (the second job starts after it).
pl_conf "group = plsubmit" "job_user = nobody"
pl_start
spec jobuser
sed -i 's/^command = id -u > \(.*\)\.uid;/command = sleep 1; id -u > \1.uid;/' "$TEST_TMP/jobuser.ini"
pctl submit "$TEST_TMP/jobuser.ini" >/dev/null
sleep 0.3
pl_kill9
pl_start
wait_run jobuser succeeded 30
ran_as jobuser "$nobody"
[ "$(cat "$O/jobuser.gid")" = "$nogroup" ] || fail "jobuser: gid $(cat "$O/jobuser.gid")"
[ ! -e "$O/jobuser.bad" ] || fail "jobuser: the job did what it may not: $(cat "$O/jobuser.bad")"
pl_stop

# The shim on its own: -u switches, a malformed -u or a switch that
# cannot be made (a shim that is not root) runs nothing, 126 and why.
SHIM=$TOP/daemon/pipeline-shim
P=$TEST_TMP/p; mkdir -p "$P/a" "$P/b" "$P/c"; chmod 0777 "$P" "$P/c"
st() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$1/exit.json"; }
"$SHIM" -d "$P/a" -l "$P/a.log" -u "$nobody:$nogroup:$gid" -- sh -c 'echo "$(id -u) $(id -g) $(id -G)"'
grep -qx "$nobody $nogroup $nogroup $gid" "$P/a.log" || fail "shim -u: the program said $(cat "$P/a.log")"
# The groups in another order than the kernel keeps them (sorted): the same.
mkdir -p "$P/a2"
"$SHIM" -d "$P/a2" -l "$P/a2.log" -u "$nobody:$nogroup:$nogroup,$gid" -- sh -c 'echo "$(id -u) $(id -G)"'
grep -qx "$nobody $nogroup $gid" "$P/a2.log" || fail "shim -u, groups unsorted: $(cat "$P/a2.log")"
# A run's shim pinned to an owner (-u before -G, how the privileged
# parent starts it) refuses a request without -u (root) or for another.
grep -q -- "-u UID:GID\[:GROUPS\]\] -G FD" <("$SHIM" 2>&1) || fail "shim usage: no pinned -G"
"$SHIM" -d "$P/b" -l "$P/b.log" -u "$nobody:x" -- touch "$P/b/ran"
[ "$(st "$P/b")" = 126 ] && [ ! -e "$P/b/ran" ] || fail "a malformed -u ran the program"
grep -q "bad -u $nobody:x" "$P/b.log" || fail "malformed -u: $(cat "$P/b.log")"
setpriv --reuid=nobody --regid=nogroup --clear-groups "$SHIM" -d "$P/c" -l "$P/c/log" -u 0:0 -- touch "$P/c/ran"
[ "$(st "$P/c")" = 126 ] && [ ! -e "$P/c/ran" ] || fail "a shim that cannot switch ran the program"
grep -q "cannot run as uid 0 gid 0: Operation not permitted" "$P/c/log" || fail "no switch: $(cat "$P/c/log")"
echo ok
