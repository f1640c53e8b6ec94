#!/bin/bash
# A member's job cannot run code as root through its environment. An exec
# job of a non-root member of the daemon's group sets LD_PRELOAD to a
# library of its own whose constructor records the effective uid it runs
# with, plus entries large enough that the run's shim cannot take the
# request in one socket message (the daemon used to start pipeline-shim
# itself, as root, with the job's environment then). The library must
# never run as uid 0: the job runs as the member with its environment (the
# environment is data for the shim, applied in the child after it has
# become the member), or fails with the size and the limit named. Against
# a real pipelined running as root.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/member.sh"
trap 'pl_kill9 2>/dev/null' EXIT
command -v cc >/dev/null || { echo "no C compiler"; exit 77; }
O=$TEST_TMP/out; mkdir -p "$O"; chmod 0777 "$O"
chmod 0755 "$TEST_TMP"
cat > "$TEST_TMP/evil.c" <<C
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void
evil(void)
{
	char path[256];
	snprintf(path, sizeof(path), "$O/euid.%d", (int)getpid());
	FILE *f = fopen(path, "w");
	if (f != NULL) {
		fprintf(f, "%d\n", (int)geteuid());
		fclose(f);
	}
}
C
cc -shared -fPIC -o "$TEST_TMP/evil.so" "$TEST_TMP/evil.c" || fail "cannot build the library"
chmod 0755 "$TEST_TMP/evil.so"
# max_spec_bytes: the huge spec (3 MB of environment) must reach the shim.
pl_conf "group = plsubmit" "max_spec_bytes = 4M"
pl_start
chmod 0755 "$TEST_TMP/run"; chmod 0666 "$TEST_TMP/run/control.sock"

# spec NAME N: an exec job with LD_PRELOAD and N entries of 100,000 bytes.
spec() {
	local big; big=$(head -c 100000 /dev/zero | tr '\0' x)
	{
		echo "[run]"; echo "name = $1"
		echo "[j]"; echo "stage = exec"
		printf 'env = LD_PRELOAD=%s' "$TEST_TMP/evil.so"
		for i in $(seq 1 "$2"); do printf ' PLBIG%d=%s' "$i" "$big"; done
		echo
		echo "command = id -u > $O/$1.uid"
	} > "$TEST_TMP/$1.ini"
	chmod 0644 "$TEST_TMP/$1.ini"
}
# roots: the records the library left that say uid 0.
roots() { grep -lx 0 "$O"/euid.* 2>/dev/null; }

# 400 KB of environment: more than one socket message holds, less than
# the kernel's limit for a program's arguments and environment.
spec big 4
as_member "$PIPELINECTL" -f "$PL_CONF" submit "$TEST_TMP/big.ini" >/dev/null || fail "the member could not submit"
st=$(wait_end big 60)
note "big: the run ended $st; the library ran with euids: $(cat "$O"/euid.* 2>/dev/null | sort | uniq -c | tr -s ' \n' ' ')"
[ -z "$(roots)" ] || fail "the member's preloaded library ran as root ($(roots | wc -l) times)"
[ "$st" = succeeded ] || fail "big: the run ended $st: $(cat "$TEST_TMP/state/runs/big/j/job.log")"
[ "$(cat "$O/big.uid")" = "$nobody" ] || fail "big: the job ran as uid $(cat "$O/big.uid")"
grep -qx "$nobody" "$O"/euid.* || fail "big: the library never ran in the job (as the member)"

# 3 MB: more than the kernel takes. The job fails, the log naming the size
# and the limit; the library still never runs as root.
rm -f "$O"/euid.*
spec huge 30
as_member "$PIPELINECTL" -f "$PL_CONF" submit "$TEST_TMP/huge.ini" >/dev/null || fail "the member could not submit huge"
st=$(wait_end huge 60)
note "huge: the run ended $st; the library ran with euids: $(cat "$O"/euid.* 2>/dev/null | sort | uniq -c | tr -s ' \n' ' ')"
[ -z "$(roots)" ] || fail "huge: the member's preloaded library ran as root ($(roots | wc -l) times)"
[ "$st" = failed ] || fail "huge: the run ended $st"
L=$TEST_TMP/state/runs/huge/j/job.log
note "huge: $(grep -m1 -i "bytes" "$L")"
grep -q "[0-9]* bytes.*limit" "$L" || fail "huge: the job log does not name the size and the limit: $(cat "$L")"
pl_stop
echo ok
