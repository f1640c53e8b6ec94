#!/bin/bash
# Abuse of the sockets: an oversized line, invalid JSON, an unknown verb,
# no hello, a wrong protocol version, 200 concurrent connections, and a
# watcher that stops reading while 20,000 events are published. The daemon
# answers each with an error (or drops the watcher) and keeps serving.
. "$(dirname "$0")/../../lib.sh"
pl_conf "feed_queue_max = 65536"
pl_start
python3 - "$TEST_TMP/run/control.sock" "$TEST_TMP/run/feed.sock" <<'PY' || fail "abuse checks"
import json, socket, sys, time
ctl, feed = sys.argv[1], sys.argv[2]

def conn(path=ctl):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(20)
    return s

def lines(s):
    buf = b""
    while True:
        d = s.recv(65536)
        if not d:
            if buf:
                yield buf
            return
        buf += d
        while b"\n" in buf:
            l, buf = buf.split(b"\n", 1)
            yield l

def req(s, obj_or_bytes):
    s.sendall(obj_or_bytes if isinstance(obj_or_bytes, bytes) else (json.dumps(obj_or_bytes) + "\n").encode())
    return json.loads(next(lines(s)))

def hello(s):
    r = req(s, {"verb": "hello", "version": 1})
    assert r["status"] == "ok", r

# no hello first
s = conn(); r = req(s, {"verb": "list"}); assert r["code"] == "EPROTO", r; s.close()
# wrong version: error, then closed
s = conn(); r = req(s, {"verb": "hello", "version": 99}); assert r["code"] == "EVERSION" and "99" in r["error"], r
assert s.recv(10) == b""; s.close()
# invalid JSON and an unknown verb: errors, connection still usable
s = conn(); hello(s)
r = req(s, b"{not json\n"); assert r["code"] == "EPROTO", r
r = req(s, b"[1,2,3]\n"); assert r["code"] == "EPROTO", r
r = req(s, {"verb": "frobnicate"}); assert r["code"] == "EVERB", r
r = req(s, {"verb": "status"}); assert r["status"] == "ok", r
r = req(s, {"verb": "submit", "path": 3}); assert r["code"] == "EINVAL", r
# Wrong-typed fields are errors, not absent fields that widen the request:
# a retry of job 7 is not a retry of the whole run, a status of run 5 is
# not the list of every run.
r = req(s, {"verb": "retry", "run": "r", "job": 7}); assert r["code"] == "EINVAL" and '"job"' in r["error"], r
r = req(s, {"verb": "status", "run": 5}); assert r["code"] == "EINVAL" and '"run"' in r["error"], r
r = req(s, {"verb": "logs", "run": "r", "job": "j", "offset": "9"}); assert r["code"] == "EINVAL", r
# Invalid UTF-8 is never echoed raw: every reply is valid (strict) JSON.
for bad in (b'{"verb":"\xff\xfe"}\n', b'{"verb":"status","run":"\xc0\xafx"}\n',
            b'{"verb":"check","path":"\xed\xa0\x80.ini","text":"[a\xff]\\nstage = exec\\n"}\n'):
    s.sendall(bad)
    l = next(lines(s))
    r = json.loads(l.decode("utf-8"))
    assert r["status"] == "error", r
r = req(s, {"verb": "ping"}); assert r["status"] == "ok", r
s.close()
# an oversized line: an error, then the connection is closed
s = conn(); hello(s)
chunk = b"x" * (1 << 20)
try:
    for _ in range(5):
        s.sendall(chunk)
    s.sendall(b"\n")
except (BrokenPipeError, ConnectionResetError):
    pass
got = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
except ConnectionResetError:
    pass
assert b"ETOOLONG" in got, got[:200]
s.close()
# 200 concurrent connections, all answered
socks = [conn() for _ in range(200)]
for s in socks:
    s.sendall(b'{"verb":"hello","version":1}\n{"verb":"ping"}\n')
for s in socks:
    it = lines(s)
    a, b = json.loads(next(it)), json.loads(next(it))
    assert a["status"] == "ok" and b["status"] == "ok", (a, b)
    s.close()
# the feed: a bad request, an unknown run
f = conn(feed); f.sendall(b'{"verb":"nope"}\n'); r = json.loads(next(lines(f))); assert r["code"] == "EPROTO", r; f.close()
f = conn(feed); f.sendall(b'{"verb":"watch","version":1,"run":"nosuch"}\n'); r = json.loads(next(lines(f))); assert r["code"] == "ENOENT", r; f.close()
f = conn(feed); f.sendall(b'{"verb":"watch","version":1,"run":5}\n'); r = json.loads(next(lines(f))); assert r["code"] == "EINVAL", r; f.close()
print("# control abuse ok")
PY
# A watcher that never reads, while a job publishes 20,000 events; a
# normal watcher of the same run still gets every one.
cat > "$TEST_TMP/flood.ini" <<INI
[flood]
stage = exec
command = python3 -c 'import os; f=open(os.environ["PL_EVENTS"],"a"); [f.write("{\"type\":\"progress\",\"step\":%d,\"total\":20000,\"pad\":\"%s\"}\n" % (i, "p"*100)) for i in range(1,20001)]'
INI
# The stuck watcher reads again once the run is over: what it gets ends
# with the feed.dropped notice, after whole lines.  It says when its
# watch is sent (stuck.ready): on a loaded machine Python may take
# longer to start than the flood takes to end.
python3 - "$TEST_TMP/run/feed.sock" "$TEST_TMP/flood.done" "$TEST_TMP/stuck.ready" > "$TEST_TMP/stuck.out" 2>&1 <<'PY' &
import json, os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(sys.argv[1])
s.sendall(b'{"verb":"watch","version":1,"since":0}\n')
open(sys.argv[3], "w").close()
for _ in range(250):   # does not read until the run is over
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.1)
s.settimeout(10)
got = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    got += d
lines = got.split(b"\n")
assert lines[-1] == b"", "the feed ended inside a line: %r" % lines[-1][-80:]
evs = [json.loads(l) for l in lines[:-1]]
last = evs[-1]
assert last.get("type") == "feed.dropped", "the last line is not feed.dropped: %r" % last
assert last["resume_since"] == evs[-2]["id"], (last, evs[-2])
print("dropped after %d events, resume_since %d" % (len(evs) - 1, last["resume_since"]))
PY
stuck=$!
for _ in $(seq 1 300); do [ -e "$TEST_TMP/stuck.ready" ] && break; sleep 0.1; done
[ -e "$TEST_TMP/stuck.ready" ] || fail "the stuck watcher did not connect in 30 s"
sleep 0.2
pctl submit "$TEST_TMP/flood.ini" >/dev/null
t0=$(date +%s)
pctl watch flood --plain > "$TEST_TMP/watch.out" || fail "watch of flood did not succeed"
t1=$(date +%s)
[ $((t1 - t0)) -lt 20 ] || fail "the run took $((t1 - t0))s: a stuck watcher slowed the daemon"
n=$(grep -c " progress " "$TEST_TMP/watch.out")
[ "$n" = 20000 ] || fail "the reading watcher got $n of 20000 progress events"
for _ in $(seq 1 100); do grep -q "dropped a watcher" "$TEST_TMP/pipelined.out" && break; sleep 0.1; done
grep -q "dropped a watcher" "$TEST_TMP/pipelined.out" || fail "the stuck watcher was not dropped"
touch "$TEST_TMP/flood.done"
wait $stuck || { cat "$TEST_TMP/stuck.out"; fail "the stuck watcher did not get feed.dropped"; }
cat "$TEST_TMP/stuck.out"
pctl status >/dev/null || fail "daemon not serving after abuse"
integrity_ok
events_gapless
pl_stop
echo ok
