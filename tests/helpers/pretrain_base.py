#!/usr/bin/python3
"""pretrain_base.py: give the random fixture base some knowledge of the
router's prompts, in place, the way a real base knows its language.

    pretrain_base.py BASE_DIR DATA_DIR [--steps N] [--lr LR]

The random base of tests/fixtures/gen_gemma3.py (0.02 initialisation,
tied embeddings) puts every logit within about +-1.3 of the others, and
LoRA on the projections cannot move the embeddings: trained on the tiny
corpus its loss stalled near ln(vocab) - 2.5 and not one answer came out
whole.  Its prompt predictions are near-ties too, and near-ties are where
Q8_0's rounding (of the weights, and of the activations in llama.cpp's
q8_0 dot products) flips the top-1 token: check_export.py measures that
agreement over every position.  A real base is neither, so this one is
taught the prompts: language-model training of every weight of the text
model on the rendered prompts (system and user turns, never an answer)
of DATA_DIR's corpus-v2.jsonl and cases.jsonl, rendered by
jobs/tokenize_corpus.py with the base's chat template.  The answers stay for
LoRA to teach; held-out cases stay held out (their answers are never
seen).  Seeded and single-threaded: the same bytes on every run on one
machine.  The weights are written back as BF16 (round to nearest even)
over the same tensors, in place.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOBS = os.path.join(TOP, "jobs")
sys.path.append(JOBS)
sys.path.append(os.path.join(JOBS, "engines"))
import pljob  # noqa: E402
import tiny  # noqa: E402


def prompts(data, tmp, base):
    system = open(os.path.join(data, "system.txt")).read().replace("{{channel}}", "default")
    users = []
    for line in open(os.path.join(data, "corpus-v2.jsonl")):
        users.append(json.loads(line)["messages"][1]["content"])
    for line in open(os.path.join(data, "cases.jsonl")):
        if line.strip() and not line.startswith("#"):
            users.append(json.loads(line)["user"])
    corpus = os.path.join(tmp, "prompts.jsonl")
    with open(corpus, "w") as f:
        for i, u in enumerate(users):
            # the answer is a placeholder: only the prompt tokens are used
            f.write(json.dumps({"key": "p-%03d" % i, "messages": [
                {"role": "system", "content": system}, {"role": "user", "content": u},
                {"role": "assistant", "content": "-"}]}) + "\n")
    cfg = os.path.join(tmp, "tok.json")
    with open(cfg, "w") as f:
        json.dump({"base": base, "corpus": corpus, "output_dir": tmp, "num_ctx": 1024,
                   "max_seq_length": 512}, f)
    ev = os.path.join(tmp, "tok.ev")
    p = subprocess.run([sys.executable, os.path.join(JOBS, "tokenize_corpus.py"), "--config", cfg, "--events", ev],
                       capture_output=True, text=True)
    if p.returncode:
        sys.exit("tokenize_corpus.py failed: %s %s" % (p.stderr[-2000:], open(ev).read()[-2000:]))
    return [[int(x) for x in e["input_ids"][:e["prompt_len"]]]
            for e in pljob.load_tokens(os.path.join(tmp, "tokens.npz"))]


def to_bf16_bytes(t):
    """float32 tensor -> BF16 bytes, round to nearest even (NaN-free input)."""
    u = t.detach().contiguous().numpy().astype(np.float32).view(np.uint32)
    r = ((u >> 16) & 1) + 0x7FFF
    return ((u + r) >> 16).astype(np.uint16).tobytes()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("data")
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--lr", type=float, default=0.003)
    a = ap.parse_args()
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        seqs = prompts(a.data, tmp, a.base)
    model, c, prefix = tiny.load_model(a.base)
    params = []
    for p in model.parameters():
        p.requires_grad_(True)
        params.append(p)
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0)
    rng = np.random.default_rng(1234)
    first = last = None
    for step in range(a.steps):
        ids = torch.tensor([seqs[int(rng.integers(len(seqs)))]], dtype=torch.int64)
        logits = model(ids)
        loss = F.cross_entropy(logits[0, :-1].float(), ids[0, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = float(loss) if first is None else first
        last = float(loss)
    print("pretrain_base: %d steps on %d prompts, loss %.3f -> %.3f" % (a.steps, len(seqs), first, last))
    # Write every text tensor back over its own bytes (same dtype, shape, offsets).
    named = {n.replace(".base.weight", ".weight"): p for n, p in model.named_parameters() if ".lora_" not in n}
    path = os.path.join(a.base, "model.safetensors")
    hdr, _, data_at = pljob.read_safetensors_header(path)
    with open(path, "r+b") as f:
        done = 0
        for name, meta in hdr.items():
            if not name.startswith(prefix):
                continue
            p = named.get(name[len(prefix):])
            if p is None:
                continue
            if meta["dtype"] != "BF16" or list(meta["shape"]) != list(p.shape):
                sys.exit("%s: %s is %s %s" % (path, name, meta["dtype"], meta["shape"]))
            b = to_bf16_bytes(p)
            a0, a1 = meta["data_offsets"]
            assert len(b) == a1 - a0
            f.seek(data_at + a0)
            f.write(b)
            done += 1
        f.flush()
        os.fsync(f.fileno())
    if done != len(named):
        sys.exit("%s: wrote %d of %d text tensors" % (path, done, len(named)))


if __name__ == "__main__":
    main()
