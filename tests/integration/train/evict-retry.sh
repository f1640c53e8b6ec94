#!/bin/bash
# train/evict-retry.sh: the train stage against the G21 reload race on
# the REAL Ollama (tests/tools/ollama.sh; tests/lib.sh: ollama_start)
# serving four tiny Gemma 3 models (the fixture GGUF at four seeds, so four
# runners): gemma3:4b, router:v17, nomic-embed-text (the embedding model)
# and keeper (keep_loaded). Production traffic is a client process
# (tests/helpers/race_client.py) that requests gemma3:4b again 0.5 s after each time
# it is evicted, and real Ollama's scheduler reloads it. The trainer is the
# real jobs/train.py (tiny engine) behind the GPU-contention STAND-IN
# (tests/standins/gpu_contention_standin.sh: this machine has no GPU), which dies
# like a CUDA OOM when a model other than the kept two is in /api/ps during
# its load. The stage must
#  1. evict (keep_alive 0, then wait for /api/ps), relaunch and succeed
#     within launch_retries while the race lasts three reloads, never
#     evicting the embedding model or keep_loaded;
#  2. the same with a client that asks for another num_ctx (512) than the
#     model was loaded with (Ollama 0.30 and later reload a runner for
#     that alone: server/sched.go, needsReload);
#  3. fail clearly after launch_retries when the traffic never stops.
# The same race at stand-in speed (instant reloads): train/evict-standin.
# run.sh: alone (a 0.5 s reload race on the real Ollama).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
. "$TOP/tests/lib/bake.sh"
. "$TOP/tests/lib/evict.sh"
trap 'race_stop; ollama_stop' EXIT
setup_tokens 40
evict_setup
reloads() { grep -c '"event": "reload"' "$TEST_TMP/$1.race" || true; }
evictions() { grep -c "train: evicting $2 " "$TEST_TMP/$1.out" || true; }

# --- 1: the traffic reloads gemma3:4b three times; the fourth launch wins.
load_all
race_start ok 3
run_train ok
cat "$TEST_TMP/ok.out"
cat "$TEST_TMP/ok.race"
[ "$rc" -eq 0 ] || die "train failed (exit $rc) although the traffic stops after 3 reloads"
[ "$(reloads ok)" -eq 3 ] || die "real Ollama reloaded gemma3:4b $(reloads ok) times, want 3"
n=$(grep -c 'died before the training loop started' "$TEST_TMP/ok.out" || true)
[ "$n" -eq 3 ] || die "expected 3 launches to die before the loop, saw $n"
[ "$(wc -l <"$TEST_TMP/ok.launches")" -eq 4 ] || die "expected 4 launches"
[ "$(evictions ok gemma3:4b)" -eq 4 ] || die "gemma3:4b evicted $(evictions ok gemma3:4b) times, want 4 (before each launch)"
[ "$(evictions ok router:v17)" -ge 1 ] || die "router:v17 was never evicted"
[ "$(evictions ok nomic-embed-text:latest)" -eq 0 ] || die "the embedding model was evicted"
[ "$(evictions ok keeper:latest)" -eq 0 ] || die "a keep_loaded model was evicted"
ps=$(curl -s "$URL/api/ps")
echo "$ps" | grep -q '"name":"nomic-embed-text:latest"' || die "the embedding model is no longer loaded: $ps"
echo "$ps" | grep -q '"name":"keeper:latest"' || die "keeper is no longer loaded: $ps"
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
race_stop

# --- 2: the race again, the client asking for num_ctx 512 each time.
load_all
race_start ctx 3 512
run_train ctx
cat "$TEST_TMP/ctx.race"
[ "$rc" -eq 0 ] || { cat "$TEST_TMP/ctx.out"; die "train failed (exit $rc) against a client with another num_ctx"; }
[ "$(reloads ctx)" -eq 3 ] || die "real Ollama reloaded gemma3:4b $(reloads ctx) times with num_ctx 512, want 3"
[ "$(wc -l <"$TEST_TMP/ctx.launches")" -eq 4 ] || die "expected 4 launches with num_ctx 512"
[ "$(evictions ctx nomic-embed-text:latest)" -eq 0 ] || die "the embedding model was evicted"
# Each reload put gemma3:4b back at the client's context (read from
# /api/ps by the client right after it): the evictions raced a client with
# another num_ctx. (After the fourth launch's eviction the client, done
# with its three rounds, leaves it unloaded, as in 1.)
/usr/bin/python3 - "$TEST_TMP/ctx.race" <<'PY' || die "the client's reloads were not at num_ctx 512"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"reload"' in l]
assert len(r) == 3 and all(x["context_length"] == 512 for x in r), r
PY
race_stop

# --- 3: traffic that never stops: launch_retries relaunches, then a clear failure.
load_all
race_start never forever
run_train never launch_retries=2
cat "$TEST_TMP/never.out"
[ "$rc" -ne 0 ] || die "train succeeded against traffic that never stops"
grep -q 'stage train: failed: train: the training loop never started: 3 launches in a row died before it (launch_retries = 2)' \
    "$TEST_TMP/never.out" || die "no clear failure naming launch_retries"
grep -q 'failed:.*exited with status 3 (out of memory).*gemma3:4b is resident' "$TEST_TMP/never.out" ||
    die "the failure does not carry the last launch's out-of-memory"
[ "$(wc -l <"$TEST_TMP/never.launches")" -eq 3 ] || die "expected exactly 3 launches"
[ "$(evictions never nomic-embed-text:latest)" -eq 0 ] || die "the embedding model was evicted"
grep -q '"name":"adapter"' "$TEST_TMP/never.out" && die "an adapter appeared"
echo "ok"
