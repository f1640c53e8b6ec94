# tests/lib/evict.sh: sourced (after tests/lib.sh, tests/lib/gpu_stages.sh and
# tests/lib/bake.sh) by train/evict-retry.sh and tests/bench/evict-race-bench.sh:
# the G21 reload race on the REAL Ollama.
#   evict_setup      starts Ollama (4 models may be loaded) and creates
#                    gemma3:4b, router:v17, nomic-embed-text and keeper from
#                    the tiny fixture GGUF at four seeds (four blobs, so four
#                    runners); sets URL
#   load_all         loads the four, keep_alive -1
#   race_start NAME ROUNDS|forever [NUM_CTX]
#                    production traffic (tests/helpers/race_client.py) reloading
#                    gemma3:4b 0.5 s after each eviction, asking for a
#                    context of NUM_CTX tokens when given; logs to NAME.race
#   race_stop
# and sets the load window of tests/lib/gpu_stages.sh's run_train to 8 s and its
# unload wait to 30 s: a CPU server loads and unloads slower than the
# stand-in.
declare -F pl_start >/dev/null || . "$TOP/tests/lib.sh"
RACE_PID=
LOAD_S=${LOAD_S:-8}
UNLOAD_WAIT=${UNLOAD_WAIT:-30}
EVICT_MODELS="gemma3:4b router:v17 nomic-embed-text keeper"

evict_setup() {
	local seed=1 m
	ollama_start OLLAMA_MAX_LOADED_MODELS=4
	for m in $EVICT_MODELS; do
		[ -f "$TEST_TMP/m$seed.gguf" ] || tiny_gguf "$TEST_TMP/m$seed.gguf" "$seed"
		ollama_create "$m" "$TEST_TMP/m$seed.gguf"
		seed=$((seed + 1))
	done
	URL=$OURL
}

load_all() {
	local m
	for m in $EVICT_MODELS; do
		curl -sf "$URL/api/generate" -d "{\"model\":\"$m\",\"keep_alive\":-1}" >/dev/null ||
		    die "loading $m failed"
	done
	[ "$(curl -s "$URL/api/ps" | grep -o '"name":"[^"]*"' | wc -l)" -eq 4 ] ||
	    die "not all four models are loaded: $(curl -s "$URL/api/ps")"
}

race_start() {
	/usr/bin/python3 "$TOP/tests/helpers/race_client.py" "$URL" gemma3:4b "$2" \
	    "$TEST_TMP/$1.race" --delay 0.5 ${3:+--num-ctx "$3"} &
	RACE_PID=$!
	for _ in $(seq 1 100); do
		grep -q '"event": "ready", "model": "gemma3:4b", "loaded": true' "$TEST_TMP/$1.race" 2>/dev/null && return 0
		sleep 0.1
	done
	die "the race client did not see gemma3:4b loaded"
}

race_stop() {
	if [ -n "$RACE_PID" ]; then kill "$RACE_PID" 2>/dev/null; wait "$RACE_PID" 2>/dev/null || true; fi
	RACE_PID=
}
