#!/bin/bash
# tests/tools/ollama.sh: build a pinned release of the real Ollama server,
# offline, for the tests and the demo (register, bake, train's eviction,
# gate's promote).
#
# Usage:
#   tests/tools/ollama.sh --bin      # builds on first use; prints the path of
#                                    # the ollama binary (the only stdout)
#   tests/tools/ollama.sh --check    # exit 0 if already built, else 1;
#                                    # never builds
#   tests/tools/ollama.sh --version  # the selected version (OLLAMA_VERSION)
#   tests/tools/ollama.sh --versions # every version this script builds, the
#                                    # default first
#   tests/tools/ollama.sh            # as --bin
#
# Which release: OLLAMA_VERSION selects one of the two profiles the project
# is tested with (pipeline.ini(5): the [register] server profiles):
#
# 0.34.2 (the default, what an operator installs today): the Go binary from
#   the Go module proxy (`go install github.com/ollama/ollama@v0.34.2`, with
#   its version set by -ldflags as the release scripts do, else it reports
#   0.0.0), plus its inference runner, an upstream llama.cpp `llama-server`
#   built with CMake through the module's own llama/server/CMakeLists.txt
#   (which applies the llama/compat patches and links the compat sources),
#   placed at ../lib/ollama/llama-server beside the binary, where Ollama
#   looks on Linux (llm/llama_binary.go). Ollama pins llama.cpp b10969
#   (its LLAMA_CPP_VERSION); the module build would fetch that tag with
#   git, which this machine cannot reach. The llama.cpp source used instead
#   is the one a registry package carries closest to it: the release source
#   in node-llama-cpp 3.21.1 (llama.cpp commit 80fb11ac73e6 of 2026-09-12),
#   the tree tests/tools/llama-oracle.sh already fetches. v0.34.2 was tagged
#   on 2026-09-17, so b10969 is at most five days after that commit (the
#   next package, 3.22.1, carries a commit of 2026-09-28, eleven days after
#   the tag or more); the bundle is a one-commit clone without its tag, so
#   the distance in commits cannot be counted. Both compat patches apply
#   cleanly to it. Only the CPU backend is built, statically and without
#   the per-CPU variants of the "cpu" preset (GGML_CPU_ALL_VARIANTS): one
#   build of ggml instead of a dozen.
#
# 0.24.0 (the second profile, May 2026): the last release that still
#   compiles its inference (ggml and llama.cpp) with cgo inside `go build`,
#   so one `go install github.com/ollama/ollama@v0.24.0` gives a binary
#   that serves on the CPU.
#
# The Go toolchain: the modules want Go 1.26. A `go` on PATH or in
# /usr/local/go/bin that is new enough is used as it is; one of 1.21 or
# later but older gets GOTOOLCHAIN=go1.26.0 (go downloads that toolchain
# from the module proxy itself); with no usable go at all (Debian 12's
# golang is 1.19, too old) the toolchain module golang.org/toolchain
# v0.0.1-go1.26.0.linux-amd64 is fetched from the Go module proxy with curl,
# checked against its pinned sha256, and unpacked into the cache.
#
# The cache lives outside the repository, in $PIPELINED_CACHE (default
# /var/cache/pipelined, or ~/.cache/pipelined when that is not writable):
# go/mod (GOMODCACHE), go/build (GOCACHE), go/go1.26.0 (a fetched
# toolchain) and ollama-VERSION/{bin/ollama,build.log,smoke.log,.done}
# (0.34.2 adds lib/ollama/llama-server, llama-src, llama-build,
# llama-build.log and build-times, the seconds each build took). The build
# runs under a lock (flock) per version, so concurrent callers wait for one
# build; it is marked complete (.done, written last) only when `ollama
# --version` names the pinned version and one served request worked:
# `ollama serve` on a free loopback port with a private OLLAMA_MODELS and
# HOME, a model created from the tiny Gemma 3 fixture GGUF
# (tests/fixtures/gen_gemma3.py converted by the llama.cpp oracle's
# converter), and one /api/generate. An interrupted or failed build is
# simply redone by the next caller.
#
# Environment: OLLAMA_VERSION (0.34.2 or 0.24.0; default 0.34.2);
# OLLAMA_BUILD_JOBS (default 2) for go's -p and the CMake build's -j;
# OLLAMA_GO, the go to use instead of looking (or "fetch": fetch the
# toolchain as if none). Progress goes to stderr; a failure is one line
# naming the step and its log.
set -eu

# The versions built, the default first.
versions="0.34.2 0.24.0"
version=${OLLAMA_VERSION:-0.34.2}
gover=1.26.0
# sha256 of https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go1.26.0.linux-amd64.zip
toolchain_sha=38461905b98c59173672814302e222ab43b652274bc0c95817b08b71ab66b705
jobs=${OLLAMA_BUILD_JOBS:-2}
mode=bin
case "${1:-}" in
--bin|"") ;;
--check) mode=check ;;
--version) echo "$version"; exit 0 ;;
--versions) echo "$versions"; exit 0 ;;
-h|--help) sed -n '2,75p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
*) echo "ollama.sh: unknown argument: $1" >&2; exit 2 ;;
esac

say() { echo "ollama.sh: $*" >&2; }
die() { say "$*"; exit 1; }
TOP=$(cd "$(dirname "$0")/../.." && pwd)
case " $versions " in
*" $version "*) ;;
*) die "OLLAMA_VERSION=$version is not one this script builds (it builds: $versions)" ;;
esac
# The runner of the llama-server releases (0.30 and later), empty for 0.24.0.
runner=""
[ "$version" = 0.24.0 ] || runner=lib/ollama/llama-server

. "$(dirname "$0")/cache.sh"
dir=$cache/ollama-$version
bin=$dir/bin/ollama

if [ -f "$dir/.done" ] && [ -x "$bin" ] && { [ -z "$runner" ] || [ -x "$dir/$runner" ]; }; then
	[ "$mode" = check ] && exit 0
	echo "$bin"
	exit 0
fi
[ "$mode" = check ] && exit 1

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ -f "$dir/.done" ] && [ -x "$bin" ] && { [ -z "$runner" ] || [ -x "$dir/$runner" ]; }; then
	echo "$bin"
	exit 0
fi
rm -f "$dir/.done"

# go_minor GO: the minor version of a Go toolchain (26 for go1.26.8), or 0.
go_minor() {
	"$1" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p' | grep . || echo 0
}

# Step 1: a Go toolchain new enough for the module.
want=${gover#1.}; want=${want%%.*}
GO=""
cands="$(command -v go 2>/dev/null || true) /usr/local/go/bin/go"
[ "${OLLAMA_GO:-}" = fetch ] && cands=""
[ -n "${OLLAMA_GO:-}" ] && [ "$OLLAMA_GO" != fetch ] && cands=$OLLAMA_GO
for g in $cands; do
	[ -n "$g" ] && [ -x "$g" ] || continue
	m=$(GOTOOLCHAIN=local go_minor "$g")
	if [ "$m" -ge "$want" ]; then
		GO=$g; export GOTOOLCHAIN=local; break
	elif [ "$m" -ge 21 ]; then
		GO=$g; export GOTOOLCHAIN=go$gover; break
	fi
done
if [ -z "$GO" ]; then
	tc=$cache/go/go$gover
	if [ ! -x "$tc/bin/go" ]; then
		say "fetching the Go $gover toolchain from the Go module proxy (~70 MB, under a minute)"
		tmp=$(mktemp -d "$cache/.go-XXXXXX")
		curl -sfL -o "$tmp/tc.zip" \
		    "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$gover.linux-amd64.zip" ||
		    die "step go toolchain: download failed (is proxy.golang.org reachable?)"
		sum=$(sha256sum "$tmp/tc.zip" | cut -d' ' -f1)
		[ "$sum" = "$toolchain_sha" ] || die "step go toolchain: sha256 $sum, expected $toolchain_sha"
		/usr/bin/python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
		    "$tmp/tc.zip" "$tmp/x" || die "step go toolchain: unzip failed"
		# Module zips keep no file modes: the tools are made executable
		# as go's own toolchain switch does.
		root=$(echo "$tmp"/x/golang.org/toolchain@*)
		chmod +x "$root"/bin/* "$root"/pkg/tool/*/*
		mkdir -p "$cache/go"
		rm -rf "$tc"
		mv "$root" "$tc"
		rm -rf "$tmp"
	fi
	GO=$tc/bin/go
	export GOTOOLCHAIN=local
fi
export GOMODCACHE=$cache/go/mod GOCACHE=$cache/go/build GOFLAGS=-modcacherw
export CGO_ENABLED=1 GOBIN=$dir/bin
say "using $GO ($("$GO" env GOVERSION), GOTOOLCHAIN=$GOTOOLCHAIN)"

# Step 2: go install from the module proxy. The version and release mode go
# in as the release scripts set them.
: >"$dir/build-times"
if [ -z "$runner" ]; then
	# 0.24.0 compiles llama.cpp through cgo. A module zip holds no vendor/
	# directory (the go command leaves them out), so the header-only
	# libraries of llama.cpp's vendor/ (nlohmann json, stb_image,
	# miniaudio) are missing from the module's copy of llama.cpp: they come
	# from the llama.cpp oracle's tree (tests/tools/llama-oracle.sh), the
	# same upstream files.
	eval "$("$TOP/tests/tools/llama-oracle.sh" --env)" || die "step llama.cpp oracle: llama-oracle.sh failed"
	for h in nlohmann/json.hpp nlohmann/json_fwd.hpp stb/stb_image.h miniaudio/miniaudio.h; do
		[ -f "$LLAMA_SRC/vendor/$h" ] || die "step vendor headers: $LLAMA_SRC/vendor/$h is missing"
	done
	export CGO_CPPFLAGS="-I$LLAMA_SRC/vendor"
	say "building ollama $version with go install (first time ~15 minutes of 2 cores: ggml and llama.cpp through cgo; cached after)"
else
	say "building ollama $version with go install (first time ~2 minutes of 2 cores; cached after)"
fi
t0=$(date +%s)
nice "$GO" install -p "$jobs" -trimpath \
    -ldflags "-w -s -X=github.com/ollama/ollama/version.Version=$version -X=github.com/ollama/ollama/server.mode=release" \
    "github.com/ollama/ollama@v$version" >"$dir/build.log" 2>&1 ||
    die "step go install: failed; see $dir/build.log"
[ -x "$bin" ] || die "step go install: no $bin; see $dir/build.log"
say "built in $(( $(date +%s) - t0 )) s"
echo "go $(( $(date +%s) - t0 ))" >>"$dir/build-times"

# Step 2b (0.30 and later): the llama-server runner, built through the
# module's llama/server/CMakeLists.txt with the llama.cpp source overridden
# (FETCHCONTENT_SOURCE_DIR_LLAMA_CPP): that CMakeLists applies every
# llama/compat patch to the override with git apply and links the compat
# sources into the llama target, as Ollama's own build does. The override is
# a fresh clone of the oracle's tree, so the oracle stays unpatched.
if [ -n "$runner" ]; then
	eval "$("$TOP/tests/tools/llama-oracle.sh" --env)" || die "step llama.cpp oracle: llama-oracle.sh failed"
	mod=$GOMODCACHE/github.com/ollama/ollama@v$version
	[ -f "$mod/llama/server/CMakeLists.txt" ] ||
	    die "step llama-server: the module source of ollama $version is not in $GOMODCACHE; see $dir/build.log"
	say "building llama-server for ollama $version from llama.cpp $LLAMA_COMMIT (pinned: $(cat "$mod/LLAMA_CPP_VERSION")) with the llama/compat patches (first time ~10 minutes of 2 cores)"
	t0=$(date +%s)
	# A tree of the same commit left by an interrupted build is kept with
	# its build directory, so the build resumes (the patch step skips the
	# patches already applied); another commit starts afresh.
	if [ "$(git -C "$dir/llama-src" rev-parse HEAD 2>/dev/null)" != "$LLAMA_COMMIT" ]; then
		rm -rf "$dir/llama-src" "$dir/llama-build"
		git -c advice.detachedHead=false clone --quiet "$LLAMA_SRC" "$dir/llama-src" >"$dir/llama-build.log" 2>&1 ||
		    die "step llama-server: git clone of $LLAMA_SRC failed; see $dir/llama-build.log"
	fi
	gen=""
	command -v ninja >/dev/null 2>&1 && gen="-G Ninja"
	# Static, CPU only, one ggml-cpu for any x86-64 (GGML_NATIVE=OFF, so
	# the cached runner works on another CPU of the family); OpenSSL, curl
	# and the web UI are off because the build is offline and Ollama talks
	# plain HTTP to its runner.
	# shellcheck disable=SC2086
	cmake -S "$mod/llama/server" -B "$dir/llama-build" $gen \
	    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
	    -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF \
	    -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DOLLAMA_RUNNER_DIR= \
	    -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
	    -DFETCHCONTENT_SOURCE_DIR_LLAMA_CPP="$dir/llama-src" \
	    >>"$dir/llama-build.log" 2>&1 ||
	    die "step llama-server: cmake configure failed; see $dir/llama-build.log"
	grep -q 'compat' "$dir/llama-build.log" ||
	    die "step llama-server: the configure did not apply the llama/compat patches; see $dir/llama-build.log"
	nice cmake --build "$dir/llama-build" --target llama-server -j"$jobs" \
	    >>"$dir/llama-build.log" 2>&1 ||
	    die "step llama-server: build failed; see $dir/llama-build.log"
	[ -x "$dir/llama-build/bin/llama-server" ] ||
	    die "step llama-server: no $dir/llama-build/bin/llama-server; see $dir/llama-build.log"
	mkdir -p "$dir/lib/ollama"
	cp "$dir/llama-build/bin/llama-server" "$dir/$runner.tmp"
	mv -f "$dir/$runner.tmp" "$dir/$runner"
	echo "llama-server $(( $(date +%s) - t0 ))" >>"$dir/build-times"
	echo "llama.cpp $LLAMA_COMMIT" >>"$dir/build-times"
	say "llama-server built in $(( $(date +%s) - t0 )) s"
fi

# Step 3: the version it reports.
v=$(HOME=$dir OLLAMA_HOST=127.0.0.1:1 "$bin" --version 2>&1 | sed -n 's/.*client version is \([^ ]*\).*/\1/p; s/^ollama version is \([^ ]*\).*/\1/p' | head -n 1)
[ "$v" = "$version" ] || die "step version: $bin --version says '${v:-nothing}', expected $version"

# Step 4: one served request, on the tiny Gemma 3 fixture.
log=$dir/smoke.log
: >"$log"
work=$(mktemp -d /tmp/ollama-smoke.XXXXXX)
spid=
smoke_end() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
	rm -rf "$work"
}
trap smoke_end EXIT
say "smoke test: serving the tiny Gemma 3 fixture (under a minute)"
/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$work/base" --layout causal >>"$log" 2>&1 ||
    die "step smoke: gen_gemma3.py failed; see $log"
PYTHONPATH=$LLAMA_SRC:$GGUF_PY /usr/bin/python3 -B "$TOP/tests/integration/data/bake/convert_stubbed.py" \
    "$LLAMA_SRC/convert_hf_to_gguf.py" "$work/base" --outtype f16 --outfile "$work/tiny.gguf" >>"$log" 2>&1 ||
    die "step smoke: convert_hf_to_gguf.py failed; see $log"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
HOME=$work OLLAMA_HOST=127.0.0.1:$port OLLAMA_MODELS=$work/models OLLAMA_NOPRUNE=1 \
    "$bin" serve >>"$log" 2>&1 &
spid=$!
up=0
for _ in $(seq 1 300); do
	curl -sf "$url/api/version" >/dev/null 2>&1 && { up=1; break; }
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.1
done
[ "$up" = 1 ] || die "step smoke: ollama serve did not come up; see $log"
sv=$(curl -s "$url/api/version" | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
[ "$sv" = "$version" ] || die "step smoke: the server says version '$sv', expected $version; see $log"
printf 'FROM %s\n' "$work/tiny.gguf" >"$work/Modelfile"
HOME=$work OLLAMA_HOST=127.0.0.1:$port "$bin" create smoke -f "$work/Modelfile" >>"$log" 2>&1 ||
    die "step smoke: ollama create failed; see $log"
r=$(curl -s "$url/api/generate" -d '{"model":"smoke","prompt":"hello","stream":false,"options":{"num_predict":4,"temperature":0,"num_ctx":256}}')
echo "$r" >>"$log"
echo "$r" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r.get("done") is True and r.get("prompt_eval_count", 0) > 0, r' 2>>"$log" ||
    die "step smoke: /api/generate did not answer; see $log"
smoke_end
trap - EXIT
spid=

touch "$dir/.done"
say "ollama $version ready: $bin"
echo "$bin"
