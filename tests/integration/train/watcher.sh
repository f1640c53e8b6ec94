#!/bin/bash
# train/watcher.sh: with evict_during_training, a model that another
# client loads onto the GPU while the trainer runs is evicted by the train
# stage's watcher; the embedding model is left alone. Without the watcher
# the same load stays resident (so it is the watcher that evicted it).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
setup_tokens 40
start_standin --model router:v17=4200 --model nomic-embed-text=300 \
    --loaded nomic-embed-text --unload-delay 0.2

# train_with_load NAME KEYS...: train, and once the loop has started load
# router:v17 the way a production client would; wait for the stage.
train_with_load() {
	local name=$1; shift
	"$CTL" stage train -w "$TEST_TMP/$name" engine=tiny base="$BASE" tokens="$TOKENS" \
	    max_steps=100 gradient_accumulation_steps=1 lora_r=4 ollama_url="$URL" \
	    embedding_model=nomic-embed-text "$@" >"$TEST_TMP/$name.out" 2>&1 &
	local pid=$!
	local ev=$TEST_TMP/$name/.pl/launch-1/events
	for _ in $(seq 300); do
		grep -q '"type":"loop_started"' "$ev" 2>/dev/null && break
		sleep 0.05
	done
	grep -q '"type":"loop_started"' "$ev" || die "$name: the training loop never started"
	curl -s -X POST "$URL/api/generate" -d '{"model":"router:v17","keep_alive":-1}' >/dev/null
	wait "$pid" || { cat "$TEST_TMP/$name.out"; die "$name: train failed"; }
	grep -q '"type":"done"' "$ev" || die "$name: the trainer did not finish after the load"
}

train_with_load watched evict_during_training=yes watch_interval=0.2
grep -v '^job.metric\|^job.progress' "$TEST_TMP/watched.out"
[ "$(log_count load router:v17)" -eq 1 ] || die "router:v17 was not loaded during training"
[ "$(log_count unload router:v17)" -ge 1 ] || die "the watcher did not evict router:v17"
grep -q 'watcher: router:v17 reappeared during training; evicted it' "$TEST_TMP/watched.out" ||
    die "no log of the watcher's eviction"
[ "$(log_count unload nomic-embed-text:latest)" -eq 0 ] || die "the embedding model was evicted"
# The eviction came while the trainer ran, not after it ended.
t_unload=$(grep '"event": "unload", "model": "router:v17"' "$STANDIN_LOG" | head -1 | sed 's/.*"t": \([0-9.]*\).*/\1/')
t_done=$(stat -c %Y "$TEST_TMP/watched/adapter")
awk -v u="$t_unload" -v d="$t_done" 'BEGIN { exit !(u <= d + 1) }' || die "router:v17 evicted after training ($t_unload > $t_done)"

# Without the watcher the model loaded mid-run stays.
train_with_load unwatched
[ "$(log_count load router:v17)" -eq 2 ] || die "router:v17 was not loaded again"
u_before=$(log_count unload router:v17)
curl -s "$URL/api/ps" | grep -q '"name": "router:v17"' || die "router:v17 is not resident without the watcher"
grep -q 'reappeared during training' "$TEST_TMP/unwatched.out" && die "a watcher ran although evict_during_training is off"
[ "$(log_count unload router:v17)" -eq "$u_before" ] || die "router:v17 evicted without the watcher"
echo "ok"
