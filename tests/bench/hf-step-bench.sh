#!/bin/bash
# tests/bench/hf-step-bench.sh: seconds per optimizer step of engine = hf
# (jobs/train.py, device = cpu: the real transformers, PEFT and
# bitsandbytes of the pinned environment) against a minimal loop written
# with plain transformers + PEFT (tests/bench/hf_minimal_loop.py) on the
# same tokens and settings: the cost of our loop, its events, its
# checkpoints (save_steps) and its determinism. Ours is timed from outside,
# by the arrival of each step's progress event in the events file (polled
# every 5 ms, its CPU seconds read from /proc/PID/stat at that moment); the
# peer times its own steps (wall and process CPU time). Step 1 of each
# (warm-up) is left out; the figures are medians. Both run with one torch
# thread, so on a shared machine the CPU seconds are the steadier figure
# (the wall seconds of runs made minutes apart see different loads).
# Prints figures and the ratios (target: at most 1.05); asserts nothing.
#
#   tests/bench/hf-step-bench.sh [STEPS]
#
# Environment: BENCH_TMP (default: a fresh directory under /tmp, removed
# after), FILLER (words of system prompt per example, default 150),
# SAVE_STEPS (default 5), BENCH_BASE (tiny, the default: the fixture in
# nf4 with the 8-bit AdamW; real: Gemma 3 270M from tests/tools/realbase.sh
# in float32 with AdamW, as the router demo trains it; a directory: that
# checkpoint with the real base's settings).
#
# Measured (2026-12-04, BENCH_BASE=real, 12 steps, nice 5, on a machine
# loaded 8-28 by other work, so the wall figures are the load's; the CPU
# seconds are the steady figure): hf engine CPU median 18.62 s/step,
# minimal loop 17.87 (ratio 1.042, target <= 1.05), minimal loop with
# use_deterministic_algorithms 16.62 (1.121; that the deterministic peer
# ran faster than the plain one says how noisy this load made it);
# peak RSS 2364 MB (training steps) against 2500 MB (whole process).
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PY=$("$TOP/tests/tools/pyenv.sh" --python)
STEPS=${1:-12}
T=${BENCH_TMP:-$(mktemp -d /tmp/hfbench.XXXXXX)}
[ -n "${BENCH_TMP:-}" ] || trap 'rm -rf "$T"' EXIT
cd "$T"
if [ "${BENCH_BASE:-tiny}" != tiny ]; then
	# The real base (Gemma 3 270M), as the router demo trains it: float32,
	# unquantized, LoRA r16 on the seven projections, AdamW.
	base=$BENCH_BASE
	[ "$base" != real ] || base=$("$TOP/tests/tools/realbase.sh" --path)
	extra='"load_in_4bit": false, "dtype": "float32", "optim": "adamw_torch", "learning_rate": 0.0005'
else
	/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" base >/dev/null
	base=$T/base
	extra='"optim": "paged_adamw_8bit", "learning_rate": 0.0002'
fi
/usr/bin/python3 "$TOP/tests/fixtures/gen_corpus.py" corpus.jsonl --n 16 --filler "${FILLER:-150}" >/dev/null
"$TOP/daemon/pipelinectl" stage tokenize -w tok base="$base" corpus="$T/corpus.jsonl" >tok.out 2>&1 ||
    { cat tok.out; exit 1; }
cat >cfg.json <<JSON
{"engine": "hf", "device": "cpu", "base": "$base", "tokens": "$T/tok/tokens.npz",
 "output_dir": "$T/out", "max_steps": $STEPS, "save_steps": ${SAVE_STEPS:-5},
 "gradient_accumulation_steps": 2, "warmup_steps": 2, "seed": 3407,
 "lora_r": 16, "lora_alpha": 16, "threads": 1, $extra}
JSON
"$PY" - "$TOP" "$T" <<'PY'
import json, os, statistics, subprocess, sys, time
top, t = sys.argv[1], sys.argv[2]
ev = os.path.join(t, "events")
open(ev, "w").close()
env = dict(os.environ, PL_EVENTS=ev, PL_WORKDIR=os.path.join(t, "work"))
os.makedirs(env["PL_WORKDIR"], exist_ok=True)
p = subprocess.Popen([sys.executable, os.path.join(top, "jobs/train.py"), "--config", os.path.join(t, "cfg.json")],
                     env=env, stderr=open(os.path.join(t, "train.err"), "w"))
tick = os.sysconf("SC_CLK_TCK")
def cpu_of(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / float(tick)
at, cat, pos, buf = [], [], 0, b""
while True:
    done = p.poll() is not None
    with open(ev, "rb") as f:
        f.seek(pos)
        chunk = f.read()
    pos += len(chunk)
    buf += chunk
    now = time.perf_counter()
    *lines, buf = buf.split(b"\n")
    for l in lines:
        o = json.loads(l)
        if o["type"] == "progress":
            at.append(now)
            try:
                cat.append(cpu_of(p.pid))
            except (OSError, IndexError):
                cat.append(float("nan"))
    if done:
        break
    time.sleep(0.005)
if p.returncode != 0:
    sys.exit("train.py failed (exit %d): %s" % (p.returncode, open(os.path.join(t, "train.err")).read()[-2000:]))
ours = [b - a for a, b in zip(at, at[1:])]
ours_cpu = [b - a for a, b in zip(cat, cat[1:])]
def peer(*flags):
    r = subprocess.run([sys.executable, os.path.join(top, "tests/bench/hf_minimal_loop.py"),
                        os.path.join(t, "cfg.json")] + list(flags), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("hf_minimal_loop.py failed: %s" % r.stderr[-2000:])
    o = json.loads(r.stdout.strip().splitlines()[-1])
    peaks.append(o["peak_rss_mb"])
    return o["step_s"][1:], o["cpu_s"][1:]
peaks = []
def show(what, v, c):
    print("%-48s wall median %.3f s/step (min %.3f, max %.3f), CPU median %.3f s/step"
          % (what, statistics.median(v), min(v), max(v), statistics.median(c)))
plain, det = peer(), peer("--deterministic")
show("hf engine (jobs/train.py, device cpu), 2..%d:" % (len(ours) + 1), ours, ours_cpu)
show("minimal transformers + PEFT loop:", *plain)
show("the same, use_deterministic_algorithms:", *det)
m = statistics.median
print("ratio ours / minimal: wall %.3f, CPU %.3f (target <= 1.05); ours / minimal deterministic: wall %.3f, CPU %.3f"
      % (m(ours) / m(plain[0]), m(ours_cpu) / m(plain[1]), m(ours) / m(det[0]), m(ours_cpu) / m(det[1])))
ours_peak = max([json.loads(l).get("peak_mb", 0) for l in open(ev) if '"memory"' in l] or [0])
print("peak RSS: hf engine %.0f MB (its memory event: the training steps, the peak reset after loading), "
      "minimal loop %.0f MB, deterministic %.0f MB (whole process, loading included)"
      % (ours_peak, peaks[0], peaks[1]))
PY
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
