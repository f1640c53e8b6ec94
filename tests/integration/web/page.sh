#!/bin/bash
# web/page.sh: the status page, in a real browser: Debian's Chromium driven
# by playwright-core (tests/tools/playwright.sh; no browser download),
# against a real daemon serving it (http_listen):
#  - during a tiny run (an exec job, the real jobs/train.py with the tiny
#    engine, a gate on recorded bake results) the page shows jobs changing
#    state without a reload, the loss curve gains points, and the verdict
#    and the run's rejected state appear at the end;
#  - markup from the store (the run's description, a job's log line) is
#    shown as text: no element made, no script run (job names cannot hold
#    markup: the spec refuses them);
#  - the daemon killed -9 while a page follows a run: the page reconnects
#    and resumes after its last event, without a duplicate;
#  - every response carries the content security policy; a POST is 405;
#  - every request needs a credential, on loopback too: without one 401;
#    a Host: name the listener is not configured for 421 (DNS rebinding);
#  - off loopback: no start without a token; without the token 401; with a
#    bearer token, or the cookie of pipelinectl web's one-time link, 200;
#    the link works once; the cookie is a session id, not the token, and
#    expires (Max-Age, HttpOnly, SameSite=Strict).
# Screenshots go to tests/out/web-*.png.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
set +e +o pipefail
trap 'pl_kill9 2>/dev/null' EXIT
command -v /usr/bin/chromium >/dev/null || fail "chromium is not installed (etc/deps.sh installs it)"
NODE_MODULES=$("$TOP/tests/tools/playwright.sh") || fail "playwright-core could not be installed"
SHOTS=$TOP/tests/out
mkdir -p "$SHOTS"
node_test() { NODE_PATH=$NODE_MODULES node "$TOP/tests/helpers/page-test.mjs" "$@"; }
# tests/helpers is outside node's resolution of NODE_PATH for ES modules:
# link the package beside the script's copy.
mkdir -p "$TEST_TMP/web/node_modules"
ln -sfn "$NODE_MODULES/playwright-core" "$TEST_TMP/web/node_modules/playwright-core"
cp "$TOP/tests/helpers/page-test.mjs" "$TEST_TMP/web/"
node_test() { node "$TEST_TMP/web/page-test.mjs" "$@"; }

PORT=$(free_port)
export PL_TOKEN=loopback-token-0123456789
pl_conf "http_listen = 127.0.0.1:$PORT" "max_jobs = 2" "http_token = $PL_TOKEN"
pl_start
U=http://127.0.0.1:$PORT
AUTH="Authorization: Bearer $PL_TOKEN"

# A credential on loopback too; only the configured Host: names.
[ "$(curl -s -o /dev/null -w '%{http_code}' "$U/api/runs")" = 401 ] || fail "loopback without a credential: not 401"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" -H "Host: rebound.example:$PORT" "$U/api/runs")" = 421 ] ||
	fail "a foreign Host: name was answered"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" -H "Host: localhost:$PORT" "$U/api/runs")" = 200 ] ||
	fail "Host: localhost was not answered"
# Security headers on every response, ours and the header limits' (414,
# 431: answered before libmicrohttpd sees the request); nothing but GET.
long=$(head -c 9000 /dev/zero | tr '\0' a)
big=$(head -c 20000 /dev/zero | tr '\0' b)
for p in / /app.js /api/runs /metrics /nope "/$long"; do
	curl -s -D - -o /dev/null -H "$AUTH" "$U$p" | grep -qi "^content-security-policy: default-src 'none'; script-src 'self'" ||
		fail "${p:0:20} has no content security policy"
done
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" "$U/$long")" = 414 ] || fail "a 9000-byte URI: not 414"
h=$(curl -s -D - -o /dev/null -H "$AUTH" -H "X-Big: $big" "$U/api/runs")
echo "$h" | head -1 | grep -q " 431 " || fail "a 20 kB header: not 431: $(echo "$h" | head -1)"
echo "$h" | grep -qi "^x-content-type-options: nosniff" || fail "the 431 answer has no nosniff"
echo "$h" | grep -qi "^content-security-policy: default-src 'none'" || fail "the 431 answer has no CSP"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" -X POST "$U/api/runs")" = 405 ] || fail "POST was not 405"

# Recorded bakes for the gate: 24 cases both corpora lack (the fair
# slice), the incumbent passing every one, the candidate half: rejected.
/usr/bin/python3 - "$TEST_TMP" <<'EOF'
import json, sys
for name, npass in (("cand", 12), ("inc", 24)):
    rows = {"c%02d" % i: [2 | 8, 3, 7 if i < npass else 0, 0, 1.0, "route"] for i in range(24)}
    json.dump({"case_set": "S", "passes": 3, "model": "router:" + name, "complete": True,
               "speed_comparable": True, "rows": rows}, open("%s/%s.json" % (sys.argv[1], name), "w"))
EOF
setup_tokens 40
mkdir -p "$TEST_TMP/specs"
cat >"$TEST_TMP/specs/w1.ini" <<INI
[run]
name = w1
description = a run whose description is <img src=x onerror=alert(1)>
[prep]
stage = exec
command = echo '<img src=x onerror=alert(1)>' && sleep 2
[train]
after = prep
engine = tiny
base = $BASE
tokens = $TOKENS
lora_r = 4
max_steps = 30
save_steps = 100
gradient_accumulation_steps = 1
[gate]
after = train
candidate = $TEST_TMP/cand.json
incumbent = $TEST_TMP/inc.json
INI
pctl submit "$TEST_TMP/specs/w1.ini" >/dev/null || fail "submit w1"
out=$(node_test live "$U" w1 "$SHOTS") || { echo "$out"; fail "the live page test failed"; }
note "live: $out"
wait_run w1 rejected 60

# The daemon killed -9 under a page, and started again.
printf '[run]\nname = w2\n[a]\nstage = exec\ncommand = sleep 12\n[b]\nstage = exec\nafter = a\ncommand = sleep 4\n' \
    >"$TEST_TMP/specs/w2.ini"
pctl submit "$TEST_TMP/specs/w2.ini" >/dev/null || fail "submit w2"
# The restart waits for the killed daemon to be gone (its lock goes with it).
echo "while kill -0 $PL_PID 2>/dev/null; do sleep 0.05; done; $PIPELINED -d -f $PL_CONF >>$TEST_TMP/pipelined.out 2>&1 &" >"$TEST_TMP/restart.sh"
out=$(node_test reconnect "$U" w2 "$SHOTS" "kill -9 $PL_PID" "bash $TEST_TMP/restart.sh") ||
	{ echo "$out"; fail "the reconnect test failed"; }
note "reconnect: $out"
PL_PID=$(pgrep -f "pipelined -d -f $PL_CONF" | head -1)
last=$(echo "$out" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["lastId"])')
want=$(db "SELECT max(id) FROM events WHERE run = 'w2'")
[ "$last" = "$want" ] || fail "the page's last event is $last, the store's newest for w2 is $want"
pl_kill9
# Every daemon of this configuration, the restarted one included (not
# this shell's child): killed, and waited for until none is left but a
# zombie, or the next start finds its lock (pipelined.pid) still held and
# names it. (pgrep lists the first daemon's zombie too, until this shell
# reaps it: taking the first pid it prints could miss the live one.)
daemons_alive() {
	local p
	for p in $(pgrep -f "pipelined -d -f $PL_CONF"); do
		[ "$(ps -o stat= -p "$p" 2>/dev/null | cut -c1)" = Z ] || return 0
	done
	return 1
}
for _ in $(seq 1 100); do
	daemons_alive || break
	pkill -9 -f "pipelined -d -f $PL_CONF" 2>/dev/null
	sleep 0.1
done
daemons_alive && fail "a daemon of $PL_CONF outlived kill -9 for 10 s"
# And the pid file's lock let go: its holder, as the kernel names it
# (F_GETLK), is killed too should pgrep have missed it.
lock_holder() {
	/usr/bin/python3 - "$TEST_TMP/state/pipelined.pid" <<'PY'
import fcntl, os, struct, sys
try:
    fd = os.open(sys.argv[1], os.O_RDWR)
except OSError:
    sys.exit(0)
lk = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0)
r = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, lk))
print(r[4] if r[0] != fcntl.F_UNLCK else "")
PY
}
for _ in $(seq 1 100); do
	h=$(lock_holder)
	[ -z "$h" ] && break
	kill -9 "$h" 2>/dev/null
	sleep 0.1
done
[ -z "$(lock_holder)" ] || fail "the pid file's lock is still held by $(lock_holder)"
PL_PID=

# Off loopback: a token is needed.
P2=$(free_port)
pl_conf "http_listen = 0.0.0.0:$P2"
unset PL_TOKEN
out=$("$PIPELINED" -d -f "$PL_CONF" 2>&1) && fail "the daemon started off loopback without a token"
echo "$out" | grep -q "needs an http_token" || fail "no start without a token, but: $out"
TOKEN=0123456789abcdef-token
pl_conf "http_listen = 0.0.0.0:$P2" "http_token = $TOKEN"
pl_start
U2=http://127.0.0.1:$P2
[ "$(curl -s -o /dev/null -w '%{http_code}' "$U2/api/runs")" = 401 ] || fail "no token: not 401"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$U2/")" = 401 ] || fail "no token, the page: not 401"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer wrong-token-0123456" "$U2/api/runs")" = 401 ] ||
	fail "a wrong token: not 401"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$U2/api/runs")" = 200 ] ||
	fail "the bearer token: not 200"
link=$(pctl web 2>/dev/null) || fail "pipelinectl web failed"
case "$link" in "http://0.0.0.0:$P2/login?code="*) ;; *) fail "pipelinectl web printed $link";; esac
code=${link##*code=}
[ "$(curl -s -o /dev/null -w '%{http_code}' -c "$TEST_TMP/jar" "$U2/login?code=$code")" = 303 ] ||
	fail "the login link was not accepted"
grep -q "pl_session" "$TEST_TMP/jar" || fail "no session cookie"
grep "pl_session" "$TEST_TMP/jar" | grep -q "$TOKEN" && fail "the session cookie is the token"
code2=$(pctl web 2>/dev/null) && code2=${code2##*code=}
sc=$(curl -s -D - -o /dev/null "$U2/login?code=$code2" | grep -i "^set-cookie:")
for a in "Max-Age=" HttpOnly "SameSite=Strict"; do
	echo "$sc" | grep -q "$a" || fail "the session cookie lacks $a: $sc"
done
[ "$(curl -s -o /dev/null -w '%{http_code}' -b "$TEST_TMP/jar" "$U2/api/runs")" = 200 ] ||
	fail "the session cookie: not 200"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$U2/login?code=$code")" = 401 ] || fail "the link worked twice"
"$PIPELINED" -nv -f "$PL_CONF" | grep -q "^http_token = (set)$" || fail "-nv printed the token"
integrity_ok
echo ok
