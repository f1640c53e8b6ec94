#!/bin/bash
# Job files under the state directory are opened without following links:
# a job.log, work directory or job directory planted as a symbolic link
# (by an earlier job, say) is not followed by the daemon or the shim, and
# a job directory that cannot be made fails its job with the real cause
# in the job's log and its status message (one the daemon may not write:
# Permission denied). Against a real pipelined, then
# pipeline-shim on its own.
. "$(dirname "$0")/../../lib.sh"
pl_conf
pl_start
R=$TEST_TMP/state/runs/links
mkdir -p "$R/log" "$R/work" "$R/file" "$TEST_TMP/elsewhere" "$R"
echo untouched > "$TEST_TMP/victim"
ln -s "$TEST_TMP/victim" "$R/log/job.log"          # job.log a link
ln -s "$TEST_TMP/elsewhere" "$R/work/work"          # the work directory a link
: > "$R/file/work"                                  # the work directory a file
ln -s "$TEST_TMP/elsewhere" "$R/dir"                # the job directory a link
# Planted as the daemon's (a split daemon's is _pipelined), and the
# links' targets its to write, so that a link followed would show.
state_own "$TEST_TMP/state/runs" "$TEST_TMP/victim" "$TEST_TMP/elsewhere"
# Run as root, the daemon process is _pipelined: a job directory of
# root's it may not write fails its job saying so (it used to say "No
# such file or directory").
denied=
if [ "$(id -u)" = 0 ] && [ "$(stat -c %u "$TEST_TMP/state")" != 0 ]; then
	denied=1
	mkdir -m 0755 "$R/denied"
fi
cat > "$TEST_TMP/links.ini" <<INI
[denied]
stage = exec
command = touch ran-here
[log]
stage = exec
command = echo the job wrote this
[work]
stage = exec
command = touch ran-here
[file]
stage = exec
command = true
[dir]
stage = exec
command = touch ran-here
[after_dir]
stage = exec
command = true
after = dir
INI
pctl submit "$TEST_TMP/links.ini" >/dev/null
wait_run links failed 30
[ "$(cat "$TEST_TMP/victim")" = untouched ] || fail "job.log's link was followed: $(cat "$TEST_TMP/victim")"
[ -z "$(ls -A "$TEST_TMP/elsewhere")" ] || fail "a linked work or job directory was used: $(ls -A "$TEST_TMP/elsewhere")"
for j in log work file dir; do
	[ "$(job_state links $j)" = failed ] || fail "job $j: $(job_state links $j), wanted failed"
done
# A job after one that could not start is skipped in the same pass (the
# run ended above; it used to wait for a pass nothing would start).
[ "$(job_state links after_dir)" = skipped ] || fail "job after_dir: $(job_state links after_dir), wanted skipped"
msg() { pctl --json status links | /usr/bin/python3 -c '
import json, sys
for j in json.load(sys.stdin)["jobs"]:
    if j["name"] == sys.argv[1]: print(j.get("message") or "")' "$1"; }
msg log | grep -q "job.log: Too many levels of symbolic links" || fail "job log: message '$(msg log)'"
msg work | grep -q "work: Too many levels of symbolic links" || fail "work: message '$(msg work)'"
msg file | grep -q "work: Not a directory" || fail "file: message '$(msg file)'"
msg dir | grep -q "links/dir: Too many levels of symbolic links" || fail "dir: message '$(msg dir)'"
[ -z "$denied" ] || [ "$(job_state links denied)" = failed ] || fail "job denied: $(job_state links denied), wanted failed"
[ -z "$denied" ] || msg denied | grep -q "links/denied/work: Permission denied" ||
	fail "denied: message '$(msg denied)'"
# Where the job directory is there, its log says why too.
grep -q "work: Too many levels of symbolic links" "$R/work/job.log" || fail "work: the job log does not say why"
grep -q "work: Not a directory" "$R/file/job.log" || fail "file: the job log does not say why"
# A process directory's parent planted as a link: not followed.
cat > "$TEST_TMP/links2.ini" <<INI
[proc]
stage = exec
command = touch ran-here
INI
mkdir -p "$TEST_TMP/state/runs/links2/proc"
ln -s "$TEST_TMP/elsewhere" "$TEST_TMP/state/runs/links2/proc/attempt-1"
state_own "$TEST_TMP/state/runs/links2"
pctl submit "$TEST_TMP/links2.ini" >/dev/null
wait_run links2 failed 30
[ -z "$(ls -A "$TEST_TMP/elsewhere")" ] || fail "a linked process directory was used: $(ls -A "$TEST_TMP/elsewhere")"
grep -q "attempt-1/main: Too many levels of symbolic links" "$TEST_TMP/state/runs/links2/proc/job.log" ||
	fail "proc: the job log does not say why: $(cat "$TEST_TMP/state/runs/links2/proc/job.log")"
# The run's directory planted as a link (it is opened once for all the
# run's jobs): not followed, each job fails saying so.
cat > "$TEST_TMP/links3.ini" <<INI
[a]
stage = exec
command = touch ran-here
[b]
stage = exec
command = touch ran-here
INI
ln -s "$TEST_TMP/elsewhere" "$TEST_TMP/state/runs/links3"
state_own "$TEST_TMP/state/runs/links3"
pctl submit "$TEST_TMP/links3.ini" >/dev/null
wait_run links3 failed 30
[ -z "$(ls -A "$TEST_TMP/elsewhere")" ] || fail "a linked run directory was used: $(ls -A "$TEST_TMP/elsewhere")"
for j in a b; do
	pctl --json status links3 | /usr/bin/python3 -c '
import json, sys
m = [j.get("message") or "" for j in json.load(sys.stdin)["jobs"] if j["name"] == sys.argv[1]]
sys.exit(0 if m and "links3/" + sys.argv[1] + ": Too many levels of symbolic links" in m[0] else 1)' "$j" ||
		fail "run link, job $j: $(pctl status links3)"
done
pl_stop

# The shim itself: a log that is a link or a second name of a file, a
# process directory that is a link, a record's temporary planted as a
# link: refused or replaced, never followed.
SHIM=$TOP/daemon/pipeline-shim
P=$TEST_TMP/p; mkdir -p "$P/d"
ln -s "$TEST_TMP/victim" "$P/link.log"
"$SHIM" -d "$P/d" -l "$P/link.log" -- echo the job wrote this 2>"$P/err" && fail "the shim took a linked log"
grep -q "link.log: Too many levels of symbolic links" "$P/err" || fail "linked log: $(cat "$P/err")"
ln "$TEST_TMP/victim" "$P/hard.log"
"$SHIM" -d "$P/d" -l "$P/hard.log" -- echo the job wrote this 2>"$P/err" && fail "the shim took a log with two links"
grep -q "hard.log: not a regular file of one link" "$P/err" || fail "hard-linked log: $(cat "$P/err")"
ln -s "$P/d" "$P/dlink"
"$SHIM" -d "$P/dlink" -l "$P/ok.log" -- true 2>"$P/err" && fail "the shim took a linked directory"
ln -s "$TEST_TMP/victim" "$P/d/.exit.json.tmp"
"$SHIM" -d "$P/d" -l "$P/ok.log" -- true || fail "the shim failed with a planted temporary"
[ -f "$P/d/exit.json" ] && [ ! -L "$P/d/exit.json" ] || fail "exit.json not a file of its own"
[ "$(cat "$TEST_TMP/victim")" = untouched ] || fail "the shim wrote through a link: $(cat "$TEST_TMP/victim")"
echo ok
