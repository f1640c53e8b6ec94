#!/bin/bash
# pipelined.conf: -n checks it, -nv prints the effective configuration
# (diffed against a golden file), every error names file:line and key,
# SIGHUP reloads and keeps the old configuration when the new one fails;
# a group without user means _pipelined, refused when there is none;
# lines over inih's 200 bytes (a deep state directory, long sbatch
# options) are read whole, as in run specs, and their errors name their line.
. "$(dirname "$0")/../../lib.sh"
pl_conf "max_jobs = 3" "kill_grace = 5s"
out=$("$PIPELINED" -n -f "$PL_CONF") || fail "-n on a good config: $out"
[ "$out" = "configuration OK" ] || fail "-n said: $out"
"$PIPELINED" -nv -f "$PL_CONF" | sed "s|$TEST_TMP|@TMP@|g; s|$TOP|@TOP@|g" > "$TEST_TMP/nv.out"
diff -u "$TOP/tests/golden/pipelined-nv.conf" "$TEST_TMP/nv.out" || fail "-nv differs from tests/golden/pipelined-nv.conf"
# Started as root with a group and no user, the daemon process is
# _pipelined (the golden file's user, pl_conf's group); with no such user
# it is refused, naming the key, not started as root: seen through an
# /etc/passwd without _pipelined, bound over the real one in a mount
# namespace of the check's own.
if [ "$(id -u)" = 0 ]; then
	grep -v '^_pipelined:' /etc/passwd > "$TEST_TMP/passwd"
	out=$(unshare -m sh -c 'mount --bind "$1" /etc/passwd && exec "$2" -n -f "$3"' sh \
	    "$TEST_TMP/passwd" "$PIPELINED" "$PL_CONF" 2>&1) && fail "no _pipelined, group set: accepted: $out"
	echo "$out" | grep -qF "pipelined.conf: user: unset beside group, admin_group or job_user, where it means \"_pipelined\", which is no such user" ||
		fail "no _pipelined, group set: $out"
fi

bad=$TEST_TMP/bad.conf
cat > "$bad" <<CONF
[daemon]
state_dir = $TEST_TMP/state
max_jobs = many
log_level = loud
frobs = 3
kill_grace = soon
[resources]
gpu = -1
[nosuch]
x = 1
CONF
out=$("$PIPELINED" -n -f "$bad" 2>&1) && fail "-n accepted a bad config"
for want in "bad.conf:3: max_jobs: bad value \"many\"" "bad.conf:4: log_level: bad value \"loud\"" \
    "bad.conf:5: frobs: unknown key in [daemon]" "bad.conf:6: kill_grace: bad value \"soon\"" \
    "bad.conf:8: gpu: capacity must be a non-negative integer" "bad.conf:10: x: unknown section [nosuch]"; do
	echo "$out" | grep -qF "$want" || fail "missing error \"$want\" in: $out"
done
[ "$(echo "$out" | wc -l)" = 6 ] || fail "expected 6 errors, got: $out"

# SIGHUP: a good new configuration takes effect (the gpu capacity grows),
# a broken one is refused and the running one kept.
pl_start
cat > "$TEST_TMP/two.ini" <<INI
[a]
stage = exec
resources = gpu:2
command = true
INI
pctl submit "$TEST_TMP/two.ini" 2>&1 | grep -q "needs 2 of \"gpu\" but its capacity is 1" || fail "capacity check"
sed -i 's/^gpu = 1/gpu = 2/' "$PL_CONF"
kill -HUP "$PL_PID"; sleep 0.5
grep -q "reload: configuration .* loaded" "$TEST_TMP/pipelined.out" || fail "reload not logged"
pctl submit "$TEST_TMP/two.ini" >/dev/null || fail "capacity not reloaded"
wait_run two succeeded
printf '[daemon]\nmax_jobs = zero\n' >> "$PL_CONF"
kill -HUP "$PL_PID"; sleep 0.5
grep -q "does not parse; keeping the running configuration" "$TEST_TMP/pipelined.out" || fail "bad reload not refused"
"$PIPELINECTL" -s "$TEST_TMP/run/control.sock" status >/dev/null || fail "daemon not serving after a bad reload"
# A second daemon on the same configuration refuses to start, naming the
# first (config/startup tests the detached form and the lock after kill -9).
sed -i '/^max_jobs = zero/d' "$PL_CONF"
"$PIPELINED" -d -f "$PL_CONF" > "$TEST_TMP/second.out" 2>&1 && fail "a second daemon started"
grep -q "another pipelined runs (pid $PL_PID)" "$TEST_TMP/second.out" || fail "second daemon: $(cat "$TEST_TMP/second.out")"
pl_stop
[ ! -e "$TEST_TMP/run/control.sock" ] || fail "SIGTERM left the socket"

# Long lines: a 300-byte path, 400 bytes of sbatch options with a ';'
# inside, then an error after them that still names its own line.
deep=$TEST_TMP/$(printf 'd%.0s' $(seq 1 150))/$(printf 'e%.0s' $(seq 1 150))
opts="--comment=$(printf 'x%.0s' $(seq 1 380));echo"
long=$TEST_TMP/long.conf
printf '[daemon]\nstate_dir = %s\n[slurm]\nsbatch_options = %s\n[daemon]\nmax_jobs = many\n' "$deep" "$opts" >"$long"
[ "$(sed -n 2p "$long" | wc -c)" -gt 300 ] && [ "$(sed -n 4p "$long" | wc -c)" -gt 400 ] || fail "the long lines are short"
out=$("$PIPELINED" -n -f "$long" 2>&1) && fail "-n accepted max_jobs = many after long lines"
[ "$out" = "$long:6: max_jobs: bad value \"many\" (expected an integer)" ] ||
    echo "$out" | grep -qF "long.conf:6: max_jobs: bad value \"many\"" || fail "long lines: $out"
[ "$(echo "$out" | wc -l)" = 1 ] || fail "long lines gave other errors: $out"
sed -i '$d' "$long"
"$PIPELINED" -nv -f "$long" >"$TEST_TMP/long.nv" 2>&1 || { cat "$TEST_TMP/long.nv"; fail "-n refused long lines"; }
grep -qxF "state_dir = $deep" "$TEST_TMP/long.nv" || fail "the long state_dir was not read whole"
grep -qxF "sbatch_options = $opts" "$TEST_TMP/long.nv" || fail "the long sbatch_options were not read whole"
# A path longer than the system's limit once resolved is refused at its
# line, never cut short into the name of another file.
huge=$(printf 'p%.0s' $(seq 1 4100))
printf '[daemon]\nlog_level = info\nlog_file = %s\n' "$huge" >"$TEST_TMP/huge.conf"
out=$("$PIPELINED" -n -f "$TEST_TMP/huge.conf" 2>&1) && fail "-n accepted a path over PATH_MAX"
echo "$out" | grep -q "huge.conf:3: log_file: the path is [0-9]* bytes long resolved, over the limit of 4095" ||
	fail "a path over PATH_MAX: $out"
echo ok
