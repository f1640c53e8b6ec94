#!/bin/bash
# metrics-bench.sh: what Prometheus scraping costs a run. A 1,000-job
# fan-out of `sleep 0.1` (max_jobs = 2, about a minute) runs R times with
# GET /metrics every 100 ms and R times without, alternated, on one daemon;
# prints each side's median wall time, their ratio (target: within 2%),
# and the scrapes' p50, p99 and max latency. The store grows by 1,000 jobs
# a run, so later scrapes read more: the figures are for a store of up to
# 2R runs.
#   N=1000 R=3 tests/bench/metrics-bench.sh
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
N=${N:-1000}
R=${R:-3}
export TEST_TMP=$(mktemp -d /tmp/metricsbench.XXXXXX)
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/dag_bench.sh"
SCRAPER=
trap '[ -n "$SCRAPER" ] && kill $SCRAPER 2>/dev/null; pl_kill9 2>/dev/null || true; rm -rf "$TEST_TMP"' EXIT
PORT=$(free_port)
export PL_TOKEN=metrics-bench-token-0123
pl_conf "max_jobs = 2" "log_level = warn" "metrics_listen = 127.0.0.1:$PORT" "http_token = $PL_TOKEN"
pl_start
spec() { dag_spec fanout "$1" "sleep 0.1" "$N" >"$TEST_TMP/$1.ini"; }
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
: >"$TEST_TMP/lat"
for i in $(seq 1 "$R"); do
	for side in plain scraped; do
		name=$side-$i
		spec "$name"
		if [ $side = scraped ]; then
			/usr/bin/python3 "$TOP/tests/bench/scrape.py" "http://127.0.0.1:$PORT/metrics" 0.1 \
			    "$TEST_TMP/lat-$i" &
			SCRAPER=$!
		fi
		t0=$(now)
		pctl submit "$TEST_TMP/$name.ini" >/dev/null
		wait_run "$name" succeeded 600
		t1=$(now)
		if [ $side = scraped ]; then
			kill -TERM "$SCRAPER"; wait "$SCRAPER" || true; SCRAPER=
			cat "$TEST_TMP/lat-$i" >>"$TEST_TMP/lat"
		fi
		awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f\n", b-a}' >>"$TEST_TMP/$side"
		printf '  run %d %-8s %s s\n' "$i" "$side" "$(tail -1 "$TEST_TMP/$side")"
	done
done
p=$(median <"$TEST_TMP/plain"); s=$(median <"$TEST_TMP/scraped")
errs=$(grep -c error "$TEST_TMP/lat" || true)
n=$(grep -vc error "$TEST_TMP/lat" || true)
read -r p50 p99 max < <(grep -v error "$TEST_TMP/lat" | sort -g | awk '{a[NR] = $1}
    END {i = int(NR * 0.99 + 0.5); if (i < 1) i = 1; printf "%.1f %.1f %.1f\n", a[int((NR + 1) / 2)] * 1000, a[i] * 1000, a[NR] * 1000}')
echo "metrics-bench: $N jobs of sleep 0.1, max_jobs 2, medians of $R runs each"
echo "  without scraping  $p s"
echo "  scraped /100 ms   $s s   ratio $(awk -v a="$s" -v b="$p" 'BEGIN{printf "%.4f", a/b}')"
echo "  scrapes: $n ($errs failed), latency p50 $p50 ms, p99 $p99 ms, max $max ms"
