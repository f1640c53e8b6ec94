#!/bin/bash
# ollama/register-template: which template the REAL Ollama server
# (tests/tools/ollama.sh, the selected release; tests/lib.sh: ollama_start)
# applies to a registered tag, against a GGUF whose own Jinja
# tokenizer.chat_template differs from the Modelfile TEMPLATE that trained:
# the tiny Gemma 3 fixture with its chat template replaced by one that
# mentions tools (so it has more capabilities than the Modelfile's: Ollama
# 0.30 and later prefer it, server/images.go: shouldPreferChatTemplate) and
# renders the system prompt as a user turn of its own (so it counts other
# prompt tokens than training did).
#   - register reads the server's version and names its profile; a tested
#     version is said to be one;
#   - on the llama-server profile (0.30 and later): with template_fix =
#     none register finds that the GGUF's template serves (/api/show names
#     the template the chat path selected) and fails, naming the GGUF, the
#     Modelfile, the fix and OLLAMA_GO_TEMPLATE; it first checks the GGUF's
#     own template against training (it would keep one that renders as
#     training did), which this one fails, named with its counts; with the
#     default (template_fix = gguf) it registers a copy of the GGUF without
#     the chat template, says why in its log, and the Modelfile TEMPLATE
#     then serves and passes the template check against training; with
#     OLLAMA_GO_TEMPLATE=1 on the server, the Modelfile's serves as it is;
#   - on the cgo profile (0.24.0): the Modelfile TEMPLATE always serves,
#     nothing is mended.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/bake.sh"
set -e
trap 'ollama_stop' EXIT
cd "$TEST_TMP"

tiny_gguf "$TEST_TMP/v1.gguf" 1234
eval "$("$TOP/tests/tools/llama-oracle.sh" --env)"
# The Jinja template: Gemma 3's turns, but the system prompt a user turn of
# its own (as tests/fixtures/Modelfile.reference), and a tools block.
cat >tools.jinja <<'EOF'
{{ bos_token }}{%- if tools %}<start_of_turn>user
Tools: {{ tools | tojson }}<end_of_turn>
{% endif %}{%- for m in messages %}{%- if m['role'] == 'assistant' %}<start_of_turn>model
{{ m['content'] }}<end_of_turn>
{% else %}<start_of_turn>user
{{ m['content'] }}<end_of_turn>
{% endif %}{%- endfor %}{%- if add_generation_prompt %}<start_of_turn>model
{% endif %}
EOF
# gguf-py's script wants tqdm, which the ML environment has and Debian's
# python3 has not.
PYTHONPATH=$GGUF_PY "$("$TOP/tests/tools/pyenv.sh" --python)" -B "$GGUF_PY/gguf/scripts/gguf_new_metadata.py" v1.gguf jinja.gguf \
    --chat-template-file tools.jinja --force >newmeta.log 2>&1 || { cat newmeta.log; fail "gguf_new_metadata.py"; }
corpus_tokens
ollama_start
version=$("$TOP/tests/tools/ollama.sh" --version)
note "real Ollama $version on $OURL"
# has_template GGUF: exit 0 when GGUF holds tokenizer.chat_template.
has_template() {
	PYTHONPATH=$GGUF_PY /usr/bin/python3 -B -c '
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
sys.exit(0 if "tokenizer.chat_template" in r.fields else 1)' "$1"
}
has_template jinja.gguf || fail "the fixture GGUF has no chat template"
ollama_modelfile "$TOP/etc/Modelfile.tmpl" Modelfile.etc
reg=(modelfile="$TEST_TMP/Modelfile.etc" "url=$OURL" num_ctx=1024 tokens="$TEST_TMP/tok/tokens.npz"
    corpus="$TEST_TMP/corpus.jsonl")

case $version in
0.24.*)
	stage register gguf="$TEST_TMP/jinja.gguf" tag=router:j "${reg[@]}" >cgo.out 2>&1 ||
	    { cat cgo.out; fail "register on $version"; }
	grep -q "Ollama $version at $OURL: profile cgo engine (before 0.30), a tested version" cgo.out ||
	    { cat cgo.out; fail "profile not named"; }
	[ "$(value cgo.out register.served_template)" = modelfile ] || fail "served template not recorded"
	[ "$(value cgo.out register.template_checked)" = yes ] || fail "template not checked"
	grep -q "template fix\|serves the GGUF's own" cgo.out && fail "mended on $version"
	echo "ollama/register-template: ok ($version: the Modelfile TEMPLATE serves, nothing to mend)"
	exit 0 ;;
esac

# 1. Caught: template_fix = none.
if stage register gguf="$TEST_TMP/jinja.gguf" tag=router:j "${reg[@]}" template_fix=none >none.out 2>&1; then
	cat none.out; fail "the GGUF's template served and register accepted it"
fi
grep -q "Ollama $version at $OURL: profile llama-server runner (0.30 and later), a tested version" none.out ||
    { cat none.out; fail "profile not named"; }
grep -q "router:j: Ollama $version serves the GGUF's own tokenizer.chat_template (.*/jinja.gguf), not the TEMPLATE of .*/Modelfile.etc: it prefers the Jinja template when that one has more capabilities" none.out ||
    { cat none.out; fail "the GGUF and the Modelfile not named"; }
grep -q "failed: router:j: the GGUF's own chat template serves, not the Modelfile's; set template_fix = gguf (register takes it out of a copy of the GGUF), or OLLAMA_GO_TEMPLATE=1 in the server's environment" none.out ||
    { cat none.out; fail "the refusal does not name both fixes"; }

# 2. Mended: the default template_fix = gguf.
stage register gguf="$TEST_TMP/jinja.gguf" tag=router:j "${reg[@]}" >fix.out 2>&1 ||
    { cat fix.out; fail "register did not mend the template"; }
grep -q "template fix: .*/jinja.gguf written without its 1 tokenizer.chat_template key" fix.out ||
    { cat fix.out; fail "the fix not logged"; }
grep -q "serves the GGUF's own tokenizer.chat_template (.*/jinja.gguf), not the TEMPLATE of .*/Modelfile.etc: it prefers the Jinja template" fix.out ||
    { cat fix.out; fail "the reason not logged"; }
grep -q "template_fix = gguf: registering a copy of .*/jinja.gguf without its chat template" fix.out ||
    { cat fix.out; fail "the fix not announced"; }
grep -q "router:j now serves the TEMPLATE of .*/Modelfile.etc" fix.out || { cat fix.out; fail "not read back"; }
curl -s "$OURL/api/show" -d '{"model":"router:j"}' | /usr/bin/python3 -c '
import json, re, sys
s = json.load(sys.stdin)
t = re.search(r"TEMPLATE \"\"\"(.*?)\"\"\"", open(sys.argv[1]).read(), re.S).group(1)
assert s["template"].rstrip() == t.rstrip(), s["template"][:200]' "$TOP/etc/Modelfile.tmpl" ||
    fail "/api/show does not name the Modelfile TEMPLATE after the fix"
[ "$(value fix.out register.served_template)" = modelfile ] || fail "the Modelfile's does not serve after the fix"
[ "$(value fix.out register.template_checked)" = yes ] || fail "template not checked after the fix"
# The GGUF's own template was tried first (it serves only if it renders as
# training did; this one renders the system prompt as a turn of its own):
# the count is of the checks after the fix.
grep -q "template check of the GGUF's own chat template, which serves if it renders as training did" fix.out ||
    { cat fix.out; fail "the GGUF's own template not tried first"; }
grep -q "router:j renders training example .* as [0-9]* prompt tokens, tokenize counted [0-9]* (.*tokens.npz): the template that serves (the GGUF's own chat template of .*/jinja.gguf) is not the template that trained" fix.out ||
    { cat fix.out; fail "the GGUF's own template's mismatch not logged with its counts"; }
[ "$(sed -n '/now serves the TEMPLATE of/,$p' fix.out | grep -c 'template check: example .*prompt tokens served and trained')" -eq 4 ] ||
    { cat fix.out; fail "not 4 examples checked after the fix"; }
[ "$(sed -n '/now serves the TEMPLATE of/,$p' fix.out | grep -c 'template check: case .*prompt tokens served and trained')" -eq 3 ] ||
    { cat fix.out; fail "not 3 probe cases checked after the fix"; }
mended=$(grep -o '^job.artifact {"name":"gguf".*' fix.out | sed 's/.*"path":"\([^"]*\)".*/\1/')
[ -f "$mended" ] || { cat fix.out; fail "the mended GGUF is not an artifact"; }
has_template "$mended" && fail "the mended GGUF still has a chat template"
[ "$(value fix.out register.uploaded)" = "$(sha256sum "$mended" | cut -d' ' -f1)" ] ||
    fail "register.uploaded is not the mended GGUF's"
cmp -s jinja.gguf "$mended" && fail "the mended GGUF is the input"

# 3. The server setting instead: OLLAMA_GO_TEMPLATE=1 keeps the Modelfile's.
ollama_stop
ollama_start OLLAMA_GO_TEMPLATE=1
# ollama_start picks a new free port: the register arguments must name the
# new server's URL, not the stopped one's.
reg=(modelfile="$TEST_TMP/Modelfile.etc" "url=$OURL" num_ctx=1024 tokens="$TEST_TMP/tok/tokens.npz"
    corpus="$TEST_TMP/corpus.jsonl")
stage register gguf="$TEST_TMP/jinja.gguf" tag=router:g "${reg[@]}" template_fix=none >go.out 2>&1 ||
    { cat go.out; fail "register with OLLAMA_GO_TEMPLATE=1"; }
[ "$(value go.out register.served_template)" = modelfile ] || { cat go.out; fail "served template"; }
grep -q "template fix\|serves the GGUF's own" go.out && { cat go.out; fail "mended with OLLAMA_GO_TEMPLATE=1"; }
[ "$(value go.out register.uploaded)" = "$(sha256sum jinja.gguf | cut -d' ' -f1)" ] ||
    fail "the GGUF was changed although its template did not serve"
echo "ollama/register-template: ok ($version: caught, mended, and kept by OLLAMA_GO_TEMPLATE)"
