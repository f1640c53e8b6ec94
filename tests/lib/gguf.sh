# tests/lib/gguf.sh: helpers for the GGUF stage tests
# (tests/integration/gguf/). Source it after tests/lib.sh (or with TOP and
# TEST_TMP set: it sources tests/lib.sh then); it gets llama.cpp
# (tests/tools/llama-oracle.sh builds it on first use) and gives:
#   fixture DIR ARGS...    a tiny Gemma 3 checkpoint (gen_gemma3.py ARGS)
#   stage NAME key=val...  pipelinectl stage NAME, output in $TEST_TMP/NAME.out
#   ref_convert CKPT OUT OUTTYPE   llama.cpp's convert_hf_to_gguf.py, on
#                          the project's pinned environment (real torch and
#                          transformers, tests/tools/pyenv.sh; $PL_PY)
#   gtool CMD ...          gguf_tool.py under gguf-py
set -eu
: "${TOP:?}" "${TEST_TMP:?}"
PCTL=$TOP/daemon/pipelinectl
declare -F pl_start >/dev/null || . "$TOP/tests/lib.sh"

eval "$("$TOP/tests/tools/llama-oracle.sh" --env)" || fail "llama-oracle.sh failed"
PL_PY=$("$TOP/tests/tools/pyenv.sh" --python) || fail "tests/tools/pyenv.sh failed"
[ -x "$PCTL" ] || fail "$PCTL is not built"

fixture() {
	local d=$1
	shift
	/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$d" "$@" >"$d.gen.log" 2>&1 ||
	    { cat "$d.gen.log"; fail "gen_gemma3.py $*"; }
}

# stage NAME ARGS...: runs by hand in a work directory of its own; the
# output (stdout and stderr) is left in $TEST_TMP/NAME.out; returns the
# stage's exit status.
stage() {
	local name=$1
	shift
	mkdir -p "$TEST_TMP/work"
	"$PCTL" stage "$name" -w "$TEST_TMP/work/$name" "$@" >"$TEST_TMP/$name.out" 2>&1
}

# The reference converter, as llama.cpp's tree runs it (its own gguf-py).
ref_convert() {
	PYTHONPATH=$GGUF_PY "$PL_PY" -B "$LLAMA_SRC/convert_hf_to_gguf.py" "$1" \
	    --outtype "$3" --outfile "$2" \
	    >"$2.log" 2>&1 || { tail -20 "$2.log"; fail "convert_hf_to_gguf.py $1"; }
}

gtool() {
	PYTHONPATH=$GGUF_PY /usr/bin/python3 -B "$TOP/tests/helpers/gguf_tool.py" "$@"
}
