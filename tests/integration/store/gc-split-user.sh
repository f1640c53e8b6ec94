#!/bin/bash
# store/gc-split-user.sh: gc of a member's run in a split daemon whose
# daemon process runs as its own user (user = _pipelined, pipelined(8)
# SECURITY). The member's job writes its artifacts (two files and a
# directory) in its work directory, the member's and mode 0750, which
# _pipelined cannot enter: gc removes them through the privileged parent
# (PRIV_RMTREE), nothing is left pending, and the records say removed. A
# link the member plants on the way in its own run's directory is not
# followed by the parent: the file it points at stays.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
. "$TOP/tests/lib/member.sh"
pl_user _pipelined
MEMBER_CONF_TAIL=$(printf '[retention]\nkeep_promoted = 1\nkeep_days = 0\nmin_size = 0')
member_daemon "user = _pipelined"
RUNS=$TEST_TMP/state/runs
gspec() {
	cat > "specs/$1.ini" <<INI
[run]
name = $1
[make]
stage = exec
command = head -c 1000 /dev/zero > a.bin; head -c 2000 /dev/zero > b.bin; mkdir -p d; head -c 100 /dev/zero > d/x; for f in a.bin b.bin d; do echo "{\\"type\\":\\"artifact\\",\\"name\\":\\"\$f\\",\\"path\\":\\"\$f\\"}" >> "\$PL_EVENTS"; done
INI
	chmod 0644 "specs/$1.ini"
}
mctl() { as_member "$PIPELINECTL" -f "$PL_CONF" "$@"; }
gspec g1
mctl submit specs/g1.ini >/dev/null || fail "g1: the member could not submit"
wait_run g1 succeeded 60
[ "$(db "SELECT count(*) FROM artifacts a JOIN runs r ON r.id = a.run_id WHERE r.name = 'g1'")" = 3 ] ||
	fail "g1's artifacts were not registered: $(pctl artifacts g1)"
[ "$(stat -c '%U %a' "$RUNS/g1/make/work")" = "nobody 750" ] ||
	fail "g1's work directory: $(stat -c '%U %a' "$RUNS/g1/make/work"), wanted nobody's 0750"
setpriv --reuid=_pipelined --regid=_pipelined --clear-groups ls "$RUNS/g1/make/work" >/dev/null 2>&1 &&
	fail "_pipelined can list the member's work directory: the test shows nothing"

mctl gc g1 > gc.txt 2> gc.err || fail "the member's gc g1: $(cat gc.txt gc.err)"
for f in a.bin b.bin d; do
	[ -e "$RUNS/g1/make/work/$f" ] && fail "g1's $f stayed: $(grep gc_finish "$TEST_TMP/pipelined.out")"
done
[ "$(db "SELECT count(*) FROM artifacts a JOIN runs r ON r.id = a.run_id WHERE r.name = 'g1'
    AND a.removed IS NULL")" = 0 ] || fail "g1's records not marked removed"
grep -q "gc_finish: .*g1" "$TEST_TMP/pipelined.out" &&
	fail "gc left g1's paths pending: $(grep gc_finish "$TEST_TMP/pipelined.out")"
[ -f "$RUNS/g1/make/job.log" ] || fail "g1's log went: gc removes artifact files only"
note "a member's artifacts in its 0750 work directory removed through the parent"

# A link on the way, the member's own doing: once its job's artifact
# sub/a.bin is recorded, the member replaces sub in its work directory by
# a link to a directory of its own elsewhere. The daemon cannot enter the
# work directory; the parent's walk does not follow the link: the file
# there stays, and gc says why.
K=$TEST_TMP/keep; mkdir -p "$K" && echo keep > "$K/a.bin" && chown -R nobody "$K"
cat > specs/g2.ini <<INI
[run]
name = g2
[make]
stage = exec
command = mkdir sub; echo x > sub/a.bin; echo '{"type":"artifact","name":"a","path":"sub/a.bin"}' >> "\$PL_EVENTS"
INI
chmod 0644 specs/g2.ini
mctl submit specs/g2.ini >/dev/null || fail "g2: the member could not submit"
wait_run g2 succeeded 60
pctl artifacts g2 | grep -q "sub/a.bin" || fail "g2's artifact was not registered: $(pctl artifacts g2)"
as_member sh -c "rm -r '$RUNS/g2/make/work/sub' && ln -s '$K' '$RUNS/g2/make/work/sub'" ||
	fail "the member could not plant its link"
mctl gc g2 > gc2.txt 2>&1 && fail "gc g2 succeeded through a link: $(cat gc2.txt)"
[ -f "$K/a.bin" ] || fail "the parent followed a link in the member's run directory"
grep -q "g2/make/work/sub/a.bin: .*a link on the way: not followed" gc2.txt ||
	fail "gc g2 does not say why: $(cat gc2.txt)"
note "a link on the way not followed by the parent"

# A slow removal does not hold up the parent (PRIV_RMTREE in a helper of
# the parent's): fan_hold.py holds the first open of g3's artifact
# directory d, the remover's walk into it, until the test lets it go.
# Held, the remover is a child of the parent's, not the parent; the
# parent meanwhile serves the job thread of the member's running g4,
# whose second job, started once the first ends, reads its events and
# artifact through a file server of the parent's (PRIV_FILES); released,
# gc g3 finishes.
gspec g3
mctl submit specs/g3.ini >/dev/null || fail "g3: the member could not submit"
wait_run g3 succeeded 60
cat > specs/g4.ini <<INI
[run]
name = g4
[wait]
stage = exec
command = while [ ! -e $TEST_TMP/go ]; do sleep 0.1; done
[make]
stage = exec
after = wait
command = echo x > a.bin; echo '{"type":"artifact","name":"a","path":"a.bin"}' >> "\$PL_EVENTS"
INI
chmod 0644 specs/g4.ini
mctl submit specs/g4.ini >/dev/null || fail "g4: the member could not submit"
wait_run g4 running 60
python3 "$TOP/tests/helpers/fan_hold.py" "$RUNS/g3/make/work/d" held release > hold.out 2>&1 &
HOLD=$!
for _ in $(seq 100); do grep -q ready hold.out && break; sleep 0.1; done
grep -q ready hold.out || fail "fan_hold.py: $(cat hold.out)"
mctl gc g3 > gc3.txt 2>&1 &
GC=$!
for _ in $(seq 200); do [ -s held ] && break; sleep 0.1; done
[ -s held ] || { touch release; fail "gc g3 never opened g3's d: $(cat gc3.txt hold.out)"; }
H=$(cat held)
[ "$H" != "$PL_PID" ] || { touch release; fail "the parent removes g3's tree itself, its loop held meanwhile"; }
[ "$(ps -o ppid= -p "$H" | tr -d ' ')" = "$PL_PID" ] ||
	{ touch release; fail "g3's remover $H is not the parent's child"; }
touch "$TEST_TMP/go"
ok=0
for _ in $(seq 150); do
	[ "$(db "SELECT count(*) FROM artifacts a JOIN runs r ON r.id = a.run_id WHERE r.name = 'g4'")" = 1 ] &&
		{ ok=1; break; }
	sleep 0.1
done
touch release
[ $ok = 1 ] || fail "g4's artifact waited for g3's removal: the parent's loop was held"
wait $GC || fail "gc g3: $(cat gc3.txt)"
wait $HOLD
[ -e "$RUNS/g3/make/work/d" ] && fail "g3's d stayed: $(cat gc3.txt)"
wait_run g4 succeeded 60
note "a held removal in the parent's helper; the parent served g4 meanwhile"

# The parent refused nothing else.
grep 'privileged parent: refused' "$TEST_TMP/pipelined.out" | grep -qv "sub: .*not followed" &&
	fail "the parent refused the daemon: $(grep 'privileged parent' "$TEST_TMP/pipelined.out")"
integrity_ok || fail "the store is not intact"
pl_stop
echo ok
