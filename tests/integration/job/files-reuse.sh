#!/bin/bash
# job/files-reuse.sh: in a split daemon with `user = _pipelined`
# (pipelined(8) SECURITY) a member's file servers are kept idle between
# its jobs and reused, not forked by the parent once a job: a member's
# 20-job chain costs the parent a handful of forks (strace counts them),
# not one a job, and one message a job. The idle ones are the member's alone, a few at most, and
# end some seconds after the last job; one that died while idle is
# never handed out (the next job's artifact is still read); another
# user's job, right after the member's, gets a server of its own (its
# 0700 directory, which nobody cannot enter, read all the same), which a
# reload ends at once.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null; [ -n "${ST:-}" ] && kill "$ST" 2>/dev/null' EXIT
command -v strace >/dev/null || { echo "no strace"; exit 77; }
. "$TOP/tests/lib/member.sh"
pl_user _pipelined plfsother
chmod 0755 "$TEST_TMP"
cd "$TEST_TMP" || exit 1
O=$TEST_TMP/out; mkdir -p "$O" plugins; chmod 0777 "$O"
cp "$TOP/plugins/exec.so" plugins/ && chmod 0755 plugins plugins/*.so || fail "plugins"
export PL_PLUGIN_DIR=$TEST_TMP/plugins
member_daemon "user = _pipelined"
D=$(split_daemon_pid)
[ -n "$D" ] || fail "no daemon process under the parent $PL_PID"
nob=$(id -u nobody)
# The parent's children as nobody but the daemon process: its file servers.
servers() { pgrep -P "$PL_PID" -u "${1:-$nob}" -x pipelined | grep -vx "$D" | wc -l; }

# A 20-job chain of the member's, each job registering an artifact.
{
	echo "[run]"; echo "name = chain"
	for k in $(seq 0 19); do
		echo "[j$k]"; echo "stage = exec"
		echo "command = echo $k > $O/a$k; echo '{\"type\":\"artifact\",\"name\":\"a\",\"path\":\"$O/a$k\"}' >> \"\$PL_EVENTS\""
		[ "$k" = 0 ] || echo "after = j$((k - 1))"
	done
} > specs/chain.ini
chmod 0644 specs/chain.ini
strace -qq -e trace=clone,clone3,fork,vfork,recvmsg -p "$PL_PID" -o "$TEST_TMP/forks" 2>/dev/null &
ST=$!
for _ in $(seq 50); do grep -q TracerPid:.*[1-9] "/proc/$PL_PID/status" && break; sleep 0.1; done
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/chain.ini >/dev/null || fail "the member could not submit"
wait_run chain succeeded 60
kill "$ST"; wait "$ST" 2>/dev/null; ST=""
forks=$(grep -c -E '^(clone|clone3|fork|vfork)\(' "$TEST_TMP/forks" || true)
n=$(pctl artifacts chain 2>/dev/null | grep -c "$O/a" || true)
[ "$n" = 20 ] || { pctl artifacts chain; fail "chain: $n artifacts registered, wanted 20"; }
note "the parent forked $forks times for the member's 20 jobs"
[ "$forks" -le 6 ] || fail "the parent forked $forks times for 20 jobs: the file servers were not reused"
# Its messages: one a job (the work and process directories given to the
# member in one PRIV_FCHOWN), not two, and a few more (file servers).
msgs=$(grep -c '^recvmsg(' "$TEST_TMP/forks" || true)
note "the parent received $msgs messages for the member's 20 jobs"
[ "$msgs" -le 26 ] || fail "the parent received $msgs messages for 20 jobs: more than one a job"

# Idle: nobody's, a few at most; then ended.
idle=$(servers)
[ "$idle" -ge 1 ] && [ "$idle" -le 4 ] || fail "$idle idle file servers of nobody's, wanted 1 to 4"
# One that dies while idle is not handed out: the next job reads its
# artifact through another.
for p in $(pgrep -P "$PL_PID" -u "$nob" -x pipelined); do [ "$p" = "$D" ] || kill -9 "$p"; done
member_exec after "echo x > $O/after; echo '{\"type\":\"artifact\",\"name\":\"a\",\"path\":\"$O/after\"}' >> \"\$PL_EVENTS\""
wait_run after succeeded 30
pctl artifacts after 2>/dev/null | grep -q "$O/after" || fail "after: its artifact, read through a dead server"

# Another user's job: its 0700 directory, which nobody cannot enter.
P=$TEST_TMP/other; mkdir -p "$P"; chown plfsother "$P"; chmod 0700 "$P"
printf '[run]\nname = other\n[x]\nstage = exec\ncommand = %s\n' \
	"echo y > $P/f; echo '{\"type\":\"artifact\",\"name\":\"f\",\"path\":\"$P/f\"}' >> \"\$PL_EVENTS\"" \
	> specs/other.ini
chmod 0644 specs/other.ini
as_user plfsother "$PIPELINECTL" -f "$PL_CONF" submit specs/other.ini >/dev/null || fail "plfsother could not submit"
wait_run other succeeded 30
pctl artifacts other 2>/dev/null | grep -q "$P/f" ||
	fail "other: its artifact not registered: $(grep other/x "$TEST_TMP/pipelined.out")"
[ "$(servers plfsother)" -ge 1 ] || fail "no idle file server of plfsother's"
kill -HUP "$PL_PID"
for _ in $(seq 30); do [ "$(servers plfsother)$(servers)" = 00 ] && break; sleep 0.1; done
[ "$(servers plfsother)$(servers)" = 00 ] || fail "idle file servers outlived a reload"

# Past their time (10 s unused), the idle ones end. (A job that reports
# an artifact: a job's own events file needs no server, the daemon
# holding the one it made.)
member_exec late "echo z > $O/late; echo '{\"type\":\"artifact\",\"name\":\"a\",\"path\":\"$O/late\"}' >> \"\$PL_EVENTS\""
wait_run late succeeded 30
[ "$(servers)" -ge 1 ] || fail "no idle file server of nobody's after the reload"
for _ in $(seq 150); do [ "$(servers)" = 0 ] && break; sleep 0.1; done
[ "$(servers)" = 0 ] || fail "$(servers) idle file servers of nobody's left past their time"
note "idle file servers reused, then ended"
pl_stop
echo ok
