#!/bin/bash
# tests/bench/reuse-bench.sh: what reuse by content saves on the real
# router, Gemma 3 270M (tests/tools/realbase.sh), on a private daemon and
# the REAL Ollama (tests/lib/e2e.sh: bench_router), as `make demo` runs
# it: router-v0 (etc/examples/router/v0.ini, the incumbent; not timed
# against anything), then router-v1 (v1.ini, the demo's: tokenize, probe,
# train on the CPU, merge, tensor_fix, convert, quantize, verify,
# register, bake, bake-v0: the incumbent router:v0 baked on the run's case
# file, gate against it), then, back to back, the same v1 again with three
# cases added to cases.jsonl (the spec's own, edited in place, as an
# operator would).  The target: the second run's wall time at most 0.35x
# the first's, and the same verdict on the cases both runs had.
# What the second run is expected to do: every job up to register
# reused (probe may run again: train added a probe_pair), bake and
# bake-v0 running (the case file changed) but each taking the shared
# cases' results from the first run's bakes (pipeline.ini(5) bake) and
# sending only the three new cases to the server, and the gate deciding
# on the new case set.  In the first run bake-v0 is router-v0's bake
# reused whole (the same keys and case file).
#
# The second run is submitted under a new name (router-v1-cases) by
# default, which reuse by content covers as well as a revision does (no
# run name enters a key).  BENCH_RESUBMIT=yes submits the edited spec under
# its own name instead (a resubmit makes a new revision of router-v1), and
# reads that revision as router-v1@2; second_submit below is the one place
# that differs.
#
# Prints: what each bake of the second run took and ran (bake.reuse),
# both runs' wall times (submit to end, by the clock here, and the
# store's created to finished), their ratio; each job of both runs with its
# state and wall time, and for the second run what `pipelinectl explain`
# says of each job (reused from where, or why it ran); the gate's verdict of
# both; for bake and bake-v0, every case both runs' bakes had whose pass
# mask over the passes differs (none expected: the rows are taken as
# stored); the load average
# (1 minute, every 10 s) during each run, and how busy the machine's CPU
# was.  The machine this runs on may be shared: the ratio is the figure,
# the absolute times are notes.
# Environment: BENCH_RESUBMIT (above); BENCH_MAX_STEPS=N trains v1 N
# optimizer steps instead of the demo's 30 (a loaded machine: less
# training makes the ratio worse, not better, so a ratio met with fewer
# steps is met with the demo's); BENCH_SHORT=yes runs v1 shortened as
# e2e/router-real does (corpus-check.jsonl, 2 epochs, one bake pass), for
# a quicker look; the figures are the demo's shape.
# Exit status: 0 when both runs succeeded and the verdicts of the shared
# cases and of the gate agree (the ratio is printed, not asserted).
# Not part of `make check` or `make bench`'s assertions; run it alone:
#   tests/bench/reuse-bench.sh
# (HACKING.md: Benchmarks).
# Measured (2026-12-06, 2 cores shared with other work; v1 with
# max_steps 12 by hand for the load, not the demo's 30): router-v1
# 2344.6 s (load median 10.6; train 1001.8 s, bake 1155.0 s, probe 152.4 s),
# router-v1-cases 627.2 s (load median 5.3; bake 549.6 s, probe 60.7 s
# run again since train added a probe_pair, register 15.0 s): 0.267x.
# Reused: tokenize, train, merge, tensor_fix, convert, quantize, verify;
# the 69 shared cases' pass masks all the same.  That was before a bake
# took results case by case and before v1.ini baked the incumbent: the
# second run's bake ran all 72 cases (549.6 s of its 627.2 s) and its
# gate refused, "case sets differ" from router-v0's bake.
# Measured again (2026-12-06 12:24-12:48, BENCH_RESUBMIT=yes
# BENCH_MAX_STEPS=12, load median 3.3 then 2.6 on 2 cores): router-v0
# 870.2 s (not timed against anything); router-v1 332.4 s (train 169.7 s,
# bake 131.0 s, bake-v0 reused whole from router-v0's bake);
# router-v1@2 34.6 s: 0.104x.  Ran: corpus_check, probe (19.9 s, its
# calibration history), bake (3 of 72 cases, 3.9 s), bake-v0 (3 cases,
# 9.4 s), gate; the rest reused (1.0 s in all).  The 69 shared cases'
# pass masks all the same for both models; both gates promote, the
# second on the 72-case set.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
export TOP
TEST_TMP=$(mktemp -d /tmp/reuse-bench.XXXXXX)
export TEST_TMP
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/e2e.sh"
BENCH_SAMPLER=
trap 'kill $BENCH_SAMPLER 2>/dev/null; e2e_stop; pl_kill9 2>/dev/null' EXIT
cd "$TEST_TMP"
RESUBMIT=${BENCH_RESUBMIT:-no}
bench_router "$TEST_TMP/e2e"
note "work directory $TEST_TMP"


bench_sampler

bench_run "$R/v0.ini" router-v0
[ "$(run_state router-v0)" = succeeded ] || { pctl status router-v0; fail "router-v0 did not succeed"; }

stat0=$(awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
bench_run "$R/v1.ini" router-v1

# The second run: three cases more, the rest of the spec as it was.
cat >>"$R/cases.jsonl" <<'EOF'
{"id": "f-add-01", "kind": "route", "user": "show me what is in the receipts folder", "expect": {"capability": "open_folder", "args": {"path": "receipts"}}, "forbid": ["delete_file"]}
{"id": "f-add-02", "kind": "route", "user": "start a 7 minute countdown", "expect": {"capability": "set_timer", "args": {"minutes": 7}}}
{"id": "f-add-03", "kind": "route", "user": "put on some lo-fi beats", "expect": {"capability": "play_music"}, "forbid": ["delete_file"]}
EOF
# second_submit: the second run, as a new revision of router-v1 or a run
# of another name.
if [ "$RESUBMIT" = yes ]; then
	RUN2=router-v1@2
	bench_run "$R/v1.ini" "$RUN2"
else
	RUN2=router-v1-cases
	bench_run "$R/v1.ini" "$RUN2" --name "$RUN2"
fi
stat1=$(awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
kill $BENCH_SAMPLER 2>/dev/null

# The first run's values by its revision: after a resubmit, router-v1
# alone names the newest revision, the second run.
for run in router-v1 "$RUN2"; do
	ref=$run
	[ "$run" = router-v1 ] && ref=router-v1@1
	for job in bake bake-v0 gate; do
		pctl --json values "$ref" $job >"$run.$job.json" || fail "values $ref $job"
	done
done
for job in $(/usr/bin/python3 -c 'import json, sys
for j in json.load(open(sys.argv[1]))["jobs"]: print(j["name"])' "$RUN2.status.json"); do
	echo "$job: $(pctl explain "$RUN2" "$job" 2>&1 | tr '\n' ' ')" >>explain.txt
done

/usr/bin/python3 - router-v1 "$RUN2" load.txt "$stat0" "$stat1" "$(nproc)" <<'PY'
import json, statistics, sys
a, b = sys.argv[1], sys.argv[2]
load = [tuple(map(float, l.split())) for l in open(sys.argv[3]) if l.strip()]
b0, t0 = (float(x) for x in sys.argv[4].split())
b1, t1 = (float(x) for x in sys.argv[5].split())
ok = True

def clock(name):
    s, e, st = open(name + ".time").read().split()
    return float(s), float(e), st

def status(name):
    return json.load(open(name + ".status.json"))

def value(name, job, key):
    """A value of name's job: parsed when JSON, else its text."""
    for v in json.load(open("%s.%s.json" % (name, job)))["values"]:
        if v["key"] == key:
            try:
                return json.loads(v["value"])
            except ValueError:
                return v["value"]
    return None

wall = {}
for n in (a, b):
    s, e, st = clock(n)
    r = status(n)["run"]
    wall[n] = e - s
    ls = [x[1] for x in load if s <= x[0] <= e]
    print("%-16s %-9s wall %7.1f s (store: %.1f s); load %s" % (
        n, st, e - s, (r["finished"] or 0) - r["created"],
        "median %.2f, range %.2f-%.2f" % (statistics.median(ls), min(ls), max(ls)) if ls else "not sampled"))
    ok = ok and st == "succeeded"
ratio = wall[b] / wall[a]
tr = [j for j in status(a)["jobs"] if j["stage"] == "train" and j.get("started") and j.get("finished")]
trs = sum(j["finished"] - j["started"] for j in tr)
print("%s: train %.1f s, the rest (non-training) %.1f s (BENCH_NONTRAIN_S for keycost-bench.sh)"
      % (a, trs, wall[a] - trs))
print("ratio %s / %s: %.3fx (target at most 0.35x: %s)" % (b, a, ratio, "met" if ratio <= 0.35 else "MISSED"))
print("machine busy %.0f%% of its %s cores' CPU over the two runs"
      % (100 * (b1 - b0) / max(1, t1 - t0), sys.argv[6]))
print()
print("%-12s %-11s %-10s %8s   %-10s %8s" % ("job", "stage", a, "s", b, "s"))
ja = {j["name"]: j for j in status(a)["jobs"]}
for j in status(b)["jobs"]:
    x = ja.get(j["name"], {})
    d = lambda j: (j["finished"] - j["started"]) if j.get("started") and j.get("finished") else 0.0
    print("%-12s %-11s %-10s %8.1f   %-10s %8.1f" % (j["name"], j["stage"], x.get("state", "-"),
          d(x) if x else 0.0, j["state"], d(j)))
ran = [j["name"] for j in status(b)["jobs"] if j["state"] != "reused"]
reused = [j["name"] for j in status(b)["jobs"] if j["state"] == "reused"]
print("second run: ran %s; reused %s" % (", ".join(ran) or "none", ", ".join(reused) or "none"))
print("second run: the reused jobs' wall time (key, artifact check, records) %.3f s in all"
      % sum(j["finished"] - j["started"] for j in status(b)["jobs"] if j["state"] == "reused"))
print()
diff = []
for bake in ("bake", "bake-v0"):
    ra = value(a, bake, "bake.summary")["rows"]
    rb = value(b, bake, "bake.summary")["rows"]
    both = sorted(set(ra) & set(rb))
    d = [c for c in both if ra[c][2] != rb[c][2] or ra[c][1] != rb[c][1]]
    diff += d
    print("%s: %s: %s; %s: %s" % (bake, a, value(a, bake, "bake.reuse") or "(no bake.reuse)",
          b, value(b, bake, "bake.reuse") or "(no bake.reuse)"))
    print("%s: cases: %d in %s, %d in %s, %d in both; new in %s: %s" % (
        bake, len(ra), a, len(rb), b, len(both), b, ", ".join(sorted(set(rb) - set(ra)))))
    print("%s: pass masks of the %d shared cases: %s" % (bake, len(both), "all the same"
          if not d else "DIFFER on " + ", ".join("%s (%s -> %s)" % (c, ra[c][2], rb[c][2])
          for c in d)))
ga, gb = value(a, "gate", "gate.verdict"), value(b, "gate", "gate.verdict")
print("gate: %s %s, %s %s" % (a, ga and ga["verdict"], b, gb and gb["verdict"]))
ok = ok and not diff and ga and gb and ga["verdict"] == gb["verdict"]
sys.exit(0 if ok else 1)
PY
rc=$?
echo
echo "explain, $RUN2:"
sed 's/^/  /' explain.txt
exit $rc
