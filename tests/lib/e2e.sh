# tests/lib/e2e.sh: what the tiny lifecycle (etc/examples/tiny.ini and
# tiny/v1.ini) and the real router's (etc/examples/router/, router_prepare
# below) need around a daemon, for tests/integration/e2e/ and `make demo`.
# Needs TOP; sourced after tests/lib.sh or on its own.
#
#   e2e_prepare DIR   copies the two specs, their data and etc/Modelfile.tmpl
#                     (with OLLAMA_TEST_PARAMS, tests/lib.sh) to DIR/spec (so nothing is written into the tree),
#                     generates the fixture base there (gen_gemma3.py, seed
#                     1234, then tests/helpers/tweak_base.py and
#                     tests/helpers/pretrain_base.py), gets the llama.cpp
#                     oracle build (cached), starts the REAL Ollama
#                     (tests/lib.sh: ollama_start; tests/tools/ollama.sh
#                     builds the pinned release, cached) on a free loopback
#                     port with its own OLLAMA_MODELS under $TEST_TMP, and
#                     points the specs at it.
#                     Sets E2E_V1 and E2E_V2 (the spec paths), OURL.
#   e2e_stop          stops the server and its runners.
E2E_PY=/usr/bin/python3
declare -F ollama_start >/dev/null || . "$TOP/tests/lib.sh"

e2e_die() { echo "FAIL: $*" >&2; e2e_stop; exit 1; }

e2e_prepare() {
	local dir=$1 i
	mkdir -p "$dir/spec"
	ollama_modelfile "$TOP/etc/Modelfile.tmpl" "$dir/Modelfile.tmpl"
	cp "$TOP/etc/examples/tiny.ini" "$dir/spec/tiny.ini"
	rm -rf "$dir/spec/tiny"
	mkdir -p "$dir/spec/tiny"
	for i in v1.ini system.txt capabilities.txt cases.jsonl corpus-v1.jsonl corpus-v2.jsonl; do
		cp "$TOP/etc/examples/tiny/$i" "$dir/spec/tiny/$i"
	done
	$E2E_PY "$TOP/tests/fixtures/gen_gemma3.py" "$dir/spec/tiny/base" --seed 1234 \
	    >"$dir/gen.log" 2>&1 || { cat "$dir/gen.log"; e2e_die "gen_gemma3.py"; }
	$E2E_PY "$TOP/tests/helpers/tweak_base.py" "$dir/spec/tiny/base" || e2e_die "tweak_base.py"
	$E2E_PY "$TOP/tests/helpers/pretrain_base.py" "$dir/spec/tiny/base" "$TOP/etc/examples/tiny" \
	    >"$dir/pretrain.log" 2>&1 || { cat "$dir/pretrain.log"; e2e_die "pretrain_base.py"; }
	eval "$("$TOP/tests/tools/llama-oracle.sh" --env)" || e2e_die "llama-oracle.sh"
	ollama_start
	E2E_V1=$dir/spec/tiny/v1.ini
	E2E_V2=$dir/spec/tiny.ini
	sed -i "s#http://127.0.0.1:11434#$OURL#" "$E2E_V1" "$E2E_V2"
}

e2e_stop() { ollama_stop; }

# router_prepare DIR: what the real router's lifecycle (etc/examples/router/:
# v0.ini, v1.ini, v2.ini) needs, for `make demo`, e2e/router-real and the real-model benches: the
# specs and their data copied to DIR/spec/router (nothing is written into
# the tree) with `base` a link to the real Gemma 3 270M checkpoint
# (tests/tools/realbase.sh --path, built once into the cache),
# etc/Modelfile.tmpl (with OLLAMA_TEST_PARAMS) as DIR/Modelfile.tmpl, the
# REAL Ollama started (ollama_start) and the specs pointed at it.
# Sets ROUTER_DIR (the specs' directory), ROUTER_BASE, ROUTER_PY (the ML
# environment's interpreter, tests/tools/pyenv.sh) and OURL.
router_prepare() {
	local dir=$1 f
	ROUTER_PY=$("$TOP/tests/tools/pyenv.sh" --python) || e2e_die "tests/tools/pyenv.sh"
	ROUTER_BASE=$("$TOP/tests/tools/realbase.sh" --path) || e2e_die "tests/tools/realbase.sh --path"
	ROUTER_DIR=$dir/spec/router
	rm -rf "$ROUTER_DIR"
	mkdir -p "$ROUTER_DIR"
	for f in "$TOP"/etc/examples/router/*.ini "$TOP"/etc/examples/router/*.jsonl \
	    "$TOP"/etc/examples/router/*.txt; do
		cp "$f" "$ROUTER_DIR/"
	done
	ln -s "$ROUTER_BASE" "$ROUTER_DIR/base"
	# Nothing else runs while the real model bakes: its runner takes both
	# cores.
	OLLAMA_TEST_PARAMS="PARAMETER num_thread 2"
	ollama_modelfile "$TOP/etc/Modelfile.tmpl" "$dir/Modelfile.tmpl"
	# Gemma 3's sliding-window layers keep only the window in the runner's
	# KV cache, so llama-server (Ollama 0.30 and later) cannot reuse the
	# shared system prompt of the previous request and evaluates all ~430
	# of its tokens again for every case ("forcing full prompt
	# re-processing ... SWA" in its log): 4.1 of the 6.7 s of a case on one
	# thread.  LLAMA_ARG_SWA_FULL=1 (llama-server's --swa-full, from the
	# environment Ollama passes to its runner) keeps the whole context for
	# those layers, the attention mask still applying the window, so the
	# answers are the same and only the new tokens are evaluated.  0.24.0's
	# own engine ignores it.  pipeline.ini(5), bake: the same advice.
	ollama_start LLAMA_ARG_SWA_FULL=1
	sed -i "s#http://127.0.0.1:11434#$OURL#" "$ROUTER_DIR"/*.ini
}

# router_daemon DIR: router_prepare DIR, then a private pipelined for the
# router's runs started (tests/lib.sh: pl_conf, pl_start): the ML
# environment's interpreter for its jobs, one "gpu" (the CPU trainer), two
# jobs at a time. e2e/router-real and the real-model benches.
router_daemon() {
	router_prepare "$1"
	PL_RESOURCES="gpu = 1" pl_conf "python = $ROUTER_PY" "max_jobs = 2"
	pl_start
}

# The real router's benchmarks (tests/bench/reuse-bench.sh, sweep-bench.sh):
#   bench_router DIR  router_daemon DIR, then v0.ini and v1.ini as the
#                     environment asks: BENCH_SHORT=yes shortens v1 as
#                     e2e/router-real does (corpus-check.jsonl, 2 epochs,
#                     one bake pass; v0 one pass), BENCH_MAX_STEPS=N
#                     trains N optimizer steps instead of 30. Sets R (the
#                     specs' directory).
#   bench_sampler     the load sampler: the 1-minute load average every
#                     10 s into load.txt in the current directory, each
#                     line with its time, so that each run's share can be
#                     cut out; its pid in BENCH_SAMPLER.
#   bench_run SPEC NAME [SUBMIT-ARGS]
#                     submits SPEC and waits for run NAME's end (8 hours
#                     at most, asking every 0.5 s), recording the clock's start, end and state
#                     in NAME.time, the status in NAME.status.json and the
#                     gate's values in NAME.gate.json.
bench_router() {
	router_daemon "$1"
	R=$ROUTER_DIR
	if [ "${BENCH_SHORT:-no}" = yes ]; then
		sed -i -e 's/^passes = 2$/passes = 1/' "$R/v0.ini"
		sed -i -e 's/^corpus = corpus-v1.jsonl$/corpus = corpus-check.jsonl/' \
		    -e '/^max_steps = /d' -e 's/^passes = 2$/passes = 1/' "$R/v1.ini"
	fi
	if [ -n "${BENCH_MAX_STEPS:-}" ]; then
		sed -i "s/^max_steps = 30\$/max_steps = $BENCH_MAX_STEPS/" "$R/v1.ini"
		[ "$(grep -c "^max_steps = $BENCH_MAX_STEPS\$" "$R/v1.ini")" = 2 ] ||
		    fail "v1.ini: max_steps not substituted"
	fi
}

bench_sampler() {
	( while :; do echo "$(date +%s) $(cut -d' ' -f1 /proc/loadavg)"; sleep 10; done ) >load.txt &
	BENCH_SAMPLER=$!
}

bench_run() {
	local spec=$1 name=$2 t0 t1 st
	shift 2
	t0=$(date +%s.%N)
	pctl submit "$@" "$spec" >/dev/null || fail "submit $spec"
	st=$(wait_end "$name" 28800 5)
	t1=$(date +%s.%N)
	echo "$t0 $t1 $st" >"$name.time"
	pctl --json status "$name" >"$name.status.json"
	pctl --json values "$name" gate >"$name.gate.json" 2>/dev/null
	note "$name $st in $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s"
}
