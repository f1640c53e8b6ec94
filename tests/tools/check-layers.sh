#!/bin/bash
# tests/tools/check-layers.sh [TREE]: check that the tree's includes and
# calls follow the layers (HACKING.md: Layers), bottom up:
#
#   include/pipeline   the ABI: includes only its own headers
#   plugins/common     the common library: includes only itself and the ABI,
#                      and calls nothing daemon/ defines
#   plugins/*.c        the stages: include the ABI and the common library;
#                      a plugin .so needs no symbol daemon/ defines (it
#                      reaches the daemon only through struct pl_host)
#   daemon/            the modules of libpld.a call only the modules of
#                      the layers below their own (LIBPLD_LAYERS), so
#                      without a circle, and nothing of the programs above
#                      them (the mains, pipelinectl's ctl_*.c)
#
# Includes are read from the sources ("..." includes, resolved as the
# compiler does: the file's directory, then the layer's -I paths); calls
# from the built objects with nm(1): daemon/*.o, plugins/common/*.o,
# plugins/*.so (run `make` first). Every violation is printed with its
# file and line or object and symbol, each circle with its members and the
# calls that close it, each call against LIBPLD_LAYERS with the symbol that
# makes it; the exit status is 1 if there is any, 0 if none
# (2 when the tree is not built).
set -u
export LC_ALL=C
TREE=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$TREE" || exit 2

# Circles known and owned elsewhere, one per line, members sorted and
# separated by spaces: a circle is allowed only if its members are exactly
# one of these. None is left (control, feed and sched no longer reach
# each other: pipelined.c wires them).
ALLOWED_CIRCLES=""

# The modules of libpld.a in layers, bottom up, one layer a line
# (HACKING.md: Layers, which lists them so): a module calls only modules of
# the lines above its own, none of its own line. A module of libpld.a on no
# line, or a name here without an object, is a violation: a new module is
# placed here, in HACKING.md and in its Files table.
LIBPLD_LAYERS="
log slurm
errs sock util wire
access exec_common ini metrics plugin
web exec_local exec_slurm
httpd exec job
conf
conf_check spec
store
store_query
stagectx
host_spawn notify
host
stagerun
feed sched
control
"

for d in daemon plugins/common; do
	ls "$d"/*.o >/dev/null 2>&1 || { echo "check-layers: $TREE/$d: no objects (run make)"; exit 2; }
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
	while IFS=: read -r n inc; do
		nincl=$((nincl + 1))
		hit=""
		for p in "$dir" "$@"; do
			[ -f "$p/$inc" ] && { hit=$(norm "$p/$inc"); break; }
		done
		if [ -z "$hit" ]; then
			# Not found where the layer may look: name where it is.
			for p in daemon plugins/common include plugins; do
				[ -f "$p/$inc" ] && { hit="$p/$inc"; break; }
			done
			viol "$f:$n: includes \"$inc\"${hit:+ ($hit)}, not of its layer or below"
			continue
		fi
		allowed=0
		for p in "$dir" "$@"; do
			case "$hit/" in "$(norm "$p")"/*) allowed=1;; esac
		done
		[ $allowed -eq 1 ] || viol "$f:$n: includes \"$inc\" ($hit), above its layer"
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p; t l; d; :l =' "$f" |
	    sed 'N; s/\n/:/' | awk -F: '{ print $2 ":" $1 }')
}

for f in include/pipeline/*.h; do check_includes "$f" include; done
for f in plugins/common/*.[ch]; do [ -f "$f" ] && check_includes "$f" include; done
for f in plugins/*.[ch]; do [ -f "$f" ] && check_includes "$f" include plugins/common; done

# Symbols, from one nm(1) per kind of file: "D SYMBOL OBJECT" for each
# global definition of daemon/, "U SYMBOL OBJECT" for each reference
# (weak ones too) of daemon/ and plugins/common, "N SYMBOL PLUGIN" for each
# symbol a plugin needs from the process.
objs() { local o; for o in "$@"; do [ -f "${o%.o}.c" ] && echo "$o"; done; }  # not stale ones
syms=$(mktemp); trap 'rm -f "$syms"' EXIT
{
	objs daemon/*.o plugins/common/*.o | xargs nm -A -P 2>/dev/null |
	    awk '{ sub(/:$/, "", $1); t = $3
		if (t ~ /^[TDBRCVWGSI]$/ && $1 ~ /^daemon\//) print "D", $2, $1
		else if (t == "U" || t == "w" || t == "v") print "U", $2, $1 }'
	ls plugins/*.so >/dev/null 2>&1 && nm -D -A -P --undefined-only plugins/*.so 2>/dev/null |
	    awk '{ sub(/:$/, "", $1); sub(/@.*/, "", $2); print "N", $2, $1 }'
} >"$syms"

# The daemon's module graph: an edge A -> B for each symbol A's object
# refers to (weakly too) and B's defines. The modules are libpld.a's
# (every daemon/*.c but the mains and ctl_*.c); the programs may call
# them, they call nothing of the programs.
awk -v allowed="$ALLOWED_CIRCLES" -v layers="$LIBPLD_LAYERS" '
function mod(o) { sub(/^daemon\//, "", o); sub(/\.o$/, "", o); return o }
function prog(m) { return m == "pipelined" || m == "pipelinectl" || m == "shim" || m == "stage" ||
	m ~ /^ctl_/ }
$1 == "D" { if (!($2 in def)) def[$2] = $3; if (!prog(mod($3))) lib[mod($3)] = 1; next }
{ ref[++nref] = $0 }
END {
	nl = split(layers, ll, "\n")
	for (x = 1; x <= nl; x++) {
		nw = split(ll[x], w, " ")
		for (y = 1; y <= nw; y++) { rank[w[y]] = x; named[w[y]] = 1 }
	}
	for (a in lib) if (!(a in rank)) {
		printf "LAYERS: daemon/%s.o: a module of libpld.a in no layer (place it in LIBPLD_LAYERS, tests/tools/check-layers.sh, and HACKING.md: Layers)\n", a
		bad++
	}
	for (a in named) if (!(a in lib)) {
		printf "LAYERS: LIBPLD_LAYERS names %s, which has no object daemon/%s.o of libpld.a (delete it there and in HACKING.md: Layers)\n", a, a
		bad++
	}
	for (k = 1; k <= nref; k++) {
		split(ref[k], f, " ")
		s = f[2]; o = f[3]
		if (!(s in def) || def[s] == o)
			continue
		if (f[1] == "N") {
			printf "LAYERS: %s: needs %s, defined in %s (a plugin reaches the daemon only through struct pl_host)\n", o, s, def[s]
			bad++
			continue
		}
		if (o ~ /^plugins\/common\//) {
			printf "LAYERS: %s: refers to %s, defined in %s (the common library calls nothing of daemon/)\n", o, s, def[s]
			bad++
			continue
		}
		a = mod(o); b = mod(def[s])
		if (prog(b) && !prog(a)) {
			printf "LAYERS: daemon/%s.o: refers to %s, defined in daemon/%s.o (libpld.a calls nothing of the programs)\n", a, s, b
			bad++
			continue
		}
		if (prog(a) || prog(b))
			continue
		m[a] = 1; m[b] = 1
		if (!((a, b) in r)) { r[a, b] = 1; why[a, b] = s } else if (length(why[a, b]) < 60) why[a, b] = why[a, b] " " s
		if ((a in rank) && (b in rank) && rank[a] <= rank[b] && !((a, b) in up)) {
			up[a, b] = 1
			printf "LAYERS: daemon/%s.o: refers to %s, defined in daemon/%s.o (%s is in %s layer; HACKING.md: Layers)\n", a, s, b, b,
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
	printf "check-layers: %d modules of libpld.a\n", nm
	exit bad > 0
}' "$syms" || bad=$((bad + 1))

echo "check-layers: $nincl includes, $(ls daemon/*.o plugins/common/*.o | wc -l) objects, $(ls plugins/*.so 2>/dev/null | wc -l) plugins"
if [ $bad -gt 0 ]; then
	echo "check-layers: against the layers (HACKING.md: Layers)"
	exit 1
fi
echo "check-layers: every include and call follows the layers"
exit 0
