#!/bin/bash
# tests/bench/ollama-bake-bench.sh: the bake stage's client overhead against
# the REAL Ollama (tests/tools/ollama.sh; tests/lib.sh: ollama_start)
# serving the tiny fixture GGUF under etc/Modelfile.tmpl, the peer being a
# plain curl loop that sends the same /api/chat requests (messages, format
# schema, num_ctx, temperature 0, seed, num_predict, truncate:false) in the
# same order: pass after pass (one curl process per pass, its requests
# chained with --next on one kept-alive connection), case after case.
#
#   at concurrency 1 (OLLAMA_NUM_PARALLEL=1), and at concurrency N against
#   OLLAMA_NUM_PARALLEL=N (N = BENCH_PARALLEL, default 2; curl --parallel
#   --parallel-max N, bake concurrency = N).
#
# Figures: wall seconds of each side, the server's own time (the sum of
# total_duration Ollama reports for the curl requests), and the client's
# overhead, (bake wall - curl wall) / server time, target under 2%. The
# bake side is the whole `pipelinectl stage bake` run: start-up, the
# context check, the model load and /api/ps of its G22 placement check,
# scoring and storing included. Prints figures; asserts nothing.
# Environment: REPS (passes, default 5), BENCH_PARALLEL (default 2).
set -eu
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
TEST_TMP=${TEST_TMP:-$(mktemp -d /tmp/bench-ollama.XXXXXX)}
export TOP TEST_TMP
. "$TOP/tests/lib.sh"
. "$TOP/tests/integration/data/bake/lib.sh"
REPS=${REPS:-5}
NP=${BENCH_PARALLEL:-2}
cd "$TEST_TMP"
tiny_gguf "$TEST_TMP/tiny.gguf"
now() { date +%s.%N; }
args=(backend=ollama model=router:bench "cases=$BAKE_DATA/cases.jsonl"
    "system=$BAKE_DATA/system.txt" "capabilities=$BAKE_DATA/capabilities.txt"
    stats=none max_tokens=64 num_ctx=1024 keep_alive=-1)

# The request bodies the bake sends.
/usr/bin/python3 "$TOP/tests/bench/bake_requests.py" "$BAKE_DATA" "$TEST_TMP/req" ollama router:bench
n=$(ls req | wc -l)

# bench NP: one server at OLLAMA_NUM_PARALLEL=NP, both clients at NP.
bench() {
	local np=$1 t0 t1 t2
	ollama_start OLLAMA_NUM_PARALLEL="$np"
	ollama_modelfile "$TOP/etc/Modelfile.tmpl" Modelfile.tmpl
	stage register gguf="$TEST_TMP/tiny.gguf" tag=router:bench modelfile="$TEST_TMP/Modelfile.tmpl" \
	    "url=$OURL" num_ctx=1024 tokens=none >reg.$np.out 2>&1 || { cat reg.$np.out; fail "register"; }
	stage bake "${args[@]}" "url=$OURL" passes=1 concurrency="$np" >/dev/null 2>&1 || true	# warm: load
	# Two rounds, the sides alternated; the faster of each side counts
	# (this machine is shared: the slower round is someone else's load).
	local curl_s="" bake_s=""
	for round in 1 2; do
		rm -rf "ans.$np" && mkdir "ans.$np"
		t0=$(now)
		for p in $(seq 1 "$REPS"); do
			cargs=()
			for f in req/*.json; do
				[ ${#cargs[@]} -gt 0 ] && cargs+=(--next)
				cargs+=(-s -H "Content-Type: application/json" -d @"$f"
				    -o "ans.$np/$p-$(basename "$f")" "$OURL/api/chat")
			done
			if [ "$np" -gt 1 ]; then
				curl -s --no-progress-meter --parallel --parallel-max "$np" "${cargs[@]}" 2>/dev/null
			else
				curl "${cargs[@]}"
			fi
		done
		t1=$(now)
		stage bake "${args[@]}" "url=$OURL" passes="$REPS" concurrency="$np" >bake.$np.out 2>&1 || true
		t2=$(now)
		curl_s="$curl_s $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
		bake_s="$bake_s $(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')"
	done
	srv=$(/usr/bin/python3 -c '
import glob, json, sys
d = [json.load(open(f))["total_duration"] for f in glob.glob(sys.argv[1] + "/*.json")]
print("%.4f %d" % (sum(d) / 1e9, len(d)))' "ans.$np")
	awk -v cs="$curl_s" -v bs="$bake_s" -v n="$n" -v r="$REPS" -v np="$np" -v srv="$srv" 'BEGIN {
		split(srv, s, " "); split(cs, c, " "); split(bs, k, " ")
		curl = c[1] < c[2] ? c[1] : c[2]; bake = k[1] < k[2] ? k[1] : k[2]
		printf "OLLAMA_NUM_PARALLEL=%d, concurrency %d: %d requests (%d answered to curl)\n", np, np, n * r, s[2]
		printf "  curl loop %.2f s (rounds %.2f, %.2f; %.1f ms/request); pipelinectl stage bake %.2f s (rounds %.2f, %.2f; %.1f ms/request)\n",
		    curl, c[1], c[2], curl * 1000 / (n * r), bake, k[1], k[2], bake * 1000 / (n * r)
		printf "  server time (sum of total_duration) %.2f s; bake - curl %+.3f s: client overhead %.2f%% of the server time, %.2f%% of the curl wall (target < 2%%)\n",
		    s[1], bake - curl, 100 * (bake - curl) / s[1], 100 * (bake - curl) / curl
	}'
	values bake.$np.out | /usr/bin/python3 -c '
import json, sys
s = json.loads(json.load(sys.stdin)["bake.summary"])
print("  bake: complete %s, %d errors, %.1f ms/case-pass as the bake timed it" % (s["complete"], s["errors"], 1000 * s["s_per_case"]))'
	ollama_stop
}
echo "== bake through real Ollama $("$TOP/tests/tools/ollama.sh" --version) vs a curl loop, $REPS passes of $n cases"
bench 1
bench "$NP"
