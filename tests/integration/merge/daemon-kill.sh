#!/bin/bash
# kill -9 of pipelined in the middle of a merge (its temporary output
# directory is there, the final one is not): after the restart the job is
# retried, the merged checkpoint is byte-identical to an uninterrupted run
# by hand, no temporary is left, and tensor_fix after it sees the output.
# run.sh: alone (kill -9 in the middle of a merge, a timed moment).
. "$(dirname "$0")/../../lib.sh"
G=$TOP/tests/fixtures/gen_gemma3.py
F=$TEST_TMP/fx
# The medium size (about 130 MB) so that the merge lasts long enough to be
# caught in the middle.
/usr/bin/python3 "$G" "$F" --size medium --layout causal --shards 2 --adapter plain || fail "fixture"
( cd "$TEST_TMP" && "$PIPELINECTL" stage merge base="$F" adapter="$F/adapters/plain" \
	output="$TEST_TMP/ref" ) >"$TEST_TMP/ref.out" 2>&1 || { cat "$TEST_TMP/ref.out"; fail "merge by hand"; }

pl_conf
pl_start
O=$TEST_TMP/out
mkdir -p "$TEST_TMP/specs"
cat > "$TEST_TMP/specs/mk.ini" <<INI
[merge]
base = $F
adapter = $F/adapters/plain
output = $O/merged
retries = 2
retry_backoff = 0.1s
[tensor_fix]
after = merge
drop =
rename =
output = $O/fixed
INI
pctl submit "$TEST_TMP/specs/mk.ini" >/dev/null || fail "submit"
caught=0
for _ in $(seq 1 6000); do
	if compgen -G "$O/.merged.tmp.*" >/dev/null; then caught=1; break; fi
	sleep 0.005
done
[ $caught = 1 ] || fail "the merge never started writing"
pl_kill9
[ -e "$O/merged" ] && fail "the merge finished before the kill: the fixture is too small to test this"
note "daemon killed in the middle of the merge: $(ls -A "$O" | tr '\n' ' ')"
pl_start
note "daemon restarted"
wait_run mk succeeded 120
att=$(db "SELECT attempts FROM jobs WHERE name='merge'")
[ "$att" -ge 2 ] || fail "the merge was not retried (attempts: $att)"
for f in "$TEST_TMP"/ref/*; do
	cmp "$f" "$O/merged/${f##*/}" || fail "${f##*/} differs from the uninterrupted run"
done
[ "$(ls "$TEST_TMP/ref" | wc -l)" = "$(ls "$O/merged" | wc -l)" ] || fail "file lists differ"
[ -z "$(compgen -G "$O/.merged.*")" ] || fail "temporaries left: $(ls -A "$O")"
[ -f "$O/fixed.manifest.json" ] || fail "tensor_fix did not run after the merge"
pctl artifacts mk | grep -q merged || fail "no merged artifact stored"
# tensor_fix registers its output with the digest it computed while copying.
got=$(db "SELECT sha256 || ' ' || size FROM artifacts WHERE name = 'fixed'")
[ "$got" = "$(artifact_digest "$O/fixed")" ] || fail "stored fixed artifact \"$got\" is not its directory's digest"
integrity_ok
events_gapless
note "merge retried after the kill (attempts: $att); output byte-identical"
