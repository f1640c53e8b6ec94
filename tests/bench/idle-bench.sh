#!/bin/bash
# idle-bench.sh: an idle daemon's RSS and CPU over 60 s (nothing polls:
# the target is ~0% CPU). It has a finished run in its store.
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${SECS:-60}
export TEST_TMP=$(mktemp -d /tmp/idlebench.XXXXXX)
. "$TOP/tests/lib.sh"
pl_conf "log_level = warn"
pl_start
pctl submit "$TOP/etc/examples/hello.ini" >/dev/null
pctl watch hello --plain >/dev/null
ticks() { awk '{print $14 + $15}' "/proc/$PL_PID/stat"; }
hz=$(getconf CLK_TCK)
c0=$(ticks); sleep "$SECS"; c1=$(ticks)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$PL_PID/status")
ctx=$(awk '/voluntary_ctxt_switches/ && !/non/ {print $2}' "/proc/$PL_PID/status")
awk -v c="$((c1 - c0))" -v hz="$hz" -v s="$SECS" -v rss="$rss" -v ctx="$ctx" 'BEGIN{
	printf "idle: %d s, CPU %.3f%% (%d ticks), RSS %.1f MB, voluntary context switches %d\n",
	    s, 100 * c / hz / s, c, rss / 1024, ctx }'
pl_stop
rm -rf "$TEST_TMP"
