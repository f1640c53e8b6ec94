#!/bin/bash
# tests/bench/tensor_fix-bench.sh: tensor_fix (pipelinectl stage, Gemma 3
# defaults) on the large fixture (gemma-3-1b text shapes plus gemma-3-4b's
# vision tower, about 2.8 GB of BF16) against `cp` of the same files (with
# and without a sync of the copy: the stage fsyncs its output) and against
# the reference approach, loading and re-saving the kept tensors with numpy
# (tensor_fix_numpy.py). The stage's time is all of it: copying the kept
# tensors (about 2 GB), hashing each for the manifest and the whole output
# for the artifact's digest (the stage hands the host that digest, so the
# host does not read the output again), the fsync and the renames. Page
# cache warm for all (one untimed run first); the median of RUNS timed
# runs, with CPU seconds (user + system) beside the wall time, and the load
# average before and after (figures from a busy machine mean little).
# Prints figures; asserts nothing.
#
#   tests/bench/tensor_fix-bench.sh
#
# Environment: BENCH_DIR (default /var/tmp/pipelined-bench; the fixture is
# generated there once, 34 s), RUNS (default 3).
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
D=${BENCH_DIR:-/var/tmp/pipelined-bench}
RUNS=${RUNS:-3}
IN=$D/large-conditional
mkdir -p "$D"
[ -f "$IN/model.safetensors" ] ||
	nice $PY "$TOP/tests/fixtures/gen_gemma3.py" "$IN" --size large --layout conditional
W=$(mktemp -d "$D/fixbench.XXXXXX")
trap 'rm -rf "$W"' EXIT
bytes=$(du -sb "$IN/model.safetensors" | cut -f1)

t() {   # t NAME COMMAND...: wall seconds, peak RSS and CPU seconds of one run
	/usr/bin/time -f "%e %M %U %S" -o "$W/time" "$@" >"$W/out" 2>&1 || { cat "$W/out"; exit 1; }
	cat "$W/time"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

run_fix() { rm -rf "$W/fixed" "$W/fixed.manifest.json"; t "$TOP/daemon/pipelinectl" stage tensor_fix input="$IN" output="$W/fixed"; }
run_cp() { rm -rf "$W/cp"; t cp -r "$IN" "$W/cp"; }
run_cp_sync() { rm -rf "$W/cps"; t sh -c 'cp -r "$1" "$2" && sync "$2"/*' sh "$IN" "$W/cps"; }
run_np() { rm -f "$W/np.safetensors"; t $PY "$TOP/tests/bench/tensor_fix_numpy.py" "$IN" "$W/np.safetensors"; }

load0=$(cut -d' ' -f1-3 /proc/loadavg)
cat "$IN/model.safetensors" >/dev/null   # warm the page cache
for f in run_fix run_cp run_cp_sync run_np; do
	$f >/dev/null   # untimed
	: >"$W/$f.times"
	for _ in $(seq 1 "$RUNS"); do $f >>"$W/$f.times"; sync; done
done
kept=$($PY -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["kept"], m["dropped"], sum(t["bytes"] for t in m["tensors"]))' "$W/fixed.manifest.json")
fix=$(cut -d' ' -f1 "$W/run_fix.times" | median)
cp=$(cut -d' ' -f1 "$W/run_cp.times" | median)
cps=$(cut -d' ' -f1 "$W/run_cp_sync.times" | median)
np=$(cut -d' ' -f1 "$W/run_np.times" | median)
rss_fix=$(cut -d' ' -f2 "$W/run_fix.times" | median)
rss_np=$(cut -d' ' -f2 "$W/run_np.times" | median)
cpu() { awk '{print $3 + $4}' "$W/$1.times" | median; }
cpu_fix=$(cpu run_fix); cpu_cp=$(cpu run_cp); cpu_cps=$(cpu run_cp_sync); cpu_np=$(cpu run_np)
echo "tensor_fix-bench: input $IN, $bytes bytes; kept, dropped, kept bytes: $kept; median of $RUNS;" \
    "load average $load0 before, $(cut -d' ' -f1-3 /proc/loadavg) after; $(nproc) CPUs"
awk -v f="$fix" -v c="$cp" -v s="$cps" -v n="$np" -v b="$bytes" -v rf="$rss_fix" -v rn="$rss_np" \
    -v uf="$cpu_fix" -v uc="$cpu_cp" -v us="$cpu_cps" -v un="$cpu_np" 'BEGIN {
	printf "  tensor_fix (stage, fsync, all hashes)       %6.2f s  CPU %5.2f s  %7.0f MB/s of input  peak RSS %4.0f MB\n", f, uf, b/f/1e6, rf/1024
	printf "  cp -r                                       %6.2f s  CPU %5.2f s  tensor_fix/cp       = %.2fx\n", c, uc, f/c
	printf "  cp -r, then sync of the copies              %6.2f s  CPU %5.2f s  tensor_fix/cp+sync  = %.2fx\n", s, us, f/s
	printf "  numpy load + re-save (reference approach)   %6.2f s  CPU %5.2f s  numpy/tensor_fix    = %.2fx  peak RSS %4.0f MB\n", n, un, n/f, rn/1024
}'
