#!/bin/bash
# sched/reuse.sh: reuse what did not change. exec jobs with reuse = yes
# that count their runs in a file: a second run of the same spec under
# another name reuses every job (state reused, the same artifact digests,
# no program ran); a changed key reruns its job and what follows, and
# explain names the key with its old and new values; a changed input
# file reruns; an upstream that ran again and made the same bytes leaves
# its downstream reused (early cut-off); a reused artifact changed on disk
# is caught; gc of the first run keeps the files the copies reference; a
# rebuilt plugin reruns its jobs; the digest cache does not take other
# bytes of the same size and mtime for the old; convert and quantize are
# reused by default and a volatile key (threads) does not stop it; verify
# runs again against another previous version and fails as it did; kill
# -9 of the daemon while a run that reuses is running ends consistent
# after the restart.
# run.sh: alone (it kills the daemon with -9 in the middle of a run).
. "$(dirname "$0")/../../lib.sh"
PD=$TEST_TMP/plugins
mkdir -p "$PD"
cp "$TOP"/plugins/*.so "$PD/"
PL_PLUGIN_DIR=$PD pl_conf "max_jobs = 4" "[retention]" "keep_days = 0" "min_size = 0"
pl_start
S=$TEST_TMP/specs; O=$TEST_TMP/out; mkdir -p "$S" "$O"
echo "hello" > "$S/src.txt"

# Bad values are refused at submit, naming the file, line and key.
printf '[run]\nreuse = yes\n[g]\nstage = gate\nreuse = yes\n[e]\nstage = exec\nreuse = maybe\ncommand = true\n' > "$S/bad.ini"
pctl check "$S/bad.ini" > "$O/x" 2>&1 && fail "check took bad reuse values"
for l in "bad.ini:2: reuse: must be no (turns reuse off for every job), not \"yes\"" \
    "bad.ini:5: reuse: stage gate is never reused" "bad.ini:8: reuse: must be yes or no, not \"maybe\""; do
	grep -qF "$l" "$O/x" || { cat "$O/x"; fail "check does not say: $l"; }
done

# spec FILE MAKE_PREFIX SUFFIX: make upper-cases src.txt; use appends SUFFIX.
spec() {
	cat > "$1" <<INI
[make]
stage = exec
reuse = yes
input = $S/src.txt
command = $2echo make >> $O/count; tr a-z A-Z < "\$PL_INPUT" > out.txt; echo '{"type":"artifact","name":"out","path":"out.txt"}' >> "\$PL_EVENTS"
[use]
stage = exec
reuse = yes
after = make
input = make.out
env = SUFFIX=$3
command = echo use >> $O/count; (cat "\$PL_INPUT"; echo \$SUFFIX) > final.txt; echo '{"type":"artifact","name":"final","path":"final.txt"}' >> "\$PL_EVENTS"
INI
}
count() { [ -f "$O/count" ] && tr '\n' ' ' < "$O/count" | sed 's/ $//'; }
submit() { pctl submit --name "$1" "$2" >/dev/null || fail "submit $1"; wait_run "$1" succeeded 30; }
states() { echo "$(job_state "$1" make) $(job_state "$1" use)"; }
digest_of() { db "SELECT a.sha256 FROM artifacts a JOIN jobs j ON j.id = a.job_id JOIN runs r ON r.id = a.run_id WHERE r.name = '$1' AND j.name = '$2' ORDER BY a.id DESC LIMIT 1"; }

spec "$S/a.ini" "" one
submit r1 "$S/a.ini"
[ "$(count)" = "make use" ] || fail "r1 ran: $(count)"
[ "$(states r1)" = "succeeded succeeded" ] || fail "r1: $(states r1)"
note "r1 ran both jobs"

# What the daemon hashed to record an artifact is in the digest cache with
# that digest, so that the first reuse does not read it again (a merged
# checkpoint and its GGUFs are many GB): a file, and each file of a
# directory. A stage process's digests are its owner's word and are not
# kept (PL_STAGE_PROCESS=all: the first reuse hashes them).
printf '[tree]\nstage = exec\nreuse = yes\ncommand = mkdir -p t/s; echo a > t/a; echo b > t/s/b; echo %s >> "$PL_EVENTS"\n' \
    "'{\"type\":\"artifact\",\"name\":\"t\",\"path\":\"t\"}'" > "$S/tree.ini"
submit tree1 "$S/tree.ini"
t=$(artifact_path tree1 tree t)
for a in "r1 make out $(digest_of r1 make)" "r1 use final $(digest_of r1 use)" \
    "tree1 tree t/a $(sha256sum < "$t/a" | cut -d' ' -f1)" "tree1 tree t/s/b $(sha256sum < "$t/s/b" | cut -d' ' -f1)"; do
	set -- $a
	p=$(artifact_path "$1" "$2" "${3%%/*}")${3#${3%%/*}}
	[ -f "$p" ] || fail "$1/$2's artifact $3: no file $p"
	kept=$(db "SELECT sha256 FROM digests WHERE path = '$p'")
	if [ "${PL_STAGE_PROCESS:-}" = all ]; then
		[ -z "$kept" ] || fail "$1/$2's $3 ($p): a stage process's digest was kept"
	else
		[ "$kept" = "$4" ] || fail "$1/$2's $3 ($p): digest cache has \"$kept\", not its digest $4"
	fi
done
note "the digests of r1's and tree1's artifacts (a directory's by file): kept unless a stage process made them"

# The same spec, another name: nothing runs.
: > "$O/count"
submit r2 "$S/a.ini"
[ "$(states r2)" = "reused reused" ] || fail "r2: $(states r2), wanted reused reused"
[ -z "$(count)" ] || fail "r2 ran programs: $(count)"
for j in make use; do
	[ -n "$(digest_of r1 $j)" ] && [ "$(digest_of r1 $j)" = "$(digest_of r2 $j)" ] ||
		fail "r2/$j's artifact digest $(digest_of r2 $j) is not r1's $(digest_of r1 $j)"
done
[ "$(artifact_path r2 use final)" = "$(artifact_path r1 use final)" ] ||
	fail "r2's final is not r1's file"
pctl status r2 | grep -q "reused job use of run r1" || { pctl status r2; fail "status does not name what use took"; }
# A job that may be reused but ran says why in its message (status, watch
# and the page show it): r1's first job had no earlier run.
pctl status r1 | grep -q "ran: no earlier run of stage exec" || { pctl status r1; fail "status does not say why r1's job ran"; }
pctl explain r2 use > "$O/x" || fail "explain r2 use"
grep -q "reused: took the artifacts and values of job use of run r1" "$O/x" || { cat "$O/x"; fail "explain r2 use"; }
pctl --json status | grep -q '"succeeded":2' || fail "the run list does not count reused jobs as done"
note "r2 reused both jobs"

# A changed key: use reruns, make does not; explain names the key.
: > "$O/count"
spec "$S/b.ini" "" two
submit r3 "$S/b.ini"
[ "$(states r3)" = "reused succeeded" ] || fail "r3: $(states r3)"
[ "$(count)" = "use" ] || fail "r3 ran: $(count)"
pctl explain r3 use > "$O/x"
grep -q "key env: SUFFIX=one -> SUFFIX=two" "$O/x" || { cat "$O/x"; fail "explain r3 use does not name env"; }
pctl status r3 | grep -q "ran: key env: SUFFIX=one -> SUFFIX=two" || { pctl status r3; fail "status does not say why r3's use ran"; }
note "r3: a changed key reran use only; explain: $(grep 'key env' "$O/x")"

# A changed input file: both rerun.
: > "$O/count"
echo "world" > "$S/src.txt"
submit r4 "$S/b.ini"
[ "$(states r4)" = "succeeded succeeded" ] || fail "r4: $(states r4)"
[ "$(count)" = "make use" ] || fail "r4 ran: $(count)"
pctl explain r4 make > "$O/x"
grep -q "^input input: " "$O/x" || { cat "$O/x"; fail "explain r4 make does not name the input"; }
note "r4: a changed input reran both"

# Early cut-off: make's command changes but makes the same bytes; use's
# input is the same, so use is reused.
: > "$O/count"
spec "$S/c.ini" "true; " two
submit r5 "$S/c.ini"
[ "$(states r5)" = "succeeded reused" ] || fail "r5: $(states r5), wanted succeeded reused"
[ "$(count)" = "make" ] || fail "r5 ran: $(count)"
[ "$(digest_of r5 make)" = "$(digest_of r4 make)" ] || fail "r5 make made other bytes"
note "r5: early cut-off"

# A reused artifact changed on disk behind the daemon's back: caught.
f=$(artifact_path r5 use final)
[ -f "$f" ] || fail "no file for r5's final: $f"
echo tampered >> "$f"
: > "$O/count"
submit r6 "$S/c.ini"
[ "$(states r6)" = "reused succeeded" ] || fail "r6: $(states r6), wanted reused succeeded"
[ "$(count)" = "use" ] || fail "r6 ran: $(count)"
pctl explain r6 use > "$O/x"
grep -q "changed on disk" "$O/x" || { cat "$O/x"; fail "explain r6 use does not say the artifact changed"; }
note "r6: a tampered artifact was not reused"

# gc of r1: r2's copies hold its files.
f=$(artifact_path r2 use final)
pctl gc r1 > "$O/x" || fail "gc r1"
grep -q "keep r1 use final: held by run r2's record (use final)" "$O/x" ||
	{ cat "$O/x"; fail "gc r1 does not keep the file r2's copy holds"; }
[ -f "$f" ] || fail "gc r1 removed $f, which r2's copy references"
note "gc r1 kept the files r2's copies hold"

# [run] reuse = no and reuse = no on a job turn it off.
: > "$O/count"
{ echo "[run]"; echo "reuse = no"; cat "$S/c.ini"; } > "$S/d.ini"
submit r7 "$S/d.ini"
[ "$(states r7)" = "succeeded succeeded" ] || fail "r7: $(states r7)"
[ "$(count)" = "make use" ] || fail "r7 ran: $(count)"
note "[run] reuse = no ran everything"

# A rebuilt plugin (its digest changed) reruns its jobs.
pl_stop
printf '\0' >> "$PD/exec.so"
pl_start
: > "$O/count"
submit r8 "$S/c.ini"
[ "$(states r8)" = "succeeded succeeded" ] || fail "r8: $(states r8)"
[ "$(count)" = "make use" ] || fail "r8 ran: $(count)"
pctl explain r8 make > "$O/x"
grep -q "^code plugin: " "$O/x" || { cat "$O/x"; fail "explain r8 make does not name the plugin"; }
note "r8: a rebuilt plugin reran its jobs"

# The digest cache: other bytes of the same size written in place with
# the mtime put back (only the ctime moved) are not taken for the old.
[ "$(db "SELECT count(*) FROM digests WHERE path = '$S/src.txt'")" = 1 ] ||
	fail "no digest kept for src.txt"
touch -r "$S/src.txt" "$O/ref"
printf 'earth\n' > "$S/src.txt"
touch -r "$O/ref" "$S/src.txt"
: > "$O/count"
submit r8b "$S/c.ini"
[ "$(states r8b)" = "succeeded succeeded" ] || fail "r8b: $(states r8b)"
pctl explain r8b make | grep -q "^input input: " || { pctl explain r8b make; fail "explain r8b make"; }
note "r8b: the same size and mtime, other bytes: reran"

# The pure stages, by default: the tiny fixture through convert and
# quantize. A volatile key (threads) changes nothing; a checkpoint of
# other bytes reruns both.
FX=$TEST_TMP/fx
/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$FX" --layout causal > "$FX.log" 2>&1 ||
	{ cat "$FX.log"; fail "gen_gemma3.py"; }
gspec() {
	printf '[convert]\ninput = %s\n[quantize]\nafter = convert\nthreads = %s\n' "$FX" "$2" > "$1"
}
gstates() { echo "$(job_state "$1" convert) $(job_state "$1" quantize)"; }
gspec "$S/g.ini" 2
submit g1 "$S/g.ini"
[ "$(gstates g1)" = "succeeded succeeded" ] || fail "g1: $(gstates g1)"
gspec "$S/g2.ini" 1
submit g2 "$S/g2.ini"
[ "$(gstates g2)" = "reused reused" ] || fail "g2: $(gstates g2), wanted reused reused"
[ "$(digest_of g2 quantize)" = "$(digest_of g1 quantize)" ] || fail "g2's quantized GGUF is not g1's"
/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$FX" --layout causal --seed 9 > "$FX.log" 2>&1 ||
	{ cat "$FX.log"; fail "gen_gemma3.py --seed 9"; }
submit g3 "$S/g2.ini"
[ "$(gstates g3)" = "succeeded succeeded" ] || fail "g3: $(gstates g3)"
[ "$(digest_of g3 quantize)" != "$(digest_of g1 quantize)" ] || fail "g3 made g1's bytes from another checkpoint"
pctl explain g3 convert | grep -q "^input input: " || { pctl explain g3 convert; fail "explain g3 convert"; }
note "convert and quantize: reused by default, threads ignored, a new checkpoint reran both"

# verify compares with the previous version as it did: a run whose
# previous version made the same GGUF reuses convert and quantize, but
# its verify runs again (what it compares with changed) and fails, never
# passing by a copy of the previous run's verify.
printf '[convert]\ninput = %s\n[quantize]\nafter = convert\n[verify]\nafter = quantize\n' "$FX" > "$S/v1.ini"
submit v1 "$S/v1.ini"
[ "$(job_state v1 verify)" = succeeded ] || fail "v1's verify is $(job_state v1 verify)"
{ printf '[run]\nprevious = v1\n'; cat "$S/v1.ini"; } > "$S/v2.ini"
pctl submit --name v2 "$S/v2.ini" >/dev/null || fail "submit v2"
wait_run v2 failed 30
[ "$(gstates v2) $(job_state v2 verify)" = "reused reused failed" ] ||
	fail "v2: $(gstates v2) $(job_state v2 verify), wanted reused reused failed"
db "SELECT j.message FROM jobs j JOIN runs r ON r.id = j.run_id WHERE r.name = 'v2' AND j.name = 'verify'" |
	grep -q "has the same sha256" || fail "v2's verify failed for another reason"
pctl explain v2 verify > "$O/x"
grep -q "^compared previous gguf: none -> $(digest_of v1 quantize)" "$O/x" ||
	{ cat "$O/x"; fail "explain v2 verify does not name the previous GGUF"; }
note "verify ran again against its previous version and failed as it should"

# A job program's stage names the Python stack it runs on: tokenize on
# an interpreter whose environment says which stack it is (the
# pipeline-stack.json tests/tools/pyenv.sh writes beside bin/) is reused
# on the same one, and runs again when that environment is another stack
# behind the same path (the pyenv link moved); explain names the stack.
VA=$TEST_TMP/venv; mkdir -p "$VA/bin"; ln -sf /usr/bin/python3 "$VA/bin/python"
printf '{"lock": "jobs/requirements.lock", "sha256": "%064d", "stack": "recipe"}\n' 1 > "$VA/pipeline-stack.json"
/usr/bin/python3 "$TOP/tests/fixtures/gen_corpus.py" "$TEST_TMP/corpus.jsonl" --n 20 --filler 10 >/dev/null ||
	fail "gen_corpus.py"
printf '[tokenize]\nbase = %s\ncorpus = %s\npython = %s\n' "$FX" "$TEST_TMP/corpus.jsonl" \
    "$VA/bin/python" > "$S/t.ini"
submit t1 "$S/t.ini"
submit t2 "$S/t.ini"
[ "$(job_state t2 tokenize)" = reused ] || fail "t2's tokenize is $(job_state t2 tokenize), wanted reused"
printf '{"lock": "jobs/requirements-current.lock", "sha256": "%064d", "stack": "current"}\n' 2 > "$VA/pipeline-stack.json"
submit t3 "$S/t.ini"
[ "$(job_state t3 tokenize)" = succeeded ] || fail "t3's tokenize is $(job_state t3 tokenize): another stack was reused"
pctl explain t3 tokenize > "$O/x"
grep -q "^code python stack: " "$O/x" || { cat "$O/x"; fail "explain t3 tokenize does not name the Python stack"; }
note "tokenize: reused on the same Python stack, ran again on another; explain: $(grep '^code python stack' "$O/x")"

# kill -9 while a run that reuses runs: make is reused, slow runs.
cat > "$S/e.ini" <<INI
$(cat "$S/c.ini")
[slow]
stage = exec
reuse = yes
after = use
command = echo slow >> $O/count; sleep 3; echo done > s.txt; echo '{"type":"artifact","name":"s","path":"s.txt"}' >> "\$PL_EVENTS"
INI
: > "$O/count"
pctl submit --name r9 "$S/e.ini" >/dev/null
for _ in $(seq 1 100); do
	[ "$(job_state r9 slow)" = running ] && break
	sleep 0.1
done
[ "$(job_state r9 slow)" = running ] || fail "r9's slow did not start"
pl_kill9
pl_start
wait_run r9 succeeded 30
[ "$(states r9)" = "reused reused" ] || fail "r9: $(states r9)"
[ "$(db "SELECT count(*) FROM artifacts a JOIN jobs j ON j.id = a.job_id JOIN runs r ON r.id = j.run_id WHERE r.name = 'r9' AND j.name IN ('make', 'use')")" = 2 ] ||
	fail "r9's reused jobs have not exactly one artifact record each"
integrity_ok
events_gapless
note "kill -9 during a run that reuses: consistent after the restart"
pl_stop
echo "PASS"
