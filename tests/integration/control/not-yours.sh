#!/bin/bash
# control/not-yours.sh: another user's run is answered as a run that does
# not exist, on every door (pipelined(8) SECURITY, pipelinectl(1) EXIT
# STATUS), so no answer tells a member which names other users' runs
# have. With the daemon as root, a group and the HTTP listener on, pl-bob
# (a member) asks about pl-alice's run "alicerun" and about "ghostrun",
# which does not exist:
#  - every verb of pipelinectl that names a run (status, logs, values,
#    artifacts, metrics, cancel, retry, watch, report, plot), plain and
#    with --json: the same exit status (4), the same words on standard
#    error, the same JSON error ("ENOENT"), apart from the name;
#  - the control socket's raw replies and the feed's (watch) likewise;
#  - the HTTP API through bob's session (/api/run, /api/log,
#    /api/metrics, /api/events): the same status and body;
#  - the answer says what it means: "no run NAME (or not yours ...)";
#  - root, who sees every run, is told "no run ghostrun" alone.
# Users: pl-alice, pl-bob (members of plsubmit).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/member.sh"
trap 'pl_kill9 2>/dev/null' EXIT
member_users pl-alice pl-bob
as() { as_user "$@"; }
PORT=$(free_port)
TOKEN=not-yours-token-0123456789
pl_conf "group = plsubmit" "http_listen = 127.0.0.1:$PORT" "http_token = $TOKEN"
pl_start
chmod 0755 "$TEST_TMP" "$TEST_TMP/run"
chmod 0666 "$TEST_TMP/run/control.sock"
U=http://127.0.0.1:$PORT
mkdir -p "$TEST_TMP/specs"
cat >"$TEST_TMP/specs/alicerun.ini" <<'INI'
[sec]
stage = exec
command = echo ALICE-SECRET-LINE; echo '{"type":"metric","name":"loss","step":1,"value":42}' >> $PL_EVENTS
INI
chmod 0755 "$TEST_TMP/specs"; chmod 0644 "$TEST_TMP"/specs/*.ini
as pl-alice "$PIPELINECTL" -f "$PL_CONF" submit "$TEST_TMP/specs/alicerun.ini" >/dev/null ||
	fail "alice could not submit"
wait_run alicerun succeeded

# same WHAT A B: A (about alicerun) and B (about ghostrun) are the same
# answer once each name is written RUN.
same() {
	local a=${2//alicerun/RUN} b=${3//ghostrun/RUN}
	[ "$a" = "$b" ] || fail "$1: alice's run and a missing run answered differently:
  alicerun: $2
  ghostrun: $3"
}
# bob ARGS...: pipelinectl as bob; prints "exit STATUS", then its output.
bob() { out=$(as pl-bob timeout 10 "$PIPELINECTL" -f "$PL_CONF" "$@" 2>&1); echo "exit $?"; echo "$out"; }
n=0
for v in "status R" "logs R sec" "values R" "values R sec" "artifacts R" "metrics R sec" \
    "metrics R sec loss" "cancel R" "retry R" "retry R sec" "watch R" "watch --plain R" "report R" \
    "plot -o $TEST_TMP/plot.svg R"; do
	for j in "" --json; do
		a=$(bob $j ${v/R/alicerun}); b=$(bob $j ${v/R/ghostrun})
		same "pipelinectl $j $v" "$a" "$b"
		case "$a" in "exit 4"*) ;; *) fail "pipelinectl $j $v as bob did not exit 4: $a";; esac
		echo "$a" | grep -qE "ALICE|42" && fail "pipelinectl $j $v showed alice's run: $a"
		n=$((n + 1))
	done
done
note "$n pipelinectl commands: the same answer for alice's run and a missing one"
a=$(bob status alicerun)
echo "$a" | grep -q "no run alicerun (or not yours" || fail "the answer is unclear: $a"
a=$(bob --json status alicerun)
echo "$a" | grep -q '"code":"ENOENT"' || fail "the JSON answer's code is not ENOENT: $a"

# The control socket's own replies, verb by verb.
raw() {	# raw REQUEST_JSON: the control socket's closing line for it, as bob
	as pl-bob /usr/bin/python3 - "$TEST_TMP/run/control.sock" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b'{"verb":"hello","version":1}\n' + sys.argv[2].encode() + b"\n")
f = s.makefile()
f.readline()
print(f.readline().strip())
PY
}
for v in status logs values artifacts metrics cancel retry; do
	a=$(raw "{\"verb\":\"$v\",\"run\":\"alicerun\",\"job\":\"sec\"}")
	b=$(raw "{\"verb\":\"$v\",\"run\":\"ghostrun\",\"job\":\"sec\"}")
	same "the control socket's $v" "$a" "$b"
	echo "$a" | grep -q '"code":"ENOENT"' || fail "the control socket's $v: $a"
done
# The feed's watch.
feed() {
	as pl-bob /usr/bin/python3 - "$TEST_TMP/run/feed.sock" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(('{"verb":"watch","version":1,"since":0,"run":"%s"}\n' % sys.argv[2]).encode())
print(s.makefile().readline().strip())
PY
}
a=$(feed alicerun); b=$(feed ghostrun)
same "the feed's watch" "$a" "$b"
echo "$a" | grep -q '"code":"ENOENT"' || fail "the feed's watch: $a"

# HTTP, through bob's session.
link=$(as pl-bob "$PIPELINECTL" -f "$PL_CONF" web) || fail "bob's pipelinectl web failed"
curl -s -o /dev/null -c "$TEST_TMP/bob.jar" "$link"
grep -q pl_session "$TEST_TMP/bob.jar" || fail "bob's link gave no session"
get() { curl -s --max-time 5 -b "$TEST_TMP/bob.jar" -w '\nHTTP %{http_code}' "$U$1"; }
for p in "/api/run?run=R" "/api/log?run=R&job=sec" "/api/metrics?run=R&job=sec" "/api/events?run=R"; do
	a=$(get "${p/R/alicerun}"); b=$(get "${p/R/ghostrun}")
	same "GET $p" "$a" "$b"
	echo "$a" | grep -qE "ALICE|42" && fail "GET $p showed alice's run: $a"
done
a=$(get "/api/run?run=alicerun")
case "$a" in *"no run alicerun (or not yours"*"HTTP 404") ;; *) fail "GET /api/run of alice's run: $a";; esac

# Root sees every run: a missing run is plainly missing.
out=$(pctl status ghostrun 2>&1); rc=$?
[ $rc = 4 ] || fail "root's status of a missing run exited $rc"
echo "$out" | grep -qx "pipelinectl: status: no run ghostrun (ENOENT)" || fail "root's answer: $out"
pctl status alicerun >/dev/null || fail "root cannot see alice's run"
pl_stop
echo ok
