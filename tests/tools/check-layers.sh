#!/bin/bash
# tests/tools/check-layers.sh [TREE]: check that the tree's includes and
# calls follow the layers (HACKING.md: Layers; each directory's README),
# bottom up:
#
#   include/pipeline    the ABI: includes only its own headers
#   plugins/lib/SUBJECT the plugins' library, one directory a subject: io
#                       sees only the ABI; every other subject io and the
#                       subjects below it (SUBJECT_BELOW here); none calls
#                       anything daemon/ defines
#   plugins/*.c         the stages: include the ABI and plugins/lib; a
#                       plugin .so needs no symbol daemon/ defines (it
#                       reaches the daemon only through struct pl_host)
#   daemon/lib          what the daemon's programs share: includes the ABI
#                       and plugins/lib, calls nothing of the daemon's
#                       other directories
#   daemon/server, daemon/http
#                       the daemon's subsystems and its HTTP side: their
#                       modules call each other without a circle and call
#                       nothing of the programs (daemon/server/pipelined.c,
#                       daemon/ctl, daemon/stage, daemon/shim)
#   the headers         by layer: daemon/lib/pld.h for every program;
#                       daemon/server's for the server, of which
#                       pipelinectl and pipeline-stage include only
#                       host.h (with executor.h), the HTTP side only
#                       store_ro.h, access.h and metrics.h (which include
#                       nothing else of daemon/server);
#                       daemon/http/http.h for the HTTP side and
#                       pipelined.c only
#   daemon/shim         pipeline-shim: includes daemon/lib's exec.h and
#                       procstat.h only (it links procstat.o alone)
#   daemon/pipelinectl  links nothing of daemon/http (no HTTP server),
#                       nothing of daemon/server/store.c (no store writes)
#                       and not the store's host backend (host_store.c):
#                       its jobs' backend is host_by_hand
#   the store           no SQL and no SQLite outside daemon/server/store*.[ch]:
#                       a line of any other source of daemon/, plugins/ or
#                       include/ (comments left out) that names sqlite3 or
#                       an SQLITE_ constant, or holds a string starting an
#                       SQL statement, is a violation. /metrics, the page
#                       and access.c read through the store's functions
#                       (store_ro.h). Tests are not checked: the unit tests
#                       open SQLite databases of their own.
#
# Includes are read from the sources ("..." includes, resolved as the
# compiler does: the file's directory, then the layer's -I paths); calls
# from the built objects with nm(1): daemon/*/*.o, plugins/lib/*/*.o,
# plugins/*.so, daemon/pipelinectl (run `make` first). Every violation is
# printed with its file and line or object and symbol, each circle with
# its members and the calls that close it; the exit status is 1 if there
# is any, 0 if none (2 when the tree is not built).
set -u
export LC_ALL=C
TREE=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$TREE" || exit 2

# Circles known and owned elsewhere, one per line, members sorted and
# separated by spaces: a circle is allowed only if its members are exactly
# one of these. None is left (control, feed and sched no longer reach
# each other: pipelined.c wires them).
ALLOWED_CIRCLES=""

# The modules of daemon/lib, daemon/server and daemon/http in layers,
# bottom up, one layer a line (HACKING.md: Layers, which lists them so): a
# module calls only modules of the lines above its own, none of its own
# line. A module on no line, or a name here without an object, is a
# violation: a new module is placed here, in HACKING.md and in its Files
# table.
LIBPLD_LAYERS="
log slurm procstat
errlist sock util wire addr become
store_wire
store_ro
store_metrics
access shimfiles ini metrics plugin
priv
web exec_local exec_slurm
httpd executor job
conf
conf_check spec
spec_sweep
store
store_query
store_gc store_reuse
stagectx gc
host_spawn notify
host
host_store
stagerun reuse
feed sched
control
"

for d in daemon/lib daemon/server daemon/http plugins/lib/io; do
	ls "$d"/*.o >/dev/null 2>&1 || { echo "check-layers: $TREE/$d: no objects (run make)"; exit 2; }
done

# The subjects of plugins/lib and those each may include and call, below it.
declare -A SUBJECT_BELOW=(
	[io]=""
	[format]="io"
	[convert]="io format"
	[check]="io format convert"
	[score]="io"
	[corpus]="io score"
	[serve]="io"
	[job]="io"
)
PLIB_DIRS=""
for d in plugins/lib/*/; do
	d=${d%/}
	[ -n "${SUBJECT_BELOW[${d##*/}]+set}" ] || { echo "LAYERS: $d: a subject of plugins/lib this check does not know (add it to SUBJECT_BELOW)"; exit 1; }
	PLIB_DIRS="$PLIB_DIRS $d"
done

bad=0
nincl=0
viol() { echo "LAYERS: $*"; bad=$((bad + 1)); }

# A path relative to the tree, without "." or "..".
norm() {
	case "$1" in *..*|*./*) realpath -m --relative-to=. "$1";; *) echo "$1";; esac
}

# The include check: FILE, then the directories its "..." includes may
# resolve to besides its own (the layer's -I paths).
check_includes() {
	local f=$1; shift
	local dir=${f%/*} n inc hit allowed p
	local -a where=("$dir")
	# --not-own: not even the file's own directory (a header that other
	# layers include, SERVER_EXPORTS).
	[ "${1-}" = --not-own ] && { where=(); shift; }
	where+=("$@")
	while IFS=: read -r n inc; do
		nincl=$((nincl + 1))
		hit=""
		for p in "${where[@]}"; do
			# A directory, or one header of a layer (its path).
			if [ -d "$p" ]; then
				[ -f "$p/$inc" ] && { hit=$(norm "$p/$inc"); break; }
			elif [ "${p##*/}" = "$inc" ] && [ -f "$p" ]; then
				hit=$p; break
			fi
		done
		if [ -z "$hit" ]; then
			# Not found where the layer may look: name where it is.
			for p in daemon/lib daemon/server daemon/http daemon/ctl $PLIB_DIRS include plugins; do
				[ -f "$p/$inc" ] && { hit="$p/$inc"; break; }
			done
			viol "$f:$n: includes \"$inc\"${hit:+ ($hit)}, not a header its layer may include (HACKING.md: Layers)"
			continue
		fi
		allowed=0
		for p in "${where[@]}"; do
			case "$hit/" in "$(norm "$p")"/*) allowed=1;; esac
		done
		[ $allowed -eq 1 ] || viol "$f:$n: includes \"$inc\" ($hit), above its layer"
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p; t l; d; :l =' "$f" |
	    sed 'N; s/\n/:/' | awk -F: '{ print $2 ":" $1 }')
}

below() { local s; for s in ${SUBJECT_BELOW[$1]}; do echo "plugins/lib/$s"; done; }
for f in include/pipeline/*.h; do check_includes "$f" include; done
for d in $PLIB_DIRS; do
	for f in "$d"/*.[ch]; do [ -f "$f" ] && check_includes "$f" include $(below "${d##*/}"); done
done
for f in plugins/*.[ch]; do [ -f "$f" ] && check_includes "$f" include $PLIB_DIRS; done
for f in daemon/lib/*.[ch]; do [ -f "$f" ] && check_includes "$f" include $PLIB_DIRS; done
for f in daemon/shim/*.[ch]; do [ -f "$f" ] && check_includes "$f" daemon/lib/exec.h daemon/lib/procstat.h; done
# The daemon's headers by layer (HACKING.md: Layers): daemon/lib/pld.h
# for every program; of daemon/server, the plugin host (host.h) for
# pipelinectl and pipeline-stage, the read-only store, access.c and
# metrics.c (store_ro.h, access.h, metrics.h) for the HTTP side, and the
# rest (server.h, store.h, ...) for the server only; daemon/http/http.h
# for the HTTP side and pipelined.c, which runs it. A header of
# SERVER_EXPORTS includes nothing of daemon/server but what EXPORT_SEES
# gives it (host.h: the executors, executor.h), so that what includes it
# sees no more of the server than that.
SERVER_EXPORTS="daemon/server/host.h daemon/server/executor.h daemon/server/store_ro.h daemon/server/access.h daemon/server/metrics.h"
declare -A EXPORT_SEES=([daemon/server/host.h]=daemon/server/executor.h)
HTTP_SEES="daemon/server/store_ro.h daemon/server/access.h daemon/server/metrics.h"
for f in daemon/server/*.[ch]; do
	[ -f "$f" ] || continue
	case " $SERVER_EXPORTS " in
	*" $f "*) check_includes "$f" --not-own include $PLIB_DIRS daemon/lib ${EXPORT_SEES[$f]-};;
	*) case $f in
	   daemon/server/pipelined.c) check_includes "$f" include $PLIB_DIRS daemon/lib daemon/http/http.h;;
	   *) check_includes "$f" include $PLIB_DIRS daemon/lib;;
	   esac;;
	esac
done
for f in daemon/http/*.[ch]; do [ -f "$f" ] && check_includes "$f" include $PLIB_DIRS daemon/lib $HTTP_SEES; done
for f in daemon/stage/*.[ch] daemon/ctl/*.[ch]; do
	[ -f "$f" ] && check_includes "$f" include $PLIB_DIRS daemon/lib daemon/server/host.h
done

# Symbols, from one nm(1) per kind of file: "D SYMBOL OBJECT" for each
# global definition of daemon/ and plugins/lib, "U SYMBOL OBJECT" for each
# reference (weak ones too) of theirs, "N SYMBOL PLUGIN" for each symbol a
# plugin needs from the process, "P SYMBOL daemon/pipelinectl" for each
# function and datum pipelinectl holds.
objs() { local o; for o in "$@"; do [ -f "${o%.o}.c" ] && echo "$o"; done; }  # not stale ones
syms=$(mktemp); trap 'rm -f "$syms"' EXIT
{
	objs daemon/*/*.o plugins/lib/*/*.o | xargs nm -A -P 2>/dev/null |
	    awk '{ sub(/:$/, "", $1); t = $3
		if (t ~ /^[TDBRCVWGSI]$/) print "D", $2, $1
		else if (t == "U" || t == "w" || t == "v") print "U", $2, $1 }'
	ls plugins/*.so >/dev/null 2>&1 && nm -D -A -P --undefined-only plugins/*.so 2>/dev/null |
	    awk '{ sub(/:$/, "", $1); sub(/@.*/, "", $2); print "N", $2, $1 }'
	[ -f daemon/pipelinectl ] && nm -P daemon/pipelinectl 2>/dev/null |
	    awk '$2 ~ /^[TtDdRrBb]$/ { print "P", $1, "daemon/pipelinectl" }'
} >"$syms"

# The daemon's module graph: an edge A -> B for each symbol A's object
# refers to (weakly too) and B's defines. The modules are those of
# daemon/lib, daemon/server and daemon/http (every file but the mains);
# the programs may call them, they call nothing of the programs.
below_list=""
for k in "${!SUBJECT_BELOW[@]}"; do below_list="$below_list$k:${SUBJECT_BELOW[$k]};"; done
awk -v allowed="$ALLOWED_CIRCLES" -v belowlist="$below_list" -v layers="$LIBPLD_LAYERS" '
function mod(o) { sub(/^daemon\/[a-z]*\//, "", o); sub(/\.o$/, "", o); return o }
function dir(o) { n = split(o, p, "/"); return p[n - 1] }
function prog(o) { return o == "daemon/server/pipelined.o" || o ~ /^daemon\/(ctl|stage|shim)\// }
BEGIN {
	n = split(belowlist, bl, ";")
	for (i = 1; i <= n; i++) if (bl[i] != "") {
		split(bl[i], kv, ":"); m2 = split(kv[2], ss, " ")
		known[kv[1]] = 1
		for (j = 1; j <= m2; j++) may[kv[1], ss[j]] = 1
	}
}
$1 == "D" { if (!($2 in def)) def[$2] = $3; if ($3 ~ /^daemon\// && !prog($3)) { lib[mod($3)] = 1; libo[mod($3)] = $3 }; next }
$1 == "P" { inctl[$2] = 1; next }
{ ref[++nref] = $0 }
END {
	nl = split(layers, ll, "\n")
	for (x = 1; x <= nl; x++) {
		nw = split(ll[x], w, " ")
		for (y = 1; y <= nw; y++) { rank[w[y]] = x; named[w[y]] = 1 }
	}
	for (a in lib) if (!(a in rank)) {
		printf "LAYERS: %s: a module of the daemon in no layer (place it in LIBPLD_LAYERS, tests/tools/check-layers.sh, and HACKING.md: Layers)\n", libo[a]
		bad++
	}
	for (a in named) if (!(a in lib)) {
		printf "LAYERS: LIBPLD_LAYERS names %s, which has no object in daemon/lib, daemon/server or daemon/http (delete it there and in HACKING.md: Layers)\n", a
		bad++
	}
	for (s in inctl) if ((s in def) && def[s] ~ /^daemon\/http\//) {
		printf "LAYERS: daemon/pipelinectl: links %s, defined in %s (pipelinectl links no HTTP server)\n", s, def[s]
		bad++
	}
	for (s in inctl) if ((s in def) && (def[s] == "daemon/server/store.o" || def[s] == "daemon/server/host_store.o")) {
		printf "LAYERS: daemon/pipelinectl: links %s, defined in %s (pipelinectl links no store writes: only the daemon makes a job with the store'"'"'s host backend, host_store.c)\n", s, def[s]
		bad++
	}
	for (k = 1; k <= nref; k++) {
		split(ref[k], f, " ")
		s = f[2]; o = f[3]
		if (!(s in def) || def[s] == o)
			continue
		d = def[s]
		if (f[1] == "N") {
			if (d ~ /^daemon\//) {
				printf "LAYERS: %s: needs %s, defined in %s (a plugin reaches the daemon only through struct pl_host)\n", o, s, d
				bad++
			}
			continue
		}
		if (o ~ /^plugins\/lib\//) {
			if (d ~ /^daemon\//) {
				printf "LAYERS: %s: refers to %s, defined in %s (plugins/lib calls nothing of daemon/)\n", o, s, d
				bad++
			} else if (dir(o) != dir(d) && !((dir(o), dir(d)) in may)) {
				printf "LAYERS: %s: refers to %s, defined in %s (plugins/lib/%s calls only %s)\n", o, s, d, dir(o), known[dir(o)] ? "io and the subjects below it" : "what check-layers knows"
				bad++
			}
			continue
		}
		if (d ~ /^plugins\//)
			continue
		if (o ~ /^daemon\/lib\// && d !~ /^daemon\/lib\//) {
			printf "LAYERS: %s: refers to %s, defined in %s (daemon/lib calls nothing of the daemon above it)\n", o, s, d
			bad++
			continue
		}
		a = mod(o); b = mod(d)
		if (prog(d) && !prog(o)) {
			printf "LAYERS: %s: refers to %s, defined in %s (the daemon'"'"'s modules call nothing of the programs)\n", o, s, d
			bad++
			continue
		}
		if (prog(o) || prog(d))
			continue
		m[a] = 1; m[b] = 1
		if (!((a, b) in r)) { r[a, b] = 1; why[a, b] = s } else if (length(why[a, b]) < 60) why[a, b] = why[a, b] " " s
		if ((a in rank) && (b in rank) && rank[a] <= rank[b] && !((a, b) in up)) {
			up[a, b] = 1
			printf "LAYERS: %s: refers to %s, defined in %s (%s is in %s layer; HACKING.md: Layers)\n", o, s, d, b,
			    (rank[a] == rank[b] ? a "'"'"'s own" : "a higher")
			bad++
		}
	}
	# Reachability (the modules are a few dozen): A and B are in one
	# circle when each reaches the other.
	for (k in m) for (i in m) if ((i, k) in r) for (j in m) if ((k, j) in r) r[i, j] = 1
	n = split(allowed, al, "\n")
	for (i in m) {
		if (!((i, i) in r) || (i in done))
			continue
		members = ""
		cnt = 0
		for (j in m) if ((i, j) in r && (j, i) in r) { list[++cnt] = j; done[j] = 1 }
		# Sort the members (insertion sort; circles are small).
		for (x = 2; x <= cnt; x++) { v = list[x]; for (y = x - 1; y >= 1 && list[y] > v; y--) list[y + 1] = list[y]; list[y + 1] = v }
		for (x = 1; x <= cnt; x++) members = members (x > 1 ? " " : "") list[x]
		ok = 0
		for (x = 1; x <= n; x++) if (al[x] == members) { ok = 1; seen[x] = 1 }
		calls = ""
		for (x = 1; x <= cnt; x++) for (y = 1; y <= cnt; y++)
			if ((list[x], list[y]) in why) calls = calls sprintf("\n    %s -> %s: %s", list[x], list[y], why[list[x], list[y]])
		if (ok) {
			printf "check-layers: allowed circle (to be removed): %s\n", members
			continue
		}
		printf "LAYERS: a call circle between daemon modules: %s%s\n", members, calls
		bad++
	}
	for (x = 1; x <= n; x++) if (!(x in seen) && al[x] != "")
		printf "check-layers: the allowed circle \"%s\" is gone: delete its entry\n", al[x]
	nm = 0; for (i in m) nm++
	printf "check-layers: %d modules of daemon/lib, daemon/server and daemon/http\n", nm
	exit bad > 0
}' "$syms" || bad=$((bad + 1))

# No SQL and no SQLite outside the store's files (daemon/server/store*):
# an identifier of SQLite's API or its header, or a string literal that
# starts an SQL statement, on a line that is not a comment's.
SQL_RE='\<(sqlite3[A-Za-z0-9_]*|SQLITE_[A-Z0-9_]+)\>|"[[:space:]]*(SELECT|INSERT( OR [A-Z]+)? INTO|REPLACE INTO|UPDATE [a-z_]+ SET|DELETE FROM|PRAGMA [a-z_]+|CREATE (TABLE|INDEX|UNIQUE INDEX|VIEW|TRIGGER)|DROP (TABLE|INDEX)|ALTER TABLE|WITH [a-z_]+ AS|BEGIN|COMMIT|ROLLBACK|SAVEPOINT)\>'
while IFS=: read -r f n line; do
	case "${line#"${line%%[![:space:]]*}"}" in \**|/\**|//*) continue;; esac
	what=$(grep -oE "$SQL_RE" <<<"$line" | head -n 1)
	viol "$f:$n: $what: SQL or SQLite outside the store (daemon/server/store*; read through store_ro.h)"
done < <(grep -nE "$SQL_RE" daemon/*/*.[ch] plugins/*.[ch] plugins/lib/*/*.[ch] include/pipeline/*.h 2>/dev/null |
    grep -v '^daemon/server/store[a-z_]*\.[ch]:' || true)

echo "check-layers: $nincl includes, $(ls daemon/*/*.o plugins/lib/*/*.o | wc -l) objects, $(ls plugins/*.so 2>/dev/null | wc -l) plugins"
if [ $bad -gt 0 ]; then
	echo "check-layers: against the layers (HACKING.md: Layers)"
	exit 1
fi
echo "check-layers: every include and call follows the layers"
exit 0
