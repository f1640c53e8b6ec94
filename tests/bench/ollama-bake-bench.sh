#!/bin/bash
# tests/bench/ollama-bake-bench.sh: the bake stage's client overhead against
# the REAL Ollama (tests/tools/ollama.sh; tests/lib.sh: ollama_start)
# serving the tiny fixture GGUF under etc/Modelfile.tmpl, the peer being a
# plain curl loop that sends the same /api/chat requests (messages, format
# schema, num_ctx, temperature 0, seed 3407, num_predict 64, truncate:false,
# keep_alive) in the same order: pass after pass (one curl process per
# pass, its requests chained with --next on one kept-alive connection),
# case after case; at concurrency 1 (OLLAMA_NUM_PARALLEL=1) and at
# concurrency N against OLLAMA_NUM_PARALLEL=N (N = BENCH_PARALLEL, default
# 2; curl --parallel --parallel-immediate --parallel-max N, bake
# concurrency = N).
#
# The model runs on this machine's CPU, so the server's time per request
# moves with whatever else runs: the difference of two wall times is mostly
# that noise. So the server's own time is read for every request, the
# client's overhead is what the client adds to it, and the two sides run
# interleaved (ROUNDS rounds, the order swapped every round: curl bake,
# bake curl, ...), medians and ranges over the rounds:
#
#   server time  the latency of each /api/chat request as Ollama's HTTP
#                server logged it ([GIN] lines of its log: the handler's
#                whole time, request parsing included), for both sides; for
#                the curl side also the sum of total_duration of the
#                replies, which the GIN figure must match. At N > 1 the
#                server time is that sum / N (N requests in flight).
#   wall         the side's whole run: for bake the whole `pipelinectl
#                stage bake` process (start-up, the context check, the G22
#                placement requests, scoring, storing), for curl its
#                processes.
#   overhead     wall - server time; per request, in ms; and as a share of
#                the server time. The figure the target (< 2%) is about is
#                the bake's overhead beyond the curl loop's (the same
#                requests have to be sent by any client), taken per round
#                from the adjacent pair of runs.
#   in-request   (N = 1) the time the client measured around each request
#                (bake: its s_per_case; curl: -w time_total) less the
#                server's: connection, transfer, JSON parse.
#
# Also: the CPU each side's client used (the shell's children's times), the
# server's CPU, and what the rest of the machine used meanwhile (others'
# load), each round. Both sides run at the caller's nice level (run the
# whole bench under nice: server and clients alike). Prints figures;
# asserts nothing. Environment: ROUNDS (default 7), PASSES (passes per side
# per round, default 5), BENCH_PARALLEL (default 2).
#
# Measured on Ollama 0.24.0 with nothing else running (load 3, the bench's
# own): at concurrency 1, 64.5 ms of server time a request, bake's
# overhead 1.33 ms a request (2.03% of the server's time), curl's 2.01 ms
# (3.14%): bake beyond curl -0.66 ms, -1.01% [-1.88, +0.34]; at
# OLLAMA_NUM_PARALLEL=2, bake 1.71 ms (3.06%), curl 3.21 ms (4.94%): bake
# beyond curl -1.82% [-3.39, -0.76]. Target (beyond curl, under 2%) met at
# both.
#
# Both profiles in one run (ROUNDS=5, nice 10, load average 20 to 23 on
# the 2 cores: other sessions' builds and tests), bake beyond curl, median
# [range] over the rounds, as a share of the server's time:
#   0.34.2 (llama-server runner; 35 ms of server time a request at
#     concurrency 1, 72 ms at 2): -7.76% [-19.47, -2.60] at concurrency 1,
#     -5.50% [-30.04, +7.27] at 2 (bake 8.76 ms/request of overhead,
#     curl 12.04 ms);
#   0.24.0 (cgo runner; 373 ms a request at concurrency 1, 674 ms at 2):
#     -1.70% [-2.40, -1.52] at concurrency 1, -1.76% [-2.97, -0.26] at 2.
# Target (beyond curl, under 2%) met on both; the faster 0.34.2 runner
# makes every client's overhead a larger share (bake 22% of its server
# time, curl 36%, both mostly the process start and this load), so its
# ranges are wide. 500 of 500 answers matched round 1's on 0.34.2 at both
# concurrencies, 426 of 500 on 0.24.0 at OLLAMA_NUM_PARALLEL=2.
set -eu
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
TEST_TMP=${TEST_TMP:-$(mktemp -d /tmp/bench-ollama.XXXXXX)}
export TOP TEST_TMP
. "$TOP/tests/lib.sh"
. "$TOP/tests/integration/data/bake/lib.sh"
trap ollama_stop EXIT	# no daemon here: lib.sh's trap would fail on its kill under set -e
ROUNDS=${ROUNDS:-7}
PASSES=${PASSES:-5}
NP=${BENCH_PARALLEL:-2}
cd "$TEST_TMP"
top_tmp=$TEST_TMP
tiny_gguf "$TEST_TMP/tiny.gguf"
now() { date +%s.%N; }
args=(backend=ollama model=router:bench "cases=$BAKE_DATA/cases.jsonl"
    "system=$BAKE_DATA/system.txt" "capabilities=$BAKE_DATA/capabilities.txt"
    stats=none max_tokens=64 num_ctx=1024 keep_alive=-1)

# The request bodies the bake sends.
/usr/bin/python3 "$TOP/tests/bench/bake_requests.py" "$BAKE_DATA" "$TEST_TMP/req" ollama router:bench
n=$(ls req | wc -l)

# srv_ticks: the CPU ticks of the Ollama session (serve and its runners).
srv_ticks() {
	/usr/bin/python3 -c '
import os, sys
t = 0
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        f = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    if f[3] == sys.argv[1]:
        t += int(f[11]) + int(f[12])
print(t)' "$OLLAMA_PID"
}
# snap VAR: VAR = "WALL CLIENT_TICKS MACHINE_BUSY_TICKS", read without a
# fork (so that nothing but the side's clients counts as this shell's
# children): the waited-for children of this shell, the whole machine.
snap() {
	local f u n s idle iow irq sirq steal rest
	read -r -a f </proc/$$/stat
	read -r _ u n s idle iow irq sirq steal rest </proc/stat
	printf -v "$1" "%s %d %d" "$EPOCHREALTIME" $((f[15] + f[16])) \
	    $((u + n + s + irq + sirq + steal))
}

# side_curl NP DIR: PASSES passes of the requests, one curl per pass.
side_curl() {
	local np=$1 dir=$2 p f cargs
	for ((p = 1; p <= PASSES; p++)); do
		cargs=()
		for f in req/*.json; do
			[ ${#cargs[@]} -gt 0 ] && cargs+=(--next)
			cargs+=(-s -H "Content-Type: application/json" -d @"$f"
			    -o "$dir/$p-${f##*/}" -w '%{time_total}\n' "$OURL/api/chat")
		done
		if [ "$np" -gt 1 ]; then
			curl -s --parallel --parallel-immediate --parallel-max "$np" "${cargs[@]}" >>"$dir/times" 2>/dev/null
		else
			curl "${cargs[@]}" >>"$dir/times"
		fi
	done
}

side_bake() {
	stage bake "${args[@]}" "url=$OURL" passes="$PASSES" concurrency="$1" >"$2.out" 2>&1 || true
}

# side WHICH NP ROUND: one side's run; its figures go to rounds.NP.
side() {
	local which=$1 np=$2 r=$3 off0 off1 s0 s1 v0 v1
	off0=$(stat -c %s ollama/serve.log)
	mkdir -p "$which.$np.$r"
	v0=$(srv_ticks)
	snap s0
	"side_$which" "$np" "$which.$np.$r"
	snap s1
	v1=$(srv_ticks)
	sleep 0.3	# the log line of the last request
	off1=$(stat -c %s ollama/serve.log)
	tail -c +"$((off0 + 1))" ollama/serve.log | head -c "$((off1 - off0))" >"$which.$np.$r.log"
	echo "$which $r $s0 $v0 $s1 $v1 $(cut -d' ' -f1 /proc/loadavg)" >>"rounds.$np"
}

# bench NP: one server at OLLAMA_NUM_PARALLEL=NP, both clients at NP.
bench() {
	local np=$1 r
	ollama_start OLLAMA_NUM_PARALLEL="$np"
	ollama_modelfile "$TOP/etc/Modelfile.tmpl" Modelfile.tmpl
	stage register gguf="$top_tmp/tiny.gguf" tag=router:bench modelfile="$TEST_TMP/Modelfile.tmpl" \
	    "url=$OURL" num_ctx=1024 tokens=none >reg.$np.out 2>&1 || { cat reg.$np.out; fail "register"; }
	# Warm: the model loaded, both clients' code paged in.
	PASSES=1 side_bake "$np" warm.$np
	mkdir -p warm.$np
	PASSES=1 side_curl "$np" warm.$np
	: >"rounds.$np"
	for r in $(seq 1 "$ROUNDS"); do
		if [ $((r % 2)) = 1 ]; then
			side curl "$np" "$r"
			side bake "$np" "$r"
		else
			side bake "$np" "$r"
			side curl "$np" "$r"
		fi
	done
	/usr/bin/python3 "$TOP/tests/bench/ollama_bake_figures.py" "$np" "$n" "$PASSES" "$(getconf CLK_TCK)" "$(nproc)"
	ollama_stop
}
# Every server profile in the same run (BENCH_OLLAMA_VERSIONS, default all
# that tests/tools/ollama.sh builds: 0.34.2 then 0.24.0), each in a
# directory of its own (its server's models and log, its rounds).
for v in ${BENCH_OLLAMA_VERSIONS:-$("$TOP/tests/tools/ollama.sh" --versions)}; do
	export OLLAMA_VERSION=$v TEST_TMP=$top_tmp/$v
	mkdir -p "$TEST_TMP"
	cd "$TEST_TMP"
	ln -sfn "$top_tmp/req" req
	echo "== bake through real Ollama $("$TOP/tests/tools/ollama.sh" --version) vs a curl loop: $ROUNDS rounds (order swapped each round) of $PASSES passes of $n cases per side; load average $(cut -d' ' -f1-3 /proc/loadavg), nice $(nice)"
	bench 1
	bench "$NP"
done
