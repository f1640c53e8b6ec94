"""ollama_export_check.py: does the model Ollama serves from an exported GGUF
give the next-token distribution transformers gives on the merged
checkpoint?  Real transformers (the pinned environment, tests/tools/pyenv.sh)
against the real Ollama (tests/lib.sh: ollama_start).

    PY ollama_export_check.py URL TAG MERGED_DIR PROMPTS.json LABEL MAX_DLP MIN_AGREE [TOKENS]

PROMPTS.json is a list of conversations (lists of {role, content}); each is
rendered with the checkpoint's own chat template (tokenizer_config.json),
generation prompt added, and sent to Ollama's /api/generate as raw text
(without the leading <bos>, which Ollama adds) with temperature 0, top_k 1
and logprobs, for TOKENS tokens (default 24) or until the model's end of
turn.  transformers runs the same tokens (float32, the class config.json
names) and, position by position along Ollama's greedy answer while both
have produced the same text, compares:
  - top-1: the token transformers ranks first is Ollama's token (its
    text, spaces as U+2581, looked up in the tokenizer; the first position
    where they differ ends that prompt's comparison and counts as a
    disagreement);
  - the log-probability Ollama reports for its token against
    transformers' log-softmax of that token, |difference| in nats.
Printed and asserted: at least 100 positions compared, top-1 agreement at
MIN_AGREE (a fraction) or more, and the largest |difference| at positions
where both agree at most MAX_DLP nats.  Exit status 0 when all hold.
"""
import json
import sys
import urllib.request


def ollama_generate(url, tag, prompt, n):
    req = {"model": tag, "prompt": prompt, "raw": True, "stream": False,
           "logprobs": True, "top_logprobs": 2,
           "options": {"temperature": 0, "top_k": 1, "seed": 3407, "num_predict": n}}
    r = urllib.request.Request(url + "/api/generate", data=json.dumps(req).encode(),
                               headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(r, timeout=600) as f:
        d = json.load(f)
    lp = d.get("logprobs")
    if not lp:
        sys.exit("ollama_export_check.py: %s gave no logprobs (Ollama %s): %s"
                 % (tag, url, json.dumps(d)[:300]))
    return lp


def main():
    url, tag, merged, prompts_path, label = sys.argv[1:6]
    max_dlp, min_agree = float(sys.argv[6]), float(sys.argv[7])
    ntok = int(sys.argv[8]) if len(sys.argv) > 8 else 24
    import torch
    import transformers
    torch.set_num_threads(2)
    tok = transformers.AutoTokenizer.from_pretrained(merged)
    model = transformers.AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32)
    model.eval()
    bos = tok.bos_token or "<bos>"
    convs = json.load(open(prompts_path))
    n = agree = 0
    worst = 0.0
    worst_at = None
    for ci, conv in enumerate(convs):
        text = tok.apply_chat_template(conv, add_generation_prompt=True, tokenize=False)
        if text.startswith(bos):
            text = text[len(bos):]
        got = ollama_generate(url, tag, text, ntok)
        ids = [tok.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"]
        # Ollama's tokens as ids (their text with spaces as SentencePiece's
        # U+2581): one forward over the prompt and that answer, positions
        # compared while the two pick the same token.
        out = []
        for t in got:
            i = tok.convert_tokens_to_ids(t["token"].replace(" ", "\u2581"))
            if i is None or i == tok.unk_token_id:
                break
            out.append(i)
        # Logits only where Ollama's answer is (the last len(out) + 1
        # positions: row k predicts answer token k): the whole sequence's
        # (float32, then float64) are about 1.5 GB a prompt at 262,144 entries.
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids + out]), logits_to_keep=len(out) + 1).logits[0]
            logp = torch.log_softmax(logits.double(), -1)
        for k, (t, i) in enumerate(zip(got, out)):
            mine = int(logp[k].argmax())
            n += 1
            if mine != i:
                print("%s: prompt %d answer token %d: transformers %r, Ollama %r (logprob %.4f)"
                      % (label, ci, k, tok.decode([mine]), t["token"], t["logprob"]))
                break
            agree += 1
            d = abs(float(logp[k, mine]) - float(t["logprob"]))
            if d > worst:
                worst, worst_at = d, (ci, k)
    frac = agree / n if n else 0.0
    print("%s: top-1 agreement %d/%d = %.4f (min %.2f), largest |dlogprob| %.4f nats at %s (max %.3f)"
          % (label, agree, n, frac, min_agree, worst, worst_at, max_dlp))
    ok = n >= 100 and frac >= min_agree and worst <= max_dlp
    if n < 100:
        print("%s: only %d positions compared" % (label, n))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
