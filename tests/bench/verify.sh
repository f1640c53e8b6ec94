#!/bin/bash
# tests/bench/verify.sh: the verify stage (sha256 through OpenSSL, streamed,
# plus the structure checks) against sha256sum on the large fixture's Q8_0
# file (made by tests/bench/quantize.sh, or here); target within 10%.
set -eu
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${PL_BENCH_DIR:-/var/tmp/pipelined-bench}
PCTL=$TOP/daemon/pipelinectl
[ -f "$B/large-q8.gguf" ] || "$TOP/tests/bench/quantize.sh" >/dev/null
F=$B/large-q8.gguf
P=$B/large-f16.gguf
cat "$F" >/dev/null
secs() { /usr/bin/python3 -c 'import time; print(f"{time.time():.3f}")'; }
best() {
	local b="" t0 t1 d
	for _ in 1 2 3; do
		t0=$(secs); "$@" >"$B/verify-bench.log" 2>&1 || { tail "$B/verify-bench.log"; exit 1; }; t1=$(secs)
		d=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
		[ -z "$b" ] || awk -v d="$d" -v b="$b" 'BEGIN {exit !(d < b)}' && b=$d
	done
	echo "$b"
}
ss=$(best sha256sum "$F")
# The previous version's file is the F16 one: its digest is computed too,
# so time the stage against sha256sum of both files.
ss2=$(best sh -c "sha256sum $F $P")
v=$(best "$PCTL" stage verify -w "$B/work-verify" input="$F" previous_gguf="$P")
echo "verify bench: $(stat -c %s "$F") bytes Q8_0 (+ $(stat -c %s "$P") bytes previous)"
echo "  sha256sum FILE              ${ss}s"
echo "  sha256sum FILE PREVIOUS     ${ss2}s"
echo "  verify stage (both digests, structure)  ${v}s  ($(awk -v a="$v" -v b="$ss2" 'BEGIN {printf "%.2f", a / b}')x sha256sum, target <= 1.10)"
