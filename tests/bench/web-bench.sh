#!/bin/bash
# web-bench.sh: what open status pages cost the daemon. A 1,000-job
# fan-out of `true` (max_jobs = 2) runs R times with P pages' event streams
# open on it and R times with none, alternated; then the P streams stay
# open on an idle daemon for SOAK seconds while its RSS is sampled.
# A page's cost to the daemon is its event stream (a feed watcher and an
# HTTP thread) and its few JSON requests; the pages here are curl clients
# holding /api/events?run=RUN open as the page's EventSource does, so the
# figures are the daemon's and not a browser's CPU on the same two cores.
# Prints the median wall times and their ratio (target: within 3%), and
# the RSS at the start and end of the soak (target: flat).
#   N=1000 R=3 P=20 SOAK=600 tests/bench/web-bench.sh
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
N=${N:-1000}; R=${R:-3}; P=${P:-20}; SOAK=${SOAK:-600}
export TEST_TMP=$(mktemp -d /tmp/webbench.XXXXXX)
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/dag_bench.sh"
CLIENTS=()
stop_clients() { for c in "${CLIENTS[@]}"; do kill "$c" 2>/dev/null || true; done; CLIENTS=(); }
trap 'stop_clients; pl_kill9 2>/dev/null || true; rm -rf "$TEST_TMP"' EXIT
PORT=$(free_port)
TOKEN=web-bench-token-0123456
pl_conf "max_jobs = 2" "log_level = warn" "http_listen = 127.0.0.1:$PORT" "http_token = $TOKEN"
pl_start
spec() { dag_spec fanout "$1" "true" "$N" >"$TEST_TMP/$1.ini"; }
pages() {	# pages RUN: P event streams on RUN
	for _ in $(seq "$P"); do
		curl -sN -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/api/events?run=$1" >/dev/null 2>&1 &
		CLIENTS+=($!)
	done
	sleep 1
}
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$PL_PID/status"; }
for i in $(seq 1 "$R"); do
	for side in none pages; do
		name=$side-$i
		spec "$name"
		[ $side = pages ] && pages "$name"
		t0=$(now)
		pctl submit "$TEST_TMP/$name.ini" >/dev/null
		wait_run "$name" succeeded 600
		t1=$(now)
		stop_clients
		awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f\n", b-a}' >>"$TEST_TMP/$side"
		printf '  run %d %-6s %s s\n' "$i" "$side" "$(tail -1 "$TEST_TMP/$side")"
	done
done
a=$(median <"$TEST_TMP/none"); b=$(median <"$TEST_TMP/pages")
echo "web-bench: $N jobs of true (fan-out, max_jobs 2), medians of $R runs"
echo "  no pages     $a s"
echo "  $P pages     $b s   ratio $(awk -v x="$b" -v y="$a" 'BEGIN{printf "%.4f", x/y}')"
pages "none-1"
r0=$(rss); echo "  soak: $P pages open on an idle daemon for $SOAK s; RSS $r0 kB at the start"
for t in $(seq 60 60 "$SOAK"); do sleep 60; echo "    after $t s: RSS $(rss) kB"; done
echo "  RSS at the end $(rss) kB (start $r0 kB)"
