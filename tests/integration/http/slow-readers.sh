#!/bin/bash
# http/slow-readers.sh: clients that ask for a large reply and never read
# it cannot take the listener from /metrics (pipelined.conf(5)
# http_max_per_session, http_max_per_user, http_timeout; pipelined(8)
# SECURITY). On loopback, with http_max_connections = 64 (16 streams) and
# http_timeout = 6s (a reply that makes no write progress for 6 s is
# dropped):
#  - pl-alice, a member, submits two runs with a 3 MB description each
#    and opens, with her session, 70 connections that each ask for her
#    list of runs (/api/runs, 6 MB) with a 4 KiB receive buffer and never
#    read; for 14 s /metrics is scraped every 0.5 s with the bearer token
#    and a 5 s timeout: every scrape is answered within 3 s, her session
#    is served at most http_max_per_session (8 by default) at once, the
#    others get 429 with Retry-After, and the ones served are dropped
#    within http_timeout and a few seconds of their last write;
#  - the same with 70 event streams (/api/events) that are never read:
#    8 served, 62 refused with 429, every scrape answered;
#  - http_max_per_session = 2, http_max_per_user = 3: a third connection
#    of one session gets 429 naming http_max_per_session, a second session
#    of the same user is served once more and then gets 429 naming
#    http_max_per_user, while another user's session (root's) is served;
#    once those connections end, the user is served again;
#  - a bound that is not a number of 0 to 100000 is refused by -n with
#    the file and line.
# The load is bounded: 70 sockets, 14 s, loopback only
# (tests/tools/http-flood.py --readers).
# run.sh: alone (it times how soon scrapes are answered and readers dropped).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/member.sh"
trap 'pl_kill9 2>/dev/null' EXIT
member_users pl-alice
PORT=$(free_port)
TOKEN=slow-readers-token-0123456789
start() {
	pl_conf "group = plsubmit" "http_listen = 127.0.0.1:$PORT" "http_token = $TOKEN" \
	    "http_max_connections = 64" "http_max_streams = 16" "http_timeout = 6s" \
	    "max_spec_bytes = 4M" "$@"
	pl_start
	chmod 0755 "$TEST_TMP" "$TEST_TMP/run"
	chmod 0666 "$TEST_TMP/run/control.sock"
}
alice() { as_user pl-alice "$PIPELINECTL" -f "$PL_CONF" "$@"; }
session() {	# session [alice]: a new session id, of alice or of root
	local link
	if [ "${1:-}" = alice ]; then link=$(alice web 2>/dev/null); else link=$(pctl web 2>/dev/null); fi
	curl -s -D - -o /dev/null "$link" | sed -n 's/^Set-Cookie: pl_session=\([0-9a-f]*\);.*/\1/p'
}
start
# Two runs with a 3 MB description each: alice's list of runs
# (/api/runs) is a 6 MB reply, more than the kernel buffers of a
# connection hold (4 MiB at most here: tcp_wmem), so a client that does
# not read it leaves the daemon's writer blocked. (max_spec_bytes lets
# a spec of 3 MB in.)
for r in big1 big2; do
	/usr/bin/python3 -c "
print('[run]'); print('description = ' + 'x' * 3000000)
print('[big]'); print('stage = exec'); print('command = true')" >"$TEST_TMP/$r.ini"
	chmod 0644 "$TEST_TMP/$r.ini"
	alice submit "$TEST_TMP/$r.ini" >/dev/null || fail "alice could not submit $r"
	wait_run $r succeeded
done
A=$(session alice)
[ -n "$A" ] || fail "alice's link gave no session"
size=$(curl -s -H "Cookie: pl_session=$A" "http://127.0.0.1:$PORT/api/runs" | wc -c)
[ "$size" -gt 6000000 ] || fail "alice's list of runs is $size bytes, not a large reply"

out=$(/usr/bin/python3 "$TOP/tests/tools/http-flood.py" --readers 127.0.0.1 "$PORT" "$TOKEN" 14 \
    70 /api/runs "$A") || fail "http-flood.py failed: $out"
note "$out"
get() { echo "$out" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
[ "$(get scrapes)" -ge 20 ] || fail "only $(get scrapes) scrapes in 14 s: $out"
[ "$(get scrapes)" = "$(get scrapes_ok)" ] || fail "scrapes unanswered under 70 readers that do not read: $out"
/usr/bin/python3 -c "import sys; sys.exit(not $(get scrape_max_s) <= 3)" ||
	fail "a scrape took $(get scrape_max_s) s: $out"
[ "$(get served)" = 8 ] || fail "$(get served) of alice's connections served at once, http_max_per_session is 8: $out"
[ "$(get refused)" = 62 ] || fail "$(get refused) refused with 429 and Retry-After, wanted 62: $out"
[ "$(get served_open_at_end)" = 0 ] || fail "connections that never read were not dropped: $out"
/usr/bin/python3 -c "import sys; sys.exit(not $(get served_dropped_after_s) <= 11)" ||
	fail "the connections that never read were dropped after $(get served_dropped_after_s) s (http_timeout 6s): $out"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Cookie: pl_session=$A" "http://127.0.0.1:$PORT/api/runs")" = 200 ] ||
	fail "alice's session is not served once her connections ended"
# The same with event streams, which a client that does not read keeps
# open as long as the kernel's buffers take the keep-alives: the session
# holds 8 of them, the other 62 get 429, every scrape is answered.
out=$(/usr/bin/python3 "$TOP/tests/tools/http-flood.py" --readers 127.0.0.1 "$PORT" "$TOKEN" 6 \
    70 /api/events "$A") || fail "http-flood.py failed: $out"
note "event streams: $out"
[ "$(get scrapes)" = "$(get scrapes_ok)" ] || fail "scrapes unanswered under 70 streams that are not read: $out"
[ "$(get served) $(get refused)" = "8 62" ] || fail "streams served and refused, wanted 8 and 62: $out"
pl_stop

# Explicit bounds: per session 2, per user 3.
start "http_max_per_session = 2" "http_max_per_user = 3"
"$PIPELINED" -nv -f "$PL_CONF" | grep -qx "http_max_per_user = 3" || fail "-nv lacks http_max_per_user"
A1=$(session alice); A2=$(session alice); R=$(session)
[ -n "$A1" ] && [ -n "$A2" ] && [ -n "$R" ] || fail "no sessions: $A1 $A2 $R"
out=$(/usr/bin/python3 - "$PORT" "$A1" "$A2" "$R" <<'PY'
import socket, sys, time
port, a1, a2, r = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
held = []
def ask(sid):
    """A request for the large document with session sid, never read (the
    connection stays open): its status and the first line of a 429's text."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    s.sendall(("GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nCookie: pl_session=%s\r\n\r\n"
               % (port, sid)).encode())
    held.append(s)
    head = s.recv(1024, socket.MSG_PEEK).decode(errors="replace")
    status = head.split(" ")[1]
    if status != "429":
        return status
    text = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        text += b
    return "429 " + text.decode(errors="replace").split("\r\n\r\n", 1)[1].split("\n")[0][:70]
res = [ask(a1), ask(a1), ask(a1), ask(a2), ask(a2), ask(r)]
for s in held:
    s.close()
time.sleep(1)
res.append(ask(a2))
print("|".join(res))
PY
) || fail "the bounds' script failed: $out"
note "$out"
IFS='|' read -r s1 s2 s3 s4 s5 s6 s7 <<<"$out"
[ "$s1 $s2" = "200 200" ] || fail "alice's first session was not served twice: $out"
case "$s3" in "429 this session has 2 connections open (http_max_per_session)"*) ;;
	*) fail "a third connection of one session: $s3";; esac
[ "$s4" = 200 ] || fail "alice's second session was not served: $out"
case "$s5" in "429 this user's sessions have 3 connections open (http_max_per_user)"*) ;;
	*) fail "a fourth connection of one user: $s5";; esac
[ "$s6" = 200 ] || fail "root's session was not served beside alice's: $out"
[ "$s7" = 200 ] || fail "alice was not served again once her connections ended: $out"
pl_stop

# Bad values are refused with the file and line.
for v in -1 x 100001; do
	pl_conf "http_listen = 127.0.0.1:$PORT" "http_token = $TOKEN" "http_max_per_user = $v"
	o=$("$PIPELINED" -n -f "$PL_CONF" 2>&1) && fail "http_max_per_user = $v was accepted"
	echo "$o" | grep -q "pipelined.conf:[0-9]*: http_max_per_user" || fail "unclear refusal of $v: $o"
done
echo ok
