#!/bin/bash
# ollama/register-reuse.sh: register and bake reuse, against the REAL Ollama
# (tests/lib.sh: ollama_start) and the tiny fixture GGUF. register reuses an
# earlier register of the same key only while the server still has its tag
# at the manifest digest it recorded; bake reuses a bake of the same key
# (case file, options) through the same server version, of a tag serving
# the same manifest and weights. `submit --plan` says so before anything
# runs, and the runs do what it said: a second run reuses both; the tag
# deleted behind the daemon's back makes register run again (plan and
# explain name the tag), and the bake after it, whose tag serves the same
# bytes again, is reused; the tag moved to another manifest makes register
# run; a previous version whose weights are these makes register run (and
# refuse them); with the server gone, the plan says its server cannot be
# asked.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/bake.sh"
trap 'pl_stop; ollama_stop' EXIT
cd "$TEST_TMP"
tiny_gguf "$TEST_TMP/a.gguf" 1234
ollama_start
ollama_modelfile "$TOP/etc/Modelfile.tmpl" "$TEST_TMP/Modelfile.tmpl"
pl_start

spec() {	# spec RUN [PREVIOUS]
	cat <<INI
[run]
name = $1
${2:+previous = $2}

[register]
gguf = $TEST_TMP/a.gguf
tag = router:ru
modelfile = $TEST_TMP/Modelfile.tmpl
num_ctx = 1024
url = $OURL
# No training in these runs: nothing to check the template against.
tokens = none

[bake]
after = register
backend = ollama
url = $OURL
model = router:ru
cases = $BAKE_DATA/cases.jsonl
system = $BAKE_DATA/system.txt
capabilities = $BAKE_DATA/capabilities.txt
stats = $BAKE_DATA/stats.json
num_ctx = 1024
max_tokens = 64
passes = 1
INI
}
expect() {	# expect OUT JOB TEXT
	grep "^$2: " "$1" | grep -qF -- "$3" || { cat "$1"; fail "plan of $2: wanted \"$3\""; }
}
states() { echo "$(job_state "$1" register) $(job_state "$1" bake)"; }
for r in r1 r2 r3 r4 r5; do spec $r > $r.ini; done

pctl check --plan r1.ini > p1 || { cat p1; fail "check --plan r1"; }
expect p1 register "register: run (no earlier run of stage register)"
expect p1 bake "bake: run (no earlier run of stage bake)"
pctl submit r1.ini > /dev/null || fail "submit r1"
wait_run r1 succeeded 120

# The same spec: both reused, as the plan says.
pctl submit --plan r2.ini > p2 || { cat p2; fail "submit --plan r2"; }
expect p2 register "register: reuse r1/register (the same key as job register of run r1, whose artifacts are there as recorded and whose stage says what it made still stands)"
expect p2 bake "bake: reuse r1/bake"
pctl submit r2.ini > /dev/null || fail "submit r2"
wait_run r2 succeeded 60
[ "$(states r2)" = "reused reused" ] || fail "r2: $(states r2), wanted reused reused"
note "r2 reused register and bake: $(grep '^register' p2)"

# The tag deleted behind the daemon's back: register runs again.
curl -sf -X DELETE "$OURL/api/delete" -d '{"model": "router:ru"}' >/dev/null || fail "delete router:ru"
pctl check --plan r3.ini > p3 || { cat p3; fail "check --plan r3"; }
expect p3 register "no longer has tag router:ru"
expect p3 bake "bake: run (runs after register, which runs"
pctl submit r3.ini > /dev/null || fail "submit r3"
wait_run r3 succeeded 120
[ "$(job_state r3 register)" = succeeded ] || fail "r3's register is $(job_state r3 register), wanted succeeded"
pctl explain r3 register > x3
grep -q "^ran: .*no longer has tag router:ru" x3 || { cat x3; fail "explain r3 register does not say the tag went"; }
curl -s "$OURL/api/tags" | grep -q '"name":"router:ru"' || fail "router:ru is not on the server again"
# The tag serves the same manifest and weights again: the bake is reused.
[ "$(job_state r3 bake)" = reused ] || fail "r3's bake is $(job_state r3 bake), wanted reused (the tag serves the same bytes)"
note "a deleted tag: $(grep '^register' p3)"

# The same spec with previous = r1, whose weights are these: the key
# holds the previous version's weights, so register runs, and refuses the
# GGUF as the previous version's (G24) instead of passing by a copy of a
# register checked against no previous version.
spec r6 r1 > r6.ini
pctl check --plan r6.ini > p6 || { cat p6; fail "check --plan r6"; }
expect p6 register "server previous weights: none -> "
pctl submit r6.ini > /dev/null || fail "submit r6"
wait_run r6 failed 60
[ "$(job_state r6 register)" = failed ] || fail "r6's register is $(job_state r6 register), wanted failed"
pctl logs r6 register 2>&1 | grep -q "the previous version's" || { pctl logs r6 register; fail "r6 not refused for r1's weights"; }
note "previous = r1: $(grep '^register' p6)"

# The tag moved to another manifest (created again with another
# parameter): register runs.
ollama_create router:ru "$TEST_TMP/a.gguf" "PARAMETER temperature 0.5"
pctl check --plan r4.ini > p4 || { cat p4; fail "check --plan r4"; }
expect p4 register "tag router:ru on the server at $OURL moved: manifest"
note "a moved tag: $(grep '^register' p4)"

# The server gone: the plan says why it cannot reuse.
ollama_stop
pctl check --plan r5.ini > p5 || { cat p5; fail "check --plan r5"; }
expect p5 register "register: run (stage register cannot say what its server holds:"
expect p5 bake "bake: run (runs after register, which runs"
note "no server: $(grep '^register' p5)"
echo "ollama/register-reuse: ok"
