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
# pipe its end (or its refusal) comes on and a memfd holding the command
# line and environment, of any size (here one of 1 MB, more than a socket
# message holds). It remembers where a name was found (here: first in
# $T/shadow), and when that file goes it looks again. The records go to
# RDIR (-r), which must be the shim's own when the process runs as another
# user (-u): one anyone may write is refused (EPERM).
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

def send(payload, fds):
    r, w = os.pipe()
    a.sendmsg([b"\1"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w] + fds))])
    os.close(w)
    return r

def request(full, env):
    m = os.memfd_create("request")
    os.write(m, struct.pack("II", len(full), len(env)) + b"".join(s.encode() + b"\0" for s in full + env))
    r = send(None, [m])
    os.close(m)
    return r

def refusal(r):
    pid, err, start = struct.unpack("iiQ", os.read(r, 16))
    assert pid == p.pid, pid
    assert os.read(r, 1) == b""
    os.close(r)
    return err

def run(name, argv, env=env, rdir=None, extra=[]):
    d = "%s/g/%s" % (T, name)
    os.makedirs(d)
    full = ["pipeline-shim", "-d", d] + (["-r", rdir] if rdir else []) + \
        ["-l", d + ".log"] + extra + ["--"] + argv
    r = request(full, env)
    # A request taken gets no reply: the pipe closes once exit.json is in.
    assert os.read(r, 16) == b""
    os.close(r)
    rd = rdir or d
    if os.path.exists(rd + "/shim.json"):   # not for a program never started
        assert json.load(open(rd + "/shim.json"))["shim_pid"] == p.pid
    return json.load(open(rd + "/exit.json"))["status"]

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
# 1 MB of environment: taken whole, the child sees it.
big = ["PLBIG%d=%s" % (i, "x" * 100000) for i in range(10)]
assert run("big", ["sh", "-c", 'test ${#PLBIG9} = 100000'], env + big) == 0, "a 1 MB request"
# The records elsewhere than the job's directory (-r).
os.makedirs(T + "/g/recdir", mode=0o700)
assert run("rec", ["true"], rdir=T + "/g/recdir") == 0
assert not os.path.exists(T + "/g/rec/exit.json") and not os.path.exists(T + "/g/rec/shim.json")
# A process to run as another user whose records directory anyone may
# write: refused (EPERM), nothing run, the reason in its log.
os.makedirs(T + "/g/open", mode=0o777); os.chmod(T + "/g/open", 0o777)
d = T + "/g/openproc"; os.makedirs(d)
r = request(["pipeline-shim", "-d", d, "-r", T + "/g/open", "-l", d + ".log",
             "-u", "65534:65534", "--", "touch", d + "/ran"], env)
assert refusal(r) == 1, "EPERM"
assert not os.path.exists(d + "/ran") and not os.path.exists(T + "/g/open/exit.json")
assert "writable by nobody else" in open(d + ".log").read()
# A request without a pipe gets no reply and changes nothing; one without
# its memfd, or a malformed one, is refused on its pipe (EINVAL).
assert refusal(send(None, [])) == 22
m = os.memfd_create("request"); os.write(m, b"\x01\x00")
assert refusal(send(None, [m])) == 22
os.close(m)
a.close()
assert p.wait(timeout=10) == 0
PY
# Through the daemon: a process whose directory another shim holds locked
# is refused by its run's shim. The daemon follows the holder, which
# started it before a restart: it waits for the holder's shim.json, adopts
# it and takes its exit record; nothing runs twice.
pl_conf
pl_start
H="$TEST_TMP/state/runs/follow/x/attempt-1/.shim/main"
mkdir -p -m 0700 "$H"
state_own "$TEST_TMP/state/runs"   # the daemon's, as a holder before a restart left it
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
mkdir -p -m 0700 "$TEST_TMP/state/runs/held/x/attempt-1/.shim/main"
state_own "$TEST_TMP/state/runs/held"
flock -n "$TEST_TMP/state/runs/held/x/attempt-1/.shim/main" sleep 30 &
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
