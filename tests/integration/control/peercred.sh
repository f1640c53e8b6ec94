#!/bin/bash
# SO_PEERCRED: a client under another uid (setpriv) may read but not
# check, submit, cancel or retry; the configured group may. The daemon
# (root) checks a spec with the peer's file-system credentials: a file the
# peer cannot read is not read, its lines are never quoted, and a missing
# path and an unreadable one answer alike for a read-only peer. A peer in
# more supplementary groups than a run's owner carries is refused.
. "$(dirname "$0")/../../lib.sh"
[ "$(id -u)" = 0 ] || { echo "needs root to switch uids"; exit 77; }
pl_group plsubmit
pl_conf "group = plsubmit"
pl_start
chmod 0755 "$TEST_TMP" "$TEST_TMP/run"
chmod 0666 "$TEST_TMP/run/control.sock"
cat > "$TEST_TMP/p.ini" <<INI
[x]
stage = exec
command = true
INI
chmod 0644 "$TEST_TMP/p.ini"
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
out=$(as_nobody "$PIPELINECTL" -f "$PL_CONF" submit "$TEST_TMP/p.ini" 2>&1) && fail "nobody could submit"
echo "$out" | grep -q "submit refused: uid 65534 is not root, the daemon's user, or in group plsubmit" || fail "unclear refusal: $out"
echo "$out" | grep -q EPERM || fail "no EPERM code: $out"
as_nobody "$PIPELINECTL" -f "$PL_CONF" status >/dev/null || fail "nobody could not read status"
# A member of the group may submit.
gid=$(getent group plsubmit | cut -d: -f3)
setpriv --reuid=nobody --regid=nogroup --groups="$gid" "$PIPELINECTL" -f "$PL_CONF" submit "$TEST_TMP/p.ini" >/dev/null || fail "a group member could not submit"
wait_run p succeeded
out=$(as_nobody "$PIPELINECTL" -f "$PL_CONF" retry p 2>&1) && fail "nobody could retry"

# check on the daemon. A capability list only root may read, with a line
# whose word the check would quote ("unknown flag").
S=$TEST_TMP/secret
mkdir -p "$S" && chmod 0700 "$S"
printf 'open_folder\nsearch SECRETWORD\n' >"$S/caps.txt"
echo '{"id": "a", "kind": "route", "user": "x", "expect": {"capability": "search"}}' >"$S/cases.jsonl"
echo 'You route.' >"$S/system.txt"
bake_spec() {	# bake_spec CAPS
	printf '[bake]\nbackend = openai\nurl = http://127.0.0.1:9\nmodel = m\ncases = %s\nsystem = %s\ncapabilities = %s\n' \
	    "$S/cases.jsonl" "$S/system.txt" "$1"
}
# check_raw SPEC_TEXT: the reply line of a check request on the control socket.
check_raw() {
	/usr/bin/python3 - "$TEST_TMP/run/control.sock" "$1" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
f = s.makefile("rwb")
for r in ({"verb": "hello", "version": 1},
          {"verb": "check", "path": "/tmp/x.ini", "text": sys.argv[2]}):
    f.write((json.dumps(r) + "\n").encode()); f.flush()
    line = f.readline().decode()
print(line.strip())
PY
}
as_member() { setpriv --reuid=nobody --regid=nogroup --groups="$gid" "$@"; }
# Root: the check reads the file and quotes the bad word (so the test can fail).
check_raw "$(bake_spec "$S/caps.txt")" | grep -q SECRETWORD || fail "root's check did not read the file"
# A read-only peer: refused before any file is opened, the same for a
# missing path as for an unreadable one.
r1=$(as_nobody bash -c "$(declare -f check_raw); check_raw \"\$1\"" _ "$(bake_spec "$S/caps.txt")")
r2=$(as_nobody bash -c "$(declare -f check_raw); check_raw \"\$1\"" _ "$(bake_spec "$S/missing.txt")")
echo "$r1" | grep -q '"code":"EPERM"' && echo "$r1" | grep -q "pipelinectl check needs no daemon" ||
    fail "a read-only peer's check was not refused: $r1"
echo "$r1" | grep -q SECRETWORD && fail "a read-only peer got the file's content: $r1"
[ "$r1" = "$r2" ] || fail "a missing and an unreadable path answer differently: $r1 / $r2"
# A member of the group: checked with its own rights, so the file it
# cannot read is "Permission denied", never quoted, and a missing one in
# the same unreadable directory reads the same.
r3=$(as_member bash -c "$(declare -f check_raw); check_raw \"\$1\"" _ "$(bake_spec "$S/caps.txt")")
r4=$(as_member bash -c "$(declare -f check_raw); check_raw \"\$1\"" _ "$(bake_spec "$S/missing.txt")")
echo "$r3" | grep -q "capabilities: .*caps.txt: Permission denied" || fail "member's check: $r3"
echo "$r3" | grep -q SECRETWORD && fail "a member got the content of a file it cannot read: $r3"
echo "$r4" | grep -q "capabilities: .*missing.txt: Permission denied" || fail "member's check (missing): $r4"
note "read-only peer: $r1"; note "member: $r3"
# ... and the daemon is root again afterwards: root's check reads the file.
check_raw "$(bake_spec "$S/caps.txt")" | grep -q SECRETWORD || fail "the daemon did not get its credentials back"
# A member in 200 groups submits, its groups read whole; one in 300, more
# than a run's owner carries, is refused with the reason, on the control
# socket and on the feed, not taken with its groups cut.
many() { setpriv --reuid=nobody --regid=nogroup --groups="$gid,$(seq -s, 70001 "$1")" "${@:2}"; }
sed 's/^\[x\]$/[run]\nname = many\n\n[x]/' "$TEST_TMP/p.ini" >"$TEST_TMP/many.ini" && chmod 0644 "$TEST_TMP/many.ini"
many 70199 "$PIPELINECTL" -f "$PL_CONF" submit "$TEST_TMP/many.ini" >/dev/null || fail "a member in 200 groups could not submit"
wait_run many succeeded
out=$(many 70299 "$PIPELINECTL" -f "$PL_CONF" status 2>&1) && fail "a peer in 300 groups was served: $out"
echo "$out" | grep -q "uid 65534 connected with 300 supplementary groups, more than the 256 pipelined takes" ||
	fail "unclear refusal of 300 groups: $out"
out=$(many 70299 timeout 10 "$PIPELINECTL" -f "$PL_CONF" watch many 2>&1) && fail "the feed served a peer in 300 groups: $out"
echo "$out" | grep -q "300 supplementary groups" || fail "unclear refusal on the feed: $out"
note "300 groups: $out"
pl_stop
echo ok
