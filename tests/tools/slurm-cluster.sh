#!/bin/bash
# tests/tools/slurm-cluster.sh: a single-node Slurm cluster on loopback, from
# Debian 12's packages (munge, slurmctld, slurmd, slurm-client; Slurm 22.05),
# for the slurm executor's tests. Run as root.
#
#   slurm-cluster.sh start    start munged, slurmctld and slurmd (idempotent);
#                             returns once sinfo shows the node idle
#   slurm-cluster.sh stop     stop slurmd and slurmctld (munged is left
#                             running: other clients may share it)
#   slurm-cluster.sh status   exit 0 when the cluster answers, 1 otherwise
#   slurm-cluster.sh env      print "export SLURM_CONF=..." for eval
#
# The cluster lives in a private directory, $PL_SLURM_DIR (default
# /tmp/pl-slurm): slurm.conf, the controller's state, the node's spool, the
# logs and the job completion records (jobcomp.txt). Accounting is off, so
# sacct has nothing to say; a finished job is known to `scontrol show job`
# for MinJobAge seconds, and to jobcomp.txt after that. Clients find the
# cluster through SLURM_CONF, which `env` prints.
#
# Choices forced by the machines this runs on (gVisor-style sandboxes, no
# systemd, cgroup hierarchies that cannot be delegated):
#  - proctrack/linuxproc and task/none: the cgroup plugins cannot create
#    their hierarchies here. linuxproc finds a job's processes through their
#    parent chain, which the shim keeps intact.
#  - jobacct_gather/linux with OverMemoryKill: without cgroups it is the only
#    way a job that exceeds --mem is killed and ends OUT_OF_MEMORY.
#  - SlurmdParameters=config_overrides: the node is what slurm.conf says, so
#    a sandbox that reports odd hardware does not drain it.
#  - munged runs as the munge user from /run/munge (created here, owned by
#    munge); its key is generated with mungekey when /etc/munge has none.
set -u

DIR=${PL_SLURM_DIR:-/tmp/pl-slurm}
CONF=$DIR/slurm.conf
NODE=$(hostname -s)
CTLD_PORT=${PL_SLURM_CTLD_PORT:-6817}
SLURMD_PORT=${PL_SLURM_SLURMD_PORT:-6818}
# How long a finished job stays visible to `scontrol show job` (seconds).
MIN_JOB_AGE=${PL_SLURM_MIN_JOB_AGE:-600}
export SLURM_CONF=$CONF

die() { echo "slurm-cluster.sh: $*" >&2; exit 1; }

need_root() {
	[ "$(id -u)" -eq 0 ] || die "must run as root (munged, slurmd)"
	for b in munged mungekey slurmctld slurmd sinfo scontrol; do
		command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] ||
		    die "$b not installed (etc/deps.sh installs munge slurmctld slurmd slurm-client)"
	done
}

munge_ok() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
	munge_ok && return 0
	install -d -o munge -g munge -m 0700 /etc/munge
	if [ ! -s /etc/munge/munge.key ]; then
		mungekey --create --keyfile=/etc/munge/munge.key || die "mungekey failed"
	fi
	chown munge:munge /etc/munge/munge.key && chmod 0600 /etc/munge/munge.key
	install -d -o munge -g munge -m 0755 /run/munge
	install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
	# A stale pid or socket from a killed munged makes it refuse to start.
	if [ -f /run/munge/munged.pid ] && ! kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; then
		rm -f /run/munge/munged.pid /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
	fi
	runuser -u munge -- /usr/sbin/munged || die "munged failed to start (see /var/log/munge/munged.log)"
	for _ in $(seq 50); do munge_ok && return 0; sleep 0.1; done
	die "munged does not answer (see /var/log/munge/munged.log)"
}

write_conf() {
	local cpus mem
	cpus=$(nproc)
	# Leave the node half the machine's memory, in MB.
	mem=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 / 2 }' /proc/meminfo)
	mkdir -p "$DIR/state" "$DIR/spool"
	chmod 0755 "$DIR"
	cat >"$CONF.tmp" <<EOF
# Written by tests/tools/slurm-cluster.sh; rewritten on every start.
ClusterName=pltest
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/jobcomp.txt
SchedulerType=sched/builtin
# Start a submitted job at once instead of on the next scheduling pass.
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default, a job without --mem takes the whole node's memory.
DefMemPerCPU=256
SlurmdParameters=config_overrides
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
MinJobAge=$MIN_JOB_AGE
KillWait=5
OverTimeLimit=0
InactiveLimit=0
SlurmdTimeout=30
MessageTimeout=10
# A job in the urgent partition preempts jobs of the others, which Slurm
# requeues (as a cluster does for a higher-priority tenant).
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes=$NODE MaxTime=INFINITE State=UP PriorityTier=2
# A partition whose time limit makes any longer request pend forever with
# reason PartitionTimeLimit (EnforcePartLimits is off).
PartitionName=short Nodes=$NODE MaxTime=1 State=UP PriorityTier=1
EOF
	mv "$CONF.tmp" "$CONF"
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

node_idle() {
	local s
	s=$(sinfo -h -n "$NODE" -o %t 2>/dev/null | head -n 1)
	[ "$s" = "idle" ] || [ "$s" = "mix" ] || [ "$s" = "alloc" ]
}

start() {
	need_root
	start_munge
	if pid_alive "$DIR/slurmctld.pid" && pid_alive "$DIR/slurmd.pid" && node_idle; then
		return 0
	fi
	write_conf
	if ! pid_alive "$DIR/slurmctld.pid"; then
		# -i: ignore state files we cannot read (a previous run's leftovers).
		setsid /usr/sbin/slurmctld -D -i -f "$CONF" </dev/null >>"$DIR/slurmctld.out" 2>&1 &
		echo $! >"$DIR/slurmctld.pid"
	fi
	for _ in $(seq 100); do
		scontrol ping 2>/dev/null | grep -q 'is UP' && break
		sleep 0.2
	done
	scontrol ping 2>/dev/null | grep -q 'is UP' ||
	    die "slurmctld does not answer (see $DIR/slurmctld.log)"
	if ! pid_alive "$DIR/slurmd.pid"; then
		setsid /usr/sbin/slurmd -D -N "$NODE" -f "$CONF" </dev/null >>"$DIR/slurmd.out" 2>&1 &
		echo $! >"$DIR/slurmd.pid"
	fi
	for _ in $(seq 150); do
		node_idle && return 0
		# A node left DOWN or DRAINED by an earlier run comes back here.
		case $(sinfo -h -n "$NODE" -o %t 2>/dev/null) in
		down*|drain*|drng*) scontrol update NodeName="$NODE" State=RESUME 2>/dev/null;;
		esac
		sleep 0.2
	done
	sinfo -N -l >&2
	die "node $NODE did not become idle (see $DIR/slurmd.log)"
}

stop_one() {
	local pidf=$1 pid
	pid_alive "$pidf" || { rm -f "$pidf"; return 0; }
	pid=$(cat "$pidf")
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	rm -f "$pidf"
}

stop() {
	# Jobs still on the node are killed with it: cancel them first so no
	# slurmstepd outlives the cluster.
	if scontrol ping 2>/dev/null | grep -q 'is UP'; then
		scancel --full -s KILL -u root 2>/dev/null
		scancel -u root 2>/dev/null
	fi
	stop_one "$DIR/slurmd.pid"
	stop_one "$DIR/slurmctld.pid"
}

status() {
	pid_alive "$DIR/slurmctld.pid" && pid_alive "$DIR/slurmd.pid" && node_idle
}

case "${1:-}" in
start) start;;
stop) stop;;
status) if status; then sinfo; else echo "slurm-cluster.sh: not running" >&2; exit 1; fi;;
env) echo "export SLURM_CONF=$CONF";;
*) echo "usage: slurm-cluster.sh start|stop|status|env" >&2; exit 2;;
esac
