#!/bin/bash
# pipelinectl check (no daemon) and the daemon's submit check the inputs a
# run needs before it starts: paths that must exist, be readable and be a
# directory or a file (base, corpus, cases, system, capabilities,
# modelfile, adapter), a base whose config.json parses and is Gemma 3, a
# corpus whose first lines parse; every problem at once, as
# file:line: key: message. Runs against the real stage plugins; the bases
# are fixtures of tests/fixtures/gen_gemma3.py, edited.
. "$(dirname "$0")/../../lib.sh"
pl_conf
D=$TEST_TMP/in
mkdir -p "$D"
/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$D/base" >/dev/null || fail "fixture"
cp -r "$D/base" "$D/llama"
sed -i 's/Gemma3ForConditionalGeneration/LlamaForCausalLM/; s/"model_type": "gemma3"/"model_type": "llama"/' "$D/llama/config.json"
cp -r "$D/base" "$D/broken"
printf '{\n  "architectures": [\n    "Gemma3ForCausalLM",\n' >"$D/broken/config.json"
printf '{"key": "a", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}\n' >"$D/good.jsonl"
{ cat "$D/good.jsonl"; echo 'not json'; echo '{"key": "c", "messages": [{"role": "user", "content": "x"}]}'; } >"$D/bad.jsonl"
: >"$D/Modelfile"
spec=$TEST_TMP/inputs.ini
cat >"$spec" <<INI
[run]
name = inputs

[tok-missing]
stage = tokenize
base = $D/nosuch
corpus = $D

[tok-llama]
stage = tokenize
base = $D/llama
corpus = $D/bad.jsonl

[tok-broken]
stage = tokenize
base = $D/broken
corpus = $D/good.jsonl

[train]
after = tok-missing
base = $D/good.jsonl

[merge]
after = train
base = $D/base
adapter = $D/noadapter

[bake]
after = merge
model = m
cases = $D/nocases.jsonl
system = $D
capabilities = $D/nocaps.txt

[register]
after = bake
tag = t:1
modelfile = $D/nomodelfile

[tok-good]
stage = tokenize
base = $D/base
corpus = $D/good.jsonl
INI
out=$(pctl check "$spec" 2>&1) && fail "a spec with bad inputs passed check"
echo "$out"
want() { echo "$out" | grep -qF -- "$1" || fail "check lacks: $1"; }
want "$spec:6: base: $D/nosuch: No such file or directory"
want "$spec:7: corpus: $D: a directory, not a file"
want "$spec:11: base: $D/llama/config.json: architecture LlamaForCausalLM is not one convert supports"
want "$spec:12: corpus: $D/bad.jsonl:2: not a JSON object"
want "$spec:12: corpus: $D/bad.jsonl:3: \"messages\" must list at least a prompt and a response; a line is one JSON object: {\"key\": \"ex1\", \"messages\": [{\"role\": \"user\""
want "$spec:16: base: $D/broken/config.json:3: not a JSON object"
want "$spec:21: base: $D/good.jsonl: not a directory"
want "$spec:26: adapter: $D/noadapter: No such file or directory"
want "$spec:31: cases: $D/nocases.jsonl: No such file or directory"
want "$spec:32: system: $D: a directory, not a file"
want "$spec:33: capabilities: $D/nocaps.txt: No such file or directory"
want "$spec:38: modelfile: $D/nomodelfile: No such file or directory"
echo "$out" | grep -q "tok-good\|:43:\|:44:" && fail "the good section was refused"
[ "$(echo "$out" | wc -l)" -eq 12 ] || fail "expected exactly 12 problems"
# tokens = no would be read as a path named "no": refused, naming the word
# that skips register's served-template check.
printf '[register]\ntag = t:1\nmodelfile = %s/Modelfile\ntokens = no\n' "$D" > "$D/tokno.ini"
touch "$D/Modelfile"
out=$(pctl check "$D/tokno.ini" 2>&1) && fail "tokens = no passed check"
echo "$out" | grep -qF "tokno.ini:4: tokens: \"no\" would be read as a path; to skip the served template's check write tokens = none" ||
	fail "tokens = no: $out"
# The daemon's submit says the same, and starts nothing.
pl_start
out2=$(pctl submit "$spec" 2>&1) && fail "the daemon accepted bad inputs"
for l in 6 7 11 12 16 21 26 31 32 33 38; do
	echo "$out2" | grep -q "inputs.ini:$l: " || fail "submit lacks line $l: $out2"
done
[ "$(db "SELECT count(*) FROM runs")" = 0 ] || fail "a refused spec left a run"
pl_stop
echo ok
