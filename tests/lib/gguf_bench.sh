# tests/lib/gguf_bench.sh: shared by the convert, quantize and verify
# benchmarks. large_fixture makes $B/gemma3-large once; best N CMD... runs
# CMD N times and sets W (wall seconds) and C (user + system seconds) of
# the fastest run; a failing CMD ends the benchmark with its log.
large_fixture() {
	mkdir -p "$B"
	[ -d "$B/gemma3-large" ] && return 0
	echo "generating the large fixture in $B/gemma3-large (once)" >&2
	rm -rf "$B/gemma3-large.tmp"
	/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$B/gemma3-large.tmp" --size large \
	    --layout causal >"$B/gen.log" 2>&1
	mv "$B/gemma3-large.tmp" "$B/gemma3-large"
}

best() {
	local n=$1 w c
	shift
	W=""
	C=""
	for _ in $(seq 1 "$n"); do
		/usr/bin/time -o "$B/time.out" -f "%e %U %S" "$@" >"$B/bench-cmd.log" 2>&1 ||
		    { tail "$B/bench-cmd.log"; echo "benchmark command failed: $*" >&2; exit 1; }
		w=$(awk '{print $1}' "$B/time.out")
		c=$(awk '{printf "%.2f", $2 + $3}' "$B/time.out")
		if [ -z "$W" ] || awk -v a="$w" -v b="$W" 'BEGIN {exit !(a < b)}'; then
			W=$w
			C=$c
		fi
	done
}
