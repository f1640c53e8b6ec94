#!/usr/bin/env python3
"""scrape.py URL INTERVAL OUT: GET URL every INTERVAL seconds until SIGTERM,
then write one latency (seconds) per line to OUT. A failed GET is a line
"error". The bearer token is $PL_TOKEN. For tests/bench/metrics-bench.sh."""
import os, signal, sys, time, urllib.request

url, interval, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
lat, stop = [], False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
nxt = time.monotonic()
while not stop:
    t0 = time.monotonic()
    try:
        req = urllib.request.Request(url, headers={"Authorization": "Bearer " + os.environ["PL_TOKEN"]})
        with urllib.request.urlopen(req, timeout=5) as r:
            r.read()
        lat.append("%.6f" % (time.monotonic() - t0))
    except Exception:
        lat.append("error")
    nxt += interval
    time.sleep(max(0.0, nxt - time.monotonic()))
with open(out, "w") as f:
    f.write("\n".join(lat) + "\n")
