#!/bin/bash
# sched/reuse-member.sh: reuse follows the access rules (pipelined(8)
# SECURITY). A member's run never takes the work of root's run of the same
# spec, and explain shows the member nothing of root's runs; the member's
# second run reuses the member's first, and the member's plans say so
# before each; root's next run may take the member's (root sees every
# run).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/member.sh"
member_setup "$TOP/plugins/exec.so"
cat > specs/m.ini <<INI
[make]
stage = exec
reuse = yes
command = echo make >> $O/count; echo same > out.txt; echo '{"type":"artifact","name":"out","path":"out.txt"}' >> "\$PL_EVENTS"
INI
chmod 0644 specs/m.ini
: > "$O/count"; chmod 0666 "$O/count"
count() { wc -l < "$O/count"; }
mctl() { as_member "$PIPELINECTL" -f "$PL_CONF" "$@"; }
msubmit() { mctl submit --name "$1" specs/m.ini >/dev/null || fail "$1: the member could not submit"; wait_run "$1" succeeded 30; }

pctl submit --name root1 specs/m.ini >/dev/null || fail "root1"
wait_run root1 succeeded 30
[ "$(count)" = 1 ] || fail "root1 did not run its program once"

# The member's plan: root's run, which the member may not read, is
# neither taken nor named.
mctl check --plan specs/m.ini > "$TEST_TMP/p" || { cat "$TEST_TMP/p"; fail "the member's check --plan"; }
grep -qx "make: run (no earlier run of stage exec)" "$TEST_TMP/p" ||
	{ cat "$TEST_TMP/p"; fail "the member's plan took or named root's run"; }

msubmit m1
[ "$(job_state m1 make)" = succeeded ] || fail "m1/make is $(job_state m1 make): it took root's work"
[ "$(count)" = 2 ] || fail "m1 did not run its program"
mctl explain m1 make > "$TEST_TMP/x" || fail "explain m1 make"
grep -q "no earlier run of stage exec" "$TEST_TMP/x" || { cat "$TEST_TMP/x"; fail "explain showed the member another's run"; }
grep -q root1 "$TEST_TMP/x" && fail "explain named root's run to the member"
mctl explain root1 make >/dev/null 2>&1 && fail "the member could explain root's run"
note "the member's run did not take root's work"

mctl submit --plan --name m2 specs/m.ini > "$TEST_TMP/p" || fail "the member's submit --plan"
grep -q "^make: reuse m1/make " "$TEST_TMP/p" || { cat "$TEST_TMP/p"; fail "the member's plan does not take m1's work"; }
msubmit m2
[ "$(job_state m2 make)" = reused ] || fail "m2/make is $(job_state m2 make), wanted reused"
[ "$(count)" = 2 ] || fail "m2 ran its program"
mctl explain m2 make | grep -q "of run m1" || fail "m2 did not take m1's work"
note "the member's second run reused the first"

pctl submit --name root2 specs/m.ini >/dev/null || fail "root2"
wait_run root2 succeeded 30
[ "$(job_state root2 make)" = reused ] || fail "root2/make is $(job_state root2 make), wanted reused"
[ "$(count)" = 2 ] || fail "root2 ran its program"
pl_stop
echo "PASS"
