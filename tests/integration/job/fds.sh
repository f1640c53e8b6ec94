#!/bin/bash
# What a job program inherits: descriptors 0, 1 and 2 and nothing else
# (pipeline-job(7) documents no other). Tested against a real pipelined
# (its run shim, pipeline-shim -G), pipelinectl stage exec (a shim of its
# own, pipeline-shim -d) and pipeline-shim -d started with descriptors of
# its own open, as a batch script may start it: each job lists
# /proc/self/fd (through a shell that opens none of its own first).
. "$(dirname "$0")/../../lib.sh"
O=$TEST_TMP/out; mkdir -p "$O"
# lister FILE: a job command that writes the shell's descriptors to FILE:
# those still open after the glob (its own directory descriptor is closed
# by then), listed before the shell opens FILE.
lister() { echo "for f in /proc/\$\$/fd/*; do [ -e \"\$f\" ] && n=\"\$n \${f##*/}\"; done; echo \$n > $1"; }
# fds FILE: what the job listed, sorted.
fds() { tr ' ' '\n' < "$1" | sort -n | tr '\n' ' ' | sed 's/ $//'; }
want="0 1 2"

pl_conf
pl_start
cat > "$TEST_TMP/fds.ini" <<INI
[a]
stage = exec
command = $(lister "$O/a")
[b]
stage = exec
after = a
command = $(lister "$O/b")
INI
pctl submit "$TEST_TMP/fds.ini" >/dev/null
wait_run fds succeeded 30
[ "$(fds "$O/a")" = "$want" ] || fail "a job under the run shim inherited fds $(fds "$O/a")"
[ "$(fds "$O/b")" = "$want" ] || fail "the run's second job inherited fds $(fds "$O/b")"
pl_stop

# pipelinectl stage exec: a shim of its own.
"$PIPELINECTL" -f "$PL_CONF" stage exec -w "$TEST_TMP/by-hand" "command=$(lister "$O/c")" \
	>"$TEST_TMP/stage.out" 2>&1 5<"$PL_CONF" || { cat "$TEST_TMP/stage.out"; fail "stage exec failed"; }
[ "$(fds "$O/c")" = "$want" ] || fail "a job of pipelinectl stage exec inherited fds $(fds "$O/c")"

# The single form, started with 5 and 7 open (not close-on-exec).
mkdir -p "$TEST_TMP/p"
"$TOP/daemon/pipeline-shim" -d "$TEST_TMP/p" -l "$TEST_TMP/p.log" -- sh -c "$(lister "$O/d")" \
	5<"$PL_CONF" 7>"$TEST_TMP/seven"
[ "$(fds "$O/d")" = "$want" ] || fail "a job of pipeline-shim -d inherited fds $(fds "$O/d")"
echo ok
