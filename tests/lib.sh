# tests/lib.sh: helpers for integration tests that drive a real pipelined.
# Source it from a test script: it sets TOP, makes a private state tree in
# $TEST_TMP, and gives pl_start / pl_stop / pl_kill9 / pctl / wait_run.
set -u
TOP=${TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
TEST_TMP=${TEST_TMP:-$(mktemp -d /tmp/pltest.XXXXXX)}
export TOP TEST_TMP
PIPELINED="$TOP/daemon/pipelined"
PIPELINECTL="$TOP/daemon/pipelinectl"
PL_CONF="$TEST_TMP/pipelined.conf"
PL_PID=""

fail() { echo "FAIL: $*" >&2; [ -n "$PL_PID" ] && kill -9 "$PL_PID" 2>/dev/null; exit 1; }
note() { echo "# $*"; }

# Write a configuration; extra lines for [daemon] come as arguments, and
# PL_RESOURCES (e.g. "gpu = 1") goes into [resources].
pl_conf() {
	mkdir -p "$TEST_TMP/state" "$TEST_TMP/run"
	{
		echo "[daemon]"
		echo "state_dir = $TEST_TMP/state"
		echo "control_socket = $TEST_TMP/run/control.sock"
		echo "feed_socket = $TEST_TMP/run/feed.sock"
		echo "plugin_dir = ${PL_PLUGIN_DIR:-$TOP/plugins}"
		echo "shim = $TOP/daemon/pipeline-shim"
		echo "jobs_dir = $TOP/jobs"
		echo "log_level = debug"
		echo "log_file = $TEST_TMP/pipelined.log"
		echo "kill_grace = 2s"
		# A test that runs the ML stack (transformers, PEFT) sets
		# PL_PYTHON=$(tests/tools/pyenv.sh --python); others keep the
		# built-in default, Debian's python3 (numpy, torch 1.13).
		[ -n "${PL_PYTHON:-}" ] && echo "python = $PL_PYTHON"
		for l in "$@"; do echo "$l"; done
		echo "[resources]"
		echo "${PL_RESOURCES:-gpu = 1}"
	} > "$PL_CONF"
}

pl_start() {
	[ -f "$PL_CONF" ] || pl_conf
	"$PIPELINED" -d -f "$PL_CONF" >>"$TEST_TMP/pipelined.out" 2>&1 &
	PL_PID=$!
	for _ in $(seq 1 100); do
		[ -S "$TEST_TMP/run/control.sock" ] && pctl status >/dev/null 2>&1 && return 0
		kill -0 "$PL_PID" 2>/dev/null || { cat "$TEST_TMP/pipelined.out"; fail "pipelined died at start"; }
		sleep 0.1
	done
	fail "pipelined did not start"
}

pl_stop() {
	[ -n "$PL_PID" ] || return 0
	kill -TERM "$PL_PID" 2>/dev/null
	wait "$PL_PID" 2>/dev/null
	PL_PID=""
}

pl_kill9() {
	kill -9 "$PL_PID" 2>/dev/null
	wait "$PL_PID" 2>/dev/null
	PL_PID=""
}

pctl() { "$PIPELINECTL" -f "$PL_CONF" "$@"; }

# wait_run RUN STATE [SECONDS]
wait_run() {
	local run=$1 want=$2 secs=${3:-60} st=""
	for _ in $(seq 1 $((secs * 10))); do
		st=$(pctl --json status "$run" 2>/dev/null | sed -n 's/.*"run":{[^}]*"state":"\([a-z]*\)".*/\1/p')
		[ "$st" = "$want" ] && return 0
		case "$st" in succeeded|failed|cancelled) [ "$st" != "$want" ] && { pctl status "$run"; fail "run $run ended $st, wanted $want"; };; esac
		sleep 0.1
	done
	pctl status "$run"
	fail "run $run not $want after ${secs}s (is $st)"
}

# job_state RUN JOB
job_state() {
	pctl --json status "$1" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
for j in d["jobs"]:
    if j["name"] == sys.argv[1]: print(j["state"])' "$2"
}

db() { sqlite3 "$TEST_TMP/state/pipelined.db" "$@"; }

integrity_ok() {
	local r
	r=$(db "PRAGMA integrity_check;")
	[ "$r" = "ok" ] || fail "integrity_check: $r"
}

# Event ids must be 1..N without a gap.
events_gapless() {
	local n max
	n=$(db "SELECT count(*) FROM events;")
	max=$(db "SELECT coalesce(max(id),0) FROM events;")
	[ "$n" = "$max" ] || fail "event ids have gaps: $n events, max id $max"
}

# "SHA256 SIZE" of a file or directory as pipeline-plugin(3) defines an
# artifact's digest (a directory: sha256 of its files' sorted
# "SHA256  RELATIVE-NAME" lines), computed here independently of the C code.
artifact_digest() {
	/usr/bin/python3 -c '
import hashlib, os, sys
def h(p): return hashlib.sha256(open(p, "rb").read()).hexdigest()
root = sys.argv[1]
if os.path.isdir(root):
    files = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
    text = "".join("%s  %s\n" % (h(os.path.join(root, f)), f) for f in files)
    print(hashlib.sha256(text.encode()).hexdigest(),
          sum(os.path.getsize(os.path.join(root, f)) for f in files))
else:
    print(h(root), os.path.getsize(root))' "$1"
}

trap 'pl_kill9 2>/dev/null' EXIT
