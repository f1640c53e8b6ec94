#!/bin/bash
# No stage works with the daemon's rights on a submitter's behalf: a
# native stage (tensor_fix here) of a run submitted by a non-root member
# of the daemon's group runs in a stage process of its own as that member
# (pipeline-stage under the run's shim), so the attacks that worked while
# every run hook ran inside the root daemon fail with the member's own
# rights (each of them succeeded against the daemon before the stage
# process):
#   - output naming a root-owned directory (a stand-in for /root/.ssh):
#     it was replaced by one holding the member's authorized_keys;
#   - manifest naming a path only root may write: it was written as root;
#   - an input directory holding notes.txt -> a root-only file (a
#     stand-in for /etc/shadow, and /etc/shadow itself): it came back as a
#     copy in the member's output;
#   - a root-only input directory (files 0600): it was copied into the
#     member's output.
# Then: the member's own tensor_fix still works, out of the daemon (its
# output the member's, its artifact registered with the digest the stage
# computed, which is the file's), root's own run still works in the
# daemon, a stage process that dies of a signal fails its job and not the
# daemon, and kill -9 of the daemon while a member's stage process works
# comes back to the same truth: the leftover process killed, the attempt
# counted lost, the job run again to one output. Against a real pipelined
# running as root.
. "$(dirname "$0")/../lib.sh"
trap 'pl_kill9 2>/dev/null; exec 7>&- 2>/dev/null' EXIT
[ "$(id -u)" = 0 ] || { echo "needs root to switch uids"; exit 77; }
getent group plsubmit >/dev/null || groupadd -r plsubmit
gid=$(getent group plsubmit | cut -d: -f3)
nobody=$(id -u nobody)
as_member() { setpriv --reuid=nobody --regid=nogroup --groups="$gid" "$@"; }
chmod 0755 "$TEST_TMP"
cd "$TEST_TMP" || exit 1
G=$TOP/tests/fixtures/gen_gemma3.py
/usr/bin/python3 "$G" "$TEST_TMP/orig" --layout causal >/dev/null || fail "fixture"
chmod -R a+rX "$TEST_TMP/orig"
O=$TEST_TMP/out; mkdir -p "$O" specs; chmod 0777 "$O"; chmod 0755 specs

pl_conf "group = plsubmit"
pl_start
chmod 0755 "$TEST_TMP/run"; chmod 0666 "$TEST_TMP/run/control.sock"

# spec NAME KEY=VALUE...: a one-job tensor_fix run.
spec() {
	local n=$1; shift
	{ echo "[tensor_fix]"; echo "drop ="; echo "rename ="; printf '%s\n' "$@"; } > "specs/$n.ini"
	chmod 0644 "specs/$n.ini"
}
# member_run NAME STATE: the member submits specs/NAME.ini; the run ends STATE.
member_run() {
	as_member "$PIPELINECTL" -f "$PL_CONF" submit "specs/$1.ini" >/dev/null || fail "$1: the member could not submit"
	wait_run "$1" "$2" 60
}
jobmsg() { db "SELECT message FROM jobs WHERE run_id = (SELECT id FROM runs WHERE name = '$1')"; }
# in_stage_process NAME: the run's job ran in a stage process (its row).
in_stage_process() {
	[ "$(db "SELECT count(*) FROM procs p JOIN attempts a ON a.id = p.attempt_id JOIN jobs j ON j.id = a.job_id
		JOIN runs r ON r.id = j.run_id WHERE r.name = '$1' AND p.name = 'pl-stage'")" -ge 1 ] ||
		fail "$1: no stage process was started"
}

# 1. output = a root-owned directory (root's .ssh, stand-in).
R=$TEST_TMP/rootdir; mkdir -p "$R/.ssh"; chmod 0755 "$R"; chmod 0700 "$R/.ssh"
echo "root's key" > "$R/.ssh/authorized_keys"; chmod 0600 "$R/.ssh/authorized_keys"
cp -r orig evil; echo "ssh-ed25519 AAAA attacker" > evil/authorized_keys; chmod -R a+rX evil
spec ssh "input = $TEST_TMP/evil" "output = $R/.ssh" "manifest = $O/ssh.manifest.json"
member_run ssh failed
in_stage_process ssh
[ "$(cat "$R/.ssh/authorized_keys")" = "root's key" ] && [ "$(stat -c %u "$R/.ssh")" = 0 ] ||
	fail "output: the root-owned directory was replaced: $(ls -la "$R/.ssh")"
[ -z "$(ls -A "$R" | grep -v '^\.ssh$')" ] || fail "output: files left beside it: $(ls -A "$R")"
note "output: a root-owned directory is not replaced ($(jobmsg ssh))"

# 2. manifest = a path only root may write.
spec man "input = $TEST_TMP/orig" "output = $O/man" "manifest = $R/written-as-root.json"
member_run man failed
[ ! -e "$R/written-as-root.json" ] || fail "manifest: written as root where the spec said"
note "manifest: not written to a root-only place ($(jobmsg man))"

# 3. an input directory with notes.txt -> a root-only file: a stand-in
# secret, then /etc/shadow itself.
echo "root secret $RANDOM$RANDOM" > "$TEST_TMP/secret"; chmod 0600 "$TEST_TMP/secret"
nl=0
for target in "$TEST_TMP/secret" /etc/shadow; do
	n=link$((++nl))
	cp -r orig "$n"; ln -s "$target" "$n/notes.txt"; chmod -R a+rX "$n"
	spec "$n" "input = $TEST_TMP/$n" "output = $O/$n"
	member_run "$n" failed
	if [ -e "$O/$n" ] && grep -rqF "$(head -1 "$target")" "$O/$n" 2>/dev/null; then
		fail "link: $target was copied into the member's output"
	fi
	[ ! -e "$O/$n/notes.txt" ] || fail "link: a notes.txt came out ($(ls -la "$O/$n"))"
	note "input link notes.txt -> $target: not copied ($(jobmsg "$n"))"
done

# 4. a root-only input directory (files 0600).
cp -r orig rootonly; chmod 0755 rootonly; chmod 0600 rootonly/*
spec ro "input = $TEST_TMP/rootonly" "output = $O/ro"
member_run ro failed
[ ! -e "$O/ro/model.safetensors" ] || fail "a root-only input was copied into the member's output"
note "root-only input: not copied out ($(jobmsg ro))"

# 5. the member's own tensor_fix works, out of the daemon, as the member.
spec mine "input = $TEST_TMP/orig" "output = $O/mine"
member_run mine succeeded
in_stage_process mine
[ "$(stat -c %u "$O/mine/model.safetensors")" = "$nobody" ] || fail "mine: the output is not the member's"
[ -f "$O/mine.manifest.json" ] || fail "mine: no manifest"
want=$(artifact_digest "$O/mine" | cut -d" " -f1)
got=$(db "SELECT sha256 FROM artifacts a JOIN runs r ON r.id = a.run_id WHERE r.name = 'mine' AND a.path = '$O/mine'")
[ -n "$got" ] && [ "$got" = "$want" ] || fail "mine: artifact digest $got, the directory's is $want"
[ "$(db "SELECT progress_unit FROM jobs j JOIN runs r ON r.id = j.run_id WHERE r.name = 'mine'")" != "" ] ||
	fail "mine: no progress reached the store"
grep -q "pl-stage" "$TEST_TMP/state/runs/mine/tensor_fix/job.log" || fail "mine: the job log says nothing of the stage process"
note "the member's own tensor_fix: out of the daemon, output the member's, digest $got"

# 6. root's own run: in the daemon, as before.
spec rootrun "input = $TEST_TMP/orig" "output = $O/rootrun"
pctl submit specs/rootrun.ini >/dev/null || fail "root could not submit"
wait_run rootrun succeeded 60
[ "$(stat -c %u "$O/rootrun/model.safetensors")" = 0 ] || fail "rootrun: the output is not root's"
[ "$(db "SELECT count(*) FROM procs p JOIN attempts a ON a.id = p.attempt_id JOIN jobs j ON j.id = a.job_id
	JOIN runs r ON r.id = j.run_id WHERE r.name = 'rootrun'")" = 0 ] || fail "rootrun: ran in a process"
note "root's own run: in the daemon"

# 7. a stage process killed by a signal fails its job, not the daemon.
# Its config.json is a FIFO, so the stage blocks reading it.
cp -r orig fifo1; rm fifo1/config.json; mkfifo fifo1/config.json; chmod -R a+rwX fifo1
spec sig "input = $TEST_TMP/fifo1" "output = $O/sig"
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/sig.ini >/dev/null || fail "sig: submit"
# stage_pid NAME: the pid of the run's stage process, once it runs.
stage_pid() {
	local i
	for i in $(seq 300); do
		p=$(pgrep -u nobody -f "pipeline-stage .*/runs/$1/" | head -1)
		[ -n "$p" ] && { echo "$p"; return; }
		sleep 0.1
	done
	fail "$1: no stage process ran"
}
kill -SEGV "$(stage_pid sig)"
wait_run sig failed 30
case "$(jobmsg sig)" in *"killed by signal 11"*) ;; *) fail "sig: the message is $(jobmsg sig)";; esac
kill -0 "$PL_PID" || fail "the daemon died with its stage process"
pctl status >/dev/null || fail "the daemon does not answer"
note "a stage process killed by SIGSEGV: $(jobmsg sig)"

# 8. kill -9 of the daemon during a member's stage process.
cp -r orig fifo2; rm fifo2/config.json; mkfifo fifo2/config.json; chmod -R a+rwX fifo2
spec k9 "input = $TEST_TMP/fifo2" "output = $O/k9"
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/k9.ini >/dev/null || fail "k9: submit"
first=$(stage_pid k9)
pl_kill9
kill -0 "$first" || fail "k9: the stage process died with the daemon"
pl_start
for i in $(seq 100); do kill -0 "$first" 2>/dev/null || break; sleep 0.1; done
kill -0 "$first" 2>/dev/null && fail "k9: the first stage process is still running after the restart"
second=$(stage_pid k9)
[ "$second" != "$first" ] || fail "k9: the same process"
cat orig/config.json > fifo2/config.json
wait_run k9 succeeded 60
[ "$(db "SELECT attempts || ' ' || lost FROM jobs j JOIN runs r ON r.id = j.run_id WHERE r.name = 'k9'")" = "2 1" ] ||
	fail "k9: attempts and lost: $(db "SELECT attempts || ' ' || lost FROM jobs j JOIN runs r ON r.id = j.run_id WHERE r.name = 'k9'")"
[ "$(stat -c %u "$O/k9/model.safetensors")" = "$nobody" ] || fail "k9: the output is not the member's"
[ "$(db "SELECT count(*) FROM artifacts a JOIN runs r ON r.id = a.run_id WHERE r.name = 'k9' AND a.name = 'fixed'")" = 1 ] ||
	fail "k9: not one artifact"
integrity_ok
events_gapless
note "kill -9 during a stage process: the leftover killed, the attempt lost, one output"
echo ok
