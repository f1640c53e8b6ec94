#!/bin/bash
# kill-lifecycle.sh: the tiny lifecycle (etc/examples/tiny.ini: tokenize
# through gate, a real tiny Gemma 3 trained, merged, converted, quantized,
# registered and baked; the inference server is whatever e2e_prepare in
# tests/lib/e2e.sh sets up, today the Ollama STAND-IN serving real
# llama-server runners) with the daemon killed -9 at random moments.
#
#   KILLS=N   kills in all (default 20)
#   RUNS=N    killed runs the kills are spread over (default KILLS)
#   KILL_SEED=N repeats a choice of moments (the seed is printed)
#   EPOCHS=N  training epochs of both releases (default 2, checkpoints
#             every 10 steps; the specs' own 24 epochs take half an hour
#             of a loaded 2-core machine per run, 0 keeps them)
#
# tiny-v1 runs first, and the state directory is kept as it left it. An
# undisturbed run of tiny-v2 follows; then RUNS runs of the same spec
# under the same name, each on a copy of the kept state directory (so the
# paths recorded in the artifacts, which name the run, are the same),
# killed at moments drawn uniformly over 90% of the last run's duration
# (the daemon started again at once each time, on the same store; a
# moment that comes after its run ended moves to an extra run). Every killed run must end as the undisturbed one did: the same
# gate verdict and byte-identical artifacts (tokens and stats, adapter,
# merged, fixed and its manifest, both GGUFs, both bake results), the
# store whole and the event ids gapless. The bake results hold wall times
# (per case, and s_per_case), which no two runs share: they are compared
# with those fields taken out, everything else byte for byte. Figures:
# each run's duration and what each kill interrupted.
# tests/integration/e2e/kill-random.sh runs it with KILLS=5 RUNS=1.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/e2e.sh"
KILLS=${KILLS:-20}
RUNS=${RUNS:-$KILLS}
trap 'e2e_stop; pl_kill9 2>/dev/null' EXIT
cd "$TEST_TMP"
SEED=${KILL_SEED:-$(( $(date +%s) % 32768 ))}
RANDOM=$SEED
note "KILL_SEED=$SEED KILLS=$KILLS RUNS=$RUNS"
e2e_prepare "$TEST_TMP/e2e"
EPOCHS=${EPOCHS:-2}
if [ "$EPOCHS" != 0 ]; then
	sed -i -e "s/^num_train_epochs = .*/num_train_epochs = $EPOCHS/" \
	    -e "s/^save_steps = .*/save_steps = 10/" "$E2E_V1" "$E2E_V2"
fi
# Every run does its work (and is killed doing it): none takes an earlier
# run's by its keys (pipeline.ini(5), reuse), so each killed run is
# compared with the undisturbed one job by job, all "succeeded".
sed -i '/^\[run\]/a reuse = no' "$E2E_V1" "$E2E_V2"
grep -q '^reuse = no$' "$E2E_V2" || fail "no [run] section in $E2E_V2 to turn reuse off in"
pl_conf "python = /usr/bin/python3" "max_jobs = 2"
pl_start

# outcome RUN: the run's state, the gate's verdict, and one line per
# artifact (job, name, sha256 of the last one registered under that name;
# for the bake results, of their text without the wall times).
outcome() {
	local run=$1
	echo "state $(run_state "$run")"
	pctl values "$run" gate | sed -n 's/^gate *gate.verdict *//p' | /usr/bin/python3 -c '
import json, sys
v = json.load(sys.stdin)
print("verdict %s pass %s" % (v["verdict"], v["pass"]))'
	db "SELECT j.name, a.name, a.path, a.sha256 FROM artifacts a JOIN jobs j ON j.id = a.job_id
	    JOIN runs r ON r.id = a.run_id WHERE r.name = '$run' AND a.id IN (SELECT max(b.id)
	    FROM artifacts b WHERE b.run_id = a.run_id GROUP BY b.job_id, b.name) ORDER BY 1, 2" |
	    /usr/bin/python3 -c '
import hashlib, json, sys
for l in sys.stdin:
    job, name, path, sha = l.rstrip("\n").split("|")
    if name == "results" and job.startswith("bake"):
        d = json.load(open(path))
        d.pop("s_per_case", None)
        for row in d.get("rows", {}).values():
            row[4] = None            # the case'"'"'s wall time
        sha = "untimed:" + hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()
    print("artifact %s %s %s" % (job, name, sha))'
}
# gate_reached RUN: every job but the gate (whose verdict may fail it)
# succeeded.
gate_reached() {
	pctl --json status "$1" | /usr/bin/python3 -c '
import json, sys
for j in json.load(sys.stdin)["jobs"]:
    if j["state"] != "succeeded" and j["name"] != "gate":
        sys.exit("job %s ended %s" % (j["name"], j["state"]))'
}
# fresh_state: the state directory as tiny-v1 left it, under a stopped daemon.
fresh_state() {
	pl_stop
	rm -rf "$TEST_TMP/state"
	cp -a "$TEST_TMP/state-v1" "$TEST_TMP/state"
	pl_start
}

pctl submit "$E2E_V1" >/dev/null || fail "submit tiny-v1"
st=$(wait_end tiny-v1 3600)
note "tiny-v1: $st"
case "$st" in succeeded|failed|rejected) ;; *) fail "tiny-v1 did not end: $st";; esac
gate_reached tiny-v1 || fail "tiny-v1 did not get to its gate"
pl_stop
cp -a "$TEST_TMP/state" "$TEST_TMP/state-v1"
pl_start

t0=$(date +%s.%N)
pctl submit "$E2E_V2" >/dev/null || fail "submit tiny-v2"
st=$(wait_end tiny-v2 3600)
t1=$(date +%s.%N)
case "$st" in succeeded|rejected) ;; *) fail "tiny-v2 did not end: $st";; esac
outcome tiny-v2 > ref.out
tref=$(/usr/bin/python3 -c "print('%.1f' % ($t1 - $t0))")
tlast=$tref
note "undisturbed tiny-v2: $st in ${tref}s, $(grep -c '^artifact' ref.out) artifacts, $(grep verdict ref.out)"
[ "$(grep -c '^artifact' ref.out)" -ge 8 ] || { cat ref.out; fail "too few artifacts in the undisturbed run"; }

made=0 missed=0 r=0
while [ "$made" -lt "$KILLS" ]; do
	r=$((r + 1))
	[ "$r" -le $((RUNS + 10)) ] || fail "$made kills made of $KILLS in $((r - 1)) runs"
	# A kill whose moment came after its run ended goes to an extra run.
	if [ "$r" -le "$RUNS" ]; then
		k=$(( KILLS / RUNS + (r <= KILLS % RUNS ? 1 : 0) ))
	else
		k=$((KILLS - made))
	fi
	# k moments in ms, uniform over 90% of the last run's duration (the
	# undisturbed run's at first; the machine's load changes it): every
	# stage from tokenize to gate may be interrupted.
	window=$(/usr/bin/python3 -c "print(int($tlast * 900))")
	at=$(for _ in $(seq 1 "$k"); do echo $(( (RANDOM * 32768 + RANDOM) % window )); done | sort -n)
	integrity_ok
	events_gapless
	fresh_state
	run=tiny-v2
	s0=$(date +%s%N)
	pctl submit "$E2E_V2" >/dev/null || fail "submit $run (killed run $r)"
	done_k=0
	for ms in $at; do
		while [ $(( ($(date +%s%N) - s0) / 1000000 )) -lt "$ms" ]; do sleep 0.05; done
		st=$(run_state "$run")
		case "$st" in succeeded|failed|cancelled|rejected)
			missed=$((missed + 1))
			note "run $r ended before its kill at ${ms} ms: the kill goes to an extra run"
			break;;
		esac
		jobs=$(pctl --json status "$run" | /usr/bin/python3 -c '
import json, sys
print(",".join(j["name"] for j in json.load(sys.stdin)["jobs"] if j["state"] == "running") or "-")')
		pl_kill9
		made=$((made + 1)) done_k=$((done_k + 1))
		note "kill $made: run $r at $((ms / 1000)).$(printf %03d $((ms % 1000))) s, running: $jobs"
		pl_start
	done
	st=$(wait_end "$run" 3600)
	s1=$(date +%s%N)
	tlast=$(( (s1 - s0) / 1000000000 ))
	outcome "$run" > "killed-$r.out"
	note "killed run $r: $st in $(( (s1 - s0) / 1000000000 ))s with $done_k kill(s)"
	diff -u ref.out "killed-$r.out" || fail "killed run $r did not end as the undisturbed run"
	gate_reached "$run" || fail "a job of killed run $r did not come back"
done
integrity_ok
events_gapless
pl_stop
note "$KILLS kills over $r run(s) ($missed run(s) ended before a kill, which moved on): every run ended as the undisturbed run (${tref}s)"
echo "kill-lifecycle: ok"
