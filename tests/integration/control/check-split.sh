#!/bin/bash
# control/check-split.sh: in a split daemon (started as root with a group:
# the privileged parent and the daemon process, pipelined(8) SECURITY) a
# member's spec is checked in two parts. The daemon process checks all but
# the files with its own rights; the files are opened by pipeline-stage
# --check, which the parent starts as the member. A file only the member
# can read (0600, the member's) checks; one only root can read is refused
# with the path named, as the check always did; both errors at once with
# one of the daemon's own; the same with the configuration file
# unreadable to the member. Evidence that the files are opened in a
# process of the member's: the daemon process's file-system uid never
# leaves its own, _pipelined's (every thread's /proc status, sampled
# while members check a spec of 300 jobs whose files take a while to
# read), where a daemon that takes the member's fsuid to check
# (peer_fs_enter) shows it.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null; [ -n "${SAMPLER:-}" ] && kill "$SAMPLER" 2>/dev/null' EXIT
. "$TOP/tests/lib/member.sh"
member_daemon
D=$(pgrep -P "$PL_PID" -x pipelined)
[ -n "$D" ] || fail "no daemon process under the parent $PL_PID"

# The member's own file, 0600, in a directory anyone may pass; root's.
mkdir -p mine && chmod 0755 mine
cp "$TOP/etc/examples/tiny/corpus-v1.jsonl" mine/corpus.jsonl
chown nobody mine/corpus.jsonl && chmod 0600 mine/corpus.jsonl
cp "$TOP/etc/examples/tiny/corpus-v1.jsonl" root.jsonl && chmod 0600 root.jsonl
spec() {	# NAME CORPUS [EXTRA LINE]
	printf '[run]\nname = %s\n[scan]\nstage = corpus_check\ncorpus = %s\n%s\n' "$1" "$2" "${3:-}" \
	    > "specs/$1.ini"
	chmod 0644 "specs/$1.ini"
}
# dcheck FILE: the daemon's check of FILE (pipelinectl check checks by
# itself), as whoever runs it: the reply's line; status 1 for an error.
dcheck() {
	/usr/bin/python3 - "$TEST_TMP/run/control.sock" "$1" <<'PY'
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
f = s.makefile("rwb")
path = os.path.abspath(sys.argv[2])
for r in ({"verb": "hello", "version": 1},
          {"verb": "check", "path": path, "text": open(path).read()}):
    f.write((json.dumps(r) + "\n").encode()); f.flush()
    line = f.readline().decode()
print(line.strip())
sys.exit(0 if json.loads(line).get("status") == "ok" else 1)
PY
}
spec own "$TEST_TMP/mine/corpus.jsonl"
spec theirs "$TEST_TMP/root.jsonl"
spec both "$TEST_TMP/root.jsonl" "near_threshold = 2"
out=$(as_member bash -c "$(declare -f dcheck); dcheck specs/own.ini" 2>&1) ||
	fail "the member's own 0600 file did not check: $out"
out=$(as_member bash -c "$(declare -f dcheck); dcheck specs/theirs.ini" 2>&1) &&
	fail "root's 0600 file checked for the member: $out"
echo "$out" | grep -q "specs/theirs.ini:5: corpus: $TEST_TMP/root.jsonl: Permission denied" ||
	fail "the refusal does not name the path: $out"
note "root's file: $out"
out=$(as_member bash -c "$(declare -f dcheck); dcheck specs/both.ini" 2>&1) && fail "both: checked: $out"
echo "$out" | grep -q "root.jsonl: Permission denied" && echo "$out" | grep -q "near_threshold" ||
	fail "both: not every error at once: $out"
[ "$(echo "$out" | grep -c "near_threshold")" = 1 ] || fail "both: an error told twice: $out"
# Root's own check still reads root's file (the daemon, as before).
dcheck specs/theirs.ini >/dev/null || fail "root's check of its own file"
# Through pipelinectl: a member submits, and the run runs; root's file
# refused.
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/own.ini >/dev/null || fail "the member's submit"
wait_run own succeeded 60
out=$(as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/theirs.ini 2>&1) &&
	fail "root's 0600 file submitted for the member: $out"
echo "$out" | grep -q "corpus: $TEST_TMP/root.jsonl: Permission denied" ||
	fail "the submit's refusal does not name the path: $out"

# A configuration file the member cannot read (as installed: 0640,
# root's) changes nothing: the check is handed what it needs of it.
chmod 0600 "$PL_CONF"
out=$(as_member bash -c "$(declare -f dcheck); dcheck specs/own.ini" 2>&1) ||
	fail "the member's own file, the configuration unreadable: $out"

# The daemon process's fsuid while members check a heavy spec: 300
# tokenize jobs, each reading a base's 2 MB config.json and the corpus.
mkdir -p base && chmod 0755 base
/usr/bin/python3 -c 'import json; print(json.dumps({"architectures": ["Gemma3ForCausalLM"],
    "pad": "x" * (2 << 20)}))' > base/config.json
chown -R nobody base && chmod 0600 base/config.json
{
	echo "[run]"; echo "name = heavy"
	for i in $(seq 300); do
		printf '[t%d]\nstage = tokenize\nbase = %s\ncorpus = %s\n' "$i" "$TEST_TMP/base" \
		    "$TEST_TMP/mine/corpus.jsonl"
	done
} > specs/heavy.ini
chmod 0644 specs/heavy.ini
fsuid_watch "$D" fsuids
for _ in 1 2 3 4 5; do
	out=$(as_member bash -c "$(declare -f dcheck); dcheck specs/heavy.ini" 2>&1)
	echo "$out" | grep -q "\"status\":\"ok\"\|no room\|config.json" ||
		fail "the heavy spec did not check: $out"
done
kill "$SAMPLER"; wait "$SAMPLER" 2>/dev/null; SAMPLER=""
[ -s fsuids ] && fail "the daemon process took fsuid $(sort -u fsuids | tr '\n' ' ')to check a member's spec"
grep -q 'privileged parent: refused' "$TEST_TMP/pipelined.out" &&
	fail "the parent refused the daemon: $(grep 'privileged parent' "$TEST_TMP/pipelined.out")"
pl_stop
echo ok
