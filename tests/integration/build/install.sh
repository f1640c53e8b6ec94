#!/bin/bash
# make install PREFIX= DESTDIR= puts every binary, plugin, job program,
# header and man page in place, the installed daemon runs a job with its
# defaults found relative to PREFIX, and make uninstall removes it all.
. "$(dirname "$0")/../../lib.sh"
D=$TEST_TMP/dest
make -s -C "$TOP" install PREFIX=/opt/pl DESTDIR="$D" >/dev/null || fail "make install"
for f in sbin/pipelined bin/pipelinectl lib/pipelined/pipeline-shim lib/pipelined/pipeline-stage lib/pipelined/plugins/exec.so \
    include/pipeline/plugin.h share/man/man8/pipelined.8 share/man/man1/pipelinectl.1 \
    share/man/man5/pipeline.ini.5 share/pipelined/examples/hello.ini \
    share/pipelined/examples/tiny.ini share/pipelined/examples/tiny/cases.jsonl \
    share/bash-completion/completions/pipelinectl share/zsh/site-functions/_pipelinectl; do
	[ -e "$D/opt/pl/$f" ] || fail "make install did not install $f"
done
[ -e "$D/opt/pl/lib/pipelined/jobs/pljob/__init__.py" ] || fail "job programs not installed"
# The installed tree runs (paths given explicitly: PREFIX here is only a
# prefix inside DESTDIR).
pl_conf
sed -i "s|^plugin_dir = .*|plugin_dir = $D/opt/pl/lib/pipelined/plugins|; s|^shim = .*|shim = $D/opt/pl/lib/pipelined/pipeline-shim|" "$PL_CONF"
PIPELINED=$D/opt/pl/sbin/pipelined
PIPELINECTL=$D/opt/pl/bin/pipelinectl
pl_start
pctl submit "$D/opt/pl/share/pipelined/examples/hello.ini" >/dev/null || fail "submit to the installed daemon"
wait_run hello succeeded 30
# The installed bash completion offers the run's jobs, from the installed
# pipelinectl.
jobs=$(PIPELINED_CONF=$PL_CONF PATH="$D/opt/pl/bin:$PATH" bash -c '. "$1"
	COMP_WORDS=(pipelinectl logs hello ""); COMP_CWORD=3; _pipelinectl
	printf "%s\n" "${COMPREPLY[@]}"' _ "$D/opt/pl/share/bash-completion/completions/pipelinectl" | sort | tr '\n' ' ')
[ "$jobs" = "greet join left right " ] || fail "the installed bash completion offers \"$jobs\" for logs hello"
pl_stop
make -s -C "$TOP" uninstall PREFIX=/opt/pl DESTDIR="$D" >/dev/null || fail "make uninstall"
left=$(find "$D" -type f | head)
[ -z "$left" ] || fail "make uninstall left files: $left"
echo ok
