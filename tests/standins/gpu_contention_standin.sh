#!/bin/bash
# tests/standins/gpu_contention_standin.sh: a STAND-IN, for tests only, for a training GPU
# shared with a live Ollama server (G21). The train stage runs it as its
# `python` interpreter; it behaves like the trainer's start on such a card,
# then runs the real job program with Debian's python3:
#
#   STANDIN_OLLAMA   the Ollama stand-in's base URL (http://127.0.0.1:PORT)
#   STANDIN_LOAD_S   seconds the trainer spends loading before its first
#                    big allocation (default 2.5). A model other than those
#                    in STANDIN_ALLOW that /api/ps lists at any moment of
#                    that window took the memory first: the launch dies
#                    like a CUDA out-of-memory (an "oom" event, exit 3).
#   STANDIN_ALLOW    comma-separated model names allowed to stay resident
#                    (the kept embedding model), with their tags
#   STANDIN_LAUNCHES a file that gets one line per launch: "PID EVENTS"
#   STANDIN_KILL_AT_STEP, STANDIN_KILL_ONCE
#                    fault injection: the first launch (while the file
#                    STANDIN_KILL_ONCE does not exist) runs the job with
#                    test_stall_at_step set, waits for that step's loss
#                    metric, and kills the trainer and itself with SIGKILL,
#                    a kill -9 at a known step.
#   STANDIN_KILL_NOSTALL=1  the same kill without test_stall_at_step: the
#                    trainer runs on while the step's loss is looked for
#                    (every 50 ms), so the kill lands wherever it has got
#                    to, inside the next step or the checkpoint being
#                    written. Either way the checkpoints there at the
#                    kill are listed in STANDIN_KILL_ONCE.
#   STANDIN_PY       the interpreter of the job (default Debian's python3)
# Without STANDIN_OLLAMA it only does the fault injection.
set -u
py=${STANDIN_PY:-/usr/bin/python3}
[ -n "${STANDIN_LAUNCHES:-}" ] && echo "$$ ${PL_EVENTS:-}" >> "$STANDIN_LAUNCHES"

emit() {
	[ -n "${PL_EVENTS:-}" ] && printf '%s\n' "$1" >> "$PL_EVENTS"
}

if [ -n "${STANDIN_OLLAMA:-}" ]; then
	# %.0f, not %d: mawk's %d stops at 2^31-1, which cut every window
	# of 2.15 s or more to 2.15 s.
	end=$(( $(date +%s%N) + $(awk -v s="${STANDIN_LOAD_S:-2.5}" 'BEGIN{printf "%.0f", s*1e9}') ))
	while [ "$(date +%s%N)" -lt "$end" ]; do
		names=$(curl -s --max-time 2 "$STANDIN_OLLAMA/api/ps" |
		    grep -o '"name": *"[^"]*"' | sed 's/.*"\([^"]*\)"$/\1/')
		for n in $names; do
			case ",${STANDIN_ALLOW:-}," in *",$n,"*) continue;; esac
			emit "{\"type\":\"oom\",\"phase\":\"load\",\"mb\":7900,\"capacity_mb\":7833}"
			emit "{\"type\":\"error\",\"message\":\"CUDA out of memory (stand-in): $n is resident on the GPU\"}"
			echo "standin_gpu_contention: $n holds the GPU: out of memory" >&2
			exit 3
		done
		sleep 0.1
	done
fi

if [ -n "${STANDIN_KILL_AT_STEP:-}" ] && [ ! -e "${STANDIN_KILL_ONCE:?}" ]; then
	: > "$STANDIN_KILL_ONCE"
	# argv: script --config CONFIG: run it on a copy with the stall key.
	script=$1 cfg=$3
	stall=$STANDIN_KILL_AT_STEP
	[ "${STANDIN_KILL_NOSTALL:-0}" = 1 ] && stall=0
	/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["test_stall_at_step"]=int(sys.argv[3]); json.dump(c, open(sys.argv[2],"w"))' \
	    "$cfg" "$cfg.stall" "$stall"
	"$py" "$script" --config "$cfg.stall" &
	child=$!
	pat="\"name\":\"loss\",\"step\":$STANDIN_KILL_AT_STEP,"
	while kill -0 "$child" 2>/dev/null; do
		if grep -q "$pat" "$PL_EVENTS" 2>/dev/null; then
			kill -9 "$child"
			wait "$child" 2>/dev/null
			# The checkpoints complete at the kill (each appears
			# under its name only when whole).
			ls "${PL_WORKDIR:-.}/checkpoints" 2>/dev/null >"$STANDIN_KILL_ONCE"
			kill -9 $$
		fi
		sleep 0.05
	done
	wait "$child"
	exit $?
fi
exec "$py" "$@"
