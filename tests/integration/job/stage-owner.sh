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
# computed, which is the file's), root's own run works in a stage
# process too (the daemon is split: a privileged parent), a stage process
# that dies of a signal fails its job and not the daemon, and kill -9 of
# the daemon while a member's stage process works comes back to the same truth: the leftover process killed, the attempt
# counted lost, the job run again to one output; the host table answers
# in a stage process as in the daemon (tests/plugins/hostprobe.c); and
# pipelined -n wants pipeline-stage beside the shim. Against a real
# pipelined running as root.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null; exec 7>&- 2>/dev/null' EXIT
. "$TOP/tests/lib/member.sh"
# The plugins: tensor_fix, exec, and the test stage that asks the host
# table everything (tests/plugins/hostprobe.c).
member_setup "$TOP/plugins/tensor_fix.so" "$TOP/plugins/exec.so" "$TOP/tests/plugins/hostprobe.so"

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

# 6. root's own run: out of the daemon too (the daemon is split: a
# privileged parent), in a stage process as root, under root's shim.
spec rootrun "input = $TEST_TMP/orig" "output = $R/rootrun"
pctl submit specs/rootrun.ini >/dev/null || fail "root could not submit"
wait_run rootrun succeeded 60
[ "$(stat -c %u "$R/rootrun/model.safetensors")" = 0 ] || fail "rootrun: the output is not root's"
in_stage_process rootrun
grep -q "pl-stage" "$TEST_TMP/state/runs/rootrun/tensor_fix/job.log" ||
	fail "rootrun: the job log says nothing of the stage process"
note "root's own run: in a stage process, as root"

# 6b. exec stays in the daemon (PL_STAGE_SPAWN_ONLY), its program runs as
# the member; the artifacts the program names are resolved and hashed
# with the member's rights: a root-only file is not registered (before,
# the daemon hashed it as root and stored its digest), the member's own
# file is. (A link named as an artifact is refused outright, for any
# run: job/artifact-kinds.)
echo "exec secret $RANDOM$RANDOM" > "$TEST_TMP/xsecret"; chmod 0600 "$TEST_TMP/xsecret"
cat > specs/art.sh <<SH
echo mine > own.txt
for a in "secret $TEST_TMP/xsecret" "own own.txt"; do
	set -- \$a
	printf '{"type":"artifact","name":"%s","path":"%s"}\n' "\$1" "\$2" >> "\$PL_EVENTS"
done
SH
chmod 0644 specs/art.sh
printf '[run]\n[x]\nstage = exec\ncommand = /bin/sh %s\n' "$TEST_TMP/specs/art.sh" > specs/xart.ini
cp specs/xart.ini specs/xartroot.ini; chmod 0644 specs/*.ini
member_run xart succeeded
# xart_count RUN NAME: how many artifacts NAME the run registered.
xart_count() {
	db "SELECT count(*) FROM artifacts a JOIN runs r ON r.id = a.run_id WHERE r.name = '$1' AND a.name = '$2'"
}
[ "$(xart_count xart secret)" = 0 ] || fail "xart: the member's program registered a root-only file, hashed as root"
xlog=$TEST_TMP/state/runs/xart/x/job.log
grep -q "artifact secret: $TEST_TMP/xsecret: Permission denied" "$xlog" ||
	fail "xart: the job log does not say why: $(grep artifact "$xlog")"
[ "$(db "SELECT sha256 FROM artifacts a JOIN runs r ON r.id = a.run_id WHERE r.name = 'xart' AND a.name = 'own'")" = \
	"$(echo mine | sha256sum | cut -d' ' -f1)" ] || fail "xart: the member's own artifact"
pctl submit specs/xartroot.ini >/dev/null || fail "xartroot: submit"
wait_run xartroot succeeded 60
[ "$(xart_count xartroot secret)" = 1 ] || fail "xartroot: root's program's artifact was not registered"
note "exec: a member's program naming a root-only file gets Permission denied, root's run registers it"

# 7. a stage process killed by a signal fails its job, not the daemon.
# Its config.json is a FIFO, so the stage blocks reading it.
cp -r orig fifo1; rm fifo1/config.json; mkfifo fifo1/config.json; chmod -R a+rwX fifo1
spec sig "input = $TEST_TMP/fifo1" "output = $O/sig"
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/sig.ini >/dev/null || fail "sig: submit"
# stage_pid NAME: the pid of the run's stage process, once it runs.
stage_pid() {
	local i
	for i in $(seq 300); do
		p=$(pgrep -u nobody -f "pipeline-stage $TEST_TMP/state/runs/$1/" | head -1)
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

# 7b. cancelling a member's run stops its stage process (the shim's
# SIGTERM to its process group).
cp -r orig fifo3; rm fifo3/config.json; mkfifo fifo3/config.json; chmod -R a+rwX fifo3
spec can "input = $TEST_TMP/fifo3" "output = $O/can"
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/can.ini >/dev/null || fail "can: submit"
cpid=$(stage_pid can)
pctl cancel can >/dev/null || fail "can: cancel"
wait_run can cancelled 30
for i in $(seq 100); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$cpid" 2>/dev/null && fail "can: the stage process outlived its cancelled job"
[ ! -e "$O/can" ] || fail "can: an output of the cancelled job"
note "cancel: the stage process stopped, the run cancelled"

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
note "kill -9 during a stage process: the leftover killed, the attempt lost, one output"

# 9. The host table in a stage process answers as the daemon's: two jobs
# of hostprobe per run (the second's input defaults to the first's
# artifact), looking into another run (peer) of the same owner or not.
probe_spec() {  # NAME PEER
	cat > "specs/$1.ini" <<INI
[run]
description = probe $1
[first]
stage = hostprobe
report = $O/$1.first.json
[second]
stage = hostprobe
after = first
report = $O/$1.second.json
peer = $2
INI
	chmod 0644 "specs/$1.ini"
}
probe_spec rootp none; pctl submit specs/rootp.ini >/dev/null || fail "rootp: submit"
wait_run rootp succeeded 60
probe_spec memp rootp; member_run memp succeeded
probe_spec memq memp; member_run memq succeeded
probe_spec rootq memp; pctl submit specs/rootq.ini >/dev/null || fail "rootq: submit"
wait_run rootq succeeded 60
in_stage_process memp
# check_report RUN UID PEER_SEEN: what each job's host table answered.
check_report() {
	/usr/bin/python3 - "$O" "$1" "$2" "$3" "$TEST_TMP/state/runs" <<'PY' || fail "$1: the host table answered otherwise (above)"
import hashlib, json, sys
out, run, uid, seen, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
bad = []
def want(job, what, got, exp):
    if got != exp:
        bad.append("%s/%s: %s is %r, want %r" % (run, job, what, got, exp))
for job in ("first", "second"):
    r = json.load(open("%s/%s.%s.json" % (out, run, job)))
    art = "%s/%s/%s/work/out.txt" % (runs, run, job)
    want(job, "own_value", r["own_value"], "v-%s-%s" % (run, job))
    want(job, "upstream_value", r["upstream_value"], "v-%s-first" % run)
    want(job, "newest of the history", (r["history"] or [{}])[0].get("value"), "v-%s-%s" % (run, job))
    want(job, "the runs in the history", sorted(set(h["run"] for h in r["history"])),
         sorted({"rootp": ["rootp"], "memp": ["memp"], "memq": ["memq", "memp"],
                 "rootq": ["rootp", "memp", "memq", "rootq"]}[run]))
    want(job, "artifact_found", r["artifact_found"], 1)
    want(job, "artifact_path", r["artifact_path"], art)
    want(job, "artifact_sha256", r["artifact_sha256"], hashlib.sha256(open(art, "rb").read()).hexdigest())
    want(job, "input", r["input"], None if job == "first" else "%s/%s/first/work/out.txt" % (runs, run))
    for k, v in (("spawn_rc", 0), ("exited", 1), ("status", 3), ("pings", 2), ("child_uid", str(uid)),
                 ("kill_grace", "2s"), ("run_name", run), ("run_description", "probe " + run),
                 ("attempt", 1), ("adopted", 0), ("uid", uid), ("cancelled", 0)):
        want(job, k, r[k], v)
    if job == "second":
        peer_run = {"rootp": None, "memp": "rootp", "memq": "memp", "rootq": "memp"}[run]
        want(job, "peer_value", r["peer_value"], "v-%s-second" % peer_run if seen else None)
        want(job, "peer_artifact_found", r["peer_artifact_found"], 1 if seen else 0)
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
	# What the jobs reported reached the store as the daemon's own would.
	local q="FROM jobs j JOIN runs r ON r.id = j.run_id WHERE r.name = '$1'"
	[ "$(db "SELECT count(*) FROM vals v JOIN jobs j ON j.id = v.job_id JOIN runs r ON r.id = j.run_id
		WHERE r.name = '$1' AND v.key = 'probe.k'")" = 2 ] || fail "$1: the values were not stored"
	[ "$(db "SELECT count(*) FROM metrics m JOIN jobs j ON j.id = m.job_id JOIN runs r ON r.id = j.run_id
		WHERE r.name = '$1' AND m.name = 'probe.m' AND m.step = 3 AND m.value = 0.5")" = 2 ] || fail "$1: the metrics"
	[ "$(db "SELECT count(*) FROM events WHERE run = '$1' AND type = 'job.probe_custom' AND data LIKE '%\"x\":1%'")" = 2 ] ||
		fail "$1: the custom events"
	# The programs' "ping" lines reach the stage (pings above), not the
	# feed: a job program publishes only pipeline-job(7)'s own types.
	[ "$(db "SELECT count(*) FROM events WHERE run = '$1' AND type = 'job.ping'")" = 0 ] ||
		fail "$1: the programs' ping lines were published"
	[ "$(db "SELECT count(*) FROM events WHERE run = '$1' AND type = 'job.value'")" = 0 ] ||
		fail "$1: a value became an event"
	[ "$(db "SELECT group_concat(progress_unit) $q")" = "things,things" ] || fail "$1: the progress unit: $(db "SELECT group_concat(progress_unit) $q")"
	# A program's artifacts: its own file registered with its digest;
	# /etc/shadow only for root's run (a member's stage process hashes
	# what its programs name as the member, and cannot read it).
	local sq="SELECT count(*) FROM artifacts a JOIN runs r ON r.id = a.run_id WHERE r.name = '$1' AND a.name = 'secret'"
	if [ "$2" = 0 ]; then
		[ "$(db "$sq")" = 2 ] || fail "$1: root's program's artifact /etc/shadow: $(db "$sq")"
	else
		[ "$(db "$sq")" = 0 ] || fail "$1: the member's program registered /etc/shadow, hashed as root"
		grep -q "artifact secret: /etc/shadow: Permission denied" "$TEST_TMP/state/runs/$1/second/job.log" ||
			fail "$1: the job log does not say why /etc/shadow was not registered"
	fi
	for job in first second; do
		local cu=$TEST_TMP/state/runs/$1/$job/work/child.uid
		[ "$(db "SELECT sha256 FROM artifacts a JOIN jobs j ON j.id = a.job_id JOIN runs r ON r.id = j.run_id
			WHERE r.name = '$1' AND j.name = '$job' AND a.name = 'childart'")" = "$(sha256sum < "$cu" | cut -d' ' -f1)" ] ||
			fail "$1/$job: the program's artifact's digest"
		local art=$TEST_TMP/state/runs/$1/$job/work/out.txt
		[ "$(db "SELECT sha256 FROM artifacts a JOIN jobs j ON j.id = a.job_id JOIN runs r ON r.id = j.run_id
			WHERE r.name = '$1' AND j.name = '$job' AND a.name = 'probed'")" = "$(sha256sum < "$art" | cut -d' ' -f1)" ] ||
			fail "$1/$job: the artifact's digest"
	done
}
check_report rootp 0 0
check_report memp "$nobody" 0
check_report memq "$nobody" 1
check_report rootq 0 1
note "the host table: the same answers in a stage process as in the daemon; another owner's run unseen"
integrity_ok
events_gapless

# 10. pipelined -n checks that pipeline-stage is beside the shim.
pl_stop
mkdir -p lone && cp "$TOP/daemon/pipeline-shim" lone/
pl_conf "group = plsubmit" "shim = $TEST_TMP/lone/pipeline-shim"
"$PIPELINED" -n -f "$PL_CONF" >n.out 2>&1 && fail "-n passed without pipeline-stage"
grep -q "shim: $TEST_TMP/lone/pipeline-stage: No such file or directory" n.out ||
	fail "-n: $(cat n.out)"
note "-n: $(grep pipeline-stage n.out)"
echo ok
