#!/bin/bash
# The programs and plugins are built with the hardening Debian's packages
# get (dpkg-buildflags, DEB_BUILD_MAINT_OPTIONS=hardening=+all; the
# Makefile's written-out fallback when dpkg-buildflags is missing must
# be the same flags). Checked on the built files with readelf: every
# program and plugin is linked with BIND_NOW and a GNU_RELRO segment
# (full RELRO) and calls __stack_chk_fail (-fstack-protector-strong);
# every program is a position-independent executable (type DYN, flag
# PIE) and calls glibc's checked functions (*_chk, _FORTIFY_SOURCE=2),
# and so do the plugins as a whole.
. "$(dirname "$0")/../../lib.sh"
command -v readelf >/dev/null || fail "readelf (binutils) is missing"
cd "$TOP"
progs="daemon/pipelined daemon/pipelinectl daemon/pipeline-shim daemon/pipeline-stage"
plugs=$(ls plugins/*.so)
for f in $progs $plugs; do
	[ -f "$f" ] || fail "$f is not built (make)"
	readelf -h "$f" | grep -qE 'Type: +DYN' || fail "$f: not of type DYN: $(readelf -h "$f" | grep Type:)"
	dyn=$(readelf -dW "$f")
	echo "$dyn" | grep -qE '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW' || fail "$f: no BIND_NOW (-z now)"
	readelf -lW "$f" | grep -q GNU_RELRO || fail "$f: no GNU_RELRO segment (-z relro)"
	readelf -sW --dyn-syms "$f" | grep -q '__stack_chk_fail' ||
	    fail "$f: no __stack_chk_fail (-fstack-protector-strong)"
done
for f in $progs; do
	readelf -dW "$f" | grep -qE '\(FLAGS_1\).*PIE' || fail "$f: not a PIE (no FLAGS_1 PIE)"
	[ -n "$(readelf -sW --dyn-syms "$f" | grep -oE '__[a-z0-9_]+_chk\b' | grep -v __stack_chk)" ] ||
	    fail "$f: no *_chk function (_FORTIFY_SOURCE=2)"
done
n=$(for f in $plugs; do readelf -sW --dyn-syms "$f"; done | grep -oE '__[a-z0-9_]+_chk\b' |
    grep -v __stack_chk | sort -u | wc -l)
[ "$n" -gt 0 ] || fail "no plugin calls a *_chk function (_FORTIFY_SOURCE=2)"

# The flags: dpkg-buildflags's hardening ones, and the fallback the same.
flags() { make -s --no-print-directory -f Makefile -f - "$@" <<'MK'
show-harden:
	@echo $(HARDEN_CFLAGS) $(HARDEN_LDFLAGS) $(HARDEN_PIE)
MK
}
words() { tr ' ' '\n' | grep . | sort -u | tr '\n' ' '; }
got=$(flags show-harden | words)
note "hardening flags: $got"
for want in -fstack-protector-strong -D_FORTIFY_SOURCE=2 -Wl,-z,relro -Wl,-z,now -pie \
    -Werror=format-security; do
	case " $got " in *" $want "*) ;; *) fail "the build's flags lack $want: $got";; esac
done
if command -v dpkg-buildflags >/dev/null; then
	fallback=$(flags show-harden DPKG_BUILDFLAGS= | words)
	[ "$fallback" = "$got" ] || fail "the fallback flags differ from dpkg-buildflags's:
  dpkg-buildflags: $got
  fallback:        $fallback"
fi
# Off on request, and _FORTIFY_SOURCE only where it can work.
[ -z "$(flags show-harden HARDEN= | words)" ] || fail "HARDEN= still hardens"
flags show-harden CFLAGS=-O0 | grep -q FORTIFY && fail "_FORTIFY_SOURCE at -O0"
flags show-harden 'CFLAGS=-O1 -fsanitize=address' | grep -q FORTIFY &&
    fail "_FORTIFY_SOURCE under AddressSanitizer"
echo ok
