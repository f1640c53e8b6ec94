#!/usr/bin/python3
"""llama_forward_check.py: compare the tiny engine's forward with llama.cpp
on the same checkpoint, converted to an F32 GGUF by llama.cpp's own
convert_hf_to_gguf.py and served by llama-server.

    llama_forward_check.py MODEL_DIR URL TOKENS.npz [--examples N] [--max-len T]

For every position of the first N examples (prefixes of up to T tokens) it
asks the server for the greedy next token and its top-2 log-probabilities
(cache_prompt makes each prefix one token of work) and runs the tiny
forward once per example.  It prints the agreement and fails (exit 1) when
the top-1 token agrees on fewer than 99% of positions, or when the top-1
log-probability differs by more than 0.01 nats on any position where the
two best tokens are more than 0.01 nats apart (so a tie may flip, a wrong
number may not); the runner-up's log-probability is held to the same bound,
relative to 1 + |logprob|/10 nats, when both sides agree on the runner-up.
Positions the server cannot answer (a lone UTF-8 byte as the greedy token,
or an end of generation without probabilities) are skipped; more than 10%
of them fails the check.
"""
import argparse
import json
import os
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.dirname(HERE)
sys.path.append(JOBS)
import pljob  # noqa: E402


def llama_top2(url, prefix):
    req = {"prompt": prefix, "n_predict": 1, "temperature": 0, "top_k": 1, "samplers": ["top_k"],
           "cache_prompt": True, "n_probs": 2, "return_tokens": True}
    r = urllib.request.Request(url + "/completion", json.dumps(req).encode(),
                               {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=60) as f:
            d = json.load(f)
    except urllib.error.HTTPError:
        # llama-server answers 500 when the greedy token is a lone byte of
        # a UTF-8 sequence ("does not match the expected Content-only
        # format"): that position cannot be read through the server.
        return None
    cp = d.get("completion_probabilities") or []
    if not cp:
        return None  # the greedy token ended generation without probabilities
    tp = cp[0]["top_logprobs"]
    return [[t["id"], t["logprob"]] for t in tp[:2]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("url")
    ap.add_argument("tokens")
    ap.add_argument("--examples", type=int, default=3)
    ap.add_argument("--max-len", type=int, default=160)
    a = ap.parse_args()
    seqs = [[int(x) for x in e["input_ids"][:a.max_len]] for e in pljob.load_tokens(a.tokens)[:a.examples]]
    p = subprocess.run([sys.executable, os.path.join(JOBS, "engines", "tiny.py"), "top1", a.model,
                        "--logprobs", "2"], input=json.dumps(seqs), capture_output=True, text=True)
    if p.returncode:
        print(p.stderr, file=sys.stderr)
        return 1
    mine = json.loads(p.stdout)
    n = agree = skipped = 0
    worst = (0.0, None)
    for s, seq in enumerate(seqs):
        for i in range(len(seq)):
            ll = llama_top2(a.url, seq[:i + 1])
            me = mine[s][i]
            if ll is None:
                skipped += 1
                continue
            n += 1
            agree += ll[0][0] == me[0][0]
            margin = min(ll[0][1] - ll[1][1], me[0][1] - me[1][1])
            if margin > 0.01:
                if ll[0][0] != me[0][0]:
                    worst = (float("inf"), (s, i, ll, me))
                d = abs(ll[0][1] - me[0][1])
                if ll[1][0] == me[1][0]:
                    # The runner-up's log-probability is the sensitive
                    # figure when the top-1 is near certain; far in the
                    # tail float32 sums differ in proportion to its size.
                    d = max(d, abs(ll[1][1] - me[1][1]) / (1.0 + 0.1 * abs(me[1][1])))
                if d > worst[0]:
                    worst = (d, (s, i, ll, me))
    print("top-1 agreement %d/%d positions (%.2f%%), %d positions unreadable through the server; "
          "largest log-probability difference %.5f" % (agree, n, 100.0 * agree / max(1, n), skipped, worst[0]))
    if n < 0.9 * (n + skipped):
        print("too many positions unreadable through llama-server", file=sys.stderr)
        return 1
    if agree < 0.99 * n or worst[0] > 0.01:
        print("mismatch, worst at example %s position %s: llama.cpp %s, tiny %s" % worst[1], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
