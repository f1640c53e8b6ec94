#!/bin/bash
# ollama/register-trim-real: ollama/register-trim's padded message with the
# real Gemma 3 270M (tests/tools/realbase.sh: its original Q4_K_M GGUF, and
# the checkpoint made from it, whose tokenizer_config.json carries Gemma
# 3's own chat template), through the REAL Ollama server
# (tests/tools/ollama.sh, the selected release, 0.34.2 by default) and a
# real llama-server (the llama.cpp oracle build) rendering that Jinja
# template (--chat-template-file: the pretrained GGUF has none of its own):
#   - tokenize renders a corpus with the checkpoint's template (training);
#   - register's template check fails with the TEMPLATE that does not trim
#     (tests/fixtures/Modelfile.notrim), naming the padding case and both
#     counts, and passes every case with etc/Modelfile.tmpl;
#   - "  Summarise: ...  " counts as many prompt tokens through the tag
#     registered with etc/Modelfile.tmpl as through llama-server and as the
#     same message without the spaces; through the untrimmed tag, more.
# run.sh: alone (the real Gemma 3 270M through Ollama and llama-server).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/bake.sh"
set -e
trap 'stop_llama; ollama_stop' EXIT
cd "$TEST_TMP"

hf=$("$TOP/tests/tools/realbase.sh" --path) || fail "realbase.sh --path"
gguf=$("$TOP/tests/tools/realbase.sh" --gguf) || fail "realbase.sh --gguf"
/usr/bin/python3 "$TOP/tests/fixtures/gen_corpus.py" corpus.jsonl --n 12 >/dev/null
"$PCTL" stage tokenize -w "$TEST_TMP/tok" base="$hf" corpus="$TEST_TMP/corpus.jsonl" \
    >tokenize.out 2>&1 || { cat tokenize.out; fail "tokenize with the real base"; }
ollama_start
version=$("$TOP/tests/tools/ollama.sh" --version)
note "real Ollama $version on $OURL, Gemma 3 270M"
ollama_modelfile "$TOP/etc/Modelfile.tmpl" Modelfile.etc
ollama_modelfile "$TOP/tests/fixtures/Modelfile.notrim" Modelfile.notrim
reg=(gguf="$gguf" "url=$OURL" num_ctx=1024 tokens="$TEST_TMP/tok/tokens.npz" corpus="$TEST_TMP/corpus.jsonl")

if stage register tag=real:notrim modelfile="$TEST_TMP/Modelfile.notrim" "${reg[@]}" >notrim.out 2>&1; then
	cat notrim.out; fail "register accepted a TEMPLATE that does not trim"
fi
grep -Eq "failed: template check: case padding \(spaces and newlines around each user and assistant message, from example [^)]*\): real:notrim renders it as [0-9]+ prompt tokens, the trained template as [0-9]+" notrim.out ||
    { cat notrim.out; fail "the padding case not named with its counts"; }
stage register tag=real:etc modelfile="$TEST_TMP/Modelfile.etc" "${reg[@]}" >etc.out 2>&1 ||
    { cat etc.out; fail "register with etc/Modelfile.tmpl"; }
[ "$(grep -c 'template check: case .* prompt tokens served and trained' etc.out)" -eq 3 ] ||
    { cat etc.out; fail "not every case checked"; }

# The original GGUF is the pretrained base's and carries no chat template:
# llama-server renders the checkpoint's (tokenizer_config.json's, the one
# tokenize trained with) instead.
/usr/bin/python3 -c 'import json, sys; sys.stdout.write(json.load(open(sys.argv[1]))["chat_template"])' \
    "$hf/tokenizer_config.json" >gemma3.jinja || fail "no chat template in $hf/tokenizer_config.json"
start_llama "$gguf" 1024 1 --jinja --chat-template-file "$TEST_TMP/gemma3.jinja"
pt=$TOP/tests/helpers/prompt_tokens.py
text="Summarise: the meeting moved to Friday at noon."
etc=$("$pt" ollama "$OURL" real:etc "  $text  ") && no=$("$pt" ollama "$OURL" real:notrim "  $text  ") &&
    ll=$("$pt" llama "$LLAMA_URL" "  $text  ") && plain=$("$pt" llama "$LLAMA_URL" "$text") ||
    fail "counting the padded request"
note "a padded request, prompt tokens: etc/Modelfile.tmpl $etc, untrimmed $no, llama-server $ll (unpadded $plain)"
[ "$ll" -eq "$plain" ] || fail "llama-server's Jinja template does not trim: $ll padded, $plain plain"
[ "$etc" -eq "$ll" ] || fail "a padded request: $etc prompt tokens through Ollama $version (etc/Modelfile.tmpl), $ll through llama-server"
[ "$no" -gt "$ll" ] || fail "the untrimmed TEMPLATE counted $no, not more than llama-server's $ll"
echo "ollama/register-trim-real: ok (Ollama $version, Gemma 3 270M: padded request $etc tokens as llama-server's $ll; untrimmed $no)"
