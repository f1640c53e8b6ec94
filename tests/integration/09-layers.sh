#!/bin/bash
# The layers (HACKING.md: Layers): tests/tools/check-layers.sh passes on
# the built tree, and fails, naming the file and line or the object and
# symbol, on a copy of it with each kind of violation put in:
#   - include/pipeline/plugin.h including a header of the common library;
#   - a file of plugins/common including daemon/lib/pipelined.h, and its object
#     calling the store (store_begin);
#   - a plugin including a daemon header, and its .so needing
#     sched_cancel;
#   - a call circle between daemon modules: util.o made to call the store
#     (store.o calls util.o);
#   - a module of libpld.a calling a program's function (web.o calling
#     pipelinectl.c's ctl_request).
# Runs against the real objects of the build (nm) and the compiler; no
# daemon is started.
. "$(dirname "$0")/../lib.sh"
CHECK=$TOP/tests/tools/check-layers.sh

out=$("$CHECK" "$TOP" 2>&1) || { echo "$out"; fail "check-layers fails on the tree"; }
echo "$out"

# A copy of what the check reads: sources, headers, objects, plugins.
T=$TEST_TMP/tree
mkdir -p "$T/include/pipeline" "$T/daemon" "$T/plugins/common"
cp "$TOP"/include/pipeline/*.h "$T/include/pipeline/"
cp "$TOP"/daemon/*.[cho] "$T/daemon/"
cp "$TOP"/plugins/*.c "$TOP"/plugins/*.so "$T/plugins/"
cp "$TOP"/plugins/common/*.[cho] "$T/plugins/common/"
"$CHECK" "$T" >"$TEST_TMP/copy.out" 2>&1 || { cat "$TEST_TMP/copy.out"; fail "the copy fails before anything is put in"; }

cc() { command cc -std=gnu11 -D_GNU_SOURCE -fPIC "$@"; }

# Each violation on its own copy state, then all of them together.
expect() {  # expect WHAT PATTERN...: the check fails and prints each pattern
	local what=$1; shift
	if "$CHECK" "$T" >"$TEST_TMP/bad.out" 2>&1; then
		cat "$TEST_TMP/bad.out"
		fail "$what: check-layers passed"
	fi
	for p in "$@"; do
		grep -qF -- "$p" "$TEST_TMP/bad.out" || { cat "$TEST_TMP/bad.out"; fail "$what: no \"$p\" in the report"; }
	done
	grep "^LAYERS" "$TEST_TMP/bad.out" | sed "s/^/# $what: /"
}

# 1. The ABI including the common library.
cp "$T/include/pipeline/plugin.h" "$TEST_TMP/plugin.h"
echo '#include "plcommon.h"' >>"$T/include/pipeline/plugin.h"
n=$(wc -l <"$T/include/pipeline/plugin.h")
expect "abi include" "include/pipeline/plugin.h:$n: includes \"plcommon.h\""
cp "$TEST_TMP/plugin.h" "$T/include/pipeline/plugin.h"

# 2. The common library including the daemon's header and calling it.
printf '%s\n' '#include <stddef.h>' '#include "pipelined.h"' 'int layer_probe(void);' \
    'int layer_probe(void) { return store_begin((void *)0); }' >"$T/plugins/common/layer_probe.c"
printf '%s\n' 'struct store; int store_begin(struct store *);' 'int layer_probe(void);' \
    'int layer_probe(void) { return store_begin((void *)0); }' >"$TEST_TMP/probe.c"
cc -c -o "$T/plugins/common/layer_probe.o" "$TEST_TMP/probe.c" || fail "cc"
expect "common" "plugins/common/layer_probe.c:2: includes \"pipelined.h\" (daemon/lib/pipelined.h)" \
    "plugins/common/layer_probe.o: refers to store_begin, defined in daemon/store.o"
rm -f "$T"/plugins/common/layer_probe.*

# 3. A plugin including a daemon header, its .so needing a daemon symbol.
printf '%s\n' '#include "pipeline/plugin.h"' '#include "exec.h"' >"$T/plugins/layer_probe.c"
printf '%s\n' 'int sched_cancel(const char *, const char *);' 'int layer_probe(void);' \
    'int layer_probe(void) { return sched_cancel("r", "j"); }' >"$TEST_TMP/probe.c"
cc -shared -o "$T/plugins/layer_probe.so" "$TEST_TMP/probe.c" || fail "cc"
expect "plugin" "plugins/layer_probe.c:2: includes \"exec.h\" (daemon/lib/exec.h)" \
    "plugins/layer_probe.so: needs sched_cancel, defined in daemon/sched.o"
rm -f "$T"/plugins/layer_probe.*

# 4. A circle: util.o calling the store, which calls util.o.
printf '%s\n' 'struct store; int store_commit(struct store *);' 'int layer_probe(void);' \
    'int layer_probe(void) { return store_commit((void *)0); }' >"$TEST_TMP/probe.c"
cc -c -o "$TEST_TMP/probe.o" "$TEST_TMP/probe.c" || fail "cc"
cp "$T/daemon/util.o" "$TEST_TMP/util.o"
ld -r -o "$T/daemon/util.o" "$TEST_TMP/util.o" "$TEST_TMP/probe.o" || fail "ld -r"
expect "circle" "a call circle between daemon modules:" "util -> store: store_commit" "store -> util:"
grep -q "circle between daemon modules:.* store .*util" "$TEST_TMP/bad.out" ||
    fail "circle: its members are not named"
cp "$TEST_TMP/util.o" "$T/daemon/util.o"

# 5. The library calling a program.
printf '%s\n' 'int ctl_request(const char *, void *, void **);' 'int layer_probe(void);' \
    'int layer_probe(void) { return ctl_request("x", 0, 0); }' >"$TEST_TMP/probe.c"
cc -c -o "$TEST_TMP/probe.o" "$TEST_TMP/probe.c" || fail "cc"
cp "$T/daemon/web.o" "$TEST_TMP/web.o"
ld -r -o "$T/daemon/web.o" "$TEST_TMP/web.o" "$TEST_TMP/probe.o" || fail "ld -r"
expect "program" "daemon/web.o: refers to ctl_request, defined in daemon/pipelinectl.o"
cp "$TEST_TMP/web.o" "$T/daemon/web.o"

"$CHECK" "$T" >/dev/null 2>&1 || fail "the copy, restored, fails"
echo "ok: check-layers passes the tree and names each violation put in"
