#!/bin/bash
# tests/bench/stage-bench.sh: what a stage process costs a native stage.
# The same job (convert to bf16, quantize a bf16 GGUF to Q8_0, merge a
# LoRA adapter, tensor_fix; on the fixture of gen_gemma3.py --size SIZE,
# its "plain" adapter and its bf16 GGUF, made once) run by pipelined on a
# job thread (root's run, stage_process = owners) and in a stage process
# (stage_process = all: pipeline-stage under the run's shim, its context
# file, its events), the two alternated in each of RUNS rounds (which
# goes first alternating too) under nice; the time is the attempt's, as
# the store records it (start to end of the run hook, the stage process's
# start and the reading of its events included). Prints each round's
# ratio stage process / daemon and the medians, with the machine's
# 1-minute load average at each run (the target: within 5%).
# The stage process adds a fixed cost (the exec of pipeline-stage and its
# libraries, the plugin's dlopen, the context file, the events read
# back), nothing per byte: the copy and its hashing are the same code.
# The daemon runs in a session of its own, as the stage process does
# (below: the kernel's autogroups).
# Run as root, the stage process's side is the tests' default: a split
# daemon (pl_conf's group = plsubmit), its daemon process _pipelined, the
# stage under the parent's shim; the daemon's side is a daemon root alone
# (PL_SPLIT=0), one process: the ratio is the split's whole cost to a
# stage (issue 36's "stage-bench before and after the split"). Measured
# so (2026-12-07, dadd651, quiet 2 cores, load 0.4), SIZE=medium RUNS=3,
# the rounds' ratio medians split / root alone: merge 0.973 (medians
# 0.44 s both), quantize 1.043 (0.28 s both), tensor_fix 0.997 (0.24 s),
# convert 1.018 (0.24 s): within 5%.
# The privileged parent (BENCH_CONF="group = plsubmit", root's run, the
# run's shim started by the parent), SIZE=medium RUNS=3 at load 8, 9526054
# then this build, one after the other: tensor_fix medians daemon 0.71 s
# before, 0.86 s after, stage process 0.84 s, 0.72 s; convert daemon
# 0.50 s, 0.32 s, stage process 0.50 s, 0.47 s: within the load's spread
# both ways (the parent is asked once a run, for its shim).
# Measured on the shared two-core machine at load 24-26 (other sessions'
# work; both sides in sessions of their own), SIZE=medium RUNS=5, the
# rounds' ratio medians: merge 1.036 (medians daemon 2.77 s, stage
# process 2.84 s), quantize 0.975 (2.30 s, 2.23 s), tensor_fix 0.972
# (1.77 s, 1.72 s), convert 1.156 (1.47 s, 1.68 s; its rounds 0.68-1.50,
# the load's spread); SIZE=large RUNS=3 STAGES="convert quantize merge"
# at load 14-20: convert 1.079 (medians 19.70 s, 21.63 s; rounds
# 0.97-1.10), quantize 0.928 (25.06 s, 26.09 s; 0.90-1.31), merge 0.832
# (56.03 s, 46.63 s; 0.74-1.14). Within the 5% target in the medians of
# medium merge, quantize and tensor_fix; convert and every large stage
# spread wider round to round than the target itself (the other
# sessions' load), so neither meets nor misses it here. Earlier, SIZE=tiny RUNS=7 at load 17: convert 0.07 s
# in the daemon against 0.11 s in a stage process, tensor_fix 0.23 s
# against 0.24 s: some 10-40 ms a job, about 1-2% of the large fixture's
# convert on a quiet machine (1.65-1.93 s, convert-bench.sh); SIZE=large
# RUNS=3 at load 10-20 ran 15-31 s per job either way, the rounds' ratios
# 0.58-1.55: the load, not the stage process. Rerun on a quiet machine for
# the figure against the target.
# Quiet (2026-12-04, nothing else running, load 1.3-2.1 from the bench
# itself), RUNS=5, the rounds' ratio medians: SIZE=large (a 1.9 GB
# checkpoint): convert 1.017 (medians daemon 1.58 s, stage process
# 1.52 s), quantize 0.998 (2.47 s, 2.49 s), merge 0.964 (7.19 s, 6.78 s),
# tensor_fix 0.877 (2.10 s, 1.70 s): within the 5% target (single rounds
# still spread 0.24-2.0 on convert, where a round's first read of the 1.9
# GB from disk lands on one side). SIZE=medium (125 MB, jobs of 0.1-0.3
# s): convert 1.078, quantize 1.033, merge 1.090, tensor_fix 1.158, the
# stage process's fixed cost, 10-30 ms a job, which the 5% target meets
# only for jobs of half a second or more (every stage on a real model).
#
#   tests/bench/stage-bench.sh     (SIZE, default large, as convert-bench;
#                                   RUNS, default 5; STAGES, default
#                                   "convert quantize merge tensor_fix";
#                                   PL_BENCH_DIR, default /var/tmp/pipelined-bench,
#                                   keeps the fixture, adapter and GGUF;
#                                   BENCH_CONF, more daemon lines, ';'-separated)
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
SIZE=${SIZE:-large}
RUNS=${RUNS:-5}
STAGES=${STAGES:-convert quantize merge tensor_fix}
B=${PL_BENCH_DIR:-/var/tmp/pipelined-bench}
FIX=$B/gemma3-$SIZE
mkdir -p "$B"
if [ ! -d "$FIX" ]; then
	echo "generating the $SIZE fixture in $FIX (once)" >&2
	rm -rf "$FIX.tmp"
	/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$FIX.tmp" --size "$SIZE" \
	    --layout causal >"$B/gen-$SIZE.log" 2>&1
	mv "$FIX.tmp" "$FIX"
fi
# merge's adapter and quantize's input, made once beside the fixture.
AD=$B/gemma3-$SIZE-adapter/adapters/plain
if [ ! -d "$AD" ]; then
	echo "generating the $SIZE adapter in $AD (once)" >&2
	/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$B/gemma3-$SIZE-adapter" --size "$SIZE" \
	    --layout causal --adapters-only --adapter plain >"$B/gen-$SIZE-adapter.log" 2>&1
fi
GG=$B/gemma3-$SIZE.bf16.gguf
if [ ! -f "$GG" ]; then
	echo "converting the $SIZE fixture to $GG (once)" >&2
	"$TOP/daemon/pipelinectl" stage convert -w "$B/convert-work" input="$FIX" output="$GG" \
	    outtype=bf16 >"$B/convert-$SIZE.log" 2>&1
fi
cat "$FIX"/* "$AD"/* "$GG" >/dev/null   # warm the page cache
. "$TOP/tests/lib.sh"
trap 'pl_kill9 2>/dev/null; rm -rf "$TEST_TMP"' EXIT
# The daemon in a session of its own, as the stage process is (the run's
# shim starts one): with the kernel's autogroups each session shares the
# CPU as one, and a daemon left in this script's session would share its
# part with the script's own polling (sqlite3, pipelinectl), which the
# stage process does not: measured so at load 25-30, the stage process
# came out 0.4-0.7x the daemon's time for merge and quantize.
printf '#!/bin/sh\nexec setsid %s "$@"\n' "$PIPELINED" >"$TEST_TMP/pipelined-setsid"
chmod 0755 "$TEST_TMP/pipelined-setsid"
PIPELINED=$TEST_TMP/pipelined-setsid
O=$TEST_TMP/out
mkdir -p "$O"
spec() {  # stage NAME
	case $1 in
	convert) printf '[convert]\ninput = %s\noutput = %s/%s.gguf\nouttype = bf16\n' "$FIX" "$O" "$2" ;;
	tensor_fix) printf '[tensor_fix]\ninput = %s\noutput = %s/%s\ndrop =\nrename =\n' "$FIX" "$O" "$2" ;;
	quantize) printf '[quantize]\ninput = %s\noutput = %s/%s.gguf\ntype = Q8_0\n' "$GG" "$O" "$2" ;;
	merge) printf '[merge]\nbase = %s\nadapter = %s\noutput = %s/%s\n' "$FIX" "$AD" "$O" "$2" ;;
	esac >"$TEST_TMP/$2.ini"
}
: >"$TEST_TMP/times"
for i in $(seq 1 "$RUNS"); do
	for stage in $STAGES; do
		# The order of the two alternates between rounds: neither
		# always runs second, after the other warmed the cache.
		modes="owners all"
		[ $((i % 2)) = 0 ] && modes="all owners"
		for mode in $modes; do
			# BENCH_CONF: more daemon lines, ';'-separated ("group =
			# plsubmit": the daemon split in two, its parent starting
			# the run's shim).
			# Run as root, the stage process's side is the tests'
			# default daemon, split (its daemon process _pipelined,
			# the stage under the parent's shim), and the daemon's
			# side a daemon root alone (PL_SPLIT=0): the split's
			# whole cost to a stage.
			IFS=';' read -r -a extra <<< "${BENCH_CONF:-}"
			split=1
			[ "$mode" = owners ] && split=0
			# A fresh state directory each run: a split daemon's is
			# _pipelined's, where a root daemon alone's root run
			# would find a directory of another owner.
			rm -rf "${TEST_TMP:?}/state"
			PL_SPLIT=$split pl_conf "stage_process = $mode" "log_level = warn" \
			    ${extra[@]+"${extra[@]}"}
			pl_start
			n=$stage-$mode-$i
			rm -rf "${O:?}"/*
			sync
			load=$(cut -d' ' -f1 /proc/loadavg)
			spec "$stage" "$n"
			nice -n 0 "$PIPELINECTL" -f "$PL_CONF" submit "$TEST_TMP/$n.ini" >/dev/null
			wait_run "$n" succeeded 600
			t=$(db "SELECT a.finished - a.started FROM attempts a JOIN jobs j ON j.id = a.job_id
				JOIN runs r ON r.id = j.run_id WHERE r.name = '$n'")
			procs=$(db "SELECT count(*) FROM procs p JOIN attempts a ON a.id = p.attempt_id
				JOIN jobs j ON j.id = a.job_id JOIN runs r ON r.id = j.run_id WHERE r.name = '$n'")
			case $mode in all) [ "$procs" = 1 ] ;; owners) [ "$procs" = 0 ] ;; esac ||
				{ echo "$n: $procs processes: not where it should run" >&2; exit 1; }
			echo "$stage $mode $i $t $load" >>"$TEST_TMP/times"
			pl_stop
		done
	done
done
awk -v size="$SIZE" '
function median(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ t[$1, $2, $3] = $4; load[$1, $2, $3] = $5; n[$1] = $3 > n[$1] ? $3 : n[$1]; stages[$1] = 1 }
END {
	for (s in stages) {
		k = 0; ki = 0; ko = 0; lo = ""; hi = ""
		for (i = 1; i <= n[s]; i++) {
			r = t[s, "all", i] / t[s, "owners", i]
			printf "%-10s round %d: daemon %.2fs (load %s), stage process %.2fs (load %s), ratio %.3f\n",
			    s, i, t[s, "owners", i], load[s, "owners", i], t[s, "all", i], load[s, "all", i], r
			rr[++k] = r; ow[++ki] = t[s, "owners", i]; al[++ko] = t[s, "all", i]
		}
		printf "%-10s %s: medians daemon %.2fs, stage process %.2fs; rounds'\'' ratio median %.3f\n",
		    s, size, median(ow, ki), median(al, ko), median(rr, k)
		delete rr; delete ow; delete al
	}
}' "$TEST_TMP/times"
