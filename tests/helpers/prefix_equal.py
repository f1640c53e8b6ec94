#!/usr/bin/python3
"""prefix_equal.py: one optimizer step's forward and backward with shared
prefixes (jobs/engines/prefix.py) against the plain loop, on the hf engine
(transformers' Gemma 3, PEFT LoRA, the CPU), the same examples both ways.

    prefix_equal.py TOKENS.npz CONFIG.json [KEY=VALUE ...]

CONFIG.json holds the hf engine's keys (base, device = cpu, ...); KEY=VALUE
pairs override them.  The step is the first of train.py's data order with
gradient_accumulation_steps examples, and LoRA's B starts at seeded
nonzero values (--init-b) so that A's gradients are not all zero.  Prints one line per example (its
loss both ways), the largest relative loss difference, and per LoRA tensor
the largest |gradient difference| over the largest |gradient|; exits 1 when
a loss differs by more than --loss-tol (relative) or a gradient by more
than --grad-tol (relative to its tensor's largest), and also when the
shared run did not share (no group in the step).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "..", "..", "jobs")
sys.path.insert(0, os.path.abspath(JOBS))

import pljob  # noqa: E402
import train  # noqa: E402
from engines import hf, prefix  # noqa: E402


INIT_B = 0.0


def run(cfgd, examples, idx, mode):
    cfg = pljob.Config(dict(cfgd, shared_prefix=mode))
    pljob.seed_everything(cfg.int("seed", 3407))
    eng = hf.HfEngine(cfg, pljob.Events("/dev/null"))
    eng.load()
    if INIT_B:
        # LoRA's B starts at zero, where A's gradient is zero too: nonzero
        # B (seeded, the same both ways) makes every gradient count.
        import torch
        gen = torch.Generator().manual_seed(99)
        with torch.no_grad():
            for n, p in sorted(eng.model.named_parameters()):
                if "lora_B" in n:
                    p.copy_((torch.randn(p.shape, generator=gen) * INIT_B).to(p.dtype))
    on, why = eng.shared_setup(examples)
    exs = [examples[i] for i in idx]
    with eng.train_context():
        got = eng.accumulate(exs, len(exs))
        if got is None:
            got = []
            for ex in exs:
                loss = eng.loss(ex)
                eng.backward(loss / len(exs))
                got.append(float(loss.detach()))
    grads = {n: p.grad.detach().float().clone() for n, p in eng.model.named_parameters()
             if p.requires_grad and p.grad is not None}
    return on, why, got, grads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tokens")
    ap.add_argument("config")
    ap.add_argument("kv", nargs="*")
    ap.add_argument("--loss-tol", type=float, default=1e-5)
    ap.add_argument("--grad-tol", type=float, default=1e-4)
    ap.add_argument("--step", type=int, default=1)
    ap.add_argument("--need-padding", action="store_true",
                    help="fail unless a shared group's suffixes differ in length")
    ap.add_argument("--init-b", type=float, default=0.05,
                    help="LoRA B's starting values' standard deviation (0: PEFT's zeros)")
    a = ap.parse_args()
    global INIT_B
    INIT_B = a.init_b
    with open(a.config) as f:
        cfgd = json.load(f)
    for kv in a.kv:
        k, v = kv.split("=", 1)
        cfgd[k] = v
    examples = pljob.load_tokens(a.tokens)
    cfg = pljob.Config(cfgd)
    accum = cfg.int("gradient_accumulation_steps", 8)
    plan = train.Plan(len(examples), accum, 1, 0, cfg.int("seed", 3407))
    _, idx = plan.batch(a.step)
    shared, _ = prefix.plan_step([examples[i] for i in idx])
    lens = [sorted(len(x["input_ids"]) - P for x in m) for P, m in shared]
    print("step %d: %d examples, shared groups %s, suffix lengths %s"
          % (a.step, len(idx), [(P, len(m)) for P, m in shared], lens))
    if a.need_padding and not any(len(set(x)) > 1 for x in lens):
        # A batch of equal suffixes would leave the left padding untested.
        print("no group's suffixes differ in length: the padding is not exercised")
        return 1
    on0, _, l0, g0 = run(cfgd, examples, idx, "no")
    on1, why, l1, g1 = run(cfgd, examples, idx, "yes")
    print("shared prefix: %s (%s)" % (on1, why))
    bad = 0
    worst = 0.0
    for i, x, y in zip(idx, l0, l1):
        r = abs(x - y) / max(abs(x), 1e-12)
        worst = max(worst, r)
        print("example %s: plain %.9g shared %.9g rel %.3g" % (examples[i]["key"], x, y, r))
    print("largest relative loss difference %.3g (tolerance %g)" % (worst, a.loss_tol))
    if worst > a.loss_tol:
        bad = 1
    gworst = 0.0
    if set(g0) != set(g1):
        print("the parameters with gradients differ: %s" % sorted(set(g0) ^ set(g1))[:4])
        bad = 1
    nworst = 0.0
    for n in sorted(set(g0) & set(g1)):
        d = float((g0[n] - g1[n]).abs().max()) / max(float(g0[n].abs().max()), 1e-30)
        gworst = max(gworst, d)
        nworst = max(nworst, float((g0[n] - g1[n]).norm()) / max(float(g0[n].norm()), 1e-30))
    print("largest gradient difference over its tensor's largest gradient %.3g over %d tensors (tolerance %g); "
          "largest |difference| / |gradient| (norms) %.3g" % (gworst, len(g0), a.grad_tol, nworst))
    if gworst > a.grad_tol:
        bad = 1
    if not on1 or not shared or on0:
        print("the shared run did not share a prefix")
        bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main())
