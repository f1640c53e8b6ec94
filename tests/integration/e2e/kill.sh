#!/bin/bash
# e2e/kill.sh: kill -9 the daemon at three random moments of the tiny-v2 run:
# twice during train (at random steps, one in each half
# of the steps that remain after the first 10%), once at a random moment
# up to a second after train ended (the chain after it, merge .. gate,
# in-process stages and the bakes, takes a few seconds); each time the
# daemon is started again on the same store.  The run must end as an
# undisturbed run of the same spec did: the same gate verdict and a
# byte-identical final GGUF (the quantize artifact), with the store whole
# (integrity_check) and the event ids gapless.
# KILL_SEED=N repeats a choice of moments (the seed is printed).
# run.sh: alone (kill -9 at random moments of a long run).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/e2e.sh"
trap 'e2e_stop; pl_kill9 2>/dev/null' EXIT
cd "$TEST_TMP"
SEED=${KILL_SEED:-$(( $(date +%s) % 32768 ))}
RANDOM=$SEED
note "KILL_SEED=$SEED"
e2e_prepare "$TEST_TMP/e2e"
pl_conf "python = /usr/bin/python3" "max_jobs = 2"
pl_start

# train_step RUN: the train job's progress (steps done), 0 before it runs,
# -1 once it has finished.
train_step() {
	pctl --json status "$1" 2>/dev/null | /usr/bin/python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    print(0); sys.exit()
for j in d["jobs"]:
    if j["name"] == "train":
        if j["state"] in ("succeeded", "failed", "skipped", "cancelled", "rejected"): print(-1)
        elif j["state"] == "running": print(int(j["progress_done"] or 0))
        else: print(0)'
}
# outcome RUN: "verdict|pass|sha256 of the quantize gguf"
outcome() {
	local v g
	v=$(pctl values "$1" gate | sed -n 's/^gate *gate.verdict *//p' | /usr/bin/python3 -c '
import json, sys
v = json.load(sys.stdin)
print("%s|%s" % (v["verdict"], v["pass"]))')
	g=$(pctl artifacts "$1" | awk '$1 == "quantize" && $2 == "gguf" {print $4}')
	echo "$v|$g"
}

pctl submit "$E2E_V1" >/dev/null || fail "submit tiny-v1"
wait_run tiny-v1 succeeded 900

# The undisturbed run.
pctl submit "$E2E_V2" >/dev/null || fail "submit tiny-v2"
st=$(wait_end tiny-v2 900)
case "$st" in succeeded|rejected) ;; *) fail "tiny-v2 did not end: $st";; esac
ref=$(outcome tiny-v2)
note "undisturbed tiny-v2: $st, verdict|pass|gguf = $ref"
[ -n "${ref##*|}" ] || fail "no quantize gguf in tiny-v2"

# The same spec again, killed three times.
total=$(/usr/bin/python3 -c 'import sys; print(sum(1 for _ in open(sys.argv[1])) * 24)' \
    "$TEST_TMP/e2e/spec/tiny/corpus-v2.jsonl")
lo=$((total / 10))
k1=$((lo + RANDOM % ((total - lo) / 2)))
k2=$((lo + (total - lo) / 2 + RANDOM % ((total - lo) / 2 - 5)))
k3ms=$((RANDOM % 1000))
note "kills: train step $k1, train step $k2, then $k3ms ms after train"
# reuse = no: the run must do the work again (and be killed doing it),
# not take tiny-v2's by its keys (pipeline.ini(5), reuse).
V2K=$(dirname "$E2E_V2")/tiny-v2k.ini
sed '/^\[run\]/a reuse = no' "$E2E_V2" > "$V2K"
grep -q '^reuse = no$' "$V2K" || fail "no [run] section in $E2E_V2 to turn reuse off in"
pctl submit "$V2K" --name tiny-v2k >/dev/null || fail "submit tiny-v2k"
kills=0
for at in $k1 $k2; do
	for _ in $(seq 1 9000); do
		s=$(train_step tiny-v2k)
		[ "$s" -ge "$at" ] || [ "$s" -lt 0 ] && break
		sleep 0.1
	done
	[ "$s" -ge 0 ] || fail "train finished before the kill at step $at"
	pl_kill9
	kills=$((kills + 1))
	note "kill $kills: daemon killed at train step $s (aimed at $at)"
	pl_start
done
for _ in $(seq 1 9000); do [ "$(train_step tiny-v2k)" -lt 0 ] && break; sleep 0.1; done
sleep "$(printf '%d.%03d' $((k3ms / 1000)) $((k3ms % 1000)))"
st=$(run_state tiny-v2k)
case "$st" in succeeded|failed|rejected) fail "the run ended before the third kill (${k3ms} ms after train)";; esac
running=$(pctl --json status tiny-v2k | /usr/bin/python3 -c '
import json, sys
print(",".join(j["name"] for j in json.load(sys.stdin)["jobs"] if j["state"] == "running") or "-")')
pl_kill9
note "kill 3: daemon killed ${k3ms} ms after train, jobs running: $running"
pl_start
st=$(wait_end tiny-v2k 900)
pctl status tiny-v2k
case "$st" in succeeded|rejected) ;; *) fail "tiny-v2k did not end: $st";; esac
got=$(outcome tiny-v2k)
note "killed tiny-v2k: $st, verdict|pass|gguf = $got"
[ "$got" = "$ref" ] || fail "the killed run's outcome $got is not the undisturbed run's $ref"
# every job but a rejecting gate (the verdict's own refusal) succeeded
pctl --json status tiny-v2k | /usr/bin/python3 -c '
import json, sys
for j in json.load(sys.stdin)["jobs"]:
    if j["state"] != "succeeded" and j["name"] != "gate":
        sys.exit("job %s ended %s" % (j["name"], j["state"]))' || fail "a job did not come back"
integrity_ok
events_gapless
pl_stop
echo "e2e/kill: ok"
