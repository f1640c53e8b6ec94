# gpu_stages_lib.sh: sourced by tests/integration/55-59 (the tokenize,
# probe and train stages run by hand with `pipelinectl stage`).
# Provides: CTL, PYD (Debian's python3), die, setup_tokens (a tiny Gemma 3
# base, a 40-example corpus, its tokens), start_standin (the Ollama API
# stand-in; sets URL and STANDIN_LOG), log_count.
set -euo pipefail
: "${TOP:?TOP is the repository root}"
: "${TEST_TMP:?TEST_TMP is a private temporary directory}"
CTL="$TOP/daemon/pipelinectl"
PYD=/usr/bin/python3
STANDIN_PID=

die() {
	echo "FAIL: $*" >&2
	exit 1
}

for f in "$CTL" "$TOP/plugins/tokenize.so" "$TOP/plugins/probe.so" "$TOP/plugins/train.so"; do
	[ -e "$f" ] || die "$f is not built (make tests)"
done

cleanup() {
	if [ -n "$STANDIN_PID" ]; then
		kill "$STANDIN_PID" 2>/dev/null || true
		wait "$STANDIN_PID" 2>/dev/null || true
	fi
}
trap cleanup EXIT

# A tiny Gemma 3 base (the shared fixture), a corpus and its tokens:
# BASE, CORPUS, TOKENS.
setup_tokens() {
	BASE=$TEST_TMP/base
	CORPUS=$TEST_TMP/corpus.jsonl
	TOKENS=$TEST_TMP/tok/tokens.npz
	"$PYD" "$TOP/tests/fixtures/gen_gemma3.py" "$BASE" --layout causal >/dev/null
	"$PYD" "$TOP/tests/fixtures/gen_corpus.py" "$CORPUS" --n "${1:-40}" >/dev/null
	"$CTL" stage tokenize -w "$TEST_TMP/tok" base="$BASE" corpus="$CORPUS" \
	    >"$TEST_TMP/tokenize.out" 2>&1 || { cat "$TEST_TMP/tokenize.out"; die "tokenize failed"; }
	[ -f "$TOKENS" ] || die "no $TOKENS"
}

# start_standin ARGS...: the Ollama API stand-in on an ephemeral port.
start_standin() {
	STANDIN_LOG=$TEST_TMP/standin.log
	rm -f "$TEST_TMP/port" "$STANDIN_LOG"
	"$PYD" "$TOP/tests/standins/ollama_standin.py" --port-file "$TEST_TMP/port" \
	    --log "$STANDIN_LOG" "$@" &
	STANDIN_PID=$!
	for _ in $(seq 100); do
		[ -s "$TEST_TMP/port" ] && break
		sleep 0.05
	done
	[ -s "$TEST_TMP/port" ] || die "the Ollama stand-in did not start"
	URL="http://127.0.0.1:$(cat "$TEST_TMP/port")"
}

# log_count EVENT MODEL: how many times the stand-in logged EVENT for MODEL.
log_count() {
	grep -c "\"event\": \"$1\", \"model\": \"$2\"" "$STANDIN_LOG" || true
}
