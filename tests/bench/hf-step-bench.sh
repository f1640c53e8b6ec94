#!/bin/bash
# tests/bench/hf-step-bench.sh: CPU seconds per optimizer step and peak
# resident set of engine = hf (jobs/train.py, device = cpu: the real
# transformers, PEFT and bitsandbytes), the plain loop (shared_prefix = no)
# and the shared prefix (shared_prefix = yes: jobs/engines/prefix.py), as
# ratios against a minimal loop written with plain transformers + PEFT
# (tests/bench/hf_minimal_loop.py) on the same tokens and settings, run
# with the interpreter of the same ML stack; on each stack of BENCH_STACKS
# (default "recipe current", both in one run: tests/tools/pyenv.sh,
# PYSTACK). The examples share one system prompt of FILLER words (the
# router's shape), so the shared prefix has something to share; the plain
# loop and the minimal one run it whole for every example. Ours is timed
# from outside, by the arrival of each step's progress event in the events
# file (polled every 5 ms, its CPU seconds read from /proc/PID/stat at that
# moment, its peak resident set from VmHWM); the peer times its own steps
# (wall and process CPU time) and reports its peak (getrusage). Both peaks
# are the whole process's, loading included. Step 1 of each (warm-up) is
# left out; the figures are medians. All run with one torch thread, so on
# a shared machine the CPU seconds are the steadier figure (the wall
# seconds of runs made minutes apart see different loads). Prints figures
# and the ratios (target for the plain loop: at most 1.05); asserts
# nothing.
#
#   tests/bench/hf-step-bench.sh [STEPS]
#
# Environment: BENCH_TMP (default: a fresh directory under /tmp, removed
# after), BENCH_STACKS (default "recipe current"), BENCH_DETERMINISTIC=1
# (also the minimal loop with use_deterministic_algorithms, which the
# engine sets on the CPU), FILLER (words of the shared system prompt,
# default 150), SAVE_STEPS (default 5), BENCH_BASE (tiny, the default: the
# fixture in nf4 with the 8-bit AdamW; real: Gemma 3 270M from
# tests/tools/realbase.sh in float32 with AdamW, as the router demo trains
# it; a directory: that checkpoint with the real base's settings).
#
# Measured (2026-12-06, BENCH_BASE=real, 6 steps (5 timed), FILLER 150,
# nice 10, 2 cores loaded 9-11 by other work; one run, 572 s): CPU
# seconds per step, ratio to the minimal loop of the same stack, and peak
# RSS ratio:
#   recipe  (torch 2.6.0, transformers 5.5.0, PEFT 0.20.0): minimal 5.13 s;
#           plain 4.81 s (0.937), RSS 2488/2280 MB (1.091); shared 3.61 s
#           (0.704), RSS 2136 MB (0.937)
#   current (torch 2.15.0, transformers 5.23.0, PEFT 0.21.2): minimal
#           4.53 s; plain 4.84 s (1.068), RSS 2333/2332 MB (1.001); shared
#           3.36 s (0.741), RSS 2333 MB (1.001)
# (a plain ratio under 1 is the load's noise over 5 steps: the engine runs
# the same forwards plus its determinism).
# Measured (2026-12-04, before the shared prefix and the second stack were
# in it: BENCH_BASE=real, 12 steps, a corpus of per-example system prompts,
# nice 5, on a machine loaded 8-28 by other work): hf engine CPU median
# 18.62 s/step, minimal loop 17.87 (ratio 1.042), minimal loop with
# use_deterministic_algorithms 16.62 (1.121); peak RSS 2364 MB (training
# steps) against 2500 MB (whole process).
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
STEPS=${1:-12}
STACKS=${BENCH_STACKS:-recipe current}
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
/usr/bin/python3 "$TOP/tests/fixtures/gen_corpus.py" corpus.jsonl --n 16 --shared-filler "${FILLER:-150}" >/dev/null
"$TOP/daemon/pipelinectl" stage tokenize -w tok base="$base" corpus="$T/corpus.jsonl" >tok.out 2>&1 ||
    { cat tok.out; exit 1; }
cat >cfg.json <<JSON
{"engine": "hf", "device": "cpu", "base": "$base", "tokens": "$T/tok/tokens.npz",
 "output_dir": "$T/out", "max_steps": $STEPS, "save_steps": ${SAVE_STEPS:-5},
 "gradient_accumulation_steps": 2, "warmup_steps": 2, "seed": 3407,
 "lora_r": 16, "lora_alpha": 16, "threads": 1, $extra}
JSON
for stack in $STACKS; do
PY=$(PYSTACK=$stack "$TOP/tests/tools/pyenv.sh" --python)
echo "== stack $stack: $("$PY" "$TOP/jobs/pljob" stack)"
"$PY" - "$TOP" "$T" "$stack" <<'PY'
import json, os, statistics, subprocess, sys, time
top, t, stack = sys.argv[1], sys.argv[2], sys.argv[3]
tick = os.sysconf("SC_CLK_TCK")
m = statistics.median


def cpu_of(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / float(tick)


def hwm_of(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def ours(mode):
    """jobs/train.py with shared_prefix = mode: (wall, cpu) per step from
    step 2 on, and the process's peak resident set, MB."""
    cfg = json.load(open(os.path.join(t, "cfg.json")))
    cfg["shared_prefix"] = mode
    cfg["output_dir"] = os.path.join(t, "out-%s-%s" % (stack, mode))
    cpath = os.path.join(t, "cfg-%s-%s.json" % (stack, mode))
    json.dump(cfg, open(cpath, "w"))
    ev = os.path.join(t, "events-%s-%s" % (stack, mode))
    open(ev, "w").close()
    env = dict(os.environ, PL_EVENTS=ev, PL_WORKDIR=os.path.join(t, "work-%s-%s" % (stack, mode)))
    os.makedirs(env["PL_WORKDIR"], exist_ok=True)
    err = os.path.join(t, "train-%s-%s.err" % (stack, mode))
    p = subprocess.Popen([sys.executable, os.path.join(top, "jobs/train.py"), "--config", cpath],
                         env=env, stderr=open(err, "w"))
    at, cat, pos, buf, peak = [], [], 0, b"", 0.0
    while True:
        done = p.poll() is not None
        try:
            peak = max(peak, hwm_of(p.pid))
        except (OSError, IndexError):
            pass
        with open(ev, "rb") as f:
            f.seek(pos)
            chunk = f.read()
        pos += len(chunk)
        buf += chunk
        now = time.perf_counter()
        *lines, buf = buf.split(b"\n")
        for line in lines:
            o = json.loads(line)
            if o["type"] == "progress":
                at.append(now)
                try:
                    cat.append(cpu_of(p.pid))
                except (OSError, IndexError):
                    cat.append(float("nan"))
            if o["type"] == "shared_prefix" and bool(o["on"]) != (mode == "yes"):
                sys.exit("shared_prefix %s: the run says on=%s (%s)" % (mode, o["on"], o.get("why")))
        if done:
            break
        time.sleep(0.005)
    if p.returncode != 0:
        sys.exit("train.py failed (exit %d): %s" % (p.returncode, open(err).read()[-2000:]))
    return [b - a for a, b in zip(at, at[1:])], [b - a for a, b in zip(cat, cat[1:])], peak


def peer(*flags):
    r = subprocess.run([sys.executable, os.path.join(top, "tests/bench/hf_minimal_loop.py"),
                        os.path.join(t, "cfg.json")] + list(flags), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("hf_minimal_loop.py failed: %s" % r.stderr[-2000:])
    o = json.loads(r.stdout.strip().splitlines()[-1])
    return o["step_s"][1:], o["cpu_s"][1:], o["peak_rss_mb"]


def show(what, v, c, peak):
    print("%-44s wall median %.3f s/step (min %.3f, max %.3f), CPU median %.3f s/step, peak RSS %.0f MB"
          % (what, m(v), min(v), max(v), m(c), peak))


plain = ours("no")
shared = ours("yes")
mini = peer()
show("hf engine, plain loop (shared_prefix no):", *plain)
show("hf engine, shared prefix (shared_prefix yes):", *shared)
show("minimal transformers + PEFT loop:", *mini)
res = {"stack": stack, "minimal_cpu_s": m(mini[1]), "minimal_peak_mb": mini[2]}
for name, r in (("plain", plain), ("shared", shared)):
    res[name + "_cpu_s"] = m(r[1])
    res[name + "_peak_mb"] = r[2]
    res[name + "_cpu_ratio"] = m(r[1]) / m(mini[1])
    res[name + "_peak_ratio"] = r[2] / mini[2]
    print("ratio %-6s / minimal: CPU %.3f, wall %.3f, peak RSS %.3f"
          % (name, res[name + "_cpu_ratio"], m(r[0]) / m(mini[0]), res[name + "_peak_ratio"]))
if os.environ.get("BENCH_DETERMINISTIC") == "1":
    det = peer("--deterministic")
    show("the minimal loop, use_deterministic_algorithms:", *det)
    print("ratio plain / minimal deterministic: CPU %.3f" % (m(plain[1]) / m(det[1])))
with open(os.path.join(t, "summary.jsonl"), "a") as f:
    f.write(json.dumps(res) + "\n")
PY
done
/usr/bin/python3 - "$T/summary.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("%-8s %14s %14s %14s %16s %16s" % ("stack", "minimal CPU s", "plain:minimal", "shared:minimal",
                                          "plain RSS ratio", "shared RSS ratio"))
for r in rows:
    print("%-8s %14.3f %14.3f %14.3f %16.3f %16.3f" % (r["stack"], r["minimal_cpu_s"], r["plain_cpu_ratio"],
                                                      r["shared_cpu_ratio"], r["plain_peak_ratio"],
                                                      r["shared_peak_ratio"]))
PY
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
