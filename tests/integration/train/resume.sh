#!/bin/bash
# train/resume.sh: the train stage's resume and adoption, through a real
# pipelined running tokenize -> probe -> train:
#  - run v1's trainer (the real jobs/train.py, tiny engine) is killed with
#    SIGKILL at step 37, inside the training loop: the stage relaunches it
#    from the newest complete checkpoint (step 25, checked by its COMPLETE
#    marker and hashes), the final adapter is bit-identical to an
#    uninterrupted run's, the two segments' loss events agree on the
#    replayed steps 26-37, and the store holds every loss step once, 1..45
#    (G30); train stores a probe/real calibration pair;
#  - a newer checkpoint whose file no longer hashes as recorded is passed
#    over, not resumed from;
#  - run v2's probe calibrates with v1's pair (pairs 1, its over-estimate),
#    and the daemon is killed -9 while v2's trainer runs: the restarted
#    daemon re-enters the adoptable train stage, re-adopts launch-1 instead
#    of launching again, and the run succeeds;
#  - pipelinectl plot draws v1's loss across both segments (the resume at
#    step 25 marked) against v2's, through Debian's gnuplot, as a PNG and
#    an SVG of the asked size;
#  - pipelinectl watch, replaying v2, gives the train job's rate, loss and
#    time left, and the run's expected end from v1's job durations.
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
trap reap EXIT
setup_tokens 40
WRAP=$TOP/tests/standins/gpu_contention_standin.sh
# loss_steps EVENTS: "step value" per loss metric line.
loss_steps() {
	sed -n 's/.*"type":"metric","name":"loss","step":\([0-9]*\),"value":\([^,}]*\).*/\1 \2/p' "$1"
}
adapter_sha() {
	sed -n 's/^job.artifact {"name":"adapter".*"sha256":"\([0-9a-f]*\)".*/\1/p' "$1"
}
# q SQL: one value from the store.
q() { db "$1"; }
jobval() { # jobval RUN JOB KEY
	q "SELECT v.value FROM vals v JOIN jobs j ON j.id = v.job_id JOIN runs r ON r.id = j.run_id
	    WHERE r.name = '$1' AND j.name = '$2' AND v.key = '$3'"
}

# tests/lib.sh's helpers are written for set -u only.
set +e +o pipefail
mkdir -p "$TEST_TMP/specs"
spec() {
	cat >"$TEST_TMP/specs/$1.ini" <<INI
[run]
name = $1
[tokenize]
base = $BASE
corpus = $CORPUS
[probe]
after = tokenize
engine = tiny
base = $BASE
lora_r = 4
budget_mb = 100
margin_mb = 10
gpu = test-gpu
host_mem_cap = $probe_cap
[train]
after = probe
engine = tiny
base = $BASE
lora_r = 4
max_steps = $2
save_steps = 25
gradient_accumulation_steps = 1
python = $WRAP
launch_backoff = 0.1
INI
}
# The probe's cgroup cap works here or the stage refuses (58 tests both).
probe_cap=12G
"$CTL" stage probe -w "$TEST_TMP/capcheck" engine=tiny base="$BASE" tokens="$TOKENS" \
    lora_r=4 budget_mb=100 margin_mb=10 >"$TEST_TMP/capcheck.out" 2>&1 || probe_cap=off
export STANDIN_KILL_AT_STEP=37 STANDIN_KILL_ONCE=$TEST_TMP/daemon-killed
pl_conf
pl_start

# ---- v1: killed at step 37, resumed from 25 ----------------------------
spec v1 45
pctl submit "$TEST_TMP/specs/v1.ini" >/dev/null || die "submitting v1"
wait_run v1 succeeded 400
[ -e "$TEST_TMP/daemon-killed" ] || die "v1's trainer was not killed"
R=$TEST_TMP/state/runs/v1/train
pctl logs v1 train >"$TEST_TMP/v1.log"
grep -v '^job.metric\|^job.progress' "$TEST_TMP/v1.log"
grep -q 'launch-1 died inside the training loop (killed by signal 9' "$TEST_TMP/v1.log" ||
    die "v1's train log does not report the kill inside the loop"
grep -q "launch-2 resumes from $R/work/checkpoints/checkpoint-25 (step 25)" "$TEST_TMP/v1.log" ||
    die "launch-2 did not resume from checkpoint-25"
set -- $(q "SELECT count(*), count(DISTINCT m.step), min(m.step), max(m.step) FROM metrics m
    JOIN jobs j ON j.id = m.job_id JOIN runs r ON r.id = j.run_id
    WHERE r.name = 'v1' AND j.name = 'train' AND m.name = 'loss'" | tr '|' ' ')
[ "$*" = "45 45 1 45" ] || die "stored loss curve: rows, distinct steps, min, max = $*"

# The segments' events: 1..37, then 26..45, the replayed steps equal.
loss_steps "$(launch_dir "$R" 1 1)/events" >"$TEST_TMP/l1"
loss_steps "$(launch_dir "$R" 1 2)/events" >"$TEST_TMP/l2"
[ "$(head -1 "$TEST_TMP/l1" | cut -d' ' -f1)" = 1 ] && [ "$(tail -1 "$TEST_TMP/l1" | cut -d' ' -f1)" = 37 ] ||
    die "launch-1's losses are not steps 1..37"
[ "$(head -1 "$TEST_TMP/l2" | cut -d' ' -f1)" = 26 ] && [ "$(tail -1 "$TEST_TMP/l2" | cut -d' ' -f1)" = 45 ] ||
    die "launch-2's losses are not steps 26..45"
replayed=$(awk 'NR == FNR { a[$1] = $2; next }
    ($1 in a) { n++; if (a[$1] != $2) { print "step " $1 ": " a[$1] " vs " $2 > "/dev/stderr"; bad++ } }
    END { print (bad ? -1 : n) }' "$TEST_TMP/l1" "$TEST_TMP/l2")
[ "$replayed" -ge 0 ] || die "a replayed step's loss differs between the segments"
[ "$replayed" -eq 12 ] || die "expected 12 replayed steps (26..37), saw $replayed"

# Bit-identical to an uninterrupted run on the same tokens.
V1TOK=$TEST_TMP/state/runs/v1/tokenize/work/tokens.npz
[ -f "$V1TOK" ] || V1TOK=$(q "SELECT a.path FROM artifacts a JOIN runs r ON r.id = a.run_id
    WHERE r.name = 'v1' AND a.name = 'tokens'")
common=(engine=tiny base="$BASE" tokens="$V1TOK" max_steps=45 save_steps=25
    gradient_accumulation_steps=1 lora_r=4)
"$CTL" stage train -w "$TEST_TMP/ref" "${common[@]}" >"$TEST_TMP/ref.out" 2>&1 ||
    { cat "$TEST_TMP/ref.out"; die "the uninterrupted run failed"; }
ref=$(adapter_sha "$TEST_TMP/ref.out")
got=$(q "SELECT a.sha256 FROM artifacts a JOIN runs r ON r.id = a.run_id
    WHERE r.name = 'v1' AND a.name = 'adapter'")
[ -n "$ref" ] && [ "$got" = "$ref" ] || die "resumed adapter $got differs from the uninterrupted run's $ref"
pair=$(jobval v1 train probe_pair)
[ -n "$pair" ] || die "v1's train stored no calibration pair"

# ---- a newer, corrupt checkpoint is passed over ------------------------
mkdir -p "$TEST_TMP/bad/checkpoints"
cp -r "$R/work/checkpoints/checkpoint-25" "$TEST_TMP/bad/checkpoints/"
cp -r "$R/work/checkpoints/checkpoint-25" "$TEST_TMP/bad/checkpoints/checkpoint-30"
f=$(ls "$TEST_TMP/bad/checkpoints/checkpoint-30" | grep -v COMPLETE | head -1)
printf 'x' >>"$TEST_TMP/bad/checkpoints/checkpoint-30/$f"
"$CTL" stage train -w "$TEST_TMP/bad" "${common[@]}" >"$TEST_TMP/bad.out" 2>&1 ||
    { cat "$TEST_TMP/bad.out"; die "the run with a corrupt checkpoint failed"; }
grep -q "checkpoint $TEST_TMP/bad/checkpoints/checkpoint-30 passed over: $f: sha256" "$TEST_TMP/bad.out" ||
    die "the corrupt checkpoint was not reported"
grep -q "launch-1 resumes from $TEST_TMP/bad/checkpoints/checkpoint-25 (step 25)" "$TEST_TMP/bad.out" ||
    die "did not resume from the complete checkpoint-25"
[ "$(adapter_sha "$TEST_TMP/bad.out")" = "$ref" ] || die "the adapter after resuming from 25 differs"

# ---- v2: calibrated probe; the daemon dies during train ----------------
spec v2 30
pctl submit "$TEST_TMP/specs/v2.ini" >/dev/null || die "submitting v2"
for _ in $(seq 6000); do
	ev=$(ls "$(launch_dir "$TEST_TMP/state/runs/v2/train" 1 1)/events" 2>/dev/null || true)
	[ -n "$ev" ] && grep -q '"type":"loop_started"' "$ev" && break
	sleep 0.05
done
grep -q '"type":"loop_started"' "$ev" || die "v2's training loop did not start"
pl_kill9
sleep 0.5
pl_start
wait_run v2 succeeded 400
probe=$(jobval v2 probe probe)
"$PYD" - "$pair" "$probe" <<'EOF' || die "v2's probe did not calibrate with v1's pair: $probe (pair $pair)"
import json, math, sys
pair, probe = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert pair["gpu"] == "test-gpu" and pair["recipe"] == "tiny:base", pair
over = round((1 - pair["real_mb"] / pair["probe_mb"]) * 1000) / 1000
assert probe["pairs"] == 1, probe
assert abs(probe["over_estimate_pct"] - over * 100) < 1e-9, (probe, over)
assert probe["predicted_mb"] == math.ceil(probe["probe_mb"] * (1 - over) - 1e-9), probe
EOF
tv=$(jobval v2 train train)
case "$tv" in *'"launches":1,'*) ;; *) die "v2's train was launched again instead of re-adopted: $tv";; esac
n=$(db "SELECT count(*) FROM procs p JOIN attempts a ON a.id = p.attempt_id JOIN jobs j ON j.id = a.job_id
    JOIN runs r ON r.id = j.run_id WHERE r.name = 'v2' AND j.name = 'train'")
[ "$n" = 1 ] || die "v2's train has $n processes, want the one re-adopted launch"
set -- $(db "SELECT count(*), count(DISTINCT m.step) FROM metrics m JOIN jobs j ON j.id = m.job_id
    JOIN runs r ON r.id = j.run_id WHERE r.name = 'v2' AND j.name = 'train' AND m.name = 'loss'" | tr '|' ' ')
[ "$*" = "30 30" ] || die "v2's stored loss curve: $*"

# ---- pipelinectl plot: v1's curve across both segments, v2 beside it ----
# (gnuplot, the real one from Debian, draws it)
pctl plot v1 --vs v2 -o "$TEST_TMP/loss.png" >"$TEST_TMP/plot.out" 2>&1 ||
    { cat "$TEST_TMP/plot.out"; die "plot failed"; }
grep -q "loss of v1 over 45 steps, 1 resume(s), against v2" "$TEST_TMP/plot.out" ||
    die "plot: $(cat "$TEST_TMP/plot.out")"
[ "$(q "SELECT m.step FROM metrics m JOIN jobs j ON j.id = m.job_id JOIN runs r ON r.id = j.run_id
    WHERE r.name = 'v1' AND j.name = 'train' AND m.name = 'resumed'")" = 25 ] ||
    die "the store does not hold v1's resume at step 25"
# The feed's job.resumed (train.resumed for [notify]) is the stage's own
# event, with the checkpoint it handed over and the launch; train.py's
# "resumed" line itself is not published (a job program publishes only
# pipeline-job(7)'s types): one event, the stage's.
[ "$(q "SELECT count(*) FROM events WHERE run = 'v1' AND type = 'job.resumed'")" = 1 ] &&
[ "$(q "SELECT count(*) FROM events WHERE run = 'v1' AND type = 'job.resumed'
    AND data LIKE '%\"step\":25%' AND data LIKE '%checkpoint-25%' AND data LIKE '%\"launch\":\"launch-%'")" = 1 ] ||
    die "v1: the train stage did not publish job.resumed at step 25: $(q "SELECT data FROM events WHERE
    run = 'v1' AND type = 'job.resumed'")"
"$PYD" - "$TEST_TMP/loss.png" <<'EOF' || die "plot did not write a 1000x600 PNG"
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
n, t = struct.unpack(">I4s", b[8:16])
assert t == b"IHDR" and n == 13, t
w, h = struct.unpack(">II", b[16:24])
assert (w, h) == (1000, 600), (w, h)
assert zlib.crc32(b[12:29]) == struct.unpack(">I", b[29:33])[0], "IHDR crc"
assert b[-8:-4] == b"IEND", "no IEND"
EOF
pctl plot v1 --size 640x480 -o "$TEST_TMP/loss.svg" >/dev/null || die "plot to svg failed"
grep -q '<svg' "$TEST_TMP/loss.svg" && grep -q 'width="640"' "$TEST_TMP/loss.svg" ||
    die "plot did not write a 640x480 SVG"
! pctl plot v1 -o "$TEST_TMP/loss.gif" 2>"$TEST_TMP/plot.err" &&
    grep -q "must end in .png or .svg" "$TEST_TMP/plot.err" || die "plot took a .gif"
[ ! -e "$TEST_TMP/loss.gif" ] || die "plot left a file for a refused name"
! ls "$TEST_TMP"/loss.png.tmp.* >/dev/null 2>&1 || die "plot left a temporary file"
cp "$TEST_TMP/loss.png" "$TOP/tests/out/train-resume-loss.png" 2>/dev/null || true

# ---- watch's estimates: v2 replayed, v1's durations as history ----------
pctl --json watch v2 >"$TEST_TMP/watch.json" 2>&1 || die "watch --json v2 failed"
"$PYD" - "$TEST_TMP/watch.json" <<'EOF' || die "watch --json gave no consistent estimates"
import json, sys
eta = [json.loads(l) for l in open(sys.argv[1]) if '"watch.eta"' in l]
tr = [e for e in eta if e["job"] == "train" and "per_second" in e]
assert tr, "no train estimate with a rate"
for e in tr:
    assert e["total"] == 30 and 0 < e["done"] <= 30, e
    assert abs(e["eta_s"] - (e["total"] - e["done"]) / e["per_second"]) < 1e-6, e
    assert e["history_runs"] == 1 and e["run_unknown_jobs"] == 0, e
    assert abs(e["run_end"] - (e["ts"] + e["run_left_s"])) < 1e-6, e
assert any("loss" in e for e in tr), "no loss in the estimates"
EOF
pctl watch v2 --plain >"$TEST_TMP/watch.txt" 2>&1 || die "watch --plain v2 failed"
grep -qE ' train progress [0-9]+/30 step, loss [0-9.e+-]+, [0-9.e+-]+ step/s, [0-9hms]+ left; run [0-9hms]+ left, ends about [0-9]{2}:[0-9]{2}$' \
    "$TEST_TMP/watch.txt" || { cat "$TEST_TMP/watch.txt"; die "watch's progress lines carry no estimate"; }
integrity_ok
echo "ok"
