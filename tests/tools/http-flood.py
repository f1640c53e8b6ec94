#!/usr/bin/python3
"""http-flood.py: hold a pipelined HTTP listener under the load of
tests/integration/http/bounds.sh, on loopback, for a fixed time, and
say how it went (one JSON line).

    http-flood.py HOST PORT TOKEN SECONDS SLOW STREAMS

SLOW clients send a request header one line every 2 s and never finish
it (each reconnects when dropped); STREAMS clients open the status page's
event stream and never read it; meanwhile /metrics is scraped every
0.5 s, as Prometheus would, with the bearer token and a 5 s timeout.
Every loop ends at the deadline: nothing outlives the run.
"""
import json, selectors, socket, sys, threading, time, urllib.request

host, port, token, secs, nslow, nstreams = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
    float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
end = time.time() + secs
scrapes = []  # (status, seconds)


def scraper():
    while time.time() < end:
        t0 = time.time()
        req = urllib.request.Request("http://%s:%d/metrics" % (host, port),
                                     headers={"Authorization": "Bearer " + token})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                r.read()
                scrapes.append((r.status, time.time() - t0))
        except urllib.error.HTTPError as e:
            scrapes.append((e.code, time.time() - t0))
        except Exception as e:
            scrapes.append((str(e), time.time() - t0))
        time.sleep(max(0, 0.5 - (time.time() - t0)))


def connect():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect((host, port))
    except BlockingIOError:
        pass
    return s


stats = {"slow_connects": 0, "slow_dropped": 0, "streams_open": 0, "streams_503": 0,
         "streams_200": 0, "connect_errors": 0}
# The event streams: the request sent whole, then never read (but the
# status line, peeked once, to count 200s and 503s).
streams = []
for i in range(nstreams):
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(("GET /api/events HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n"
               "Accept: text/event-stream\r\n\r\n" % (host, port, token)).encode())
    streams.append(s)
    stats["streams_open"] += 1
time.sleep(1)
retry_after = None
for s in streams:
    try:
        s.settimeout(2)
        head = s.recv(512, socket.MSG_PEEK).decode(errors="replace")
    except OSError:
        head = ""
    if " 503 " in head.split("\r\n")[0]:
        stats["streams_503"] += 1
        for l in head.split("\r\n"):
            if l.lower().startswith("retry-after:"):
                retry_after = l.split(":", 1)[1].strip()
    elif " 200 " in head.split("\r\n")[0]:
        stats["streams_200"] += 1

th = threading.Thread(target=scraper)
th.start()
sel = selectors.DefaultSelector()
slow = {}  # socket -> [next send time, lines sent]


def new_slow():
    try:
        s = connect()
    except OSError:
        stats["connect_errors"] += 1
        return
    stats["slow_connects"] += 1
    slow[s] = [time.time(), 0]
    sel.register(s, selectors.EVENT_READ)


for i in range(nslow):
    new_slow()
while time.time() < end:
    now = time.time()
    for s, st in list(slow.items()):
        if st[0] > now:
            continue
        line = "GET /metrics HTTP/1.1\r\n" if st[1] == 0 else "X-Slow-%d: y\r\n" % st[1]
        try:
            s.send(line.encode())
            st[1] += 1
            st[0] = now + 2
        except BlockingIOError:
            st[0] = now + 0.2
        except OSError:
            stats["slow_dropped"] += 1
            sel.unregister(s)
            s.close()
            del slow[s]
            new_slow()
    for key, _ in sel.select(timeout=0.2):
        s = key.fileobj
        try:
            b = s.recv(4096)
        except BlockingIOError:
            continue
        except OSError:
            b = b""
        if not b:  # closed by the server: dropped
            stats["slow_dropped"] += 1
            sel.unregister(s)
            s.close()
            del slow[s]
            new_slow()
th.join()
for s in list(slow) + streams:
    s.close()
ok = [t for c, t in scrapes if c == 200]
stats.update({"scrapes": len(scrapes), "scrapes_ok": len(ok),
              "scrape_failures": [c for c, t in scrapes if c != 200][:5],
              "scrape_max_s": round(max(ok), 3) if ok else None,
              "retry_after": retry_after})
print(json.dumps(stats))
