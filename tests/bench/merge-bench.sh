#!/bin/bash
# tests/bench/merge-bench.sh: the merge stage (pipelinectl stage merge)
# against real PEFT's merge_and_unload (peft 0.20 and transformers 5.5 of
# the pinned environment, tests/tools/pyenv.sh: load the base in BF16, load
# the adapter, merge, save_pretrained, as the reference program merges) on
# the large fixture (gemma-3-1b text shapes plus gemma-3-4b's vision tower,
# about 2.8 GB of BF16) with an r=112, alpha=224 adapter that PEFT itself
# made on the recipe's seven targets (which PEFT also finds in the vision
# tower's q/k/v). Wall time and peak RSS, median of RUNS alternated runs,
# page cache warm, under nice; the targets (faster than PEFT; peak RSS under
# 2x the largest tensor plus 100 MB) and the two outputs compared tensor by
# tensor in bf16 ulps. The machine is shared: the figures are medians, and
# only the ratios of the same run mean much. Prints figures; asserts
# nothing.
#
#   tests/bench/merge-bench.sh
#
# Environment: BENCH_DIR (default /var/tmp/pipelined-bench), RUNS (default 3).
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
D=${BENCH_DIR:-/var/tmp/pipelined-bench}
RUNS=${RUNS:-3}
PY=$("$TOP/tests/tools/pyenv.sh" --python)
O=$TOP/tests/fixtures/peft_oracle.py
IN=$D/large-conditional
AD=$D/large-conditional-r112
mkdir -p "$D"
[ -f "$IN/model.safetensors" ] ||
	nice /usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$IN" --size large --layout conditional
[ -f "$AD/adapter_model.safetensors" ] || {
	echo "making the r112 adapter with PEFT in $AD (once)" >&2
	nice "$PY" "$O" adapter "$IN" "$AD.tmp" r112 >"$D/r112.log" 2>&1 || { tail "$D/r112.log"; exit 1; }
	mv "$AD.tmp" "$AD"
}
W=$(mktemp -d "$D/mergebench.XXXXXX")
trap 'rm -rf "$W"' EXIT

t() {
	/usr/bin/time -f "%e %M" -o "$W/time" nice "$@" >"$W/out" 2>&1 || { cat "$W/out"; exit 1; }
	cat "$W/time"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run_merge() { rm -rf "$W/merged"; t "$TOP/daemon/pipelinectl" stage merge -w "$W/work" base="$IN" adapter="$AD" output="$W/merged"; }
run_peft() { rm -rf "$W/peft"; t "$PY" "$O" time "$IN" "$AD" "$W/peft"; }

cat "$IN/model.safetensors" "$AD/adapter_model.safetensors" >/dev/null
: >"$W/run_merge.times"
: >"$W/run_peft.times"
for _ in $(seq 1 "$RUNS"); do
	run_merge >>"$W/run_merge.times"; sync
	run_peft >>"$W/run_peft.times"; sync
done
largest=$("$PY" -c '
import sys
sys.path.insert(0, sys.argv[2] + "/jobs")
import pljob
h = pljob.read_safetensors_header(sys.argv[1])[0]
print(max(e["data_offsets"][1] - e["data_offsets"][0] for e in h.values()))' "$IN/model.safetensors" "$TOP")
"$PY" "$O" compare "$W/merged" "$W/peft" "$IN" >"$W/cmp" || true
m=$(cut -d' ' -f1 "$W/run_merge.times" | median); mr=$(cut -d' ' -f2 "$W/run_merge.times" | median)
n=$(cut -d' ' -f1 "$W/run_peft.times" | median); nr=$(cut -d' ' -f2 "$W/run_peft.times" | median)
echo "merge-bench: base $IN ($(du -sb "$IN/model.safetensors" | cut -f1) bytes, largest tensor $largest bytes), PEFT's r=112 adapter ($(du -sb "$AD/adapter_model.safetensors" | cut -f1) bytes); median of $RUNS alternated runs, under nice, on a shared machine"
awk -v m="$m" -v mr="$mr" -v n="$n" -v nr="$nr" -v L="$largest" 'BEGIN {
	lim = (2 * L + 100e6) / 1024 / 1024
	printf "  merge stage             %7.2f s  peak RSS %6.0f MB  (target: under 2x largest + 100 MB = %.0f MB: %s)\n", m, mr/1024, lim, mr/1024 < lim ? "met" : "MISSED"
	printf "  PEFT merge_and_unload   %7.2f s  peak RSS %6.0f MB\n", n, nr/1024
	printf "  PEFT/stage              time %.2fx (target: stage faster: %s), RSS %.2fx\n", n/m, m < n ? "met" : "MISSED", nr/mr
}'
echo "  stage vs PEFT output: $(tail -1 "$W/cmp" | sed 's/^compare: //')"
grep 'only in PEFT\|OVER\|MISSING\|not in PEFT\|compared as' "$W/cmp" | head -12 | sed 's/^/    /' || true
echo "  times (s, KB): stage $(tr '\n' ' ' <"$W/run_merge.times")| PEFT $(tr '\n' ' ' <"$W/run_peft.times")"
