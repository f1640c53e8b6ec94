#!/bin/bash
# train/tiny-job-resume: kill -9 the tiny trainer at step 37, resume it from
# checkpoint 25 (the newest complete one) through PL_RESUME_FROM, and the
# final adapter is bit-identical to an uninterrupted run's; every step
# 1..48 appears in the union of the two segments' loss metrics, and the
# steps run twice (26..37) report the same loss both times.  A resume with a
# changed learning rate, or from a checkpoint without its marker, is refused
# with exit 2 before any step runs.  LoRA dropout is on (0.1), so the torch
# RNG state must come back with the checkpoint too, not only the adapter,
# optimizer and data position.  What a save killed half-way leaves
# (checkpoint-N.tmp-PID, checkpoint-N.old-PID) is swept at the resume.
set -eu
: "${TOP:?}" "${TEST_TMP:?}"
PY=/usr/bin/python3
J=$TOP/jobs
cd "$TEST_TMP"
. "$TOP/tests/lib.sh"

$PY "$TOP/tests/fixtures/gen_gemma3.py" base >/dev/null
$PY "$TOP/tests/fixtures/gen_corpus.py" corpus.jsonl --n 24
printf '{"base":"%s/base","corpus":"%s/corpus.jsonl","output_dir":"%s/tok"}\n' \
    "$TEST_TMP" "$TEST_TMP" "$TEST_TMP" >tok.json
$PY "$J/tokenize_corpus.py" --config tok.json --events tok.ev || { cat tok.ev; fail "tokenize"; }

common='"engine":"tiny","base":"'$TEST_TMP'/base","tokens":"'$TEST_TMP'/tok/tokens.npz",
 "lora_r":8,"lora_alpha":16,"lora_dropout":0.1,"warmup_steps":5,"gradient_accumulation_steps":1,
 "num_train_epochs":2,"save_steps":25,"seed":3407'
echo "{$common,\"learning_rate\":0.01}" >train.json
echo "{$common,\"learning_rate\":0.01,\"test_stall_at_step\":37}" >stall.json
echo "{$common,\"learning_rate\":0.02}" >changed.json

# The uninterrupted run.
mkdir -p a b
PL_WORKDIR=$TEST_TMP/a $PY "$J/train.py" --config train.json --events a.ev >/dev/null \
    || { tail -n 3 a.ev; fail "uninterrupted run"; }

# The interrupted one: it stalls after step 37's events; kill -9 it there.
PL_WORKDIR=$TEST_TMP/b $PY "$J/train.py" --config stall.json --events b.ev >/dev/null 2>&1 &
pid=$!
for i in $(seq 600); do
	grep -q '"type":"progress","step":37,' b.ev 2>/dev/null && break
	kill -0 $pid 2>/dev/null || { tail -n 3 b.ev; fail "the trainer died before step 37"; }
	sleep 0.1
done
grep -q '"type":"progress","step":37,' b.ev || fail "step 37 never came"
kill -9 $pid
wait $pid 2>/dev/null || true
! grep -q '"step":38' b.ev || fail "the trainer ran past 37"
[ ! -e b/adapter ] || fail "a killed run left an adapter"

ck=$($PY "$J/pljob" newest-checkpoint b/checkpoints)
[ "$ck" = b/checkpoints/checkpoint-25 ] || fail "newest complete checkpoint is $ck, want 25"

# Refusals first: a changed configuration, an incomplete checkpoint.
set +e
PL_WORKDIR=$TEST_TMP/b PL_RESUME_FROM=$TEST_TMP/$ck $PY "$J/train.py" --config changed.json --events bad1.ev >/dev/null 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "resume with a changed config exited $rc, want 2"
grep '"type":"error"' bad1.ev | grep -q "different configuration (learning_rate)" || { cat bad1.ev; fail "bad1 message"; }
! grep -q '"loop_started"' bad1.ev || fail "a refused resume reported loop_started"
cp -r "$ck" nomarker && rm nomarker/COMPLETE
set +e
PL_WORKDIR=$TEST_TMP/b PL_RESUME_FROM=$TEST_TMP/nomarker $PY "$J/train.py" --config train.json --events bad2.ev >/dev/null 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "resume from an unmarked checkpoint exited $rc, want 2"
grep '"type":"error"' bad2.ev | grep -q "not a complete checkpoint: no COMPLETE marker" || { cat bad2.ev; fail "bad2 message"; }

# What a trainer killed inside a save leaves behind: an unfinished
# checkpoint-50.tmp-PID, the previous copy checkpoint-25.old-PID beside its
# replacement, a complete checkpoint-10.old-PID whose checkpoint-10 never
# moved in (restored), and an incomplete checkpoint-11.old-PID (removed).
mkdir b/checkpoints/checkpoint-50.tmp-4242 && echo partial >b/checkpoints/checkpoint-50.tmp-4242/adapter.bin
cp -r "$ck" b/checkpoints/checkpoint-25.old-4243
cp -r "$ck" b/checkpoints/checkpoint-10.old-4244
cp -r nomarker b/checkpoints/checkpoint-11.old-4245

# The resume, appending to the same events file as the daemon would.
PL_WORKDIR=$TEST_TMP/b PL_RESUME_FROM=$TEST_TMP/$ck $PY "$J/train.py" --config train.json --events b.ev >/dev/null \
    || { tail -n 3 b.ev; fail "resumed run"; }
grep -q '"type":"loop_started","step":26,' b.ev || fail "the resume did not start at step 26"
left=$(cd b/checkpoints && ls -d *.tmp-* *.old-* 2>/dev/null || true)
[ -z "$left" ] || fail "leftovers of interrupted saves survived the resume: $left"
$PY "$J/pljob" verify-checkpoint b/checkpoints/checkpoint-10 || fail "checkpoint-10.old-4244 was not restored"
[ ! -e b/checkpoints/checkpoint-11 ] || fail "an incomplete .old copy was restored"

cmp a/adapter/adapter_model.safetensors b/adapter/adapter_model.safetensors \
    || fail "the resumed adapter differs from the uninterrupted run's"
cmp a/adapter/adapter_config.json b/adapter/adapter_config.json || fail "adapter configs differ"

$PY - <<'PY'
import json
a = [json.loads(l) for l in open("a.ev")]
b = [json.loads(l) for l in open("b.ev")]
la = {e["step"]: e["value"] for e in a if e["type"] == "metric" and e["name"] == "loss"}
seen = {}
for e in b:
    if e["type"] == "metric" and e["name"] == "loss":
        seen.setdefault(e["step"], []).append(e["value"])
assert sorted(la) == list(range(1, 49)), sorted(la)[:5]
assert sorted(seen) == list(range(1, 49)), "union of steps: %s" % sorted(seen)
twice = sorted(s for s, v in seen.items() if len(v) > 1)
assert twice == list(range(26, 38)), twice
for s, v in seen.items():
    assert all(x == la[s] for x in v), "step %d: loss %s, uninterrupted %s" % (s, v, la[s])
done = [e for e in b if e["type"] == "done"][-1]
assert abs(done["train_loss"] - sum(la.values()) / 48) < 1e-9, "train_loss covers every segment (G30)"
print("steps 1..48 each present; 26..37 repeated with identical losses; train_loss spans both segments")
PY
echo "train/tiny-job-resume: OK"
