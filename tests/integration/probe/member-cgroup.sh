#!/bin/bash
# probe/member-cgroup.sh: a member's probe in a split daemon whose daemon
# process runs as its own user (user = _pipelined, pipelined(8) SECURITY)
# runs in a memory cgroup the privileged parent made (PRIV_CGROUP): the
# member could not make one below the daemon's cgroup itself. A stand-in
# probe.py (jobs_dir) writes, from /proc/self/cgroup and the cgroup
# mounts, the memory cgroup it runs in and its limit: below the parent's
# own, named by the parent's pid, capped at host_mem_cap; after the job
# the group is gone. Skipped where root cannot make a memory cgroup here.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
. "$TOP/tests/lib/member.sh"
python3 - <<'PY' || { echo "no memory cgroup can be made below this process's own"; exit 77; }
import os, sys
for line in open("/proc/self/cgroup"):
    hid, ctrls, path = line.rstrip("\n").split(":", 2)
    if "memory" in ctrls.split(","):
        for m in open("/proc/self/mountinfo"):
            f = m.split()
            s = f.index("-")
            if f[s + 1] == "cgroup" and "memory" in f[s + 3].split(","):
                rel = path[len(f[3]):] if f[3] != "/" and path.startswith(f[3]) else path
                d = f[4] + rel + "/pipelined-probe-test-%d" % os.getpid()
                try:
                    os.mkdir(d)
                    os.rmdir(d)
                    sys.exit(0)
                except OSError:
                    pass
sys.exit(1)
PY
pl_user _pipelined
J=$TEST_TMP/jobs; mkdir -p "$J" "$TEST_TMP/base"; echo '{"architectures": ["Gemma3ForCausalLM"]}' > "$TEST_TMP/base/config.json"
cat > "$J/probe.py" <<'PY'
# The stand-in: the memory cgroup it runs in (v1's memory hierarchy or
# v2's) and that cgroup's limit, in cg.txt of its working directory.
import os
mounts = [l.split() for l in open("/proc/self/mountinfo")]
out = []
for line in open("/proc/self/cgroup"):
    hid, ctrls, path = line.rstrip("\n").split(":", 2)
    v1 = "memory" in ctrls.split(",")
    if not v1 and not (hid == "0" and ctrls == ""):
        continue
    for f in mounts:
        s = f.index("-")
        if (v1 and (f[s + 1] != "cgroup" or "memory" not in f[s + 3].split(","))) or \
                (not v1 and f[s + 1] != "cgroup2"):
            continue
        rel = path[len(f[3]):] if f[3] != "/" and path.startswith(f[3]) else path
        d = f[4] + rel
        for name in ("memory.max", "memory.limit_in_bytes"):
            if os.path.exists(os.path.join(d, name)):
                out.append("%s %s" % (d, open(os.path.join(d, name)).read().strip()))
open("cg.txt", "w").write("\n".join(out) + "\n")
PY
echo 1 > "$TEST_TMP/tokens.bin"
chmod -R a+rX "$J" "$TEST_TMP/base" "$TEST_TMP/tokens.bin"
member_daemon "user = _pipelined"
cat > specs/p1.ini <<INI
[run]
name = p1
[probe]
stage = probe
engine = tiny
base = $TEST_TMP/base
tokens = $TEST_TMP/tokens.bin
jobs_dir = $J
budget_mb = 100
margin_mb = 10
host_mem_cap = 60M
INI
chmod 0644 specs/p1.ini
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/p1.ini >/dev/null || fail "p1: the member could not submit"
for _ in $(seq 600); do
	st=$(db "SELECT state FROM runs WHERE name = 'p1'")
	case $st in succeeded|failed|cancelled) break ;; esac
	sleep 0.1
done
W=$TEST_TMP/state/runs/p1/probe/work
[ -f "$W/cg.txt" ] || fail "the member's probe did not run: $(jobmsg p1)"
grep -q "/pipelined-probe-$PL_PID-[0-9]* 62914560\$" "$W/cg.txt" ||
	fail "the probe's cgroup is not the parent's, capped at 60M: $(cat "$W/cg.txt"); $(jobmsg p1)"
D=$(grep "/pipelined-probe-$PL_PID-" "$W/cg.txt" | cut -d' ' -f1)
note "the member's probe in $D, the parent's, capped at 60M"
for _ in $(seq 50); do [ -d "$D" ] || break; sleep 0.1; done
[ -d "$D" ] && fail "$D stayed after the job"
note "removed after the job"
grep 'privileged parent: refused' "$TEST_TMP/pipelined.out" &&
	fail "the parent refused the daemon"
pl_stop
echo ok
