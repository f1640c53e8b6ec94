#!/usr/bin/python3
"""check_export.py: is the exported Q8_0 GGUF, served by llama.cpp, the model
the tiny engine trained?

    check_export.py --gguf Q8_0.gguf --merged MERGED_DIR --tokens tokens.npz
        --cases cases.jsonl [--adapter-base BASE --adapter ADAPTER]
        [--examples N] [--label NAME]

Starts its own llama-server (the oracle build, LLAMA_BIN or
tests/tools/llama-oracle.sh) on the GGUF, then:

1. Greedy decoding.  For every case with a train_key found in the token
   file (the train-flagged cases the run trained on), the training
   example's prompt tokens, exactly as tokenize rendered them with the
   chat template, go to /completion (temperature 0, top-k 1); the answer
   must be the trained response, token for token, ended by the model's
   own end of turn.  At least 90% of the cases must.
2. Top-1 agreement.  For every position of the examples (prompt and
   response; the first N with --examples), each distinct prefix once (the
   examples share their system prompt), llama.cpp's greedy next token (n_probs, one token of
   work per prefix with cache_prompt) against the PyTorch forward of the
   tiny engine on the merged checkpoint (jobs/engines/tiny.py top1): at
   least 99% must agree.  Positions llama-server cannot answer (a lone
   UTF-8 byte as the greedy token) are skipped and counted; more than 10%
   fails.  The top-1 log-probability difference and the disagreements
   with their margins are printed, as figures, not as a pass mark.

With --adapter the same top-1 comparison is also made between the merged
checkpoint and base + adapter in the tiny engine (the merge itself).

Exit status 0 when both marks are met, 1 otherwise.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
JOBS = os.path.join(TOP, "jobs")
sys.path.append(JOBS)
sys.path.append(os.path.join(TOP, "tests", "fixtures"))
import pljob  # noqa: E402
from llama_forward_check import llama_top2  # noqa: E402


def llama_bin():
    b = os.environ.get("LLAMA_BIN")
    if b:
        return b
    out = subprocess.run([os.path.join(TOP, "tests/tools/llama-oracle.sh")], capture_output=True,
                         text=True, check=True).stdout
    return out.strip().splitlines()[-1]


def start_server(gguf, logpath):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    lf = open(logpath, "wb")
    p = subprocess.Popen([os.path.join(llama_bin(), "llama-server"), "-m", gguf, "-c", "1024", "-np", "1",
                          "-t", "1", "--host", "127.0.0.1", "--port", str(port)],
                         stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d" % port
    for _ in range(600):
        if p.poll() is not None:
            raise SystemExit("llama-server exited %d; see %s" % (p.returncode, logpath))
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return p, url
        except OSError:
            time.sleep(0.1)
    p.kill()
    raise SystemExit("llama-server did not come up; see %s" % logpath)


def post(url, path, req):
    r = urllib.request.Request(url + path, json.dumps(req).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(r, timeout=120) as f:
        return json.load(f)


def greedy(url, prompt, n):
    d = post(url, "/completion", {"prompt": prompt, "n_predict": n, "temperature": 0, "top_k": 1,
                                  "samplers": ["top_k"], "cache_prompt": False, "return_tokens": True,
                                  "seed": 3407})
    return d.get("tokens") or [], d.get("stop_type"), d.get("content", "")


def tiny_greedy(model_dir, prompts, n_max, eot):
    """The tiny engine's own greedy answers (merged weights, PyTorch):
    token lists ending with eot, or cut at n_max."""
    sys.path.append(os.path.join(JOBS, "engines"))
    import torch
    import tiny
    torch.set_num_threads(1)
    model, _, _ = tiny.load_model(model_dir)
    model.eval()
    out = []
    with torch.no_grad():
        for p, n in zip(prompts, n_max):
            ids = list(p)
            got = []
            while len(got) < n:
                t = int(model(torch.tensor([ids], dtype=torch.int64), logits_to_keep=1)[0, -1].argmax())
                got.append(t)
                ids.append(t)
                if t == eot:
                    break
            out.append(got)
    return out


def tiny_top(model, seqs, adapter=None):
    argv = [sys.executable, os.path.join(JOBS, "engines", "tiny.py"), "top1", model]
    if adapter:
        argv.append(adapter)
    p = subprocess.run(argv + ["--logprobs", "2"], input=json.dumps(seqs), capture_output=True, text=True)
    if p.returncode:
        raise SystemExit("tiny.py top1 %s: %s" % (model, p.stderr.strip()[-2000:]))
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--merged", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--adapter-base")
    ap.add_argument("--adapter")
    ap.add_argument("--examples", type=int, default=0, help="0: every example")
    ap.add_argument("--label", default="")
    ap.add_argument("--log", default=None)
    a = ap.parse_args()
    lab = (a.label + ": ") if a.label else ""
    ex = pljob.load_tokens(a.tokens)
    by_key = {e["key"]: e for e in ex}
    cases = [json.loads(l) for l in open(a.cases) if l.strip() and not l.startswith("#")]
    trained = [c for c in cases if c.get("train_key") in by_key]
    if not trained:
        raise SystemExit("%sno case has a train_key in %s" % (lab, a.tokens))
    logpath = a.log or (a.gguf + ".check-server.log")
    srv, url = start_server(a.gguf, logpath)
    ok = True
    try:
        # 1. Greedy decoding of the trained responses.
        hits, misses = 0, []
        eot = None
        prompts, resps, served = [], [], []
        for c in trained:
            e = by_key[c["train_key"]]
            ids = [int(x) for x in e["input_ids"]]
            n = e["response_len"]
            prompt, resp = ids[:len(ids) - n], ids[len(ids) - n:]
            if eot is None:
                eot = resp[-1]  # <end_of_turn>: the stop the model learned
            got, stop, text = greedy(url, prompt, n + 4)
            prompts.append(prompt)
            resps.append(resp)
            served.append(got if stop == "eos" else got + [-1])
            # llama-server ends "tokens" with the end-of-generation token
            # it stopped on and reports stop_type "eos".
            if got == resp and stop == "eos" and resp[-1] == eot:
                hits += 1
            else:
                misses.append((c["id"], text[:80], stop))
        rate = hits / len(trained)
        print("%sgreedy: %d/%d train-flagged cases answered with the trained response (%.1f%%)"
              % (lab, hits, len(trained), 100 * rate))
        # The same prompts through the PyTorch model: tells a miss of the
        # training (both answer alike) from a fault of the export.
        mine = tiny_greedy(a.merged, prompts, [len(r) + 4 for r in resps], eot)
        print("%sgreedy in PyTorch (merged weights): %d/%d trained responses; llama.cpp's answer is "
              "PyTorch's, token for token, on %d/%d" % (
                  lab, sum(m == r for m, r in zip(mine, resps)), len(resps),
                  sum(m == g for m, g in zip(mine, served)), len(resps)))
        for m in misses:
            print("%s  miss %s: %r (stop %s)" % ((lab,) + m))
        if rate < 0.90:
            print("%sFAIL: fewer than 90%% of the train-flagged cases decode to their response" % lab)
            ok = False

        # 2. Top-1 agreement, every position of the first N examples.
        seqs = [[int(x) for x in e["input_ids"]] for e in ex[:a.examples or len(ex)]]
        mine = tiny_top(a.merged, seqs)
        n = agree = skipped = rn = ragree = raw_n = raw_agree = 0
        worst_lp = 0.0
        flips = []
        seen = {}
        for s, seq in enumerate(seqs):
            # positions L-n-1 .. L-2 predict the response: what the model
            # learned, and what the served model generates.
            first_resp = len(seq) - ex[s]["response_len"] - 1
            for i in range(len(seq)):
                # Every example starts with the same system prompt: a prefix
                # seen before is the same position, computed again; it is
                # counted once (and, for the record, in a raw figure too).
                key = tuple(seq[:i + 1])
                if key in seen:
                    if seen[key] is not None:
                        raw_n += 1
                        raw_agree += seen[key]
                    continue
                ll = llama_top2(url, seq[:i + 1])
                me = mine[s][i]
                seen[key] = None if ll is None else int(ll[0][0] == me[0][0])
                if ll is None:
                    skipped += 1
                    continue
                n += 1
                raw_n += 1
                raw_agree += seen[key]
                resp = first_resp <= i < len(seq) - 1
                rn += resp
                if ll[0][0] == me[0][0]:
                    agree += 1
                    ragree += resp
                    worst_lp = max(worst_lp, abs(ll[0][1] - me[0][1]))
                else:
                    flips.append((ex[s]["key"], i, "response" if resp else "prompt", ll, me,
                                  me[0][1] - me[1][1]))
        pct = 100.0 * agree / max(1, n)
        print("%stop-1: llama.cpp (Q8_0) and the tiny engine (merged, PyTorch) agree at %d/%d positions "
              "(%.2f%%), distinct prefixes of %d sequences; %d positions unreadable through the server; largest top-1 "
              "log-probability difference where they agree %.4f nats"
              % (lab, agree, n, pct, len(seqs), skipped, worst_lp))
        print("%stop-1 on the response positions alone: %d/%d (%.2f%%); counting every repeated "
              "prefix again: %d/%d (%.2f%%)" % (lab, ragree, rn, 100.0 * ragree / max(1, rn),
                                                raw_agree, raw_n, 100.0 * raw_agree / max(1, raw_n)))
        for f in flips[:10]:
            print("%s  disagree %s pos %d (%s): llama.cpp %s, tiny %s (tiny's top-2 margin %.4f nats)"
                  % ((lab,) + f))
        if n < 0.9 * (n + skipped):
            print("%sFAIL: too many positions unreadable through llama-server" % lab)
            ok = False
        if agree < 0.99 * n:
            print("%sFAIL: top-1 agreement below 99%%" % lab)
            ok = False
    finally:
        srv.terminate()
        srv.wait()

    if a.adapter:
        seqs = [[int(x) for x in e["input_ids"]] for e in ex[:a.examples or len(ex)]]
        mine = tiny_top(a.merged, seqs)
        ref = tiny_top(a.adapter_base, seqs, a.adapter)
        tot = sum(len(s) for s in seqs)
        same = sum(x[0][0] == y[0][0] for s, t in zip(mine, ref) for x, y in zip(s, t))
        d = max(abs(x[0][1] - y[0][1]) for s, t in zip(mine, ref) for x, y in zip(s, t))
        print("%smerge: merged checkpoint vs base + adapter, top-1 agree at %d/%d positions, largest "
              "log-probability difference %.4f nats" % (lab, same, tot, d))
        if same < 0.99 * tot:
            print("%sFAIL: the merged checkpoint is not base + adapter" % lab)
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
