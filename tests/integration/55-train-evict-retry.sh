#!/bin/bash
# 55-train-evict-retry.sh: the train stage against the G21 reload race.
# A live Ollama (the API stand-in) reloads an evicted model onto the GPU
# 1.5 s after each eviction; the trainer (the real jobs/train.py, tiny
# engine, behind the GPU-contention stand-in) dies like a CUDA OOM when a
# foreign model is resident during its load. The stage must
#  1. evict, relaunch and succeed within launch_retries while the race
#     lasts three rounds, never evicting the embedding model or keep_loaded;
#  2. fail clearly after launch_retries when the race never stops.
. "$(dirname "$0")/data/gpu_stages_lib.sh"
setup_tokens 40
WRAP=$TOP/tests/integration/data/standin_gpu_contention.sh
models=(--model gemma3:4b=4000 --model router:v17=4200 --model nomic-embed-text=300
    --model keeper=100 --loaded gemma3:4b --loaded router:v17
    --loaded nomic-embed-text --loaded keeper --unload-delay 0.3 --race-delay 1.5
    --race-models gemma3:4b)

run_train() {
	local out=$1; shift
	set +e
	STANDIN_OLLAMA=$URL STANDIN_ALLOW=nomic-embed-text:latest,keeper:latest \
	STANDIN_LOAD_S=2.5 STANDIN_LAUNCHES=$TEST_TMP/$out.launches \
	"$CTL" stage train -w "$TEST_TMP/$out" engine=tiny base="$BASE" tokens="$TOKENS" \
	    max_steps=4 gradient_accumulation_steps=1 lora_r=4 python="$WRAP" \
	    ollama_url="$URL" embedding_model=nomic-embed-text keep_loaded=keeper \
	    launch_backoff=0.2 launch_backoff_max=1 unload_wait=5 "$@" \
	    >"$TEST_TMP/$out.out" 2>&1
	rc=$?
	set -e
}

# --- 1: the race lasts three reloads; the fourth launch gets the GPU.
start_standin "${models[@]}" --race 3
run_train ok
cat "$TEST_TMP/ok.out"
[ "$rc" -eq 0 ] || die "train failed (exit $rc) although the race ends after 3 reloads"
n=$(grep -c 'died before the training loop started' "$TEST_TMP/ok.out" || true)
[ "$n" -eq 3 ] || die "expected 3 launches to die before the loop, saw $n"
[ "$(wc -l <"$TEST_TMP/ok.launches")" -eq 4 ] || die "expected 4 launches"
[ "$(log_count reload gemma3:4b)" -eq 3 ] || die "the stand-in reloaded gemma3:4b $(log_count reload gemma3:4b) times"
[ "$(log_count unload gemma3:4b)" -eq 4 ] || die "gemma3:4b evicted $(log_count unload gemma3:4b) times, want 4 (before each launch)"
[ "$(log_count unload router:v17)" -ge 1 ] || die "router:v17 was never evicted"
[ "$(log_count unload nomic-embed-text:latest)" -eq 0 ] || die "the embedding model was evicted"
[ "$(log_count unload keeper:latest)" -eq 0 ] || die "a keep_loaded model was evicted"
grep -q '^job.artifact {"name":"adapter"' "$TEST_TMP/ok.out" || die "no adapter artifact"
# The base's identity beside the adapter, for merge to check: config.json's
# digest (sha256sum's) and the tensor index's, which merge recomputes.
ad=$(sed -n 's/^job.artifact {"name":"adapter","path":"\([^"]*\)".*/\1/p' "$TEST_TMP/ok.out" | tail -n 1)
[ -f "$ad/pipeline-base.json" ] || die "no pipeline-base.json beside the adapter ($ad)"
"$PYD" - "$ad/pipeline-base.json" "$(sha256sum "$BASE/config.json" | cut -c1-64)" <<'PY' || die "pipeline-base.json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config_sha256"] == sys.argv[2], d
assert len(d["tensors_sha256"]) == 64 and d["base"].endswith("/base"), d
PY
"$CTL" stage merge base="$BASE" adapter="$ad" output="$TEST_TMP/merged" >"$TEST_TMP/merge.out" 2>&1 ||
    { cat "$TEST_TMP/merge.out"; die "merge refused the adapter on the base it was trained on"; }
grep -q 'keeping nomic-embed-text:latest loaded' "$TEST_TMP/ok.out" || die "no log of the kept embedding model"
grep -qF '\"launches\":4' "$TEST_TMP/ok.out" || die "the train value does not count 4 launches"
cleanup; STANDIN_PID=

# --- 2: a race that never stops ends after launch_retries relaunches.
start_standin "${models[@]}" --race forever
run_train never launch_retries=2
cat "$TEST_TMP/never.out"
[ "$rc" -ne 0 ] || die "train succeeded against a race that never stops"
grep -q 'stage train: failed: train: the training loop never started: 3 launches in a row died before it (launch_retries = 2)' \
    "$TEST_TMP/never.out" || die "no clear failure naming launch_retries"
grep -q 'failed:.*exited with status 3 (out of memory).*gemma3:4b is resident' "$TEST_TMP/never.out" ||
    die "the failure does not carry the last launch's out-of-memory"
[ "$(wc -l <"$TEST_TMP/never.launches")" -eq 3 ] || die "expected exactly 3 launches"
[ "$(log_count unload nomic-embed-text:latest)" -eq 0 ] || die "the embedding model was evicted"
grep -q '"name":"adapter"' "$TEST_TMP/never.out" && die "an adapter appeared"
echo "ok"
