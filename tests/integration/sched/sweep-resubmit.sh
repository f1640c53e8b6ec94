#!/bin/bash
# A sweep resubmitted with one more value runs only the new variant: the
# spec's next revision (NAME@2) reuses by content every job whose key did
# not change, the shared job and the old variants' chains, and runs the
# new variant's. exec jobs with reuse = yes (bake takes its variant's
# train.out, so its key is its variant's), against a real pipelined.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
cd "$TEST_TMP"
spec() {	# spec VALUES...: the sweep over env's V
	local vals=""
	for v in "$@"; do vals="$vals V=$v"; done
	cat >"$TEST_TMP/sw.ini" <<INI
[run]
name = sw

[prep]
stage = exec
reuse = yes
command = sh -c 'echo prep >>$TEST_TMP/ran'

[train]
stage = exec
after = prep
reuse = yes
env = V=0
command = sh -c 'echo train-\$V >>$TEST_TMP/ran; echo \$V >out.txt; echo "{\\"type\\":\\"artifact\\",\\"name\\":\\"out\\",\\"path\\":\\"out.txt\\"}" >>\$PL_EVENTS'
sweep = env:$vals

[bake]
stage = exec
after = train
reuse = yes
input = train.out
command = sh -c 'echo bake >>$TEST_TMP/ran'
INI
}
pl_start
spec 16 64 128
pctl submit "$TEST_TMP/sw.ini" >/dev/null || fail "submit sw"
wait_run sw succeeded 60
[ "$(sort ran | tr '\n' ' ')" = "bake bake bake prep train-128 train-16 train-64 " ] ||
	fail "sw ran: $(sort ran | tr '\n' ' ')"
: >ran
spec 16 64 128 256
rev=$(pctl submit "$TEST_TMP/sw.ini") || fail "resubmit sw"
[ "$rev" = sw@2 ] || fail "the resubmit made $rev"
wait_run sw@2 succeeded 60
[ "$(sort ran | tr '\n' ' ')" = "bake train-256 " ] ||
	{ pctl status sw@2; fail "sw@2 ran more than the new variant: $(sort ran | tr '\n' ' ')"; }
[ "$(pctl --json status sw@2 | /usr/bin/python3 -c '
import json, sys
print(" ".join(sorted(j["state"] for j in json.load(sys.stdin)["jobs"])))')" = \
  "reused reused reused reused reused reused reused succeeded succeeded" ] ||
	{ pctl status sw@2; fail "sw@2: not seven jobs reused and two run"; }
note "one more value: only its variant ran; $(pctl status sw@2 | grep -c reused) jobs reused"
pl_stop
echo ok
