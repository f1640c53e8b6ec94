#!/bin/bash
# pipeline-shim on its own, both forms, without the daemon: how a program
# is found and started (vfork and execve, PATH looked up as posix_spawnp
# does; a run's shim remembers each name's path and checks it before use),
# what the child gets (its own process group, stdin from /dev/null, the
# log, no ignored or blocked signal), and what is recorded when it cannot
# start (127 not found, 126 otherwise, a line in the log naming why).
. "$(dirname "$0")/../../lib.sh"
SHIM="$TOP/daemon/pipeline-shim"
T=$TEST_TMP
mkdir -p "$T/noexec" "$T/work/bin" "$T/shadow"

# shim_run NAME [PATH] [-c CWD] -- ARGV...: the single form; prints the exit record.
shim_run() {
	local name=$1; shift
	local path=$PATH
	if [ "$1" != -- ] && [ "$1" != -c ]; then path=$1; shift; fi
	mkdir -p "$T/p/$name"
	PATH=$path "$SHIM" -d "$T/p/$name" -l "$T/p/$name.log" "$@" || true
	cat "$T/p/$name/exit.json"
}
status_of() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["status"])' "$1"; }

# Found through PATH; its exit status recorded.
[ "$(status_of "$(shim_run ok -- true)")" = 0 ] || fail "true: not 0"
[ "$(status_of "$(shim_run three -- sh -c 'exit 3')")" = 3 ] || fail "exit 3 not recorded"
[ -f "$T/p/ok/shim.json" ] || fail "no shim.json"

# Not found: 127, and the log says why.
[ "$(status_of "$(shim_run missing -- no-such-program-here)")" = 127 ] || fail "missing: not 127"
grep -q "cannot run no-such-program-here: No such file or directory" "$T/p/missing.log" ||
	fail "missing: log says $(cat "$T/p/missing.log")"

# A working directory that does not exist: 126, named.
[ "$(status_of "$(shim_run nocwd -c "$T/nowhere" -- true)")" = 126 ] || fail "no cwd: not 126"
grep -q "chdir $T/nowhere: No such file or directory" "$T/p/nocwd.log" || fail "no cwd: log"

# A file of that name that is not executable, earlier in PATH, is passed
# over (as execvp does); alone, it is refused with EACCES (126).
printf '#!/bin/sh\nexit 9\n' > "$T/noexec/true"
[ "$(status_of "$(shim_run shadowed "$T/noexec:/usr/bin:/bin" -- true)")" = 0 ] ||
	fail "a non-executable file earlier in PATH was not passed over"
[ "$(status_of "$(shim_run eacces "$T/noexec" -- true)")" = 126 ] || fail "EACCES: not 126"
grep -q "Permission denied" "$T/p/eacces.log" || fail "EACCES: log"

# A relative PATH entry is relative to the child's directory.
printf '#!/bin/sh\nexit 5\n' > "$T/work/bin/rel"
chmod +x "$T/work/bin/rel"
[ "$(status_of "$(shim_run relative "bin:/usr/bin:/bin" -c "$T/work" -- rel)")" = 5 ] ||
	fail "relative PATH entry not resolved in the child's directory"

# A file without a #! line: Exec format error, 126 (no shell fallback).
printf 'exit 4\n' > "$T/work/noshebang"
chmod +x "$T/work/noshebang"
[ "$(status_of "$(shim_run enoexec -- "$T/work/noshebang")")" = 126 ] || fail "ENOEXEC: not 126"

# What the child gets: its own process group, /dev/null in, the log out,
# nothing ignored or blocked, even what the shim inherited ignored (here
# USR1 and HUP; under make, glibc's posix_spawn leaves signals 32 and 33
# ignored in every recipe).
trap '' USR1 HUP
shim_run env -- sh -c 'cat; echo "pgid $(ps -o pgid= -p $$) pid $$"; grep -E "^Sig(Ign|Blk)" /proc/self/status; echo err >&2' >/dev/null
trap - USR1 HUP
L="$T/p/env.log"
grep -q "^SigIgn:[[:space:]]*0000000000000000$" "$L" || fail "the child inherits ignored signals: $(cat "$L")"
grep -q "^SigBlk:[[:space:]]*0000000000000000$" "$L" || fail "the child inherits blocked signals: $(cat "$L")"
read -r _ pg _ pid < <(grep '^pgid' "$L")
[ "$pg" = "$pid" ] || fail "the child is not its own process group leader: $(cat "$L")"
grep -q '^err$' "$L" || fail "stderr not in the log"

# The run's shim (-G): requests over a SOCK_SEQPACKET socket, each with the
# pipe its end (or its refusal) comes on. It remembers where a name was found
# (here: first in $T/shadow), and when that file goes it looks again.
printf '#!/bin/sh\nexit 7\n' > "$T/shadow/plprog"
printf '#!/bin/sh\nexit 8\n' > "$T/work/bin/plprog"
chmod +x "$T/shadow/plprog" "$T/work/bin/plprog"
/usr/bin/python3 - "$SHIM" "$T" <<'PY' || fail "run shim protocol"
import array, json, os, signal, socket, struct, subprocess, sys
shim, T = sys.argv[1], sys.argv[2]
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
signal.signal(signal.SIGUSR2, signal.SIG_IGN)   # inherited by the shim
p = subprocess.Popen([shim, "-G", str(b.fileno())], pass_fds=[b.fileno()])
signal.signal(signal.SIGUSR2, signal.SIG_DFL)
b.close()
env = ["PATH=%s/shadow:%s/work/bin:/usr/bin:/bin" % (T, T)]

def run(name, argv):
    d = "%s/g/%s" % (T, name)
    os.makedirs(d)
    full = ["pipeline-shim", "-d", d, "-l", d + ".log", "--"] + argv
    msg = struct.pack("II", len(full), len(env)) + b"".join(s.encode() + b"\0" for s in full + env)
    r, w = os.pipe()
    a.sendmsg([msg], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
    os.close(w)
    # A request taken gets no reply: the pipe closes once exit.json is in.
    assert os.read(r, 16) == b""
    os.close(r)
    if os.path.exists(d + "/shim.json"):   # not for a program never started
        assert json.load(open(d + "/shim.json"))["shim_pid"] == p.pid
    return json.load(open(d + "/exit.json"))["status"]

assert run("a", ["plprog"]) == 7, "first lookup"
assert run("b", ["plprog"]) == 7, "remembered"
os.unlink(T + "/shadow/plprog")
assert run("c", ["plprog"]) == 8, "looked up again once the file went"
assert run("d", ["no-such-program-here"]) == 127
# The run's shim ignores SIGPIPE and blocks the signals it reads from its
# signalfd: its children get neither.
assert run("e", ["sh", "-c", "grep -E '^Sig(Ign|Blk)' /proc/self/status"]) == 0
sig = dict(l.split(":") for l in open(T + "/g/e.log").read().split("\n") if l.startswith("Sig"))
assert int(sig["SigIgn"], 16) == 0 and int(sig["SigBlk"], 16) == 0, sig
# A request without a pipe gets no reply and changes nothing; a malformed
# one is refused on its pipe (EINVAL).
r, w = os.pipe()
a.sendmsg([b"\x01\x00"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
os.close(w)
pid, err, start = struct.unpack("iiQ", os.read(r, 16))
assert pid == p.pid and err == 22, (pid, err)
assert os.read(r, 1) == b""
a.close()
assert p.wait(timeout=10) == 0
PY
# Through the daemon: a process whose directory another shim holds locked
# is refused by its run's shim. The daemon follows the holder, which
# started it before a restart: it waits for the holder's shim.json, adopts
# it and takes its exit record; nothing runs twice.
pl_conf
pl_start
H="$TEST_TMP/state/runs/follow/x/attempt-1/main"
mkdir -p "$H"
/usr/bin/python3 - "$H" "$T/holding" <<'PY' &
import fcntl, json, os, sys, time
d, ready = sys.argv[1], sys.argv[2]
fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
open(ready, "w").close()
def put(name, obj):
    with open(d + "/." + name + ".tmp", "w") as f:
        json.dump(obj, f)
    os.rename(d + "/." + name + ".tmp", d + "/" + name)
time.sleep(1.0)   # the daemon's request is refused meanwhile
start = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
put("shim.json", {"shim_pid": os.getpid(), "shim_start": start,
                  "child_pid": os.getpid(), "pgid": os.getpgid(0)})
time.sleep(1.0)
put("exit.json", {"exited": 1, "status": 0, "signal": 0, "start": 0, "end": 0})
PY
HP=$!
for _ in $(seq 1 50); do [ -e "$T/holding" ] && break; sleep 0.1; done
printf '[run]\nname = follow\n[x]\nstage = exec\ncommand = touch %s/ran\n' "$T" > "$T/follow.ini"
pctl submit "$T/follow.ini" >/dev/null
wait_run follow succeeded 30
wait "$HP"
[ ! -e "$T/ran" ] || fail "the process ran a second time beside the holder's"
cat "$TEST_TMP"/pipelined.* | grep -q "following that one" || fail "no line about following the holder"

# A holder that never records anything: after a while the process is
# lost with the refusal's reason (here without a retry, the job fails).
mkdir -p "$TEST_TMP/state/runs/held/x/attempt-1/main"
flock -n "$TEST_TMP/state/runs/held/x/attempt-1/main" sleep 30 &
FL=$!
sleep 0.3
printf '[run]\nname = held\n[x]\nstage = exec\ncommand = touch %s/ran\n' "$T" > "$T/held.ini"
pctl submit "$T/held.ini" >/dev/null
wait_run held failed 30
kill "$FL" 2>/dev/null
grep -q "refused to start it: Device or resource busy" "$TEST_TMP/state/runs/held/x/job.log" ||
	fail "the refusal is not in the job log: $(cat "$TEST_TMP/state/runs/held/x/job.log")"
[ ! -e "$T/ran" ] || fail "the refused process ran"
pl_stop
echo ok
