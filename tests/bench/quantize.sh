#!/bin/bash
# tests/bench/quantize.sh: native quantize against llama-quantize on the
# large fixture's F16 GGUF (made by tests/bench/convert.sh, or here):
# wall time of each with every CPU, their ratio (target at most 1.0), and
# whether the bytes are identical (they must be: exit 1 otherwise).
set -eu
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${PL_BENCH_DIR:-/var/tmp/pipelined-bench}
PCTL=$TOP/daemon/pipelinectl
eval "$("$TOP/tests/tools/llama-oracle.sh" --env)"
[ -f "$B/large-f16.gguf" ] || "$TOP/tests/bench/convert.sh" >/dev/null
F=$B/large-f16.gguf
n=$(nproc)
cat "$F" >/dev/null
secs() { /usr/bin/python3 -c 'import time; print(f"{time.time():.3f}")'; }
run() {	# run CMD...: seconds
	local t0 t1
	t0=$(secs); "$@" >"$B/quantize-bench.log" 2>&1 || { tail "$B/quantize-bench.log"; exit 1; }; t1=$(secs)
	awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}'
}
# Alternate the two, best of three each, so neither gets a warmer cache.
lq=""; nat=""
for _ in 1 2 3; do
	t=$(run "$LLAMA_BIN/llama-quantize" "$F" "$B/large-q8-ref.gguf" Q8_0 "$n")
	[ -z "$lq" ] || awk -v d="$t" -v b="$lq" 'BEGIN {exit !(d < b)}' && lq=$t
	t=$(run "$PCTL" stage quantize -w "$B/work-quantize" input="$F" output="$B/large-q8.gguf" threads="$n")
	[ -z "$nat" ] || awk -v d="$t" -v b="$nat" 'BEGIN {exit !(d < b)}' && nat=$t
done
same=no
cmp -s "$B/large-q8.gguf" "$B/large-q8-ref.gguf" && same=yes
echo "quantize bench: $(stat -c %s "$F") bytes F16 -> $(stat -c %s "$B/large-q8.gguf") bytes Q8_0, $n threads"
echo "  llama-quantize   ${lq}s"
echo "  native           ${nat}s"
echo "  ratio native/llama-quantize $(awk -v a="$nat" -v b="$lq" 'BEGIN {printf "%.2f", a / b}') (target <= 1.0); identical bytes: $same"
[ $same = yes ]
