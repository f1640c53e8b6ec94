#!/bin/bash
# probe/sweep-kill.sh: a sweep of three ranks of the tiny engine's train
# (the real jobs/train.py, one GPU: the trainings one after another), with
# pipelined killed -9 while the second variant trains. The restarted
# daemon adopts that training where it runs (its shim outlived the
# daemon), and every variant is trained exactly once: one attempt each,
# none lost, one adapter each, the first and third never started again;
# the adopted one says why it ran, as the others do.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
trap reap EXIT
cd "$TEST_TMP"
setup_tokens 40
pl_conf
pl_start
cat >"$TEST_TMP/k.ini" <<INI
[run]
name = k

[train]
engine = tiny
base = $BASE
tokens = $TOKENS
max_steps = 30
gpu_capacity_mb = 64
resources = gpu
sweep = lora_r: 4 8 16
INI
pctl submit "$TEST_TMP/k.ini" >/dev/null || fail "submit"
# The second variant to start is the one to kill the daemon under.
second=
for _ in $(seq 1 1200); do
	second=$(db "SELECT name FROM jobs WHERE state = 'running' AND name LIKE 'train-r%' AND
		(SELECT count(*) FROM jobs WHERE state = 'succeeded') = 1")
	[ -n "$second" ] && break
	sleep 0.1
done
[ -n "$second" ] || { pctl status k; fail "the second variant never ran after the first"; }
sleep 2
[ "$(job_state k "$second")" = running ] || { pctl status k; fail "$second ended before the kill"; }
pl_kill9
note "killed -9 while $second trained"
pl_start
wait_run k succeeded 300
pctl status k
for r in 4 8 16; do
	row=$(db "SELECT attempts || ' ' || lost FROM jobs WHERE name = 'train-r$r'")
	[ "$row" = "1 0" ] || fail "train-r$r: attempts and lost: $row (wanted 1 0: trained once)"
	[ "$(db "SELECT count(*) FROM artifacts a JOIN jobs j ON j.id = a.job_id WHERE j.name = 'train-r$r' AND a.name = 'adapter'")" = 1 ] ||
		fail "train-r$r: not one adapter"
	[ "$(db "SELECT count(*) FROM procs p JOIN attempts a ON a.id = p.attempt_id JOIN jobs j ON j.id = a.job_id WHERE j.name = 'train-r$r'")" = 1 ] ||
		fail "train-r$r: its training process was started more than once"
done
# The adopted training says why it ran, from the key it recorded before
# the kill, as the others do.
pctl status k | grep -E "^$second " | grep -q "ran: key lora_r: " ||
	{ pctl status k; fail "$second, adopted, does not say why it ran"; }
integrity_ok
pl_stop
echo "probe/sweep-kill: ok"
