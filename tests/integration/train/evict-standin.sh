#!/bin/bash
# train/evict-standin.sh: the train stage against the G21 reload race
# on the Ollama STAND-IN (tests/standins/ollama_standin.py, not Ollama),
# whose reloads are instant, a speed a CPU server cannot reach (the same
# race against the real Ollama is train/evict-retry.sh). It reloads an
# evicted model onto the GPU 1.5 s after each eviction; the trainer (the
# real jobs/train.py, tiny engine, behind the GPU-contention stand-in) dies
# like a CUDA OOM when a foreign model is resident during its load. The stage must
#  1. evict, relaunch and succeed within launch_retries while the race
#     lasts three rounds, never evicting the embedding model or keep_loaded;
#  2. fail clearly after launch_retries when the race never stops.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
setup_tokens 40
models=(--model gemma3:4b=4000 --model router:v17=4200 --model nomic-embed-text=300
    --model keeper=100 --loaded gemma3:4b --loaded router:v17
    --loaded nomic-embed-text --loaded keeper --unload-delay 0.3 --race-delay 1.5
    --race-models gemma3:4b)

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
