#!/bin/bash
# tests/bench/convert.sh: native convert throughput against cp on the large
# fixture (gen_gemma3.py --size large: gemma-3-1b's shapes, about 2 GB of
# BF16). Prints figures; asserts nothing but that the stage succeeds.
#
#   tests/bench/convert.sh      (PL_BENCH_DIR, default /var/tmp/pipelined-bench,
#                                keeps the fixture and outputs between runs)
set -eu
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${PL_BENCH_DIR:-/var/tmp/pipelined-bench}
PCTL=$TOP/daemon/pipelinectl
mkdir -p "$B"
if [ ! -d "$B/gemma3-large" ]; then
	echo "generating the large fixture in $B/gemma3-large (once)"
	rm -rf "$B/gemma3-large.tmp"
	/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$B/gemma3-large.tmp" --size large \
	    --layout causal >"$B/gen.log" 2>&1
	mv "$B/gemma3-large.tmp" "$B/gemma3-large"
fi
secs() { /usr/bin/python3 -c 'import sys,time; print(f"{time.time():.3f}")'; }
bytes=$(stat -c %s "$B"/gemma3-large/*.safetensors | awk '{s+=$1} END {print s}')
cat "$B"/gemma3-large/*.safetensors >/dev/null	# warm the page cache

best() {	# best N CMD...: the fastest of N runs, in seconds
	local n=$1 b="" t0 t1 d
	shift
	for _ in $(seq 1 "$n"); do
		t0=$(secs); "$@" >"$B/convert-bench.log" 2>&1 || { tail "$B/convert-bench.log"; exit 1; }; t1=$(secs)
		d=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
		[ -z "$b" ] || awk -v d="$d" -v b="$b" 'BEGIN {exit !(d < b)}' && b=$d
	done
	echo "$b"
}
cp_t=$(best 2 sh -c "cat $B/gemma3-large/*.safetensors > $B/cp.out && sync -f $B/cp.out")
rm -f "$B/cp.out"
f16_t=$(best 2 "$PCTL" stage convert -w "$B/work-convert" input="$B/gemma3-large" \
    output="$B/large-f16.gguf" outtype=f16)
bf16_t=$(best 2 "$PCTL" stage convert -w "$B/work-convert" input="$B/gemma3-large" \
    output="$B/large-bf16.gguf" outtype=bf16)
rm -f "$B/large-bf16.gguf"
mbs() { awk -v b="$bytes" -v t="$1" 'BEGIN {printf "%.0f MB/s", b / t / 1e6}'; }
echo "convert bench: input $bytes bytes of BF16 safetensors"
echo "  cp (cat > file, fsync)    ${cp_t}s  $(mbs "$cp_t")"
echo "  convert outtype=f16       ${f16_t}s  $(mbs "$f16_t")  ($(awk -v a="$f16_t" -v b="$cp_t" 'BEGIN {printf "%.2f", a / b}')x cp)"
echo "  convert outtype=bf16      ${bf16_t}s  $(mbs "$bf16_t")  ($(awk -v a="$bf16_t" -v b="$cp_t" 'BEGIN {printf "%.2f", a / b}')x cp; raw copy path)"
