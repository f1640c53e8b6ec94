#!/bin/bash
# tensor_fix when its input shrinks or is rewritten while the stage reads it (an operator
# overwrites the checkpoint, a disk error): the job fails with a message
# naming the file, leaves no output and no manifest, and the process goes
# on: by hand (`pipelinectl stage`) and in the daemon, which still answers
# and runs the next jobs.
#
# Deterministic, with no hook in the stage: the checkpoint's config.json is
# a FIFO. The stage reads it (for the Gemma 3 counts) after it has opened
# and checked model.safetensors and before it maps and copies anything, and
# blocks there until the test writes it. When the FIFO is opened, the test
# truncates model.safetensors, then hands over the config:
#   - cut to its header: the first pages the hashing touches are gone, and
#     the mapped read raises SIGBUS, which the stage's guard catches;
#   - cut by one byte, within the last page: the mapping still reads
#     (zeros), the copy comes back short, and the stage says the file
#     changed size;
#   - not cut, but its last byte written again (an overwrite in place):
#     copy and hashes go through, and the stage says the file was
#     modified while it was read.
# Should the stage read config.json before the checkpoint one day, the
# header check fails instead and so does this test (with that message).
# In the daemon, a convert job in between installs its plugin's SIGBUS
# handler over tensor_fix's (each plugin has its own copy of the guard):
# the second truncated run checks that the handlers chain.
. "$(dirname "$0")/../../lib.sh"
G=$TOP/tests/fixtures/gen_gemma3.py
/usr/bin/python3 "$G" "$TEST_TMP/orig" --layout causal || fail "fixture"
cp "$TEST_TMP/orig/config.json" "$TEST_TMP/config.saved"
size=$(stat -c %s "$TEST_TMP/orig/model.safetensors")
hdr=$(/usr/bin/python3 -c 'import os, sys
sys.path.insert(0, os.path.join(os.environ["TOP"], "jobs"))
import pljob
print(pljob.read_safetensors_header(sys.argv[1])[2])' "$TEST_TMP/orig/model.safetensors")
page=$(getconf PAGESIZE)
[ $((size - hdr)) -gt $((4 * page)) ] || fail "the fixture's data fits in a few pages: nothing to cut"
[ $(((size - 1) % page)) -ne 0 ] || fail "the fixture ends one byte into a page"
MSG="the file changed size or could not be read while it was being read (SIGBUS)"

# fixture NAME: a copy of the checkpoint whose config.json is a FIFO.
fixture() {
	rm -rf "$TEST_TMP/$1"
	cp -r "$TEST_TMP/orig" "$TEST_TMP/$1" && rm "$TEST_TMP/$1/config.json" &&
		mkfifo "$TEST_TMP/$1/config.json" || fail "fixture $1"
}

# cut_when_read DIR BYTES: once the stage opens DIR/config.json, truncate
# DIR/model.safetensors to BYTES (or, with BYTES "rewrite", write its last
# byte again, with a modification time a second later than it had: a
# clock tick can be coarser than the test), then write the config and
# close.
cut_when_read() {
	/usr/bin/python3 - "$1" "$2" "$TEST_TMP/config.saved" <<'PY' || fail "cut_when_read $1"
import errno, os, sys, time
d, cut, saved = sys.argv[1], sys.argv[2], sys.argv[3]
deadline = time.time() + 60
while True:
    try:
        fd = os.open(os.path.join(d, "config.json"), os.O_WRONLY | os.O_NONBLOCK)
        break
    except OSError as e:
        if e.errno != errno.ENXIO or time.time() > deadline:
            sys.exit("the stage never read %s/config.json: %s" % (d, e))
        time.sleep(0.01)
m = os.path.join(d, "model.safetensors")
if cut == "rewrite":
    st = os.stat(m)
    with open(m, "r+b") as f:
        f.seek(-1, 2)
        b = f.read(1)
        f.seek(-1, 2)
        f.write(b)
    os.utime(m, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
else:
    os.truncate(m, int(cut))
os.set_blocking(fd, True)
os.write(fd, open(saved, "rb").read())
os.close(fd)
PY
}

# nothing_left DIR: no output, manifest or temporary under DIR.
nothing_left() {
	[ -z "$(ls -A "$1" 2>/dev/null)" ] || { ls -la "$1"; fail "files left behind in $1"; }
}

cd "$TEST_TMP" || exit 1
mkdir -p hand

# by_hand NAME CUT MESSAGE: tensor_fix by hand on a fixture cut to CUT
# bytes (or "rewrite": written again in place) while it reads fails, its
# output names the file and says MESSAGE, and nothing of it is left.
by_hand() {
	fixture "$1"
	"$PIPELINECTL" stage tensor_fix input="$TEST_TMP/$1" output=hand/fixed drop= rename= \
	    >"$1.out" 2>&1 &
	local pid=$!
	cut_when_read "$TEST_TMP/$1" "$2"
	wait "$pid" && { cat "$1.out"; fail "tensor_fix succeeded on a file changed under it ($1)"; }
	grep -qF "tensor_fix: $TEST_TMP/$1/model.safetensors: $3" "$1.out" ||
		{ cat "$1.out"; fail "$1: the message"; }
	nothing_left hand
}
# Cut to the header: SIGBUS under the guard.
by_hand h1 "$hdr" "$MSG"
# One byte less: the copy comes back short.
by_hand h2 $((size - 1)) "the file changed size while it was being read ($size bytes when it was opened, $((size - 1)) now)"
# Written again in place: the whole copy, then the check.
by_hand h3 rewrite "the file was modified while it was being read"
note "by hand: SIGBUS, a short copy and a rewrite, each named, nothing left"

# The daemon.
pl_conf
pl_start
O=$TEST_TMP/out
mkdir -p "$O" specs
# spec NAME INPUT: a run of one tensor_fix job into $O/NAME.
spec() {
	cat > "specs/$1.ini" <<INI
[tensor_fix]
input = $2
output = $O/$1
drop =
rename =
INI
}
# cut_run NAME: a tensor_fix run on a fixture cut to its header fails with
# the message; nothing of it is left; the daemon answers.
cut_run() {
	fixture "$1"
	spec "$1" "$TEST_TMP/$1"
	pctl submit "specs/$1.ini" >/dev/null || fail "submit $1"
	cut_when_read "$TEST_TMP/$1" "$hdr"
	wait_run "$1" failed 60
	msg=$(db "SELECT message FROM jobs WHERE name = 'tensor_fix' AND
		run_id = (SELECT id FROM runs WHERE name = '$1')")
	case "$msg" in *"$TEST_TMP/$1/model.safetensors: $MSG"*) ;;
	*) pctl status "$1"; fail "run $1: the message is \"$msg\"";; esac
	nothing_left "$O"
	kill -0 "$PL_PID" 2>/dev/null || fail "pipelined died"
	pctl status >/dev/null || fail "pipelined does not answer after $1"
}
cut_run d1
note "daemon: the job failed with the file named, the daemon answers"

# A convert job (in-process: it opens its GGUF under its own plugin's guard).
cat > specs/conv.ini <<INI
[convert]
input = $TEST_TMP/orig
output = $TEST_TMP/conv/model.gguf
INI
mkdir -p conv
pctl submit specs/conv.ini >/dev/null || fail "submit conv"
wait_run conv succeeded 120
cut_run d2
note "daemon: again after a convert job (the plugins' handlers chained)"

# And the daemon still runs a whole tensor_fix.
spec ok "$TEST_TMP/orig"
pctl submit specs/ok.ini >/dev/null || fail "submit ok"
wait_run ok succeeded 60
[ -f "$O/ok/model.safetensors" ] && [ -f "$O/ok.manifest.json" ] || fail "no output from the run after"
integrity_ok
events_gapless
note "daemon: a whole tensor_fix after the failures"
