# tests/lib/gpu_stages.sh: sourced by the tests of tests/integration/{corpus,probe,train} (the tokenize,
# probe and train stages run by hand with `pipelinectl stage`).
# Provides: CTL, PYD (Debian's python3), die, reap, hf_killed_resume_checks,
# hf_loss_steps, setup_tokens (a tiny Gemma 3
# base, a 40-example corpus, its tokens), start_standin (the Ollama API
# stand-in; sets URL and STANDIN_LOG), log_count.
set -euo pipefail
: "${TOP:?TOP is the repository root}"
: "${TEST_TMP:?TEST_TMP is a private temporary directory}"
declare -F pl_start >/dev/null || . "$TOP/tests/lib.sh"
CTL="$TOP/daemon/pipelinectl"
PYD=/usr/bin/python3
STANDIN_PID=
# `pipelinectl stage` by hand reads this configuration, not the tree's
# etc/pipelined.conf (whose python is the pinned environment): the stages
# run by hand use the interpreter a test's daemon uses (pl_conf: Debian's
# python3 unless PL_PYTHON is set), so their results compare.
mkdir -p "$TEST_TMP/byhand"
cat >"$TEST_TMP/byhand/pipelined.conf" <<CONF
[daemon]
state_dir = $TEST_TMP/byhand
plugin_dir = $TOP/plugins
shim = $TOP/daemon/pipeline-shim
jobs_dir = $TOP/jobs
python = ${PL_PYTHON:-$PYD}
CONF
export PIPELINED_CONF=$TEST_TMP/byhand/pipelined.conf

# die: tests/lib.sh's fail, by the name these tests use.
die() { fail "$@"; }

for f in "$CTL" "$TOP/plugins/tokenize.so" "$TOP/plugins/probe.so" "$TOP/plugins/train.so"; do
	[ -e "$f" ] || die "$f is not built (make tests)"
done

cleanup() {
	if [ -n "$STANDIN_PID" ]; then
		kill "$STANDIN_PID" 2>/dev/null || true
		wait "$STANDIN_PID" 2>/dev/null || true
	fi
}
trap cleanup EXIT

# For a test that runs a daemon (tests/lib.sh): on the way out, the daemon
# and any job process group it left running (jobs outlive the daemon by
# design) are killed, by their recorded ids. Use: trap reap EXIT.
reap() {
	cleanup
	pl_kill9 2>/dev/null || true
	for f in "$TEST_TMP"/state/runs/*/*/attempt-*/.shim/*/shim.json; do
		[ -f "$f" ] || continue
		pg=$("$PYD" -c 'import json,sys; print(json.load(open(sys.argv[1]))["pgid"])' "$f" 2>/dev/null) || continue
		[ -n "$pg" ] && [ "$pg" -gt 1 ] && kill -9 -- "-$pg" 2>/dev/null || true
	done
}

# A tiny Gemma 3 base (the shared fixture), a corpus and its tokens:
# BASE, CORPUS, TOKENS.
setup_tokens() {
	BASE=$TEST_TMP/base
	CORPUS=$TEST_TMP/corpus.jsonl
	TOKENS=$TEST_TMP/tok/tokens.npz
	"$PYD" "$TOP/tests/fixtures/gen_gemma3.py" "$BASE" --layout causal >/dev/null
	"$PYD" "$TOP/tests/fixtures/gen_corpus.py" "$CORPUS" --n "${1:-40}" >/dev/null
	"$CTL" stage tokenize -w "$TEST_TMP/tok" base="$BASE" corpus="$CORPUS" \
	    >"$TEST_TMP/tokenize.out" 2>&1 || { cat "$TEST_TMP/tokenize.out"; die "tokenize failed"; }
	[ -f "$TOKENS" ] || die "no $TOKENS"
}

# start_standin ARGS...: the Ollama API stand-in on an ephemeral port.
start_standin() {
	STANDIN_LOG=$TEST_TMP/standin.log
	rm -f "$TEST_TMP/port" "$STANDIN_LOG"
	"$PYD" "$TOP/tests/standins/ollama_standin.py" --port-file "$TEST_TMP/port" \
	    --log "$STANDIN_LOG" "$@" &
	STANDIN_PID=$!
	for _ in $(seq 100); do
		[ -s "$TEST_TMP/port" ] && break
		sleep 0.05
	done
	[ -s "$TEST_TMP/port" ] || die "the Ollama stand-in did not start"
	URL="http://127.0.0.1:$(cat "$TEST_TMP/port")"
}

# log_count EVENT MODEL: how many times the stand-in logged EVENT for MODEL.
log_count() {
	grep -c "\"event\": \"$1\", \"model\": \"$2\"" "$STANDIN_LOG" || true
}

# run_train NAME [key=value...]: the train stage by hand for the G21 race
# tests (train/evict-*): the tiny engine behind the GPU-contention
# stand-in (tests/standins/gpu_contention_standin.sh), whose load window is LOAD_S
# seconds (default 2.5), against the Ollama at URL, evicting all but the
# embedding model and keeper (waiting up to UNLOAD_WAIT seconds, default
# 5). Output in NAME.out, a line per launch in NAME.launches, the exit
# status in rc.
run_train() {
	local out=$1; shift
	set +e
	STANDIN_OLLAMA=$URL STANDIN_ALLOW=nomic-embed-text:latest,keeper:latest \
	STANDIN_LOAD_S=${LOAD_S:-2.5} STANDIN_LAUNCHES=$TEST_TMP/$out.launches \
	"$CTL" stage train -w "$TEST_TMP/$out" engine=tiny base="$BASE" tokens="$TOKENS" \
	    max_steps=4 gradient_accumulation_steps=1 lora_r=4 \
	    python="$TOP/tests/standins/gpu_contention_standin.sh" \
	    ollama_url="$URL" embedding_model=nomic-embed-text keep_loaded=keeper \
	    launch_backoff=0.2 launch_backoff_max=1 unload_wait="${UNLOAD_WAIT:-5}" "$@" \
	    >"$TEST_TMP/$out.out" 2>&1
	rc=$?
	set -e
}

# hf_killed_resume_checks SAVE_STEPS: after a run v1 whose train job was
# killed once by tests/standins/gpu_contention_standin.sh (STANDIN_KILL_ONCE) after step
# KILL's loss, of STEPS steps, with PY, BASE and the hf=(...) settings:
# launch-2 resumed from the newest checkpoint whole at the kill, the
# replayed steps' losses equal the first segment's, the store holds every
# loss step once, and the adapter is bit-identical to an uninterrupted run's
# on the same tokens (run by hand with SAVE_STEPS). Sets TOK (the tokens)
# and R (the train job's directory). train/hf-train.sh and train/hf-real.sh.
hf_killed_resume_checks() {
	local save=$1 newest first replayed ref got
	R=$TEST_TMP/state/runs/v1/train
	grep -q 'launch-1 died inside the training loop (killed by signal 9' "$TEST_TMP/train.log" ||
	    die "the train log does not report the kill inside the loop"
	# The newest checkpoint whole at the kill is where launch-2 starts.
	newest=$(sed -n 's/^checkpoint-\([0-9]*\)$/\1/p' "$STANDIN_KILL_ONCE" | sort -n | tail -1)
	note "checkpoints at the kill: $(tr '\n' ' ' <"$STANDIN_KILL_ONCE")"
	if [ -n "$newest" ]; then
		grep -q "launch-2 resumes from $R/work/checkpoints/checkpoint-$newest (step $newest)" "$TEST_TMP/train.log" ||
		    die "launch-2 did not resume from checkpoint-$newest"
		first=$((newest + 1))
	else
		grep -q "launch-2 starts from step 0: no complete checkpoint" "$TEST_TMP/train.log" ||
		    die "launch-2 did not start over"
		first=1
	fi
	hf_loss_steps "$(launch_dir "$R" 1 1)/events" >"$TEST_TMP/l1"
	hf_loss_steps "$(launch_dir "$R" 1 2)/events" >"$TEST_TMP/l2"
	[ "$(head -1 "$TEST_TMP/l2" | cut -d' ' -f1)" = "$first" ] && [ "$(tail -1 "$TEST_TMP/l2" | cut -d' ' -f1)" = "$STEPS" ] ||
	    die "launch-2's losses are not steps $first..$STEPS"
	replayed=$(awk 'NR == FNR { a[$1] = $2; next }
	    ($1 in a) { n++; if (a[$1] != $2) { print "step " $1 ": " a[$1] " vs " $2 > "/dev/stderr"; bad++ } }
	    END { print (bad ? -1 : n + 0) }' "$TEST_TMP/l1" "$TEST_TMP/l2")
	[ "$replayed" -ge 0 ] || die "a replayed step's loss differs between the segments"
	[ "$replayed" -ge $((KILL - first + 1)) ] || die "only $replayed replayed steps compared"
	set -- $(db "SELECT count(*), count(DISTINCT m.step), min(m.step), max(m.step) FROM metrics m
	    JOIN jobs j ON j.id = m.job_id JOIN runs r ON r.id = j.run_id
	    WHERE r.name = 'v1' AND j.name = 'train' AND m.name = 'loss'" | tr '|' ' ')
	[ "$*" = "$STEPS $STEPS 1 $STEPS" ] || die "stored loss curve: rows, distinct steps, min, max = $*"
	# Bit-identical to an uninterrupted run on the same tokens.
	TOK=$(db "SELECT a.path FROM artifacts a JOIN runs r ON r.id = a.run_id
	    WHERE r.name = 'v1' AND a.name = 'tokens'")
	"$CTL" stage train -w "$TEST_TMP/ref" python="$PY" base="$BASE" tokens="$TOK" "${hf[@]}" save_steps="$save" \
	    >"$TEST_TMP/ref.out" 2>&1 || { cat "$TEST_TMP/ref.out"; die "the uninterrupted run failed"; }
	ref=$(sed -n 's/^job.artifact {"name":"adapter".*"sha256":"\([0-9a-f]*\)".*/\1/p' "$TEST_TMP/ref.out")
	got=$(db "SELECT a.sha256 FROM artifacts a JOIN runs r ON r.id = a.run_id
	    WHERE r.name = 'v1' AND a.name = 'adapter'")
	[ -n "$ref" ] && [ "$got" = "$ref" ] || die "resumed adapter $got differs from the uninterrupted run's $ref"
	note "adapter $got, resumed and uninterrupted"
}

# hf_loss_steps EVENTS: "STEP LOSS" per loss metric of an events file.
hf_loss_steps() {
	sed -n 's/.*"type":"metric","name":"loss","step":\([0-9]*\),"value":\([^,}]*\).*/\1 \2/p' "$1"
}
