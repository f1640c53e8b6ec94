#!/usr/bin/python3
"""The floor under pipelined's per-job cost: N `true` jobs started through
a run's shim alone (pipeline-shim -G, the protocol of shim.c), J at a
time, without the daemon, its store or its scheduler; then the same through
make -jJ. Prints both wall times and the ratio. Each job still gets what a
job needs from the shim: a process directory, its lock, its records, the
log. Run by dag-bench.sh; N, J and BASE (where the directories go) from the
environment."""
import os, socket, struct, subprocess, sys, tempfile, time, select, array

top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = int(os.environ.get("N", "1000")); J = int(os.environ.get("J", "2"))
shim = os.path.join(top, "daemon", "pipeline-shim")
base = tempfile.mkdtemp(dir=os.environ.get("BASE", "/tmp"), prefix="shimfloor.")
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
z = subprocess.Popen([shim, "-G", str(b.fileno())], pass_fds=[b.fileno()])
b.close()
env = [f"{k}={v}" for k, v in os.environ.items()]
log = os.path.join(base, "job.log")

def start(i):
    d = os.path.join(base, f"p{i}")
    os.mkdir(d)
    argv = [shim, "-d", d, "-l", log, "-c", base, "--", "true"]
    m = os.memfd_create("request")
    os.write(m, struct.pack("II", len(argv), len(env)) + b"".join(s.encode() + b"\0" for s in argv + env))
    # The request carries the pipe its end comes on (closed once exit.json
    # is in; a refusal would come there first) and the memfd holding it.
    r, w = os.pipe()
    a.sendmsg([b"\1"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w, m]))])
    os.close(w)
    os.close(m)
    return r

t0 = time.monotonic()
running, nxt = [], 0
while nxt < N or running:
    while nxt < N and len(running) < J:
        running.append(start(nxt)); nxt += 1
    r, _, _ = select.select(running, [], [])
    for fd in r:
        running.remove(fd); os.close(fd)
floor = time.monotonic() - t0
a.close(); z.wait()
mk = os.path.join(base, "f.mk")
with open(mk, "w") as f:
    f.write("all:" + "".join(f" j{i}" for i in range(N)) + "\n")
    for i in range(N):
        f.write(f"j{i}:\n\t@true\n")
    f.write(".PHONY: all" + "".join(f" j{i}" for i in range(N)) + "\n")
t0 = time.monotonic()
subprocess.run(["make", "-s", f"-j{J}", "-f", mk], check=True)
m = time.monotonic() - t0
subprocess.run(["rm", "-rf", base])
print(f"{N} true, {J} at a time: a run shim alone {floor:.2f}s, make -j{J} {m:.2f}s, ratio {floor/m:.2f}x")
