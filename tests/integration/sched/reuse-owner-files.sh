#!/bin/bash
# sched/reuse-owner-files.sh: in a split daemon (started as root with a
# group: the privileged parent and the daemon process, pipelined(8)
# SECURITY) a member's files are read through a file server the parent
# starts as the member, never with the member's rights in the daemon
# process. A member's exec job registers a file and a directory of many
# files, only the member can read (0700, 0600), which the daemon sizes and
# hashes; its plan (submit --plan) and later runs reuse that job, which
# reads them again (the reuse key's inputs, the candidate's artifacts as
# recorded). Meanwhile every thread of the daemon process is sampled
# (/proc status, as control/check-split does): its file-system uid never
# leaves its own (_pipelined's, the daemon process's user), where a
# daemon that takes the member's fsuid to read them (owner_fs_enter)
# shows it. Root's file in the same place is still refused to the member
# (Permission denied, named), as the member itself would meet it.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null; [ -n "${SAMPLER:-}" ] && kill "$SAMPLER" 2>/dev/null' EXIT
. "$TOP/tests/lib/member.sh"
member_setup "$TOP/plugins/exec.so"
D=$(pgrep -P "$PL_PID" -x pipelined)
[ -n "$D" ] || fail "no daemon process under the parent $PL_PID"

# The member's private directory; the job writes its artifacts there.
W=$TEST_TMP/work; mkdir -p "$W" && chown nobody "$W" && chmod 0700 "$W"
cat > specs/m.ini <<INI
[make]
stage = exec
reuse = yes
command = set -e; echo make >> $O/count; umask 077; mkdir -p $W/tree; for i in \$(seq 400); do echo \$i > $W/tree/f\$i; done; head -c 67108864 /dev/zero > $W/big; echo '{"type":"artifact","name":"tree","path":"$W/tree"}' >> "\$PL_EVENTS"; echo '{"type":"artifact","name":"big","path":"$W/big"}' >> "\$PL_EVENTS"
INI
chmod 0644 specs/m.ini
: > "$O/count"; chmod 0666 "$O/count"
count() { wc -l < "$O/count"; }
mctl() { as_member "$PIPELINECTL" -f "$PL_CONF" "$@"; }

fsuid_watch "$D" fsuids
mctl submit --name m1 specs/m.ini >/dev/null || fail "m1: the member could not submit"
wait_run m1 succeeded 60
[ "$(count)" = 1 ] || fail "m1 did not run its program once"
n=$(pctl artifacts m1 2>/dev/null | grep -c "$W/" || true)
[ "$n" -ge 2 ] || { pctl artifacts m1; fail "m1's artifacts were not registered"; }
mctl submit --plan --name p specs/m.ini > plan.txt || fail "the member's submit --plan"
grep -q "^make: reuse m1/make " plan.txt || { cat plan.txt; fail "the plan does not reuse m1's work"; }
for r in m2 m3 m4; do
	mctl submit --name "$r" specs/m.ini >/dev/null || fail "$r: the member could not submit"
	wait_run "$r" succeeded 60
	[ "$(job_state "$r" make)" = reused ] || fail "$r/make is $(job_state "$r" make), wanted reused"
done
[ "$(count)" = 1 ] || fail "a later run ran the program again"
kill "$SAMPLER"; wait "$SAMPLER" 2>/dev/null; SAMPLER=""
[ -s fsuids ] && fail "the daemon process took fsuid $(sort -u fsuids | tr '\n' ' ')to read a member's files"
note "the daemon process's fsuid stayed its own ($(stat -c %u "/proc/$D")) while it read the member's files"

# Root's 0600 file where the member's job names it: not registered, the
# job's log saying why as the member would meet it.
head -c 16 /dev/zero > "$TEST_TMP/secret" && chmod 0600 "$TEST_TMP/secret"
cat > specs/s.ini <<INI
[steal]
stage = exec
command = echo '{"type":"artifact","name":"s","path":"$TEST_TMP/secret"}' >> "\$PL_EVENTS"
INI
chmod 0644 specs/s.ini
mctl submit --name s1 specs/s.ini >/dev/null || fail "s1: the member could not submit"
wait_run s1 succeeded 60
grep -q "s1/steal: artifact s: $TEST_TMP/secret: Permission denied" "$TEST_TMP/pipelined.out" ||
	fail "root's file was not refused with Permission denied: $(grep s1/steal "$TEST_TMP/pipelined.out")"
pctl artifacts s1 | grep -q secret && fail "root's file was registered for the member"
grep -q 'privileged parent: refused' "$TEST_TMP/pipelined.out" &&
	fail "the parent refused the daemon: $(grep 'privileged parent' "$TEST_TMP/pipelined.out")"
pl_stop
echo ok
