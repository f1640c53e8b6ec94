#!/bin/bash
# http/metrics.sh: GET /metrics (metrics_listen) scraped by the real
# Prometheus server from Debian, during a run and after it, through a real
# daemon:
#  - promtool (Prometheus' own checker) accepts the exposition;
#  - during the run, Prometheus' HTTP API returns the running jobs by stage
#    and state, the running train job's step, loss, learning rate, peak
#    memory and steps per second (the real jobs/train.py, tiny engine,
#    stalled at a step so that it is running while scraped), and a feed
#    watcher; after it, the runs by state, the job and attempt duration
#    histograms, a retry, the events published, store size, uptime, RSS;
#  - the figures equal the store's;
#  - a bad metrics_listen is refused by -n with file:line, a POST with 405,
#    an unknown path with 404; without the key nothing listens.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
set +e +o pipefail
PROM_PID=
stop_all() {
	[ -n "$PROM_PID" ] && kill "$PROM_PID" 2>/dev/null && wait "$PROM_PID" 2>/dev/null
	pctl cancel m1 >/dev/null 2>&1
	pl_kill9 2>/dev/null
}
trap stop_all EXIT
command -v prometheus >/dev/null && command -v promtool >/dev/null ||
	fail "prometheus and promtool are not installed (etc/deps.sh installs package prometheus)"

# -n refuses a bad address, naming the line.
printf '[daemon]\nstate_dir = %s/x\nmetrics_listen = localhost:99999\n' "$TEST_TMP" >"$TEST_TMP/bad.conf"
out=$("$PIPELINED" -n -f "$TEST_TMP/bad.conf" 2>&1) && fail "-n accepted metrics_listen = localhost:99999"
echo "$out" | grep -q "bad.conf:3: metrics_listen: .*the port must be 1 to 65535" ||
	fail "-n's message: $out"
printf '[daemon]\nstate_dir = %s/x\nmetrics_listen = example.org:80\n' "$TEST_TMP" >"$TEST_TMP/bad.conf"
out=$("$PIPELINED" -n -f "$TEST_TMP/bad.conf" 2>&1) && fail "-n accepted a host name"
echo "$out" | grep -q "bad.conf:3: metrics_listen: .*not a numeric IPv4 or IPv6 address" ||
	fail "-n's message: $out"

MPORT=$(free_port)
MTOKEN=metrics-token-0123456789
pl_conf "metrics_listen = 127.0.0.1:$MPORT" "http_token = $MTOKEN"
pl_start
M=http://127.0.0.1:$MPORT/metrics
# /metrics shows every run: the bearer token, on loopback too.
[ "$(curl -s -o /dev/null -w '%{http_code}' "$M")" = 401 ] || fail "/metrics without the token: not 401"
curl() { command curl -H "Authorization: Bearer $MTOKEN" "$@"; }
curl -sf "$M" >"$TEST_TMP/m0.txt" || fail "GET /metrics failed"
promtool check metrics <"$TEST_TMP/m0.txt" || fail "promtool rejects the exposition"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$M")" = 405 ] || fail "POST was not 405"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/nope")" = 404 ] || fail "no 404"

# Prometheus scrapes every second into a private store; honor_labels keeps
# the series' own job label (the run's job) instead of exported_job.
PPORT=$(free_port)
cat >"$TEST_TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: pipelined
    honor_labels: true
    authorization:
      credentials: $MTOKEN
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
EOF
prometheus --config.file="$TEST_TMP/prometheus.yml" --storage.tsdb.path="$TEST_TMP/prom" \
    --web.listen-address="127.0.0.1:$PPORT" >"$TEST_TMP/prometheus.log" 2>&1 &
PROM_PID=$!
P=http://127.0.0.1:$PPORT
# query PROMQL: the instant vector's samples as "labels value" lines.
query() {
	curl -s --get "$P/api/v1/query" --data-urlencode "query=$1" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["status"] == "success", d
for r in d["data"]["result"]:
    m = r["metric"]
    print(",".join("%s=%s" % (k, m[k]) for k in sorted(m) if k not in ("instance", "job", "__name__")), r["value"][1])'
}
# until_q PROMQL SECONDS: wait until the query returns a sample.
until_q() {
	for _ in $(seq $(($2 * 5))); do
		[ -n "$(query "$1" 2>/dev/null)" ] && return 0
		sleep 0.2
	done
	fail "Prometheus returned nothing for $1 in $2 s (log: $(tail -3 "$TEST_TMP/prometheus.log"))"
}
until_q 'up{job="pipelined"} == 1' 30

# A run: an exec job that fails once and is retried, two short ones, and a
# tiny training job stalled at step 12 (running until cancelled).
setup_tokens 40
mkdir -p "$TEST_TMP/specs"
cat >"$TEST_TMP/specs/m1.ini" <<INI
[run]
name = m1
[flaky]
stage = exec
command = test -e $TEST_TMP/tried || { touch $TEST_TMP/tried; exit 3; }
retries = 1
retry_backoff = 0.1s
[short]
stage = exec
after = flaky
command = sleep 0.3
[train]
after = short
engine = tiny
base = $BASE
tokens = $TOKENS
lora_r = 4
max_steps = 40
save_steps = 100
gradient_accumulation_steps = 1
test_stall_at_step = 12
INI
pctl submit "$TEST_TMP/specs/m1.ini" >/dev/null || fail "submit m1"
pctl watch m1 --plain >/dev/null 2>&1 &
WATCH=$!
until_q 'pipelined_train_step{run="m1",job="train"} == 12' 120
until_q 'pipelined_feed_watchers >= 1' 20

r=$(query 'pipelined_jobs{stage="train",state="running"}')
[ "$r" = "stage=train,state=running 1" ] || fail "running train jobs: $r"
r=$(query 'pipelined_jobs{stage="exec",state="succeeded"}')
[ "$r" = "stage=exec,state=succeeded 2" ] || fail "succeeded exec jobs: $r"
r=$(query 'pipelined_open_runs')
[ "$r" = " 1" ] || fail "open runs: $r"
loss=$(query 'pipelined_train_loss{run="m1"}' | cut -d' ' -f2)
want=$(db "SELECT m.value FROM metrics m JOIN jobs j ON j.id = m.job_id WHERE j.name = 'train'
    AND m.name = 'loss' AND m.step = 12")
/usr/bin/python3 -c 'import sys; a, b = map(float, sys.argv[1:]); assert abs(a - b) <= 1e-12 * max(1, abs(b)), (a, b)' \
    "$loss" "$want" || fail "Prometheus' loss $loss, the store's $want"
for s in pipelined_train_learning_rate pipelined_train_peak_memory_bytes pipelined_train_steps_per_second; do
	v=$(query "$s{run=\"m1\",job=\"train\",stage=\"train\"}" | cut -d' ' -f2)
	/usr/bin/python3 -c 'import sys; assert float(sys.argv[1]) > 0' "$v" 2>/dev/null || fail "$s is '$v'"
done
r=$(query 'pipelined_job_retries_total{stage="exec"}')
[ "$r" = "stage=exec 1" ] || fail "exec retries: $r"

pctl cancel m1 >/dev/null || fail "cancel m1"
wait_run m1 cancelled 60
wait "$WATCH"
until_q 'pipelined_runs{state="cancelled"} == 1' 20
r=$(query 'pipelined_runs{state="running"}')
[ "$r" = "state=running 0" ] || fail "running runs after the cancel: $r"
n=$(query 'pipelined_attempt_duration_seconds_count{stage="exec"}' | cut -d' ' -f2)
[ "$n" = 3 ] || fail "exec attempts in the histogram: $n, want 3"
n=$(query 'pipelined_job_duration_seconds_bucket{stage="exec",le="+Inf"}' | cut -d' ' -f2)
[ "$n" = 2 ] || fail "exec jobs in the duration histogram: $n, want 2"
ev=$(query 'pipelined_events_total' | cut -d' ' -f2)
max=$(db "SELECT max(id) FROM events")
[ "$ev" -gt 0 ] && [ "$ev" -le "$max" ] || fail "events_total $ev, the store's newest id $max"
for s in pipelined_store_bytes pipelined_uptime_seconds pipelined_resident_memory_bytes; do
	v=$(query "$s" | cut -d' ' -f2)
	/usr/bin/python3 -c 'import sys; assert float(sys.argv[1]) > 0' "$v" 2>/dev/null || fail "$s is '$v'"
done
curl -sf "$M" | promtool check metrics || fail "promtool rejects the exposition after the run"

# Without the key, nothing listens.
pl_stop
pl_conf
pl_start
curl -s --max-time 2 "$M" >/dev/null && fail "something still serves /metrics without metrics_listen"
integrity_ok
echo ok
