#!/usr/bin/python3
"""prefix_adapters.py: two adapters trained from the same start, the plain
loop's and the shared-prefix loop's, compared tensor by tensor against the
size of the training's updates.

    prefix_adapters.py CONFIG.json PLAIN_ADAPTER SHARED_ADAPTER --bound X
                       [--median-bound Y]

CONFIG.json is the train job's (train.config.json): the hf engine built from
it gives the adapter's starting values (the seeded LoRA initialization).
For each tensor: d = max |shared - plain|, u = the median over its elements
of |plain - start| (the typical update of the run).  Prints d / u per
tensor (the five largest) and the largest; exits 1 when one is above X,
or when a tensor's median |shared - plain| over u is above Y (default
1e-4: the typical element differs at float level; the largest can differ
more, where Adam's normalized update of an element whose gradient is near
its float noise changes by up to one step's learning rate).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "jobs")))

import numpy as np  # noqa: E402
import pljob  # noqa: E402
from engines import hf  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("plain")
    ap.add_argument("shared")
    ap.add_argument("--bound", type=float, required=True)
    ap.add_argument("--median-bound", type=float, default=1e-4)
    a = ap.parse_args()
    with open(a.config) as f:
        cfg = pljob.Config(json.load(f), a.config)
    pljob.seed_everything(cfg.int("seed", 3407))
    eng = hf.HfEngine(cfg, pljob.Events("/dev/null"))
    eng.load()
    start = eng.adapter_tensors()
    _, p = pljob.read_adapter_dir(a.plain)
    _, s = pljob.read_adapter_dir(a.shared)
    if set(p) != set(s):
        print("the adapters hold different tensors")
        return 1
    rows = []
    for k in sorted(p):
        pk = np.asarray(p[k], dtype=np.float64)
        sk = np.asarray(s[k], dtype=np.float64)
        st = np.asarray(start[k], dtype=np.float64).reshape(pk.shape)
        u = float(np.median(np.abs(pk - st)))
        d = float(np.max(np.abs(sk - pk)))
        med = float(np.median(np.abs(sk - pk))) / max(u, 1e-30)
        rows.append((d / max(u, 1e-30), d, u, k, med))
    rows.sort(reverse=True)
    for r, d, u, k, _ in rows[:5]:
        print("%s: max |shared - plain| %.3g, median update %.3g, ratio %.3g" % (k, d, u, r))
    worst = rows[0][0]
    mworst = max(r[4] for r in rows)
    print("largest max|difference| / median update over %d tensors: %.3g (bound %g); largest median|difference| "
          "/ median update %.3g (bound %g)" % (len(rows), worst, a.bound, mworst, a.median_bound))
    return 1 if worst > a.bound or mworst > a.median_bound else 0


if __name__ == "__main__":
    sys.exit(main())
