#!/bin/bash
# The submit limits of pipelined.conf(5): a spec over max_spec_bytes is
# refused before it is parsed, one of more jobs than max_spec_jobs once
# parsed, each with an error naming the limit, by pipelinectl check (the
# configuration's limits) and by a real daemon on check and submit, which
# stores nothing and keeps serving. At the defaults (1M, 10000) a
# 70,000-job spec, which once held the control loop 3.2 s and left a
# 238 MB WAL, is answered at once and writes nothing.
. "$(dirname "$0")/../../lib.sh"
# jobs N FILE [PAD]: N exec jobs, the file padded with PAD bytes of
# comment.
jobs() {
	python3 - "$@" <<'PY'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
pad = int(sys.argv[3]) if len(sys.argv) > 3 else 0
with open(path, "w") as f:
    f.write("[run]\nname = %s\n" % path.rsplit("/", 1)[1][:-4])
    if pad:
        f.write("# " + "x" * pad + "\n")
    for i in range(n):
        f.write("[j%d]\nstage = exec\ncommand = true\n" % i)
PY
}
pl_conf "max_spec_bytes = 64K" "max_spec_jobs = 100"
jobs 100 "$TEST_TMP/hundred.ini"
jobs 101 "$TEST_TMP/over.ini"
jobs 2 "$TEST_TMP/big.ini" 70000
size=$(stat -c %s "$TEST_TMP/big.ini")
pctl check "$TEST_TMP/hundred.ini" | grep -qF "OK (run hundred, 100 jobs)" || fail "100 jobs at a limit of 100"
out=$(pctl check "$TEST_TMP/over.ini" 2>&1) && fail "check accepted 101 jobs over max_spec_jobs = 100"
echo "$out" | grep -qF "over.ini: max_spec_jobs: the spec has 101 jobs, more than the limit of 100 (max_spec_jobs: $PL_CONF" ||
    fail "job limit: $out"
echo "$out" | grep -q "exec\|command" && fail "jobs were checked past the limit: $out"
out=$(pctl check "$TEST_TMP/big.ini" 2>&1) && fail "check accepted $size bytes over max_spec_bytes = 64K"
echo "$out" | grep -qF "big.ini: max_spec_bytes: the spec is $size bytes, more than the limit of 65536 (max_spec_bytes: $PL_CONF" ||
    fail "size limit: $out"

# A real daemon: the same errors on check and submit; nothing stored.
pl_start
for verb in check submit; do
	out=$(pctl $verb "$TEST_TMP/over.ini" 2>&1) && fail "the daemon's $verb accepted 101 jobs"
	echo "$out" | grep -qF "over.ini: max_spec_jobs: the spec has 101 jobs, more than the limit of 100" ||
	    fail "daemon $verb, job limit: $out"
	out=$(pctl $verb "$TEST_TMP/big.ini" 2>&1) && fail "the daemon's $verb accepted $size bytes"
	echo "$out" | grep -qF "big.ini: max_spec_bytes: the spec is $size bytes, more than the limit of 65536" ||
	    fail "daemon $verb, size limit: $out"
done
[ "$(db "SELECT count(*) FROM runs")" = 0 ] || fail "a refused spec left a run"
pctl submit "$TEST_TMP/hundred.ini" >/dev/null || fail "100 jobs at a limit of 100 refused"
wait_run hundred succeeded 120
pl_stop

# The defaults: 1M and 10000.
rm -rf "$TEST_TMP/state"
pl_conf
jobs 10001 "$TEST_TMP/many.ini"
jobs 70000 "$TEST_TMP/huge.ini"
hsize=$(stat -c %s "$TEST_TMP/huge.ini")
out=$(pctl check "$TEST_TMP/many.ini" 2>&1) && fail "check accepted 10001 jobs at the default limit"
echo "$out" | grep -qF "many.ini: max_spec_jobs: the spec has 10001 jobs, more than the limit of 10000" ||
    fail "default job limit: $out"
pl_start
wal=$TEST_TMP/state/pipelined.db-wal
t0=$(date +%s.%N)
out=$(pctl submit "$TEST_TMP/huge.ini" 2>&1) && fail "the daemon accepted 70,000 jobs"
t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')
echo "$out" | grep -qF "huge.ini: max_spec_bytes: the spec is $hsize bytes, more than the limit of 1048576" ||
    fail "default size limit: $out"
note "70,000 jobs ($hsize bytes) refused in ${t}s; WAL $(stat -c %s "$wal" 2>/dev/null || echo 0) bytes"
awk -v t="$t" 'BEGIN{exit !(t < 2)}' || fail "the refusal took ${t}s"
[ "$(stat -c %s "$wal" 2>/dev/null || echo 0)" -lt $((8 << 20)) ] || fail "a refused spec grew the WAL"
out=$(pctl submit "$TEST_TMP/many.ini" 2>&1) && fail "the daemon accepted 10001 jobs"
echo "$out" | grep -qF "the spec has 10001 jobs, more than the limit of 10000" || fail "daemon default job limit: $out"
kill -0 "$PL_PID" || fail "the daemon died"
pctl status >/dev/null || fail "the daemon stopped serving"
[ "$(db "SELECT count(*) FROM runs")" = 0 ] || fail "a refused spec left a run"
pl_stop
echo ok
