#!/bin/bash
# tests/bench/bake-client.sh: the bake client's overhead and throughput
# against a real llama-server serving the tiny fixture GGUF.
#
#   1. overhead: the same requests (system prompt, setup turns, user turn,
#      schema, greedy, seeded, capped) through `pipelinectl stage bake`
#      and through curl in a shell loop; seconds per request for each.
#   2. throughput: bake with concurrency = N against llama-server -np N,
#      for N = 1, 2, 4: case-passes per second.
# Prints figures; asserts nothing. Environment: REPS (passes, default 10),
# LLAMA_THREADS (llama-server -t, default 1: with more threads than free
# cores its spinning workers slow everything down).
set -eu
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
TEST_TMP=${TEST_TMP:-$(mktemp -d /tmp/bench-bake.XXXXXX)}
export TOP TEST_TMP
. "$TOP/tests/lib/bake.sh"
trap stop_llama EXIT
REPS=${REPS:-10}
export LLAMA_THREADS=${LLAMA_THREADS:-1}
cd "$TEST_TMP"
tiny_gguf "$TEST_TMP/tiny.gguf"
args=(backend=openai model=tiny "cases=$BAKE_DATA/cases.jsonl"
    "system=$BAKE_DATA/system.txt" "capabilities=$BAKE_DATA/capabilities.txt"
    stats=none max_tokens=64)
now() { date +%s.%N; }

start_llama "$TEST_TMP/tiny.gguf" 1024 1
# The request bodies the bake sends.
/usr/bin/python3 "$TOP/tests/bench/bake_requests.py" "$BAKE_DATA" "$TEST_TMP/req" openai tiny
n=$(ls req | wc -l)
stage bake "${args[@]}" "url=$LLAMA_URL" num_ctx=1024 passes=1 >/dev/null 2>&1	# warm
t0=$(now)
for _ in $(seq 1 "$REPS"); do for f in req/*.json; do
	curl -sf -H 'Content-Type: application/json' -d @"$f" "$LLAMA_URL/v1/chat/completions" >>curl.out || true
	echo >>curl.out
done; done
t1=$(now)
stage bake "${args[@]}" "url=$LLAMA_URL" num_ctx=1024 passes="$REPS" >bake.out 2>&1 || true
t2=$(now)
awk -v a="$t0" -v b="$t1" -v c="$t2" -v n="$n" -v r="$REPS" 'BEGIN {
	printf "overhead: %d requests; curl loop %.2f ms/request; pipelinectl stage bake %.2f ms/request (whole stage, incl. start-up and storing); difference %+.2f ms\n",
	    n * r, (b - a) * 1000 / (n * r), (c - b) * 1000 / (n * r), ((c - b) - (b - a)) * 1000 / (n * r) }'
# The server's own time per request (timings.prompt_ms + predicted_ms),
# against the bake's per-request wall time measured around the HTTP call.
srv=$(/usr/bin/python3 -c '
import json, sys
t = [json.loads(l)["timings"] for l in open(sys.argv[1]) if l.strip()]
print("%.2f" % (sum(x["prompt_ms"] + x["predicted_ms"] for x in t) / len(t)))' curl.out)
spc=$(values bake.out | /usr/bin/python3 -c '
import json, sys
print(json.loads(json.load(sys.stdin)["bake.summary"])["s_per_case"])')
awk -v s="$srv" -v b="$spc" 'BEGIN { printf "  server compute %.2f ms/request; bake client wall %.2f ms/request: client + HTTP overhead %.2f ms\n", s, b * 1000, b * 1000 - s }'
stop_llama

for np in 1 2 4; do
	start_llama "$TEST_TMP/tiny.gguf" $((1024 * np)) "$np"
	stage bake "${args[@]}" "url=$LLAMA_URL" num_ctx=1024 passes=1 >/dev/null 2>&1	# warm
	t0=$(now)
	stage bake "${args[@]}" "url=$LLAMA_URL" num_ctx=1024 passes="$REPS" \
	    concurrency="$np" >tp.$np.out 2>&1 || true
	t1=$(now)
	awk -v a="$t0" -v b="$t1" -v n="$n" -v r="$REPS" -v np="$np" 'BEGIN {
		printf "throughput: concurrency %d vs llama-server -np %d: %.1f case-passes/s (%d in %.2f s)\n",
		    np, np, n * r / (b - a), n * r, b - a }'
	stop_llama
done
