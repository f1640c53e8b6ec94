#!/bin/bash
# slurm/root-parent.sh: a split daemon (started as root with a group)
# submits and cancels root's own runs' Slurm jobs through its privileged
# parent too (pipelined(8) SECURITY), never from the daemon process: a
# wrapper of sbatch and scancel first on PATH records the process that
# started each, which is a helper of the parent's (its parent the
# parent), not the daemon process, and sbatch reads the script on its
# standard input. The job stays root's, as before: Slurm records root as
# its user and its program runs as root. A cancel reaches Slurm through
# the parent, also after a restart of both processes (the new parent
# knows its predecessor's job by priv.owners). With job_user set, root's
# runs are job_user's, and so is the Slurm job, submitted by the parent
# as job_user. The parent refuses nothing the daemon asks.
# run.sh: alone (one Slurm cluster for all the slurm tests).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/slurm.sh"
trap 'pl_kill9 2>/dev/null; slurm_stop' EXIT
. "$TOP/tests/lib/member.sh"
R=$TEST_TMP/out-root; mkdir -p "$R"; chmod 0755 "$R"

# The wrappers: each appends "NAME PPID PPID's-PPID ARGS" to $W/calls,
# then runs the real command (as root, or as job_user below).
W=$TEST_TMP/wrap; mkdir -p "$W"; chmod 0755 "$W"
: > "$W/calls"; chmod 0666 "$W/calls"
for c in sbatch scancel; do
	real=$(command -v "$c") || fail "no $c on PATH"
	printf '#!/bin/sh\necho "%s $PPID $(awk '"'"'/^PPid:/ { print $2 }'"'"' /proc/$PPID/status) $*" >> %s/calls\nexec %s "$@"\n' \
	    "$c" "$W" "$real" > "$W/$c"
	chmod 0755 "$W/$c"
done
export PATH="$W:$PATH"
MEMBER_CONF_TAIL=$(printf '[slurm]\npartition = debug\n')
member_daemon "max_jobs = 4"

slurm_uid() { slurm_field "$1" UserId | sed -n 's/.*(\([0-9]*\))$/\1/p'; }
# daemon_pid: the daemon process, the parent's ($PL_PID's) oldest child
# named pipelined (its helpers and file servers come later).
daemon_pid() { pgrep -o -P "$PL_PID" -x pipelined; }
# by_parent NAME ID: the last call of NAME (for Slurm job ID, or any
# sbatch) was started by a helper of the parent's, not the daemon process.
by_parent() {
	local line dp
	dp=$(daemon_pid)
	[ -n "$dp" ] || fail "no daemon process below the parent $PL_PID"
	line=$(grep "^$1 .*${2:-}\$" "$W/calls" | tail -1)
	[ -n "$line" ] || fail "no $1 ${2:-} went through the wrapper: $(cat "$W/calls" 2>/dev/null)"
	set -- $line
	[ "$2" != "$dp" ] || fail "$1 was run by the daemon process ($dp), not the parent: $line"
	[ "$3" = "$PL_PID" ] || fail "$1's parent $2 is not a helper of the parent $PL_PID (its parent: $3): $line"
	note "$line: run by helper $2 of the parent $PL_PID (the daemon process is $dp)"
}

# --- root's run: sbatch through the parent; the job root's, as before
printf '[run]\nname = r1\n[x]\nstage = exec\nexecutor = slurm\ncommand = id -u > %s/r1.uid\n' "$R" > specs/r1.ini
pctl submit specs/r1.ini >/dev/null || fail "r1: root could not submit"
wait_run r1 succeeded 90
id1=$(ext_ids r1 x)
[ -n "$id1" ] || fail "r1: no Slurm job id stored"
by_parent sbatch
grep -q "^sbatch .* --parsable$" "$W/calls" || fail "r1: sbatch did not read the script on its standard input: $(cat "$W/calls")"
[ "$(slurm_uid "$id1")" = 0 ] || fail "r1: Slurm job $id1 is $(slurm_field "$id1" UserId)'s, not root's"
[ "$(cat "$R/r1.uid")" = 0 ] || fail "r1: the job ran as uid $(cat "$R/r1.uid")"

# sleeper RUN: root submits a slurm job that sleeps; ID its Slurm job id.
sleeper() {
	printf '[run]\nname = %s\n[x]\nstage = exec\nexecutor = slurm\ncommand = echo started > %s/%s; sleep 60; touch %s/%s-finished\n' \
	    "$1" "$R" "$1" "$R" "$1" > "specs/$1.ini"
	pctl submit "specs/$1.ini" >/dev/null || fail "$1: root could not submit"
	for _ in $(seq 1 300); do [ -f "$R/$1" ] && break; sleep 0.1; done
	[ -f "$R/$1" ] || fail "$1 never started on the node"
	ID=$(ext_ids "$1" x)
	[ -n "$ID" ] || fail "$1: no Slurm job id stored"
}
# root_cancel RUN ID: root cancels the run; Slurm stops job ID, by a
# scancel of the parent's.
root_cancel() {
	pctl cancel "$1" >/dev/null || fail "$1: root could not cancel"
	wait_run "$1" cancelled 30
	slurm_stopped "$1" "$2" "$R"
	by_parent scancel "$2"
}

sleeper r2
by_parent sbatch
root_cancel r2 "$ID"

# --- across a restart: the new parent cancels its predecessor's job
sleeper r3
pl_kill9
pl_start
chmod 0666 "$TEST_TMP/run/control.sock"
root_cancel r3 "$ID"
integrity_ok
pl_stop

# --- with job_user, root's runs are job_user's, and so is the Slurm job
# (submitted by the parent as job_user, as a member's)
O=$TEST_TMP/out; mkdir -p "$O"; chmod 0777 "$O"
member_daemon "max_jobs = 4" "job_user = nobody"
printf '[run]\nname = r4\n[x]\nstage = exec\nexecutor = slurm\ncommand = id -u > %s/r4.uid\n' "$O" > specs/r4.ini
pctl submit specs/r4.ini >/dev/null || fail "r4: root could not submit"
wait_run r4 succeeded 90
id4=$(ext_ids r4 x)
by_parent sbatch
[ "$(slurm_uid "$id4")" = "$nobody" ] || fail "r4: Slurm job $id4 is $(slurm_field "$id4" UserId)'s, not job_user's"
[ "$(cat "$O/r4.uid")" = "$nobody" ] || fail "r4: the job ran as uid $(cat "$O/r4.uid")"
grep -q 'privileged parent: refused' "$TEST_TMP/pipelined.out" &&
	fail "the parent refused the daemon: $(grep 'privileged parent' "$TEST_TMP/pipelined.out")"
pl_stop
echo "slurm/root-parent: ok"
