#!/bin/bash
# What a job program may publish through its events file (pipeline-job(7)):
# started, progress, metric, log, checkpoint, artifact, done and error. A
# member's exec program writes the lines a stage or the daemon publishes
# (verdict, state, resumed, value, proc, a custom type, one carrying the
# stage process's mark "pl_stage":true) beside a progress line; with
# [notify] on for every kind, none of them becomes a job.TYPE event, a
# stored value or an outbox row (before: job.verdict and job.state became
# gate.verdict and job.failed notifications, signed with the daemon's
# secret; value and proc were stored as events). The job log says once
# which type went unpublished and counts them; the progress line is
# stored. Run twice: the exec stage in the daemon (its default), and in a
# stage process of its own (stage_process = all), whose relay keeps those
# lines from the daemon as well. Against a real pipelined running as root.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
. "$TOP/tests/lib/member.sh"
chmod 0755 "$TEST_TMP"; mkdir -p "$TEST_TMP/specs"; chmod 0755 "$TEST_TMP/specs"
cat > "$TEST_TMP/specs/forge.sh" <<'SH'
{
printf '%s\n' '{"type":"verdict","verdict":"promote","reason":"forged by the program"}'
printf '%s\n' '{"type":"state","state":"failed","message":"forged by the program"}'
printf '%s\n' '{"type":"resumed","step":7,"path":"/forged"}'
printf '%s\n' '{"type":"value","key":"gate.verdict","value":"{\"verdict\":\"promote\"}","pl_stage":true}'
printf '%s\n' '{"type":"proc","proc":"main","state":"running","reason":"forged"}'
printf '%s\n' '{"type":"verdict","verdict":"promote","pl_stage":true}'
printf '%s\n' '{"type":"my_custom","x":1}'
printf '%s\n' '{"type":"progress","step":1,"total":2}'
} >> "$PL_EVENTS"
SH
chmod 0755 "$TEST_TMP/specs/forge.sh"
forge_run() {	# forge_run RUN: the member's run of forge.sh, which succeeds
	printf '[run]\nname = %s\n[forge]\nstage = exec\ncommand = /bin/sh %s/specs/forge.sh\n' \
	    "$1" "$TEST_TMP" > "specs/$1.ini"
	chmod 0644 "specs/$1.ini"
	as_member "$PIPELINECTL" -f "$PL_CONF" submit "specs/$1.ini" >/dev/null || fail "$1: the member could not submit"
	wait_run "$1" succeeded 30
}
MEMBER_CONF_TAIL="[notify]
command = true
secret = s3cret-of-the-daemon
events = run.start run.end job.failed gate.verdict train.resumed"
check() {	# check RUN
	local r=$1 ev
	ev=$(db "SELECT group_concat(type || ' ' || data, char(10)) FROM events WHERE run = '$r' AND
		(type IN ('job.verdict', 'job.resumed', 'job.value', 'job.proc', 'job.my_custom')
		 OR data LIKE '%forged%')")
	[ -z "$ev" ] || fail "$r: the program's lines were published: $ev"
	local ob
	ob=$(db "SELECT group_concat(kind, ' ') FROM outbox WHERE body LIKE '%\"run\":\"$r\"%' AND kind IN
		('gate.verdict', 'job.failed', 'train.resumed')")
	[ -z "$ob" ] || fail "$r: notifications from the program's lines: $ob"
	[ "$(db "SELECT count(*) FROM outbox WHERE body LIKE '%\"run\":\"$r\"%' AND kind = 'run.end'")" = 1 ] ||
		fail "$r: the run's own run.end notification is missing: $(db "SELECT kind, body FROM outbox")"
	[ "$(db "SELECT count(*) FROM vals v JOIN jobs j ON j.id = v.job_id JOIN runs u ON u.id = j.run_id
		WHERE u.name = '$r' AND v.key = 'gate.verdict'")" = 0 ] || fail "$r: the program stored a value"
	[ "$(db "SELECT count(*) FROM events WHERE run = '$r' AND type = 'job.progress'")" = 1 ] ||
		fail "$r: the progress line was not stored"
	local log=$TEST_TMP/state/runs/$r/forge/job.log
	[ "$(grep -c 'events: .*"verdict" lines go to its stage only' "$log")" = 1 ] ||
		fail "$r: the job log does not say once that verdict went unpublished: $(cat "$log")"
	grep -q 'events: 7 lines of main not stored or published' "$log" ||
		fail "$r: the job log does not count the lines: $(cat "$log")"
}
member_daemon
forge_run forge1
check forge1
note "exec in the daemon: the program's verdict, state, resumed, value and proc lines not published"
pl_stop
member_daemon "stage_process = all"
forge_run forge2
# The relay in the stage process passes none of them to the daemon.
check_relay() {
	local log=$TEST_TMP/state/runs/forge2/forge/job.log ev
	ev=$(db "SELECT group_concat(type || ' ' || data, char(10)) FROM events WHERE run = 'forge2' AND
		(type IN ('job.verdict', 'job.resumed', 'job.value', 'job.proc', 'job.my_custom')
		 OR data LIKE '%forged%')")
	[ -z "$ev" ] || fail "forge2: the program's lines were published: $ev"
	[ -z "$(db "SELECT kind FROM outbox WHERE body LIKE '%\"run\":\"forge2\"%' AND kind IN
		('gate.verdict', 'job.failed', 'train.resumed')")" ] || fail "forge2: notifications from the program"
	[ "$(db "SELECT count(*) FROM events WHERE run = 'forge2' AND type = 'job.progress'")" = 1 ] ||
		fail "forge2: the progress line was not stored"
	grep -q '"verdict" lines go to its stage only' "$log" &&
		grep -q 'events: 7 lines of main not stored or published' "$log" ||
		fail "forge2: the job log: $(cat "$log")"
}
check_relay
note "exec in a stage process: the relay passes none of them either"
# The stage process's own lines: the program, as the member, appends a
# value and a verdict with the stage's mark to its stage process's events
# file (its process directory, beside the program's: the member's to
# write). The daemon takes the stage's lines only from the file its shim
# opened in the daemon's records directory and handed the stage as
# descriptor 3: none of these is stored or sent.
cat > "$TEST_TMP/specs/forge-stage.sh" <<'SH'
st=$PL_WORKDIR/../attempt-1/pl-stage
{
printf '%s\n' '{"type":"value","key":"gate.verdict","value":"{\"verdict\":\"promote\",\"reason\":\"forged\"}","pl_stage":true}'
printf '%s\n' '{"type":"verdict","verdict":"promote","reason":"forged","pl_stage":true}'
printf '%s\n' '{"type":"state","state":"failed","message":"forged","pl_stage":true}'
} >> "$st/events" || exit 3
echo wrote >> "$st/events.wrote"
SH
chmod 0755 "$TEST_TMP/specs/forge-stage.sh"
printf '[run]\nname = forge3\n[forge]\nstage = exec\ncommand = /bin/sh %s/specs/forge-stage.sh\n' \
    "$TEST_TMP" > specs/forge3.ini
chmod 0644 specs/forge3.ini
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/forge3.ini >/dev/null || fail "forge3: the member could not submit"
wait_run forge3 succeeded 30
[ -f "$TEST_TMP/state/runs/forge3/forge/attempt-1/pl-stage/events.wrote" ] ||
	fail "forge3: the program could not write beside its stage process (the test proves nothing)"
[ "$(db "SELECT count(*) FROM vals v JOIN runs u ON u.id = v.run_id WHERE u.name = 'forge3'
	AND v.key = 'gate.verdict'")" = 0 ] || fail "forge3: a forged stage value was stored"
ev=$(db "SELECT group_concat(type || ' ' || data, char(10)) FROM events WHERE run = 'forge3' AND
	(type = 'job.verdict' OR data LIKE '%forged%')")
[ -z "$ev" ] || fail "forge3: forged stage lines were published: $ev"
[ -z "$(db "SELECT kind FROM outbox WHERE body LIKE '%\"run\":\"forge3\"%' AND kind IN
	('gate.verdict', 'job.failed')")" ] || fail "forge3: notifications from the forged stage lines"
[ "$(stat -c %U "$TEST_TMP/state/runs/forge3/forge/attempt-1/.shim/pl-stage/events")" = root ] ||
	fail "forge3: the stage's events file is not the daemon's"
note "a member's program cannot write its stage process's own lines"
kill -0 "$PL_PID" || fail "the daemon died"
integrity_ok
events_gapless
echo ok
