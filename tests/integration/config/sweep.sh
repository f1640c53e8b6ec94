#!/bin/bash
# A sweep in a run spec (pipeline.ini(5) SWEEPS) through pipelinectl check
# and a real daemon: the job before the swept one runs once, the swept job
# and those after it once per variant (without a gate, everything after
# the swept job is swept; bake/sweep-gate has a gate); check lists the
# variants, status shows each variant job's values, and the status page's
# /api/run each job's values and expanded after list; a kill -9 and restart
# finds the same jobs (the stored text is expanded again). Bad input is
# refused whole with file:line, by check and by the daemon: a key the
# stage does not have (did you mean), an empty list, too many variants,
# a max_variants above pipelined.conf's ceiling, a value the key refuses.
. "$(dirname "$0")/../../lib.sh"
PORT=$(free_port)
pl_conf "max_variants = 8" "http_listen = 127.0.0.1:$PORT" "http_token = sweep-token-0123456789"
cd "$TEST_TMP"
S=$TEST_TMP/specs
mkdir -p "$S"
cat >"$S/sw.ini" <<INI
[run]
name = sw

[prep]
stage = exec
command = sh -c 'echo prep >>$TEST_TMP/ran'

[train]
stage = exec
after = prep
command = sh -c 'echo \$PL_SWEEP_VALUE >>$TEST_TMP/ran'
env = PL_SWEEP_VALUE=a
sweep = env: PL_SWEEP_VALUE=16 PL_SWEEP_VALUE=64 PL_SWEEP_VALUE=128

[bake]
stage = exec
after = train
command = sh -c 'echo bake >>$TEST_TMP/ran'

[publish]
stage = exec
after = bake
command = sh -c 'echo publish >>$TEST_TMP/ran'
INI
out=$(pctl check "$S/sw.ini") || fail "check refused the sweep: $out"
echo "$out"
echo "$out" | grep -qF "OK (run sw, 10 jobs)" || fail "check: not 10 jobs: $out"
echo "$out" | grep -qF "sweep of [train] (line 13): 3 variants" || fail "check: no sweep line"
echo "$out" | grep -qE "^  env=PL_SWEEP_VALUE=64 +train-2 bake-2 publish-2$" || fail "check: variant 2 not listed"

pl_start
pctl submit "$S/sw.ini" >/dev/null || fail "submit sw"
wait_run sw succeeded 60
sort "$TEST_TMP/ran" | uniq -c | sed 's/^ *//' >counts.txt
cat counts.txt
grep -qx "1 prep" counts.txt || fail "prep did not run once"
grep -qx "3 bake" counts.txt || fail "bake did not run once per variant"
for v in 16 64 128; do
	grep -qx "1 $v" counts.txt || fail "variant $v did not train once"
done
grep -qx "3 publish" counts.txt || fail "publish did not run once per variant"
pctl status sw >status.txt || fail "status sw"
cat status.txt
grep -qE "^train-3 +exec \(env=PL_SWEEP_VALUE=128\) +succeeded" status.txt || fail "status lacks train-3's values"
grep -qE "^prep +exec +succeeded" status.txt || fail "status: prep"
pctl --json status sw | grep -qF '"name":"bake-1"' || fail "status --json lacks bake-1"
# The status page's data: each job's values and expanded after list (the
# spec text it draws the DAG from has the sweep unexpanded).
curl -sf -H "Authorization: Bearer sweep-token-0123456789" "http://127.0.0.1:$PORT/api/run?run=sw" >api.json ||
    fail "GET /api/run"
/usr/bin/python3 - api.json <<'PY' || fail "/api/run lacks the sweep's values or after lists"
import json, sys
j = {x["name"]: x for x in json.load(open(sys.argv[1]))["jobs"]}
assert j["train-2"]["variant"] == "env=PL_SWEEP_VALUE=64" and j["train-2"]["after"] == "prep", j["train-2"]
assert j["bake-3"]["after"] == "train-3" and j["prep"]["variant"] is None and j["prep"]["after"] == "", j
PY
# A restart parses the stored text again: the same ten jobs.
pl_kill9
pl_start
names=$(pctl --json status sw | python3 -c 'import json,sys; print(" ".join(sorted(j["name"] for j in json.load(sys.stdin)["jobs"])))')
[ "$names" = "bake-1 bake-2 bake-3 prep publish-1 publish-2 publish-3 train-1 train-2 train-3" ] ||
    fail "the jobs after a restart: $names"
pctl status sw | grep -qE "^train-1 +exec \(env=PL_SWEEP_VALUE=16\)" || fail "values lost on restart"

# A variant that fails does not hold the gate back: the gate, after
# every variant's bake, runs once each has ended and one worked (here
# the exec bakes store no bake.summary, so it refuses to compare them,
# naming each); when no variant works, it is skipped.
gatespec() {	# gatespec NAME FAILING...
	printf '[run]\nname = %s\n\n[train]\nstage = exec\ncommand = sh -c %s\n' "$1" \
	    "'case \$X in $2) exit 1;; esac'"
	printf 'env = X=0\nsweep = env: X=1 X=2 X=3\n\n[bake]\nstage = exec\nafter = train\n'
	printf 'command = true\n\n[gate]\nafter = bake\nincumbent = none\n'
}
gatespec gone2 2 >"$S/gone2.ini"
pctl check "$S/gone2.ini" | grep -qF "OK (run gone2, 7 jobs)" || fail "gone2: $(pctl check "$S/gone2.ini" 2>&1)"
pctl submit "$S/gone2.ini" >/dev/null || fail "submit gone2"
wait_run gone2 failed 60
[ "$(job_state gone2 train-2)" = failed ] && [ "$(job_state gone2 bake-2)" = skipped ] ||
    fail "gone2: variant 2 did not fail"
[ "$(job_state gone2 bake-1)" = succeeded ] && [ "$(job_state gone2 bake-3)" = succeeded ] ||
    fail "gone2: the other variants did not go on"
[ "$(job_state gone2 gate)" = failed ] || fail "gone2: the gate did not run: $(job_state gone2 gate)"
pctl logs gone2 gate >gate.log 2>&1
grep -q "refused: no variant's bake can be compared (bake-1: not compared: candidate: no bake.summary stored by job bake-1" gate.log ||
    { cat gate.log; fail "gone2: the gate did not name the variants"; }
gatespec gone3 "1|2|3" >"$S/gone3.ini"
pctl submit "$S/gone3.ini" >/dev/null || fail "submit gone3"
wait_run gone3 failed 60
[ "$(job_state gone3 gate)" = skipped ] || fail "gone3: the gate was not skipped"
pctl status gone3 | grep -E "^gate " | grep -q "no variant worked (the last, bake-3, skipped)" ||
    fail "gone3: $(pctl status gone3)"

# Bad input, each at its file:line, by check and by the daemon.
bad() {	# bad NAME SWEEPLINE WANT
	sed "s|^sweep = .*|$2|" "$S/sw.ini" >"$S/$1.ini"
	for how in local daemon; do
		if [ $how = local ]; then out=$("$PIPELINECTL" -f /dev/null check "$S/$1.ini" 2>&1)
		else out=$(pctl submit "$S/$1.ini" 2>&1); fi && fail "$1: accepted ($how)"
		echo "$out" | grep -qF "$3" || fail "$1 ($how): want $3
got: $out"
	done
}
bad unknown "sweep = evn: A=1 A=2" "$S/unknown.ini:13: evn: unknown key for stage exec; did you mean \"env\"?"
bad empty "sweep = env:" "$S/empty.ini:13: sweep: env: an empty list of values (expected env: V1 V2 ...)"
bad many "sweep = env: A=1 A=2 A=3 A=4 A=5 A=6 A=7 A=8 A=9 A=10 A=11 A=12 A=13 A=14 A=15 A=16 A=17" \
    "$S/many.ini:13: sweep: 17 variants, more than max_variants ("
# (16 by default, 8 under the daemon's ceiling: the default is at most the ceiling.)
bad value "sweep = env: A=1 NOEQUALS" "$S/value.ini:13: env:"
# The ceiling: max_variants = 8 in the configuration.
printf '[run]\nname = ceil\nmax_variants = 9\n' >"$S/ceil.ini"
sed 1,2d "$S/sw.ini" >>"$S/ceil.ini"
out=$(pctl submit "$S/ceil.ini" 2>&1) && fail "max_variants above the ceiling accepted"
echo "$out" | grep -qF "$S/ceil.ini:3: max_variants: 9 is above the ceiling of 8 (max_variants: $PL_CONF; pipelined.conf(5))" ||
    fail "ceiling: $out"
[ "$(db "SELECT count(*) FROM runs")" = 3 ] || fail "a refused spec left a run"
pl_stop
echo "config/sweep: ok"
