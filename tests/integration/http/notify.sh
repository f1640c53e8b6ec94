#!/bin/bash
# http/notify.sh: [notify] through a real daemon and a webhook receiver on
# loopback (tests/helpers/hook_receiver.py, which checks the
# HMAC-SHA256 signature with its own secret, as a receiver would):
#  - a receiver answering 500 for a while: job.failed and run.end are
#    retried and delivered, signed, each key accepted once; the command
#    target gets the same body on stdin and the event in its environment,
#    and runs as the daemon process's user (a split daemon's _pipelined,
#    not root);
#  - a receiver that hangs: the run ends without waiting for it, the
#    delivery times out and is delivered on a later try;
#  - the receiver down and the daemon killed -9 after the commit: the
#    notification is delivered after the restart, once;
#  - a wrong secret: the receiver's check fails (401), nothing is
#    accepted, the outbox row is given up after its retries;
#  - -n refuses an unknown event and prints no secret.
. "$(dirname "$0")/../../lib.sh"
set +e +o pipefail
RPID=
trap '[ -n "$RPID" ] && kill "$RPID" 2>/dev/null; pl_kill9 2>/dev/null' EXIT
R=$TEST_TMP/hooks.log
receiver() {	# receiver SECRET [PORT]
	rm -f "$TEST_TMP/rport"
	/usr/bin/python3 "$TOP/tests/helpers/hook_receiver.py" --port-file "$TEST_TMP/rport" \
	    --log "$R" --secret "$1" --fail-file "$TEST_TMP/fail" --hang-file "$TEST_TMP/hang" \
	    --hang 4 --port "${2:-0}" &
	RPID=$!
	for _ in $(seq 100); do [ -s "$TEST_TMP/rport" ] && break; sleep 0.05; done
	[ -s "$TEST_TMP/rport" ] || fail "the receiver did not start"
	RPORT=$(cat "$TEST_TMP/rport")
}
# accepted RUN: "event" per accepted (2xx), correctly signed delivery for RUN, sorted.
accepted() {
	/usr/bin/python3 - "$R" "$1" <<'EOF'
import json, sys
seen = [json.loads(l) for l in open(sys.argv[1])]
print("\n".join(sorted(r["event"] for r in seen if r["status"] == 200 and r["sig_ok"]
                       and r["body"]["run"] == sys.argv[2])))
EOF
}
until_true() {	# until_true SECONDS 'SHELL TEST': poll it, evaluated anew each time
	local n=$(($1 * 10))
	for _ in $(seq "$n"); do eval "$2" && return 0; sleep 0.1; done
	return 1
}
mkspec() {	# mkspec RUN COMMAND
	printf '[run]\nname = %s\n[a]\nstage = exec\ncommand = %s\n[b]\nstage = exec\nafter = a\ncommand = true\n' \
	    "$1" "$2" >"$TEST_TMP/$1.ini"
}
: >"$R"
mkdir -p "$TEST_TMP/cmd"
receiver s3cret
notify_conf() {	# notify_conf SECRET RETRIES
	pl_conf
	cat >>"$PL_CONF" <<EOF
[notify]
url = http://127.0.0.1:$RPORT/hook
secret = $1
events = run.end job.failed
command = cat > $TEST_TMP/cmd/\$PL_NOTIFY_KEY.json && id -un > $TEST_TMP/cmd/\$PL_NOTIFY_KEY.user && env | grep ^PL_NOTIFY_ > $TEST_TMP/cmd/\$PL_NOTIFY_KEY.env
timeout = 1s
retries = $2
EOF
}

# -n: an unknown event is refused at its line; the secret is never printed.
notify_conf s3cret 50
out=$("$PIPELINED" -nv -f "$PL_CONF" 2>&1) || fail "-n: $out"
echo "$out" | grep -q '^secret = (set)$' && ! echo "$out" | grep -q s3cret || fail "-nv printed the secret"
sed 's/^events = .*/events = run.end job.exploded/' "$PL_CONF" >"$TEST_TMP/bad.conf"
out=$("$PIPELINED" -n -f "$TEST_TMP/bad.conf" 2>&1) && fail "-n accepted job.exploded"
echo "$out" | grep -q "bad.conf:[0-9]*: events: unknown event \"job.exploded\"" || fail "-n: $out"

# ---- 1. a receiver answering 500 for a while --------------------------------
touch "$TEST_TMP/fail"
pl_start
# The command runs as the daemon process's user, whose state_dir is:
# cmd/ is that user's to write.
DUSER=$(stat -c %U "$TEST_TMP/state")
[ "$(id -u)" != 0 ] || [ "$DUSER" = _pipelined ] || fail "the split daemon's state_dir is $DUSER's, not _pipelined's"
chown "$DUSER" "$TEST_TMP/cmd"
mkspec n1 false
pctl submit "$TEST_TMP/n1.ini" >/dev/null || fail "submit n1"
wait_run n1 failed 30
until_true 20 'grep -q "\"status\": 500" "$R"' || fail "no try reached the receiver"
sleep 1.5
rm -f "$TEST_TMP/fail"
until_true 30 '[ "$(accepted n1 | tr "\n" " ")" = "job.failed run.end " ]' ||
	fail "n1's notifications not delivered: $(accepted n1 | tr '\n' ' ')"
# The receiver has the body before the daemon has recorded the delivery:
# wait for the rows too.
until_true 10 '[ "$(db "SELECT count(*) FROM outbox WHERE run = '"'n1'"' AND target LIKE '"'url:%'"' AND state = '"'delivered'"' AND attempts >= 2")" = 2 ]' ||
	fail "n1's webhook rows: $(db "SELECT kind, state, attempts, error FROM outbox WHERE run = 'n1'")"
/usr/bin/python3 - "$R" <<'EOF' || fail "a key was accepted twice, or a body is wrong"
import collections, json, sys
ok = [json.loads(l) for l in open(sys.argv[1])]
ok = [r for r in ok if r["status"] == 200]
c = collections.Counter(r["key"] for r in ok)
assert all(n == 1 for n in c.values()), c
for r in ok:
    b = r["body"]
    assert b["key"] == r["key"] and b["event"] == r["event"], r
    if r["event"] == "job.failed":
        assert b["job"] == "a" and b["data"]["state"] == "failed", b
    if r["event"] == "run.end":
        assert b["data"]["state"] == "failed", b
EOF
# The command target: the same body on stdin, the event in the environment.
until_true 20 '[ "$(ls "$TEST_TMP"/cmd/*.env 2>/dev/null | wc -l)" -ge 2 ]' || fail "the command did not run twice"
for e in "$TEST_TMP"/cmd/*.env; do
	k=$(basename "$e" .env)
	grep -q "^PL_NOTIFY_KEY=$k$" "$e" && grep -q '^PL_NOTIFY_RUN=n1$' "$e" &&
	    grep -qE '^PL_NOTIFY_EVENT=(job.failed|run.end)$' "$e" || fail "command env: $(cat "$e")"
	[ "$(cat "$TEST_TMP/cmd/$k.user")" = "$DUSER" ] ||
		fail "the command ran as $(cat "$TEST_TMP/cmd/$k.user"), not the daemon process's $DUSER"
	[ "$(cat "$TEST_TMP/cmd/$k.json")" = "$(db "SELECT body FROM outbox WHERE key = '$k'")" ] ||
		fail "the command's stdin is not the outbox body for $k"
done

# ---- 2. a receiver that hangs: the run does not wait ---------------------
touch "$TEST_TMP/hang"
mkspec n2 true
t0=$(date +%s.%N)
pctl submit "$TEST_TMP/n2.ini" >/dev/null || fail "submit n2"
wait_run n2 succeeded 30
t1=$(date +%s.%N)
# Earlier notifications were all delivered; n2's run.end is the one the
# receiver holds: the run ended while it was held.
[ -z "$(accepted n2)" ] || fail "n2's run.end was accepted before the run was seen to end"
awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 3.5) }' || fail "n2 took $t0..$t1: it waited for the receiver"
until_true 30 '[ "$(accepted n2)" = run.end ]' || fail "n2's run.end not delivered after the hang"
grep -q "timed out\|Timeout" <(db "SELECT group_concat(error) FROM outbox WHERE run = 'n2'") ||
    [ "$(db "SELECT attempts FROM outbox WHERE run = 'n2' AND target LIKE 'url:%'")" -ge 2 ] ||
	fail "n2's delivery was not retried after the timeout"

# ---- 3. receiver down, daemon killed -9 after the commit -----------------
kill "$RPID"; wait "$RPID" 2>/dev/null; RPID=
mkspec n3 true
pctl submit "$TEST_TMP/n3.ini" >/dev/null || fail "submit n3"
wait_run n3 succeeded 30
[ "$(db "SELECT state FROM outbox WHERE run = 'n3' AND target LIKE 'url:%'")" = pending ] ||
	fail "n3's row is not pending while the receiver is down"
pl_kill9
receiver s3cret "$RPORT"
pl_start
until_true 30 '[ "$(accepted n3)" = run.end ]' || fail "n3's run.end not delivered after the restart"
sleep 1
[ "$(accepted n3 | wc -l)" = 1 ] || fail "n3's run.end accepted more than once"

# ---- 4. a wrong secret: the receiver's check fails -----------------------
pl_stop
notify_conf wrong 2
pl_start
mkspec n4 true
pctl submit "$TEST_TMP/n4.ini" >/dev/null || fail "submit n4"
wait_run n4 succeeded 30
until_true 30 '[ "$(db "SELECT state FROM outbox WHERE run = '"'n4'"' AND target LIKE '"'url:%'"'")" = failed ]' ||
	fail "n4's row was not given up: $(db "SELECT state, attempts, error FROM outbox WHERE run = 'n4'")"
[ "$(db "SELECT error FROM outbox WHERE run = 'n4' AND target LIKE 'url:%'")" = "HTTP 401" ] ||
	fail "n4's error: $(db "SELECT error FROM outbox WHERE run = 'n4'")"
grep -q '"sig_ok": false' "$R" || fail "the receiver saw no bad signature"
[ -z "$(accepted n4)" ] || fail "a wrongly signed notification was accepted"
integrity_ok
events_gapless
echo ok
