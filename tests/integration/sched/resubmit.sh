#!/bin/bash
# sched/resubmit.sh: a spec submitted again under a run's name makes the
# run's next revision (pipelinectl(1) submit). exec jobs with reuse = yes
# that count their runs in a file: an edited key reruns its job and the
# job after it, the others end reused; the first revision stays readable
# as RUN@1 (status, logs, explain, artifacts), RUN names the newest (status,
# watch), a notification names RUN@N, and revisions past the first run in runs/RUN@N; retry says it
# runs the stored spec and refuses an older revision; a resubmit while
# the newest revision runs is refused, naming its state; another user's
# submit of the name is refused without naming whose it is; previous =
# RUN is RUN's newest revision that succeeded, RUN@N that one, and a
# previous naming the run itself is refused; a kill -9 right after a
# resubmit's commit comes back to the same revisions; gc of the first
# revision keeps what later revisions took from it; web's link names the
# revision.
# run.sh: alone (it kills the daemon with -9).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/member.sh"
mkdir -p "$TEST_TMP/notified"
MEMBER_CONF_TAIL=$(printf '[retention]\nkeep_days = 0\nmin_size = 0\n[notify]\nevents = run.end\ncommand = cat > %s/$PL_NOTIFY_KEY.json\n' "$TEST_TMP/notified")
member_setup "$TOP/plugins/exec.so"
# The notify command runs as the daemon process's user (_pipelined), who
# owns state_dir: notified/ is that user's to write.
chown "$(stat -c %U "$TEST_TMP/state")" "$TEST_TMP/notified"
S=$TEST_TMP/specs; X=$TEST_TMP/x
: > "$R/count"

# spec FILE SUFFIX [TAIL]: run rel; make, other (independent), use (after
# make, SUFFIX in its env), last (after use); TAIL more sections.
spec() {
	cat > "$1" <<INI
[run]
name = rel
[make]
stage = exec
reuse = yes
command = echo make >> $R/count; echo hello > out.txt; echo '{"type":"artifact","name":"out","path":"out.txt"}' >> "\$PL_EVENTS"
[other]
stage = exec
reuse = yes
command = echo other >> $R/count; echo other > o.txt; echo '{"type":"artifact","name":"o","path":"o.txt"}' >> "\$PL_EVENTS"
[use]
stage = exec
reuse = yes
after = make
input = make.out
env = SUFFIX=$2
command = echo use >> $R/count; (cat "\$PL_INPUT"; echo \$SUFFIX) > final.txt; echo '{"type":"artifact","name":"final","path":"final.txt"}' >> "\$PL_EVENTS"
[last]
stage = exec
reuse = yes
after = use
input = use.final
command = echo last >> $R/count; wc -c < "\$PL_INPUT" > n.txt; echo '{"type":"artifact","name":"n","path":"n.txt"}' >> "\$PL_EVENTS"
${3:-}
INI
}
# The programs that ran, sorted (make and other run side by side).
count() { sort "$R/count" | tr '\n' ' ' | sed 's/ $//'; }
states() { for j in make other use last; do printf '%s ' "$(job_state "$1" $j)"; done | sed 's/ $//'; }

spec "$S/a.ini" one
[ "$(pctl submit "$S/a.ini")" = rel ] || fail "the first submit is not named rel"
wait_run rel succeeded 30
[ "$(count)" = "last make other use" ] || fail "rel ran: $(count)"
f1=$(artifact_path rel use final)
[ "$(cat "$f1")" = "hello
one" ] || fail "rel's final: $(cat "$f1")"

# The edited spec under the same name: revision 2; only use and last run.
: > "$R/count"
spec "$S/b.ini" two
out=$(pctl submit "$S/b.ini") || fail "the resubmit was refused: $out"
[ "$out" = rel@2 ] || fail "the resubmit is named $out, wanted rel@2"
wait_run rel@2 succeeded 30
[ "$(states rel@2)" = "reused reused succeeded succeeded" ] || fail "rel@2: $(states rel@2)"
[ "$(count)" = "last use" ] || fail "rel@2 ran: $(count)"
pctl explain rel@2 use > "$X" || fail "explain rel@2 use"
grep -q "key env: SUFFIX=one -> SUFFIX=two" "$X" || { cat "$X"; fail "explain rel@2 use does not name env"; }
note "the resubmit reran use and last only; explain: $(grep 'key env' "$X")"

# rel is the newest revision; rel@1 is the first, as it was.
pctl status rel | grep -q "^run rel@2: succeeded" || { pctl status rel; fail "status rel is not rel@2"; }
pctl status rel@1 > "$X" || fail "status rel@1"
grep -q "^run rel: succeeded" "$X" || { cat "$X"; fail "status rel@1 is not the first revision"; }
[ "$(states rel@1)" = "succeeded succeeded succeeded succeeded" ] || fail "rel@1: $(states rel@1)"
[ "$(artifact_path rel@1 use final)" = "$f1" ] && [ "$(cat "$f1")" = "hello
one" ] || fail "rel@1's final changed"
f2=$(artifact_path rel@2 use final)
case "$f2" in "$TEST_TMP"/state/runs/rel@2/use/*) ;; *) fail "rel@2's final is not under runs/rel@2: $f2" ;; esac
[ "$(cat "$f2")" = "hello
two" ] || fail "rel@2's final: $(cat "$f2")"
[ "$(artifact_path rel@2 make out)" = "$(artifact_path rel@1 make out)" ] || fail "rel@2 did not take rel's make"
pctl logs rel@1 use | grep -q . || fail "logs rel@1 use is empty"
pctl explain rel@1 use | grep -q "^rel/use: succeeded" || { pctl explain rel@1 use; fail "explain rel@1 use"; }
for _ in $(seq 1 50); do grep -lq '"run":"rel@2"' "$TEST_TMP"/notified/*.json 2>/dev/null && break; sleep 0.1; done
grep -l '"run":"rel@2"' "$TEST_TMP"/notified/*.json | xargs grep -q '"event":"run.end"' ||
	{ cat "$TEST_TMP"/notified/*.json; fail "no run.end notification names rel@2"; }
pctl status rel@3 > "$X" 2>&1 && fail "status rel@3 answered"
grep -q "no run rel@3" "$X" || { cat "$X"; fail "status rel@3: $(cat "$X")"; }
timeout 20 "$PIPELINECTL" -f "$PL_CONF" watch --plain rel > "$X" 2>&1 || { cat "$X"; fail "watch rel"; }
grep -q "rel@2" "$X" || { cat "$X"; fail "watch rel does not follow rel@2"; }
[ "$(db "SELECT group_concat(name || ':' || base || ':' || revision, ' ') FROM (SELECT * FROM runs ORDER BY id)")" = "rel:rel:1 rel@2:rel:2" ] ||
	fail "runs: $(db "SELECT name, base, revision FROM runs")"
note "status rel@1 shows the first revision; rel names rel@2, in runs/rel@2"

# retry runs the stored spec and says so; an older revision is refused.
pctl retry rel use > "$X" 2>&1 || { cat "$X"; fail "retry rel use"; }
grep -q "retrying the stored spec of rel@2; to run an edited spec, submit it" "$X" ||
	{ cat "$X"; fail "retry does not say it runs the stored spec"; }
wait_run rel@2 succeeded 30
pctl retry rel@1 > "$X" 2>&1 && fail "a retry of rel@1 was taken"
grep -q "run rel@1 has a newer revision, rel@2" "$X" || { cat "$X"; fail "retry rel@1: $(cat "$X")"; }
note "retry: $(cat "$X")"

# A resubmit while the newest revision runs: refused, naming its state.
spec "$S/c.ini" three "[hold]
stage = exec
command = while [ ! -e $R/go ]; do sleep 0.1; done"
pctl submit "$S/c.ini" >/dev/null || fail "submit rel@3"
for _ in $(seq 1 100); do [ "$(job_state rel@3 hold)" = running ] && break; sleep 0.1; done
pctl submit "$S/c.ini" > "$X" 2>&1 && fail "a resubmit of a running run was taken"
grep -q "run rel@3 is running" "$X" || { cat "$X"; fail "the refusal does not name the state: $(cat "$X")"; }
note "resubmit while running: $(cat "$X")"
touch "$R/go"
wait_run rel@3 succeeded 30

# Another user's submit of the name: refused, naming no one.
cp "$S/b.ini" specs/m.ini; chmod 0644 specs/m.ini
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/m.ini > "$X" 2>&1 && fail "the member took root's run name"
grep -q "the run name rel is another user's" "$X" || { cat "$X"; fail "member's refusal: $(cat "$X")"; }
grep -Eqi "root|uid|owner" "$X" && fail "the refusal names whose the run is: $(cat "$X")"
[ "$(db "SELECT count(*) FROM runs WHERE base = 'rel'")" = 3 ] || fail "the member's refusal left a revision"
note "another user's submit: $(cat "$X")"
# The member's own name is the member's to resubmit.
sed 's/^name = rel$/name = mine/; s#'"$R"'/count#'"$O"'/count#' "$S/a.ini" > specs/m.ini
: > "$O/count"; chmod 0666 "$O/count"
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/m.ini >/dev/null || fail "the member's submit"
wait_run mine succeeded 30
[ "$(as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/m.ini)" = mine@2 ] || fail "the member's resubmit"
wait_run mine@2 succeeded 30
[ "$(states mine@2)" = "reused reused reused reused" ] || fail "mine@2: $(states mine@2)"
pctl submit specs/m.ini > "$X" 2>&1 && fail "root took the member's run name"
grep -q "another user's" "$X" || fail "root's refusal: $(cat "$X")"

# previous: RUN is its newest revision that succeeded, RUN@N that one.
pfail() { printf '[run]\nname = %s\nprevious = %s\n[x]\nstage = exec\ncommand = %s\n' "$1" "$2" "$3" > "$S/$1.ini"; }
pfail rel rel@1 true
pctl submit "$S/rel.ini" > "$X" 2>&1 && fail "a previous naming the run itself was taken"
grep -q "specs/rel.ini:3: previous: previous = rel@1 names this run" "$X" || { cat "$X"; fail "previous = self: $(cat "$X")"; }
pfail p1 "rel@0" true
pctl check "$S/p1.ini" > "$X" 2>&1 && fail "check took previous = rel@0"
grep -q "p1.ini:3: previous: bad run name \"rel@0\"" "$X" || { cat "$X"; fail "previous = rel@0: $(cat "$X")"; }
pfail rel2 rel "exit 3"
pctl submit "$S/rel2.ini" >/dev/null; wait_run rel2 failed 30
pfail rel2 rel true
pctl submit "$S/rel2.ini" >/dev/null; wait_run rel2@2 succeeded 30
pfail p2 rel2 true; pctl submit "$S/p2.ini" >/dev/null; wait_run p2 succeeded 30
pfail p3 rel@2 true; pctl submit "$S/p3.ini" >/dev/null; wait_run p3 succeeded 30
pfail p4 rel true; pctl submit "$S/p4.ini" >/dev/null; wait_run p4 succeeded 30
[ "$(db "SELECT group_concat(previous, ' ') FROM (SELECT previous FROM runs WHERE name IN ('p2', 'p3', 'p4') ORDER BY id)")" = "rel2@2 rel@2 rel@3" ] ||
	fail "previous resolved to: $(db "SELECT name, previous FROM runs WHERE name LIKE 'p%'")"
pctl --json status p2 | grep -q '"previous":"rel2@2"' || fail "status p2 does not name rel2@2"
note "previous = rel2 is rel2@2, the revision that succeeded; rel@2 is rel@2"

# kill -9 right after a resubmit's commit: the same revisions come back.
: > "$R/count"
spec "$S/d.ini" four
[ "$(pctl submit "$S/d.ini")" = rel@4 ] || fail "submit rel@4"
pl_kill9
pl_start
chmod 0666 "$TEST_TMP/run/control.sock"
wait_run rel@4 succeeded 30
[ "$(states rel@4)" = "reused reused succeeded succeeded" ] || fail "rel@4: $(states rel@4)"
[ "$(count)" = "last use" ] || fail "rel@4 ran: $(count)"
[ "$(db "SELECT group_concat(revision, ' ') FROM (SELECT revision FROM runs WHERE base = 'rel' ORDER BY revision)")" = "1 2 3 4" ] ||
	fail "rel's revisions after the kill: $(db "SELECT name, revision FROM runs WHERE base = 'rel'")"
[ "$(states rel@1)" = "succeeded succeeded succeeded succeeded" ] || fail "rel@1 after the kill: $(states rel@1)"
integrity_ok
events_gapless
note "kill -9 after a resubmit: rel@4 ran as it would have"

# gc of the first revision: what later revisions took from it stays.
mk=$(artifact_path rel make out)
pctl gc rel@1 > "$X" || { cat "$X"; fail "gc rel@1"; }
grep -q "keep rel make out: held by run rel@[0-9]*'s record" "$X" || { cat "$X"; fail "gc rel@1 does not keep make's out"; }
grep -q "removed rel use final" "$X" || { cat "$X"; fail "gc rel@1 did not remove rel's own final"; }
[ -f "$mk" ] && [ ! -e "$f1" ] && [ -f "$f2" ] || fail "gc rel@1 removed the wrong files"
[ "$(pctl status rel | head -1 | cut -d: -f1)" = "run rel@4" ] || fail "gc changed which revision rel is"
note "gc rel@1 kept what later revisions took, removed its own"

# The page's link names the revision the daemon resolved.
pl_stop
member_daemon "http_listen = 127.0.0.1:$(free_port)"
pctl web rel 2>/dev/null | grep -q "&run=rel@4$" || fail "web rel: $(pctl web rel 2>&1)"
pctl web rel@1 2>/dev/null | grep -q "&run=rel$" || fail "web rel@1: $(pctl web rel@1 2>&1)"
pl_stop
echo "PASS"
