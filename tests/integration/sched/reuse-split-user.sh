#!/bin/bash
# sched/reuse-split-user.sh: reuse end to end in a split daemon whose
# daemon process runs as its own user (user = _pipelined, pipelined(8)
# SECURITY). A member's exec job registers a file only the member can
# read (0600 in its 0700 directory), and root's own exec job one only
# root can (in a 0700 directory of root's): each is read through its
# owner's file server, the member's by the member's rule and root's by
# root's. Later runs reuse each job without running its program again,
# and the digest cache keeps each file's digest (its row in the store's
# digests table, with the file's inode), so that a reuse decision reads a
# stat of it, not the whole file: the daemon process, which cannot stat
# either path itself, takes the stat after the read from the descriptor
# it hashed.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
. "$TOP/tests/lib/member.sh"
pl_user _pipelined
member_daemon "user = _pipelined"
O=$TEST_TMP/out; mkdir -p "$O"; chmod 0777 "$O"
D=$(split_daemon_pid)
[ "$(stat -c %u "/proc/$D")" = "$(id -u _pipelined)" ] || fail "the daemon process is not _pipelined's"

# keeps FILE: the digests table's rows for FILE with its inode.
keeps() { db "SELECT count(*) FROM digests WHERE path = '$1' AND ino = $(stat -c %i "$1")"; }

# The member's: a 0700 directory of its own, a 0600 file in it.
W=$TEST_TMP/work; mkdir -p "$W" && chown nobody "$W" && chmod 0700 "$W"
cat > specs/m.ini <<INI
[make]
stage = exec
reuse = yes
command = set -e; echo make >> $O/m.count; umask 077; head -c 8388608 /dev/zero > $W/big; echo '{"type":"artifact","name":"big","path":"$W/big"}' >> "\$PL_EVENTS"
INI
chmod 0644 specs/m.ini
: > "$O/m.count"; chmod 0666 "$O/m.count"
mctl() { as_member "$PIPELINECTL" -f "$PL_CONF" "$@"; }
mctl submit --name m1 specs/m.ini >/dev/null || fail "m1: the member could not submit"
wait_run m1 succeeded 60
pctl artifacts m1 2>/dev/null | grep -q "$W/big" || { pctl artifacts m1; fail "m1's artifact was not registered"; }
[ "$(keeps "$W/big")" = 1 ] ||
	fail "the member's artifact's digest was not kept: $(db "SELECT path, ino FROM digests")"
for r in m2 m3; do
	mctl submit --name "$r" specs/m.ini >/dev/null || fail "$r: the member could not submit"
	wait_run "$r" succeeded 60
	[ "$(job_state "$r" make)" = reused ] || fail "$r/make is $(job_state "$r" make), wanted reused"
done
[ "$(wc -l < "$O/m.count")" = 1 ] || fail "a later member's run ran the program again"
[ "$(keeps "$W/big")" = 1 ] || fail "the member's digest was not kept across its reuses"
note "a member's artifact registered, reused twice, its digest kept"

# Root's own: a 0700 directory of root's, nothing _pipelined may reach.
RW=$TEST_TMP/root-work; mkdir -p "$RW" && chmod 0700 "$RW"
cat > specs/r.ini <<INI
[make]
stage = exec
reuse = yes
command = set -e; echo make >> $RW/count; umask 077; head -c 8388608 /dev/zero > $RW/big; echo '{"type":"artifact","name":"big","path":"$RW/big"}' >> "\$PL_EVENTS"
INI
pctl submit --name r1 specs/r.ini >/dev/null || fail "r1: root could not submit"
wait_run r1 succeeded 60
pctl artifacts r1 2>/dev/null | grep -q "$RW/big" || { pctl artifacts r1; fail "r1's artifact was not registered"; }
[ "$(keeps "$RW/big")" = 1 ] || fail "root's artifact's digest was not kept"
for r in r2 r3; do
	pctl submit --name "$r" specs/r.ini >/dev/null || fail "$r: root could not submit"
	wait_run "$r" succeeded 60
	[ "$(job_state "$r" make)" = reused ] || fail "$r/make is $(job_state "$r" make), wanted reused"
done
[ "$(wc -l < "$RW/count")" = 1 ] || fail "a later root's run ran the program again"
[ "$(keeps "$RW/big")" = 1 ] || fail "root's digest was not kept across its reuses"
note "root's own artifact registered through root's file server, reused twice, its digest kept"

grep -q 'privileged parent: refused' "$TEST_TMP/pipelined.out" &&
	fail "the parent refused the daemon: $(grep 'privileged parent' "$TEST_TMP/pipelined.out")"
integrity_ok || fail "the store is not intact"
pl_stop
echo ok
