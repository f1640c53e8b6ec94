#!/bin/bash
# make install PREFIX= DESTDIR= after a plain make (no rebuild) puts every
# binary, plugin, job program, header, man page, example and the Modelfile
# template in place, a configuration (never over one that is there), a
# systemd unit whose paths follow PREFIX and SYSCONFDIR, and the sysusers.d
# and tmpfiles.d files (checked by systemd-sysusers and systemd-tmpfiles
# into a root of their own). The installed daemon finds its configuration,
# plugins, shim, job programs and page from where it is installed
# (pipelined -nv, checked path by path), starts with that configuration
# (state and sockets moved under the test's directory) and runs the
# installed hello example; the installed pipelinectl finds the installed
# plugins; make uninstall removes it all but a configuration changed since.
. "$(dirname "$0")/../../lib.sh"
D=$TEST_TMP/dest
P=/opt/pl
I=$D$P
built=$(stat -c %Y "$TOP/daemon/pipelined" "$TOP/plugins/exec.so")
make -s -C "$TOP" install PREFIX=$P DESTDIR="$D" >/dev/null || fail "make install"
[ "$(stat -c %Y "$TOP/daemon/pipelined" "$TOP/plugins/exec.so")" = "$built" ] ||
    fail "make install rebuilt the programs"
for f in sbin/pipelined bin/pipelinectl lib/pipelined/pipeline-shim lib/pipelined/pipeline-stage lib/pipelined/plugins/exec.so \
    include/pipeline/plugin.h share/man/man8/pipelined.8 share/man/man1/pipelinectl.1 \
    share/man/man5/pipeline.ini.5 share/pipelined/examples/hello.ini \
    share/pipelined/examples/tiny.ini share/pipelined/examples/tiny/cases.jsonl \
    share/pipelined/Modelfile.tmpl share/pipelined/web/index.html \
    share/pipelined/pipelined.conf.example etc/pipelined.conf \
    lib/systemd/system/pipelined.service lib/sysusers.d/pipelined.conf lib/tmpfiles.d/pipelined.conf \
    share/bash-completion/completions/pipelinectl share/zsh/site-functions/_pipelinectl; do
	[ -e "$I/$f" ] || fail "make install did not install $f"
done
[ -e "$I/lib/pipelined/jobs/pljob/__init__.py" ] || fail "job programs not installed"
[ "$(stat -c %a "$I/etc/pipelined.conf")" = 640 ] || fail "the configuration is not mode 0640"

# The unit runs the installed binary on the installed configuration.
unit=$I/lib/systemd/system/pipelined.service
grep -qx "ExecStart=$P/sbin/pipelined -d -f $P/etc/pipelined.conf" "$unit" ||
    fail "the unit's ExecStart does not follow PREFIX: $(grep ExecStart= "$unit")"
grep -v "^#" "$unit" | grep "@[A-Z]*@\|/usr/local" && fail "the unit names another prefix"
grep -qx "StateDirectoryMode=0711" "$unit" || fail "the unit makes state_dir another mode than the daemon"
# systemd reads the unit without a complaint (its binary moved into
# DESTDIR, where it is for now).
sed "s|^ExecStart=$P/|ExecStart=$I/|" "$unit" >"$TEST_TMP/pipelined.service"
out=$(systemd-analyze verify --man=no "$TEST_TMP/pipelined.service" 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify: $out"
# sysusers.d makes the user _pipelined; tmpfiles.d the directories, with
# the daemon's modes.
SR=$TEST_TMP/sysroot
mkdir -p "$SR/etc"
systemd-sysusers --root="$SR" "$I/lib/sysusers.d/pipelined.conf" || fail "systemd-sysusers refused the file"
grep -q "^_pipelined:" "$SR/etc/passwd" || fail "sysusers.d made no user _pipelined: $(cat "$SR/etc/passwd")"
systemd-tmpfiles --root="$SR" --create "$I/lib/tmpfiles.d/pipelined.conf" || fail "systemd-tmpfiles refused the file"
[ "$(stat -c %a "$SR/var/lib/pipelined")" = 711 ] || fail "tmpfiles.d: state_dir mode $(stat -c %a "$SR/var/lib/pipelined")"
[ "$(stat -c %a "$SR/run/pipelined")" = 750 ] || fail "tmpfiles.d: the sockets' directory mode $(stat -c %a "$SR/run/pipelined")"

# The installed daemon, without -f: its configuration and every path from
# where it is installed (the build's PREFIX is /usr/local, or whatever
# make was given; none of it may show).
"$I/sbin/pipelined" -nv >"$TEST_TMP/nv.out" 2>&1 || fail "pipelined -n of the installed tree: $(cat "$TEST_TMP/nv.out")"
cat "$TEST_TMP/nv.out"
want() { grep -qxF "$1" "$TEST_TMP/nv.out" || fail "pipelined -nv: no \"$1\""; }
want "# $I/etc/pipelined.conf"
want "state_dir = /var/lib/pipelined"
want "control_socket = /run/pipelined/control.sock"
want "feed_socket = /run/pipelined/feed.sock"
want "plugin_dir = $I/lib/pipelined/plugins"
want "shim = $I/lib/pipelined/pipeline-shim"
want "jobs_dir = $I/lib/pipelined/jobs"
want "web_dir = $I/share/pipelined/web"
want "log_file = /var/lib/pipelined/pipelined.log"
want "configuration OK"
for d in plugin_dir jobs_dir web_dir; do
	v=$(sed -n "s/^$d = //p" "$TEST_TMP/nv.out")
	[ -d "$v" ] || fail "$d $v is not a directory"
done
[ -x "$(sed -n 's/^shim = //p' "$TEST_TMP/nv.out")" ] || fail "the shim is not executable"
# The installed pipelinectl finds the installed plugins.
"$I/bin/pipelinectl" stage --list >"$TEST_TMP/stages.out" 2>&1 || fail "installed pipelinectl stage --list"
grep -qw exec "$TEST_TMP/stages.out" || fail "the installed pipelinectl lists no exec stage: $(cat "$TEST_TMP/stages.out")"

# The installed daemon runs the installed example, its state and sockets
# under the test's directory, every other path its default.
PL_CONF=$TEST_TMP/installed.conf
mkdir -p "$TEST_TMP/state" "$TEST_TMP/run"
sed -e "s|^state_dir = .*|state_dir = $TEST_TMP/state|" \
    -e "s|^control_socket = .*|control_socket = $TEST_TMP/run/control.sock|" \
    -e "s|^feed_socket = .*|feed_socket = $TEST_TMP/run/feed.sock|" "$I/etc/pipelined.conf" >"$PL_CONF"
PIPELINED=$I/sbin/pipelined
PIPELINECTL=$I/bin/pipelinectl
pl_start
pctl check "$I/share/pipelined/examples/hello.ini" >/dev/null || fail "check of the installed hello example"
pctl submit "$I/share/pipelined/examples/hello.ini" >/dev/null || fail "submit to the installed daemon"
wait_run hello succeeded 30
grep -q "loaded [0-9]* plugins .* from $I/lib/pipelined/plugins" "$TEST_TMP/pipelined.out" ||
    fail "the daemon did not load the installed plugins"
# The installed bash completion offers the run's jobs, from the installed
# pipelinectl.
jobs=$(PIPELINED_CONF=$PL_CONF PATH="$I/bin:$PATH" bash -c '. "$1"
	COMP_WORDS=(pipelinectl logs hello ""); COMP_CWORD=3; _pipelinectl
	printf "%s\n" "${COMPREPLY[@]}"' _ "$I/share/bash-completion/completions/pipelinectl" | sort | tr '\n' ' ')
[ "$jobs" = "greet join left right " ] || fail "the installed bash completion offers \"$jobs\" for logs hello"
pl_stop

# The installed examples (etc/examples/README): hello and router/v0 check
# as installed; the tiny ones name only their missing tiny/base, which the
# source tree makes and never ships, and check whole once a Gemma 3
# checkpoint is there (the Modelfile template they name is installed).
E=$I/share/pipelined/examples
[ -e "$E/README" ] || fail "the examples' README is not installed"
for f in hello.ini router/v0.ini; do
	"$I/bin/pipelinectl" check "$E/$f" || fail "check of the installed $f"
done
for f in tiny.ini tiny/v1.ini train-slurm.ini; do
	out=$("$I/bin/pipelinectl" check "$E/$f" 2>&1) && fail "check of $f passed without tiny/base"
	echo "$out" | grep -v "base: $E/tiny/base: No such file or directory" &&
	    fail "check of the installed $f: more than the missing base"
done
/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$E/tiny/base" --seed 1234 >/dev/null || fail "gen_gemma3.py"
for f in tiny.ini tiny/v1.ini train-slurm.ini; do
	"$I/bin/pipelinectl" check "$E/$f" || fail "check of the installed $f with its base"
done
rm -r "$E/tiny/base"

# A second install keeps the operator's configuration.
echo "# the operator's" >>"$I/etc/pipelined.conf"
make -s -C "$TOP" install PREFIX=$P DESTDIR="$D" >/dev/null || fail "make install, again"
tail -1 "$I/etc/pipelined.conf" | grep -qx "# the operator's" || fail "make install overwrote the configuration"
out=$(make -s -C "$TOP" uninstall PREFIX=$P DESTDIR="$D") || fail "make uninstall"
echo "$out" | grep -q "pipelined.conf: changed since it was installed: kept" || fail "uninstall said: $out"
[ -e "$I/etc/pipelined.conf" ] || fail "make uninstall removed a changed configuration"
rm "$I/etc/pipelined.conf"
left=$(find "$D" -type f | head)
[ -z "$left" ] || fail "make uninstall left files: $left"
# An unchanged configuration goes with the rest.
make -s -C "$TOP" install PREFIX=$P DESTDIR="$D" >/dev/null && make -s -C "$TOP" uninstall PREFIX=$P DESTDIR="$D" >/dev/null ||
    fail "make install, uninstall"
left=$(find "$D" -type f | head)
[ -z "$left" ] || fail "make uninstall left files: $left"
echo ok
