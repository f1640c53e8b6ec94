#!/bin/bash
# A run's shim killed -9 while its job program runs on (the program is not
# killed): the job's next attempt starts only once the old attempt's
# process group is gone, and the attempt the dead shim took is counted
# and retried by the job's policy, whether the daemon ran on or was killed
# -9 too and restarted. Against a real pipelined; the job is a shell
# program that records its pid and, in a later attempt, whether an
# earlier attempt's program still lives.
. "$(dirname "$0")/../../lib.sh"
pl_conf
pl_start
O=$TEST_TMP/out; mkdir -p "$O"
py() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }

# spec NAME RETRIES: attempt 1 runs for 60 s (its pid in NAME.pid); a later
# attempt writes whether that one still runs (a zombie, killed and not yet
# reaped by whoever inherited it, does not), then succeeds.
spec() {
	cat > "$TEST_TMP/$1.ini" <<INI
[v]
stage = exec
retries = $2
retry_backoff = 0.1s
command = echo "attempt \$PL_ATTEMPT" >> $O/$1; if [ \$PL_ATTEMPT = 1 ]; then echo \$\$ > $O/$1.pid; sleep 60; fi; p=\$(cat $O/$1.pid); if [ -r /proc/\$p/stat ] && ! grep -q '^[0-9]* ([^)]*) Z' /proc/\$p/stat; then echo overlap >> $O/$1; fi
INI
}
# shim_of NAME: the pid of the shim of attempt 1, once it runs.
shim_of() {
	local f=$TEST_TMP/state/runs/$1/v/attempt-1/.shim/main/shim.json
	for _ in $(seq 1 100); do [ -f "$f" ] && [ -f "$O/$1.pid" ] && break; sleep 0.1; done
	[ -f "$O/$1.pid" ] || fail "$1: attempt 1 did not start"
	py "$f" shim_pid
}
# check NAME LINES: what the attempts wrote, and attempt 1's program gone.
check() {
	[ "$(cat "$O/$1")" = "$2" ] || fail "$1: the attempts wrote '$(cat "$O/$1" | tr '\n' ' ')', wanted '$(echo "$2" | tr '\n' ' ')'"
	local p; p=$(cat "$O/$1.pid")
	! { [ -r /proc/$p/stat ] && ! grep -q '^[0-9]* ([^)]*) Z' /proc/$p/stat; } || fail "$1: attempt 1's program still runs"
}

# The daemon runs on.
spec live 1
pctl submit "$TEST_TMP/live.ini" >/dev/null
kill -9 "$(shim_of live)"
wait_run live succeeded 30
check live "attempt 1
attempt 2"
note "shim killed under a live daemon: attempt 1's program ended before attempt 2"

# The daemon killed -9 first, then the shim; then a restart.
for retries in 1 2; do
	name=restart$retries
	spec "$name" "$retries"
	pctl submit "$TEST_TMP/$name.ini" >/dev/null
	shim=$(shim_of "$name")
	pl_kill9
	kill -9 "$shim"
	pl_start
	wait_run "$name" succeeded 30
	check "$name" "attempt 1
attempt 2"
	[ "$(db "SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id JOIN runs r ON r.id = j.run_id WHERE r.name = '$name'")" = 2 ] ||
		fail "$name: $(db "SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id JOIN runs r ON r.id = j.run_id WHERE r.name = '$name'") attempts recorded, wanted 2"
	note "daemon and shim killed, retries=$retries: attempt 1's program ended before attempt 2, two attempts"
done
integrity_ok
pl_stop
echo ok
