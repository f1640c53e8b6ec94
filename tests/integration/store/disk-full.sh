#!/bin/bash
# A full disk under the state directory, against the
# real daemon on a 2 MB tmpfs (root needed to mount it). A submit while
# the disk is full is refused with ENOSPC and changes nothing; a job that
# ends while it is full: its shim cannot write exit.json and says so in
# the job log, the daemon's commit fails and it stops (exit 1) rather than
# serve a memory the store does not hold; once space is freed a restart
# finds the store whole and the run ends as the store says (the lost
# attempt retried), with no job shown running. The refused submit's
# owner (root) could not be written to the parent's priv.owners either:
# the next submit writes it, so the restart's parent starts root's shims.
. "$(dirname "$0")/../../lib.sh"
[ "$(id -u)" = 0 ] || { echo "not root: cannot mount a tmpfs"; exit 77; }
mkdir -p "$TEST_TMP/state"
mount -t tmpfs -o size=2m tmpfs "$TEST_TMP/state" || { echo "cannot mount a tmpfs"; exit 77; }
trap 'pl_kill9; umount -l "$TEST_TMP/state" 2>/dev/null' EXIT
fill() { dd if=/dev/zero of="$TEST_TMP/state/fill" bs=4k 2>/dev/null; sync; }
unfill() { rm -f "$TEST_TMP/state/fill"; }
pl_conf
pl_start
cat > "$TEST_TMP/a.ini" <<'INI'
[a]
stage = exec
command = true
INI
cat > "$TEST_TMP/slow.ini" <<'INI'
[slow]
stage = exec
retries = 1
command = echo started; sleep 2
INI
# A submit while full: ENOSPC, plainly; nothing stored, nothing in memory.
fill
out=$(pctl submit "$TEST_TMP/a.ini" 2>&1) && fail "a submit on a full disk succeeded"
echo "$out" | grep -q "ENOSPC" || fail "a submit on a full disk said: $out"
echo "$out" | grep -q "full" || fail "the refusal does not say the disk is full: $out"
pctl status >/dev/null || fail "the daemon stopped serving after a refused submit"
pctl status a >/dev/null 2>&1 && fail "the refused run is known"
unfill
pctl submit "$TEST_TMP/a.ini" >/dev/null || fail "the submit after freeing space"
wait_run a succeeded 20
# A job that ends while the disk is full.
pctl submit "$TEST_TMP/slow.ini" >/dev/null || fail "submit slow"
for _ in $(seq 1 50); do [ "$(job_state slow slow)" = running ] && break; sleep 0.1; done
[ "$(job_state slow slow)" = running ] || fail "the job did not start"
log=$TEST_TMP/state/runs/slow/slow/job.log
for _ in $(seq 1 20); do grep -q started "$log" && break; sleep 0.1; done
fill
for _ in $(seq 1 300); do kill -0 "$PL_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$PL_PID" 2>/dev/null && fail "the daemon serves on after a failed commit"
wait "$PL_PID"; rc=$?
PL_PID=
[ "$rc" = 1 ] || fail "the daemon exited $rc after a failed commit, not 1"
grep -q "a commit failed (database or disk is full); stopping" "$TEST_TMP/pipelined.out" ||
    fail "the daemon's log does not say why it stopped"
grep -q "pipeline-shim: cannot write exit.json" "$log" || { cat "$log"; fail "the job log does not say exit.json could not be written"; }
unfill
pl_start
wait_run slow succeeded 30
st=$(pctl --json status slow)
echo "$st" | grep -q '"state":"running"' && fail "a job still shows running: $st"
[ "$(db "SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = 'slow'")" = 2 ] ||
    fail "the lost attempt was not retried once"
integrity_ok
events_gapless
pl_stop
echo ok
