#!/bin/bash
# The layers (HACKING.md: Layers): tests/tools/check-layers.sh passes on
# the built tree, and fails, naming the file and line or the object and
# symbol, on a copy of it with each kind of violation put in:
#   - include/pipeline/plugin.h including a header of the common library;
#   - a file of plugins/lib/io including daemon/lib/pld.h, and its
#     object calling the store (store_begin);
#   - a header of a layer a file may not call: the server including the
#     HTTP side's http.h, pipelinectl the store's store.h, pipeline-stage
#     server.h, the HTTP side server.h, daemon/lib the plugin host's
#     host.h, pipeline-shim pld.h, host.h (which pipelinectl includes)
#     reaching for store.h, metrics.h (the HTTP side's) for host.h, and
#     daemon/lib's exec.h for the server's executor.h;
#   - plugins/lib/io calling a subject above it (gguf_open of format);
#   - daemon/lib calling the server (conf.o calling store_commit);
#   - a plugin including a daemon header, and its .so needing
#     sched_cancel;
#   - a call circle between daemon modules: util.o made to call the store
#     (store.o calls util.o);
#   - a module of the daemon calling a program's function (web.o calling
#     pipelinectl.c's ctl_request);
#   - pipelinectl linking the HTTP side (httpd_start), the store's writes
#     (store_job_state), and the store's host backend (host_store);
#   - SQL and SQLite outside the store's files: a sqlite3_ call in
#     metrics.c, a query's text in web.c, SQLite's header in access.c
#     (and none in a comment, nor in store_ro.c, the store's own);
#   - a call within a layer of LIBPLD_LAYERS (feed.o calling sched_kick),
#     and a module of the daemon on no line of it;
#   - control.c's direct calls of the scheduler, seen once control is put
#     in the scheduler's layer (a copy of the check with that list).
# Runs against the real objects of the build (nm) and the compiler; no
# daemon is started.
. "$(dirname "$0")/../../lib.sh"
CHECK=$TOP/tests/tools/check-layers.sh

out=$("$CHECK" "$TOP" 2>&1) || { echo "$out"; fail "check-layers fails on the tree"; }
echo "$out"

# A copy of what the check reads: sources, headers, objects, plugins.
T=$TEST_TMP/tree
mkdir -p "$T/include/pipeline" "$T/plugins"
cp "$TOP"/include/pipeline/*.h "$T/include/pipeline/"
for d in "$TOP"/daemon/*/ "$TOP"/plugins/lib/*/; do
	r=${d#"$TOP"/}
	mkdir -p "$T/$r"
	cp "$d"*.[ch] "$T/$r"
	cp "$d"*.o "$T/$r" 2>/dev/null
done
cp "$TOP"/daemon/pipelinectl "$T/daemon/"
cp "$TOP"/plugins/*.c "$TOP"/plugins/*.so "$T/plugins/"
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
echo '#include "plio.h"' >>"$T/include/pipeline/plugin.h"
n=$(wc -l <"$T/include/pipeline/plugin.h")
expect "abi include" "include/pipeline/plugin.h:$n: includes \"plio.h\""
cp "$TEST_TMP/plugin.h" "$T/include/pipeline/plugin.h"

# 2. The common library including the daemon's header and calling it.
printf '%s\n' '#include <stddef.h>' '#include "pld.h"' 'int layer_probe(void);' \
    'int layer_probe(void) { return store_begin((void *)0); }' >"$T/plugins/lib/io/layer_probe.c"
printf '%s\n' 'struct store; int store_begin(struct store *);' 'int layer_probe(void);' \
    'int layer_probe(void) { return store_begin((void *)0); }' >"$TEST_TMP/probe.c"
cc -c -o "$T/plugins/lib/io/layer_probe.o" "$TEST_TMP/probe.c" || fail "cc"
expect "plugins lib" "plugins/lib/io/layer_probe.c:2: includes \"pld.h\" (daemon/lib/pld.h)" \
    "plugins/lib/io/layer_probe.o: refers to store_begin, defined in daemon/server/store.o"
rm -f "$T"/plugins/lib/io/layer_probe.*

# 2a. The daemon's headers by layer: each file given an include of a
# header of a layer it may not call, at its end.
planted="daemon/server/sched.c:http.h daemon/ctl/pipelinectl.c:store.h daemon/stage/stage.c:server.h
daemon/http/web.c:server.h daemon/lib/util.c:host.h daemon/shim/shim.c:pld.h daemon/server/host.h:store.h
daemon/server/metrics.h:host.h daemon/lib/exec.h:executor.h"
pats=()
for x in $planted; do
	f=${x%%:*} h=${x#*:}
	cp "$T/$f" "$TEST_TMP/planted.${f//\//_}"
	printf '#include "%s"\n' "$h" >>"$T/$f"
	pats+=("$f:$(wc -l <"$T/$f"): includes \"$h\"")
done
expect "headers" "${pats[@]}"
[ "$(grep -c '^LAYERS: .*: includes ' "$TEST_TMP/bad.out")" -eq 9 ] ||
    { cat "$TEST_TMP/bad.out"; fail "headers: not exactly the 9 includes put in reported"; }
for x in $planted; do f=${x%%:*}; cp "$TEST_TMP/planted.${f//\//_}" "$T/$f"; done
"$CHECK" "$T" >"$TEST_TMP/copy.out" 2>&1 || { cat "$TEST_TMP/copy.out"; fail "headers: the copy, restored, fails"; }

# 2b. io, the bottom subject, including and calling the GGUF reader above it.
printf '%s\n' '#include "gguf.h"' >"$T/plugins/lib/io/layer_probe.c"
printf '%s\n' 'int gguf_open(void);' 'int layer_probe(void);' \
    'int layer_probe(void) { return gguf_open(); }' >"$TEST_TMP/probe.c"
cc -c -o "$T/plugins/lib/io/layer_probe.o" "$TEST_TMP/probe.c" || fail "cc"
expect "subject" "plugins/lib/io/layer_probe.c:1: includes \"gguf.h\"" \
    "plugins/lib/io/layer_probe.o: refers to gguf_open, defined in plugins/lib/format/gguf.o"
rm -f "$T"/plugins/lib/io/layer_probe.*

# 2c. daemon/lib calling the server's store.
printf '%s\n' 'struct store; int store_commit(struct store *);' 'int layer_probe(void);' \
    'int layer_probe(void) { return store_commit((void *)0); }' >"$TEST_TMP/probe.c"
cc -c -o "$TEST_TMP/probe.o" "$TEST_TMP/probe.c" || fail "cc"
cp "$T/daemon/lib/conf.o" "$TEST_TMP/conf.o"
ld -r -o "$T/daemon/lib/conf.o" "$TEST_TMP/conf.o" "$TEST_TMP/probe.o" || fail "ld -r"
expect "daemon lib" "daemon/lib/conf.o: refers to store_commit, defined in daemon/server/store.o"
cp "$TEST_TMP/conf.o" "$T/daemon/lib/conf.o"

# 3. A plugin including a daemon header, its .so needing a daemon symbol.
printf '%s\n' '#include "pipeline/plugin.h"' '#include "exec.h"' >"$T/plugins/layer_probe.c"
printf '%s\n' 'int sched_cancel(const char *, const char *);' 'int layer_probe(void);' \
    'int layer_probe(void) { return sched_cancel("r", "j"); }' >"$TEST_TMP/probe.c"
cc -shared -o "$T/plugins/layer_probe.so" "$TEST_TMP/probe.c" || fail "cc"
expect "plugin" "plugins/layer_probe.c:2: includes \"exec.h\" (daemon/lib/exec.h)" \
    "plugins/layer_probe.so: needs sched_cancel, defined in daemon/server/sched.o"
rm -f "$T"/plugins/layer_probe.*

# 4. A circle: store_query.o's wire.o calling the store's query side,
# which calls wire.o.
printf '%s\n' 'int store_q_runs(void);' 'int layer_probe(void);' \
    'int layer_probe(void) { return store_q_runs(); }' >"$TEST_TMP/probe.c"
cc -c -o "$TEST_TMP/probe.o" "$TEST_TMP/probe.c" || fail "cc"
cp "$T/daemon/server/wire.o" "$TEST_TMP/wire.o"
ld -r -o "$T/daemon/server/wire.o" "$TEST_TMP/wire.o" "$TEST_TMP/probe.o" || fail "ld -r"
expect "circle" "a call circle between daemon modules:" "wire -> store_query: store_q_runs" "store_query -> wire:"
grep -q "circle between daemon modules:.*store_query .*wire" "$TEST_TMP/bad.out" ||
    fail "circle: its members are not named"
cp "$TEST_TMP/wire.o" "$T/daemon/server/wire.o"

# 5. The library calling a program.
printf '%s\n' 'int ctl_request(const char *, void *, void **);' 'int layer_probe(void);' \
    'int layer_probe(void) { return ctl_request("x", 0, 0); }' >"$TEST_TMP/probe.c"
cc -c -o "$TEST_TMP/probe.o" "$TEST_TMP/probe.c" || fail "cc"
cp "$T/daemon/http/web.o" "$TEST_TMP/web.o"
ld -r -o "$T/daemon/http/web.o" "$TEST_TMP/web.o" "$TEST_TMP/probe.o" || fail "ld -r"
expect "program" "daemon/http/web.o: refers to ctl_request, defined in daemon/ctl/pipelinectl.o"
cp "$TEST_TMP/web.o" "$T/daemon/http/web.o"

# 6. pipelinectl holding the HTTP server: a program that defines httpd_start.
printf '%s\n' 'int httpd_start(void);' 'int httpd_start(void) { return 0; }' 'int main(void) { return httpd_start(); }' >"$TEST_TMP/probe.c"
cc -o "$T/daemon/pipelinectl" "$TEST_TMP/probe.c" || fail "cc"
expect "pipelinectl" "daemon/pipelinectl: links httpd_start, defined in daemon/http/httpd.o"
# 6b. pipelinectl holding a store write: a program that defines store_job_state.
printf '%s\n' 'int store_job_state(void);' 'int store_job_state(void) { return 0; }' 'int main(void) { return store_job_state(); }' >"$TEST_TMP/probe.c"
cc -o "$T/daemon/pipelinectl" "$TEST_TMP/probe.c" || fail "cc"
expect "pipelinectl store" "daemon/pipelinectl: links store_job_state, defined in daemon/server/store.o"
# 6c. pipelinectl holding the store's host backend: a program that
# defines host_store (a datum, as the backend is).
printf '%s\n' 'int host_store = 1;' 'int main(void) { return host_store; }' >"$TEST_TMP/probe.c"
cc -o "$T/daemon/pipelinectl" "$TEST_TMP/probe.c" || fail "cc"
expect "pipelinectl backend" "daemon/pipelinectl: links host_store, defined in daemon/server/host_store.o"
cp "$TOP/daemon/pipelinectl" "$T/daemon/pipelinectl"
# 6d. SQL and SQLite outside daemon/server/store*: the check reads the
# sources, comments left out.
for f in daemon/server/metrics.c daemon/http/web.c daemon/server/access.c daemon/server/store_ro.c; do
	cp "$T/$f" "$TEST_TMP/${f##*/}"
done
printf '%s\n' '/* sqlite3_step() and "SELECT 1" in a comment are no violation. */' \
    'static void layer_probe(void *st) { sqlite3_step(st); }' >>"$T/daemon/server/metrics.c"
printf '%s\n' 'static const char *layer_probe = "SELECT name FROM runs";' >>"$T/daemon/http/web.c"
printf '%s\n' '#include <sqlite3.h>' >>"$T/daemon/server/access.c"
printf '%s\n' 'static const char *layer_probe = "SELECT name FROM runs";' >>"$T/daemon/server/store_ro.c"
expect "sql" "daemon/server/metrics.c:$(wc -l <"$T/daemon/server/metrics.c"): sqlite3_step: SQL or SQLite outside the store" \
    "daemon/http/web.c:$(wc -l <"$T/daemon/http/web.c"): \"SELECT: SQL or SQLite outside the store" \
    "daemon/server/access.c:$(wc -l <"$T/daemon/server/access.c"): sqlite3: SQL or SQLite outside the store"
[ "$(grep -c 'outside the store' "$TEST_TMP/bad.out")" -eq 3 ] ||
    { cat "$TEST_TMP/bad.out"; fail "sql: a comment or the store's own file reported"; }
for f in daemon/server/metrics.c daemon/http/web.c daemon/server/access.c daemon/server/store_ro.c; do
	cp "$TEST_TMP/${f##*/}" "$T/$f"
done

call_in() {  # call_in OBJ DECL CALL: the copy's OBJ made to make CALL too
	printf '%s\n' "$2" 'int layer_probe(void);' "int layer_probe(void) { $3; return 0; }" \
	    >"$TEST_TMP/probe.c"
	cc -c -o "$TEST_TMP/probe.o" "$TEST_TMP/probe.c" || fail "cc"
	cp "$T/$1" "$TEST_TMP/orig.o"
	ld -r -o "$T/$1" "$TEST_TMP/orig.o" "$TEST_TMP/probe.o" || fail "ld -r"
}
uncall() { cp "$TEST_TMP/orig.o" "$T/$1"; }

# 7. A call within a layer of LIBPLD_LAYERS: the feed calling the scheduler.
call_in daemon/server/feed.o 'void sched_kick(void);' 'sched_kick()'
expect "same layer" "daemon/server/feed.o: refers to sched_kick, defined in daemon/server/sched.o (sched is in feed's own layer"
uncall daemon/server/feed.o

# 8. A module of the daemon that no layer names.
printf '%s\n' 'void log_warnx(const char *, ...);' 'void layer_probe(void);' \
    'void layer_probe(void) { log_warnx("x"); }' >"$T/daemon/server/layer_probe.c"
cc -c -o "$T/daemon/server/layer_probe.o" "$T/daemon/server/layer_probe.c" || fail "cc"
expect "no layer" "daemon/server/layer_probe.o: a module of the daemon in no layer"
rm -f "$T"/daemon/server/layer_probe.*

# 9. control.c calls the scheduler directly: with control in the
# scheduler's layer, the check names those calls.
sed '/^feed sched$/{N; s/^feed sched\ncontrol$/feed sched control/}' "$CHECK" >"$TEST_TMP/check-flat.sh"
grep -qx "feed sched control" "$TEST_TMP/check-flat.sh" || fail "LIBPLD_LAYERS: no \"feed sched\" then \"control\" line"
if bash "$TEST_TMP/check-flat.sh" "$T" >"$TEST_TMP/bad.out" 2>&1; then
	cat "$TEST_TMP/bad.out"
	fail "control in the scheduler's layer: check-layers passed"
fi
grep -q "^LAYERS: daemon/server/control.o: refers to sched_[a-z_]*, defined in daemon/server/sched.o (sched is in control's own layer" \
    "$TEST_TMP/bad.out" || { cat "$TEST_TMP/bad.out"; fail "control's calls of the scheduler are not seen"; }
grep "^LAYERS" "$TEST_TMP/bad.out" | sed "s/^/# control beside sched: /"

"$CHECK" "$T" >/dev/null 2>&1 || fail "the copy, restored, fails"
echo "ok: check-layers passes the tree and names each violation put in"
