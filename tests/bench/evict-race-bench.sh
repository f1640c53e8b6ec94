#!/bin/bash
# tests/bench/evict-race-bench.sh: the train stage's evict-retry against
# the G21 reload race on the REAL Ollama (tests/integration/data/
# tests/lib/evict.sh, as train/evict-retry.sh): four tiny models loaded,
# production traffic reloading gemma3:4b 0.5 s after each eviction for
# ROUNDS reloads (default 3), the trainer (jobs/train.py, tiny engine)
# behind the GPU-contention stand-in with a LOAD_S-second load window
# (default 8). RUNS runs (default 10); for each: the launches needed and
# the seconds from the stage's start to the first training step (the first
# loss metric in a launch's events file), then the median, min and max.
# The peer: the same stage with nothing reloading (no race), in the same
# run. Prints figures; asserts nothing.
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
evict_setup

# one NAME ROUNDS|none: one train run; prints "LAUNCHES SECONDS RC".
one() {
	local name=$1 t0 first="" f
	load_all
	[ "$2" = none ] || race_start "$name" "$2"
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

echo "== evict-retry on real Ollama $("$TOP/tests/tools/ollama.sh" --version): $RUNS runs with a race of $ROUNDS reloads, $RUNS without"
: >race.txt
: >calm.txt
for i in $(seq 1 "$RUNS"); do
	r=$(one "race$i" "$ROUNDS")
	c=$(one "calm$i" none)
	echo "  run $i: race: $r; no race: $c"
	echo "$r" >>race.txt
	echo "$c" >>calm.txt
done
summary "reload race ($ROUNDS reloads)" race.txt
summary "no race (the peer)" calm.txt
