#!/bin/bash
# ollama/register-promote.sh: register, bake and promote against the REAL
# Ollama server (tests/tools/ollama.sh, the pinned release, started by
# tests/lib.sh: ollama_start) serving the tiny Gemma 3 fixture GGUF:
#   - register v1 from a GGUF: the blob uploaded, the tag created from
#     etc/Modelfile.tmpl (its TEMPLATE, stop and PARAMETERs read back from
#     /api/show), the uploaded, weights and manifest digests recorded;
#   - the train/serve template check: training examples (tokenize's
#     tokens.npz of a corpus with system prompts, on the fixture's base)
#     sent through the tag count as many prompt tokens as tokenize counted
#     with etc/Modelfile.tmpl; with the reference Modelfile
#     (tests/fixtures/Modelfile.reference, the system prompt as a user turn
#     of its own) register fails naming both counts, the tag and the file;
#   - register v2 from the same GGUF with previous_tag = v1: refused (the
#     weights layer is the previous tag's, G24); from another GGUF:
#     accepted, after unloading the tag that was loaded;
#   - a bake through the ollama backend: every case its own /api/chat with
#     num_ctx, the JSON schema in format and temperature 0; /api/ps shows
#     the runner at num_ctx; on this CPU server size_vram < size, so the
#     speed is marked not comparable (G22);
#   - num_ctx above the model's trained context: refused before any case;
#   - a prompt longer than num_ctx: what this Ollama does with it (with
#     truncate:false, an HTTP 400 "the input length exceeds the context
#     length"; without it, the runner cuts the prompt and crashes: HTTP
#     500) is a bake error naming the case, never a miss (G01); so is, on
#     0.30 and later, the 200 with the prompt cut that a request without
#     truncate:false gets (drop_truncate_proxy.py forwards the bake's
#     requests to the real server in that shape);
#   - gate with promote = yes copies v2 to the alias through /api/copy and
#     reads its digest back, equal to v2's, after unloading the alias.
# What only the stand-in can show (a server that picks the GGUF's template,
# a model half in VRAM, a server that cuts a prompt and answers 200) is in
# ollama/register-bake-standin.sh.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/bake.sh"
set -e
trap 'ollama_stop' EXIT
cd "$TEST_TMP"

tiny_gguf "$TEST_TMP/v1.gguf" 1234
tiny_gguf "$TEST_TMP/v2.gguf" 4321
cmp -s v1.gguf v2.gguf && fail "the two fixture GGUFs are identical"
# Training's view of the prompts: tokenize on v1's base (its chat template).
/usr/bin/python3 "$TOP/tests/fixtures/gen_corpus.py" corpus.jsonl --n 12 >/dev/null
"$PCTL" stage tokenize -w "$TEST_TMP/tok" base="$TEST_TMP/tiny-1234" corpus="$TEST_TMP/corpus.jsonl" \
    >tokenize.out 2>&1 || { cat tokenize.out; fail "tokenize"; }
grep -q '^job.artifact {"name":"corpus"' tokenize.out || fail "tokenize did not register its corpus"
TOK=(tokens="$TEST_TMP/tok/tokens.npz" corpus="$TEST_TMP/corpus.jsonl")
ollama_start
version=$("$TOP/tests/tools/ollama.sh" --version)
note "real Ollama $version on $OURL"
# How the server's log names a runner start.
case $version in
0.24.*) runner_start='msg="starting runner".*--model' ;;
*) runner_start='msg="starting llama-server"' ;;
esac
runner_starts() {	# runner_starts FROM-LINE: runner starts logged after that line
	tail -n +"$(($1 + 1))" ollama/serve.log | grep -c "$runner_start" || true
}

tag_digest() {	# tag_digest TAG: the manifest digest /api/tags lists
	curl -s "$OURL/api/tags" | /usr/bin/python3 -c '
import json, sys
print(([m["digest"] for m in json.load(sys.stdin)["models"] if m["name"] == sys.argv[1]] + [""])[0])' "$1"
}
loaded() {	# loaded TAG: exit 0 when /api/ps lists TAG
	curl -s "$OURL/api/ps" | /usr/bin/python3 -c '
import json, sys
sys.exit(0 if any(m["name"] == sys.argv[1] for m in json.load(sys.stdin)["models"]) else 1)' "$1"
}
ollama_modelfile "$TOP/etc/Modelfile.tmpl" Modelfile.etc
ollama_modelfile "$TOP/tests/fixtures/Modelfile.reference" Modelfile.reference
reg=(modelfile="$TEST_TMP/Modelfile.etc" "url=$OURL" num_ctx=1024)

# 1. Register v1, its template checked against training.
stage register gguf="$TEST_TMP/v1.gguf" tag=router:v1 "${reg[@]}" "${TOK[@]}" >reg1.out 2>&1 ||
    { cat reg1.out; fail "register v1"; }
[ "$(value reg1.out register.template_checked)" = yes ] || fail "the template was not checked"
[ "$(grep -c 'template check: example .*prompt tokens served and trained' reg1.out)" -eq 4 ] ||
    { cat reg1.out; fail "not 4 examples checked"; }
grep -q "template check: example .* (the longest)" reg1.out || fail "the longest example not checked"
loaded router:v1 && fail "the template check left router:v1 loaded"
sha1=$(sha256sum v1.gguf | cut -d' ' -f1)
[ "$(value reg1.out register.uploaded)" = "$sha1" ] || fail "uploaded digest not recorded"
w1=$(value reg1.out register.weights)
case $version in
# The cgo engine stores the GGUF as uploaded; 0.30 and later may rewrite it.
0.24.*) [ "$w1" = "$sha1" ] || fail "weights digest is not the upload's" ;;
*) [ -f "$TEST_TMP/ollama/models/blobs/sha256-$w1" ] || fail "weights digest $w1 is no blob of the server" ;;
esac
[ "$(value reg1.out register.server_version)" = "$version" ] || fail "server version not recorded"
grep -q "Ollama $version at $OURL: profile .*, a tested version" reg1.out || { cat reg1.out; fail "profile not named"; }
[ "$(value reg1.out register.served_template)" = modelfile ] || fail "the Modelfile TEMPLATE does not serve"
m1=$(value reg1.out register.manifest)
[ -n "$m1" ] && [ "$(tag_digest router:v1)" = "$m1" ] || fail "manifest digest $m1 differs from /api/tags"
[ -f "$TEST_TMP/ollama/models/blobs/sha256-$sha1" ] || fail "blob not in the server's OLLAMA_MODELS"
# What the server serves under the tag is the Modelfile's.
curl -s "$OURL/api/show" -d '{"model":"router:v1"}' >show1.json
/usr/bin/python3 - show1.json "$TOP/etc/Modelfile.tmpl" <<'PY'
import json, re, sys
s = json.load(open(sys.argv[1]))
mf = open(sys.argv[2]).read()
tmpl = re.search(r'TEMPLATE """(.*?)"""', mf, re.S).group(1)
assert s["template"].rstrip() == tmpl.rstrip(), (s["template"], tmpl)
params = s["parameters"]
assert re.search(r'^stop\s+"<end_of_turn>"$', params, re.M), params
assert re.search(r'^num_ctx\s+1024$', params, re.M), params
assert re.search(r'^top_k\s+64$', params, re.M), params
assert s["details"]["family"] == "gemma3", s["details"]
PY

# 1b. The reference Modelfile renders the system prompt as a user turn of
# its own: more prompt tokens than training had. Refused, both counts named.
if stage register gguf="$TEST_TMP/v1.gguf" tag=router:ref "${reg[@]/modelfile=*/modelfile=$TEST_TMP/Modelfile.reference}" \
    "${TOK[@]}" >ref.out 2>&1; then
	cat ref.out; fail "the reference Modelfile's template skew was not caught"
fi
grep -q "router:ref renders training example .* as [0-9]* prompt tokens, tokenize counted [0-9]* (.*tokens.npz): the template that serves (TEMPLATE of .*/Modelfile.reference) is not the template that trained" ref.out ||
    { cat ref.out; fail "the template skew not explained"; }
# Neither tokens nor tokens = none: refused before anything is created.
if stage register gguf="$TEST_TMP/v1.gguf" tag=router:nt "${reg[@]}" >nt.out 2>&1; then
	cat nt.out; fail "register without tokens ran"
fi
grep -q "tokens: no tokenize tokens.npz to check the served template against" nt.out ||
    { cat nt.out; fail "missing tokens not explained"; }
reg+=(tokens=none)

# 2. The same weights under a new tag, with v1 as the previous version:
# refused, as the v3-from-v2 sed mistake should have been (G24).
if stage register gguf="$TEST_TMP/v1.gguf" tag=router:v2 previous_tag=router:v1 \
    "${reg[@]}" >reg2.out 2>&1; then
	cat reg2.out; fail "the previous version's weights were registered as v2"
fi
grep -q "the previous version's" reg2.out || { cat reg2.out; fail "refusal not explained"; }
# Re-registering v2 over a loaded tag unloads it first: loaded with
# keep_alive -1, nothing but the stage unloads it.
curl -s "$OURL/api/generate" -d '{"model":"router:v2","keep_alive":-1}' >/dev/null
loaded router:v2 || fail "router:v2 did not load"
stage register gguf="$TEST_TMP/v2.gguf" tag=router:v2 previous_tag=router:v1 \
    "${reg[@]}" >reg3.out 2>&1 || { cat reg3.out; fail "register v2"; }
grep -q "router:v2 exists (weights $(echo "$sha1" | cut -c1-12)); unloading it first" reg3.out ||
    { cat reg3.out; fail "the old router:v2 not named before the create"; }
loaded router:v2 && fail "the loaded router:v2 was not unloaded"
m2=$(value reg3.out register.manifest)
[ "$m2" != "$m1" ] || fail "v2 has v1's manifest"
case $version in
0.24.*) [ "$(value reg3.out register.weights)" = "$(sha256sum v2.gguf | cut -d' ' -f1)" ] || fail "v2's weights" ;;
*) [ "$(value reg3.out register.weights)" != "$w1" ] || fail "v2's weights are v1's" ;;
esac

# 3. Bake through the ollama backend.
bake=(backend=ollama "url=$OURL" model=router:v2 "cases=$BAKE_DATA/cases.jsonl"
    "system=$BAKE_DATA/system.txt" "capabilities=$BAKE_DATA/capabilities.txt"
    "stats=$BAKE_DATA/stats.json" num_ctx=1024 max_tokens=64 passes=2 keep_alive=-1)
nlog=$(wc -l <ollama/serve.log)
stage bake "${bake[@]}" >bake.out 2>&1 || { cat bake.out; fail "bake via ollama"; }
value bake.out bake.summary >"$TEST_TMP/cand.json"
curl -s "$OURL/api/ps" >ps.json
/usr/bin/python3 - cand.json ps.json "$BAKE_DATA/cases.jsonl" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ps = json.load(open(sys.argv[2]))["models"]
n = sum(1 for l in open(sys.argv[3]) if l.strip())
assert s["backend"] == "ollama" and s["complete"] and s["errors"] == 0, s
assert s["runnable"] == n and s["cases"] == n and s["passes"] == 2, s
assert s["server_ctx"] == 1024, s
# A CPU server: nothing in VRAM, the speed not comparable (G22).
assert s["speed_comparable"] is False and "size_vram 0 of" in s["speed_note"], s["speed_note"]
r = [m for m in ps if m["name"] == "router:v2"]
assert r and r[0]["context_length"] == 1024 and r[0]["size_vram"] == 0, ps
# temperature 0 and a fixed seed: both passes the same
for k, row in s["rows"].items():
    assert bin(row[2]).count("1") in (0, 2), (k, row)
PY
grep -q "speed is not comparable: size_vram 0 of" bake.out || fail "G22 warning not logged"
# Every request carried num_ctx 1024: one runner started for the bake (its
# load before timing), never reloaded at another size.
[ "$(runner_starts "$nlog")" -eq 1 ] ||
    fail "not one runner start during the bake (num_ctx changed between requests?)"

# 3a. The operator serves router:v2 to live clients that send no num_ctx:
# they get the tag's PARAMETER num_ctx (1024, register's). A bake without
# num_ctx takes the tag's too, and leaves their runner as it is (/api/ps
# and the server's log before and after; from 0.30 another num_ctx or
# shift reloads it: server/sched.go, needsReload).
curl -s "$OURL/api/generate" -d '{"model":"router:v2","prompt":"hi","stream":false,"keep_alive":-1,"options":{"num_predict":1}}' >/dev/null
curl -s "$OURL/api/ps" >ps-live.json
nlog=$(wc -l <ollama/serve.log)
live=()
for a in "${bake[@]}"; do [ "$a" = num_ctx=1024 ] || live+=("$a"); done
stage bake "${live[@]/passes=2/passes=1}" >live.out 2>&1 || { cat live.out; fail "bake beside live clients"; }
grep -q "num_ctx 1024: the tag's PARAMETER num_ctx" live.out || { cat live.out; fail "the tag's num_ctx not taken"; }
grep -q "the bake reloads it" live.out && fail "a reload announced for a runner at the bake's own context"
[ "$(runner_starts "$nlog")" -eq 0 ] || fail "the bake restarted the live clients' runner"
curl -s "$OURL/api/ps" >ps-after.json
/usr/bin/python3 - ps-live.json ps-after.json <<'PY'
import json, sys
b, a = ([m for m in json.load(open(f))["models"] if m["name"] == "router:v2"] for f in sys.argv[1:3])
assert b and a and b[0]["context_length"] == a[0]["context_length"] == 1024, (b, a)
assert b[0]["digest"] == a[0]["digest"], (b, a)
PY
# 3b. Live clients at another context (512): the bake cannot help reloading
# their runner, and says so.
curl -s "$OURL/api/generate" -d '{"model":"router:v2","prompt":"hi","stream":false,"keep_alive":-1,"options":{"num_predict":1,"num_ctx":512}}' >/dev/null
stage bake "${live[@]/passes=2/passes=1}" >reload.out 2>&1 || { cat reload.out; fail "bake over a 512 runner"; }
grep -q "router:v2 is loaded with a 512-token context, the bake's num_ctx is 1024: the bake reloads it" reload.out ||
    { cat reload.out; fail "the reload not announced"; }
[ "$(value reload.out bake.reload)" = yes ] || fail "bake.reload not stored"

# 3c. num_ctx above the model's trained context (2048): refused before the
# first case.
curl -s "$OURL/api/generate" -d '{"model":"router:v2","keep_alive":0}' >/dev/null
nlog=$(grep -c '/api/chat' ollama/serve.log || true)
if stage bake "${bake[@]/num_ctx=1024/num_ctx=4096}" >ctx.out 2>&1; then
	cat ctx.out; fail "num_ctx 4096 accepted for a 2048-token model"
fi
grep -q "num_ctx 4096 exceeds the model's trained context 2048" ctx.out || { cat ctx.out; fail "context cap not explained"; }
[ "$(grep -c '/api/chat' ollama/serve.log || true)" = "$nlog" ] || fail "cases ran before the context check"

# 4. G01: a prompt longer than num_ctx. Measured on this Ollama: with
# truncate:false (what the stage sends) /api/chat answers HTTP 400; the
# bake reports it as an error of that case, not a miss.
/usr/bin/python3 - "$BAKE_DATA/cases.jsonl" >long.jsonl <<'PY'
import json, sys
print(open(sys.argv[1]).readline(), end="")
print(json.dumps({"id": "long-1", "kind": "route", "user": " ".join(
    "open the folder named docs number %d" % i for i in range(400)),
    "expect": {"capability": "open_folder", "args": {"path": "docs"}}}))
PY
cut=("${bake[@]/cases=*/cases=$TEST_TMP/long.jsonl}")
if stage bake "${cut[@]/passes=2/passes=1}" >cut.out 2>&1; then
	cat cut.out; fail "an over-long prompt was scored"
fi
values cut.out >cut.json
/usr/bin/python3 - cut.json <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
r = json.loads(v["case/long-1"])
assert [p["outcome"] for p in r["passes"]] == ["error"], r
print("# G01 on real Ollama:", r["passes"][0]["why"])
s = json.loads(v["bake.summary"])
assert s["complete"] is False and s["errors"] == 1, s
assert json.loads(v["case/open-1"])["passes"][0]["outcome"] != "error"
PY
grep -q "case long-1.*truncated" cut.out || { tail -3 cut.out; fail "the over-long prompt not reported as truncated"; }
# 4a. The other G01 answer, from a live client's request shape: without
# truncate:false, Ollama 0.30 and later cut the prompt in the runner (its
# context shift is on unless the request says shift:false) and answer 200
# with prompt_eval_count about num_ctx/2 (515 of 1024 here, measured). The
# bake meets it through drop_truncate_proxy.py, which forwards its
# requests to this real server without the truncate field and passes the
# server's answers back unchanged: a bake error naming the case as well,
# caught by the prompt's bytes per token. (0.24.0's runner dies of such a
# prompt instead; measured below.)
case $version in
0.24.*) ;;
*)
	/usr/bin/python3 "$TOP/tests/helpers/drop_truncate_proxy.py" "$OURL" \
	    "$TEST_TMP/proxy.port" &
	PROXY_PID=$!
	trap 'kill $PROXY_PID 2>/dev/null || true; ollama_stop' EXIT
	for _ in $(seq 1 100); do [ -s proxy.port ] && break; sleep 0.1; done
	[ -s proxy.port ] || fail "drop_truncate_proxy.py did not start"
	short=("${cut[@]/url=*/url=http://127.0.0.1:$(cat proxy.port)}")
	if stage bake "${short[@]/passes=2/passes=1}" >short.out 2>&1; then
		cat short.out; fail "a prompt the server cut (200) was scored"
	fi
	kill $PROXY_PID 2>/dev/null || true
	wait $PROXY_PID 2>/dev/null || true
	trap 'ollama_stop' EXIT
	grep -q '^/api/chat$' proxy.port.dropped || fail "the proxy dropped no truncate field"
	values short.out >short.json
	/usr/bin/python3 - short.json <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
p = json.loads(v["case/long-1"])["passes"][0]
assert p["outcome"] == "error" and 0 < p["prompt_tokens"] < 1024, p
assert "counted as %d tokens" % p["prompt_tokens"] in p["why"] and "(G01)" in p["why"], p
print("# G01 on real Ollama, a 200 with the prompt cut:", p["why"])
s = json.loads(v["bake.summary"])
assert s["complete"] is False and s["errors"] == 1, s
PY
	grep -q "case long-1.*truncated" short.out || { tail -3 short.out; fail "the cut prompt not reported as truncated"; } ;;
esac
# Why the stage sends truncate:false: without it Ollama 0.24.0 truncates
# the prompt in its runner ("truncating input prompt" in its log), and on
# this Gemma 3 model the runner then dies of a SIGSEGV: the request answers
# HTTP 500. Measured here. Ollama 0.30 and later hand the prompt to
# llama-server, which never cuts one: an error answer, or a 200 whose
# prompt_eval_count is short of the prompt, which the bake's byte check
# (max_bytes_per_token) makes a bake error as well.
/usr/bin/python3 - "$TEST_TMP/long.jsonl" "$BAKE_DATA/system.txt" >long-req.json <<'PY'
import json, sys
c = [json.loads(l) for l in open(sys.argv[1])][1]
print(json.dumps({"model": "router:v2", "stream": False, "messages": [
    {"role": "system", "content": open(sys.argv[2]).read()},
    {"role": "user", "content": c["user"]}],
    "options": {"num_ctx": 1024, "num_predict": 4, "temperature": 0}}))
PY
nlog=$(wc -l <ollama/serve.log)
code=$(curl -s -o long-default.out -w '%{http_code}' "$OURL/api/chat" -d @long-req.json)
note "G01 on real Ollama $version without truncate:false: HTTP $code: $(head -c 200 long-default.out)"
case $version in
0.24.*)
	tail -n +"$((nlog + 1))" ollama/serve.log | grep -q 'msg="truncating input prompt" limit=1024' ||
	    fail "the server did not truncate the over-long prompt"
	[ "$code" = 500 ] && grep -q "model runner has unexpectedly stopped" long-default.out ||
	    fail "this Ollama answered an over-long prompt without truncate:false other than measured (HTTP $code); re-measure G01" ;;
*)
	# The prompt is over 15 kB of text, more than 1024 tokens at any
	# tokenizer's rate: a 200 must show a cut count, or the bake would miss it.
	if [ "$code" = 200 ]; then
		/usr/bin/python3 - long-default.out long-req.json <<'PY' || fail "a 200 for the over-long prompt that the bake's checks would not catch"
import json, sys
r = json.load(open(sys.argv[1]))
n = len(json.dumps(json.load(open(sys.argv[2]))["messages"]))
pe = r.get("prompt_eval_count", 0)
assert pe >= 1024 or n / max(pe, 1) > 8, (pe, n)
print("# 200 with prompt_eval_count %d for %d bytes: a bake error (G01)" % (pe, n))
PY
	else
		case $code in 4??|5??) ;; *) fail "HTTP $code for the over-long prompt" ;; esac
	fi ;;
esac

# 5. Promote: the alias (router:prod, v1 and loaded) gets v2's manifest,
# read back.
curl -s "$OURL/api/copy" -d '{"source":"router:v1","destination":"router:prod"}' >/dev/null
curl -s "$OURL/api/generate" -d '{"model":"router:prod","keep_alive":-1}' >/dev/null
loaded router:prod || fail "router:prod did not load"
/usr/bin/python3 - cand.json inc.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
# the incumbent: the same case set, one held-out route worse
s["model"] = "router:v1"
cid = next(k for k, r in s["rows"].items() if r[0] & 2 and r[0] & 8 and not r[0] & 1)
s["rows"][cid][2] = 0
json.dump(s, open(sys.argv[2], "w"))
c = json.load(open(sys.argv[1]))
c["rows"][cid][2] = 3
json.dump(c, open(sys.argv[1], "w"))
PY
# Ten cases, four held out for both: min_fair_cases 4 lets the fair slice decide.
stage gate candidate="$TEST_TMP/cand.json" incumbent="$TEST_TMP/inc.json" promote=yes \
    alias=router:prod "url=$OURL" min_fair_cases=4 >gate.out 2>&1 || { cat gate.out; fail "gate promote"; }
ad=$(value gate.out gate.alias_digest)
v2d=$(tag_digest router:v2)
pd=$(tag_digest router:prod)
[ -n "$ad" ] && [ "$ad" = "$v2d" ] && [ "$pd" = "$v2d" ] || fail "alias digest $ad / $pd is not v2's $v2d"
loaded router:prod && fail "the alias was not unloaded before the copy"
echo "ollama/register-promote: ok"
