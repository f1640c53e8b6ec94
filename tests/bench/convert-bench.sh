#!/bin/bash
# tests/bench/convert-bench.sh: native convert throughput against cp on the large
# fixture (gen_gemma3.py --size large: gemma-3-1b's shapes, about 2 GB of
# BF16). Prints wall and CPU seconds, best of two; asserts only that the
# stage succeeds. Both sides end with the data on disk (cp is followed by
# an fsync, convert's atomic commit fsyncs).
#
#   tests/bench/convert-bench.sh      (PL_BENCH_DIR, default /var/tmp/pipelined-bench,
#                                keeps the fixture and outputs between runs)
set -eu
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${PL_BENCH_DIR:-/var/tmp/pipelined-bench}
PCTL=$TOP/daemon/pipelinectl
. "$TOP/tests/bench/gguf-bench-lib.sh"
large_fixture
bytes=$(stat -c %s "$B"/gemma3-large/*.safetensors | awk '{s+=$1} END {print s}')
cat "$B"/gemma3-large/*.safetensors >/dev/null	# warm the page cache

best 2 sh -c "cat $B/gemma3-large/*.safetensors > $B/cp.out && sync -f $B/cp.out"; cp_t=$W; cp_c=$C
rm -f "$B/cp.out"
best 2 "$PCTL" stage convert -w "$B/work-convert" input="$B/gemma3-large" \
    output="$B/large-f16.gguf" outtype=f16; f16_t=$W; f16_c=$C
best 2 "$PCTL" stage convert -w "$B/work-convert" input="$B/gemma3-large" \
    output="$B/large-bf16.gguf" outtype=bf16; bf16_t=$W; bf16_c=$C
rm -f "$B/large-bf16.gguf"
mbs() { awk -v b="$bytes" -v t="$1" 'BEGIN {printf "%.0f MB/s", b / t / 1e6}'; }
x() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "convert bench: $bytes bytes of BF16 safetensors in; wall s (CPU s)"
echo "  cp + fsync            ${cp_t}s (${cp_c}s)  $(mbs "$cp_t")"
echo "  convert outtype=f16   ${f16_t}s (${f16_c}s)  $(mbs "$f16_t")  $(x "$f16_t" "$cp_t")x cp"
echo "  convert outtype=bf16  ${bf16_t}s (${bf16_c}s)  $(mbs "$bf16_t")  $(x "$bf16_t" "$cp_t")x cp (kernel copy path)"
