#!/bin/bash
# tests/bench/real-release-bench.sh: the real model's release as a table:
# Gemma 3 270M (tests/tools/realbase.sh) through the router's
# lifecycle on a private daemon and the REAL Ollama (tests/lib/e2e.sh:
# router_prepare), as `make demo` runs it: router-v0 (etc/examples/router/
# v0.ini: convert, quantize, verify, register, bake), then router-v1 (v1.ini:
# tokenize, probe, train on the CPU, merge, tensor_fix, convert, quantize,
# verify, register, bake, gate against v0).  Warm: the caches (ML
# environment, base, Ollama) are built before the clock starts.
#
# Prints, per run and for both together, each job's wall time (the store's
# start and end of the job) and its share of the whole, the run's own wall
# time, and the machine's load: the 1-minute load average sampled every 10
# s over the runs (median and range) and how busy the whole machine's CPU
# was meanwhile (/proc/stat), since this machine is shared and a stage's
# time moves with the others' load.
# Environment: BENCH_CORPUS (v1's corpus: corpus-v1.jsonl, the demo's, or
# corpus-check.jsonl, make check's) and BENCH_EPOCHS (default 2).
# Prints figures; asserts nothing but that both runs got their verdicts.
#
# Measured: see the figures at the end of this header when filled in by a
# run on a quiet machine (HACKING.md: Benchmarks).
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
export TOP
TEST_TMP=$(mktemp -d /tmp/real-release-bench.XXXXXX)
export TEST_TMP
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/e2e.sh"
trap 'e2e_stop; pl_kill9 2>/dev/null' EXIT
cd "$TEST_TMP"
CORPUS=${BENCH_CORPUS:-corpus-v1.jsonl}
EPOCHS=${BENCH_EPOCHS:-2}
router_daemon "$TEST_TMP/e2e"
R=$ROUTER_DIR
sed -e "s/^corpus = corpus-v1.jsonl\$/corpus = $CORPUS/" \
    -e "s/^num_train_epochs = 2\$/num_train_epochs = $EPOCHS/" "$R/v1.ini" >"$R/v1-bench.ini"

# The load sampler: the 1-minute load average every 10 s, and /proc/stat's
# busy jiffies at the start and end.
( while :; do cut -d' ' -f1 /proc/loadavg; sleep 10; done ) >load.txt &
SAMPLER=$!
stat0=$(awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
for spec in v0.ini v1-bench.ini; do
	run=$(pctl submit "$R/$spec") || { kill $SAMPLER; fail "submit $spec"; }
	for _ in $(seq 1 72000); do
		case "$(run_state "$run")" in succeeded|failed|cancelled|rejected) break;; esac
		sleep 0.5
	done
	pctl --json status "$run" >"$run.status.json"
	echo "$run $(run_state "$run")" >>runs.txt
done
stat1=$(awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
kill $SAMPLER 2>/dev/null
/usr/bin/python3 - runs.txt load.txt "$stat0" "$stat1" "$(nproc)" <<'PY'
import json, statistics, sys
runs = [l.split() for l in open(sys.argv[1])]
load = [float(x) for x in open(sys.argv[2]).read().split()]
b0, t0 = (float(x) for x in sys.argv[3].split())
b1, t1 = (float(x) for x in sys.argv[4].split())
rows, total = [], 0.0
for name, state in runs:
    d = json.load(open(name + ".status.json"))
    r = d["run"]
    for j in d["jobs"]:
        if j["started"] and j["finished"]:
            rows.append((name, j["name"], j["stage"], j["finished"] - j["started"], j["state"]))
    total += (r["finished"] or 0) - r["created"]
jobsum = sum(x[3] for x in rows)
print("%-10s %-12s %-11s %9s %7s  %s" % ("run", "job", "stage", "wall s", "share", "state"))
for name, job, stage, s, st in rows:
    print("%-10s %-12s %-11s %9.1f %6.1f%%  %s" % (name, job, stage, s, 100 * s / jobsum, st))
print("%-35s %9.1f %6.1f%%" % ("jobs together", jobsum, 100.0))
print("%-35s %9.1f         (the runs' wall time, submit to end)" % ("runs together", total))
by = {}
for _, _, stage, s, _ in rows:
    by[stage] = by.get(stage, 0) + s
print("by stage: " + ", ".join("%s %.1f%%" % (k, 100 * v / jobsum) for k, v in sorted(by.items(), key=lambda kv: -kv[1])))
if load:
    print("load (1-min average, every 10 s): median %.2f, range %.2f-%.2f on %s cores"
          % (statistics.median(load), min(load), max(load), sys.argv[5]))
print("machine busy %.0f%% of its CPU over the runs" % (100 * (b1 - b0) / max(1, t1 - t0)))
print("verdicts: " + ", ".join("%s %s" % (n, s) for n, s in runs))
PY
pctl report router-v1 --vs router-v0
