#!/bin/bash
# The manual pages document what the code offers. This test fails when
#   - a page of the set (pipelined(8), pipelinectl(1), pipelined.conf(5),
#     pipeline.ini(5), pipeline-plugin(3), pipeline-job(7),
#     pipeline-gotchas(7)) is missing;
#   - a verb or error code of the protocol (PL_VERBS, PL_FEED_VERBS,
#     PL_PROTO_ERRORS in include/pipeline/proto.h) has no entry ".It Li
#     WORD" in pipelined.8;
#   - a pipelinectl verb (from its usage output) has no entry ".It Cm VERB"
#     in pipelinectl.1, is neither the protocol's nor in pipelinectl's
#     table, or a verb of pipelinectl's own spells one of the protocol's;
#   - a pipelined.conf key (from `pipelined -nv` and from conf.c's key
#     table, [slurm] included) is not in pipelined.conf.5 as ".It Ic KEY";
#   - a common job key or [run] key (spec_common_keys, spec_run_keys in
#     daemon/server/spec.c) is not in pipeline.ini.5 as ".It Ic KEY";
#   - a stage listed by `pipelinectl stage --list` has no ".Ss STAGE"
#     subsection in pipeline.ini.5, or a key its `--help` lists is not in
#     that subsection as ".It Ic KEY";
#   - a function of the host table (struct pl_host in plugin.h) is not in
#     pipeline-plugin.3 as ".It Fn NAME", or a PL_E* code is not named;
#   - a symbol of plugin.h (macro, enum constant, type, host function,
#     exported symbol) is not named in pipeline-plugin.3 by .Dv, .Fn, .Vt,
#     .Va or .Ft, or the page so names a PL_* or pl_* symbol plugin.h
#     lacks, or an ".It Fn NAME" that is not a host function;
#   - a word of the job event vocabulary, a PL_* environment variable the
#     host exports, or a feed event type is missing from pipeline-job.7.
#   - a file of the tree cites something outside the repository (the
#     reference notes the project was written from, an absolute path to
#     them): a citation points to a man page or HACKING.md instead;
#   - a gotcha code (G01, ...) or finding code (F17, ...) cited in the tree
#     has no ".Ss CODE:" entry in pipeline-gotchas.7, or an entry lacks one
#     of Symptom, Cause, Caught by, Test;
#   - a file cites a test, a helper of tests/lib/ or a stand-in that does
#     not exist, or a test by the number it had before the tests were
#     named by subsystem (NN-name.sh).
#   - a source file (the C of daemon/, plugins/ and include/, jobs/*.py,
#     tests/tools/*.{sh,py,c}) has no row in HACKING.md's "Files" table,
#     or a row names a file that is gone (both shown on a copy of the
#     table, below);
#   - a paragraph or list item of HACKING.md is longer than a screen (40
#     lines; tables and indented blocks are not paragraphs).
# Every missing item is listed before the test fails.
. "$(dirname "$0")/../../lib.sh"
M=$TOP/man
missing=0
miss() { echo "MISSING: $*"; missing=$((missing + 1)); }

for p in pipelined.8 pipelinectl.1 pipelined.conf.5 pipeline.ini.5 pipeline-plugin.3 pipeline-job.7 \
    pipeline-gotchas.7; do
	[ -f "$M/$p" ] || miss "man/$p does not exist"
done

# has FILE REGEX: an extended regex matches a line of FILE.
has() { [ -f "$1" ] && grep -Eq -- "$2" "$1"; }
# The C source, comments removed (a comment may hold a quoted word).
nocomments() { sed -e 's|/\*.*\*/||g' "$1"; }

# ---- the protocol's verbs and error codes, pipelinectl's verbs ------
# The protocol's vocabulary is proto.h's lists; the daemon's dispatch and
# pipelinectl's verbs are built from them.
proto_list() {
	awk -v name="$1" 'index($0, "#define " name "(X)") == 1 { on = 1 }
		on { print } on && !/\\$/ { exit }' "$TOP/include/pipeline/proto.h" |
	    grep -o 'X([A-Za-z]*,' | sed 's/X(\(.*\),/\1/'
}
proto_verbs=$( (proto_list PL_VERBS; proto_list PL_FEED_VERBS) | sort -u)
echo "$proto_verbs" | grep -qx submit || fail "no verbs parsed from PL_VERBS in include/pipeline/proto.h"
echo "$proto_verbs" | grep -qx watch || fail "no verbs parsed from PL_FEED_VERBS in include/pipeline/proto.h"
for v in $proto_verbs; do
	has "$M/pipelined.8" "^\.It Li $v( |$)" || miss "pipelined.8: protocol verb $v (.It Li $v)"
done
proto_errors=$(proto_list PL_PROTO_ERRORS)
echo "$proto_errors" | grep -qx ESTATE || fail "no codes parsed from PL_PROTO_ERRORS in include/pipeline/proto.h"
for e in $proto_errors; do
	has "$M/pipelined.8" "^\.It Li $e( |$)" || miss "pipelined.8: protocol error $e (.It Li $e)"
done
# pipelinectl's verbs: its usage, printed from its table of verbs; those
# of its own (not of the protocol) are named in the table, and none may
# spell a verb of the protocol a second time.
usage_verbs=$("$PIPELINECTL" -h 2>&1 | sed -n '/^verbs:/,$p' | sed -n 's/^  \([a-z][a-z-]*\).*/\1/p' | sort -u)
[ -n "$usage_verbs" ] || fail "no verbs parsed from pipelinectl -h"
own_verbs=$(nocomments "$TOP/daemon/ctl/pipelinectl.c" | grep -o '{ PLV_COUNT, "[a-z-]*"' | sed 's/.*"\(.*\)"/\1/' | sort -u)
echo "$own_verbs" | grep -qx stage || fail "no verbs of pipelinectl's own parsed from daemon/ctl/pipelinectl.c"
for v in $own_verbs; do
	echo "$proto_verbs" | grep -qx "$v" && miss "daemon/ctl/pipelinectl.c: verb $v is spelled there and in proto.h"
	echo "$usage_verbs" | grep -qx "$v" || miss "pipelinectl -h: verb $v of the table is not in the usage"
done
for v in $usage_verbs; do
	printf '%s\n%s\n' "$proto_verbs" "$own_verbs" | grep -qx "$v" ||
	    miss "pipelinectl -h: verb $v is neither the protocol's nor in pipelinectl's table"
	has "$M/pipelinectl.1" "^\.It Cm $v( |$)" || miss "pipelinectl.1: verb $v (.It Cm $v)"
done
nverbs=$(printf '%s\n%s\n' "$usage_verbs" "$proto_verbs" | sort -u | wc -l)

# ---- pipelined.conf keys --------------------------------------------
pl_conf
nv_keys=$("$PIPELINED" -nv -f "$PL_CONF" | awk '
	/^\[/ { sec = $0; next }
	sec != "[resources]" && /^[a-z_]+ =/ { print $1 }' | sort -u)
[ -n "$nv_keys" ] || fail "no keys parsed from pipelined -nv"
table_keys=$(nocomments "$TOP/daemon/lib/conf.c" | grep -o '{ "[a-z]*", "[a-z_]*", ' | sed 's/{ "[a-z]*", "\([a-z_]*\)".*/\1/' | sort -u)
echo "$table_keys" | grep -qx partition || fail "no [slurm] keys parsed from conf.c's table"
for k in $(printf '%s\n%s\n' "$nv_keys" "$table_keys" | sort -u); do
	has "$M/pipelined.conf.5" "^\.It Ic $k( |$)" || miss "pipelined.conf.5: key $k (.It Ic $k)"
done
nconf=$(printf '%s\n%s\n' "$nv_keys" "$table_keys" | sort -u | wc -l)

# ---- run spec: common and [run] keys ---------------------------------
c_array() {
	nocomments "$TOP/daemon/server/spec.c" | awk -v name="$1" '
		index($0, name "[] = {") { on = 1 }
		on { print }
		on && /};/ { exit }' | grep -o '"[a-z_]*"' | tr -d '"'
}
spec_keys=$( (c_array spec_common_keys; c_array spec_run_keys) | sort -u)
echo "$spec_keys" | grep -qx after || fail "no keys parsed from spec_common_keys in daemon/server/spec.c"
echo "$spec_keys" | grep -qx previous || fail "no keys parsed from spec_run_keys in daemon/server/spec.c"
for k in $spec_keys; do
	has "$M/pipeline.ini.5" "^\.It Ic $k( |$)" || miss "pipeline.ini.5: spec key $k (.It Ic $k)"
done
nspec=$(echo "$spec_keys" | wc -w)

# ---- stages and their keys --------------------------------------------
# (stage --list: its first line is the header, STAGE SUMMARY)
stages=$(PIPELINED_CONF=$PL_CONF "$PIPELINECTL" stage --list 2>"$TEST_TMP/list.err" | awk 'NR > 1 { print $1 }')
# A plugin that is not loaded cannot have its keys checked: say so.
if grep -q "refused" "$TEST_TMP/list.err"; then
	cat "$TEST_TMP/list.err"
	fail "a plugin of $TOP/plugins was refused; its stage's keys cannot be checked"
fi
echo "$stages" | grep -qx exec || fail "pipelinectl stage --list does not list exec"
nstage=0; nskeys=0
for s in $stages; do
	nstage=$((nstage + 1))
	# The subsection: from ".Ss STAGE" to the next .Ss or .Sh.
	sub=$(awk -v s="$s" '
		$0 == ".Ss " s { on = 1; next }
		on && /^\.S[sh] / { exit }
		on { print }' "$M/pipeline.ini.5" 2>/dev/null)
	if [ -z "$sub" ]; then
		miss "pipeline.ini.5: stage $s has no .Ss $s subsection"
		continue
	fi
	keys=$(PIPELINED_CONF=$PL_CONF "$PIPELINECTL" stage "$s" --help 2>/dev/null | sed -n 's/^  \([A-Za-z0-9_.-]*\) .*/\1/p')
	for k in $keys; do
		nskeys=$((nskeys + 1))
		echo "$sub" | grep -Eq "^\.It Ic $k( |$)" || miss "pipeline.ini.5: stage $s: key $k (.It Ic $k in .Ss $s)"
	done
done

# ---- the plugin ABI ---------------------------------------------------
host_fns=$(awk '/^struct pl_host \{/ { on = 1 } on && /^\};/ { exit } on { print }' \
    "$TOP/include/pipeline/plugin.h" | grep -o '(\*[a-z_]*)' | tr -d '(*)')
[ -n "$host_fns" ] || fail "no host functions parsed from struct pl_host"
for f in $host_fns; do
	has "$M/pipeline-plugin.3" "^\.It Fn $f( |$)" || miss "pipeline-plugin.3: host function $f (.It Fn $f)"
done
for e in $(grep -o 'X(PL_E[A-Z]*,' "$TOP/include/pipeline/plugin.h" | sed 's/X(\(.*\),/\1/'); do
	has "$M/pipeline-plugin.3" "Dv $e( |$)" || miss "pipeline-plugin.3: error code $e"
done
for w in PL_ABI_VERSION PL_STAGE_ADOPTABLE PL_KEY_REQUIRED PL_KEY_HIDDEN pl_plugin_init; do
	has "$M/pipeline-plugin.3" "$w" || miss "pipeline-plugin.3: $w"
done
# Every symbol plugin.h offers (its macros, enum constants, types, the
# host table's functions, the symbols PL_PLUGIN exports) is named in
# pipeline-plugin.3 by an mdoc macro (.Dv, .Fn, .Vt, .Va, .Ft), and every
# PL_*, pl_* or host function the page names so is in plugin.h.
hdr=$(perl -0777 -pe 's|/\*.*?\*/||gs' "$TOP/include/pipeline/plugin.h")
abi_syms=$( {
	echo "$hdr" | sed -n 's/^#define \(PL_[A-Z0-9_]*\).*/\1/p' | grep -v '^PL_X_'
	echo "$hdr" | perl -0777 -ne 'while (/\benum\s+pl_\w+\s*\{(.*?)\}/gs) { my $b = $1; print "$1\n" while $b =~ /\b(PL_[A-Z0-9_]+)\b/g }' |
	    grep -v '^PL_X_\|^PL_ERRORS$'
	echo "$hdr" | grep -o 'X(PL_E[A-Z]*,\|X(PL_OK,' | sed 's/X(\(.*\),/\1/'
	echo "$hdr" | grep -o '\b\(struct\|enum\) pl_[a-z_]*' | sed 's/.* //'
	echo "$hdr" | perl -ne 'print "$1\n" if /^typedef\s.*?\(\*(pl_\w+)\)/ || /^typedef\s+struct\s+\w+\s+(pl_\w+);/'
	echo "$hdr" | grep -o '\bpl_plugin_[a-z][a-z]*\b'
	echo "$host_fns"
} | sort -u)
echo "$abi_syms" | grep -qx pl_plugin_abi || fail "no symbols parsed from include/pipeline/plugin.h"
page_syms=$(perl -ne 'next unless /^\./; s/host->//g;
	print "$1\n" while /\b(?:Dv|Fn|Fo|Va)\s+(?:\(\s+)?([A-Za-z_]\w*)(?![\w*])/g;
	print "$1\n" while /\b(?:Vt|Ft)\s+(?:PL_EXPORT\s+)?(?:const\s+)?(?:(?:struct|enum)\s+)?([A-Za-z_]\w*)/g' "$M/pipeline-plugin.3" | sort -u)
for s in $abi_syms; do
	echo "$page_syms" | grep -qx "$s" || miss "pipeline-plugin.3: $s of plugin.h is not named (.Dv, .Fn, .Vt, .Va or .Ft $s)"
done
for s in $(echo "$page_syms" | grep '^PL_\|^pl_'); do
	echo "$abi_syms" | grep -qx "$s" || miss "pipeline-plugin.3: names $s, which plugin.h does not define"
done
for f in $(sed -n 's/^\.It Fn \([a-z_]*\).*/\1/p' "$M/pipeline-plugin.3"); do
	echo "$host_fns" | grep -qx "$f" || miss "pipeline-plugin.3: .It Fn $f is not a function of struct pl_host"
done
nabi=$(echo "$abi_syms" | wc -l)
for t in $(grep -o 'PL_KEY_[A-Z]* *=\{0,1\} *[0-9]*,\{0,1\} */\*' "$TOP/include/pipeline/plugin.h" | grep -o 'PL_KEY_[A-Z]*'); do
	has "$M/pipeline-plugin.3" "Dv $t( |$)" || miss "pipeline-plugin.3: key type $t"
done

# ---- the job event protocol ---------------------------------------------
for w in started progress metric checkpoint artifact done error; do
	has "$M/pipeline-job.7" "^\.It Li $w( |$)" || miss "pipeline-job.7: event type $w (.It Li $w)"
done
for e in $(grep -ho 'PL_[A-Z_]*=%' "$TOP"/daemon/server/host*.c | tr -d '=%' | sort -u); do
	has "$M/pipeline-job.7" "^\.It Ev $e( |$)" || miss "pipeline-job.7: environment variable $e (.It Ev $e)"
done
# The core's own feed types: those it stores, and the drop notice. Other
# job.TYPE events come from jobs and plugins and are described generically.
feed_types=$( (grep -oh 'store_event([^;]*"[a-z]*\.[a-z]*"' "$TOP"/daemon/*/*.c |
    grep -o '"[a-z]*\.[a-z]*"$'; grep -o '"type\\":\\"feed\.[a-z]*' "$TOP/daemon/server/wire.c" |
    sed 's/.*"//; s/^/"/; s/$/"/') | tr -d '"' | sort -u)
echo "$feed_types" | grep -qx feed.dropped || fail "feed.dropped not found in daemon/server/wire.c"
echo "$feed_types" | grep -qx job.state || fail "no feed event types parsed from daemon/*/*.c"
for t in $feed_types; do
	has "$M/pipeline-job.7" "^\.It Li $t( |$)" || miss "pipeline-job.7: feed event $t (.It Li $t)"
done

# ---- citations: inside the repository; every code described -------------
# The files of the tree: git's list (tracked and new, not ignored) where
# there is one, else the text files a checkout holds. This test itself
# names the patterns, and the fuzz corpus is data.
if git -C "$TOP" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$TOP" && git ls-files --cached --others --exclude-standard) >"$TEST_TMP/files"
else
	(cd "$TOP" && find . -path ./.git -prune -o -path ./var -prune -o -type f \
	    \( -name '*.[ch]' -o -name '*.py' -o -name '*.sh' -o -name '*.md' -o -name '*.ini' \
	    -o -name '*.[1-8]' -o -name '*.tmpl' -o -name '*.txt' -o -name '*.conf' \
	    -o -name Makefile \) -print | sed 's|^\./||') >"$TEST_TMP/files"
fi
grep -v -e '^tests/fuzz/corpus/' -e '^tests/integration/build/docs\.sh$' "$TEST_TMP/files" |
    while read -r f; do [ -f "$TOP/$f" ] && printf '%s\n' "$f"; done >"$TEST_TMP/cited"
nfiles=$(wc -l <"$TEST_TMP/cited")
[ "$nfiles" -gt 100 ] || fail "only $nfiles files found to check for citations"
grep -q '^man/pipeline-gotchas\.7$' "$TEST_TMP/cited" || fail "man/pipeline-gotchas.7 is not among the files checked"
# Where the reference notes lived, and their names.
outside='(^|[^[:alnum:]_.-])shared/|/work/(shared|main|wt)/|(^|[^[:alnum:]_-])(recipe|gotchas|formats|inference-api|marvinlabs-site|dlm-troubleshooting|DESIGN|STYLE)\.(md|json)|marvinlabs|inference-api|dlm-troubleshooting'
(cd "$TOP" && tr '\n' '\0' <"$TEST_TMP/cited" | xargs -0 grep -InE -- "$outside") >"$TEST_TMP/outside" || true
while IFS= read -r l; do
	miss "a citation outside the repository: $l"
done <"$TEST_TMP/outside"

G=$M/pipeline-gotchas.7
# Every code the tree cites. F16, F32 and F64 are also dtype names
# (safetensors, GGUF) and cannot be told apart from findings by their form.
codes=$( (cd "$TOP" && tr '\n' '\0' <"$TEST_TMP/cited" | grep -zv '^man/pipeline-gotchas\.7$' |
    xargs -0 grep -IohE '\b[GF][0-9]{2}\b') | grep -vxE 'F(16|32|64)' | sort -u)
echo "$codes" | grep -qx G24 || fail "no gotcha codes parsed from the tree"
for c in $codes; do
	has "$G" "^\.Ss $c: " || miss "pipeline-gotchas.7: $c is cited in the tree but has no entry (.Ss $c: ...)"
done
# Every entry, cited or not, says all four things.
entries=$(sed -n 's/^\.Ss \([GF][0-9][0-9]\): .*/\1/p' "$G" 2>/dev/null)
for n in $(seq -w 1 32); do
	echo "$entries" | grep -qx "G$n" || miss "pipeline-gotchas.7: no entry for G$n"
done
for c in $entries; do
	body=$(awk -v c="$c" 'index($0, ".Ss " c ": ") == 1 { on = 1; next }
		on && /^\.S[sh] / { exit } on { print }' "$G")
	for w in Symptom Cause "Caught by" Test; do
		echo "$body" | grep -qx "\.It Em $w" || miss "pipeline-gotchas.7: $c has no \"$w\" item"
	done
done
# HACKING.md's "Files": one row per source file, no row for a file gone.
# files_rows FILE: the paths its table names; files_table FILE: each fault
# of its table, one a line.
files_rows() {
	awk '/^## Files$/ { on = 1; next } on && /^## / { exit } on' "$1" |
	    sed -n 's/^| `\([^`]*\)` | .*/\1/p' | sort
}
sources=$(cd "$TOP" && git ls-files 'daemon/*.[ch]' 'plugins/*.[ch]' 'include/*.h' 'jobs/*.py' \
    'tests/tools/*.sh' 'tests/tools/*.py' 'tests/tools/*.c' 2>/dev/null ||
    find daemon plugins include jobs tests/tools -name '*.[ch]' -o -name '*.py' -o -name '*.sh')
sources=$(echo "$sources" | sort -u)
files_table() {
	local rows f
	rows=$(files_rows "$1")
	[ -n "$rows" ] || { echo "HACKING.md: no \"## Files\" table parsed"; return; }
	for f in $(comm -23 <(echo "$sources") <(echo "$rows")); do echo "HACKING.md: $f has no row in \"## Files\""; done
	for f in $(comm -13 <(echo "$sources") <(echo "$rows")); do echo "HACKING.md: \"## Files\" names $f, which is gone"; done
}
H=$TOP/HACKING.md
while IFS= read -r m; do miss "$m"; done < <(files_table "$H")
# Shown on a copy: the row of a Python file taken out, one for a shell
# tool that is not there put in; each is named.
sed -e '/^| `jobs\/pljob\/tokens.py` |/d' \
    -e 's/^| `tests\/tools\/cache.sh` |.*/&\n| `tests\/tools\/gone.sh` | a tool that is not there |/' \
    "$H" >"$TEST_TMP/HACKING.md"
planted=$(files_table "$TEST_TMP/HACKING.md")
for want in 'HACKING.md: jobs/pljob/tokens.py has no row in "## Files"' \
    'HACKING.md: "## Files" names tests/tools/gone.sh, which is gone'; do
	grep -qxF -- "$want" <<<"$planted" || miss "the Files check, on a copy with a row taken out and one put in, does not say: $want (it says: $planted)"
done
echo "# the Files check on a planted copy: $(echo "$planted" | tr '\n' ';')"
listed=$(files_rows "$H")
nfilerows=$(echo "$listed" | wc -l)
long=$(awk 'function end() { if (n > 40) printf "%d (%d lines) ", s, n; n = 0 }
	/^- |^[0-9]+\. / { end(); s = NR }
	/^#|^$|^\||^    [^ ]/ { end(); next }
	{ if (n == 0 && s < NR - 1) s = NR; n++ } END { end() }' "$H")
[ -z "$long" ] || miss "HACKING.md: paragraphs longer than a screen (40 lines) at line $long"
ncodes=$(echo "$codes" | wc -w); nentries=$(echo "$entries" | wc -w)

# ---- tests cited by their names ------------------------------------------
# Every tests/ path the tree cites (tests/integration/DIR/NAME.sh, a helper
# of tests/lib/, a stand-in) exists, and no test is cited by a number it had
# before the tests were named by subsystem (NN-name.sh): after a merge of a
# branch from before the move, what still says the old name shows here.
(cd "$TOP" && tr '\n' '\0' <"$TEST_TMP/cited" |
    xargs -0 grep -IonE 'tests/(integration|lib|standins)/[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(sh|py)') \
    >"$TEST_TMP/testcites" || true
ntestcites=$(wc -l <"$TEST_TMP/testcites")
[ "$ntestcites" -gt 50 ] || fail "only $ntestcites citations of tests found"
while IFS= read -r l; do
	p=${l#*:*:}
	case "$p" in *'*'*|*DIR/*|*NAME*) continue;; esac   # patterns and placeholders
	[ -e "$TOP/$p" ] || miss "a citation of a test that does not exist: $l"
done <"$TEST_TMP/testcites"
(cd "$TOP" && tr '\n' '\0' <"$TEST_TMP/cited" |
    xargs -0 grep -IonE '(^|[^[:alnum:]_/.-])[0-9][0-9a-f]-[a-z][a-z0-9-]*\.sh') >"$TEST_TMP/oldnames" || true
while IFS= read -r l; do
	miss "a test cited by its old number (tests/integration/ORDER has the names): $l"
done <"$TEST_TMP/oldnames"

note "$nverbs verbs, $nconf conf keys, $nspec spec keys, $nstage stages with $nskeys keys, $nabi plugin.h symbols checked; $nfiles files for citations, $ncodes codes cited, $nentries entries, $ntestcites tests cited; $nfilerows source files in HACKING.md"
[ $missing -eq 0 ] || fail "$missing item(s) undocumented (listed above)"
echo ok
