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
[ "$(value etc.out register.template_cases)" = "padding, multi-line system prompt, multi-turn conversation" ] ||
    fail "register.template_cases does not name the cases"
[ -z "$(value notrim.out register.template_cases)" ] || fail "register.template_cases set although a case failed"

# 3. A padded request: Ollama (both tags), llama-server (the GGUF's own
# Jinja template) and the trained count of the same message unpadded.
start_llama "$TEST_TMP/v1.gguf" 1024 1 --jinja
pt=$TOP/tests/helpers/prompt_tokens.py
text="Summarise: the meeting moved to Friday at noon."
padded="  $text  "
etc_p=$("$pt" ollama "$OURL" router:v1 "$padded") && etc_t=$("$pt" ollama "$OURL" router:v1 "$text") &&
    no_p=$("$pt" ollama "$OURL" router:notrim "$padded") && no_t=$("$pt" ollama "$OURL" router:notrim "$text") &&
    ll_p=$("$pt" llama "$LLAMA_URL" "$padded") && ll_t=$("$pt" llama "$LLAMA_URL" "$text") ||
    fail "counting the padded request"
note "prompt tokens (padded, plain): etc $etc_p $etc_t, notrim $no_p $no_t, llama-server $ll_p $ll_t"
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
