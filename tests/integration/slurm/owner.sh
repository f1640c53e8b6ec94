#!/bin/bash
# slurm/owner.sh: a split daemon (started as root with a group) submits a
# member's Slurm job through its privileged parent, as the member
# (pipelined(8) SECURITY): Slurm records the member as the job's user
# (UserId), the batch step and the job's program run as the member, the
# files the job and its shim write are the member's, the daemon still
# follows the job to its end, and a cancel reaches Slurm through the
# parent, as the same member, also after a restart of both processes. A
# late requeue of the member's ended job runs nothing: the daemon's
# record of its end is where the member's batch step reads it.
# The parent refuses nothing the daemon asks.
# run.sh: alone (one Slurm cluster for all the slurm tests).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/slurm.sh"
trap 'pl_kill9 2>/dev/null; slurm_stop' EXIT
. "$TOP/tests/lib/member.sh"
O=$TEST_TMP/out; mkdir -p "$O"; chmod 0777 "$O"
MEMBER_CONF_TAIL=$(printf '[slurm]\npartition = debug\n')
member_daemon "max_jobs = 4"

# slurm_uid ID: the uid Slurm's record of the job names (UserId=NAME(UID)).
slurm_uid() { slurm_field "$1" UserId | sed -n 's/.*(\([0-9]*\))$/\1/p'; }

# --- a member's job: the member's in Slurm, and its files the member's
printf '[run]\nname = s1\n[x]\nstage = exec\nexecutor = slurm\ncommand = id -u > %s/s1.uid; echo made > %s/s1.file\n' \
    "$O" "$O" > specs/s1.ini
chmod 0644 specs/s1.ini
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/s1.ini >/dev/null || fail "s1: the member could not submit"
wait_run s1 succeeded 90
id1=$(ext_ids s1 x)
[ -n "$id1" ] || fail "s1: no Slurm job id stored"
[ "$(slurm_uid "$id1")" = "$nobody" ] ||
    fail "s1: Slurm job $id1 is uid $(slurm_uid "$id1")'s ($(slurm_field "$id1" UserId)), not the member's ($nobody)"
[ "$(slurm_state "$id1")" = COMPLETED ] || fail "s1: Slurm says $(slurm_state "$id1")"
[ "$(cat "$O/s1.uid")" = "$nobody" ] || fail "s1: the job ran as uid $(cat "$O/s1.uid")"
[ "$(stat -c %u "$O/s1.file")" = "$nobody" ] || fail "s1: its file is uid $(stat -c %u "$O/s1.file")'s"
pdir=$TEST_TMP/state/runs/s1/x/attempt-1/main
for f in shim.json exit.json; do
	[ -f "$pdir/$f" ] || fail "s1: no $pdir/$f"
	[ "$(stat -c %u "$pdir/$f")" = "$nobody" ] ||
	    fail "s1: $f is uid $(stat -c %u "$pdir/$f")'s: the batch step ran as another user"
done
note "s1: Slurm job $id1 is the member's (UserId $(slurm_field "$id1" UserId)), and so are its files"

# --- the end the daemon recorded, in its records directory, which the
# member's batch step reads but cannot write: a late requeue runs nothing
rd=$TEST_TMP/state/runs/s1/x/attempt-1/.shim/main
[ -f "$rd/slurm.ended" ] || fail "s1: no $rd/slurm.ended"
[ "$(stat -c %U "$rd")" = _pipelined ] || fail "s1: $rd is $(stat -c %U "$rd")'s"
rm -f "$O/s1.file"
scontrol requeue "$id1" || fail "s1: scontrol requeue $id1"
release_requeued "$id1" || fail "s1: the requeued job does not run: $(scontrol show job -o "$id1")"
for _ in $(seq 1 300); do [ "$(slurm_state "$id1")" = COMPLETED ] && break; sleep 0.1; done
[ "$(slurm_state "$id1")" = COMPLETED ] || fail "s1: the requeued job is $(slurm_state "$id1")"
[ ! -e "$O/s1.file" ] || fail "s1: the requeued job ran again after its end was recorded"
grep -q "has recorded this job's end already" "$TEST_TMP/state/runs/s1/x/job.log" ||
	fail "s1: the requeued batch script did not say why it ran nothing"
note "s1: a late requeue of Slurm job $id1 ran nothing"

# sleeper RUN: the member submits a slurm job that sleeps; it waits
# until the job runs on the node and sets ID to its Slurm job id.
sleeper() {
	printf '[run]\nname = %s\n[x]\nstage = exec\nexecutor = slurm\ncommand = echo started > %s/%s; sleep 60; touch %s/%s-finished\n' \
	    "$1" "$O" "$1" "$O" "$1" > "specs/$1.ini"
	chmod 0644 "specs/$1.ini"
	as_member "$PIPELINECTL" -f "$PL_CONF" submit "specs/$1.ini" >/dev/null || fail "$1: the member could not submit"
	for _ in $(seq 1 300); do [ -f "$O/$1" ] && break; sleep 0.1; done
	[ -f "$O/$1" ] || fail "$1 never started on the node"
	ID=$(ext_ids "$1" x)
	[ "$(slurm_uid "$ID")" = "$nobody" ] || fail "$1: Slurm job $ID is uid $(slurm_uid "$ID")'s"
}
# member_cancel RUN ID: the member cancels the run; Slurm stops job ID.
member_cancel() {
	as_member "$PIPELINECTL" -f "$PL_CONF" cancel "$1" >/dev/null || fail "$1: the member could not cancel"
	wait_run "$1" cancelled 30
	slurm_stopped "$1" "$2" "$O"
	note "$1: cancel reached Slurm job $2 ($(slurm_state "$2"))"
}

# --- cancel of a running member's job: through the parent, and Slurm stops it
sleeper s2
member_cancel s2 "$ID"

# --- the same across a restart: the new parent knows the job its
# predecessor submitted (priv.owners), and cancels it as the member
sleeper s3
pl_kill9
pl_start
chmod 0666 "$TEST_TMP/run/control.sock"
member_cancel s3 "$ID"
grep -q 'privileged parent: refused' "$TEST_TMP/pipelined.out" &&
	fail "the parent refused the daemon: $(grep 'privileged parent' "$TEST_TMP/pipelined.out")"
integrity_ok
pl_stop
echo "slurm/owner: ok"
