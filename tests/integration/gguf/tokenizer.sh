#!/bin/bash
# gguf/tokenizer.sh: the vocabulary convert writes tokenizes as the
# checkpoint's own SentencePiece model does. llama-server serves the Q8_0
# file; its /tokenize (special tokens parsed, none added) and the
# SentencePiece model (after splitting out the special tokens named in
# tokenizer_config.json, as transformers does) must give the same ids for a
# few hundred varied strings: words, digits, punctuation, runs of spaces,
# tabs and newlines, accents, CJK, emoji (byte fallback), and chat turns
# with their control tokens. Both fixture layouts; BOS is added on request.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gguf.sh"
cd "$TEST_TMP"
SERVER_PID=""
trap '[ -n "$SERVER_PID" ] && kill $SERVER_PID 2>/dev/null; wait 2>/dev/null' EXIT

for c in cond causal; do
	fixture $c --layout $([ $c = cond ] && echo conditional || echo causal)
	stage convert input=$c output=$TEST_TMP/$c-f16.gguf || { cat convert.out; fail "convert $c"; }
	stage quantize input=$c-f16.gguf output=$TEST_TMP/$c-q8.gguf || { cat quantize.out; fail "quantize $c"; }
	port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	"$LLAMA_BIN/llama-server" -m $c-q8.gguf --host 127.0.0.1 --port $port -c 256 -t 1 \
	    >server-$c.log 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 300); do
		curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
		kill -0 $SERVER_PID 2>/dev/null || { tail -20 server-$c.log; fail "llama-server died"; }
		sleep 0.1
	done
	/usr/bin/python3 - "http://127.0.0.1:$port" $c "$TOP/tests/fixtures" <<'PY' || fail "$c: tokenizers disagree"
import json, random, sys, urllib.request
import sentencepiece as spm
url, ckpt = sys.argv[1], sys.argv[2]
sp = spm.SentencePieceProcessor(model_file=f"{ckpt}/tokenizer.model")
tc = json.load(open(f"{ckpt}/tokenizer_config.json"))
sys.path.insert(0, sys.argv[3])
from real_base import sp_encode
special = {d["content"]: int(i) for i, d in tc["added_tokens_decoder"].items()
           if d.get("special") and int(i) < sp.vocab_size()}

def reference(s):
    return sp_encode(sp, special, s)

def server(s, add_special=False):
    req = urllib.request.Request(url + "/tokenize", data=json.dumps(
        {"content": s, "add_special": add_special, "parse_special": True}).encode(),
        headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=30))["tokens"]

rnd = random.Random(1234)
words = ("the quick brown fox jumps over lazy dog router command play music turn on "
         "lights weather tomorrow set timer minutes kitchen hello world model user "
         "assistant function call json value true false null").split()
extra = ["café", "naïve", "Über", "mañana", "日本語", "中文字符", "한국어", "😀", "🚀🔥",
         "Ωμέγα", "привет", "e\u0301", "1234567890", "3.14159", "-42", "x=y+z", "(a, b)",
         "{\"k\": [1, 2]}", "snake_case", "CamelCase", "URL: http://x.y/z?q=1", "tab\there",
         "line\nbreak", "  two spaces", "trailing  ", "\n\n", "a\u00a0b", "…", "—"]
turn = ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>"]
strings = list(extra)
for n in range(320):
    k = rnd.randint(1, 12)
    parts = []
    for _ in range(k):
        r = rnd.random()
        if r < 0.55:
            w = rnd.choice(words)
            parts.append(w.capitalize() if rnd.random() < 0.2 else w)
        elif r < 0.75:
            parts.append(rnd.choice(extra))
        elif r < 0.85:
            parts.append(str(rnd.randint(0, 10 ** rnd.randint(1, 6))))
        else:
            parts.append(rnd.choice(list(".,;:!?'\"-()[]/\\@#$%^&*_+=<>|~`")))
    sep = rnd.choice([" ", " ", " ", "  ", "\n", "\t", ""])
    s = sep.join(parts)
    if n % 4 == 0:
        s = f"<start_of_turn>user\n{s}<end_of_turn>\n<start_of_turn>model\n"
    elif n % 7 == 0:
        s = rnd.choice(turn) + s + rnd.choice(turn)
    strings.append(s)
bad = 0
for s in strings:
    want, got = reference(s), server(s)
    if want != got:
        bad += 1
        if bad <= 10:
            print(f"{ckpt}: {s!r}\n  sentencepiece {want}\n  llama.cpp     {got}")
# BOS is added when asked (add_bos_token = true), EOS is not.
w = server("hello", add_special=True)
if w[:1] != [2] or w[1:] != reference("hello"):
    print(f"{ckpt}: add_special gave {w}")
    bad += 1
print(f"{ckpt}: {len(strings)} strings, {bad} disagreements")
sys.exit(1 if bad else 0)
PY
	kill $SERVER_PID
	wait $SERVER_PID 2>/dev/null || true
	SERVER_PID=""
done
