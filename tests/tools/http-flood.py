#!/usr/bin/python3
"""http-flood.py: hold a pipelined HTTP listener under load, on loopback,
for a fixed time, while /metrics is scraped every 0.5 s as Prometheus
would (the bearer token, a 5 s timeout), and say how it went (one JSON
line).

    http-flood.py HOST PORT TOKEN SECONDS SLOW STREAMS
    http-flood.py --readers HOST PORT TOKEN SECONDS N PATH SESSION

The first (tests/integration/http/bounds.sh): SLOW clients send a request
header one line every 2 s and never finish it (each reconnects when
dropped); STREAMS clients open the status page's event stream and never
read it.

The second (tests/integration/http/slow-readers.sh): N clients ask for
PATH with the session cookie SESSION and a 4 KiB receive buffer, and never
read the reply; it says what each was answered (the status line, peeked)
and how long after they were opened the daemon dropped the ones it
served (its ends of them leave ESTABLISHED, as ss(8) shows them: a FIN
behind unsent data never reaches a client that does not read).

Every loop ends at the deadline: nothing outlives the run.
"""
import json, selectors, socket, subprocess, sys, threading, time, urllib.request

readers = sys.argv[1] == "--readers"
if readers:
    del sys.argv[1]
host, port, token, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
scrapes = []  # (status, seconds)


def scraper(end):
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


def scrape_stats():
    good = [t for c, t in scrapes if c == 200]
    return {"scrapes": len(scrapes), "scrapes_ok": len(good),
            "scrape_failures": [c for c, t in scrapes if c != 200][:5],
            "scrape_max_s": round(max(good), 3) if good else None}


def flood_readers(n, path, session):
    socks = []
    t_open = time.time()
    for i in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((host, port))
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nCookie: pl_session=%s\r\n\r\n"
                   % (path, host, port, session)).encode())
        socks.append(s)
    end = t_open + secs
    th = threading.Thread(target=scraper, args=(end,))
    th.start()
    time.sleep(1)
    status, closed = {}, {}
    for s in socks:
        try:
            s.settimeout(5)
            head = s.recv(1024, socket.MSG_PEEK).decode(errors="replace")
            status[s] = head.split(" ")[1] if head.startswith("HTTP/1.1 ") else "?"
            if status[s] == "429" and "\r\nRetry-After: " not in head:
                status[s] = "429 without Retry-After"
        except OSError as e:
            status[s] = "no answer (%s)" % e
    mine = {s.getsockname()[1]: s for s in socks}
    while time.time() < end:
        out = subprocess.run(["ss", "-Htn", "state", "established", "( sport = :%d )" % port],
                             capture_output=True, text=True).stdout
        up = {int(l.split()[-1].rsplit(":", 1)[1]) for l in out.splitlines()}
        for cport in mine:
            if cport not in up and cport not in closed:
                closed[cport] = time.time() - t_open
        time.sleep(0.2)
    th.join()
    served = [p for p, s in mine.items() if status[s] == "200"]
    stats = {"statuses": sorted(set(status.values())), "served": len(served),
             "refused": sum(1 for s in socks if status[s] == "429"),
             "served_open_at_end": sum(1 for p in served if p not in closed),
             "served_dropped_after_s": round(max([closed.get(p, 99) for p in served] or [0]), 1)}
    for s in socks:
        s.close()
    stats.update(scrape_stats())
    print(json.dumps(stats))


if readers:
    flood_readers(int(sys.argv[5]), sys.argv[6], sys.argv[7])
    sys.exit(0)
nslow, nstreams = int(sys.argv[5]), int(sys.argv[6])
end = time.time() + secs


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

th = threading.Thread(target=scraper, args=(end,))
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
stats.update(scrape_stats())
stats["retry_after"] = retry_after
print(json.dumps(stats))
