#!/bin/bash
# corpus/tokenize-job: jobs/tokenize_corpus.py on a tiny Gemma 3 base (tests/fixtures)
# and a generated routing corpus: the token file and stats are right (one
# BOS, prompt masked, response ends in <end_of_turn>, keys, longest), and
# each refusal names the example's key and counts and leaves no artifact:
# over max_seq_length, an empty response span, a double BOS (in content and
# from add_special_tokens), a prompt over num_ctx - num_ctx_margin (G01), a
# reply holding <end_of_turn> as text, a token id at or beyond config.json's
# vocab_size; an added token that is no SentencePiece piece
# (<image_soft_token>) gets its id from added_tokens_decoder.
set -eu
: "${TOP:?}" "${TEST_TMP:?}"
PY=/usr/bin/python3
J=$TOP/jobs
cd "$TEST_TMP"
. "$TOP/tests/lib.sh"

$PY "$TOP/tests/fixtures/gen_gemma3.py" base >/dev/null
$PY "$TOP/tests/fixtures/gen_corpus.py" corpus.jsonl --n 40 --filler 30

conf() {	# conf NAME EXTRA-JSON-MEMBERS
	printf '{"base":"%s/base","corpus":"%s","output_dir":"%s/out-%s"%s}\n' \
	    "$TEST_TMP" "$2" "$TEST_TMP" "$1" "${3:+,$3}" >"$1.json"
}
run() {		# run NAME: sets rc, events in NAME.ev
	set +e
	$PY "$J/tokenize_corpus.py" --config "$1.json" --events "$1.ev" 2>"$1.err"
	rc=$?
	set -e
}

# --- a good corpus
conf ok corpus.jsonl
run ok
[ $rc -eq 0 ] || { cat ok.ev ok.err; fail "tokenize exited $rc"; }
grep -q '"type":"artifact","name":"tokens"' ok.ev || fail "no tokens artifact"
grep -q '"type":"artifact","name":"stats"' ok.ev || fail "no stats artifact"
tail -n 1 ok.ev | grep -q '"type":"done"' || fail "last event is not done"
$PY - "$TEST_TMP" <<'PY'
import json, sys
import numpy as np
import os
sys.path.append(os.environ["TOP"] + "/jobs")
import pljob
import sentencepiece as spm
t = sys.argv[1]
ex = pljob.load_tokens(t + "/out-ok/tokens.npz")
st = json.load(open(t + "/out-ok/stats.json"))
corpus = [json.loads(l) for l in open(t + "/corpus.jsonl")]
sp = spm.SentencePieceProcessor(model_file=t + "/base/tokenizer.model")
bos, sot, eot = sp.piece_to_id("<bos>"), sp.piece_to_id("<start_of_turn>"), sp.piece_to_id("<end_of_turn>")
assert len(ex) == 40 == st["examples"], (len(ex), st["examples"])
assert st["corpus_keys"] == [c["key"] for c in corpus], "corpus_keys differ from the corpus"
for e, c in zip(ex, corpus):
    ids = [int(x) for x in e["input_ids"]]
    assert ids[0] == bos and ids.count(bos) == 1, (e["key"], ids[:4])
    assert ids[1] == sot, e["key"]
    assert ids[-1] == eot, (e["key"], "response must end in <end_of_turn>")
    resp = ids[e["prompt_len"]:]
    assert len(resp) == e["response_len"] >= 2
    # The response span decodes to the assistant's content: the masked
    # prompt ends exactly where the answer starts.
    assert sp.decode(resp[:-1]) == c["messages"][-1]["content"], (e["key"], sp.decode(resp[:-1]))
    p = ids[:e["prompt_len"]]
    last = len(p) - 1 - p[::-1].index(sot)
    assert sp.decode(p[last + 1:]) == "model\n", (e["key"], sp.decode(p[last + 1:]))
lens = [len(e["input_ids"]) for e in ex]
i = int(np.argmax(lens))
assert st["longest"] == {"key": ex[i]["key"], "tokens": lens[i], "response_len": ex[i]["response_len"],
                         "prompt_len": ex[i]["prompt_len"]}, st["longest"]
r = sorted(e["response_len"] for e in ex)
assert st["response_span"]["min"] == r[0] and st["response_span"]["max"] == r[-1]
assert st["response_span"]["median"] == float(np.median(r))
assert st["tokens"] == sum(lens)
print("tokens and stats OK:", st["examples"], "examples,", st["tokens"], "tokens")
PY

# By hand, without PL_EVENTS or --events, the events go to standard output
# and nothing else does.
conf hand corpus.jsonl
env -u PL_EVENTS $PY "$J/tokenize_corpus.py" --config hand.json >hand.out 2>hand.err || fail "by hand: exit $?"
$PY -c 'import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert ev[0]["type"] == "started" and ev[-1]["type"] == "done", ev
assert [e["name"] for e in ev if e["type"] == "artifact"] == ["tokens", "stats"]' hand.out \
    || fail "by hand: standard output is not the events"

# --- refusals.  Each must exit 2, name the key and its counts, and leave
# no artifact behind.
refused() {	# refused NAME PATTERN...
	local n=$1; shift
	[ $rc -eq 2 ] || { cat "$n.ev" "$n.err"; fail "$n: exit $rc, want 2"; }
	grep -q '"type":"error"' "$n.ev" || fail "$n: no error event"
	for p in "$@"; do
		grep '"type":"error"' "$n.ev" | grep -q -- "$p" || { cat "$n.ev"; fail "$n: error lacks '$p'"; }
	done
	[ ! -e "out-$n/tokens.npz" ] || fail "$n: a tokens file was left behind"
	! grep -q '"type":"artifact"' "$n.ev" || fail "$n: an artifact was reported"
}

# Over max_seq_length: make one example long.
$PY - <<'PY'
import json
rows = [json.loads(l) for l in open("corpus.jsonl")]
long = json.loads(json.dumps(rows[3])); long["key"] = "too-long"
long["messages"][1]["content"] += " and also" * 400
empty = json.loads(json.dumps(rows[4])); empty["key"] = "empty-answer"
empty["messages"][-1]["content"] = ""
bos = json.loads(json.dumps(rows[5])); bos["key"] = "bos-in-content"
bos["messages"][1]["content"] = "<bos>" + bos["messages"][1]["content"]
for name, ex in (("long", long), ("empty", empty), ("bos", bos)):
    with open(name + ".jsonl", "w") as f:
        for r in rows[:10] + [ex] + rows[10:20]:
            f.write(json.dumps(r) + "\n")
PY
conf long long.jsonl '"max_seq_length":1024'
run long
refused long "1 example over max_seq_length" "too-long (" "max_seq_length 1024"
grep '"type":"error"' long.ev | grep -Eq 'too-long \([0-9]+ tokens: prompt [0-9]+ \+ response [0-9]+' || fail "long: counts missing"

conf empty empty.jsonl
run empty
refused empty "empty response span" "empty-answer (response span 1 tokens"

conf bos bos.jsonl
run bos
refused bos "double BOS" "bos-in-content (2 BOS tokens, at positions \[0, "

conf special corpus.jsonl '"add_special_tokens":true'
run special
refused special "40 examples with a double BOS" "ex0000 (2 BOS tokens, at positions \[0, 1\])" "and 35 more"

# G01: the long example's prompt is over num_ctx - margin, the others fit.
conf ctx long.jsonl '"num_ctx":1024,"num_ctx_margin":256'
run ctx
refused ctx "1 example with a prompt over num_ctx minus num_ctx_margin" \
    "too-long (prompt [0-9]* tokens > num_ctx 1024 - num_ctx_margin 256 = 768; G01)"
! grep '"type":"error"' ctx.ev | grep -q "ex0001" || fail "ctx: a fitting example was named"

# Bracketed words that are no token stay text; a special-token string in
# content becomes that token, as transformers tokenizes it.
$PY - <<'PY'
import json
rows = [json.loads(l) for l in open("corpus.jsonl")][:3]
rows[1]["messages"][1]["content"] = "make <b>this</b> bold <unused0> and <end_of_turn>"
with open("brackets.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
PY
conf brackets brackets.jsonl
run brackets
[ $rc -eq 0 ] || { cat brackets.ev; fail "brackets: exit $rc"; }
$PY - "$TEST_TMP" <<'PY'
import os, sys
sys.path.append(os.environ["TOP"] + "/jobs")
import pljob
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=sys.argv[1] + "/base/tokenizer.model")
e = pljob.load_tokens(sys.argv[1] + "/out-brackets/tokens.npz")[1]
ids = [int(x) for x in e["input_ids"][:e["prompt_len"]]]
eot = sp.piece_to_id("<end_of_turn>")
assert ids.count(eot) == 2, "the <end_of_turn> in content is not one token: %d" % ids.count(eot)
assert sp.piece_to_id("<b>") == sp.unk_id(), "fixture has a <b> piece"
assert "make <b>this</b> bold" in sp.decode(ids), sp.decode(ids)
print("brackets OK")
PY

# An assistant reply holding the end-of-turn marker as text is refused by
# key: cut there, the rest of the reply would silently leave the labels.
$PY - <<'PY'
import json
rows = [json.loads(l) for l in open("corpus.jsonl")][:3]
rows[1]["key"] = "eot-in-reply"
rows[1]["messages"][-1]["content"] = "first part <end_of_turn> and the rest of the reply"
with open("eotreply.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
PY
conf eotreply eotreply.jsonl
run eotreply
refused eotreply "example eot-in-reply: the assistant's reply contains the end-of-turn marker '<end_of_turn>' as text"

# An added token that is no piece of tokenizer.model (the fixture's
# <image_soft_token>, id 768 past the 768 pieces, as Gemma 3's 262144)
# takes its id from added_tokens_decoder with tokenizer = sentencepiece.
$PY - <<'PY'
import json
rows = [json.loads(l) for l in open("corpus.jsonl")][:3]
rows[2]["key"] = "image-token"
rows[2]["messages"][1]["content"] = "look at <image_soft_token> this"
with open("imgtok.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
PY
conf imgtok imgtok.jsonl '"tokenizer":"sentencepiece"'
run imgtok
[ $rc -eq 0 ] || { cat imgtok.ev imgtok.err; fail "imgtok: exit $rc"; }
$PY - "$TEST_TMP" <<'PY'
import json, os, sys
sys.path.append(os.environ["TOP"] + "/jobs")
import pljob
import sentencepiece as spm
t = sys.argv[1]
sp = spm.SentencePieceProcessor(model_file=t + "/base/tokenizer.model")
tc = json.load(open(t + "/base/tokenizer_config.json"))
img = [int(k) for k, v in tc["added_tokens_decoder"].items() if v["content"] == "<image_soft_token>"]
assert img == [sp.get_piece_size()], (img, sp.get_piece_size())
e = pljob.load_tokens(t + "/out-imgtok/tokens.npz")[2]
ids = [int(x) for x in e["input_ids"]]
assert ids.count(img[0]) == 1, "<image_soft_token> is not the one token %d: %s" % (img[0], ids)
text = sp.decode([i for i in ids if i < sp.get_piece_size()])
assert "image_soft" not in text, text
print("image token OK")
PY

# A token id at or beyond the model's vocabulary (config.json's vocab_size)
# is refused naming both numbers: the image token with vocab_size 768
# (what Gemma 3 270M is to its tokenizer), any text with vocab_size 432.
for v in 768 432; do
	rm -rf base$v; cp -r base base$v
	$PY - base$v/config.json $v <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["text_config"]["vocab_size"] = int(sys.argv[2])
json.dump(c, open(sys.argv[1], "w"))
PY
done
printf '{"base":"%s/base768","corpus":"imgtok.jsonl","output_dir":"%s/out-vocab768"}\n' "$TEST_TMP" "$TEST_TMP" >vocab768.json
run vocab768
refused vocab768 "1 example with a token id at or beyond the model's vocabulary (768, config.json's vocab_size; the tokenizer has 769 ids)" \
    "image-token (token id 768 at position [0-9]*, prompt; the model's vocab_size is 768)"
printf '{"base":"%s/base432","corpus":"corpus.jsonl","output_dir":"%s/out-vocab432"}\n' "$TEST_TMP" "$TEST_TMP" >vocab432.json
run vocab432
refused vocab432 "examples with a token id at or beyond the model's vocabulary (432, config.json's vocab_size; the tokenizer has 769 ids)" \
    "ex0000 (token id [0-9]* at position [0-9]*, [a-z]*; the model's vocab_size is 432)"

# A malformed corpus line names the file and line.
{ head -n 2 corpus.jsonl; echo '{"key": "x", "messages": [{"role": "user", "content": "hi"}]}'; } >bad.jsonl
conf badline bad.jsonl
run badline
refused badline "bad.jsonl:3: example x"
echo "corpus/tokenize-job: OK"
