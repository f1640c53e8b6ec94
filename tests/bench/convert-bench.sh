#!/bin/bash
# tests/bench/convert-bench.sh: the native convert stage against llama.cpp's
# own convert_hf_to_gguf.py (the oracle tree of tests/tools/llama-oracle.sh,
# on the pinned environment's real torch and transformers) and against cp
# followed by an fsync, on the large fixture (gen_gemma3.py --size large:
# gemma-3-1b's shapes, about 2 GB of BF16). Wall time, CPU time and peak
# RSS, median of RUNS alternated runs, page cache warm, under nice; every
# side ends with its data on disk (cp with an fsync, convert's atomic
# commit fsyncs, the converter's output is fsynced after it). The outputs
# of the stage and of the converter are compared (gguf_tool.py compare:
# every tensor byte-identical, the KVs as pipeline.ini(5) lists). Targets:
# outtype f16 at most 1.5x cp + fsync, bf16 at most 1.25x. The machine is
# shared: the figures are medians, and only the ratios of one run mean
# much. Prints figures; asserts only that every command succeeds.
#
#   tests/bench/convert-bench.sh      (PL_BENCH_DIR, default /var/tmp/pipelined-bench,
#                                keeps the fixture between runs; RUNS, default 3;
#                                REF_RUNS, default 1: how many of them run the converter)
set -eu
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${PL_BENCH_DIR:-/var/tmp/pipelined-bench}
RUNS=${RUNS:-3}
REF_RUNS=${REF_RUNS:-1}	# the converter takes minutes: its first RUNS only
PCTL=$TOP/daemon/pipelinectl
. "$TOP/tests/bench/gguf-bench-lib.sh"
PY=$("$TOP/tests/tools/pyenv.sh" --python)
eval "$("$TOP/tests/tools/llama-oracle.sh" --env)"
large_fixture
bytes=$(stat -c %s "$B"/gemma3-large/*.safetensors | awk '{s+=$1} END {print s}')
cat "$B"/gemma3-large/*.safetensors >/dev/null	# warm the page cache

sides="cp f16 bf16 ref16 refbf16"
run_side() {
	case $1 in
	cp) sh -c "cat $B/gemma3-large/*.safetensors > $B/cp.out && sync -f $B/cp.out" ;;
	f16|bf16) "$PCTL" stage convert -w "$B/work-convert" input="$B/gemma3-large" \
	    output="$B/large-$1.gguf" outtype=$1 ;;
	ref16|refbf16) local t=${1#ref}; [ "$t" = 16 ] && t=f16
		PYTHONPATH=$GGUF_PY "$PY" -B "$LLAMA_SRC/convert_hf_to_gguf.py" "$B/gemma3-large" \
		    --outtype "$t" --outfile "$B/ref-$t.gguf" && sync -f "$B/ref-$t.gguf" ;;
	esac
}
export -f run_side
export B PCTL PY GGUF_PY LLAMA_SRC
for s in $sides; do : >"$B/$s.times"; done
for i in $(seq 1 "$RUNS"); do
	for s in $sides; do
		case $s in ref*) [ "$i" -le "$REF_RUNS" ] || continue ;; esac
		/usr/bin/time -o "$B/time.out" -f "%e %U %S %M" nice bash -c 'run_side "$0"' "$s" \
		    >"$B/bench-cmd.log" 2>&1 || { tail "$B/bench-cmd.log"; echo "benchmark command failed: $s" >&2; exit 1; }
		awk '{printf "%s %.2f %s\n", $1, $2 + $3, $4}' "$B/time.out" >>"$B/$s.times"
		sync
	done
done
rm -f "$B/cp.out"
med() { cut -d' ' -f"$2" "$B/$1.times" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
awk '/convert-differences/ { f = 1; next } f && /^\.El/ { exit }
    f && /^\.It / { sub(/^\.It (Li )?/, ""); print }' "$TOP/man/pipeline.ini.5" >"$B/listed"
for t in f16 bf16; do
	PYTHONPATH=$GGUF_PY "$PY" -B "$TOP/tests/integration/data/gguf/gguf_tool.py" compare \
	    "$B/large-$t.gguf" "$B/ref-$t.gguf" "$B/listed" >"$B/cmp-$t.out" || true
done
rm -f "$B/large-bf16.gguf" "$B/ref-f16.gguf" "$B/ref-bf16.gguf"
cpt=$(med cp 1)
echo "convert bench: $bytes bytes of BF16 safetensors in; median of $RUNS alternated runs ($REF_RUNS of the converter), under nice, on a shared machine"
echo "  side                        wall s   CPU s  peak RSS    MB/s   x cp+fsync"
for s in $sides; do
	case $s in
	cp) l="cp + fsync" ;; f16) l="convert outtype=f16" ;; bf16) l="convert outtype=bf16" ;;
	ref16) l="convert_hf_to_gguf.py f16" ;; refbf16) l="convert_hf_to_gguf.py bf16" ;;
	esac
	awk -v l="$l" -v w="$(med "$s" 1)" -v c="$(med "$s" 2)" -v r="$(med "$s" 3)" -v b="$bytes" -v cp="$cpt" \
	    'BEGIN {printf "  %-26s %7.2f %7.2f %6.0f MB %7.0f %8.2fx\n", l, w, c, r / 1024, b / w / 1e6, w / cp}'
done
awk -v a="$(med f16 1)" -v b="$(med ref16 1)" -v c="$(med bf16 1)" -v d="$(med refbf16 1)" -v cp="$cpt" 'BEGIN {
	printf "  targets: f16 %.2fx cp+fsync (at most 1.5x: %s), bf16 %.2fx (at most 1.25x: %s)\n",
	    a / cp, a / cp <= 1.5 ? "met" : "MISSED", c / cp, c / cp <= 1.25 ? "met" : "MISSED"
	printf "  convert_hf_to_gguf.py / stage: f16 %.2fx, bf16 %.2fx\n", b / a, d / c
}'
for t in f16 bf16; do
	echo "  $t against the converter: $(tail -1 "$B/cmp-$t.out" | sed 's/^compare: //')"
	grep 'NOT LISTED\|no longer differs' "$B/cmp-$t.out" | sed 's/^compare: /    /' || true
done
for s in $sides; do echo "  runs $s (wall CPU RSS-KB): $(tr '\n' ';' <"$B/$s.times")"; done
