#!/usr/bin/python3
"""tests/bench/procstat.py: where the CPU went while a benchmark ran.

  procstat.py sample OUT [SECONDS]
      every SECONDS (default 2) until killed: the machine's CPU counters
      (/proc/stat's first line) and, for each process whose CPU time
      moved, its CPU seconds (user, system) and thread count, into OUT;
      a process's command line once, when first seen.
  procstat.py report OUT PATTERN
      for each process whose command line holds PATTERN (a training,
      say): its wall time as sampled, its CPU seconds and their ratio to
      the wall (2.0: two cores busy all along), its threads (least and
      most), the machine's busy, idle, iowait and steal share over its
      life, and the other processes' CPU seconds meanwhile, by command
      (the five largest): what ran beside it.

System Python only (no third-party module), so a benchmark can run it
beside anything.  A process seen in one sample only is not reported.
"""
import os
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def read_stat(pid):
    try:
        with open("/proc/%s/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    comm = s[s.index("(") + 1:s.rindex(")")]
    rest = s[s.rindex(")") + 2:].split()
    # rest[0] is field 3 (state): utime 14, stime 15, threads 20, start 22
    return comm, int(rest[11]), int(rest[12]), int(rest[17]), rest[19]


def sample(out, every):
    seen = {}
    with open(out, "w", buffering=1) as f:
        while True:
            t = time.time()
            with open("/proc/stat") as s:
                f.write("S %.2f %s\n" % (t, " ".join(s.readline().split()[1:9])))
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                st = read_stat(pid)
                if st is None:
                    continue
                comm, ut, stt, thr, start = st
                key = (pid, start)
                if key not in seen:
                    try:
                        with open("/proc/%s/cmdline" % pid, "rb") as c:
                            cmd = c.read().replace(b"\0", b" ").decode("utf-8", "replace")
                        cmd = " ".join(cmd.split())
                    except OSError:
                        cmd = ""
                    f.write("C %s %s %s\t%s\n" % (pid, start, comm.replace(" ", "_"), cmd or "[" + comm + "]"))
                if seen.get(key) != (ut, stt, thr):
                    seen[key] = (ut, stt, thr)
                    f.write("P %.2f %s %s %d %d %d\n" % (t, pid, start, ut, stt, thr))
            time.sleep(every)


def report(out, pattern):
    cmds, procs, cpu = {}, {}, []
    for line in open(out):
        if line.startswith("C "):
            head, _, cmd = line[2:].rstrip("\n").partition("\t")
            pid, start, comm = head.split(" ", 2)
            cmds[(pid, start)] = (comm, cmd)
        elif line.startswith("P "):
            t, pid, start, ut, st, thr = line.split()[1:]
            procs.setdefault((pid, start), []).append((float(t), (int(ut) + int(st)) / TICK, int(thr)))
        elif line.startswith("S "):
            v = line.split()[1:]
            cpu.append((float(v[0]), list(map(int, v[1:]))))

    def machine(t0, t1):
        a = [c for c in cpu if t0 <= c[0] <= t1]
        if len(a) < 2:
            return "not sampled"
        d = [y - x for x, y in zip(a[0][1], a[-1][1])]
        tot = sum(d) or 1
        # user nice system idle iowait irq softirq steal
        return "busy %.0f%%, idle %.0f%%, iowait %.1f%%, steal %.1f%%" % (
            100.0 * (d[0] + d[1] + d[2] + d[5] + d[6]) / tot, 100.0 * d[3] / tot,
            100.0 * d[4] / tot, 100.0 * d[7] / tot)

    def used(samples, t0, t1):
        # CPU seconds a process used between t0 and t1, from its samples:
        # one first seen inside counts from its first sample (what it used
        # before that, at most one interval's, is not counted).
        before = [s[1] for s in samples if s[0] <= t0]
        inside = [s[1] for s in samples if t0 < s[0] <= t1]
        if not inside:
            return 0.0
        return inside[-1] - (before[-1] if before else samples[0][1])

    def label(comm, cmd):
        # A Python program by its script's name, anything else by comm.
        words = cmd.split()
        return words[1].rsplit("/", 1)[-1] if "python" in comm and len(words) > 1 else comm

    found = 0
    for key, (comm, cmd) in sorted(cmds.items(), key=lambda kv: procs.get(kv[0], [(0,)])[0][0]):
        if pattern not in cmd or len(procs.get(key, [])) < 2:
            continue
        s = procs[key]
        t0, t1 = s[0][0], s[-1][0]
        wall, secs = t1 - t0, s[-1][1] - s[0][1]
        found += 1
        print("pid %s %s" % (key[0], cmd if len(cmd) <= 160 else cmd[:60] + " ... " + cmd[-95:]))
        print("  wall %.1f s (sampled), CPU %.1f s, %.2f cores; threads %d-%d; machine %s" % (
            wall, secs, secs / wall if wall > 0 else 0.0, min(x[2] for x in s), max(x[2] for x in s),
            machine(t0, t1)))
        beside = {}
        for k, ss in procs.items():
            if k == key:
                continue
            u = used(ss, t0, t1)
            if u > 0:
                name = label(*cmds.get(k, ("?", "")))
                beside[name] = beside.get(name, 0.0) + u
        top = sorted(beside.items(), key=lambda kv: -kv[1])[:5]
        print("  beside it: %s" % (", ".join("%s %.1f s" % kv for kv in top) or "nothing"))
    if not found:
        print("no process whose command line holds %r" % pattern)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "sample":
        sample(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 2.0)
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
