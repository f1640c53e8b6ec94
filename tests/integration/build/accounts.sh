#!/bin/bash
# build/accounts.sh: tests/lib.sh's pl_group and pl_user make each system
# group and user once when tests running beside each other ask for it at
# the same moment (tests/run.sh -j): eight shells ask for a group and a
# user that do not exist yet, at once, five rounds; every one succeeds and
# the accounts exist. The plain `getent group G || groupadd -r G` the
# tests used fails here about one round in seven (groupadd: group already
# exists, exit 9). The accounts are this test's own (named for its
# TEST_TMP) and are removed at the end.
. "$(dirname "$0")/../../lib.sh"
[ "$(id -u)" = 0 ] || { echo "needs root to add groups and users"; exit 77; }
tag=pl${TEST_TMP##*.}
tag=${tag,,}
cleanup() {
	for r in 1 2 3 4 5; do
		userdel "$tag-u$r" 2>/dev/null
		groupdel "$tag-g$r" 2>/dev/null
	done
	return 0
}
trap 'cleanup; pl_kill9' EXIT
for r in 1 2 3 4 5; do
	for i in 1 2 3 4 5 6 7 8; do
		( pl_group "$tag-g$r" && pl_user "$tag-u$r" ) >"$TEST_TMP/r$r.$i.out" 2>&1 &
	done
	bad=0
	for p in $(jobs -p); do wait "$p" || bad=$((bad + 1)); done
	[ $bad -eq 0 ] || fail "round $r: $bad of 8 shells failed: $(cat "$TEST_TMP"/r$r.*.out)"
	getent group "$tag-g$r" >/dev/null || fail "round $r: no group $tag-g$r"
	id -u "$tag-u$r" >/dev/null 2>&1 || fail "round $r: no user $tag-u$r"
done
note "5 rounds of 8 shells at once: every group and user made once"
