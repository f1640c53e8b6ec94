#!/bin/bash
# SO_PEERCRED: a client under another uid (setpriv) may read but not
# submit, cancel or retry; the configured group may.
. "$(dirname "$0")/../lib.sh"
[ "$(id -u)" = 0 ] || { echo "needs root to switch uids"; exit 77; }
getent group plsubmit >/dev/null || groupadd -r plsubmit
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
pl_stop
echo ok
