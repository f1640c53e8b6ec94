#!/bin/bash
# tests/bench/tokenize-bench.sh: tokenize throughput (examples/s, tokens/s)
# of jobs/tokenize.py on a generated corpus of 1,200 routing examples with
# ~6k-token prompts (the reference task's shape), against a plain loop over
# the same tokenizer: render each example's prompt and response with the
# same chat template and call SentencePiece's encode() on each string, one
# at a time, in one thread.  Prints figures; asserts nothing.
#
#   tests/bench/tokenize-bench.sh [EXAMPLES] [FILLER-WORDS]
#
# Environment: BENCH_TMP (default: a fresh directory under /tmp),
# THREADS (tokenize.py's threads key, default 2).
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
N=${1:-1200}
FILLER=${2:-2150}
THREADS=${THREADS:-2}
T=${BENCH_TMP:-$(mktemp -d /tmp/tokbench.XXXXXX)}
cd "$T"
$PY "$TOP/tests/fixtures/gen_gemma3.py" base >/dev/null
$PY "$TOP/jobs/tests/gen_corpus.py" corpus.jsonl --n "$N" --filler "$FILLER"
printf '{"base":"%s/base","corpus":"%s/corpus.jsonl","output_dir":"%s/out","threads":%d}\n' \
    "$T" "$T" "$T" "$THREADS" >tok.json

start=$(date +%s.%N)
$PY "$TOP/jobs/tokenize.py" --config tok.json --events tok.ev
end=$(date +%s.%N)
tokens=$($PY -c 'import json; print(json.load(open("out/stats.json"))["tokens"])')
longest=$($PY -c 'import json; s = json.load(open("out/stats.json")); print(s["longest"]["tokens"], s["prompt"]["min"], s["prompt"]["max"])')

# The plain loop, in a copy of jobs/ off sys.path's head (tokenize.py's name).
$PY - "$TOP/jobs" "$T" <<'PY' >plain.out
import json, sys, time
sys.path.append(sys.argv[1])
import sentencepiece as spm
from jinja2.sandbox import ImmutableSandboxedEnvironment
t = sys.argv[2]
tc = json.load(open(t + "/base/tokenizer_config.json"))
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
tmpl = env.from_string(tc["chat_template"])
sp = spm.SentencePieceProcessor(model_file=t + "/base/tokenizer.model")
rows = [json.loads(l) for l in open(t + "/corpus.jsonl")]
t0 = time.time()
n = 0
for r in rows:
    m = r["messages"]
    p = tmpl.render(messages=m[:-1], add_generation_prompt=True, bos_token="<bos>")
    f = tmpl.render(messages=m, add_generation_prompt=False, bos_token="<bos>")
    n += len(sp.encode(p)) + len(sp.encode(f[len(p):]))
print(time.time() - t0, n)
PY
read plain_s plain_tok <plain.out
$PY - "$start" "$end" "$N" "$tokens" "$plain_s" "$plain_tok" "$longest" "$THREADS" <<'PY'
import sys
s, e, n, tok, ps, ptok = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
print("corpus: %d examples, %d tokens (%.0f per example; longest, shortest and longest prompt: %s)"
      % (n, tok, tok / n, sys.argv[7]))
print("jobs/tokenize.py (threads %s, whole process: start-up, checks, token file): %.2f s, %.0f examples/s, %.0f tokens/s"
      % (sys.argv[8], e - s, n / (e - s), tok / (e - s)))
print("plain loop (render + encode per string, one thread):             %.2f s, %.0f examples/s, %.0f tokens/s"
      % (ps, n / ps, ptok / ps))
PY
[ -n "${BENCH_TMP:-}" ] || rm -rf "$T"
