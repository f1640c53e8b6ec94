#!/bin/bash
# Every exit status pipelinectl(1) documents is the tool's: the list of
# its EXIT STATUS section (parsed from the page) is ctl.h's, and each
# status is provoked here and comes out as documented, for each cause the
# page names that a test can bring about (the daemon down, a usage error,
# a spec that does not check for check, submit and doctor, a refused
# request, a stage that fails by hand, no such run or job, runs that
# succeed, fail, are cancelled and are rejected, for watch and status).
# The statuses watch gives are the ones pipelinectl(1)'s watch,
# pipelined(8) and README.md say. Runs against the real daemon and CLI of this tree.
. "$(dirname "$0")/../../lib.sh"
cd "$TEST_TMP"
M=$TOP/man/pipelinectl.1
doc=$(awk '/^\.Sh EXIT STATUS/ { on = 1; next } /^\.Sh / { on = 0 } on && /^\.It [0-9]+$/ { print $2 }' "$M" | tr '\n' ' ')
tool=$(sed -n 's/^\tCTL_[A-Z]* = \([0-9]*\),.*/\1/p' "$TOP/daemon/ctl/ctl.h" | tr '\n' ' ')
[ -n "$doc" ] || fail "no .It N entries under EXIT STATUS in $M"
[ "$doc" = "$tool" ] || fail "pipelinectl(1) documents the statuses $doc, ctl.h has $tool"
declare -A seen
# want N WHY CMD...: CMD exits N.
want() {
	local n=$1 why=$2
	shift 2
	"$@" >want.out 2>want.err
	local rc=$?
	[ "$rc" = "$n" ] || fail "$why ($*): exit $rc, documented $n (stdout: $(head -c 300 want.out); stderr: $(head -c 300 want.err))"
	seen[$n]=1
}
pl_conf
want 5 "the daemon not running" pctl status
want 5 "watch, the daemon not running" pctl watch x
want 2 "an unknown verb" pctl stauts
want 2 "an unknown option" pctl status --bogus
want 2 "a missing argument" pctl logs
want 2 "an unknown stage" pctl stage nosuch
want 2 "a bad key=value to stage" pctl stage exec command
want 1 "a stage run by hand failed" pctl stage exec -w "$TEST_TMP/w" command=false
printf '[run]\nname = typo\n[a]\nstage = exec\ncommand = true\nretries = many\n' >typo.ini
want 1 "check: a spec that does not check" pctl check typo.ini
want 1 "doctor: a spec that does not check" pctl doctor typo.ini
want 1 "a local file failed" pctl check nosuch.ini

pl_start
/usr/bin/python3 - "$TEST_TMP" <<'PY'
import json, sys
# Recorded bakes for the gate: the candidate passes half the fair slice
# the incumbent passes whole (as web/page's).
for name, npass in (("cand", 12), ("inc", 24)):
    rows = {"c%02d" % i: [2 | 8, 3, 7 if i < npass else 0, 0, 1.0, "route"] for i in range(24)}
    json.dump({"case_set": "S", "passes": 3, "model": "router:" + name, "complete": True,
               "speed_comparable": True, "rows": rows}, open("%s/%s.json" % (sys.argv[1], name), "w"))
PY
printf '[run]\nname = good\n[a]\nstage = exec\ncommand = true\n' >good.ini
printf '[run]\nname = bad\n[a]\nstage = exec\ncommand = exit 3\n' >bad.ini
printf '[run]\nname = long\n[a]\nstage = exec\ncommand = sleep 60\n' >long.ini
printf '[run]\nname = rej\n[gate]\ncandidate = %s/cand.json\nincumbent = %s/inc.json\n' "$TEST_TMP" "$TEST_TMP" >rej.ini
for r in good bad long rej; do pctl submit $r.ini >/dev/null || fail "submit $r"; done
want 1 "submit: a spec that does not check" pctl submit typo.ini
want 4 "no such run" pctl status nosuch
want 4 "no such job" pctl logs good nosuch
wait_run good succeeded 30
wait_run bad failed 30
wait_run rej rejected 30
for _ in $(seq 50); do [ "$(job_state long a)" = running ] && break; sleep 0.1; done
pctl cancel long >/dev/null || fail "cancel long"
wait_run long cancelled 30
want 1 "a refused request (cancel of a run not running)" pctl cancel good
declare -A w
for r in good:0:succeeded bad:6:failed long:7:cancelled rej:3:rejected; do
	IFS=: read -r run n what <<<"$r"
	want "$n" "status of a run that $what" pctl status "$run"
	want "$n" "watch of a run that $what" pctl watch "$run"
	want "$n" "watch --json of a run that $what" pctl --json watch "$run"
	w[$what]=$n
done
for n in $doc; do
	[ -n "${seen[$n]:-}" ] || fail "exit status $n of pipelinectl(1) is provoked by nothing here"
done
# What the other places say watch exits with.
said=$(tr '\n' ' ' <"$M" | grep -o 'exits 0 only when the run succeeded, [0-9] when it failed, [0-9] when it was cancelled, [0-9] when it was rejected')
[ "$said" = "exits ${w[succeeded]} only when the run succeeded, ${w[failed]} when it failed, ${w[cancelled]} when it was cancelled, ${w[rejected]} when it was rejected" ] ||
    fail "pipelinectl(1)'s watch says otherwise: ${said:-nothing}"
said=$(tr '\n' ' ' <"$TOP/man/pipelined.8" | grep -o 'exit [0-9] for a run that succeeded, [0-9] for one that failed, [0-9] for one that was cancelled and [0-9] for one that was rejected')
[ "$said" = "exit ${w[succeeded]} for a run that succeeded, ${w[failed]} for one that failed, ${w[cancelled]} for one that was cancelled and ${w[rejected]} for one that was rejected" ] ||
    fail "pipelined(8) says otherwise: ${said:-nothing}"
said=$(grep -o 'pipelinectl watch .*# .*; [0-9] succeeded, [0-9] failed, [0-9] cancelled, [0-9] rejected' "$TOP/README.md" |
    sed 's/.*; //')
[ "$said" = "${w[succeeded]} succeeded, ${w[failed]} failed, ${w[cancelled]} cancelled, ${w[rejected]} rejected" ] ||
    fail "README.md's watch line says otherwise: ${said:-nothing}"
pl_stop
echo ok
