#!/bin/bash
# probe/member-cgroup.sh: a member's probe in a split daemon whose daemon
# process runs as its own user (user = _pipelined, pipelined(8) SECURITY)
# runs in a memory cgroup the privileged parent made (PRIV_CGROUP): the
# member could not make one below the daemon's cgroup itself. A stand-in
# probe.py (jobs_dir) writes, from /proc/self/cgroup and the cgroup
# mounts, the memory cgroup it runs in and its limit: below the parent's
# own, named by the parent's pid, capped at host_mem_cap; after the job
# the group is gone. Then the daemon is killed (kill -9) while a second
# run's probe holds in its group: the restart kills that attempt and
# runs it again, and neither its group nor the new one stays behind (the
# daemon recorded the group in the stage process's records directory).
# Likewise for a stage the restart re-enters (tests/plugins/capped_hold,
# with a host_mem_cap key): its re-adopted stage process's group is
# removed once it ended. Skipped where root cannot make a memory cgroup
# here.
. "$(dirname "$0")/../../lib.sh"
trap 'rm -f "$TEST_TMP/jobs/hold"; pl_kill9 2>/dev/null' EXIT
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
# v2's) and that cgroup's limit, in cg.txt of its working directory;
# then it waits while the file hold beside it is there.
import os, time
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
while os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "hold")):
    time.sleep(0.1)
PY
echo 1 > "$TEST_TMP/tokens.bin"
chmod -R a+rX "$J" "$TEST_TMP/base" "$TEST_TMP/tokens.bin"
# The probe and capped_hold (tests/plugins) in a plugin directory.
mkdir -p "$TEST_TMP/plugins" && cp "$TOP/plugins/probe.so" "$TOP/tests/plugins/capped_hold.so" \
    "$TEST_TMP/plugins/" && chmod 0755 "$TEST_TMP/plugins" "$TEST_TMP/plugins/"*.so || fail "plugins"
export PL_PLUGIN_DIR=$TEST_TMP/plugins
member_daemon "user = _pipelined"
# probe_spec NAME: a one-job probe run's spec, capped at 60M.
probe_spec() {
	cat > "specs/$1.ini" <<INI
[run]
name = $1
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
	chmod 0644 "specs/$1.ini"
	as_member "$PIPELINECTL" -f "$PL_CONF" submit "specs/$1.ini" >/dev/null ||
		fail "$1: the member could not submit"
}
# run_end NAME: wait up to 60 s for run NAME to end.
run_end() {
	for _ in $(seq 600); do
		case $(db "SELECT state FROM runs WHERE name = '$1'") in
		succeeded|failed|cancelled) return ;;
		esac
		sleep 0.1
	done
}
probe_spec p1
run_end p1
W=$TEST_TMP/state/runs/p1/probe/work
[ -f "$W/cg.txt" ] || fail "the member's probe did not run: $(jobmsg p1)"
grep -q "/pipelined-probe-$PL_PID-[0-9]* 62914560\$" "$W/cg.txt" ||
	fail "the probe's cgroup is not the parent's, capped at 60M: $(cat "$W/cg.txt"); $(jobmsg p1)"
D=$(grep "/pipelined-probe-$PL_PID-" "$W/cg.txt" | cut -d' ' -f1)
note "the member's probe in $D, the parent's, capped at 60M"
for _ in $(seq 50); do [ -d "$D" ] || break; sleep 0.1; done
[ -d "$D" ] && fail "$D stayed after the job"
note "removed after the job"

P=${D%/*}
# killed_in RUN STAGE: once RUN's stage STAGE (its work directory's
# cg.txt) runs in a group of the parent's, the daemon killed (kill -9 of
# the parent: the daemon process follows) and started again; OLD: the
# parent's pid that was. gone_after RUN: once RUN ended, no group of
# either parent left in P.
killed_in() {
	local w=$TEST_TMP/state/runs/$1/$2/work d leaf
	for _ in $(seq 300); do [ -s "$w/cg.txt" ] && break; sleep 0.1; done
	leaf=$(grep -o "pipelined-probe-$PL_PID-[0-9]*" "$w/cg.txt" 2>/dev/null | head -1)
	[ -n "$leaf" ] && [ -d "$P/$leaf" ] ||
		fail "$1 is not in a cgroup of the parent's: $(cat "$w/cg.txt" 2>/dev/null); $(jobmsg "$1")"
	rm -f "$w/cg.txt"
	OLD=$PL_PID d=$(split_daemon_pid)
	pl_kill9
	for _ in $(seq 50); do kill -0 "$d" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$d" 2>/dev/null && fail "the daemon process $d outlived its parent"
	[ -d "$P/$leaf" ] || fail "$P/$leaf went with the daemon"
	note "killed (kill -9) with $1 in $P/$leaf"
	pl_start
	chmod 0666 "$TEST_TMP/run/control.sock"
}
gone_after() {
	run_end "$1"
	for _ in $(seq 50); do
		left=$(ls -d "$P/pipelined-probe-$OLD-"* "$P/pipelined-probe-$PL_PID-"* 2>/dev/null)
		[ -z "$left" ] && break
		sleep 0.1
	done
	[ -n "$left" ] && fail "$1: left after the restart: $left"
}

# kill -9 while p2's probe holds in its group: the restart kills that
# attempt (a probe is not re-entered) and runs the job again.
touch "$J/hold"; chmod 0644 "$J/hold"
probe_spec p2
killed_in p2 probe
rm -f "$J/hold"
gone_after p2
[ -f "$TEST_TMP/state/runs/p2/probe/work/cg.txt" ] ||
	fail "p2's probe did not run again after the restart: $(jobmsg p2)"
note "p2: the killed attempt's group removed, and the new one's"

# The same for a stage that is re-entered (capped_hold, a test plugin
# with a host_mem_cap key): its stage process, re-adopted, ends after
# the restart, and the group it ran in is removed then.
touch "$J/hold"
cat > specs/p3.ini <<INI
[run]
name = p3
[hold]
stage = capped_hold
host_mem_cap = 60M
hold = $J/hold
INI
chmod 0644 specs/p3.ini
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/p3.ini >/dev/null || fail "p3: the member could not submit"
killed_in p3 hold
rm -f "$J/hold"
gone_after p3
[ "$(db "SELECT state FROM runs WHERE name = 'p3'")" = succeeded ] || fail "p3: $(jobmsg p3)"
grep -q "re-adopted pl-stage" "$TEST_TMP/state/runs/p3/hold/job.log" ||
	fail "p3's stage process was not re-adopted: $(cat "$TEST_TMP/state/runs/p3/hold/job.log")"
note "p3: re-adopted, its group removed after it ended"
grep 'privileged parent: refused' "$TEST_TMP/pipelined.out" &&
	fail "the parent refused the daemon"
pl_stop
echo ok
