#!/bin/bash
# job/priv-parent.sh: a daemon started as root with a group is two
# processes (pipelined(8) SECURITY): the privileged parent, root, the
# process the service manager (and this test) started, and its one child,
# the daemon process. The parent starts each run's shim, pinned to the
# run's owner (-u before -G; -o the daemon process's user where that is
# not root, pipeline-shim's records owner), and delivers the daemon's
# signals: a member's runs run, a cancel and a timeout still stop their
# jobs, with nothing refused. kill -9 of either process ends both, and a restart
# finds the same truth: the job that ran across the kill ran once and
# succeeded, and so did each job of a DAG across six kills.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
. "$TOP/tests/lib/member.sh"
O=$TEST_TMP/out; mkdir -p "$O"; chmod 0777 "$O"
member_daemon

# The daemon process: the parent's one pipelined child, and the parent root.
D=$(split_daemon_pid)
[ -n "$D" ] && [ "$(echo "$D" | wc -w)" = 1 ] || fail "no one daemon process under the parent $PL_PID: '$D'"
[ "$(stat -c %u "/proc/$PL_PID")" = 0 ] || fail "the parent is not root"
[ "$(sed -n 's/^PPid:\s*//p' "/proc/$D/status")" = "$PL_PID" ] || fail "the daemon process is not the parent's child"
du=$(stat -c %u "/proc/$D")
note "the parent $PL_PID (root), the daemon process $D (uid $du) its child"

# A member's run: its shim the parent's child, pinned to the member, and
# told the daemon process's user (-o) unless that is root.
member_exec m1 "sleep 30"
wait_run m1 running 20
ro=""; [ "$du" = 0 ] || ro="-o $du "
shim=""
for _ in $(seq 50); do shim=$(pgrep -P "$PL_PID" -f -- "-u $nobody:[0-9:,]* $ro-G 3" | head -1); [ -n "$shim" ] && break; sleep 0.1; done
[ -n "$shim" ] || fail "m1: no shim of the parent's pinned to uid $nobody (${ro:-no -o}): $(pgrep -af pipeline-shim)"
[ "$(sed -n 's/^PPid:\s*//p' "/proc/$shim/status")" = "$PL_PID" ] || fail "m1: the shim is not the parent's child"
note "a member's shim: started by the parent, pinned: $(tr '\0' ' ' < "/proc/$shim/cmdline")"

# Cancel: the signal goes through the parent, and the job stops.
as_member "$PIPELINECTL" -f "$PL_CONF" cancel m1 >/dev/null || fail "m1: cancel"
wait_run m1 cancelled 20
for _ in $(seq 50); do pgrep -u "$nobody" -x sleep -P "$shim" >/dev/null || break; sleep 0.1; done
pgrep -u "$nobody" -x sleep -P "$shim" >/dev/null && fail "m1: the job's sleep outlived its cancel"
note "cancel: the job stopped"

# Timeout: the same.
printf '[run]\nname = t1\n[x]\nstage = exec\ntimeout = 1s\ncommand = sleep 30\n' > specs/t1.ini
chmod 0644 specs/t1.ini
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/t1.ini >/dev/null || fail "t1: submit"
wait_run t1 failed 30
pctl status t1 | grep -qi 'timeout\|timed out' || fail "t1: not a timeout: $(pctl status t1)"
note "timeout: the job stopped"
grep -q 'privileged parent: refused' "$TEST_TMP/pipelined.out" &&
	fail "the parent refused the daemon: $(grep 'privileged parent' "$TEST_TMP/pipelined.out")"

# kill -9 of the daemon process: the parent follows; a restart adopts the
# job that runs on and it succeeds, once.
split_kill9 daemon k1
note "kill -9 of the daemon process: the parent ended, the restart adopted the job: it ran once"

# kill -9 of the parent: the daemon process follows.
split_kill9 parent k2
note "kill -9 of the parent: the daemon process ended, the restart adopted the job: it ran once"

# Six kills, of each process in turn, during a member's 24-job DAG: every
# job ran exactly once and the run succeeded.
{
	printf '[run]\nname = dag\n'
	for i in $(seq 1 24); do
		printf '[j%d]\nstage = exec\ncommand = sleep 0.%d; echo j%d >> %s/dag\n' "$i" $((i % 5)) "$i" "$O"
		[ "$i" -gt 4 ] && printf 'after = j%d\n' $((i - 4))
	done
} > specs/dag.ini
chmod 0644 specs/dag.ini
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/dag.ini >/dev/null || fail "dag: submit"
for k in 1 2 3 4 5 6; do
	sleep 0.$((RANDOM % 6 + 2))
	if [ $((k % 2)) = 0 ]; then
		pl_kill9
	else
		kill -9 "$(split_daemon_pid)"
		wait "$PL_PID" 2>/dev/null
		PL_PID=""
	fi
	pl_start
	chmod 0666 "$TEST_TMP/run/control.sock"
done
wait_run dag succeeded 120
[ "$(sort "$O/dag" | uniq -d)" = "" ] || fail "dag: jobs ran twice: $(sort "$O/dag" | uniq -d | tr '\n' ' ')"
[ "$(sort -u "$O/dag" | wc -l)" = 24 ] || fail "dag: $(sort -u "$O/dag" | wc -l) of 24 jobs ran"
note "six kills -9 of either process during a 24-job DAG: every job ran once"
pl_stop
