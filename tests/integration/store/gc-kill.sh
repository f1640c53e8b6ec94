#!/bin/bash
# store/gc-kill.sh: the daemon killed -9 in the middle of a gc, between
# the committed mark and the unlinks (the test hook PL_TEST_GC_PAUSE holds
# it there), leaves the marked files on disk; the restart unlinks every
# one of them before it serves, and the records are consistent: every
# record marked removed has no file, every file of a record not marked is
# there, sizes and digests kept. A marked file written again after the
# mark (a retry's) is left.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_stop' EXIT
cd "$TEST_TMP"
pl_conf "[retention]" "keep_promoted = 0" "keep_days = 0" "min_size = 1K"
RUNS=$TEST_TMP/state/runs
export PL_TEST_GC_PAUSE=60
pl_start
mkdir -p specs
# gone: two files of 1 MiB and 4 KiB, a directory of 200 files of 2 KiB,
# and a small file below min_size that gc leaves. keep: running.
cat >specs/gone.ini <<'INI'
[run]
name = gone

[make]
stage = exec
command = head -c 1048576 /dev/urandom > big.bin; head -c 4096 /dev/urandom > mid.bin; head -c 10 /dev/zero > small.txt; mkdir many; for i in $(seq 1 200); do head -c 2048 /dev/zero > many/f$i; done; for f in big.bin mid.bin small.txt many; do echo "{\"type\":\"artifact\",\"name\":\"$f\",\"path\":\"$f\"}" >> "$PL_EVENTS"; done
INI
cat >specs/busy.ini <<'INI'
[run]
name = busy

[make]
stage = exec
command = head -c 8192 /dev/zero > out.bin; echo '{"type":"artifact","name":"out","path":"out.bin"}' >> "$PL_EVENTS"; sleep 300
INI
pctl submit specs/gone.ini >/dev/null || fail "submit gone"
wait_run gone succeeded 60
pctl submit specs/busy.ini >/dev/null || fail "submit busy"
wait_run busy running 30
for _ in $(seq 1 100); do
	[ "$(db "SELECT count(*) FROM artifacts a JOIN runs r ON r.id = a.run_id WHERE r.name = 'busy'")" = 1 ] && break
	sleep 0.1
done

pctl gc > gc.out 2>&1 &
GC=$!
for _ in $(seq 1 100); do
	[ "$(db "SELECT count(*) FROM artifacts WHERE removed IS NOT NULL")" = 3 ] && break
	sleep 0.1
done
[ "$(db "SELECT count(*) FROM artifacts WHERE removed IS NOT NULL")" = 3 ] ||
	fail "gc did not mark its 3 records: $(db "SELECT name, removed FROM artifacts")"
W=$RUNS/gone/make/work
[ -f "$W/big.bin" ] && [ -d "$W/many" ] || fail "the files went before the kill: the hook did not hold gc"
pl_kill9
wait "$GC" 2>/dev/null
unset PL_TEST_GC_PAUSE
# A file written again after its mark (a retried job making it anew
# before its record comes) is left by the restart.
sleep 1.1
head -c 4096 /dev/zero > "$W/mid.bin"

pl_start
for f in big.bin many; do
	[ -e "$W/$f" ] && fail "$f stayed after the restart"
done
[ -f "$W/mid.bin" ] || fail "mid.bin, written after its mark, went at the restart"
grep -q "gc_finish: $W/mid.bin: changed since gc marked it removed; left" "$TEST_TMP/pipelined.out" ||
	fail "the restart did not say it left mid.bin"
rm "$W/mid.bin"
[ -f "$W/small.txt" ] || fail "small.txt (below min_size) went"
[ -f "$RUNS/busy/make/work/out.bin" ] || fail "the running run's file went"
grep -q "gc_finish: 2 files a gc marked removed unlinked" "$TEST_TMP/pipelined.out" ||
	fail "the restart did not say it finished the gc: $(grep gc "$TEST_TMP/pipelined.out")"
# Consistent records: marked <=> no file; sizes and digests kept.
db "SELECT path, removed IS NOT NULL, size, sha256 FROM artifacts" | while IFS='|' read -r p gone size sha; do
	if [ "$gone" = 1 ]; then
		[ -e "$p" ] && fail "$p: marked removed, still there"
	else
		[ -e "$p" ] || fail "$p: not marked, gone"
	fi
	[ -n "$size" ] && [ ${#sha} = 64 ] || fail "$p: size $size, sha256 $sha"
done
[ "$(db "SELECT count(*) FROM artifacts WHERE removed IS NOT NULL AND removed_by = 0")" = 3 ] ||
	fail "removed_by: $(db "SELECT name, removed, removed_by FROM artifacts")"
pctl cancel busy >/dev/null
integrity_ok
exit 0
