#!/bin/bash
# tests/bench/evict-race-bench.sh: the train stage's evict-retry against
# the G21 reload race on the REAL Ollama (tests/helpers/
# tests/lib/evict.sh, as train/evict-retry.sh): four tiny models loaded,
# production traffic reloading gemma3:4b 0.5 s after each eviction for
# ROUNDS reloads (default 3), the trainer (jobs/train.py, tiny engine)
# behind the GPU-contention stand-in with a LOAD_S-second load window
# (default 8). RUNS runs (default 10); for each: the launches needed and
# the seconds from the stage's start to the first training step (the first
# loss metric in a launch's events file), then the median, min and max.
# Each run also races a client that asks for another num_ctx (512) than
# the model was loaded with (Ollama 0.30 and later reload a runner for that
# alone: server/sched.go, needsReload). The peer: the same stage with
# nothing reloading (no race), in the same run. Every server profile in the
# same invocation (BENCH_OLLAMA_VERSIONS, default all that
# tests/tools/ollama.sh builds: 0.34.2 then 0.24.0), the runs of each
# interleaved (race, race at num_ctx 512, no race). Prints figures;
# asserts nothing.
#
# Measured, both profiles in one run (RUNS=3, ROUNDS=3, LOAD_S 8, nice 10,
# load average 25 to 28 on the 2 cores: other sessions' work), median
# [min, max] of the seconds to the first training step, and launches:
#   0.34.2: race 25.54 [24.91, 26.63] s, 4 launches every run; race at
#     num_ctx 512 26.52 [25.95, 26.92] s, 4; no race 21.43 [19.21, 21.57] s,
#     1: the race costs 1.19x the calm start (1.24x at num_ctx 512);
#   0.24.0: race 23.75 [23.60, 25.48] s, 4; at num_ctx 512 22.22 [22.19,
#     24.58] s, 4; no race 18.07 [17.48, 19.46] s, 1: 1.31x (1.23x).
# No run failed; every race was survived within launch_retries (three
# deaths before the loop, the fourth launch trained).
set -eu
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
TEST_TMP=${TEST_TMP:-$(mktemp -d /tmp/bench-evict.XXXXXX)}
export TOP TEST_TMP
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
. "$TOP/tests/lib/bake.sh"
. "$TOP/tests/lib/evict.sh"
trap 'race_stop; ollama_stop' EXIT
RUNS=${RUNS:-10}
ROUNDS=${ROUNDS:-3}
cd "$TEST_TMP"
setup_tokens 40
top_tmp=$TEST_TMP

# one NAME ROUNDS|none [NUM_CTX]: one train run; prints "LAUNCHES SECONDS RC".
one() {
	local name=$1 t0 first="" f
	load_all
	[ "$2" = none ] || race_start "$name" "$2" ${3:-}
	t0=$(date +%s.%N)
	run_train "$name" &
	local tp=$!
	while kill -0 "$tp" 2>/dev/null; do
		if [ -z "$first" ] && [ -f "$TEST_TMP/$name.launches" ]; then
			for f in $(awk '{print $2}' "$TEST_TMP/$name.launches"); do
				if grep -q '"name":"loss"' "$f" 2>/dev/null; then
					first=$(date +%s.%N)
					break
				fi
			done
		fi
		sleep 0.05
	done
	wait "$tp" || true
	race_stop
	awk -v a="$t0" -v b="${first:-0}" -v l="$(wc -l <"$TEST_TMP/$name.launches")" \
	    -v ok="$(grep -c '^job.artifact {"name":"adapter"' "$TEST_TMP/$name.out" || true)" \
	    'BEGIN { printf "%d %.2f %s\n", l, (b > 0 ? b - a : -1), (ok ? "ok" : "failed") }'
}

summary() {	# summary LABEL FILE
	/usr/bin/python3 - "$1" "$2" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[2]) if l.strip()]
la = [int(r[0]) for r in rows]
s = [float(r[1]) for r in rows if float(r[1]) >= 0]
bad = sum(r[2] != "ok" for r in rows)
print("%s: %d runs, %d failed; launches median %g (min %d, max %d); seconds to the first "
      "training step median %.2f (min %.2f, max %.2f)" % (sys.argv[1], len(rows), bad,
      statistics.median(la), min(la), max(la), statistics.median(s) if s else -1,
      min(s) if s else -1, max(s) if s else -1))
PY
}

for v in ${BENCH_OLLAMA_VERSIONS:-$("$TOP/tests/tools/ollama.sh" --versions)}; do
	export OLLAMA_VERSION=$v TEST_TMP=$top_tmp/$v
	mkdir -p "$TEST_TMP"
	cd "$TEST_TMP"
	# The four models' GGUFs made once, for every profile.
	for f in "$top_tmp"/*/m[1-4].gguf; do
		if [ -f "$f" ] && [ ! -e "$TEST_TMP/${f##*/}" ]; then ln -s "$f" "$TEST_TMP/${f##*/}"; fi
	done
	evict_setup
	echo "== evict-retry on real Ollama $("$TOP/tests/tools/ollama.sh" --version): $RUNS runs with a race of $ROUNDS reloads, $RUNS with the race at num_ctx 512, $RUNS without; load average $(cut -d' ' -f1-3 /proc/loadavg)"
	: >race.txt
	: >ctx.txt
	: >calm.txt
	for i in $(seq 1 "$RUNS"); do
		r=$(one "race$i" "$ROUNDS")
		x=$(one "ctx$i" "$ROUNDS" 512)
		c=$(one "calm$i" none)
		echo "  run $i: race: $r; race at num_ctx 512: $x; no race: $c"
		echo "$r" >>race.txt
		echo "$x" >>ctx.txt
		echo "$c" >>calm.txt
	done
	summary "$v reload race ($ROUNDS reloads)" race.txt
	summary "$v reload race at num_ctx 512" ctx.txt
	summary "$v no race (the peer)" calm.txt
	race_stop
	ollama_stop
done
