#!/bin/bash
# tests/bench/corpus-check-bench.sh: the corpus_check stage on a generated
# corpus of the reference's shape: N examples (default 100,000) whose
# prompts are mostly one shared system prompt of FILLER words of capability
# documentation (2,150 words: about 6k tokens with the fixture tokenizer,
# the reference's ~5.6k), 2% of them another one (a channel variant), a
# short distinct user request, and a JSON call of about 26 tokens. Prints
# corpus_check's wall time and peak RSS on the whole corpus, then its time
# as a share of tokenize's on the first SLICE examples of the same corpus
# (both by hand through pipelinectl stage, interleaved, best of REPEAT:
# tokenize on the whole corpus would take hours on 2 cores). Asserts
# nothing but that the stage succeeds.
#
# Measured on the quiet 2-core machine (load 0.04 at the start): 100,000
# examples (1,171 MiB): 8.53 s wall, peak RSS 100 MiB (137 MiB/s); on a
# 300-example slice (1.75M tokens) corpus_check took 0.05 s against
# tokenize's 1.09 s, 4.59%. (At a load of 9 to 12, with other work on the
# machine: 64.7 s, 100 MiB, 6.8%.) Every
# check was on: the templated requests make nearly every example a near
# duplicate of others, the search's worst case (bounded by its 32
# candidates per band).
#
#   tests/bench/corpus-check-bench.sh [N] [SLICE]
#
# Environment: BENCH_TMP (default: a fresh directory under /tmp, removed
# after), FILLER (2150), REPEAT (2).
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
N=${1:-100000}
SLICE=${2:-300}
FILLER=${FILLER:-2150}
REPEAT=${REPEAT:-2}
T=${BENCH_TMP:-$(mktemp -d /tmp/ccbench.XXXXXX)}
[ -n "${BENCH_TMP:-}" ] || trap 'rm -rf "$T"' EXIT
CTL=$TOP/daemon/pipelinectl
cd "$T"
$PY - "$N" "$FILLER" <<'PY'
import json, random, sys
n, filler = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(7)
words = ("capability returns status value when the user asks for a device in a room the router "
         "selects exactly one call with arguments taken from the request and never invents a room").split()
doc = " ".join(rng.choice(words) for _ in range(filler))
sysa = json.dumps({"role": "system", "content": "You route requests to one capability call. " + doc})
sysb = json.dumps({"role": "system", "content": "You route requests on the kitchen channel. " + doc})
rooms = ["kitchen", "bedroom", "office", "garage", "hall", "bath", "attic", "porch", "cellar", "studio"]
caps = [("lights", "turn on the lights"), ("lights_off", "switch off the lights"), ("climate", "set the heating"),
        ("media", "play some music"), ("covers", "open the blinds"), ("timer", "start a timer")]
with open("corpus.jsonl", "w") as f:
    for i in range(n):
        cap, verb = caps[i % len(caps)]
        room = rooms[(i // 6) % len(rooms)]
        level = (i // 60) % 1000
        user = json.dumps({"role": "user", "content": "%s in the %s at level %d please" % (verb, room, level)})
        call = json.dumps({"capability": cap, "args": {"room": room, "level": level}}, separators=(",", ":"))
        tgt = json.dumps({"role": "assistant", "content": call})
        f.write('{"key": "ex%06d", "messages": [%s, %s, %s]}\n' % (i, sysb if i % 50 == 7 else sysa, user, tgt))
PY
size=$(stat -c %s corpus.jsonl)
head -n "$SLICE" corpus.jsonl >slice.jsonl
$PY "$TOP/tests/fixtures/gen_gemma3.py" base >/dev/null
echo "# corpus: $N examples, $((size / 1048576)) MiB; load $(cut -d' ' -f1-3 /proc/loadavg)"

# The whole corpus: wall time and peak RSS of pipelinectl stage corpus_check.
/usr/bin/time -f "%e %M" -o full.time "$CTL" stage corpus_check -w "$T/full" corpus="$T/corpus.jsonl" \
    >full.out 2>&1 || { tail -20 full.out; exit 1; }
read -r wall rss <full.time
grep -q 'stage corpus_check: succeeded' full.out || { tail -20 full.out; exit 1; }
echo "corpus_check, $N examples: ${wall} s wall, peak RSS $((rss / 1024)) MiB ($(awk -v s="$size" -v w="$wall" 'BEGIN{printf "%.0f", s / 1048576 / w}') MiB/s)"

# The share of tokenize's time, on the slice, interleaved.
best_cc=999999 best_tok=999999
for r in $(seq 1 "$REPEAT"); do
	/usr/bin/time -f "%e" -o cc.time "$CTL" stage corpus_check -w "$T/cc$r" corpus="$T/slice.jsonl" >cc.out 2>&1 ||
	    { tail cc.out; exit 1; }
	/usr/bin/time -f "%e" -o tok.time "$CTL" stage tokenize -w "$T/tok$r" base="$T/base" corpus="$T/slice.jsonl" \
	    max_seq_length=32768 num_ctx=65536 >tok.out 2>&1 || { tail tok.out; exit 1; }
	best_cc=$(awk -v a="$best_cc" -v b="$(cat cc.time)" 'BEGIN{print (b < a) ? b : a}')
	best_tok=$(awk -v a="$best_tok" -v b="$(cat tok.time)" 'BEGIN{print (b < a) ? b : a}')
done
tokens=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokens"])' "$T/tok1/stats.json")
echo "slice of $SLICE examples ($tokens tokens): corpus_check ${best_cc} s, tokenize ${best_tok} s:" \
    "corpus_check takes $(awk -v a="$best_cc" -v b="$best_tok" 'BEGIN{printf "%.2f%%", 100 * a / b}') of tokenize's time"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
