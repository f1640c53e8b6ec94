#!/bin/bash
# http/bounds.sh: the HTTP listener stays answerable under load
# (pipelined.conf(5) http_max_connections, http_max_streams, http_timeout,
# http_header_timeout, http_max_per_ip). On loopback, for 25 s: 500 slow
# clients, each sending a request header one line every 2 s and never finishing it (and
# reconnecting when dropped), and 200 status pages' event streams that are
# never read, while /metrics is scraped every 0.5 s as Prometheus would
# (bearer token, 5 s timeout). Every scrape is answered; the slow clients
# are dropped at the header deadline; the streams over http_max_streams
# get 503 with Retry-After. The load generator is tests/tools/http-flood.py
# (bounded loops; it stops by itself). Then http_max_per_ip: one address
# over its cap is closed unanswered, another address is still served.
# run.sh: alone (a load of its own, and deadlines it times).
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
PORT=$(free_port)
TOKEN=bounds-token-0123456789
pl_conf "http_listen = 127.0.0.1:$PORT" "http_token = $TOKEN" "http_header_timeout = 4s" \
    "http_max_streams = 64" "http_max_connections = 1024" "http_timeout = 10s"
pl_start
"$PIPELINED" -nv -f "$PL_CONF" | grep -q "^http_max_streams = 64$" || fail "-nv lacks http_max_streams"
out=$(/usr/bin/python3 "$TOP/tests/tools/http-flood.py" 127.0.0.1 "$PORT" "$TOKEN" 25 500 200) ||
	fail "http-flood.py failed: $out"
note "$out"
get() { echo "$out" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
[ "$(get scrapes)" -ge 30 ] || fail "only $(get scrapes) scrapes in 25 s"
[ "$(get scrapes)" = "$(get scrapes_ok)" ] || fail "scrapes unanswered: $(get scrape_failures)"
[ "$(get slow_dropped)" -ge 400 ] || fail "the slow clients were not dropped at the header deadline: $(get slow_dropped)"
[ "$(get streams_200)" = 64 ] || fail "$(get streams_200) streams served, http_max_streams is 64"
[ "$(get streams_503)" = 136 ] || fail "$(get streams_503) streams refused with 503, wanted 136"
[ "$(get retry_after)" != None ] || fail "the 503 had no Retry-After"
# The daemon is still whole and serving.
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/metrics")" = 200 ] ||
	fail "/metrics after the load"
pl_stop
# http_max_per_ip = 2: two status pages' event streams from 127.0.0.1
# are served (the listener closes every other answer once sent, so a
# stream is what stays); a third connection from that address is closed
# unanswered (libmicrohttpd's per-address limit), while one from
# 127.0.0.2 (another client address, same listener) is served; once a
# stream closes, 127.0.0.1 is served again (the stream's thread notices
# the page went away at its next keep-alive, every 15 s: web.c).
pl_conf "http_listen = 127.0.0.1:$PORT" "http_token = $TOKEN" "http_max_per_ip = 2" "http_timeout = 30s"
pl_start
out=$(/usr/bin/python3 - "$PORT" "$TOKEN" <<'PY'
import socket, sys, time
port, token = int(sys.argv[1]), sys.argv[2]
def ask(src, path):
    """A request for path on a new connection from address src: its
    status, or 'closed' when the connection closed with no answer; and
    the socket."""
    s = socket.socket()
    s.settimeout(5)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n\r\n"
               % (path, port, token)).encode())
    buf = b""
    while b"\r\n" not in buf:
        try:
            got = s.recv(65536)
        except ConnectionResetError:
            got = b""
        if not got:
            return "closed", s
        buf += got
    return buf.split()[1].decode(), s
a, b = ask("127.0.0.1", "/api/events"), ask("127.0.0.1", "/api/events")
third = ask("127.0.0.1", "/metrics")[0]
other = ask("127.0.0.2", "/metrics")[0]
a[1].close()
again = "closed"
t0 = time.time()
while time.time() < t0 + 45:   # until the daemon notices the closed stream
    again = ask("127.0.0.1", "/metrics")[0]
    if again != "closed":
        break
    time.sleep(0.2)
print(a[0], b[0], third, other, again, "%.0fs" % (time.time() - t0))
PY
) || fail "the per-address check failed: $out"
[ "${out% *}" = "200 200 closed 200 200" ] ||
	fail "http_max_per_ip = 2: two streams, a third connection from 127.0.0.1, one from 127.0.0.2, 127.0.0.1 after a stream closed: $out (want 200 200 closed 200 200)"
note "http_max_per_ip = 2: streams, third, other address, after a close: $out"
pl_stop
# An http_max_streams not below http_max_connections is refused.
pl_conf "http_listen = 127.0.0.1:$PORT" "http_token = $TOKEN" "http_max_streams = 2000"
out=$("$PIPELINED" -n -f "$PL_CONF" 2>&1) && fail "http_max_streams above http_max_connections was accepted"
echo "$out" | grep -q "http_max_streams: 2000 is not below http_max_connections" || fail "unclear refusal: $out"
echo ok
