#!/bin/bash
# tests/tools/playwright.sh: playwright-core (pinned) from the npm registry,
# to drive Debian's Chromium in the browser tests; no browser is downloaded
# (the tests pass executablePath=/usr/bin/chromium).
#
#   NODE_PATH=$(tests/tools/playwright.sh) node script.mjs ...
#   tests/tools/playwright.sh --check    # exit 0 if installed; never installs
#
# Installed once into $PIPELINED_CACHE (default /var/cache/pipelined) as
# playwright-core-VERSION/node_modules, under a lock, marked complete last.
set -eu
version=${PLAYWRIGHT_CORE_VERSION:-1.65.1}
. "$(dirname "$0")/cache.sh"
dir=$cache/playwright-core-$version
if [ ! -f "$dir/.done" ]; then
	[ "${1:-}" = --check ] && exit 1
	mkdir -p "$dir"
	exec 9>"$dir/.lock"
	flock 9
	if [ ! -f "$dir/.done" ]; then
		echo "playwright.sh: installing playwright-core@$version with npm" >&2
		rm -rf "$dir/node_modules"
		(cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --silent --no-save \
		    --no-audit --no-fund "playwright-core@$version" >"$dir/install.log" 2>&1) || {
			echo "playwright.sh: npm install playwright-core@$version failed; see $dir/install.log" >&2
			exit 1
		}
		touch "$dir/.done"
	fi
fi
[ "${1:-}" = --check ] && exit 0
echo "$dir/node_modules"
