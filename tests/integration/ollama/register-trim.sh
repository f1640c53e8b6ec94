#!/bin/bash
# ollama/register-trim: a message with spaces around it, through the REAL
# Ollama server (tests/tools/ollama.sh, the selected release, 0.34.2 by
# default; tests/lib.sh: ollama_start) and through a real llama-server (the
# llama.cpp oracle build, tests/tools/llama-oracle.sh) rendering the GGUF's
# own Jinja chat template, both serving the tiny Gemma 3 fixture. Gemma 3's
# chat template, which trained (tokenize renders it), trims each user and
# assistant message (`| trim`); Ollama's Go templates have no trim function.
#   - register's template check renders, besides training examples, the
#     probe cases (a padded message, a multi-line system prompt, a
#     multi-turn conversation) through the tag and through the template that
#     trained (jobs/tokenize_corpus.py with the tokenize job's config); with
#     a TEMPLATE that does not trim (tests/fixtures/Modelfile.notrim, what
#     etc/Modelfile.tmpl was) it fails, naming the case and both counts;
#   - with etc/Modelfile.tmpl it passes every case and records it;
#   - a padded request ("  Summarise: ...  ") counts the same prompt tokens
#     through the tag registered with etc/Modelfile.tmpl as through
#     llama-server and as the trained template counts the unpadded one;
#     through the untrimmed tag it counts more;
#   - 0.30 and later with OLLAMA_GO_TEMPLATE=0 on the server serve the
#     GGUF's own Jinja template: register checks it, keeps it (no GGUF
#     mended), and the padded case counts as through etc/Modelfile.tmpl.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/bake.sh"
set -e
trap 'stop_llama; ollama_stop' EXIT
cd "$TEST_TMP"

tiny_gguf "$TEST_TMP/v1.gguf" 1234
corpus_tokens
ollama_start
version=$("$TOP/tests/tools/ollama.sh" --version)
note "real Ollama $version on $OURL"
ollama_modelfile "$TOP/etc/Modelfile.tmpl" Modelfile.etc
ollama_modelfile "$TOP/tests/fixtures/Modelfile.notrim" Modelfile.notrim
reg=("url=$OURL" num_ctx=1024 tokens="$TEST_TMP/tok/tokens.npz" corpus="$TEST_TMP/corpus.jsonl")

# 1. register's check catches a TEMPLATE without trim, naming the case and
# both counts.
if stage register gguf="$TEST_TMP/v1.gguf" tag=router:notrim modelfile="$TEST_TMP/Modelfile.notrim" \
    "${reg[@]}" >notrim.out 2>&1; then
	cat notrim.out; fail "register accepted a TEMPLATE that does not trim"
fi
grep -q "template check: example .* prompt tokens served and trained" notrim.out ||
    { cat notrim.out; fail "the training examples were not checked first"; }
grep -Eq "failed: template check: case padding \(spaces and newlines around each user and assistant message, from example [^)]*\): router:notrim renders it as [0-9]+ prompt tokens, the trained template as [0-9]+: the template that serves \(TEMPLATE of .*/Modelfile.notrim\) is not the template that trained" notrim.out ||
    { cat notrim.out; fail "the padding case not named with its counts"; }
served=$(sed -n 's/.*renders it as \([0-9]*\) prompt tokens, the trained template as \([0-9]*\).*/\1 \2/p' notrim.out)
set -- $served
[ "$1" -gt "$2" ] || fail "padding counted $1 served, $2 trained: not more"

# 2. etc/Modelfile.tmpl passes every case.
stage register gguf="$TEST_TMP/v1.gguf" tag=router:v1 modelfile="$TEST_TMP/Modelfile.etc" "${reg[@]}" \
    >etc.out 2>&1 || { cat etc.out; fail "register with etc/Modelfile.tmpl"; }
for c in "padding" "multi-line system prompt" "multi-turn conversation"; do
	grep -q "template check: case $c (from example .*): [0-9]* prompt tokens served and trained" etc.out ||
	    { cat etc.out; fail "case $c not checked"; }
done
[ "$(value etc.out register.template_checked)" = yes ] || fail "template not checked"

# 3. A padded request: Ollama (both tags), llama-server (the GGUF's own
# Jinja template) and the trained count of the same message unpadded.
eval "$("$TOP/tests/tools/llama-oracle.sh" --env)"
port=$(free_port)
"$LLAMA_BIN/llama-server" -m "$TEST_TMP/v1.gguf" -c 1024 -np 1 --host 127.0.0.1 --port "$port" -t 1 \
    --jinja --alias tiny >"$TEST_TMP/llama-server.log" 2>&1 &
LLAMA_PID=$!
LLAMA_URL=http://127.0.0.1:$port
for _ in $(seq 1 300); do
	curl -sf "$LLAMA_URL/health" >/dev/null 2>&1 && break
	sleep 0.1
done
/usr/bin/python3 - "$OURL" "$LLAMA_URL" <<'PY' >counts.txt || { cat counts.txt; fail "counting the padded request"; }
import json, sys, urllib.request
ourl, lurl = sys.argv[1], sys.argv[2]
def post(url, body):
    r = urllib.request.urlopen(urllib.request.Request(url, json.dumps(body).encode(),
        {"Content-Type": "application/json"}), timeout=300)
    return json.load(r)
# Ollama: JSON output, as register retries with: the tiny model's one token
# may be a piece of a UTF-8 character, which llama-server's chat parser
# refuses (an answer without metrics); a JSON grammar allows whole
# characters only, and the prompt is the same.
def ollama(tag, text):
    a = post(ourl + "/api/chat", {"model": tag, "stream": False, "format": "json",
        "messages": [{"role": "user", "content": text}],
        "options": {"num_ctx": 1024, "num_predict": 1, "temperature": 0}})
    return a["prompt_eval_count"]
# llama-server: its rendering through the GGUF's Jinja template
# (/apply-template, what /v1/chat/completions renders; it leaves the
# template's BOS out), tokenized as the server tokenizes a prompt: the BOS
# added, special tokens parsed.
def llama(text):
    p = post(lurl + "/apply-template", {"messages": [{"role": "user", "content": text}]})["prompt"]
    return len(post(lurl + "/tokenize", {"content": p, "add_special": True, "parse_special": True})["tokens"])
text = "Summarise: the meeting moved to Friday at noon."
padded = "  " + text + "  "
print("etc", ollama("router:v1", padded), ollama("router:v1", text))
print("notrim", ollama("router:notrim", padded), ollama("router:notrim", text))
print("llama", llama(padded), llama(text))
PY
note "prompt tokens (padded, plain): $(tr '\n' ' ' <counts.txt)"
read -r _ etc_p etc_t < <(grep '^etc ' counts.txt)
read -r _ no_p no_t < <(grep '^notrim ' counts.txt)
read -r _ ll_p ll_t < <(grep '^llama ' counts.txt)
[ "$ll_p" -eq "$ll_t" ] || fail "llama-server's Jinja template does not trim: $ll_p padded, $ll_t plain"
[ "$etc_t" -eq "$ll_t" ] || fail "router:v1 counts $etc_t for the plain request, llama-server $ll_t"
[ "$etc_p" -eq "$ll_p" ] ||
    fail "a padded request: $etc_p prompt tokens through Ollama $version (etc/Modelfile.tmpl), $ll_p through llama-server"
[ "$no_t" -eq "$ll_t" ] || fail "router:notrim counts $no_t for the plain request, llama-server $ll_t"
[ "$no_p" -gt "$ll_p" ] || fail "the untrimmed TEMPLATE counted $no_p for the padded request, not more than $ll_p"
case $version in
0.24.*)
	echo "ollama/register-trim: ok (Ollama $version: padded request $etc_p tokens as llama-server's $ll_p; untrimmed $no_p)"
	exit 0 ;;
esac

# 4. Ollama 0.30 and later with OLLAMA_GO_TEMPLATE=0 serve the GGUF's own
# Jinja chat template (through llama-server): the fixture's is Gemma 3's,
# the one that trained, so register keeps it after checking it (every
# case), takes nothing out of the GGUF, and the padded case counts as
# through etc/Modelfile.tmpl.
ollama_stop
ollama_start OLLAMA_GO_TEMPLATE=0
reg=("url=$OURL" num_ctx=1024 tokens="$TEST_TMP/tok/tokens.npz" corpus="$TEST_TMP/corpus.jsonl")
stage register gguf="$TEST_TMP/v1.gguf" tag=router:jinja modelfile="$TEST_TMP/Modelfile.notrim" "${reg[@]}" \
    >jinja.out 2>&1 || { cat jinja.out; fail "register with OLLAMA_GO_TEMPLATE=0"; }
grep -q "router:jinja serves the GGUF's own chat template (llama-server's Jinja), which renders as the template that trained: kept" jinja.out ||
    { cat jinja.out; fail "the GGUF's own template not kept"; }
for c in "padding" "multi-line system prompt" "multi-turn conversation"; do
	grep -q "template check: case $c (from example .*): [0-9]* prompt tokens served and trained" jinja.out ||
	    { cat jinja.out; fail "case $c not checked through the GGUF's own template"; }
done
[ "$(value jinja.out register.served_template)" = gguf ] || { cat jinja.out; fail "register.served_template is not gguf"; }
[ "$(value jinja.out register.uploaded)" = "$(sha256sum v1.gguf | cut -d' ' -f1)" ] ||
    fail "the GGUF was changed although its own template renders as training did"
grep -q "template fix" jinja.out && { cat jinja.out; fail "mended a template that renders as training did"; }
# The padded case through the GGUF's own template counts as through
# etc/Modelfile.tmpl. (A request of this test's own through that tag is
# not counted: llama-server's chat parser refuses the tiny model's answer
# to it, an HTTP 500 without metrics, with or without format json.)
pad() { sed -n 's/.*template check: case padding (from example [^)]*): \([0-9]*\) prompt tokens served and trained.*/\1/p' "$1"; }
[ -n "$(pad etc.out)" ] && [ "$(pad jinja.out)" = "$(pad etc.out)" ] ||
    fail "the padded case: $(pad jinja.out) prompt tokens through the GGUF's own template, $(pad etc.out) through etc/Modelfile.tmpl"
echo "ollama/register-trim: ok (Ollama $version: padded request $etc_p tokens as llama-server's $ll_p; untrimmed $no_p; the GGUF's own template kept with OLLAMA_GO_TEMPLATE=0)"
