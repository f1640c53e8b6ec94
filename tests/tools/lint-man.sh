#!/bin/bash
# tests/tools/lint-man.sh: every manual page under man/ must be clean under
# `mandoc -Tlint`. STYLE notes are allowed (chiefly "referenced manual not
# found" for pages that are not installed on this machine); anything of
# WARNING level or above fails the test and is printed, one line each.
#
#   tests/tools/lint-man.sh [PAGE...]     default: man/*.[1-8]
set -u
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$TOP" || exit 1
command -v mandoc >/dev/null 2>&1 || {
	echo "lint-man: mandoc is not installed (etc/deps.sh installs it)" >&2
	exit 77
}
if [ $# -gt 0 ]; then
	pages=("$@")
else
	pages=()
	for p in man/*.[1-8]; do [ -f "$p" ] && pages+=("$p"); done
fi
[ ${#pages[@]} -gt 0 ] || { echo "lint-man: no manual pages found under man/" >&2; exit 1; }

bad=0
for p in "${pages[@]}"; do
	# -W warning prints only messages of WARNING level and above. mandoc's
	# exit status alone is not used: it is non-zero for STYLE notes too on
	# some versions, and zero for some UNSUPP messages on others.
	out=$(mandoc -Tlint -W warning "$p" 2>&1)
	if [ -n "$out" ]; then
		echo "$out"
		bad=$((bad + 1))
	fi
	# The page must also render: an empty rendering means mandoc gave up.
	if [ -z "$(mandoc -Tascii "$p" 2>/dev/null)" ]; then
		echo "lint-man: $p: renders to nothing"
		bad=$((bad + 1))
	fi
done
if [ $bad -gt 0 ]; then
	echo "lint-man: $bad of ${#pages[@]} page(s) not clean under mandoc -Tlint"
	exit 1
fi
echo "lint-man: ${#pages[@]} page(s) clean: ${pages[*]}"
exit 0
