#!/bin/bash
# Links planted where a stage reads or writes a spec's paths:
# the file helpers of plugins/lib/io open an input's last component
# without following a link unless the link's owner owns what it points at
# (or is the caller: root's own links), refuse an output directory that is
# a link, and make their temporaries with O_EXCL and O_NOFOLLOW. Shown
# with tensor_fix, for root's own run (the stage in a stage process as
# root, the daemon being split; the daemon walks its paths before, and a
# refusal is the job's message) and for a run of nobody, a member of the daemon's group (the stage in
# its own process, as nobody); the links are planted by another user
# (chown -h), as one who can write the directory would:
#   1. root's run, input directory holding notes.txt -> a root-only file,
#      the link nobody's: before, the secret was copied into root's
#      output; now the stage fails naming the link;
#   2. nobody's run, notes.txt -> a world-readable file of root, the link
#      another user's (daemon): refused as well, in the stage process;
#   3. links whose owner owns the target (root's config.json -> root's
#      file in root's run; nobody's weights -> nobody's blob, as a
#      Hugging Face cache lays them out) are followed: both runs succeed;
#   4. root's run, manifest in a sticky directory nobody writes, where nobody
#      planted the temporary's name (.NAME.tmp.PID) as a link to a
#      root-owned file: before, root wrote the manifest through it; now
#      the file is intact and the manifest written;
#   5. root's run, output naming a link (planted by nobody) to a
#      directory of root's: refused, the link and the directory intact;
#   6. root's run through a directory above the last component that is
#      nobody's link to a root-only directory: before, followed (the
#      root-only weights read); now refused, naming the link
#      (path_trusted: every component of a path a stage uses with the
#      daemon's rights is walked, as OpenSSH's safe_path does);
#   7. root's run through a directory nobody owns, or one anyone writes
#      (not sticky): refused, naming the directory (its owner, or anyone,
#      could swap what lies below between the check and the use); a
#      sticky one (/tmp's mode) is allowed, as in 4;
#   8. root's run, a path whose directory is not there yet in a sticky
#      directory anyone writes (common8/new8/out): before, the walk
#      stopped at the missing component and passed (another user could
#      make new8, or a link by that name, before the stage does); now
#      refused, naming it. A job's artifact used by a later job
#      (JOB.ARTIFACT) is walked again: root's exec job leaves its model
#      at common8/d/m; d then becomes nobody's link to a root-only
#      directory holding an m of its own (as a member who made d after the
#      check would swap it), before the next job reads it; before, root
#      copied the root-only notes.txt (0600) into its output (0644); now
#      refused, naming the link.
# Root's runs write to out-root/, root's own; out/ is anyone's, for
# nobody's runs. Against a real pipelined running as root.
. "$(dirname "$0")/../../lib.sh"
trap 'pl_kill9 2>/dev/null' EXIT
. "$TOP/tests/lib/member.sh"
member_setup "$TOP/plugins/tensor_fix.so" "$TOP/plugins/exec.so"

root_run() { pctl submit "specs/$1.ini" >/dev/null || fail "$1: root could not submit"; wait_run "$1" "$2" 60; }
# refused_at RUN PATH MESSAGE WHAT: root's run fails, PATH (under
# $TEST_TMP) not made, its message holding MESSAGE.
refused_at() {
	root_run "$1" failed
	[ -e "$2" ] && fail "$1: root made $2 ($4)"
	case "$(jobmsg "$1")" in *"$3"*) ;; *) fail "$1: the message does not say \"$3\": $(jobmsg "$1")";; esac
	note "$4: $(jobmsg "$1")"
}
# copied NAME SECRETFILE: whether the secret's text is anywhere under out/NAME.
copied() { [ -e "$R/$1" ] && grep -rqF "$(head -1 "$2")" "$R/$1" 2>/dev/null; }

# 1. root's run, notes.txt -> a root-only file, the link nobody's.
echo "root secret $RANDOM$RANDOM" > secret; chmod 0600 secret
cp -r orig in1; ln -s "$TEST_TMP/secret" in1/notes.txt; chown -h nobody in1/notes.txt
spec r1 "input = $TEST_TMP/in1" "output = $R/r1"
root_run r1 failed
copied r1 secret && fail "r1: the root-only file came into root's output through nobody's link"
case "$(jobmsg r1)" in *"in1/notes.txt: a symbolic link to a file of another owner, not followed"*) ;;
	*) fail "r1: the message does not name the link: $(jobmsg r1)";; esac
note "root's run, nobody's link to a root-only file: $(jobmsg r1)"

# 2. nobody's run, notes.txt -> a world-readable file of root, the link daemon's.
echo "root's public text $RANDOM" > public; chmod 0644 public
cp -r orig in2; ln -s "$TEST_TMP/public" in2/notes.txt; chown -h daemon in2/notes.txt; chmod -R a+rX in2
spec m2 "input = $TEST_TMP/in2" "output = $O/m2"
member_run m2 failed
copied m2 public && fail "m2: another user's link was followed in nobody's stage process"
case "$(jobmsg m2)" in *"in2/notes.txt: a symbolic link to a file of another owner, not followed"*) ;;
	*) fail "m2: the message does not name the link: $(jobmsg m2)";; esac
note "nobody's run, daemon's link to root's file: $(jobmsg m2)"

# 3. links whose owner owns the target are followed.
cp -r orig in3; mv in3/config.json config.root.json; ln -s "$TEST_TMP/config.root.json" in3/config.json
ln -s "$TEST_TMP" lnk   # root's own link above the last component
spec r3 "input = $TEST_TMP/lnk/in3" "output = $R/r3"
root_run r3 succeeded
cmp -s "$R/r3/config.json" config.root.json || fail "r3: root's own link was not followed"
mkdir -p in4 blobs; cp orig/* in4/; mv in4/model.safetensors blobs/weights
ln -s "$TEST_TMP/blobs/weights" in4/model.safetensors
chown -R nobody in4 blobs; chown -h nobody in4/model.safetensors; chmod -R a+rX in4 blobs
spec m4 "input = $TEST_TMP/in4" "output = $O/m4"
member_run m4 succeeded
[ -f "$O/m4/model.safetensors" ] && [ ! -L "$O/m4/model.safetensors" ] || fail "m4: no weights out"
note "links whose owner owns the target: followed (root's config.json and directory link, nobody's weights blob)"

# 4. the manifest's temporary planted as a link by nobody.
echo intact > victim; chmod 0644 victim
mkdir -m 1777 common
as_member ln -s "$TEST_TMP/victim" "common/.r4.manifest.json.tmp.$PL_PID" || fail "r4: plant"
spec r4 "input = $TEST_TMP/orig" "output = $R/r4" "manifest = $TEST_TMP/common/r4.manifest.json"
root_run r4 succeeded
[ "$(cat victim)" = intact ] || fail "r4: root wrote its manifest through nobody's link: $(head -c 80 victim)"
[ -f common/r4.manifest.json ] && [ ! -L common/r4.manifest.json ] || fail "r4: no manifest"
note "a temporary's name planted as a link: not written through, the manifest written"

# 5. output naming a link (nobody's) to a directory of root's.
mkdir -p rootdir; echo keep > rootdir/keep
ln -s "$TEST_TMP/rootdir" "$R/r5"; chown -h nobody "$R/r5"
spec r5 "input = $TEST_TMP/orig" "output = $R/r5"
root_run r5 failed
[ -L "$R/r5" ] && [ "$(cat rootdir/keep)" = keep ] && [ ! -e rootdir/model.safetensors ] ||
	fail "r5: the linked output or its target changed: $(ls -la "$R/r5" rootdir)"
case "$(jobmsg r5)" in *"$R/r5: a symbolic link of uid $nobody to what another owns, not followed"*) ;;
	*) fail "r5: the message: $(jobmsg r5)";; esac
note "output naming a link: $(jobmsg r5)"

# 6. a directory above the last component: nobody's link to a root-only one.
mkdir -m 0700 rootonly6; cp -r orig rootonly6/m; chmod 0600 rootonly6/m/*
mkdir -m 0755 pub; ln -s "$TEST_TMP/rootonly6" pub/x; chown -h nobody pub/x
spec r6 "input = $TEST_TMP/pub/x/m" "output = $R/r6"
root_run r6 failed
[ -e "$R/r6" ] && fail "r6: root's run read through nobody's link above the last component"
case "$(jobmsg r6)" in *"$TEST_TMP/pub/x: a symbolic link of uid $nobody to what another owns"*) ;;
	*) fail "r6: the message does not name the link: $(jobmsg r6)";; esac
note "a link above the last component: $(jobmsg r6)"

# 7. a directory of nobody's above, and one anyone writes (not sticky).
mkdir nbhome; cp -r orig nbhome/m; chown -R nobody nbhome; chmod -R a+rX nbhome
spec r7 "input = $TEST_TMP/nbhome/m" "output = $R/r7"
root_run r7 failed
case "$(jobmsg r7)" in *"$TEST_TMP/nbhome: a directory of another owner"*) ;;
	*) fail "r7: the message does not name the directory: $(jobmsg r7)";; esac
note "a directory of another owner above: $(jobmsg r7)"
mkdir -m 0777 anyone
spec r7b "input = $TEST_TMP/orig" "output = $TEST_TMP/anyone/r7b"
refused_at r7b anyone/r7b "$TEST_TMP/anyone: a directory writable by its group or others" \
	"a directory anyone writes"

# 8. A missing directory in a sticky one; a job's artifact walked again.
mkdir -m 1777 common8
spec r8 "input = $TEST_TMP/orig" "output = $TEST_TMP/common8/new8/out"
refused_at r8 common8/new8 "$TEST_TMP/common8/new8: not there yet, in $TEST_TMP/common8, a directory others may write" \
	"a missing directory in a sticky one"
echo "root secret 8 $RANDOM$RANDOM" > secret8; chmod 0600 secret8
mkdir -m 0700 rootonly8; cp -r orig rootonly8/m; cp secret8 rootonly8/m/notes.txt; chmod 0600 rootonly8/m/*
cat > specs/r8b.ini <<INI
[make]
stage = exec
command = mkdir -p $TEST_TMP/common8/d && cp -r $TEST_TMP/orig $TEST_TMP/common8/d/m && echo '{"type":"artifact","name":"model","path":"$TEST_TMP/common8/d/m"}' >> \$PL_EVENTS
[hold]
stage = exec
after = make
command = /bin/sh -c 'while [ ! -e $TEST_TMP/go8 ]; do sleep 0.1; done'
[fix]
stage = tensor_fix
after = make hold
input = make.model
output = $R/r8b
drop =
rename =
INI
chmod 0644 specs/r8b.ini
pctl submit specs/r8b.ini >/dev/null || fail "r8b: root could not submit"
for _ in $(seq 200); do [ "$(job_state r8b make)" = succeeded ] && break; sleep 0.1; done
[ "$(job_state r8b make)" = succeeded ] || fail "r8b: the job that makes the artifact: $(job_state r8b make)"
# What a member who made d after the check could do (an entry of its own
# in the sticky directory): swap d for its link to a root-only directory.
chown -R nobody common8/d; mv common8/d common8/d.old
ln -s "$TEST_TMP/rootonly8" common8/d; chown -h nobody common8/d
touch go8
wait_run r8b failed 60
copied r8b secret8 && fail "r8b: the root-only notes.txt came into root's output through nobody's directory"
case "$(db "SELECT message FROM jobs WHERE name = 'fix' AND run_id = (SELECT id FROM runs WHERE name = 'r8b')")" in
	*"input: $TEST_TMP/common8/d/m: $TEST_TMP/common8/d: a symbolic link of uid $nobody to what another owns"*) ;;
	*) fail "r8b: the message does not name the directory: $(db "SELECT name, message FROM jobs")";; esac
note "a job's artifact walked again: $(db "SELECT message FROM jobs WHERE name = 'fix' AND run_id = (SELECT id FROM runs WHERE name = 'r8b')")"
kill -0 "$PL_PID" || fail "the daemon died"
integrity_ok
events_gapless
echo ok
