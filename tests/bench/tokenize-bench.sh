#!/bin/bash
# tests/bench/tokenize-bench.sh: tokenize throughput (examples/s, tokens/s)
# of jobs/tokenize_corpus.py on a generated corpus of 1,200 routing examples with
# ~6k-token prompts (the reference task's shape), against a plain loop over
# the same tokenizer: render each example's prompt and response with the
# same chat template and call SentencePiece's encode() on each string, one
# at a time, in one thread, writing nothing.  Both are timed as whole
# processes (interpreter start-up and imports included), best of REPEAT
# runs, since the machine is shared.  Prints figures; asserts nothing.
#
#   tests/bench/tokenize-bench.sh [EXAMPLES] [FILLER-WORDS]
#
# Environment: BENCH_TMP (default: a fresh directory under /tmp, removed
# after), THREADS (tokenize_corpus.py's threads key, default 2), REPEAT (3).
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
N=${1:-1200}
FILLER=${2:-2150}
THREADS=${THREADS:-2}
REPEAT=${REPEAT:-3}
T=${BENCH_TMP:-$(mktemp -d /tmp/tokbench.XXXXXX)}
cd "$T"
$PY "$TOP/tests/fixtures/gen_gemma3.py" base >/dev/null
$PY "$TOP/tests/fixtures/gen_corpus.py" corpus.jsonl --n "$N" --filler "$FILLER"
printf '{"base":"%s/base","corpus":"%s/corpus.jsonl","output_dir":"%s/out","threads":%d}\n' \
    "$T" "$T" "$T" "$THREADS" >tok.json

cat >plain.py <<'PY'
import json, sys
import sentencepiece as spm
from jinja2.sandbox import ImmutableSandboxedEnvironment
t = sys.argv[1]
tc = json.load(open(t + "/base/tokenizer_config.json"))
tmpl = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(tc["chat_template"])
sp = spm.SentencePieceProcessor(model_file=t + "/base/tokenizer.model")
n = 0
for line in open(t + "/corpus.jsonl"):
    m = json.loads(line)["messages"]
    p = tmpl.render(messages=m[:-1], add_generation_prompt=True, bos_token="<bos>")
    f = tmpl.render(messages=m, add_generation_prompt=False, bos_token="<bos>")
    n += len(sp.encode(p)) + len(sp.encode(f[len(p):]))
print(n)
PY

best() {	# best CMD...: the least wall-clock seconds of REPEAT runs
	local b= s e d
	for _ in $(seq "$REPEAT"); do
		s=$(date +%s.%N)
		"$@" >/dev/null
		e=$(date +%s.%N)
		d=$(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.3f", b - a }')
		if [ -z "$b" ] || awk -v a="$d" -v b="$b" 'BEGIN { exit !(a < b) }'; then b=$d; fi
	done
	echo "$b"
}
t_job=$(best $PY "$TOP/jobs/tokenize_corpus.py" --config tok.json --events tok.ev)
t_plain=$(best $PY plain.py "$T")
plain_tok=$($PY plain.py "$T")
$PY - "$N" "$t_job" "$t_plain" "$plain_tok" "$THREADS" "$REPEAT" <<'PY'
import json, sys
n, tj, tp, ptok = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
s = json.load(open("out/stats.json"))
tok = s["tokens"]
print("corpus: %d examples, %d tokens (%.0f per example; longest %d, prompts %d..%d)"
      % (n, tok, tok / n, s["longest"]["tokens"], s["prompt"]["min"], s["prompt"]["max"]))
print("jobs/tokenize_corpus.py, threads %s (checks, token file):  %6.2f s  %5.0f examples/s  %8.0f tokens/s"
      % (sys.argv[5], tj, n / tj, tok / tj))
print("plain loop, one thread (render + encode):        %6.2f s  %5.0f examples/s  %8.0f tokens/s"
      % (tp, n / tp, ptok / tp))
# The plain loop counts a few tokens more per example: it encodes the
# template's "<bos>" as text (SentencePiece does not parse control pieces)
# and keeps the newline after <end_of_turn>.
print("(whole processes, best of %s runs; plain-loop tokens %d, %+d)" % (sys.argv[6], ptok, ptok - tok))
PY
[ -n "${BENCH_TMP:-}" ] || rm -rf "$T"
