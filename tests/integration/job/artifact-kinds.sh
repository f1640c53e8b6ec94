#!/bin/bash
# Artifacts a member's exec program names that the daemon must not hash
# as they are: each is opened O_RDONLY|O_NONBLOCK|O_NOFOLLOW, fstat'd and
# refused unless a regular file or a directory of them; the hash is capped
# (artifact_max_size) and stopped by cancel. Before, a FIFO blocked the
# job thread for ever (cancel, timeout and a restart did not free it) and
# a huge sparse file held it for as long as its reading took.
#   1. a FIFO: the job fails within seconds, its message naming the
#      artifact and the FIFO; the daemon answers meanwhile;
#   2. a link to the program's own file, a directory holding a FIFO:
#      refused the same way, naming the entry;
#   3. a 2 GiB sparse file over a cap of 1 MiB: refused, naming the cap;
#   4. a 1 TiB sparse file under the cap (the default, 256 GiB, raised):
#      the hash runs, a cancel ends the job within seconds, and so does
#      the job's timeout (3s);
#   5. a regular file and a directory: registered with their digests.
# Against a real pipelined running as root; the runs are nobody's.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
. "$TOP/tests/lib/member.sh"
member_daemon "artifact_max_size = 2T"
jobmsg() { db "SELECT message FROM jobs WHERE run_id = (SELECT id FROM runs WHERE name = '$1')"; }
art() { echo "echo '{\"type\":\"artifact\",\"name\":\"$1\",\"path\":\"$2\"}' >> \$PL_EVENTS"; }
# ended_within RUN STATE SECS: the run is STATE within SECS seconds.
ended_within() {
	local t0=$SECONDS
	wait_run "$1" "$2" "$3"
	note "$1: $2 after $((SECONDS - t0))s: $(jobmsg "$1")"
}

# 1. A FIFO.
member_exec fifo "mkfifo f && $(art pipe f) && sleep 60"
for _ in $(seq 50); do [ -p "$TEST_TMP/state/runs/fifo/x/work/f" ] && break; sleep 0.1; done
pctl status >/dev/null || fail "the daemon does not answer while the FIFO is read"
ended_within fifo failed 10
case "$(jobmsg fifo)" in *"artifact pipe: "*"/work/f: a FIFO, not a regular file or a directory: refused"*) ;;
	*) fail "fifo: the message does not name the FIFO: $(jobmsg fifo)";; esac

# 2. A link; a directory with a FIFO in it.
member_exec link "echo hi > real && ln -s real l && $(art linked l) && sleep 60"
ended_within link failed 10
case "$(jobmsg link)" in *"artifact linked: "*"/work/l: a symbolic link, not a regular file or a directory: refused"*) ;;
	*) fail "link: $(jobmsg link)";; esac
member_exec dirfifo "mkdir -p d/sub && echo a > d/a && mkfifo d/sub/p && $(art tree d) && sleep 60"
ended_within dirfifo failed 10
case "$(jobmsg dirfifo)" in *"artifact tree: "*"/work/d/sub/p: a FIFO, not a regular file or a directory: refused"*) ;;
	*) fail "dirfifo: $(jobmsg dirfifo)";; esac

# 3. Over the cap.
pl_stop
member_daemon "artifact_max_size = 1M"
member_exec big "truncate -s 2G big && $(art big big)"
ended_within big failed 10
case "$(jobmsg big)" in *"artifact big: "*"/work/big: 2147483648 bytes, over the cap of 1048576 bytes an artifact may have (artifact_max_size): refused"*) ;;
	*) fail "big: $(jobmsg big)";; esac

# 4. A huge file under the cap: cancel stops the hash.
pl_stop
member_daemon "artifact_max_size = 2T"
member_exec huge "truncate -s 1T huge && $(art huge huge) && sleep 60"
for _ in $(seq 50); do grep -q artifact "$TEST_TMP/state/runs/huge/x/attempt-1/main/events" 2>/dev/null && break; sleep 0.1; done
sleep 1
pctl status >/dev/null || fail "the daemon does not answer while a huge artifact is hashed"
as_member "$PIPELINECTL" -f "$PL_CONF" cancel huge >/dev/null || fail "huge: the member could not cancel"
ended_within huge cancelled 10
# The job's timeout stops it as well.
printf '[run]\nname = slow\n[x]\nstage = exec\ntimeout = 3s\ncommand = %s\n' \
    "truncate -s 1T huge && $(art huge huge) && sleep 60" > specs/slow.ini
chmod 0644 specs/slow.ini
as_member "$PIPELINECTL" -f "$PL_CONF" submit specs/slow.ini >/dev/null || fail "slow: submit"
ended_within slow failed 15
case "$(jobmsg slow)" in *"timed out after 3s"*) ;; *) fail "slow: $(jobmsg slow)";; esac

# 5. What is registered.
member_exec good "mkdir -p d/s && echo a > d/a && echo b > d/s/b && echo f > f && $(art file f) && $(art dir d)"
wait_run good succeeded 20
w=$TEST_TMP/state/runs/good/x/work
[ "$(db "SELECT sha256 FROM artifacts WHERE name = 'file'")" = "$(sha256sum < "$w/f" | cut -d' ' -f1)" ] ||
	fail "good: the file's digest"
want=$(cd "$w/d" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | while read -r f; do
	printf '%s  %s\n' "$(sha256sum < "$f" | cut -d' ' -f1)" "$f"; done | sha256sum | cut -d' ' -f1)
[ "$(db "SELECT sha256 || ' ' || size FROM artifacts WHERE name = 'dir'")" = "$want 4" ] ||
	fail "good: the directory's digest: $(db "SELECT sha256, size FROM artifacts WHERE name = 'dir'") want $want 4"
kill -0 "$PL_PID" || fail "the daemon died"
integrity_ok
events_gapless
echo ok
