#!/bin/bash
# config/reload.sh: SIGHUP applies at once every key it can and names each
# one that needs a restart (pipelined.conf(5), RELOADING), through a real
# daemon, its HTTP listener and a webhook receiver on loopback
# (tests/helpers/hook_receiver.py, as http/notify uses it):
#  - a new http_token: /metrics answers the new one and refuses the old;
#  - a new [notify] section: the next run's end reaches the receiver,
#    signed with the new secret, without a restart;
#  - changed restart keys (log_file, http_max_connections): the log names
#    them, never says every value is in force, and the running values
#    stay (the log is still written where it was);
#  - a new group: the sockets and their directory are given to it (by the
#    privileged parent when the daemon is split);
#  - a token too short for the listener: refused, named, the old one kept;
#  - pipelined -nv names every key that needs a restart.
. "$(dirname "$0")/../../lib.sh"
RPID=
trap '[ -n "$RPID" ] && kill "$RPID" 2>/dev/null; pl_kill9 2>/dev/null' EXIT
R=$TEST_TMP/hooks.log
: >"$R"
/usr/bin/python3 "$TOP/tests/helpers/hook_receiver.py" --port-file "$TEST_TMP/rport" \
    --log "$R" --secret hook-s3cret --fail-file "$TEST_TMP/fail" --hang-file "$TEST_TMP/hang" \
    --hang 4 --port 0 &
RPID=$!
for _ in $(seq 100); do [ -s "$TEST_TMP/rport" ] && break; sleep 0.05; done
[ -s "$TEST_TMP/rport" ] || fail "the receiver did not start"
RPORT=$(cat "$TEST_TMP/rport")

HPORT=$(free_port)
OLD=old-token-0123456789abcdef
NEW=new-token-fedcba9876543210
# A daemon root alone (PL_SPLIT=0: one process, no group yet), whose
# daemon process gives the sockets to a new group at a reload itself
# (sock_regroup()); a split daemon's parent does it for its daemon
# process, no member of the group, checked at the end.
PL_SPLIT=0 pl_conf "http_listen = 127.0.0.1:$HPORT" "http_token = $OLD"
M=http://127.0.0.1:$HPORT/metrics
code() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $1" "$M"; }
reloads() { grep -c "reload: configuration" "$TEST_TMP/pipelined.out"; }
# hup: SIGHUP, then wait for the reload's line.
hup() {
	local n
	n=$(reloads)
	kill -HUP "$PL_PID"
	for _ in $(seq 50); do [ "$(reloads)" -gt "$n" ] && return 0; sleep 0.1; done
	fail "no reload line after SIGHUP: $(tail -5 "$TEST_TMP/pipelined.out")"
}

# -nv names the keys a reload cannot apply.
"$PIPELINED" -nv -f "$PL_CONF" >"$TEST_TMP/nv.out" || fail "-nv: $(cat "$TEST_TMP/nv.out")"
for k in state_dir control_socket feed_socket log_file http_listen http_max_connections \
    http_max_per_ip http_timeout web_dir; do
	grep -q "^# .*need a restart" "$TEST_TMP/nv.out" && sed -n '3p' "$TEST_TMP/nv.out" | grep -qw "$k" ||
	    fail "-nv does not name $k as needing a restart: $(head -3 "$TEST_TMP/nv.out")"
done

pl_start
[ "$(code "$OLD")" = 200 ] || fail "/metrics refused the token it started with"
[ "$(code "$NEW")" = 401 ] || fail "/metrics let in a token not configured yet"

# The same configuration again: every value in force.
hup
grep -q "reload: configuration .* loaded: every value is in force" "$TEST_TMP/pipelined.out" ||
    fail "an unchanged reload was not said to be in force: $(grep reload: "$TEST_TMP/pipelined.out")"

# ---- a new token, [notify], a group, and two restart keys -------------------
pl_group plsubmit
sed -i "s|^http_token = .*|http_token = $NEW|; s|^log_file = .*|log_file = $TEST_TMP/other.log|" "$PL_CONF"
sed -i "/^\[resources\]/i http_max_connections = 77\ngroup = plsubmit" "$PL_CONF"
cat >>"$PL_CONF" <<EOF
[notify]
url = http://127.0.0.1:$RPORT/hook
secret = hook-s3cret
events = run.end
timeout = 2s
retries = 3
EOF
"$PIPELINED" -n -f "$PL_CONF" >/dev/null || fail "the new configuration does not check"
hup
line=$(grep "reload: configuration" "$TEST_TMP/pipelined.out" | tail -1)
echo "$line"
echo "$line" | grep -q "in force" && fail "the reload said every value is in force: $line"
echo "$line" | grep -qw log_file || fail "the reload line does not name log_file: $line"
echo "$line" | grep -qw http_max_connections || fail "the reload line does not name http_max_connections: $line"
echo "$line" | grep -qw http_token && fail "the reload line names http_token, which it applied: $line"
[ "$(code "$NEW")" = 200 ] || fail "/metrics refused the reloaded token"
[ "$(code "$OLD")" = 401 ] || fail "/metrics still lets in the old token"
# log_file needs a restart: the daemon's log is still the one it opened.
[ ! -e "$TEST_TMP/other.log" ] || fail "the reload opened the new log_file, which it says needs a restart"
# The group: sockets and their directory.
for p in "$TEST_TMP/run" "$TEST_TMP/run/control.sock" "$TEST_TMP/run/feed.sock"; do
	[ "$(stat -c %G "$p")" = plsubmit ] || fail "$p is not the new group's: $(stat -c %G "$p")"
done
# [notify]: the next run's end reaches the receiver, signed.
printf '[run]\nname = r1\n[a]\nstage = exec\ncommand = true\n' >"$TEST_TMP/r1.ini"
pctl submit "$TEST_TMP/r1.ini" >/dev/null || fail "submit r1"
wait_run r1 succeeded 30
ok=
for _ in $(seq 100); do
	/usr/bin/python3 - "$R" <<'EOF' && { ok=1; break; }
import json, sys
seen = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if any(r["status"] == 200 and r["sig_ok"] and r["event"] == "run.end"
                  and r["body"]["run"] == "r1" for r in seen) else 1)
EOF
	sleep 0.1
done
[ -n "$ok" ] || fail "the reloaded [notify] target got no run.end for r1: $(cat "$R")"

# ---- a token the listener cannot use: refused, named, the old one kept ------
sed -i "s|^http_token = .*|http_token = short|" "$PL_CONF"
hup
line=$(grep "reload: configuration" "$TEST_TMP/pipelined.out" | tail -1)
echo "$line" | grep -qw http_token || fail "the refused token is not named: $line"
grep -q "needs an http_token of 16 characters or more; the running http_token stays" \
    "$TEST_TMP/pipelined.out" || fail "the refusal does not say why"
[ "$(code "$NEW")" = 200 ] || fail "a refused token replaced the running one"
[ "$(code short)" = 401 ] || fail "a refused token was let in"
pl_stop

# ---- split: the parent gives the sockets to a new group ---------------------
# Split (pl_conf's group = plsubmit), the daemon process is _pipelined, no
# member of the group: the privileged parent gives the sockets'
# directory and the sockets to the new group at the reload, and a member
# of it, of no other group, reaches the control socket.
if [ "$(id -u)" = 0 ]; then
	pl_group plsub2
	pl_conf
	pl_start
	[ "$(stat -c %G "$TEST_TMP/run")" = plsubmit ] || fail "split: the sockets' directory is not the group's"
	sed -i "s|^group = plsubmit|group = plsub2|" "$PL_CONF"
	chmod 0644 "$PL_CONF"
	g2=$(getent group plsub2 | cut -d: -f3)
	hup
	for p in "$TEST_TMP/run" "$TEST_TMP/run/control.sock" "$TEST_TMP/run/feed.sock"; do
		[ "$(stat -c %G "$p")" = plsub2 ] || fail "split: $p is not the new group's: $(stat -c %G "$p")"
	done
	[ "$(stat -c %a "$TEST_TMP/run")" = 750 ] || fail "split: the sockets' directory is open to others"
	setpriv --reuid=nobody --regid=nogroup --groups="$g2" "$PIPELINECTL" -f "$PL_CONF" status \
	    >/dev/null 2>&1 || fail "split: a member of the new group cannot reach the daemon"
	grep -q "privileged parent: reload" "$TEST_TMP/pipelined.out" &&
	    fail "split: $(grep "privileged parent: reload" "$TEST_TMP/pipelined.out")"
	pl_stop
fi
echo ok
