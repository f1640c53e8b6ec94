# tests/lib.sh: the tests' helper library, for integration tests that drive
# a real pipelined. Source it first from a test script: it sets TOP, makes a
# private state tree in $TEST_TMP, and gives fail / note, pl_start /
# pl_stop / pl_kill9 / pctl / wait_run, the real Ollama (ollama_start),
# free_port, stack_note and pl_group / pl_user; PYSTACK picks the ML stack (below). The helpers of one subject are files of tests/lib/ that a test
# sources after this one: gguf.sh, bake.sh, gpu_stages.sh, evict.sh,
# slurm.sh and e2e.sh (each sources this one when the caller has not), and
# the benchmarks' dag_bench.sh and gguf_bench.sh (functions only).
set -u
TOP=${TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
TEST_TMP=${TEST_TMP:-$(mktemp -d /tmp/pltest.XXXXXX)}
export TOP TEST_TMP
PIPELINED="$TOP/daemon/pipelined"
PIPELINECTL="$TOP/daemon/pipelinectl"
PL_CONF="$TEST_TMP/pipelined.conf"
PL_PID=""
# PYSTACK (recipe, the default, or current) picks the ML stack that the
# tests of the hf engine run on: tests/tools/pyenv.sh --python prints that
# stack's interpreter (jobs/requirements.lock or
# jobs/requirements-current.lock). `PYSTACK=current tests/run.sh
# train/hf-train` runs one on the current stack; the tests pystack/current-*
# are make check's second pass of the fast ones there.
PYSTACK=${PYSTACK:-recipe}
export PYSTACK

fail() { echo "FAIL: $*" >&2; [ -n "$PL_PID" ] && kill -9 "$PL_PID" 2>/dev/null; exit 1; }
note() { echo "# $*"; }

# Write a configuration; extra lines for [daemon] come as arguments, and
# PL_RESOURCES (e.g. "gpu = 1") goes into [resources].
#
# Run as root, every test's daemon is split (pipelined(8) SECURITY): unless
# the test names its own group, admin_group, job_user or user, pl_conf sets
# group = plsubmit, and a daemon started as root with a group runs its
# daemon process as _pipelined (pipelined.conf(5) user's default), the
# parent alone root. $TEST_TMP is opened to searching (0711) so that
# _pipelined reaches its state and sockets below it. PL_SPLIT=0 keeps the
# daemon one process, root (the tests of that deployment).
pl_conf() {
	mkdir -p "$TEST_TMP/state" "$TEST_TMP/run"
	local split=
	if [ "$(id -u)" = 0 ] && [ "${PL_SPLIT:-1}" != 0 ]; then
		split=1
		local l
		for l in "$@"; do
			case "$l" in
			group*=*|admin_group*=*|job_user*=*|user*=*) split=;;
			esac
		done
		pl_group plsubmit
		pl_user _pipelined
		chmod 0711 "$TEST_TMP"
	fi
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
		# PL_PYTHON=$(tests/tools/pyenv.sh --python), PYSTACK's
		# environment; others keep the built-in default, Debian's
		# python3 (numpy, torch 1.13).
		[ -n "${PL_PYTHON:-}" ] && echo "python = $PL_PYTHON"
		# PL_STAGE_PROCESS=all runs every stage of every run in a stage
		# process (pipelined.conf(5) stage_process), to run the suite
		# through them.
		[ -n "${PL_STAGE_PROCESS:-}" ] && echo "stage_process = $PL_STAGE_PROCESS"
		[ -n "$split" ] && echo "group = plsubmit"
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
	# Nothing to do (and no failure under set -e) when no daemon runs.
	if [ -n "${PL_PID:-}" ]; then
		kill -9 "$PL_PID" 2>/dev/null || true
		wait "$PL_PID" 2>/dev/null || true
	fi
	PL_PID=""
}

pctl() { "$PIPELINECTL" -f "$PL_CONF" "$@"; }

# launch_dir JOBDIR ATTEMPT LAUNCH: a launch's directory (its events, its
# log), in the attempt's pl-stage/ when the stage ran in a stage process,
# as every stage of a split daemon's runs does (pipelined(8)).
launch_dir() {
	local a="$1/attempt-$2"
	if [ -d "$a/pl-stage" ]; then echo "$a/pl-stage/launch-$3"; else echo "$a/launch-$3"; fi
}

# state_own PATH...: give what a test planted as root (in the state
# directory, or where a planted link leads) to the state directory's
# owner, links themselves too, as if the daemon or an earlier job had left
# it there: a split daemon's daemon process, _pipelined, may then write
# it (and would write through a link it followed, which is what such a
# test checks it does not).
state_own() { chown -R -h "$(stat -c %u:%g "$TEST_TMP/state")" "$@"; }

# run_state RUN: the run's state, empty when there is no such run.
run_state() {
	pctl --json status "$1" 2>/dev/null | sed -n 's/.*"run":{[^}]*"state":"\([a-z]*\)".*/\1/p'
}

# wait_end RUN SECONDS [EVERY]: until the run has ended, asking every
# EVERY tenths of a second (1, the default; a benchmark asks less often,
# so that its own pctl processes weigh nothing); prints its state, or
# "timeout".
wait_end() {
	local st= every=${3:-1} nap
	nap=$((every / 10)).$((every % 10))
	for _ in $(seq 1 $(($2 * 10 / every))); do
		st=$(run_state "$1")
		case "$st" in succeeded|failed|cancelled|rejected) echo "$st"; return 0;; esac
		sleep "$nap"
	done
	echo "timeout"
}

# wait_run RUN STATE [SECONDS]
wait_run() {
	local run=$1 want=$2 secs=${3:-60} st=""
	for _ in $(seq 1 $((secs * 10))); do
		st=$(run_state "$run")
		[ "$st" = "$want" ] && return 0
		case "$st" in succeeded|failed|cancelled|rejected) [ "$st" != "$want" ] && { pctl status "$run"; fail "run $run ended $st, wanted $want"; };; esac
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


# artifact_path RUN JOB NAME: the path of the artifact NAME that JOB of RUN
# registered last (pipelinectl --json artifacts); empty when there is none.
artifact_path() {
	pctl --json artifacts "$1" | /usr/bin/python3 -c '
import json, sys
a = [x["path"] for x in json.load(sys.stdin)["artifacts"] if x["job"] == sys.argv[1] and x["name"] == sys.argv[2]]
print(a[-1] if a else "")' "$2" "$3"
}

# The real Ollama server (tests/tools/ollama.sh builds the pinned release,
# cached: 0.34.2 with its llama-server runner, or 0.24.0 when
# OLLAMA_VERSION=0.24.0 is in the environment): ollama_start [VAR=VALUE...] starts `ollama serve` on a free
# loopback port with its own OLLAMA_MODELS and HOME under
# $TEST_TMP/ollama, the arguments added to its environment (OLLAMA_* knobs
# such as OLLAMA_NUM_PARALLEL=2); it sets OURL, OLLAMA_PID and OLLAMA_BIN,
# and fails the test if the server does not come up or answers another
# version than the pinned one. ollama_stop stops it and its runners (it
# runs in a process group of its own); the EXIT trap below calls it, and a
# watcher stops it if the test's shell is killed before that.
OLLAMA_PID=""
ollama_start() {
	local port d=$TEST_TMP/ollama want got
	OLLAMA_BIN=$("$TOP/tests/tools/ollama.sh" --bin) || fail "tests/tools/ollama.sh did not build Ollama"
	want=$("$TOP/tests/tools/ollama.sh" --version)
	mkdir -p "$d/models" "$d/home"
	port=$(free_port)
	OURL=http://127.0.0.1:$port
	env HOME="$d/home" OLLAMA_HOST="127.0.0.1:$port" OLLAMA_MODELS="$d/models" \
	    OLLAMA_NOPRUNE=1 OLLAMA_NUM_PARALLEL=1 OLLAMA_MAX_LOADED_MODELS=3 "$@" \
	    setsid "$OLLAMA_BIN" serve >>"$d/serve.log" 2>&1 &
	OLLAMA_PID=$!
	( while kill -0 $$ 2>/dev/null; do sleep 1; done; kill -TERM -- "-$OLLAMA_PID" 2>/dev/null ) &
	for _ in $(seq 1 300); do
		curl -sf "$OURL/api/version" >/dev/null 2>&1 && break
		kill -0 "$OLLAMA_PID" 2>/dev/null || { tail -20 "$d/serve.log"; OLLAMA_PID=""; fail "ollama serve died at start; see $d/serve.log"; }
		sleep 0.1
	done
	got=$(curl -s "$OURL/api/version" | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
	[ -n "$got" ] || { tail -20 "$d/serve.log"; fail "ollama serve did not come up on $OURL; see $d/serve.log"; }
	[ "$got" = "$want" ] || fail "the Ollama on $OURL says version $got, expected $want"
	export OURL OLLAMA_PID OLLAMA_BIN
}

ollama_stop() {
	[ -n "$OLLAMA_PID" ] || return 0
	kill -TERM -- "-$OLLAMA_PID" 2>/dev/null || true
	for _ in $(seq 1 50); do kill -0 "$OLLAMA_PID" 2>/dev/null || break; sleep 0.1; done
	kill -KILL -- "-$OLLAMA_PID" 2>/dev/null || true
	wait "$OLLAMA_PID" 2>/dev/null || true
	OLLAMA_PID=""
}

# The tests' tags run their runner on one thread: on this machine's two
# shared cores ggml's worker threads, spinning on each other while other
# builds run, made a 16-token answer of the tiny model take 7 to 16 s with
# two threads, 6 to 10 ms with one (measured on Ollama 0.24.0).
OLLAMA_TEST_PARAMS="PARAMETER num_thread 1"

# ollama_modelfile SRC DST: the Modelfile SRC with OLLAMA_TEST_PARAMS added,
# for the register stage's modelfile key.
ollama_modelfile() {
	{ cat "$1"; echo; echo "$OLLAMA_TEST_PARAMS"; } >"$2"
}

# ollama_create TAG GGUF [MODELFILE-LINES]: a tag from a GGUF (with
# OLLAMA_TEST_PARAMS) through the ollama CLI of the same build (the
# stages' own requests are what the tests check; this is set-up).
ollama_create() {
	local tag=$1 gguf=$2 mf=$TEST_TMP/ollama/Modelfile.$$
	{ printf 'FROM %s\n%s\n' "$gguf" "$OLLAMA_TEST_PARAMS"; [ -n "${3:-}" ] && printf '%s\n' "$3"; } >"$mf"
	HOME=$TEST_TMP/ollama/home OLLAMA_HOST=${OURL#http://} "$OLLAMA_BIN" create "$tag" -f "$mf" \
	    >>"$TEST_TMP/ollama/create.log" 2>&1 || fail "ollama create $tag failed; see $TEST_TMP/ollama/create.log"
}


trap 'pl_kill9; ollama_stop' EXIT

# stack_note PYTHON: a "# stack: ..." line naming the ML stack of the
# interpreter (jobs/pljob/stack.py: its lock and digest, the versions of
# torch, transformers, peft, bitsandbytes, accelerate), so that a test's
# log says which versions it ran on.
stack_note() {
	note "stack: $("$1" "$TOP/jobs/pljob" stack)"
}
# pl_group NAME...: system groups, each made unless it exists;
# pl_user NAME...: system users (no home, no shell), likewise. Tests that
# run beside each other (tests/run.sh -j, or another tree's run) make
# them under one lock of the machine's: without it two see a group
# missing and both add it, and the second groupadd fails (exit 9), or one
# finds /etc/group locked by the other (exit 10).
PL_ACCOUNTS_LOCK=/run/lock/pipelined-tests-accounts.lock
pl_group() {
	local g
	for g in "$@"; do
		getent group "$g" >/dev/null && continue
		flock -w 60 "$PL_ACCOUNTS_LOCK" sh -c 'getent group "$1" >/dev/null || groupadd -r "$1"' \
		    sh "$g" || fail "cannot add the group $g"
	done
}
pl_user() {
	local u
	for u in "$@"; do
		id -u "$u" >/dev/null 2>&1 && continue
		flock -w 60 "$PL_ACCOUNTS_LOCK" sh -c 'id -u "$1" >/dev/null 2>&1 ||
		    useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$1"' sh "$u" ||
		    fail "cannot add the user $u"
	done
}

# free_port: a TCP port on 127.0.0.1 nothing listens on right now.
free_port() {
	/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
