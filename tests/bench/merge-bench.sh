#!/bin/bash
# tests/bench/merge-bench.sh: the merge stage (pipelinectl stage merge) on
# the large fixture (gemma-3-1b text shapes plus gemma-3-4b's vision tower,
# about 2.8 GB of BF16; a plain r=8 adapter on every text projection, 182
# modules) against a numpy implementation that loads the whole model
# (merge_numpy.py): wall time and peak RSS, and the issue's targets
# (faster; peak RSS under 2x the largest tensor plus 100 MB). The stage's
# output is checked against the numpy one tensor by tensor (within one bf16
# ulp). Page cache warm; median of RUNS. Prints figures; asserts nothing.
#
#   tests/bench/merge-bench.sh
#
# Environment: BENCH_DIR (default /var/tmp/pipelined-bench), RUNS (default 3).
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
D=${BENCH_DIR:-/var/tmp/pipelined-bench}
RUNS=${RUNS:-3}
IN=$D/large-conditional
mkdir -p "$D"
[ -f "$IN/model.safetensors" ] ||
	nice $PY "$TOP/tests/fixtures/gen_gemma3.py" "$IN" --size large --layout conditional
[ -f "$IN/adapters/plain/adapter_model.safetensors" ] ||
	$PY "$TOP/tests/fixtures/gen_gemma3.py" "$IN" --size large --layout conditional \
	    --adapters-only --adapter plain
W=$(mktemp -d "$D/mergebench.XXXXXX")
trap 'rm -rf "$W"' EXIT

t() {
	/usr/bin/time -f "%e %M" -o "$W/time" "$@" >"$W/out" 2>&1 || { cat "$W/out"; exit 1; }
	cat "$W/time"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run_merge() { rm -rf "$W/merged"; t "$TOP/daemon/pipelinectl" stage merge base="$IN" adapter="$IN/adapters/plain" output="$W/merged"; }
run_np() { rm -rf "$W/np"; t $PY "$TOP/tests/bench/merge_numpy.py" "$IN" "$IN/adapters/plain" "$W/np"; }

cat "$IN/model.safetensors" >/dev/null
for f in run_merge run_np; do
	: >"$W/$f.times"
	for _ in $(seq 1 "$RUNS"); do $f >>"$W/$f.times"; sync; done
done
largest=$($PY -c '
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n)); h.pop("__metadata__", None)
print(max(e["data_offsets"][1] - e["data_offsets"][0] for e in h.values()))' "$IN/model.safetensors")
# The same numbers from both (within one bf16 ulp: numpy's matmul sums in
# another order).
same=$($PY - "$W/merged/model.safetensors" "$W/np/model.safetensors" <<'PYEOF'
import json, struct, sys
import numpy as np
def hdr(p):
    f = open(p, "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n)); h.pop("__metadata__", None); return f, 8 + n, h
fa, ba, ha = hdr(sys.argv[1]); fb, bb, hb = hdr(sys.argv[2])
worst, diff = 0, 0
for k, e in ha.items():
    b0, b1 = e["data_offsets"]; c0, c1 = hb[k]["data_offsets"]
    fa.seek(ba + b0); fb.seek(bb + c0)
    x = np.frombuffer(fa.read(b1 - b0), np.uint16).astype(np.int32); y = np.frombuffer(fb.read(c1 - c0), np.uint16).astype(np.int32)
    d = int(np.abs(x - y).max()) if x.size else 0
    diff += d > 0; worst = max(worst, d)
print("%d tensors differ, by at most %d bf16 ulp" % (diff, worst))
PYEOF
)
m=$(cut -d' ' -f1 "$W/run_merge.times" | median); mr=$(cut -d' ' -f2 "$W/run_merge.times" | median)
n=$(cut -d' ' -f1 "$W/run_np.times" | median); nr=$(cut -d' ' -f2 "$W/run_np.times" | median)
echo "merge-bench: base $IN ($(du -sb "$IN/model.safetensors" | cut -f1) bytes, largest tensor $largest bytes), adapter plain r=8; median of $RUNS"
awk -v m="$m" -v mr="$mr" -v n="$n" -v nr="$nr" -v L="$largest" 'BEGIN {
	lim = (2 * L + 100e6) / 1024 / 1024
	printf "  merge stage       %6.2f s  peak RSS %5.0f MB  (target: under 2x largest + 100 MB = %.0f MB: %s)\n", m, mr/1024, lim, mr/1024 < lim ? "met" : "MISSED"
	printf "  numpy whole-model %6.2f s  peak RSS %5.0f MB\n", n, nr/1024
	printf "  numpy/stage time  %.2fx (target: stage faster: %s)\n", n/m, m < n ? "met" : "MISSED"
}'
echo "  stage vs numpy output: $same"
