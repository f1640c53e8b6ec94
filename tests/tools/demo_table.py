#!/usr/bin/python3
"""demo_table.py: the real router's versions side by side, for `make demo`
(tests/tools/demo.sh).

    demo_table.py CASES.jsonl V0.values.json V1.values.json ...

Each VALUES file is `pipelinectl --json values RUN` of one version; its bake
job's bake.summary holds one result row per case (the rows the gate and
`pipelinectl report` read: flags, passes run, pass mask, errors, seconds,
capability).  Prints, one column per version:
  - the fair slice of all of them: the cases every version held out
    (neither corpus holds them), each version's accuracy on it, and
    McNemar's exact p of each version against the one before it there
    (a case counts as passed when it passed in every pass, as the gate
    counts it);
  - that slice by the case file's groups (the id's middle word, as
    gen_router.py names them: para, new, ctx, refuse, negation, clarify,
    quote, counter);
  - the cases some version was trained on (t1-*, t2-*), and overall.
Standard library only.
"""
import json
import math
import sys


def summary(path):
    """The bake job's bake.summary of one `values --json` dump."""
    with open(path) as f:
        d = json.load(f)
    items = d.get("values", d) if isinstance(d, dict) else d
    for v in items:
        if v.get("job") == "bake" and v.get("key") == "bake.summary":
            val = v["value"]
            return json.loads(val) if isinstance(val, str) else val
    sys.exit("demo_table.py: %s: no bake.summary of a job called bake" % path)


def rows(s):
    """{case id: (held_out, passed in every pass, passed passes / runs)}."""
    out = {}
    for cid, r in s["rows"].items():
        flags, runs, mask = int(r[0]), int(r[1]), int(r[2])
        if not flags & 8 or runs == 0:
            continue
        passed = bin(mask & ((1 << runs) - 1)).count("1")
        out[cid] = (bool(flags & 2), passed == runs, passed / runs)
    return out


def mcnemar(b, c):
    """Two-sided exact McNemar p (binomial at one half on b + c)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    p = 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, p)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: demo_table.py CASES.jsonl VALUES.json...")
    cases = {}
    with open(sys.argv[1]) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                c = json.loads(line)
                cases[c["id"]] = c
    sums = [summary(p) for p in sys.argv[2:]]
    names = [s.get("model", "?") for s in sums]
    rs = [rows(s) for s in sums]
    fair = sorted(i for i in cases if all(i in r and r[i][0] for r in rs))
    trained = sorted(i for i in cases if all(i in r for r in rs) and i not in fair)

    def line(label, ids):
        cells = []
        for r in rs:
            if not ids:
                cells.append("-")
                continue
            cells.append("%6.1f%% (%d/%d)" % (100 * sum(r[i][2] for i in ids) / len(ids),
                                            sum(r[i][1] for i in ids), len(ids)))
        print("%-28s" % label + "".join(" %18s" % c for c in cells))

    print("%-28s" % "" + "".join(" %18s" % n[:18] for n in names))
    line("fair slice of all (%d)" % len(fair), fair)
    mc = ["-"]
    for k in range(1, len(rs)):
        b = sum(1 for i in fair if rs[k][i][1] and not rs[k - 1][i][1])
        c = sum(1 for i in fair if rs[k - 1][i][1] and not rs[k][i][1])
        mc.append("p %.3g (%d:%d)" % (mcnemar(b, c), b, c))
    print("%-28s" % "  McNemar vs the one before" + "".join(" %18s" % m for m in mc))
    groups = []
    for i in fair:
        g = i.split("-")[1] if i.count("-") >= 2 else "other"
        if g not in groups:
            groups.append(g)
    for g in groups:
        line("  %s" % g, [i for i in fair if i.split("-")[1] == g])
    line("trained by some (%d)" % len(trained), trained)
    line("overall (%d)" % len(fair + trained), fair + trained)


if __name__ == "__main__":
    main()
