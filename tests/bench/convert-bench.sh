#!/bin/bash
# tests/bench/convert-bench.sh: the native convert stage against llama.cpp's
# own convert_hf_to_gguf.py (the oracle tree of tests/tools/llama-oracle.sh,
# on the pinned environment's real torch and transformers) and against cp
# followed by an fsync, on the large fixture (gen_gemma3.py --size large:
# gemma-3-1b's shapes, about 2 GB of BF16). Wall time, CPU time and peak
# RSS of RUNS rounds, the sides alternated in each round, under nice:
# medians, the spread (fastest and slowest run), and each round's own
# ratio to cp (the rounds see the machine's load change; a ratio within a
# round is the fairer one). The comparison is kept even: every side reads
# the same input, warm in the page cache, and writes a new file (the
# previous output is deleted, and everything synced, outside the timing)
# on the same filesystem, and ends with its data on disk the same way: the
# file and its directory fsynced (cp's copies by sync FILE... DIR, convert's
# atomic commit, the converter's output by sync after it), not a whole-
# filesystem sync, which would make a side wait for other processes'
# writes. cp is coreutils' (copy_file_range: one copy in the kernel, the
# cheapest way to move the bytes). The outputs of the stage and of the
# converter are compared (gguf_tool.py compare: every tensor
# byte-identical, the KVs as pipeline.ini(5) lists), and the digest the
# stage hashed while writing is checked against the file. The machine's
# load (1-minute load average, CPU pressure) is printed with each run.
# Targets: outtype f16 at most 1.5x cp + fsync, bf16 at most 1.25x. Prints
# figures; asserts only that every command succeeds. Measured (RUNS=5
# REF_RUNS=0, 1-min load average 1.9 on the 2 CPUs): cp + fsync 1.81 s,
# f16 2.29 s (1.27x, 3.5 s of CPU, 45 MB), bf16 1.93 s (1.07x, 3.1 s of
# CPU, 53 MB); at load 3.3, f16 1.83x and bf16 1.62x. With no other work
# on the machine (RUNS=3 REF_RUNS=1, load 1.9 from the bench itself):
# cp + fsync 1.71 s, f16 1.96 s (rounds' median 1.08x), bf16 1.65 s
# (0.96x), convert_hf_to_gguf.py 15.6 s / 2.3 GB (f16) and 18.0 s / 2.9 GB
# (bf16), 340 of 340 tensors byte-identical.
#
#   tests/bench/convert-bench.sh      (PL_BENCH_DIR, default /var/tmp/pipelined-bench,
#                                keeps the fixture between runs; RUNS, default 5;
#                                REF_RUNS, default 1: how many of them run the converter)
set -eu
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${PL_BENCH_DIR:-/var/tmp/pipelined-bench}
RUNS=${RUNS:-5}
REF_RUNS=${REF_RUNS:-1}	# the converter takes minutes: its first RUNS only
PCTL=$TOP/daemon/pipelinectl
. "$TOP/tests/lib/gguf_bench.sh"
PY=$("$TOP/tests/tools/pyenv.sh" --python)
eval "$("$TOP/tests/tools/llama-oracle.sh" --env)"
large_fixture
bytes=$(stat -c %s "$B"/gemma3-large/*.safetensors | awk '{s+=$1} END {print s}')
cat "$B"/gemma3-large/*.safetensors >/dev/null	# warm the page cache

sides="cp f16 bf16 ref16 refbf16"
out_of() {
	case $1 in
	cp) echo "$B/cp.d" ;; f16|bf16) echo "$B/large-$1.gguf" ;;
	ref16) echo "$B/ref-f16.gguf" ;; refbf16) echo "$B/ref-bf16.gguf" ;;
	esac
}
run_side() {
	case $1 in
	cp) mkdir "$B/cp.d" && cp "$B"/gemma3-large/*.safetensors "$B/cp.d/" &&
		sync "$B"/cp.d/* "$B/cp.d" ;;
	f16|bf16) "$PCTL" stage convert -w "$B/work-convert" input="$B/gemma3-large" \
	    output="$B/large-$1.gguf" outtype=$1 ;;
	ref16|refbf16) local t=${1#ref}; [ "$t" = 16 ] && t=f16
		PYTHONPATH=$GGUF_PY "$PY" -B "$LLAMA_SRC/convert_hf_to_gguf.py" "$B/gemma3-large" \
		    --outtype "$t" --outfile "$B/ref-$t.gguf" && sync "$B/ref-$t.gguf" "$B" ;;
	esac
}
export -f run_side
export B PCTL PY GGUF_PY LLAMA_SRC
pressure() { awk '/^some/ { sub(/avg10=/, "", $2); print $2 }' /proc/pressure/cpu 2>/dev/null || echo -; }
for s in $sides; do : >"$B/$s.times"; done
: >"$B/load.times"
for i in $(seq 1 "$RUNS"); do
	for s in $sides; do
		case $s in ref*) [ "$i" -le "$REF_RUNS" ] || continue ;; esac
		rm -rf "$(out_of "$s")"
		sync
		load=$(cut -d' ' -f1 /proc/loadavg)
		psi=$(pressure)
		/usr/bin/time -o "$B/time.out" -f "%e %U %S %M" nice bash -c 'run_side "$0"' "$s" \
		    >"$B/bench-cmd.log" 2>&1 || { tail "$B/bench-cmd.log"; echo "benchmark command failed: $s" >&2; exit 1; }
		awk -v l="$load" -v p="$psi" '{printf "%s %.2f %s %s %s\n", $1, $2 + $3, $4, l, p}' \
		    "$B/time.out" >>"$B/$s.times"
		echo "$load $psi" >>"$B/load.times"
		case $s in f16|bf16) cp "$B/bench-cmd.log" "$B/stage-$s.log" ;; esac
	done
done
rm -rf "$B/cp.d"
# field F of side S's runs: med, lo, hi
stat_of() { cut -d' ' -f"$3" "$B/$2.times" | sort -n |
	awk -v w="$1" '{a[NR]=$1} END {print w == "lo" ? a[1] : w == "hi" ? a[NR] : a[int((NR+1)/2)]}'; }
med() { stat_of med "$1" "$2"; }
# the ratios of side S to cp within each round: lo med hi
round_ratios() { paste -d' ' <(cut -d' ' -f1 "$B/$1.times") <(head -n "$(wc -l <"$B/$1.times")" "$B/cp.times" | cut -d' ' -f1) |
	awk '{print $1 / $2}' | sort -n | awk '{a[NR]=$1} END {printf "%.2f %.2f %.2f", a[1], a[int((NR+1)/2)], a[NR]}'; }
PYTHONPATH=$GGUF_PY "$PY" -B "$TOP/tests/helpers/gguf_tool.py" listed "$TOP/man/pipeline.ini.5" >"$B/listed"
for t in f16 bf16; do
	echo "compare: not run (REF_RUNS=0)" >"$B/cmp-$t.out"
	[ ! -e "$B/ref-$t.gguf" ] || PYTHONPATH=$GGUF_PY "$PY" -B "$TOP/tests/helpers/gguf_tool.py" \
	    compare "$B/large-$t.gguf" "$B/ref-$t.gguf" "$B/listed" >"$B/cmp-$t.out" || true
	got=$(sed -n 's/^job.artifact {"name":"gguf",.*"sha256":"\([0-9a-f]*\)".*/\1/p' "$B/stage-$t.log")
	want=$("$PY" -c 'import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for b in iter(lambda: f.read(1 << 20), b""):
        h.update(b)
print(h.hexdigest())' "$B/large-$t.gguf")
	[ "$got" = "$want" ] && echo "same" >"$B/digest-$t.out" || echo "DIFFERS (\"$got\", the file's $want)" >"$B/digest-$t.out"
done
rm -f "$B/large-bf16.gguf" "$B/ref-f16.gguf" "$B/ref-bf16.gguf"
cpt=$(med cp 1)
echo "convert bench: $bytes bytes of BF16 safetensors in; $RUNS alternated rounds ($REF_RUNS of the converter), under nice, on a shared machine"
echo "  load during the runs: 1-min load average $(cut -d' ' -f1 "$B/load.times" | sort -n |
    awk '{a[NR]=$1} END {printf "%s (%s to %s)", a[int((NR+1)/2)], a[1], a[NR]}') on $(nproc) CPUs, CPU pressure avg10 $(cut -d' ' -f2 "$B/load.times" | sort -n |
    awk '{a[NR]=$1} END {printf "%s%% (%s to %s)", a[int((NR+1)/2)], a[1], a[NR]}')"
echo "  side                        wall s (fastest-slowest)   CPU s  peak RSS    MB/s   x cp+fsync (rounds: lo med hi)"
for s in $sides; do
	[ -s "$B/$s.times" ] || continue
	case $s in
	cp) l="cp + fsync" ;; f16) l="convert outtype=f16" ;; bf16) l="convert outtype=bf16" ;;
	ref16) l="convert_hf_to_gguf.py f16" ;; refbf16) l="convert_hf_to_gguf.py bf16" ;;
	esac
	rr=""
	case $s in f16|bf16) rr="($(round_ratios "$s"))" ;; esac
	awk -v l="$l" -v w="$(med "$s" 1)" -v lo="$(stat_of lo "$s" 1)" -v hi="$(stat_of hi "$s" 1)" \
	    -v c="$(med "$s" 2)" -v r="$(med "$s" 3)" -v b="$bytes" -v cp="$cpt" -v rr="$rr" \
	    'BEGIN {printf "  %-26s %7.2f (%6.2f-%6.2f) %7.2f %6.0f MB %7.0f %8.2fx %s\n", l, w, lo, hi, c, r / 1024, b / w / 1e6, w / cp, rr}'
done
awk -v a="$(med f16 1)" -v b="$(med ref16 1)" -v c="$(med bf16 1)" -v d="$(med refbf16 1)" -v cp="$cpt" \
    -v fr="$(round_ratios f16 | cut -d' ' -f2)" -v br="$(round_ratios bf16 | cut -d' ' -f2)" 'BEGIN {
	printf "  targets (median of the rounds'\'' ratios): f16 %.2fx cp+fsync (at most 1.5x: %s), bf16 %.2fx (at most 1.25x: %s)\n",
	    fr, fr <= 1.5 ? "met" : "MISSED", br, br <= 1.25 ? "met" : "MISSED"
	printf "  medians against each other: f16 %.2fx, bf16 %.2fx\n", a / cp, c / cp
	if (b > 0 && d > 0)
		printf "  convert_hf_to_gguf.py / stage: f16 %.2fx, bf16 %.2fx\n", b / a, d / c
}'
for t in f16 bf16; do
	echo "  $t against the converter: $(tail -1 "$B/cmp-$t.out" | sed 's/^compare: //'); the stage's digest and the file's: $(cat "$B/digest-$t.out")"
	grep 'NOT LISTED\|no longer differs' "$B/cmp-$t.out" | sed 's/^compare: /    /' || true
done
for s in $sides; do
	[ ! -s "$B/$s.times" ] || echo "  runs $s (wall CPU RSS-KB load psi): $(tr '\n' ';' <"$B/$s.times")"
done
