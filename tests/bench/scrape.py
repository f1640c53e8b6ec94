#!/usr/bin/env python3
"""scrape.py URL INTERVAL OUT: GET URL every INTERVAL seconds until SIGTERM,
then write one latency (seconds) per line to OUT. A failed GET is a line
"error". For tests/bench/metrics-bench.sh."""
import signal, sys, time, urllib.request

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
        with urllib.request.urlopen(url, timeout=5) as r:
            r.read()
        lat.append("%.6f" % (time.monotonic() - t0))
    except Exception:
        lat.append("error")
    nxt += interval
    time.sleep(max(0.0, nxt - time.monotonic()))
with open(out, "w") as f:
    f.write("\n".join(lat) + "\n")
