#!/bin/bash
# corpus/tokenize-stage.sh: the tokenize stage with the real jobs/tokenize_corpus.py: the
# stats value it stores (corpus keys as a count and a digest), and the job's
# refusals passed on as the stage's failure, naming the example and its
# counts: an example over max_seq_length, a prompt over num_ctx minus the
# margin (G01), a double BOS; and the stage's own key checks.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
setup_tokens 40

tok() {
	local name=$1; shift
	set +e
	"$CTL" stage tokenize -w "$TEST_TMP/$name" base="$BASE" corpus="$CORPUS" "$@" \
	    >"$TEST_TMP/$name.out" 2>&1
	rc=$?
	set -e
	cat "$TEST_TMP/$name.out"
}

# The stored summary: the corpus keys' count and digest match the file's.
v=$(sed -n 's/^job.value {"key":"stats","value":"\(.*\)"}$/\1/p' "$TEST_TMP/tokenize.out" | sed 's/\\"/"/g')
[ -n "$v" ] || die "no stats value"
"$PYD" - "$v" "$TEST_TMP/tok/stats.json" <<'EOF' || die "the stats value does not match stats.json"
import hashlib, json, sys
v = json.loads(sys.argv[1])
st = json.load(open(sys.argv[2]))
keys = st["corpus_keys"]
assert "corpus_keys" not in v, "the key list must not be in the value"
assert v["corpus_keys_count"] == len(keys) == 40, v
text = json.dumps(keys, separators=(",", ":"), ensure_ascii=False)
assert v["corpus_keys_sha256"] == hashlib.sha256(text.encode()).hexdigest(), v
assert v["examples"] == st["examples"] and v["longest"] == st["longest"], v
EOF
grep -q '^job.metric {"name":"examples","step":0,"value":40}' "$TEST_TMP/tokenize.out" ||
    die "no examples metric"

set -- $("$PYD" -c 'import json,sys; l=json.load(open(sys.argv[1]))["longest"]; print(l["key"], l["tokens"])' \
    "$TEST_TMP/tok/stats.json")
key=$1 len=$2

tok toolong max_seq_length=$((len - 1))
[ "$rc" -ne 0 ] || die "an example over max_seq_length was accepted"
grep -q "stage tokenize: failed: tokenize: exited with status 2 (bad input): .*$key.*$len" "$TEST_TMP/toolong.out" ||
    die "the refusal does not name $key and its $len tokens"
[ -e "$TEST_TMP/toolong/tokens.npz" ] && die "a refused corpus left a token file"

tok ctx num_ctx=150 num_ctx_margin=20
[ "$rc" -ne 0 ] || die "prompts over num_ctx - margin were accepted (G01)"
grep -q 'stage tokenize: failed: tokenize: exited with status 2 (bad input): .*num_ctx' "$TEST_TMP/ctx.out" ||
    die "the num_ctx refusal does not say so"

tok bos add_special_tokens=yes
[ "$rc" -ne 0 ] || die "a double BOS was accepted"
grep -qi 'stage tokenize: failed: tokenize: exited with status 2 (bad input): .*BOS' "$TEST_TMP/bos.out" ||
    die "the double BOS refusal does not say so"

tok badkeys num_ctx=100 num_ctx_margin=200 tokenizer=bpe
[ "$rc" -eq 2 ] || die "bad keys were not refused by the check (exit $rc)"
grep -q 'num_ctx.*leaves no room above num_ctx_margin 200' "$TEST_TMP/badkeys.out" || die "no num_ctx error"
grep -q 'tokenizer.*"bpe" is not auto, sentencepiece or hf' "$TEST_TMP/badkeys.out" || die "no tokenizer error"
echo "ok"
