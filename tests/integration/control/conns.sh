#!/bin/bash
# Descriptor exhaustion through idle connections, against the real daemon:
# with its descriptors limited to 256, 1,000 idle control connections and
# 300 idle feed connections are opened while a job runs. The daemon
# serves control_max_clients and feed_max_watchers of them and tells the
# rest EBUSY; the job's exit (status 0 in its exit.json) is recorded as a
# success, not as a process lost for want of a descriptor; idle
# connections are closed after their timeouts; the
# daemon still serves afterwards.
# run.sh: alone (it times the idle connections' closing).
. "$(dirname "$0")/../../lib.sh"
pl_conf "control_max_clients = 32" "control_idle_timeout = 6s" \
    "feed_max_watchers = 16" "feed_idle_timeout = 4s"
ulimit -Sn 256
pl_start
cat > "$TEST_TMP/slow.ini" <<INI
[slow]
stage = exec
command = sleep 4
INI
pctl submit "$TEST_TMP/slow.ini" >/dev/null || fail "submit"
for _ in $(seq 1 50); do [ "$(job_state slow slow)" = running ] && break; sleep 0.1; done
[ "$(job_state slow slow)" = running ] || fail "the job did not start"
python3 - "$TEST_TMP/run/control.sock" "$TEST_TMP/run/feed.sock" <<'PY' || fail "connection checks"
import json, resource, select, socket, sys, time
ctl, feed = sys.argv[1], sys.argv[2]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))

def open_many(path, n):
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        socks.append(s)
    return socks

def split(socks, secs, closed=None):
    """Connections told EBUSY and closed, and those still open after secs;
    closed gets the time each of the others was closed at."""
    busy, deadline = 0, time.time() + secs
    live = list(socks)
    while time.time() < deadline and live:
        pl = select.poll()
        byfd = {s.fileno(): s for s in live}
        for fd in byfd:
            pl.register(fd, select.POLLIN)
        for fd, _ in pl.poll(200):
            s = byfd[fd]
            d = s.recv(4096)
            if d:
                m = json.loads(d.split(b"\n")[0])
                assert m["code"] == "EBUSY", m
                busy += 1
            elif closed is not None:
                closed.append(time.time())
            live.remove(s)
            s.close()
    return busy, live

t0 = time.time()
cs = open_many(ctl, 1000)
t1 = time.time()
fs = open_many(feed, 300)
t2 = time.time()
early = []
busy, live = split(cs, 2.0, early)
assert not early, "%d control connections closed early" % len(early)
assert len(live) <= 32 and busy == 1000 - len(live), (len(live), busy)
fbusy, flive = split(fs, 1.0, early)
assert not early, "%d feed connections closed early" % len(early)
assert len(flive) <= 16 and fbusy == 300 - len(flive), (len(flive), fbusy)
print("# control: %d served, %d told EBUSY; feed: %d served, %d told EBUSY"
      % (len(live), busy, len(flive), fbusy))
# The idle ones are closed after their timeouts (6 s and 4 s), not before.
fc, cc = [], []
_, left = split(flive, 8.0, fc)
assert not left, "%d idle feed connections still open" % len(left)
_, left = split(live, 8.0, cc)
assert not left, "%d idle control connections still open" % len(left)
assert min(fc) - t1 >= 3.0 and min(cc) - t0 >= 5.0, (min(fc) - t1, min(cc) - t0)
print("# idle feed connections closed %.1f-%.1f s after they were opened, control %.1f-%.1f s"
      % (min(fc) - t2, max(fc) - t1, min(cc) - t1, max(cc) - t0))
PY
wait_run slow succeeded 20 || { pctl status slow; fail "the job did not succeed"; }
msg=$(db "SELECT coalesce(message,'') FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = 'slow'")
case "$msg" in *vanished*|*lost*) fail "the job's attempt says: $msg";; esac
pctl status >/dev/null || fail "daemon not serving after the connections"
integrity_ok
events_gapless
pl_stop
echo ok
