#!/bin/bash
# http/sessions.sh: one user's logins never end another user's sessions
# or login links (pipelined(8) THE STATUS PAGE). Each user keeps at most
# 16 sessions and 8 unused links; a new one replaces that user's oldest.
# Root (an admin) logs in through one link and keeps a second unused;
# then pl-alice (a member) runs pipelinectl web and logs in 70 times and
# leaves 10 more links unused. Root's session still answers (and reads
# /metrics, as an admin's may), root's unused link still logs in once;
# alice's 16 newest sessions answer, her older ones get 401; her 8 newest
# unused links log in, her two oldest are gone.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/member.sh"
trap 'pl_kill9 2>/dev/null' EXIT
member_users pl-alice
PORT=$(free_port)
pl_conf "group = plsubmit" "http_listen = 127.0.0.1:$PORT" "http_token = sessions-token-0123456789"
pl_start
chmod 0755 "$TEST_TMP" "$TEST_TMP/run"
chmod 0666 "$TEST_TMP/run/control.sock"
U=http://127.0.0.1:$PORT
alice_web() { as_user pl-alice "$PIPELINECTL" -f "$PL_CONF" web 2>/dev/null; }
# login LINK: the session id the link's /login sets, or "none".
login() {
	local id
	id=$(curl -s -D - -o /dev/null "$1" | sed -n 's/^Set-Cookie: pl_session=\([0-9a-f]*\);.*/\1/p')
	echo "${id:-none}"
}
code() { curl -s -o /dev/null -w '%{http_code}' -H "Cookie: pl_session=$1" "$U$2"; }

root_id=$(login "$(pctl web 2>/dev/null)")
[ "$root_id" != none ] || fail "root's link gave no session"
root_unused=$(pctl web 2>/dev/null) || fail "root's second pipelinectl web failed"
[ "$(code "$root_id" /metrics)" = 200 ] || fail "root's session cannot read /metrics"

alice=()
for i in $(seq 1 70); do
	link=$(alice_web) || fail "alice's pipelinectl web $i failed"
	alice+=("$(login "$link")")
	[ "${alice[-1]}" != none ] || fail "alice's login $i gave no session"
done
unused=()
for i in $(seq 1 10); do unused+=("$(alice_web)") || fail "alice's unused link $i"; done

[ "$(code "$root_id" /metrics)" = 200 ] ||
	fail "alice's 70 logins ended root's session (/metrics: $(code "$root_id" /metrics))"
[ "$(code "$root_id" /api/runs)" = 200 ] || fail "root's session no longer answers"
# Alice's sessions: the newest 16 (55 to 70) answer, the older ones not.
for i in 1 30 54; do
	[ "$(code "${alice[$((i - 1))]}" /api/runs)" = 401 ] || fail "alice's session $i of 70 still answers"
done
for i in 55 60 70; do
	[ "$(code "${alice[$((i - 1))]}" /api/runs)" = 200 ] || fail "alice's session $i of 70 does not answer"
done
[ "$(code "${alice[69]}" /metrics)" = 403 ] || fail "a member's session read /metrics"
# Links: root's unused one logs in (once); alice's oldest two are gone,
# her newest 8 log in.
[ "$(login "$root_unused")" != none ] || fail "alice's links ended root's unused link"
[ "$(login "$root_unused")" = none ] || fail "root's link logged in twice"
for i in 1 2; do
	[ "$(login "${unused[$((i - 1))]}")" = none ] || fail "alice's unused link $i of 10 still logs in"
done
for i in 3 10; do
	[ "$(login "${unused[$((i - 1))]}")" != none ] || fail "alice's unused link $i of 10 does not log in"
done
pl_stop
echo ok
