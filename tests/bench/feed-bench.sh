#!/bin/bash
# feed-bench.sh: status feed delivery latency. 50 watchers follow a run
# whose job publishes 10,000 progress events, each stamped with its write
# time; every watcher records the delay from the job's write to its own
# read. Prints p50 and p99 over all deliveries.
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
W=${W:-50}; E=${E:-10000}
export TEST_TMP=$(mktemp -d /tmp/feedbench.XXXXXX)
. "$TOP/tests/lib.sh"
pl_conf "log_level = warn"
pl_start
cat > "$TEST_TMP/emit.py" <<PY
import os, time
f = open(os.environ["PL_EVENTS"], "a", buffering=1)
for i in range(1, $E + 1):
    f.write('{"type":"log","i":%d,"t":%.6f}\n' % (i, time.time()))
    if i % 100 == 0:
        time.sleep(0.01)
PY
cat > "$TEST_TMP/feed.ini" <<INI
[run]
name = feed
[start]
stage = exec
command = while [ ! -e $TEST_TMP/ready ]; do sleep 0.05; done
[emit]
stage = exec
after = start
command = python3 $TEST_TMP/emit.py
INI
pctl submit "$TEST_TMP/feed.ini" >/dev/null
python3 - "$TEST_TMP/run/feed.sock" "$W" "$E" "$TEST_TMP/ready" <<'PY'
# One process per watcher (no GIL between them); each parses only the
# job's timestamp out of its lines.
import multiprocessing as mp, re, socket, sys, time
path, W, E = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
TS = re.compile(rb'"type":"job.log".*?"t":([0-9.]+)')
def watch_sock(s):
    buf = b""; mine = []
    while len(mine) < E:
        d = s.recv(1 << 16)
        if not d: break
        now = time.time(); buf += d
        *lines, buf = buf.split(b"\n")
        for l in lines:
            m = TS.search(l)
            if m: mine.append(now - float(m.group(1)))
    return mine
def worker(i, barrier, out):
    s = socket.socket(socket.AF_UNIX); s.connect(path)
    s.sendall(b'{"verb":"watch","version":1,"run":"feed","since":0}\n')
    barrier.wait()
    out.put(watch_sock(s))
barrier = mp.Barrier(W + 1)
out = mp.Queue()
procs = [mp.Process(target=worker, args=(i, barrier, out)) for i in range(W)]
[p.start() for p in procs]
barrier.wait()
open(sys.argv[4], "w").close()     # every watcher is connected: emit
lat = sorted(x for _ in range(W) for x in out.get())
[p.join() for p in procs]
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
print("feed: %d watchers x %d events = %d deliveries; latency p50 %.1f ms, p99 %.1f ms, max %.1f ms"
      % (W, E, len(lat), q(0.5), q(0.99), lat[-1] * 1000))
PY
pl_stop
rm -rf "$TEST_TMP"
