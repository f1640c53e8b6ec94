#!/bin/bash
# ollama/bake-cases.sh: a bake's per-case reuse, against the REAL Ollama
# (tests/lib.sh: ollama_start) and the tiny fixture GGUF. Two tags, the
# candidate's and the incumbent's, each baked in the same run on the same
# case file, and a gate between them (pipeline.ini(5) bake, REUSE). Three
# cases added to the case file: the job keys miss, and each bake sends
# only the three new cases to the server (its own requests counted in the
# server's log), takes the other cases' rows, every pass, from the first
# run's bakes as they were stored, and the gate gives a verdict on the new
# case set. What changes an answer reuses nothing: another system prompt,
# the tag at another manifest; nor does reuse = no, on the job or in [run].
# A member's bakes run in a stage process as the member and take only
# from the member's own runs: the first none of root's, the second the
# first's.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/bake.sh"
. "$TOP/tests/lib/member.sh"
trap 'pl_stop; ollama_stop' EXIT
cd "$TEST_TMP"
tiny_gguf "$TEST_TMP/a.gguf" 1234
tiny_gguf "$TEST_TMP/b.gguf" 5678
ollama_start
tmpl=$(sed '1,/^FROM/d' "$TOP/etc/Modelfile.tmpl")
ollama_create router:bc "$TEST_TMP/a.gguf" "$tmpl"
ollama_create router:bi "$TEST_TMP/b.gguf" "$tmpl"
member_daemon

bake_section() {	# bake_section NAME MODEL CASES SYSTEM [LINE]
	cat <<INI
[$1]
stage = bake
backend = ollama
url = $OURL
model = $2
cases = $3
system = $4
capabilities = $BAKE_DATA/capabilities.txt
stats = $BAKE_DATA/stats.json
num_ctx = 1024
max_tokens = 24
passes = 2
${5:-}

INI
}
# spec RUN CASES SYSTEM [BAKE-LINE [RUN-LINE]]: with the incumbent's bake
# and the gate when BAKE-LINE is empty.
spec() {
	printf '[run]\nname = %s\n%s\n\n' "$1" "${5:-}"
	bake_section bake router:bc "$2" "$3" "${4:-}"
	[ -n "${4:-}${5:-}" ] && return
	bake_section bake-inc router:bi "$2" "$3"
	printf '[gate]\nafter = bake, bake-inc\ncandidate = bake\nincumbent = bake-inc\nmin_fair_cases = 1\n'
}
val() {	# val RUN JOB KEY
	db "SELECT v.value FROM vals v JOIN jobs j ON j.id = v.job_id JOIN runs r ON r.id = v.run_id
	    WHERE r.name = '$1' AND j.name = '$2' AND v.key = '$3' ORDER BY v.id DESC LIMIT 1"
}
msg() {	# msg RUN JOB: the job's message
	db "SELECT j.message FROM jobs j JOIN runs r ON r.id = j.run_id
	    WHERE r.name = '$1' AND j.name = '$2'"
}
chats() { grep -c 'POST *"/api/chat"' "$TEST_TMP/ollama/serve.log"; }
submit() {	# submit RUN [CMD...]: RUN.ini submitted (by CMD, else root), waited for; the server's chats counted
	local n0 r=$1
	shift
	n0=$(chats)
	${1+"$@"} "$PIPELINECTL" -f "$PL_CONF" submit "$TEST_TMP/$r.ini" >/dev/null || fail "submit $r"
	for _ in $(seq 1 3000); do
		case "$(run_state "$r")" in succeeded|failed|rejected|cancelled) break;; esac
		sleep 0.1
	done
	CHATS=$(($(chats) - n0))
}

cp "$BAKE_DATA/cases.jsonl" cases.jsonl
cp "$BAKE_DATA/system.txt" system.txt
n=$(grep -c . cases.jsonl)
spec c1 "$TEST_TMP/cases.jsonl" "$TEST_TMP/system.txt" > c1.ini
submit c1
for j in bake bake-inc; do
	[ "$(job_state c1 $j)" = succeeded ] || { pctl logs c1 $j | tail; fail "c1: $j is $(job_state c1 $j)"; }
	[ "$(val c1 $j bake.reuse)" = "0 of $n cases reused, $n run" ] ||
	    fail "c1 $j: bake.reuse is \"$(val c1 $j bake.reuse)\""
done
full=$CHATS
note "c1: $full chat requests for two bakes of $n cases, 2 passes"

# Three cases added (the first three again, reworded): only they run.
/usr/bin/python3 - cases.jsonl <<'PY' || fail "three more cases"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
with open(sys.argv[1], "a") as f:
    for c in lines[:3]:
        f.write(json.dumps(dict(c, id=c["id"] + "-again", user="please " + c["user"])) + "\n")
PY
spec c2 "$TEST_TMP/cases.jsonl" "$TEST_TMP/system.txt" > c2.ini
submit c2
for j in bake bake-inc; do
	[ "$(job_state c2 $j)" = succeeded ] || { pctl logs c2 $j | tail; fail "c2: $j is $(job_state c2 $j)"; }
	[ "$(val c2 $j bake.reuse)" = "$n of $((n + 3)) cases reused from c1/$j, 3 run" ] ||
	    fail "c2 $j: bake.reuse is \"$(val c2 $j bake.reuse)\""
	pctl logs c2 $j | grep -q "$n of $((n + 3)) cases reused from c1/$j, 3 run" ||
	    fail "c2 $j: its log does not say what it reused"
	msg "c2" $j | grep -q "^$n of $((n + 3)) cases reused from c1/$j, 3 run; ran: input cases: " ||
	    fail "c2 $j: its message is \"$(msg c2 $j)\""
	# Every reused row is the stored one; the summary holds every case.
	for id in $(/usr/bin/python3 -c 'import json,sys; [print(json.loads(l)["id"]) for l in open(sys.argv[1]) if l.strip()]' "$BAKE_DATA/cases.jsonl"); do
		[ "$(val c2 $j "case/$id")" = "$(val c1 $j "case/$id")" ] ||
		    { val c1 $j "case/$id"; val c2 $j "case/$id"; fail "c2 $j: the row of $id is not c1's"; }
	done
	val c2 $j bake.summary | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
assert len(s["rows"]) == int(sys.argv[1]) + 3, s["rows"].keys()
assert s["cases_reused"] == int(sys.argv[1]) and s["cases_run"] == 3, s
assert "ran" in s["speed_note"], s["speed_note"]' "$n" || fail "c2 $j: its summary"
done
# Three cases, two passes, two bakes: twelve answers, and whatever else
# a bake asks (its load) as c1's did.
[ "$CHATS" -eq $((full - n * 4 + 12)) ] || fail "c2: $CHATS chat requests, c1 made $full: wanted $((full - n * 4 + 12))"
case "$(job_state c2 gate)" in
succeeded|rejected) ;;
*) pctl logs c2 gate | tail; fail "c2: the gate is $(job_state c2 gate)";;
esac
val c2 gate gate.verdict | grep -q '"verdict"' || fail "c2: no verdict stored"
[ "$(val c2 bake bake.case_set)" = "$(val c2 bake-inc bake.case_set)" ] || fail "c2: the bakes' case sets differ"
[ "$(val c2 bake bake.case_set)" != "$(val c1 bake bake.case_set)" ] || fail "c2: the case set is c1's"
note "c2: $CHATS chat requests; gate $(job_state c2 gate)"

# Another stats (none: every case held out): the job's key misses, every
# case is taken, none asked (nothing loaded, speed not measured), and
# each row's held-out is made from this job's stats.
spec c7 "$TEST_TMP/cases.jsonl" "$TEST_TMP/system.txt" "max_errors = 0" |
    sed 's#^stats = .*#stats = none#' > c7.ini
submit c7
[ "$(job_state c7 bake)" = succeeded ] || { pctl logs c7 bake | tail; fail "c7: bake is $(job_state c7 bake)"; }
[ "$(val c7 bake bake.reuse)" = "$((n + 3)) of $((n + 3)) cases reused from c2/bake, 0 run" ] ||
    fail "c7: bake.reuse is \"$(val c7 bake bake.reuse)\""
[ "$CHATS" -eq 0 ] || fail "c7: $CHATS chat requests, none wanted"
val c7 bake bake.summary | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
assert s["speed_note"].startswith("speed not measured"), s["speed_note"]
assert not s["speed_comparable"] and s["cases_run"] == 0, s
assert s["held_out_cases"] == len(s["rows"]) and all(r[0] & 2 for r in s["rows"].values()), s' ||
    fail "c7: its summary"
val c2 bake bake.summary | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
assert not all(r[0] & 2 for r in s["rows"].values())' || fail "c2: every case held out (the fixture stats hold some)"

# none_taken RUN WHY: RUN's bake, submitted, ran every case itself.
none_taken() {
	submit "$1"
	[ "$(job_state "$1" bake)" = succeeded ] || fail "$1: bake is $(job_state "$1" bake)"
	[ "$(val "$1" bake bake.reuse)" = "0 of $((n + 3)) cases reused, $((n + 3)) run" ] ||
	    fail "$1 ($2): bake.reuse is \"$(val "$1" bake bake.reuse)\""
}

# Another system prompt: nothing is taken.
{ cat system.txt; echo "Answer briefly."; } > system2.txt
spec c3 "$TEST_TMP/cases.jsonl" "$TEST_TMP/system2.txt" "max_errors = 0" > c3.ini
none_taken c3 "another system prompt"

# reuse = no on the job, then in [run]: the same spec as c2's bake, which
# would be reused whole, runs every case.
spec c4 "$TEST_TMP/cases.jsonl" "$TEST_TMP/system.txt" "reuse = no" > c4.ini
none_taken c4 "reuse = no"
spec c5 "$TEST_TMP/cases.jsonl" "$TEST_TMP/system.txt" "" "reuse = no" > c5.ini
none_taken c5 "[run] reuse = no"

# The tag at another manifest (created again with another parameter),
# its old runner unloaded (the bake refuses a runner of another manifest).
ollama_create router:bc "$TEST_TMP/a.gguf" "$tmpl
PARAMETER temperature 0.5"
curl -sf "$OURL/api/generate" -d '{"model": "router:bc", "keep_alive": 0}' >/dev/null ||
    fail "unloading router:bc"
spec c6 "$TEST_TMP/cases.jsonl" "$TEST_TMP/system.txt" "max_errors = 0" > c6.ini
none_taken c6 "another manifest"

# A member: its first bake may read none of root's runs (c6's bake has
# its identity), so it takes nothing; its second, three cases more,
# takes the first's rows in its stage process.
spec m1 "$TEST_TMP/cases.jsonl" "$TEST_TMP/system.txt" "max_errors = 0" > m1.ini
submit m1 as_member
[ "$(job_state m1 bake)" = succeeded ] || { pctl logs m1 bake | tail; fail "m1: bake is $(job_state m1 bake)"; }
[ "$(val m1 bake bake.reuse)" = "0 of $((n + 3)) cases reused, $((n + 3)) run" ] ||
    fail "m1: bake.reuse is \"$(val m1 bake bake.reuse)\" (a member took root's rows)"
head -n 3 cases.jsonl | sed 's/"id": *"\([^"]*\)"/"id": "\1-m"/' > m.jsonl
cat cases.jsonl >> m.jsonl
spec m2 "$TEST_TMP/m.jsonl" "$TEST_TMP/system.txt" "max_errors = 0" > m2.ini
submit m2 as_member
[ "$(val m2 bake bake.reuse)" = "$((n + 3)) of $((n + 6)) cases reused from m1/bake, 3 run" ] ||
    { pctl logs m2 bake | tail; fail "m2: bake.reuse is \"$(val m2 bake bake.reuse)\""; }
msg m2 bake | grep -q "^$((n + 3)) of $((n + 6)) cases reused from m1/bake, 3 run; " ||
    fail "m2: its message is \"$(msg m2 bake)\""
[ -f "$TEST_TMP/state/runs/m2/bake/attempt-1.stage.json" ] ||
    fail "m2's bake did not run in a stage process"
integrity_ok
echo "ollama/bake-cases: ok"
