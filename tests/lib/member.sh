# tests/lib/member.sh: what the tests of a non-root member's runs share
# (job/stage-owner, job/priv-parent, job/split-user, job/stage-links,
# job/event-forge, job/artifact-kinds, job/events-quota, job/files-reuse,
# sched/reuse-owner-files; job/env-preload and job/forged-records take
# as_member alone; control/check-split takes member_daemon and
# fsuid_watch), sourced after lib.sh: the daemon's group plsubmit with nobody as
# its member, the tensor_fix fixture, and a daemon running as root with
# the plugins named. Needs root.
#
#   member_setup PLUGIN.so...   (paths), then the helpers below
[ "$(id -u)" = 0 ] || { echo "needs root to switch uids"; exit 77; }
pl_group plsubmit
gid=$(getent group plsubmit | cut -d: -f3)
nobody=$(id -u nobody)
as_member() { setpriv --reuid=nobody --regid=nogroup --groups="$gid" "$@"; }
# member_users NAME...: system users of those names (no home, no shell),
# members of plsubmit when they run through as_user.
member_users() {
	pl_user "$@"
}
# as_user NAME CMD...: CMD as user NAME, with plsubmit as its one group.
as_user() { local u=$1; shift; setpriv --reuid="$u" --regid=nogroup --groups="$gid" "$@"; }

# member_setup PLUGIN...: the fixture in $TEST_TMP/orig, out/ ($O, anyone
# writes it: for the member's runs), out-root/ ($R, root's: root's runs,
# whose stages use no directory another user could change), specs/, the
# plugins in a directory of their own, and the daemon started with group =
# plsubmit and its control socket open to nobody.
member_setup() {
	chmod 0755 "$TEST_TMP"
	cd "$TEST_TMP" || exit 1
	/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$TEST_TMP/orig" --layout causal >/dev/null ||
		fail "fixture"
	chmod -R a+rX "$TEST_TMP/orig"
	O=$TEST_TMP/out; mkdir -p "$O" specs; chmod 0777 "$O"; chmod 0755 specs
	R=$TEST_TMP/out-root; mkdir -p "$R"; chmod 0755 "$R"
	mkdir -p plugins && cp "$@" plugins/ && chmod 0755 plugins plugins/*.so || fail "plugins"
	export PL_PLUGIN_DIR=$TEST_TMP/plugins
	member_daemon
}

# member_daemon [DAEMON LINE...]: in $TEST_TMP (made the cwd, with specs/
# anyone reads), the daemon started with group = plsubmit and the lines
# given, $MEMBER_CONF_TAIL (sections) appended, its control socket open
# to nobody. (A daemon started again: the same, after pl_stop.)
member_daemon() {
	chmod 0755 "$TEST_TMP"
	cd "$TEST_TMP" || exit 1
	mkdir -p specs && chmod 0755 specs
	pl_conf "group = plsubmit" "$@"
	[ -z "${MEMBER_CONF_TAIL:-}" ] || printf '%s\n' "$MEMBER_CONF_TAIL" >> "$PL_CONF"
	pl_start
	chmod 0755 "$TEST_TMP/run"; chmod 0666 "$TEST_TMP/run/control.sock"
}
# member_exec RUN COMMAND...: nobody submits a one-job exec run (job "x").
member_exec() {
	local r=$1; shift
	printf '[run]\nname = %s\n[x]\nstage = exec\ncommand = %s\n' "$r" "$*" > "specs/$r.ini"
	chmod 0644 "specs/$r.ini"
	as_member "$PIPELINECTL" -f "$PL_CONF" submit "specs/$r.ini" >/dev/null || fail "$r: the member could not submit"
}

# spec NAME KEY=VALUE...: a one-job tensor_fix run.
spec() {
	local n=$1; shift
	{ echo "[tensor_fix]"; echo "drop ="; echo "rename ="; printf '%s\n' "$@"; } > "specs/$n.ini"
	chmod 0644 "specs/$n.ini"
}
# member_run NAME STATE: the member submits specs/NAME.ini; the run ends STATE.
member_run() {
	as_member "$PIPELINECTL" -f "$PL_CONF" submit "specs/$1.ini" >/dev/null || fail "$1: the member could not submit"
	wait_run "$1" "$2" 60
}
jobmsg() { db "SELECT message FROM jobs WHERE run_id = (SELECT id FROM runs WHERE name = '$1')"; }

# A split daemon (pipelined(8) SECURITY): split_daemon_pid prints its
# daemon process, the parent's oldest pipelined child (a file server of
# an owner's, PRIV_FILES, is a later one while a job reads its events or
# artifacts). split_kill9 daemon|
# parent RUN: while the member's one-job RUN ("sleep 2; echo once >>
# $O/RUN") runs, kill -9 that process; the other follows; the restart
# adopts the job, which succeeds having run once.
split_daemon_pid() { pgrep -o -P "$PL_PID" -x pipelined; }
split_kill9() {
	local which=$1 r=$2 d
	member_exec "$r" "sleep 2; echo once >> $O/$r"
	wait_run "$r" running 20
	d=$(split_daemon_pid)
	if [ "$which" = daemon ]; then
		kill -9 "$d"
		for _ in $(seq 50); do kill -0 "$PL_PID" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$PL_PID" 2>/dev/null && fail "the parent outlived its daemon process"
		wait "$PL_PID" 2>/dev/null
		PL_PID=""
	else
		pl_kill9
		for _ in $(seq 50); do kill -0 "$d" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$d" 2>/dev/null && fail "the daemon process $d outlived its parent"
	fi
	pl_start
	chmod 0666 "$TEST_TMP/run/control.sock"
	wait_run "$r" succeeded 30
	[ "$(cat "$O/$r")" = once ] || fail "$r: ran $(wc -l < "$O/$r") times"
}

# fsuid_watch PID FILE: every file-system uid other than the process's
# own (its real uid: 0 for a daemon root alone, _pipelined's for a split
# daemon's daemon process) that any thread of PID shows (/proc status,
# sampled until PID ends or $SAMPLER is killed) appended to FILE, emptied
# first; the sampler's pid in SAMPLER.
fsuid_watch() {
	local d=$1 out=$2
	: > "$out"
	(
		while kill -0 "$d" 2>/dev/null; do
			for f in /proc/"$d"/task/*/status; do
				while read -r k ru _ _ fs; do
					[ "$k" = Uid: ] && [ "$fs" != "$ru" ] && echo "$fs" >> "$out"
				done < "$f" 2>/dev/null
			done
		done
	) &
	SAMPLER=$!
}
