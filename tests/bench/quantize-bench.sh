#!/bin/bash
# tests/bench/quantize-bench.sh: native quantize against llama-quantize on the
# large fixture's F16 GGUF (made by tests/bench/convert-bench.sh, or here): wall
# and CPU seconds of each with every CPU (best of three, alternating), the
# ratio (target at most 1.0), and whether the bytes are identical (they
# must be: exit 1 otherwise). llama-quantize does not fsync its output;
# the stage's atomic commit does.
set -eu
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${PL_BENCH_DIR:-/var/tmp/pipelined-bench}
PCTL=$TOP/daemon/pipelinectl
. "$TOP/tests/lib/gguf_bench.sh"
eval "$("$TOP/tests/tools/llama-oracle.sh" --env)"
[ -f "$B/large-f16.gguf" ] || "$TOP/tests/bench/convert-bench.sh" >/dev/null
F=$B/large-f16.gguf
n=$(nproc)
cat "$F" >/dev/null
lq=""; lqc=""; nat=""; natc=""
for _ in 1 2 3; do
	best 1 "$LLAMA_BIN/llama-quantize" "$F" "$B/large-q8-ref.gguf" Q8_0 "$n"
	if [ -z "$lq" ] || awk -v a="$W" -v b="$lq" 'BEGIN {exit !(a < b)}'; then lq=$W; lqc=$C; fi
	best 1 "$PCTL" stage quantize -w "$B/work-quantize" input="$F" output="$B/large-q8.gguf" threads="$n"
	if [ -z "$nat" ] || awk -v a="$W" -v b="$nat" 'BEGIN {exit !(a < b)}'; then nat=$W; natc=$C; fi
done
same=no
cmp -s "$B/large-q8.gguf" "$B/large-q8-ref.gguf" && same=yes
echo "quantize bench: $(stat -c %s "$F") bytes F16 -> $(stat -c %s "$B/large-q8.gguf") bytes Q8_0, $n threads; wall s (CPU s)"
echo "  llama-quantize   ${lq}s (${lqc}s)"
echo "  native           ${nat}s (${natc}s)"
echo "  ratio native/llama-quantize: wall $(awk -v a="$nat" -v b="$lq" 'BEGIN {printf "%.2f", a / b}'), CPU $(awk -v a="$natc" -v b="$lqc" 'BEGIN {printf "%.2f", a / b}') (target <= 1.0); identical bytes: $same"
[ $same = yes ]
