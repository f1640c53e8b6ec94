#!/usr/bin/python3
"""ollama_bake_figures.py: the figures of tests/bench/ollama-bake-bench.sh
for one server (OLLAMA_NUM_PARALLEL=NP), read from its working directory:

    ollama_bake_figures.py NP CASES PASSES CLK_TCK NCPU

rounds.NP     one line per side and round: "SIDE ROUND WALL0 CLIENT0
              BUSY0 SERVER0 WALL1 CLIENT1 BUSY1 SERVER1 LOADAVG" (CPU in
              ticks: the shell's waited-for children, the whole machine's
              busy time, the Ollama session's)
SIDE.NP.R.log the server's log written during that side's run ([GIN]
              lines: status, latency, method, path of every request)
curl.NP.R/    the curl side's replies and its -w time_total lines (times)
bake.NP.R.out the bake side's pipelinectl output (job.value lines)
"""
import json
import os
import re
import statistics
import sys

np_, ncases, passes, tck, ncpu = (int(x) for x in sys.argv[1:6])
nreq = ncases * passes

GIN = re.compile(r'^\[GIN\][^|]*\|\s*(\d+)\s*\|\s*(\S+)\s*\|[^|]*\|\s*(\w+)\s+"([^"]*)"')
UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def go_duration(s):
    """Go's time.Duration.String(): 1m2.5s, 147.9ms, 950.1µs, 800ns."""
    parts = re.findall(r"([0-9.]+)(ms|µs|us|ns|h|m|s)", s)
    if not parts or "".join(a + b for a, b in parts) != s:
        raise ValueError("not a Go duration: %r" % s)
    return sum(float(a) * UNIT[b] for a, b in parts)


def gin(path):
    """[(status, seconds, method, path)] of the server's log."""
    out = []
    for line in open(path, encoding="utf-8", errors="replace"):
        m = GIN.match(line)
        if m:
            out.append((int(m.group(1)), go_duration(m.group(2)), m.group(3), m.group(4)))
    return out


def values(path):
    out = {}
    for line in open(path):
        if line.startswith("job.value "):
            v = json.loads(line[len("job.value "):])
            out[v["key"]] = v["value"]
    return out


def side(which, r, row):
    f = row
    w0, c0, b0, v0, w1, c1, b1, v1 = (float(x) for x in f[2:10])
    wall = w1 - w0
    reqs = gin("%s.%d.%d.log" % (which, np_, r))
    chat = [x for x in reqs if x[3] == "/api/chat"]
    other = [x for x in reqs if x[3] != "/api/chat"]
    d = {"wall": wall, "n": len(chat), "bad": sum(x[0] != 200 for x in chat),
         "srv": sum(x[1] for x in chat), "adm": sum(x[1] for x in other), "nadm": len(other),
         "ccpu": (c1 - c0) / tck, "scpu": (v1 - v0) / tck, "load": float(f[10])}
    d["others"] = ((b1 - b0) / tck - d["ccpu"] - d["scpu"]) / wall	# cores
    d["stime"] = d["srv"] / np_	# the server's time: N requests in flight
    d["over"] = wall - d["stime"]
    d["answers"] = {}
    if which == "curl":
        dr = "curl.%d.%d" % (np_, r)
        d["client"] = sum(float(x) for x in open(dr + "/times") if x.strip())
        td = 0
        for p in range(1, passes + 1):
            for c in range(ncases):
                j = json.load(open("%s/%d-%02d.json" % (dr, p, c)))
                td += j.get("total_duration", 0) / 1e9
                d["answers"][(c, p)] = j.get("message", {}).get("content", "").encode()[:239]
        d["total_duration"] = td
    else:
        v = values("bake.%d.%d.out" % (np_, r))
        s = json.loads(v["bake.summary"]) if "bake.summary" in v else {}
        d["client"] = s.get("s_per_case", 0) * nreq
        d["errors"] = s.get("errors", -1)
        # The case values come in the case file's order, as curl's files.
        for c, k in enumerate(k for k in v if k.startswith("case/")):
            for p, x in enumerate(json.loads(v[k])["passes"], 1):
                d["answers"][(c, p)] = x.get("output", "").encode()[:239]
    return d


rows = [l.split() for l in open("rounds.%d" % np_) if l.strip()]
runs = {}
for row in rows:
    runs.setdefault(int(row[1]), {})[row[0]] = side(row[0], int(row[1]), row)


def med(xs):
    return "%.2f [%.2f, %.2f]" % (statistics.median(xs), min(xs), max(xs))


def ms(d, key):
    return 1000 * d[key] / max(d["n"], 1)


print("OLLAMA_NUM_PARALLEL=%d, concurrency %d: %d rounds, %d requests per side per round "
      "(%d cases x %d passes)" % (np_, np_, len(runs), nreq, ncases, passes))
print("  round order  | curl: wall  server  over/req  share  | bake: wall  server  over/req  share  "
      "admin  | bake-curl /req  share | others' load (cores) | loadavg")
ex_ms, ex_share = [], []
for r in sorted(runs):
    c, b = runs[r]["curl"], runs[r]["bake"]
    st = (c["stime"] + b["stime"]) / 2
    ex_ms.append(1000 * (b["over"] - c["over"]) / nreq)
    ex_share.append(100 * (b["over"] - c["over"]) / st)
    print("  %2d %-9s | %6.3f s %6.3f s %6.2f ms %5.2f%% | %6.3f s %6.3f s %6.2f ms %5.2f%% %4.1f ms "
          "| %+6.2f ms %+5.2f%% | %.2f / %.2f | %.2f" % (
              r, "curl,bake" if r % 2 else "bake,curl",
              c["wall"], c["stime"], ms(c, "over"), 100 * c["over"] / c["stime"],
              b["wall"], b["stime"], ms(b, "over"), 100 * b["over"] / b["stime"], 1000 * b["adm"],
              ex_ms[-1], ex_share[-1], c["others"], b["others"], (c["load"] + b["load"]) / 2))
for which in ("curl", "bake"):
    ds = [runs[r][which] for r in sorted(runs)]
    print("  %s: wall %s s; server time %s s (%.1f ms/request); overhead %s ms/request, "
          "%s%% of the server time" % (
              which, med([d["wall"] for d in ds]), med([d["stime"] for d in ds]),
              1000 * statistics.median(d["srv"] for d in ds) / nreq,
              med([ms(d, "over") for d in ds]), med([100 * d["over"] / d["stime"] for d in ds])))
    if np_ == 1:
        print("    in the request (the client's own timing - the server's): %s ms/request; "
              "outside the requests (process start, set-up, storing): %s ms/request" % (
                  med([1000 * (d["client"] - d["srv"]) / d["n"] for d in ds]),
                  med([1000 * (d["wall"] - d["client"]) / d["n"] for d in ds])))
    print("    client CPU %s ms/request; server CPU %s ms/request; %s other requests "
          "(%s ms of server time)" % (
              med([1000 * d["ccpu"] / nreq for d in ds]), med([1000 * d["scpu"] / nreq for d in ds]),
              med([d["nadm"] for d in ds]), med([1000 * d["adm"] for d in ds])))
    if which == "curl":
        print("    the server's log against total_duration of the replies: %s ms/request more "
              "(request parsing before the handler's clock starts)" % (
                  med([1000 * (d["srv"] - d["total_duration"]) / d["n"] for d in ds])))
bad = sum(d["bad"] for r in runs for d in runs[r].values())
short = sum(d["n"] != nreq for r in runs for d in runs[r].values())
errs = sum(runs[r]["bake"]["errors"] for r in runs)
ref = runs[min(runs)]["curl"]["answers"]
same = sum(a == ref.get(k) for r in runs for d in runs[r].values() for k, a in d["answers"].items())
total = sum(len(d["answers"]) for r in runs for d in runs[r].values())
print("  workload: %d of %d answers identical to round 1's curl answers (temperature 0, seed "
      "3407); %d non-200 answers, %d side-runs short of %d requests, %d bake errors" % (
          same, total, bad, short, nreq, errs))
print("  => bake's overhead beyond the curl loop: %s ms/request, %s%% of the server time "
      "(target < 2%%: %s at concurrency %d)" % (
          med(ex_ms), med(ex_share), "met" if statistics.median(ex_share) < 2 else "NOT met", np_))
