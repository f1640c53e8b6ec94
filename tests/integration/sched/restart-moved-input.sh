#!/bin/bash
# A restart does not fail a run for an input moved after submit. The
# spec's files are checked at submit; at a restart the daemon checks the
# stored spec again without them (spec_check's SPEC_CHECK_NOFILES): a
# run whose first job has used its corpus, and whose corpus was then
# removed while a later job ran, goes on after a kill -9 and succeeds,
# the later job re-entered, not failed with "spec no longer valid after
# a restart". A spec that names a missing file is still refused at
# submit, naming the path. A real daemon, shim and corpus_check stage.
# run.sh: alone (it kills the daemon at a chosen moment).
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9' EXIT
pl_conf
pl_start
cp "$TOP/etc/examples/tiny/corpus-v1.jsonl" "$TEST_TMP/corpus.jsonl"
cat >"$TEST_TMP/mv.ini" <<INI
[scan]
stage = corpus_check
corpus = $TEST_TMP/corpus.jsonl
capabilities = $TOP/etc/examples/tiny/capabilities.txt

[later]
stage = exec
after = scan
command = touch $TEST_TMP/started; sleep 4
INI
pctl submit "$TEST_TMP/mv.ini" >/dev/null || fail "submit"
for _ in $(seq 1 300); do [ -e "$TEST_TMP/started" ] && break; sleep 0.1; done
[ -e "$TEST_TMP/started" ] || { pctl status mv; fail "the later job did not start"; }
[ "$(job_state mv scan)" = succeeded ] || fail "scan is $(job_state mv scan), not succeeded"
rm "$TEST_TMP/corpus.jsonl"
pl_kill9
pl_start
wait_run mv succeeded 60
[ "$(job_state mv later)" = succeeded ] || fail "later is $(job_state mv later)"
grep -q "no longer" "$TEST_TMP/pipelined.log" && fail "the restart failed the run: $(grep "no longer" "$TEST_TMP/pipelined.log")"
# The check at submit still opens the file.
cp "$TEST_TMP/mv.ini" "$TEST_TMP/mv2.ini"
sed -i 's/^\[scan\]/[run]\nname = mv2\n\n[scan]/' "$TEST_TMP/mv2.ini"
out=$(pctl submit "$TEST_TMP/mv2.ini" 2>&1) && fail "a missing corpus was let in: $out"
echo "$out" | grep -q "corpus: $TEST_TMP/corpus.jsonl: No such file or directory" ||
    fail "the refusal does not name the path: $out"
integrity_ok
pl_stop
echo ok
