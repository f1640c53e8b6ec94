#!/bin/bash
# store/gc.sh: pipelinectl du and gc against a real daemon. exec jobs make
# artifact files of known sizes; du's figures (per run, per job and
# artifact, list's SIZE, /metrics) equal the files' sizes. Promotion is
# recorded as the gate records it (the values gate.alias_digest and
# gate.verdict with its alias), written into the store with the daemon
# stopped: the gate stage would need a bake and Ollama; a rejected run's
# state is set there too. With [retention]
# keep_promoted = 1 and keep_days = 0, gc --dry-run lists and removes
# nothing; gc RUN of a running run, of a run a running run references (its
# previous; a path in its spec) and of the promoted run is refused, naming
# the run and why; gc removes exactly the files of the runs let go (but
# one a running run's record holds), keeps
# their records with removed and removed_by, and follows no link planted
# in a run's directory (a link as the artifact, a link inside a directory
# artifact, a directory on the way replaced by a link). A member of the
# group sees and collects only its own runs, and never a file of another
# run's directory its own run's record names.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/member.sh"
trap 'pl_stop' EXIT
cd "$TEST_TMP"
chmod 0755 "$TEST_TMP"

# [retention]'s bad values name the file, line and key.
printf '[daemon]\nstate_dir = %s/bad\n[retention]\nkeep_days = -1\nmin_size = lots\nkeep_promoted = 2x\nkeep = 3\n' \
    "$TEST_TMP" > bad.conf
"$PIPELINED" -n -f bad.conf > bad.out 2>&1 && fail "a bad [retention] was accepted"
for l in "bad.conf:4: keep_days: bad value \"-1\"" "bad.conf:5: min_size: bad value \"lots\"" \
    "bad.conf:6: keep_promoted: bad value \"2x\"" "bad.conf:7: keep: unknown key in \[retention\]"; do
	grep -q "$l" bad.out || fail "pipelined -n: no \"$l\": $(cat bad.out)"
done
MPORT=$(free_port)
pl_conf "group = plsubmit" "metrics_listen = 127.0.0.1:$MPORT" \
    "http_token = gc-test-token-0123456789" \
    "[retention]" "keep_promoted = 1" "keep_days = 0" "min_size = 0"
pl_start
chmod 0755 "$TEST_TMP/run"; chmod 0666 "$TEST_TMP/run/control.sock"
RUNS=$TEST_TMP/state/runs
mkdir -p specs; chmod 0755 specs

# spec NAME A_BYTES B_BYTES [extra [run] lines] [-- command tail]: a run
# whose job make writes a.bin and b.bin of those sizes and a directory
# artifact d/ (two files of 100 bytes), each reported as an artifact.
spec() {
	local n=$1 a=$2 b=$3 run_extra=${4:-} tail=${5:-true}
	cat >"specs/$n.ini" <<INI
[run]
name = $n
$run_extra

[make]
stage = exec
command = head -c $a /dev/zero > a.bin; head -c $b /dev/zero > b.bin; mkdir -p d; head -c 100 /dev/zero > d/x; head -c 100 /dev/zero > d/y; for f in a.bin b.bin d; do echo "{\\"type\\":\\"artifact\\",\\"name\\":\\"\$f\\",\\"path\\":\\"\$f\\"}" >> "\$PL_EVENTS"; done; $tail
INI
	chmod 0644 "specs/$n.ini"
}
submit() { pctl submit "specs/$1.ini" >/dev/null || fail "submit $1"; }

spec p1 1000 2000;   submit p1
spec p2 1100 2100;   submit p2
spec p3 1200 2200;   submit p3
spec old 1300 2300 "" "echo x > extra.txt; chmod 0644 extra.txt; chmod 0755 .";  submit old
spec bad 1400 2400 "" "exit 3"; submit bad
spec ref 1500 2500;  submit ref
spec pathref 1600 2600; submit pathref
spec rej 1700 2700;  submit rej
for r in p1 p2 p3 old ref pathref rej; do wait_run $r succeeded 60; done
wait_run bad failed 60

# du: per run, the artifact bytes are a + b + 200 and the directory holds
# at least those (the job's log too); the disk figure is the files'.
du_field() { # du_field RUN FIELD
	pctl --json du | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
for r in d["runs"]:
    if r["run"] == sys.argv[1]: print(int(r[sys.argv[2]]))' "$1" "$2"
}
files_bytes() { find "$1" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}'; }
for r in p1:3200 p2:3400 old:3800 bad:4000; do
	n=${r%%:*} want=${r##*:}
	got=$(du_field "$n" bytes)
	[ "$got" = "$want" ] || fail "du $n: bytes $got, the files hold $want"
	disk=$(du_field "$n" disk)
	[ "$disk" = "$(files_bytes "$RUNS/$n")" ] || fail "du $n: disk $disk, find says $(files_bytes "$RUNS/$n")"
done
pctl --json du p1 | /usr/bin/python3 -c '
import json, os, sys
d = json.load(sys.stdin)
arts = {a["name"]: a for a in d["artifacts"]}
assert arts["a.bin"]["size"] == 1000 == os.stat(arts["a.bin"]["path"]).st_size, arts
assert arts["b.bin"]["size"] == 2000 == os.stat(arts["b.bin"]["path"]).st_size, arts
assert arts["d"]["size"] == 200, arts
assert [j["job"] for j in d["jobs"]] == ["make"], d["jobs"]
assert d["jobs"][0]["disk"] >= 3200, d["jobs"]
assert d["run"]["bytes"] == 3200 and d["run"]["artifacts"] == 3, d["run"]
' || fail "du p1 --json: $(pctl --json du p1)"
pctl du p1 --bytes | grep -Eq '^make +a\.bin +1000 +held ' || fail "du p1: $(pctl du p1 --bytes)"
pctl list | head -1 | grep -Eq '^RUN +STATE +JOBS +SUBMITTED +DURATION +SIZE +PREVIOUS$' ||
	fail "list header: $(pctl list | head -1)"
pctl list | grep -Eq '^p1 +succeeded +1/1 .* 3\.1KiB *$' || fail "list SIZE of p1: $(pctl list)"
total=$(pctl --json du | /usr/bin/python3 -c 'import json,sys; print(int(json.load(sys.stdin)["bytes"]))')
m=$(curl -sf -H "Authorization: Bearer gc-test-token-0123456789" "http://127.0.0.1:$MPORT/metrics") ||
	fail "/metrics"
echo "$m" | grep -qx "pipelined_artifact_bytes $total" || fail "/metrics: no pipelined_artifact_bytes $total: $(echo "$m" | grep artifact)"
echo "$m" | grep -qx 'pipelined_run_artifact_bytes{run="p1"} 3200' || fail "/metrics p1: $(echo "$m" | grep artifact)"

# Promotion as the gate records it: p1, then p2, then p3 to alias router.
pl_stop
ts=1000
for r in p1 p2 p3; do
	ts=$((ts + 1))
	db "INSERT INTO vals(run_id, job_id, key, value, ts) SELECT r.id, j.id, 'gate.verdict',
	    '{\"verdict\":\"promote\",\"pass\":true,\"alias\":\"router\"}', $ts FROM runs r JOIN jobs j
	    ON j.run_id = r.id WHERE r.name = '$r';
	  INSERT INTO vals(run_id, job_id, key, value, ts) SELECT r.id, j.id, 'gate.alias_digest',
	    'sha256:$r', $ts FROM runs r JOIN jobs j ON j.run_id = r.id WHERE r.name = '$r';" ||
		fail "promotion of $r"
done
# rej ends rejected, as a run whose gate said no (the state alone: gc
# reads no more of it).
db "UPDATE runs SET state = 'rejected' WHERE name = 'rej';
    UPDATE jobs SET state = 'rejected' WHERE run_id = (SELECT id FROM runs WHERE name = 'rej')" ||
	fail "rej rejected"
pl_start
chmod 0666 "$TEST_TMP/run/control.sock"

# A running run whose previous is ref and whose spec names a file of
# pathref's directory; its job records old's b.bin as an artifact of its
# own (by a relative path: its spec does not name old's directory), so a
# kept run's record holds that file of a run gc lets go.
cat >specs/live.ini <<INI
[run]
name = live
previous = ref

[wait]
stage = exec
command = echo '{"type":"artifact","name":"held","path":"../../../old/make/work/b.bin"}' >> "\$PL_EVENTS"; sleep 300
env = INPUT=$RUNS/pathref/make/work/a.bin
INI
submit live
wait_run live running 30
for _ in $(seq 1 100); do
	[ "$(db "SELECT path FROM artifacts WHERE name = 'held'")" = "$RUNS/old/make/work/b.bin" ] && break
	sleep 0.1
done
[ "$(db "SELECT path FROM artifacts WHERE name = 'held'")" = "$RUNS/old/make/work/b.bin" ] ||
	fail "live's record of old's b.bin: $(db "SELECT name, path FROM artifacts WHERE name = 'held'")"

# A member's own run: a member sees and collects its own runs only.
spec mine 700 800
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/mine.ini >/dev/null || fail "member submit"
wait_run mine succeeded 60
# sneak: a member's job reports a file of root's run old (one old did not
# register, but the member can read) as its own artifact.
cat >specs/sneak.ini <<INI
[run]
name = sneak

[make]
stage = exec
command = echo '{"type":"artifact","name":"theirs","path":"$RUNS/old/make/work/extra.txt"}' >> "\$PL_EVENTS"
INI
chmod 0644 specs/sneak.ini
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/sneak.ini >/dev/null || fail "member submit sneak"
wait_run sneak succeeded 60
[ "$(db "SELECT count(*) FROM artifacts a JOIN runs r ON r.id = a.run_id WHERE r.name = 'sneak'")" = 1 ] ||
	fail "sneak's artifact was not recorded: $(pctl logs sneak make)"

# The links: old's a.bin replaced by a link to a file outside; a link to
# a directory outside inside bad's directory artifact; p1's work directory
# moved outside and replaced by a link to it.
mkdir -p outside/dir outside/moved
head -c 4242 /dev/zero > outside/target.bin
head -c 77 /dev/zero > outside/dir/keep.txt
rm "$RUNS/old/make/work/a.bin"
ln -s "$TEST_TMP/outside/target.bin" "$RUNS/old/make/work/a.bin"
ln -s "$TEST_TMP/outside/dir" "$RUNS/bad/make/work/d/link"
mv "$RUNS/p1/make/work" outside/moved/work
ln -s "$TEST_TMP/outside/moved/work" "$RUNS/p1/make/work"

snapshot() { (cd "$TEST_TMP" && find state/runs outside \( -type f -o -type l \) | sort); }
snapshot > before.txt

# --dry-run: lists, removes nothing, marks nothing.
pctl gc --dry-run > dry.txt || fail "gc --dry-run: $(cat dry.txt)"
for r in p1 old bad rej mine; do
	grep -q "^would remove $r make a.bin " dry.txt || fail "dry run: $r's a.bin not listed: $(cat dry.txt)"
done
grep -q "^would remove old make b.bin" dry.txt && fail "dry run lists old's b.bin, which live holds"
grep -q "^keep old make b.bin: held by run live's record (wait held)" dry.txt ||
	fail "dry run: old's b.bin: $(cat dry.txt)"
for r in p2 p3 ref pathref live; do
	grep -q "^would remove $r " dry.txt && fail "dry run lists kept run $r: $(cat dry.txt)"
done
grep -q "^keep p3: it is the promoted version (alias router)" dry.txt || fail "dry: p3: $(cat dry.txt)"
grep -q "^keep p2: promoted (alias router) 1 version before the current one" dry.txt || fail "dry: p2: $(cat dry.txt)"
grep -q "^keep live: it is running" dry.txt || fail "dry: live: $(cat dry.txt)"
grep -q "^keep ref: the previous run of run live" dry.txt || fail "dry: ref: $(cat dry.txt)"
grep -q "^keep pathref: its files are named by run live's spec" dry.txt || fail "dry: pathref: $(cat dry.txt)"
snapshot > after-dry.txt
cmp -s before.txt after-dry.txt || fail "gc --dry-run changed files: $(diff before.txt after-dry.txt)"
[ "$(db "SELECT count(*) FROM artifacts WHERE removed IS NOT NULL")" = 0 ] || fail "dry run marked records"

# Refusals name the run and why; nothing is removed.
refuse() { # refuse RUN WORDS
	local out
	out=$(pctl gc "$1" 2>&1) && fail "gc $1 was not refused: $out"
	echo "$out" | grep -q "gc $1 refused: $2" || fail "gc $1: $out"
}
refuse live "it is running"
refuse ref "the previous run of run live"
refuse pathref "its files are named by run live's spec"
refuse p3 "it is the promoted version"
snapshot > after-refuse.txt
cmp -s before.txt after-refuse.txt || fail "a refused gc changed files"

# gc RUN of a run let go: its files alone.
pctl gc bad > gcbad.txt || fail "gc bad: $(cat gcbad.txt)"
grep -q "^removed 3 artifact files" gcbad.txt || fail "gc bad: $(cat gcbad.txt)"
snapshot > after-bad.txt
grep -v -E '^state/runs/bad/make/work/(a\.bin|b\.bin|d/.*)$' before.txt | diff - after-bad.txt > bad.diff ||
	fail "gc bad removed other than bad's artifact files: $(cat bad.diff)"

# A member: its gc sees only its run; another's is no run of its.
out=$(as_member "$PIPELINECTL" -f "$PL_CONF" gc old 2>&1) && fail "member gc old: $out"
echo "$out" | grep -q "no run old" || fail "member gc old: $out"
as_member "$PIPELINECTL" -f "$PL_CONF" gc --dry-run > member.txt || fail "member gc --dry-run"
grep -q "^would remove mine make a.bin" member.txt || fail "member dry run: $(cat member.txt)"
grep -Eq "^would remove (p1|old|bad|rej) " member.txt && fail "member dry run lists root's runs: $(cat member.txt)"
grep -q "^keep sneak make theirs: in the directory of run old, which has no record of it" member.txt ||
	fail "member dry run: sneak's record of old's file: $(cat member.txt)"
out=$(as_member "$PIPELINECTL" -f "$PL_CONF" du 2>&1)
echo "$out" | grep -Eq '^(p1|old) ' && fail "member du shows root's runs: $out"
echo "$out" | grep -q '^mine ' || fail "member du: $out"
out=$(as_member "$PIPELINECTL" -f "$PL_CONF" du old 2>&1) && fail "member du old: $out"
echo "$out" | grep -q "no run old" || fail "member du old: $out"

# gc: the expected files go, nothing else; the moved work directory is
# not followed (an error names it), the links are not followed.
pctl gc > gc.txt 2> gc.err && fail "gc succeeded though p1's work directory is a link: $(cat gc.txt)"
grep -q "p1/make/work/a.bin: .*not followed" gc.err || fail "gc's error: $(cat gc.err)"
snapshot > after.txt
expected() {
	grep -v -E '^state/runs/(old|bad|rej|mine)/make/work/(a\.bin|b\.bin|d/.*)$' before.txt
	echo state/runs/old/make/work/b.bin
}
expected | sort > want.txt
diff want.txt after.txt > gc.diff || fail "gc removed other than expected: $(cat gc.diff)"
[ -f "$RUNS/old/make/work/extra.txt" ] || fail "old's extra.txt, which a member's record named, went"
[ -f outside/target.bin ] && [ "$(stat -c %s outside/target.bin)" = 4242 ] || fail "the link's target went"
[ -f outside/dir/keep.txt ] || fail "a file through the directory link went"
[ -f outside/moved/work/a.bin ] || fail "a file through the moved work directory went"
[ -d "$RUNS/bad/make/work/d" ] && fail "bad's directory artifact stayed"

# Records: kept, with removed and removed_by (root), for every run let go.
[ "$(db "SELECT count(*) FROM artifacts a JOIN runs r ON r.id = a.run_id WHERE
    r.name IN ('p1', 'old', 'bad', 'rej', 'mine') AND NOT (r.name = 'old' AND a.name = 'b.bin')
    AND (a.removed IS NULL OR a.removed_by != 0)")" = 0 ] ||
	fail "records not marked: $(db "SELECT r.name, a.name, a.removed, a.removed_by FROM artifacts a JOIN runs r ON r.id = a.run_id")"
[ "$(db "SELECT count(*) FROM artifacts a JOIN runs r ON r.id = a.run_id WHERE
    (r.name NOT IN ('p1', 'old', 'bad', 'rej', 'mine') OR (r.name = 'old' AND a.name = 'b.bin'))
    AND a.removed IS NOT NULL")" = 0 ] || fail "a kept run's record, or one of a held file, marked"
[ -f "$RUNS/old/make/work/b.bin" ] || fail "old's b.bin, which live's record holds, went"
[ "$(db "SELECT count(*) FROM artifacts WHERE sha256 IS NULL OR size IS NULL")" = 0 ] || fail "digests or sizes lost"
pctl artifacts old | grep -Eq '^make +a\.bin .*\(removed .* by uid 0\)$' || fail "artifacts old: $(pctl artifacts old)"
pctl status old | grep -q "^artifacts: 2 removed" || fail "status old: $(pctl status old)"
[ "$(du_field old bytes)" = 2300 ] && [ "$(du_field old removed_bytes)" = 1500 ] || fail "du old after gc: $(pctl du)"
pctl list | grep -Eq '^old +succeeded .* 2\.2KiB *$' || fail "list SIZE of old after gc: $(pctl list)"

# With the work directory back, the next gc finishes p1's marked files
# first, and finds no new record to mark.
rm "$RUNS/p1/make/work"
mv outside/moved/work "$RUNS/p1/make/work"
pctl gc > gc2.txt || fail "second gc: $(cat gc2.txt)"
grep -q "^removed 0 artifact files" gc2.txt || fail "second gc: $(cat gc2.txt)"
for f in a.bin b.bin d; do
	[ -e "$RUNS/p1/make/work/$f" ] && fail "p1's marked $f stayed after the second gc"
done
[ -f "$RUNS/p1/make/job.log" ] || fail "p1's log went: gc removes artifact files only"
pctl cancel live >/dev/null
integrity_ok
exit 0
