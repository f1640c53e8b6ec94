#!/bin/bash
# bake/llama.sh: the bake stage end to end through the openai backend
# against a real llama-server serving the tiny fixture GGUF: every pass of
# every case stored, aggregates that agree with the per-case values, the
# case-set digest stable, a disabled capability not runnable, the server's
# context checked before the first case, and a prompt longer than the
# context reported as a bake error naming the case, never as a miss (G01).
set -eu
: "${TOP:?}" "${TEST_TMP:?}"
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/bake.sh"
VLLM_PID=
trap 'stop_llama; [ -n "$VLLM_PID" ] && kill "$VLLM_PID" 2>/dev/null' EXIT

tiny_gguf "$TEST_TMP/tiny.q8.gguf"
start_llama "$TEST_TMP/tiny.q8.gguf" 1024 1
cd "$TEST_TMP"

common=(backend=openai "url=$LLAMA_URL" model=tiny "cases=$BAKE_DATA/cases.jsonl"
    "system=$BAKE_DATA/system.txt" "capabilities=$BAKE_DATA/capabilities.txt"
    "stats=$BAKE_DATA/stats.json" num_ctx=1024 max_tokens=96 disabled=play_music)

# 1. A whole bake, three passes.
stage bake "${common[@]}" passes=3 >bake1.out 2>&1 || { cat bake1.out; fail "bake failed"; }
values bake1.out >v1.json
/usr/bin/python3 - "$TEST_TMP/v1.json" "$BAKE_DATA/cases.jsonl" "$BAKE_DATA/stats.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
cases = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
corpus = set(json.load(open(sys.argv[3]))["corpus_keys"])
s = json.loads(v["bake.summary"])
assert s["passes"] == 3 and s["cases"] == len(cases), s
assert s["not_runnable"] == 1 and s["runnable"] == len(cases) - 1, s
assert s["complete"] is True and s["errors"] == 0, s
assert s["server_ctx"] == 1024 and s["backend"] == "openai", s
assert s["speed_comparable"] is False, "openai cannot prove GPU placement"
ok = held_k = held_n = 0
for c in cases:
    r = json.loads(v["case/" + c["id"]])
    # held out: no train key, or one absent from the corpus keys
    assert r["held_out"] == (c.get("train_key") not in corpus), (c, r)
    if c.get("expect", {}).get("capability") == "play_music":
        assert r["runnable"] is False and r["passes"] == [], r
        continue
    assert r["runnable"] is True and r["runs"] == 3 and len(r["passes"]) == 3, r
    for p in r["passes"]:
        assert p["outcome"] in ("pass", "miss", "forbidden", "unparseable"), p
        assert p["s"] > 0, p
    passed = sum(p["outcome"] == "pass" for p in r["passes"])
    assert r["passed"] == passed, r
    # Greedy decoding, no prompt cache, one slot: every pass the same.
    assert r["varied"] is False, r
    ok += passed
    if r["held_out"]:
        held_k += passed
        held_n += 1
    row = s["rows"][c["id"]]
    assert row[1] == 3 and bin(row[2]).count("1") == passed, (row, r)
assert abs(s["overall"]["acc"] - ok / 3 / s["runnable"]) < 1e-9, s["overall"]
assert s["held_out_cases"] == held_n, s
assert abs(s["held_out"]["k"] - held_k / 3) < 1e-9, s["held_out"]
assert 0 <= s["overall"]["lo"] <= s["overall"]["acc"] <= s["overall"]["hi"] <= 1
assert set(s["per_capability"]) >= {"open_folder", "search", "guard:delete_file"}, s
print("bake 1:", s["overall"], "case set", s["case_set"][:12])
PY
grep -q '^job.artifact {"name":"results"' bake1.out || fail "no results artifact"

# 2. The same cases again, one pass: the same case-set digest, the same
# answers (temperature 0, fixed seed).
stage bake "${common[@]}" passes=1 >bake2.out 2>&1 || { cat bake2.out; fail "bake 2 failed"; }
values bake2.out >v2.json
/usr/bin/python3 - "$TEST_TMP/v1.json" "$TEST_TMP/v2.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sa, sb = json.loads(a["bake.summary"]), json.loads(b["bake.summary"])
assert sa["case_set"] == sb["case_set"]
for k in a:
    if k.startswith("case/"):
        pa, pb = json.loads(a[k])["passes"], json.loads(b[k])["passes"]
        if pa:
            assert pa[0]["outcome"] == pb[0]["outcome"] and pa[0]["got"] == pb[0]["got"], k
PY

# 2b. Requests in flight together (the server queues them on its one
# slot): the same answers, every pass stored in its place.
stage bake "${common[@]}" passes=2 concurrency=3 >bake3.out 2>&1 || { cat bake3.out; fail "concurrent bake failed"; }
values bake3.out >v4.json
/usr/bin/python3 - "$TEST_TMP/v1.json" "$TEST_TMP/v4.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in a:
    if k.startswith("case/"):
        pa, pb = json.loads(a[k])["passes"], json.loads(b[k])["passes"]
        assert len(pb) == (2 if pa else 0), (k, pb)
        for x in pb:
            assert (x["outcome"], x["got"]) == (pa[0]["outcome"], pa[0]["got"]), (k, x, pa[0])
assert json.loads(b["bake.summary"])["concurrency"] == 3
PY

# 3. The server's context is checked before the first case.
if stage bake "${common[@]/num_ctx=1024/num_ctx=4096}" >ctx.out 2>&1; then
	cat ctx.out; fail "a bake needing 4096 tokens ran against a 1024-token server"
fi
grep -q "less than num_ctx 4096" ctx.out || { cat ctx.out; fail "context refusal not explained"; }
grep -q "job.value" ctx.out && fail "values stored before the context check"

# 4. A prompt longer than the context: a bake error naming the case.
/usr/bin/python3 - "$BAKE_DATA/cases.jsonl" >long.jsonl <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()][:3]
print("".join(lines), end="")
long = " ".join("please open the folder named docs number %d" % i for i in range(400))
print(json.dumps({"id": "long-1", "kind": "route", "user": long,
    "expect": {"capability": "open_folder", "args": {"path": "docs"}}}))
PY
if stage bake "${common[@]/cases=*/cases=$TEST_TMP/long.jsonl}" passes=2 >long.out 2>&1; then
	cat long.out; fail "a truncated prompt did not fail the bake"
fi
grep -q "case long-1, .*long.jsonl:4: truncated" long.out || { tail -5 long.out; fail "truncation not reported with the case and line"; }
values long.out >v3.json
/usr/bin/python3 - "$TEST_TMP/v3.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
r = json.loads(v["case/long-1"])
assert [p["outcome"] for p in r["passes"]] == ["error", "error"], r
assert "exceed" in r["passes"][0]["why"], r
s = json.loads(v["bake.summary"])
assert s["complete"] is False and s["errors"] == 2, s
# the other cases were still scored as the model's answers
assert json.loads(v["case/open-1"])["passes"][0]["outcome"] != "error"
PY
# 5. vLLM's way: no /props, the context from /v1/models max_model_len,
# and its flat error envelope for an over-long prompt.
/usr/bin/python3 "$TOP/tests/standins/vllm_standin.py" --upstream "$LLAMA_URL" --max-model-len 1024 \
    --port-file "$TEST_TMP/vllm.port" &
VLLM_PID=$!
for _ in $(seq 1 100); do [ -s vllm.port ] && break; sleep 0.05; done
VURL=http://127.0.0.1:$(cat vllm.port)
v=("${common[@]/url=*/url=$VURL}")
stage bake "${v[@]}" passes=1 >vllm.out 2>&1 || { cat vllm.out; fail "bake via the vLLM stand-in"; }
values vllm.out | /usr/bin/python3 -c '
import json, sys
s = json.loads(json.load(sys.stdin)["bake.summary"])
assert s["server_ctx"] == 1024 and s["complete"], s'
if stage bake "${v[@]/cases=*/cases=$TEST_TMP/long.jsonl}" passes=1 >vllm-long.out 2>&1; then
	cat vllm-long.out; fail "vLLM's context refusal was scored"
fi
grep -q "case long-1.*truncated: HTTP 400: This model's maximum context length is 1024" vllm-long.out ||
    { tail -3 vllm-long.out; fail "vLLM's refusal not reported as truncation"; }
echo "bake/llama: ok"
