"""hf_export_check.py: is the GGUF that llama.cpp serves the checkpoint that
transformers runs? Real transformers (the pinned environment,
tests/tools/pyenv.sh) against real llama-server (the oracle build).

    PY hf_export_check.py MERGED_DIR SEQS.json GGUF LABEL MAX_DLP MIN_AGREE

SEQS.json is a list of token-id lists. transformers' own Gemma 3 (the
class config.json names, float32) runs MERGED_DIR once per sequence; its
next-token log-probabilities (over vocab_size, as the GGUF's padded
vocabulary has it) are compared at every position with what llama-server
reports for the same prefix (top-2 log-probabilities; cache_prompt makes each prefix
one token of work). Printed and asserted: the top-1 token agrees at
MIN_AGREE (a fraction) of the positions or more, and at every position
where transformers' two best tokens are more than 2 * MAX_DLP nats apart
(so a near-tie may flip, a wrong number may not); where both agree, the
top-1 log-probability differs by at most MAX_DLP nats; at least 200
positions are read (a position whose greedy token is a lone byte of a
UTF-8 sequence cannot be read through the server: counted and printed).
Exit status 0 when all hold.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.append(os.path.join(TOP, "tests", "fixtures"))
sys.path.append(HERE)
from llama_forward_check import llama_top2  # noqa: E402
from check_export import start_server  # noqa: E402


def hf_logprobs(model_dir, seqs):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText
    torch.set_num_threads(1)
    cfg = AutoConfig.from_pretrained(model_dir)
    cls = AutoModelForImageTextToText if "vision_config" in cfg.to_dict() else AutoModelForCausalLM
    m = cls.from_pretrained(model_dir, dtype=torch.float32)
    m.eval()
    out = []
    with torch.no_grad():
        for s in seqs:
            logits = m(input_ids=torch.tensor([s])).logits[0].double()
            out.append(torch.log_softmax(logits, -1))
    return out


def main():
    model_dir, seqs_path, gguf, label = sys.argv[1:5]
    max_dlp, min_agree = float(sys.argv[5]), float(sys.argv[6])
    seqs = json.load(open(seqs_path))
    mine = hf_logprobs(model_dir, seqs)
    srv, url = start_server(gguf, gguf + ".server.log")
    n = agree = skipped = clear = clear_agree = 0
    worst = 0.0
    flips = []
    try:
        for s, seq in enumerate(seqs):
            for i in range(len(seq)):
                ll = llama_top2(url, seq[:i + 1])
                if ll is None:
                    skipped += 1
                    continue
                lp = mine[s][i]
                top2 = lp.topk(2)
                t0, margin = int(top2.indices[0]), float(top2.values[0] - top2.values[1])
                n += 1
                ok = ll[0][0] == t0
                agree += ok
                if margin > 2 * max_dlp:
                    clear += 1
                    clear_agree += ok
                if ok:
                    worst = max(worst, abs(ll[0][1] - float(lp[t0])))
                else:
                    flips.append((s, i, ll[0][0], t0, margin))
    finally:
        srv.terminate()
        srv.wait()
    print("%s: top-1 agrees at %d/%d positions (%.2f%%; %d/%d where transformers' top-2 margin "
          "exceeds %.3f nats); largest |delta log-prob| of the top-1 token %.5f nats; %d positions "
          "unreadable through the server" % (label, agree, n, 100.0 * agree / max(1, n), clear_agree,
                                            clear, 2 * max_dlp, worst, skipped))
    for f in flips[:5]:
        print("%s:   disagree seq %d pos %d: llama.cpp %d, transformers %d (margin %.4f nats)"
              % ((label,) + f))
    bad = []
    if n < 200:
        bad.append("fewer than 200 positions compared")
    if agree < min_agree * n:
        bad.append("top-1 agreement under %.1f%%" % (100 * min_agree))
    if clear_agree != clear:
        bad.append("a disagreement where the margin is clear")
    if worst > max_dlp:
        bad.append("a top-1 log-probability off by more than %g nats" % max_dlp)
    for b in bad:
        print("%s: FAIL: %s" % (label, b))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
