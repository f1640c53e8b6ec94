#!/bin/bash
# notify-bench.sh: 1,000 notifications through a webhook receiver on
# loopback (tests/bench/hookrecv, built with Go: the receiver shares the
# two cores, so it is kept cheap; it checks signatures as
# tests/helpers/hook_receiver.py does) that answers 500 to
# the first try of every tenth key. A run of 1,000 independent jobs of
# `false` (max_jobs = 2) makes 1,000 job.failed notifications; it runs R
# times with [notify] and R times without, alternated, on fresh daemons.
# Prints the runs' median wall times and their ratio (the scheduler's
# throughput with notifications; target: within 2%), how long the outbox
# took to drain, and checks that every notification was accepted exactly
# once per idempotency key.
#   N=1000 R=3 tests/bench/notify-bench.sh
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
N=${N:-1000}
R=${R:-3}
BASE=$(mktemp -d /tmp/notifybench.XXXXXX)
RPID=
trap '[ -n "$RPID" ] && kill $RPID 2>/dev/null; rm -rf "$BASE"' EXIT
{
	echo "[run]"; echo "name = fails"
	for k in $(seq 0 $((N - 1))); do echo "[j$k]"; echo "stage = exec"; echo "command = false"; done
} >"$BASE/fails.ini"
GO=$(command -v go || echo /usr/local/go/bin/go)
(cd "$TOP/tests/bench/hookrecv" && GOFLAGS= "$GO" build -o "$BASE/hookrecv" .) ||
	{ echo "notify-bench: building the Go receiver failed"; exit 1; }
# The receiver stands for a server elsewhere: on these two cores it runs at
# the lowest priority, so that what is measured is the daemon's cost.
nice -n 19 "$BASE/hookrecv" -port-file "$BASE/port" -log "$BASE/hooks.log" -secret bench -fail-first-every 10 &
RPID=$!
for _ in $(seq 100); do [ -s "$BASE/port" ] && break; sleep 0.05; done
PORT=$(cat "$BASE/port")
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for i in $(seq 1 "$R"); do
	for side in plain notify; do
		export TEST_TMP=$BASE/$side-$i
		mkdir -p "$TEST_TMP"
		. "$TOP/tests/lib.sh"
		trap 'pl_kill9 2>/dev/null; kill $RPID 2>/dev/null; rm -rf "$BASE"' EXIT
		pl_conf "max_jobs = 2" "log_level = warn"
		if [ $side = notify ]; then
			printf '[notify]\nurl = http://127.0.0.1:%s/hook\nsecret = bench\nevents = job.failed\ntimeout = 2s\n' \
			    "$PORT" >>"$PL_CONF"
		fi
		pl_start
		t0=$(now)
		pctl submit "$BASE/fails.ini" >/dev/null
		wait_run fails failed 600
		t1=$(now)
		awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f\n", b-a}' >>"$BASE/$side"
		if [ $side = notify ]; then
			for _ in $(seq 6000); do
				[ "$(db "SELECT count(*) FROM outbox WHERE state = 'pending'")" = 0 ] && break
				sleep 0.05
			done
			t2=$(now)
			awk -v a="$t1" -v b="$t2" 'BEGIN{printf "%.3f\n", b-a}' >>"$BASE/drain"
			d=$(db "SELECT count(*) FROM outbox WHERE state = 'delivered'")
			[ "$d" = "$N" ] || { echo "notify-bench: only $d of $N delivered"; exit 1; }
		fi
		pl_stop
		printf '  run %d %-7s %s s\n' "$i" "$side" "$(tail -1 "$BASE/$side")"
	done
done
check=$(/usr/bin/python3 - "$BASE/hooks.log" "$((N * R))" <<'EOF'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ok = collections.Counter(r["key"] for r in rows if r["status"] == 200 and r["sig_ok"])
fails = sum(1 for r in rows if r["status"] == 500)
assert len(ok) == int(sys.argv[2]), ("keys accepted", len(ok))
assert max(ok.values()) == 1, ("a key accepted twice", ok.most_common(1))
print("%d keys accepted, each once; %d first tries answered 500 and retried" % (len(ok), fails))
EOF
)
p=$(median <"$BASE/plain"); s=$(median <"$BASE/notify")
echo "notify-bench: $N jobs of false (max_jobs 2), $N job.failed notifications a run, medians of $R runs"
echo "  without [notify]  $p s"
echo "  with [notify]     $s s   ratio $(awk -v a="$s" -v b="$p" 'BEGIN{printf "%.4f", a/b}')"
echo "  outbox drained    $(median <"$BASE/drain") s after the run ended (median)"
echo "  $check"
kill "$RPID" 2>/dev/null || true
