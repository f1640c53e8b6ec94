#!/bin/bash
# pipelinectl follows the conventions of the tools operators use:
#   - --help, help VERB and VERB --help print to standard output and exit 0,
#     each the golden text under tests/golden/help/ (one per verb, and
#     pipelined --help); --version on both programs;
#   - an unknown option, a missing or extra argument is a usage error
#     (exit 2) naming the verb and the option or argument; a missing JOB
#     lists the run's jobs;
#   - errors name the verb typed; exit 4 for no such run or job, 5 for no
#     daemon, 6 for a failed run, 3 rejected, 1 other errors;
#   - with --json every error is one shape on standard output,
#     {"ok":false,"verb","code","exit","error","errors"}, the daemon down too;
#   - tables have headers and sized columns, sizes are human unless
#     --bytes, values of a misspelt job are an error with a did-you-mean;
#   - a retry that queues nothing changes nothing (no finish-time rewrite,
#     no second "succeeded" line in the log) and says so;
#   - colour only on a terminal, never with NO_COLOR or when piped;
#   - the bash completion offers verbs, runs and a run's jobs.
# Runs against the real daemon and CLI of this tree.
. "$(dirname "$0")/../../lib.sh"
G=$TOP/tests/golden/help
cd "$TEST_TMP"

# json_is FILE PYEXPR: the JSON on FILE's first line satisfies PYEXPR (o).
json_is() {
	/usr/bin/python3 -c 'import json,sys; o=json.loads(open(sys.argv[1]).readline()); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"
}
# err_shape FILE VERB CODE EXIT: the one JSON error shape.
err_shape() {
	json_is "$1" "o['ok'] is False and o['verb'] == '$2' and o['code'] == '$3' and o['exit'] == $4 and isinstance(o['error'], str) and o['error'] and o['errors'] and all(isinstance(e, str) for e in o['errors']) and set(o) == {'ok','verb','code','exit','error','errors'}" ||
	    fail "$2: not the JSON error shape with code $3, exit $4: $(cat "$1")"
}
# rc_is WANT DESC CMD...: the command exits WANT.
rc_is() {
	local want=$1 desc=$2; shift 2
	"$@" >rc.out 2>rc.err
	local rc=$?
	[ "$rc" = "$want" ] || fail "$desc: exit $rc, want $want (stdout: $(cat rc.out); stderr: $(cat rc.err))"
}

# ---- help, on stdout, exit 0, golden ---------------------------------------
pl_conf "http_listen = 127.0.0.1:$(free_port)"
"$PIPELINECTL" --help >h.out 2>h.err || fail "pipelinectl --help exited $?"
[ -s h.err ] && fail "pipelinectl --help wrote to stderr"
diff -u "$G/pipelinectl.txt" h.out || fail "pipelinectl --help differs from tests/golden/help/pipelinectl.txt"
"$PIPELINECTL" -h | cmp -s - "$G/pipelinectl.txt" || fail "-h is not --help"
"$PIPELINECTL" help | cmp -s - "$G/pipelinectl.txt" || fail "help is not --help"
verbs=$("$PIPELINECTL" _complete)
[ "$(echo "$verbs" | wc -l)" -ge 18 ] || fail "_complete lists too few verbs: $verbs"
for v in $verbs; do
	[ -f "$G/$v.txt" ] || fail "no golden help for $v (tests/golden/help/$v.txt)"
	"$PIPELINECTL" "$v" --help >v.out 2>v.err || fail "$v --help exited $?"
	[ -s v.err ] && fail "$v --help wrote to stderr: $(cat v.err)"
	diff -u "$G/$v.txt" v.out || fail "$v --help differs from its golden file"
	"$PIPELINECTL" help "$v" | cmp -s - "$G/$v.txt" || fail "help $v differs from $v --help"
	grep -q "^  $v" h.out || fail "the usage does not list $v"
done
# Every option a verb takes is in its help.
for o in "logs -f" "logs --raw" "watch --plain" "artifacts --bytes" "plot --size" "plot --job" "plot --vs" \
    "report --vs" "submit --name" "stage -w" "stage --list"; do
	set -- $o
	grep -q -- "^  $2 " "$G/$1.txt" || fail "$1 --help does not list $2"
done
"$PIPELINED" --help >d.out 2>d.err || fail "pipelined --help exited $?"
diff -u "$G/pipelined.txt" d.out || fail "pipelined --help differs from its golden file"
"$PIPELINED" --version | grep -Eq '^pipelined [0-9]+\.[0-9]+' || fail "pipelined --version"
"$PIPELINECTL" --version | grep -Eq '^pipelinectl [0-9]+\.[0-9]+' || fail "pipelinectl --version"
rc_is 2 "pipelined --bogus" "$PIPELINED" --bogus

# ---- usage errors: exit 2, naming the verb and what is wrong -----------------
rc_is 2 "status --all" pctl status --all
grep -q "^pipelinectl: status: unknown option --all" rc.err || fail "status --all: $(cat rc.err)"
rc_is 2 "watch --bogus" pctl watch x --bogus
grep -q "watch: unknown option --bogus" rc.err || fail "watch --bogus: $(cat rc.err)"
rc_is 2 "logs without RUN" pctl logs
grep -q "logs: missing RUN" rc.err || fail "logs: $(cat rc.err)"
rc_is 2 "cancel a b" pctl cancel a b
grep -q 'cancel: unexpected argument "b"' rc.err || fail "cancel a b: $(cat rc.err)"
rc_is 2 "unknown verb" pctl stauts
grep -q 'did you mean "status"' rc.err || fail "stauts: $(cat rc.err)"
rc_is 2 "plot without -o" pctl plot r
grep -q "plot: missing option -o FILE" rc.err || fail "plot: $(cat rc.err)"
rc_is 2 "submit --help=x" pctl submit --help=x
pctl --json status --all >j.out; err_shape j.out status EUSAGE 2

# ---- the daemon down: exit 5, the JSON shape on stdout ------------------------
for v in "status" "list" "watch r" "logs r j" "values r" "artifacts r" "submit $TOP/etc/examples/hello.ini" \
    "retry r" "cancel r" "web"; do
	set -- $v
	rc_is 5 "$1 with no daemon" pctl "$@"
	grep -q "^pipelinectl: $1: pipelined is not running" rc.err || fail "$1 with no daemon: $(cat rc.err)"
	pctl --json "$@" >j.out 2>j.err
	err_shape j.out "$1" ENODAEMON 5
done

# ---- a daemon, a run that succeeds and one that fails --------------------------
pl_start
cat >bad.ini <<'INI'
[run]
name = bad
[build]
stage = exec
command = echo "the compiler said no" >&2; exit 3
INI
pctl submit "$TOP/etc/examples/hello.ini" >/dev/null || fail "submit hello"
pctl submit bad.ini >/dev/null || fail "submit bad"
wait_run hello succeeded 30
wait_run bad failed 30
rc_is 0 "status hello" pctl status hello
rc_is 6 "status of a failed run" pctl status bad
rc_is 6 "watch of a failed run" pctl watch bad
grep -q "build: the command exited with status 3" rc.out || fail "watch does not show the failed job's message: $(cat rc.out)"
grep -q "pipelinectl logs bad build" rc.out || fail "watch does not name the logs command: $(cat rc.out)"
rc_is 4 "watch nosuch" pctl watch nosuch
grep -q "^pipelinectl: watch: no run nosuch" rc.err || fail "watch nosuch: $(cat rc.err)"
rc_is 4 "report nosuch" pctl report nosuch
grep -q "^pipelinectl: report: no run nosuch" rc.err || fail "report nosuch: $(cat rc.err)"
rc_is 4 "values hello nosuchjob" pctl values hello nosuchjob
grep -q "values: no job nosuchjob in run hello" rc.err || fail "values nosuchjob: $(cat rc.err)"
rc_is 4 "values hello joni" pctl values hello joni
grep -q 'did you mean "join"' rc.err || fail "values joni: $(cat rc.err)"
rc_is 4 "logs hello nosuch" pctl logs hello nosuch
rc_is 4 "logs hello gret" pctl logs hello gret
grep -q 'logs: no job gret in run hello; did you mean "greet"' rc.err || fail "logs gret: $(cat rc.err)"
rc_is 2 "logs without JOB" pctl logs hello
grep -q "logs: missing JOB.*the jobs of run hello: greet, left, right, join" rc.err ||
    fail "logs RUN does not list the run's jobs: $(cat rc.err)"
printf '[run]\nname = bad\nprevious = bad\n[build]\nstage = exec\ncommand = true\n' >self.ini
rc_is 1 "submit a previous naming the run itself" pctl submit self.ini
grep -q "previous = bad names this run.*(EINVAL)" rc.err || fail "submit: $(cat rc.err)"
[ "$(grep -c . rc.err)" = 1 ] || fail "submit's error is not one line: $(cat rc.err)"
# --json: the same shape, from the daemon's refusals and pipelinectl's own.
pctl --json watch nosuch >j.out; err_shape j.out watch ENOENT 4
pctl --json values hello nosuchjob >j.out; err_shape j.out values ENOENT 4
pctl --json submit self.ini >j.out; err_shape j.out submit EINVAL 1
pctl --json submit nosuch.ini >j.out; err_shape j.out submit ELOCAL 1
printf '[run]\nname = x\n[a]\nstage = exce\n' >typo.ini
pctl --json check typo.ini >j.out; err_shape j.out check EINVAL 1
grep -q 'did you mean' j.out || fail "check --json: $(cat j.out)"
printf 'not a gguf file\n' >bad.gguf
pctl --json gguf bad.gguf >j.out; err_shape j.out gguf EINVAL 1
pctl --json plot hello --job nosuch -o x.png >j.out; err_shape j.out plot ENOENT 4
# A job without a loss to draw: one error, the shape with --json, nothing left.
pctl --json plot hello --job greet -o x.png >j.out; err_shape j.out plot ENODATA 1
rc_is 1 "plot of a job without a loss" pctl plot hello --job greet -o x.png
grep -qx "pipelinectl: plot: job greet of run hello has no loss metric yet" rc.err ||
    fail "plot of a job without a loss: $(cat rc.err)"
[ ! -e x.png ] || fail "plot left x.png"
pctl --json check "$TOP/etc/examples/hello.ini" >j.out
json_is j.out "o['ok'] is True and o['run'] == 'hello' and o['errors'] == []" || fail "check --json OK: $(cat j.out)"
pctl --json stage --list >j.out
json_is j.out "'exec' in [s['name'] for s in o['stages']]" || fail "stage --list --json: $(cat j.out)"

# ---- tables ---------------------------------------------------------------
pctl list >list.out
head -1 list.out | grep -Eq '^RUN +STATE +JOBS +SUBMITTED +DURATION +SIZE +PREVIOUS$' || fail "list header: $(head -1 list.out)"
grep -Eq '^hello +succeeded +4/4 +[0-9-]+ [0-9:]+ +[0-9]+s' list.out || fail "list row: $(cat list.out)"
pctl status hello >st.out
grep -Eq '^JOB +STAGE +STATE +TRY +DURATION +PROGRESS +MESSAGE$' st.out || fail "status header: $(cat st.out)"
grep -Eq '^left +exec +succeeded +1 +[0-9]+s +3/3 step' st.out || fail "status row: $(cat st.out)"
grep -q "ok\|FAILED" st.out && fail "status speaks another vocabulary than list: $(cat st.out)"
pctl artifacts hello >a.out
head -1 a.out | grep -Eq '^JOB +NAME +SIZE +SHA256 +PATH$' || fail "artifacts header: $(cat a.out)"
grep -Eq '^join +result +5B ' a.out || fail "artifacts human size: $(cat a.out)"
pctl artifacts hello --bytes | grep -Eq '^join +result +5 ' || fail "artifacts --bytes"
pctl values hello >v.out
head -1 v.out | grep -Eq '^JOB +KEY +VALUE$' || fail "values header: $(cat v.out)"
grep -q $'\033' list.out st.out a.out && fail "colour written to a pipe"
# On a terminal (script(1) gives one): colour, unless NO_COLOR.
script -qec "$PIPELINECTL -f $PL_CONF status hello" /dev/null >tty.out
grep -q $'\033\[32msucceeded' tty.out || fail "no colour on a terminal: $(cat -v tty.out)"
NO_COLOR=1 script -qec "$PIPELINECTL -f $PL_CONF status hello" /dev/null >tty.out
grep -q $'\033' tty.out && fail "colour despite NO_COLOR: $(cat -v tty.out)"

# ---- a retry that queues nothing changes nothing -------------------------
fin=$(db "SELECT finished FROM runs WHERE name = 'hello'")
# The daemon's log: log_file, and standard error under -d.
nsucc() { cat "$TEST_TMP"/pipelined.log "$TEST_TMP"/pipelined.out 2>/dev/null | grep -c "run hello succeeded"; }
nsucc=$(nsucc)
[ "$nsucc" -ge 1 ] || fail "the daemon's log does not say run hello succeeded"
nev=$(db "SELECT count(*) FROM events")
rc_is 0 "retry of a run that succeeded" pctl retry hello
grep -q "nothing to retry" rc.out || fail "retry does not say it queued nothing: $(cat rc.out)"
sleep 1
[ "$(db "SELECT finished FROM runs WHERE name = 'hello'")" = "$fin" ] || fail "retry rewrote the finish time"
[ "$(nsucc)" = "$nsucc" ] || fail "retry logged a second 'succeeded'"
[ "$(db "SELECT count(*) FROM events")" = "$nev" ] || fail "retry stored events"
[ "$(run_state hello)" = succeeded ] || fail "retry changed the run's state"

# ---- completion -------------------------------------------------------------
comp() {
	PIPELINED_CONF=$PL_CONF PATH="$TOP/daemon:$PATH" bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _pipelinectl; printf "%s\n" "${COMPREPLY[@]}" | sort' _ \
	    "$TOP/etc/completion/pipelinectl.bash" "$@"
}
[ "$(comp pipelinectl wat)" = watch ] || fail "bash completion of a verb: $(comp pipelinectl wat)"
[ "$(comp pipelinectl logs hello "" | tr '\n' ' ')" = "greet join left right " ] || fail "bash completion of jobs: $(comp pipelinectl logs hello "")"
comp pipelinectl status "" | grep -qx bad || fail "bash completion of runs: $(comp pipelinectl status "")"
[ "$(comp pipelinectl artifacts hello --b)" = --bytes ] || fail "bash completion of options"
command -v zsh >/dev/null || fail "zsh is not installed (etc/deps.sh installs it)"
zsh -n "$TOP/etc/completion/_pipelinectl" || fail "_pipelinectl does not parse in zsh"
# zsh: the candidates _pipelinectl hands compadd (stubbed to print them;
# zsh's own compadd filters them by the prefix typed).
cat >zcomp.zsh <<'ZSH'
compadd() { [[ $1 == -- ]] && shift; print -l -- "$@"; }
_files() { print -- "<files>"; }
source "$1"; shift
words=("$@"); CURRENT=$#
_pipelinectl
ZSH
zcomp() { PIPELINED_CONF=$PL_CONF PATH="$TOP/daemon:$PATH" zsh -f zcomp.zsh "$TOP/etc/completion/_pipelinectl" "$@" | grep . | sort | tr '\n' ' '; }
[ "$(zcomp pipelinectl logs hello "")" = "greet join left right " ] || fail "zsh completion of jobs: $(zcomp pipelinectl logs hello "")"
zcomp pipelinectl wat | grep -q " watch " || fail "zsh completion of verbs: $(zcomp pipelinectl wat)"
zcomp pipelinectl status "" | grep -q "bad hello" || fail "zsh completion of runs: $(zcomp pipelinectl status "")"
[ "$(zcomp pipelinectl check "")" = "<files> " ] || fail "zsh completion of a spec: $(zcomp pipelinectl check "")"
pl_stop
echo ok
