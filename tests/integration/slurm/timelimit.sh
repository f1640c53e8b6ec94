#!/bin/bash
# A slurm job that runs into its time limit: the batch script's
# --signal=B:USR1@120 reaches the job's process group before the end (here
# at once, the limit being one minute), and the job saves a checkpoint on
# it; at the limit Slurm ends the job (TIMEOUT) and the attempt is recorded
# with the end class "timeout" and the job's own exit record (killed by
# SIGTERM). Takes about 1.5 minutes: Slurm's limits are in minutes and
# checked every 30 seconds or so.
# run.sh: alone (one Slurm cluster for all the slurm tests; it times a limit).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/slurm.sh"
trap 'pl_kill9 2>/dev/null; slurm_stop' EXIT
pl_conf "max_jobs = 8"
pl_start
S=$TEST_TMP/specs; mkdir -p "$S"; O=$TEST_TMP/out; mkdir -p "$O"
cat > "$TEST_TMP/slow.py" <<'PY'
import json, os, signal, sys, time
out = sys.argv[1]
def note(msg):
    with open(out, "a") as f:
        f.write(msg + "\n")
def on_usr1(sig, frame):
    ck = os.path.join(os.environ["PL_WORKDIR"], "checkpoints", "checkpoint-1")
    os.makedirs(ck, exist_ok=True)
    note("usr1: checkpoint saved")
def on_term(sig, frame):
    note("term")
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
signal.signal(signal.SIGUSR1, on_usr1)
signal.signal(signal.SIGTERM, on_term)
note("start")
while True:
    time.sleep(0.2)
PY
cat > "$S/tl.ini" <<INI
[slow]
stage = exec
executor = slurm
time = 1
command = /usr/bin/python3 $TEST_TMP/slow.py $O/slow
INI
pctl submit "$S/tl.ini" >/dev/null || fail "submit"
wait_run tl failed 150
id=$(ext_ids tl slow)
[ "$(slurm_state "$id")" = TIMEOUT ] || fail "Slurm says $(slurm_state "$id"), not TIMEOUT"
grep -qx "usr1: checkpoint saved" "$O/slow" || fail "the job never got SIGUSR1: $(cat "$O/slow")"
[ -d "$TEST_TMP/state/runs/tl/slow/work/checkpoints/checkpoint-1" ] || fail "no checkpoint from the USR1 handler"
grep -qx term "$O/slow" || fail "the job did not get SIGTERM at the limit: $(cat "$O/slow")"
[ "$(db "SELECT end_class FROM procs")" = timeout ] || fail "end class '$(db "SELECT end_class FROM procs")', not timeout"
[ "$(db "SELECT signal FROM procs")" = 15 ] || fail "stored signal $(db "SELECT signal FROM procs"), not 15 (the exit record's)"
grep -q "Slurm job $id TIMEOUT" "$TEST_TMP/state/runs/tl/slow/job.log" || fail "the job log does not show the time limit"
integrity_ok
events_gapless
pl_stop
echo "slurm/timelimit: ok"
