# tests/lib/slurm.sh: sourced by tests/integration/slurm/*.sh after tests/lib.sh
# (and tests/lib/gpu_stages.sh, for the train stage). Starts the single-node cluster
# (tests/tools/slurm-cluster.sh) and exports SLURM_CONF for the daemon and
# the Slurm commands; the caller's EXIT trap must run slurm_stop.
declare -F pl_start >/dev/null || . "$TOP/tests/lib.sh"
CLUSTER="$TOP/tests/tools/slurm-cluster.sh"
if [ "$(id -u)" -ne 0 ]; then
	echo "needs root for munged and slurmd"
	exit 77
fi
# There is one cluster per machine, and each test stops it when it ends:
# tests run at the same time (two checkouts, two `make check`s) take
# turns. The test re-executes itself under flock(1), which holds the lock
# in its own process (-o), so neither the daemon nor the cluster inherits
# it.
if [ -z "${PL_SLURM_LOCKED:-}" ]; then
	export PL_SLURM_LOCKED=1
	exec flock -o -w 800 /tmp/pl-slurm.lock "$0" "$@"
fi
eval "$("$CLUSTER" env)"
"$CLUSTER" start || { echo "FAIL: the Slurm cluster did not start" >&2; exit 1; }
slurm_stop() { "$CLUSTER" stop; }

# slurm_state ID: Slurm's JobState of a job the controller still knows.
slurm_state() { scontrol show job -o "$1" 2>/dev/null | sed -n 's/.* JobState=\([A-Z_]*\).*/\1/p'; }
# slurm_field ID KEY
slurm_field() { scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# slurm_stopped RUN ID DIR: run RUN's Slurm job ID ended CANCELLED or
# FAILED soon after its cancel, and DIR/RUN-finished, which its program
# would have made at its end, is not there.
slurm_stopped() {
	for _ in $(seq 1 100); do
		case $(slurm_state "$2") in CANCELLED|FAILED) break;; esac
		sleep 0.1
	done
	case $(slurm_state "$2") in CANCELLED|FAILED) ;; *) fail "$1: Slurm job $2 is $(slurm_state "$2") after the cancel";; esac
	[ ! -e "$3/$1-finished" ] || fail "$1 was not stopped"
}
# ext_ids RUN JOB: the Slurm job ids stored for a job, by attempt.
ext_ids() {
	db "SELECT p.ext_id FROM procs p JOIN attempts a ON a.id = p.attempt_id
	    JOIN jobs j ON j.id = a.job_id JOIN runs r ON r.id = j.run_id
	    WHERE r.name = '$1' AND j.name = '$2' ORDER BY a.n, p.id;"
}

# release_requeued ID: let a requeued job run now. Slurm holds a requeued
# job back (its begin time is set ahead); once the requeue has gone
# through, move the begin time to now, but not within the second the old
# run's credential was revoked: slurmd refuses to launch a job whose
# credential is that old ("Job credential revoked") and Slurm then fails
# the job instead of running it.
release_requeued() {
	local id=$1 st="" i j
	for i in $(seq 1 100); do
		st=$(slurm_state "$id")
		[ "$st" = PENDING ] && break
		sleep 0.1
	done
	[ "$st" = PENDING ] || return 1
	sleep 2
	for i in $(seq 1 10); do
		scontrol update JobId="$id" StartTime=now 2>/dev/null
		for j in $(seq 1 10); do
			st=$(slurm_state "$id")
			case $st in
			RUNNING|COMPLETING|COMPLETED) return 0;;
			PENDING) ;;
			*) return 1;;
			esac
			sleep 0.2
		done
	done
	return 1
}
