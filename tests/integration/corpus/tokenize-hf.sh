#!/bin/bash
# corpus/tokenize-hf: jobs/tokenize_corpus.py against transformers itself
# on the real Gemma 3 tokenizer (Gemma 3 270M, tests/tools/realbase.sh),
# with the interpreter of the ML stack PYSTACK names (tests/tools/pyenv.sh;
# the log names the versions):
#  - on the tiny fixture, a base whose template is in chat_template.jinja
#    (where transformers 5's save_pretrained writes it) tokenizes exactly
#    as the same base with it in tokenizer_config.json, and a base with no
#    template anywhere is refused naming the three places looked in;
#  - the real base's tokenizer saved by this transformers
#    (AutoTokenizer.save_pretrained) tokenizes, and for the real base and
#    the saved copy every example's tokens equal transformers'
#    apply_chat_template over its messages (tokenize=True; the newline
#    after the last <end_of_turn> is not trained) and the prompt span
#    equals apply_chat_template over all but the last message with
#    add_generation_prompt.
# (The fixture's tokenizer has no tokenizer.json, and transformers 5 needs
# protobuf 5 to convert its tokenizer.model; the pinned stacks hold
# protobuf 4 for llama.cpp's converter.)
. "$(dirname "$0")/../../lib.sh"
set -u
"$TOP/tests/tools/pyenv.sh" --check >/dev/null 2>&1 || {
	echo "SKIP: the $PYSTACK ML environment is not built (PYSTACK=$PYSTACK make pyenv)"
	exit 77
}
PY=$("$TOP/tests/tools/pyenv.sh" --python)
PYD=/usr/bin/python3
J=$TOP/jobs
cd "$TEST_TMP" || exit 1
stack_note "$PY"

$PYD "$TOP/tests/fixtures/gen_gemma3.py" base >/dev/null || fail "gen_gemma3"
$PYD "$TOP/tests/fixtures/gen_corpus.py" corpus.jsonl --n 24 --filler 20 >/dev/null || fail "gen_corpus"

tok() {		# tok NAME BASE: tokens of the corpus in out-NAME
	printf '{"base":"%s","corpus":"%s/corpus.jsonl","output_dir":"%s/out-%s"}\n' \
	    "$2" "$TEST_TMP" "$TEST_TMP" "$1" >"$1.json"
	"$PY" "$J/tokenize_corpus.py" --config "$1.json" --events "$1.ev" 2>"$1.err" ||
	    { cat "$1.ev" "$1.err"; fail "$1: tokenize of $2 failed"; }
}

# check NAME BASE: out-NAME's tokens against apply_chat_template of BASE.
check() {
	"$PY" - "$TEST_TMP/out-$1/tokens.npz" "$2" corpus.jsonl "$J" <<'PY' || fail "$1: not transformers' tokens"
import json, sys
sys.path.insert(0, sys.argv[4])
import pljob
import transformers
ex = pljob.load_tokens(sys.argv[1])
t = transformers.AutoTokenizer.from_pretrained(sys.argv[2])
corpus = [json.loads(l) for l in open(sys.argv[3])]


def ids(x):
    # transformers 5 may hand back a BatchEncoding (return_dict).
    if hasattr(x, "keys") and "input_ids" in x.keys():
        x = x["input_ids"]
    return [int(i) for i in x]


assert len(ex) == len(corpus), (len(ex), len(corpus))
for e, c in zip(ex, corpus):
    got = [int(i) for i in e["input_ids"]]
    full = ids(t.apply_chat_template(c["messages"], tokenize=True))
    prompt = ids(t.apply_chat_template(c["messages"][:-1], tokenize=True, add_generation_prompt=True))
    # The newline the template puts after the last <end_of_turn> is not trained.
    want = full[:-1] if full[-1] != t.convert_tokens_to_ids("<end_of_turn>") else full
    assert got == want, (e["key"], "ours", got[-8:], "transformers'", full[-8:])
    assert got[:e["prompt_len"]] == prompt, (e["key"], "the prompt span differs")
print("%s: %d examples equal apply_chat_template of transformers %s (%d pieces)"
      % (sys.argv[2], len(ex), transformers.__version__, len(t)))
PY
}

# The template moved to chat_template.jinja, as transformers 5 saves it.
mkdir jinja
cp base/* jinja/
$PYD - jinja <<'PY'
import json, os, sys
p = os.path.join(sys.argv[1], "tokenizer_config.json")
tc = json.load(open(p))
open(os.path.join(sys.argv[1], "chat_template.jinja"), "w").write(tc.pop("chat_template"))
json.dump(tc, open(p, "w"))
PY
tok base "$TEST_TMP/base"
tok jinja "$TEST_TMP/jinja"
"$PYD" - <<'PY' || fail "the template from chat_template.jinja tokenizes differently"
import sys, os
sys.path.insert(0, os.environ["TOP"] + "/jobs")
import pljob
a, b = pljob.load_tokens("out-base/tokens.npz"), pljob.load_tokens("out-jinja/tokens.npz")
assert len(a) == len(b) == 24
assert [list(x["input_ids"]) for x in a] == [list(x["input_ids"]) for x in b]
assert [x["prompt_len"] for x in a] == [x["prompt_len"] for x in b]
PY

# No template in any of the three places.
mkdir notmpl
cp base/* notmpl/
$PYD - notmpl/tokenizer_config.json <<'PY'
import json, sys
tc = json.load(open(sys.argv[1]))
del tc["chat_template"]
json.dump(tc, open(sys.argv[1], "w"))
PY
printf '{"base":"%s/notmpl","corpus":"%s/corpus.jsonl","output_dir":"%s/out-no"}\n' \
    "$TEST_TMP" "$TEST_TMP" "$TEST_TMP" >no.json
"$PY" "$J/tokenize_corpus.py" --config no.json --events no.ev 2>no.err && fail "a base without a template was accepted"
grep -q 'notmpl/tokenizer_config.json: no chat_template, and no chat_template.jinja or chat_template.json' no.ev ||
    { cat no.ev; fail "the refusal does not name where it looked"; }

# The real Gemma 3 tokenizer, and it saved by this transformers.
"$TOP/tests/tools/realbase.sh" --check >/dev/null 2>&1 || {
	echo "SKIP: the real Gemma 3 270M is not built (tests/tools/realbase.sh)"
	exit 77
}
RB=$("$TOP/tests/tools/realbase.sh" --path)
"$PY" - "$RB" saved <<'PY' >save.log 2>&1 || { cat save.log; fail "save_pretrained"; }
import json, os, shutil, sys
import transformers
t = transformers.AutoTokenizer.from_pretrained(sys.argv[1])
t.save_pretrained(sys.argv[2])
shutil.copy(os.path.join(sys.argv[1], "config.json"), sys.argv[2])
tc = json.load(open(os.path.join(sys.argv[2], "tokenizer_config.json")))
print("saved by transformers %s: %s; chat_template in tokenizer_config.json: %s"
      % (transformers.__version__, " ".join(sorted(os.listdir(sys.argv[2]))), "chat_template" in tc))
PY
note "$(tail -n 1 save.log)"
tok real "$RB"
check real "$RB"
tok saved "$TEST_TMP/saved"
check saved "$TEST_TMP/saved"
echo ok
