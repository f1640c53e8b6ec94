#!/bin/bash
# A member's job cannot steer what root does through the records of its
# own process directory. An exec job of a non-root member of the daemon's
# group rewrites shim.json there to name another process group (a
# root-owned sleep in a group of its own, standing in for any process of
# the machine) and is then cancelled, or runs past its timeout: the other
# group is never signalled, the job's own program is stopped, and the job
# ends cancelled, or failed by its timeout, never succeeded. A job that
# writes an exit.json claiming success while its program fails, fails.
# Against a real pipelined running as root.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/member.sh"
SAC=
trap 'pl_kill9 2>/dev/null; [ -n "$SAC" ] && kill -9 "$SAC" 2>/dev/null' EXIT
O=$TEST_TMP/out; mkdir -p "$O"; chmod 0777 "$O"
chmod 0755 "$TEST_TMP"
pl_conf "group = plsubmit"
pl_start
chmod 0755 "$TEST_TMP/run"; chmod 0666 "$TEST_TMP/run/control.sock"

# The sacrificial process: root's, leader of a process group of its own.
setsid sleep 600 </dev/null >/dev/null 2>&1 &
SAC=$!
for _ in $(seq 1 50); do [ "$(ps -o pgid= -p "$SAC" | tr -d ' ')" = "$SAC" ] && break; sleep 0.1; done
[ "$(ps -o pgid= -p "$SAC" | tr -d ' ')" = "$SAC" ] || fail "the sacrificial sleep is not its own group"
alive() { kill -0 "$SAC" 2>/dev/null; }

# put NAME TEXT: the job's own write of a record into its directory (a
# temporary renamed over it, as the shim writes them).
put='f() { printf "%s\n" "$2" > "$PL_JOB_DIR/.$1.forged" && mv -f "$PL_JOB_DIR/.$1.forged" "$PL_JOB_DIR/$1"; }'
# spec NAME [KEY=VALUE...] COMMAND
spec() {
	local n=$1; shift
	{
		echo "[run]"; echo "name = $n"
		echo "[j]"; echo "stage = exec"
		while [ $# -gt 1 ]; do echo "$1"; shift; done
		echo "command = $put; $1"
	} > "$TEST_TMP/$n.ini"
	chmod 0644 "$TEST_TMP/$n.ini"
}
submit() { as_member "$PIPELINECTL" -f "$PL_CONF" submit "$TEST_TMP/$1.ini" >/dev/null || fail "$1: the member could not submit"; }
forged="{\\\"shim_pid\\\":$SAC,\\\"shim_start\\\":0,\\\"child_pid\\\":$SAC,\\\"pgid\\\":$SAC,\\\"child_start\\\":0}"

# Cancelled after the forgery: the job is stopped and ends cancelled.
spec cancel "sleep 0.5; f shim.json \"$forged\"; touch $O/cancel.forged; sleep 15; touch $O/cancel.survived"
submit cancel
for _ in $(seq 1 100); do [ -e "$O/cancel.forged" ] && break; sleep 0.1; done
[ -e "$O/cancel.forged" ] || fail "cancel: the job did not start"
pctl cancel cancel >/dev/null
st=$(wait_end cancel 30)
note "cancel: the run ended $st; the other group's process $(alive && echo survived || echo was killed)"
alive || fail "cancel: root signalled the process group the job named"
[ "$st" = cancelled ] || fail "cancel: the run ended $st, wanted cancelled"
[ ! -e "$O/cancel.survived" ] || fail "cancel: the job's program was not stopped"

# A timeout after the forgery: the job is stopped and fails by it.
spec timeout "timeout = 2s" "sleep 0.5; f shim.json \"$forged\"; sleep 15; touch $O/timeout.survived"
submit timeout
st=$(wait_end timeout 40)
note "timeout: the run ended $st ($(db "SELECT message FROM jobs WHERE name = 'j' AND run_id = (SELECT id FROM runs WHERE name = 'timeout')")); the other group's process $(alive && echo survived || echo was killed)"
alive || fail "timeout: root signalled the process group the job named"
[ "$st" = failed ] || fail "timeout: the run ended $st, wanted failed"
[ ! -e "$O/timeout.survived" ] || fail "timeout: the job's program was not stopped"

# A forged exit record: the program exits 3 after writing one that says 0.
spec exit "f exit.json '{\"exited\":1,\"status\":0,\"signal\":0,\"start\":0,\"end\":0}'; sleep 2; exit 3"
submit exit
st=$(wait_end exit 30)
note "exit: the run ended $st ($(db "SELECT message FROM jobs WHERE name = 'j' AND run_id = (SELECT id FROM runs WHERE name = 'exit')"))"
[ "$st" = failed ] || fail "exit: the run ended $st, wanted failed (the program exited 3)"
pl_stop
echo ok
