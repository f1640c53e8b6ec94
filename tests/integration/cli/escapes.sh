#!/bin/bash
# cli/escapes.sh: pipelinectl prints only what is safe for a terminal.
#  - A job's events carry terminal escapes (an error message setting the
#    window title and clearing the screen, a progress unit in red), its
#    log holds them too, and the run's description: status, list, watch,
#    logs, values and report show each control character escaped (\x1b),
#    never the byte; logs --raw gives the log's bytes as they are.
#  - A socket that sends a line without a newline, forever: pipelinectl
#    stops at PL_PROTO_MAX_REPLY (32 MiB) with one error line, in bounded
#    memory and time.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null; [ -n "$HPID" ] && kill "$HPID" 2>/dev/null' EXIT
pl_conf
pl_start
ESC=$(printf '\033')
cat >"$TEST_TMP/e.ini" <<INI
[run]
name = esc
description = a run ${ESC}[2Jdescribed
[j]
stage = exec
command = printf 'log ${ESC}]0;LOGTITLE\a line\n'; echo '{"type":"progress","step":1,"total":2,"unit":"\\\\u001b[31mred"}' >> \$PL_EVENTS; echo '{"type":"metric","name":"m","step":1,"value":1}' >> \$PL_EVENTS; echo '{"type":"error","message":"\\\\u001b]0;TITLE\\\\u0007\\\\u001b[2Jcleared"}' >> \$PL_EVENTS; exit 3
INI
pctl submit "$TEST_TMP/e.ini" >/dev/null || fail "submit"
wait_run esc failed 30
grep -q '\\u001b\]0;TITLE' "$TEST_TMP"/state/runs/esc/j/attempt-1/main/events || fail "the test's events file lacks the escape"
# has_raw FILE: does the output hold an ESC or BEL byte?
has_raw() { LC_ALL=C grep -q "$(printf '[\033\007]')" "$1"; }
check() {	# check NAME: the output in $TEST_TMP/out.NAME is safe and shows the escape
	has_raw "$TEST_TMP/out.$1" && fail "pipelinectl $1 printed a raw escape: $(od -c "$TEST_TMP/out.$1" | head -5)"
	grep -qF '\x1b' "$TEST_TMP/out.$1" || fail "pipelinectl $1 does not show the escape as \\x1b: $(cat "$TEST_TMP/out.$1")"
}
pctl status esc >"$TEST_TMP/out.status" 2>&1; check status
pctl list >"$TEST_TMP/out.list" 2>&1
has_raw "$TEST_TMP/out.list" && fail "pipelinectl list printed a raw escape"
pctl watch --plain esc >"$TEST_TMP/out.watch" 2>&1; check watch
grep -qF '\x1b]0;TITLE\x07\x1b[2Jcleared' "$TEST_TMP/out.watch" || fail "watch: the error message is not shown escaped: $(cat "$TEST_TMP/out.watch")"
pctl logs esc j >"$TEST_TMP/out.logs" 2>&1; check logs
[ "$(grep -c . "$TEST_TMP/out.logs")" -ge 3 ] || fail "logs lost its newlines: $(cat "$TEST_TMP/out.logs")"
pctl logs --raw esc j >"$TEST_TMP/out.raw" 2>&1
has_raw "$TEST_TMP/out.raw" || fail "logs --raw did not give the log's bytes"
pctl metrics esc j >"$TEST_TMP/out.metrics" 2>&1
has_raw "$TEST_TMP/out.metrics" && fail "pipelinectl metrics printed a raw escape"
pctl --json status esc | /usr/bin/python3 -c 'import json,sys; json.load(sys.stdin)' || fail "--json status is not JSON"
pl_stop

# A hostile socket: one line without a newline, forever.
H=$TEST_TMP/hostile.sock
/usr/bin/python3 - "$H" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(4)
chunk = b"x" * 65536
while True:
    c, _ = s.accept()
    if os.fork() == 0:
        try:
            while True:
                c.sendall(chunk)
        except OSError:
            os._exit(0)
    c.close()
PY
HPID=$!
for i in $(seq 50); do [ -S "$H" ] && break; sleep 0.1; done
start=$(date +%s)
/usr/bin/time -f '%M' -o "$TEST_TMP/rss" timeout 60 "$PIPELINECTL" -s "$H" status >"$TEST_TMP/h.out" 2>"$TEST_TMP/h.err"
rc=$?
[ $rc = 1 ] || fail "pipelinectl against a hostile socket: exit $rc (124: it did not stop): $(head -c 300 "$TEST_TMP/h.err")"
[ "$(wc -l <"$TEST_TMP/h.err")" = 1 ] || fail "not one error line: $(head -c 300 "$TEST_TMP/h.err")"
grep -q "without its end" "$TEST_TMP/h.err" || fail "unclear error: $(cat "$TEST_TMP/h.err")"
rss=$(tail -1 "$TEST_TMP/rss")
[ "$rss" -lt 150000 ] || fail "pipelinectl grew to $rss kB"
note "hostile socket: $(cat "$TEST_TMP/h.err") (max RSS $rss kB, $(( $(date +%s) - start )) s)"
kill "$HPID"; HPID=
echo ok
