#!/bin/bash
# tests/bench/verify-bench.sh: the verify stage (sha256 through OpenSSL, streamed,
# plus the structure checks) against sha256sum on the large fixture's Q8_0
# file (made by tests/bench/quantize-bench.sh, or here); target within 10%. The
# stage is given the F16 file as previous_gguf, so it digests both files:
# it is timed against `sha256sum Q8_0 F16`.
set -eu
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${PL_BENCH_DIR:-/var/tmp/pipelined-bench}
PCTL=$TOP/daemon/pipelinectl
. "$TOP/tests/lib/gguf_bench.sh"
[ -f "$B/large-q8.gguf" ] || "$TOP/tests/bench/quantize-bench.sh" >/dev/null
F=$B/large-q8.gguf
P=$B/large-f16.gguf
cat "$F" "$P" >/dev/null
best 3 sha256sum "$F"; s1=$W; s1c=$C
best 3 sha256sum "$F" "$P"; s2=$W; s2c=$C
best 3 "$PCTL" stage verify -w "$B/work-verify" input="$F" previous_gguf="$P"; v=$W; vc=$C
echo "verify bench: $(stat -c %s "$F") bytes Q8_0 + $(stat -c %s "$P") bytes previous; wall s (CPU s)"
echo "  sha256sum Q8_0          ${s1}s (${s1c}s)"
echo "  sha256sum Q8_0 F16      ${s2}s (${s2c}s)"
echo "  verify stage            ${v}s (${vc}s)  $(awk -v a="$v" -v b="$s2" 'BEGIN {printf "%.2f", a / b}')x sha256sum of both (target <= 1.10)"
