#!/bin/bash
# sched/plan.sh: `submit --plan` and `check --plan` against a real daemon
# say, before anything runs, what each job would do and why, and submit
# nothing. On a fresh store every job runs: "no earlier run", gate "never
# reuses", an exec job without reuse = yes "reuses only with reuse = yes".
# After a run of the spec (exec jobs with reuse = yes, and convert and
# quantize of the tiny fixture, pure stages reused by default), the plan
# of the same spec reuses each of them, naming the run and job; a changed
# key names the key with its old and new values, and a job after it waits
# for it ("runs after"); reuse = no in [run] or on a job is said; --json
# gives the same plan; and the run submitted afterwards does what the plan
# said. A plan is made off the daemon's loop and survives its client.
. "$(dirname "$0")/../../lib.sh"
pl_conf
pl_start
S=$TEST_TMP/specs; O=$TEST_TMP/out; mkdir -p "$S" "$O"
echo "hello" > "$S/src.txt"
FX=$TEST_TMP/fx
/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$FX" --layout causal > "$FX.log" 2>&1 ||
	{ cat "$FX.log"; fail "gen_gemma3.py"; }

# spec FILE SUFFIX [RUN-LINES]
spec() {
	cat > "$1" <<INI
[run]
name = p1
${3:-}
[make]
stage = exec
reuse = yes
input = $S/src.txt
command = echo make >> $O/count; tr a-z A-Z < "\$PL_INPUT" > out.txt; echo '{"type":"artifact","name":"out","path":"out.txt"}' >> "\$PL_EVENTS"
[use]
stage = exec
reuse = yes
after = make
input = make.out
env = SUFFIX=$2
command = echo use >> $O/count; (cat "\$PL_INPUT"; echo \$SUFFIX) > final.txt; echo '{"type":"artifact","name":"final","path":"final.txt"}' >> "\$PL_EVENTS"
[last]
stage = exec
reuse = yes
after = use
input = use.final
command = echo last >> $O/count; cp "\$PL_INPUT" last.txt; echo '{"type":"artifact","name":"last","path":"last.txt"}' >> "\$PL_EVENTS"
[plain]
stage = exec
command = echo plain >> $O/count
[convert]
input = $FX
[quantize]
after = convert
[gate]
after = last
INI
}
# line OUT JOB: the plan's line of JOB.
line() { grep "^$2: " "$1" || { cat "$1"; fail "the plan has no line for $2"; }; }
expect() {	# expect OUT JOB TEXT
	line "$1" "$2" | grep -qF -- "$3" || { cat "$1"; fail "plan of $2: wanted \"$3\""; }
}
count() { [ -f "$O/count" ] && tr '\n' ' ' < "$O/count" | sed 's/ $//'; }
# nothing_done OUT RUNS: plain and gate never reuse, and the plan ran
# nothing and left RUNS runs in the store.
nothing_done() {
	expect "$1" plain "plain: run (stage exec reuses only with reuse = yes)"
	expect "$1" gate "gate: run (stage gate never reuses)"
	[ -z "$(count)" ] || fail "a plan ran programs: $(count)"
	[ "$(db "SELECT count(*) FROM runs")" = "$2" ] || fail "a plan submitted a run"
}
spec "$S/a.ini" one

# A fresh store: everything runs, and why.
pctl check --plan "$S/a.ini" > "$O/p0" || { cat "$O/p0"; fail "check --plan on a fresh store"; }
[ "$(wc -l < "$O/p0")" = 7 ] || { cat "$O/p0"; fail "not one line a job"; }
for j in make use last convert quantize; do
	expect "$O/p0" "$j" ": run (no earlier run of stage"
done
nothing_done "$O/p0" 0
note "a fresh store: $(line "$O/p0" make)"

pctl submit "$S/a.ini" > /dev/null || fail "submit p1"
wait_run p1 failed 60	# gate has no bakes to compare
for j in make use last plain convert quantize; do
	[ "$(job_state p1 $j)" = succeeded ] || fail "p1/$j is $(job_state p1 $j)"
done
# explain says the same of the jobs that never reuse.
pctl explain p1 gate | grep -qx "ran: stage gate never reuses (pipeline.ini(5) reuse)" ||
	{ pctl explain p1 gate; fail "explain p1 gate does not say gate never reuses"; }
pctl explain p1 plain | grep -qx "ran: stage exec reuses only with reuse = yes (pipeline.ini(5) reuse)" ||
	{ pctl explain p1 plain; fail "explain p1 plain does not say why"; }

# The same spec again: every job that may be reused is, by name.
: > "$O/count"
pctl submit --plan --name p2 "$S/a.ini" > "$O/p1" || { cat "$O/p1"; fail "submit --plan"; }
for j in make use last convert quantize; do
	expect "$O/p1" "$j" "$j: reuse p1/$j (the same key as job $j of run p1"
done
nothing_done "$O/p1" 1
note "the same spec: $(line "$O/p1" quantize)"

# --json: the same plan, as data.
pctl --json check --plan "$S/a.ini" > "$O/j1" || fail "--json check --plan"
/usr/bin/python3 - "$O/j1" <<'PY' || fail "--json plan: $(cat "$O/j1")"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["ok"] and o["verb"] == "check" and o["submitted"] is False, o
plan = {e["job"]: e for e in o["plan"]}
assert plan["use"]["action"] == "reuse" and plan["use"]["from_run"] == "p1", plan["use"]
assert plan["use"]["from_job"] == "use" and len(plan["use"]["key"]) == 64, plan["use"]
assert plan["gate"]["action"] == "run" and plan["gate"]["why"] == ["stage gate never reuses"]
PY

# A changed key: use runs and says why; last waits for it; make is reused.
spec "$S/b.ini" two
pctl check --plan "$S/b.ini" > "$O/p2" || { cat "$O/p2"; fail "check --plan b"; }
expect "$O/p2" make "make: reuse p1/make"
expect "$O/p2" use "key env: SUFFIX=one -> SUFFIX=two"
expect "$O/p2" last "last: run (runs after use, which runs"
note "a changed key: $(line "$O/p2" use)"

# reuse = no in [run]: said for every job.
spec "$S/c.ini" one "reuse = no"
pctl check --plan "$S/c.ini" > "$O/p3" || { cat "$O/p3"; fail "check --plan c"; }
expect "$O/p3" make "make: run (reuse = no in [run])"
expect "$O/p3" convert "convert: run (reuse = no in [run])"

# reuse = no on one job: said for it; the job after it waits for it.
sed '/^\[convert\]/a reuse = no' "$S/a.ini" > "$S/d.ini"
pctl check --plan "$S/d.ini" > "$O/p4" || { cat "$O/p4"; fail "check --plan d"; }
expect "$O/p4" convert "convert: run (reuse = no on the job)"
expect "$O/p4" quantize "quantize: run (runs after convert, which runs"
expect "$O/p4" make "make: reuse p1/make"

# The run does what its plan said.
: > "$O/count"
pctl submit --name p3 "$S/b.ini" > /dev/null || fail "submit p3"
wait_run p3 failed 60
for j in make convert quantize; do
	[ "$(job_state p3 $j)" = reused ] || fail "p3/$j is $(job_state p3 $j), as planned: reused"
done
for j in use last plain; do
	[ "$(job_state p3 $j)" = succeeded ] || fail "p3/$j is $(job_state p3 $j), as planned: run"
done
[ "$(count)" = "use plain last" ] || [ "$(count)" = "plain use last" ] || fail "p3 ran: $(count)"
note "p3 did what its plan said"

# A plan is made off the daemon's loop: while one hashes a large input
# (512 MiB, sparse), other clients are answered; its client going away in
# the middle leaves the daemon serving; the next plan takes the digest
# from the cache.
truncate -s 512M "$S/big.bin"
printf '[run]\nname = big\n[b]\nstage = exec\nreuse = yes\ninput = %s\ncommand = true\n' "$S/big.bin" > "$S/big.ini"
"$PIPELINECTL" -f "$PL_CONF" check --plan "$S/big.ini" > "$O/big1" 2>&1 &
cpid=$!
sleep 0.3
t0=$(date +%s%N)
pctl status > /dev/null || fail "status while a plan hashes"
t1=$(date +%s%N)
[ $(( (t1 - t0) / 1000000 )) -lt 1000 ] || fail "status took $(( (t1 - t0) / 1000000 )) ms while a plan hashed"
kill "$cpid" 2>/dev/null; wait "$cpid" 2>/dev/null
[ "$(db "SELECT count(*) FROM digests WHERE path = '$S/big.bin'")" = 0 ] ||
	note "the plan was done before its client went (a fast machine): the orphan path was not taken"
for _ in $(seq 1 100); do
	[ "$(db "SELECT count(*) FROM digests WHERE path = '$S/big.bin'")" = 1 ] && break
	sleep 0.1
done
[ "$(db "SELECT count(*) FROM digests WHERE path = '$S/big.bin'")" = 1 ] || fail "the abandoned plan kept no digest"
pctl list > /dev/null || fail "the daemon does not answer after a plan's client went"
pctl check --plan "$S/big.ini" > "$O/big2" || { cat "$O/big2"; fail "check --plan big"; }
expect "$O/big2" b "b: run (against job "
note "status answered in $(( (t1 - t0) / 1000000 )) ms while a plan hashed 512 MiB"

# A plan is refused like a check: bad specs name the line.
printf '[x]\nstage = exec\nreuse = maybe\ncommand = true\n' > "$S/bad.ini"
rc=0; pctl submit --plan "$S/bad.ini" > "$O/x" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$O/x"; fail "submit --plan of a bad spec exited $rc, not 1"; }
grep -qF "bad.ini:3: reuse: must be yes or no" "$O/x" || { cat "$O/x"; fail "bad spec's plan"; }
pl_stop
echo "PASS"
