#!/bin/bash
# tests/tools/demo.sh: `make demo`. The whole release lifecycle of a tiny
# real Gemma 3 router, on this machine's CPUs, on a private pipelined:
#   tiny-v1 (etc/examples/tiny/v1.ini, the first release), then
#   tiny-v2 (etc/examples/tiny.ini, previous = tiny-v1, more training data),
# each tokenize -> probe -> train -> merge -> tensor_fix -> convert ->
# quantize -> verify -> register -> bake [-> bake-incumbent] -> gate.
# It prepares what the specs need (tests/e2e/lib.sh: the fixture base, the
# llama.cpp oracle build and the real Ollama server, built from its pinned
# release by tests/tools/ollama.sh; both cached after the first time), so
# register, bake and gate run against the real Ollama; shows the watch as
# it goes (progress thinned to every 10%), the wall time of every stage,
# and the final `pipelinectl report`; the daemon and the Ollama server are
# stopped at the end, whatever happens.
#   DEMO_SPEC=etc/examples/hello.ini make demo    runs one other spec instead
# Exit status: 0 when tiny-v1 succeeded and tiny-v2 reached its gate with
# every job before it done (its verdict is whatever the numbers say).
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
export TOP
DIR=$(mktemp -d /tmp/pipelined-demo.XXXXXX)
mkdir -p "$DIR/state" "$DIR/run"
cat > "$DIR/pipelined.conf" <<CONF
[daemon]
state_dir = $DIR/state
control_socket = $DIR/run/control.sock
feed_socket = $DIR/run/feed.sock
plugin_dir = $TOP/plugins
shim = $TOP/daemon/pipeline-shim
jobs_dir = $TOP/jobs
python = /usr/bin/python3
log_file = $DIR/pipelined.log
max_jobs = 2
[resources]
gpu = 1
CONF
TEST_TMP=$DIR
export TEST_TMP
. "$TOP/tests/e2e/lib.sh"
PID=
cleanup() {
	if [ -n "$PID" ]; then
		kill -TERM "$PID" 2>/dev/null
		for _ in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
	fi
	e2e_stop
	echo "== daemon and Ollama stopped (state and logs in $DIR)"
}
trap cleanup EXIT
ctl() { "$TOP/daemon/pipelinectl" -f "$DIR/pipelined.conf" "$@"; }

# watch RUN: the live watch, progress lines thinned to every 10% (train
# reports every step).
watch() {
	ctl watch "$1" | awk '
	$3 == "progress" { split($4, p, "/"); if (p[2] > 0) { b = int(10 * p[1] / p[2]);
		if (b == last[$2] && p[1] != p[2]) next; last[$2] = b } }
	{ print; fflush() }'
	return "${PIPESTATUS[0]}"
}

# times RUN: each job's wall time, from the store.
times() {
	ctl --json status "$1" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
r = d["run"]
print("== wall time per stage, %s" % r["name"])
for j in d["jobs"]:
    if j["started"] and j["finished"]:
        print("   %-16s %-12s %8.2f s  %s" % (j["name"], j["stage"], j["finished"] - j["started"], j["state"]))
    else:
        print("   %-16s %-12s %10s  %s" % (j["name"], j["stage"], "-", j["state"]))
if r["finished"]:
    print("   %-29s %8.2f s  %s" % ("the whole run", r["finished"] - r["created"], r["state"]))'
}

T0=$(date +%s)
if [ -z "${DEMO_SPEC:-}" ]; then
	"$TOP/tests/tools/llama-oracle.sh" --check ||
	    echo "== first run: building llama.cpp (the test oracle; ~5 minutes of 2 cores, cached after)"
	"$TOP/tests/tools/ollama.sh" --check ||
	    echo "== first run: building Ollama $("$TOP/tests/tools/ollama.sh" --version) and its runner (~15-25 minutes of 2 cores, cached after)"
	echo "== preparing: fixture base, llama.cpp oracle, the real Ollama server"
	e2e_prepare "$DIR/e2e"
	echo "== real Ollama $("$TOP/tests/tools/ollama.sh" --version) on $OURL (models in $DIR/ollama/models, log $DIR/ollama/serve.log)"
	SPECS=("$E2E_V1" "$E2E_V2")
else
	SPECS=("$DEMO_SPEC")
fi
echo "== starting a private pipelined (state in $DIR)"
"$TOP/daemon/pipelined" -f "$DIR/pipelined.conf" || exit 1
for _ in $(seq 1 50); do [ -S "$DIR/run/control.sock" ] && break; sleep 0.1; done
PID=$(pgrep -f "^$TOP/daemon/pipelined -f $DIR/pipelined.conf\$" | head -n 1)

rc=0
runs=()
for spec in "${SPECS[@]}"; do
	ctl check "$spec" || { rc=1; break; }
	run=$(ctl submit "$spec") || { rc=1; break; }
	runs+=("$run")
	echo "== submitted run $run; watching it"
	watch "$run"
	st=$?
	echo "== final status of $run"
	ctl status "$run"
	times "$run"
	if [ "$st" -ne 0 ]; then
		if [ "$run" = tiny-v2 ] && ctl --json status "$run" | /usr/bin/python3 -c '
import json, sys
j = {x["name"]: x["state"] for x in json.load(sys.stdin)["jobs"]}
sys.exit(0 if j.pop("gate") == "rejected" and all(s in ("succeeded", "skipped") for s in j.values()) else 1)'; then
			echo "== $run: every job done; the gate did not promote it (see the verdict)"
		else
			echo "== run $run did not succeed"
			rc=1
			break
		fi
	else
		echo "== run $run succeeded"
	fi
done
if [ -z "${DEMO_SPEC:-}" ] && [ "${#runs[@]}" -gt 0 ]; then
	last=${runs[${#runs[@]}-1]}
	echo "== pipelinectl report $last"
	ctl report "$last"
fi
echo "== demo took $(( $(date +%s) - T0 )) s"
exit $rc
