# tests/lib/bake.sh: sourced by the bake/gate/register
# integration tests (tests/integration/bake/, ollama/). Builds the tiny Gemma 3 GGUF fixture and
# starts a real llama-server (the oracle build, tests/tools/llama-oracle.sh)
# serving it. Needs TOP and TEST_TMP; sources tests/lib.sh when the caller
# has not.

BAKE_DATA=$TOP/tests/fixtures/bake
PCTL=$TOP/daemon/pipelinectl

declare -F pl_start >/dev/null || . "$TOP/tests/lib.sh"

# stage STAGE key=value...: pipelinectl stage by hand, its work directory
# under TEST_TMP (not a new /tmp/pipelinectl-stage.* per call).
stage() {
	local st=$1
	shift
	"$PCTL" stage "$st" -w "$(mktemp -d "$TEST_TMP/stage-$st.XXXXXX")" "$@"
}

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# tiny_gguf OUT: a Q8_0 GGUF of the tiny fixture model (seeded, so the same
# bytes every time), converted with llama.cpp's own converter.
tiny_gguf() {
	local out=$1 seed=${2:-1234} d
	d=$TEST_TMP/tiny-$seed
	eval "$("$TOP/tests/tools/llama-oracle.sh" --env)" || fail "llama-oracle.sh failed"
	/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$d" --layout causal \
	    --seed "$seed" >"$d.gen.log" 2>&1 || { cat "$d.gen.log"; fail "gen_gemma3.py"; }
	PYTHONPATH=$LLAMA_SRC:$GGUF_PY /usr/bin/python3 -B "$TOP/tests/standins/convert_stubbed.py" \
	    "$LLAMA_SRC/convert_hf_to_gguf.py" "$d" --outtype f16 --outfile "$d.f16.gguf" \
	    >"$d.conv.log" 2>&1 || { tail -20 "$d.conv.log"; fail "convert_hf_to_gguf.py"; }
	"$LLAMA_BIN/llama-quantize" "$d.f16.gguf" "$out" Q8_0 >"$d.quant.log" 2>&1 ||
	    { tail -20 "$d.quant.log"; fail "llama-quantize"; }
}

# start_llama GGUF CTX NP [ARG...]: start llama-server, the ARGs added to
# its command line; sets LLAMA_URL and LLAMA_PID.
start_llama() {
	local port
	port=$(free_port)
	eval "$("$TOP/tests/tools/llama-oracle.sh" --env)"
	"$LLAMA_BIN/llama-server" -m "$1" -c "$2" -np "${3:-1}" --host 127.0.0.1 \
	    --port "$port" -t "${LLAMA_THREADS:-1}" --alias tiny "${@:4}" >"$TEST_TMP/llama-server.$port.log" 2>&1 &
	LLAMA_PID=$!
	LLAMA_URL=http://127.0.0.1:$port
	for _ in $(seq 1 300); do
		curl -sf "$LLAMA_URL/health" >/dev/null 2>&1 && return 0
		kill -0 "$LLAMA_PID" 2>/dev/null || break
		sleep 0.1
	done
	tail -20 "$TEST_TMP/llama-server.$port.log"
	fail "llama-server did not come up"
}

stop_llama() {
	[ -n "${LLAMA_PID:-}" ] && kill "$LLAMA_PID" 2>/dev/null && wait "$LLAMA_PID" 2>/dev/null
	LLAMA_PID=
}

# values FILE: the job.value lines pipelinectl stage printed, as one JSON
# object {key: value} on stdout.
values() {
	/usr/bin/python3 -c '
import json, sys
out = {}
for line in open(sys.argv[1]):
    if line.startswith("job.value "):
        v = json.loads(line[len("job.value "):])
        out[v["key"]] = v["value"]
print(json.dumps(out))' "$1"
}

# value FILE KEY: one job value of what pipelinectl stage printed.
value() {
	values "$1" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$2"
}

# corpus_tokens: the fixture corpus $TEST_TMP/corpus.jsonl (12 examples)
# and the tokenize stage's tokens of it with the tiny base of tiny_gguf's
# seed 1234, in $TEST_TMP/tok (beside its tokenize_corpus.config.json).
corpus_tokens() {
	/usr/bin/python3 "$TOP/tests/fixtures/gen_corpus.py" "$TEST_TMP/corpus.jsonl" --n 12 >/dev/null
	"$PCTL" stage tokenize -w "$TEST_TMP/tok" base="$TEST_TMP/tiny-1234" corpus="$TEST_TMP/corpus.jsonl" \
	    >"$TEST_TMP/tokenize.out" 2>&1 || { cat "$TEST_TMP/tokenize.out"; fail "tokenize"; }
}
