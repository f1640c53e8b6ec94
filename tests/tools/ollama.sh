#!/bin/bash
# tests/tools/ollama.sh: build a pinned release of the real Ollama server,
# offline, for the tests and the demo (register, bake, train's eviction,
# gate's promote).
#
# Usage:
#   tests/tools/ollama.sh --bin     # builds on first use; prints the path of
#                                   # the ollama binary (the only stdout)
#   tests/tools/ollama.sh --check   # exit 0 if already built, else 1;
#                                   # never builds
#   tests/tools/ollama.sh --version # the pinned version (0.24.0)
#   tests/tools/ollama.sh           # as --bin
#
# Which release: 0.24.0, the newest release on the Go module proxy that
# still compiles its inference (ggml and llama.cpp) with cgo inside
# `go build`, so one `go install github.com/ollama/ollama@v0.24.0` gives a
# binary that serves on the CPU. Later releases (0.30 and up) run inference
# in a separate llama-server runner built with CMake from a llama.cpp tag
# (their LLAMA_CPP_VERSION) with their llama/compat patches; that tag is
# not the llama.cpp this machine can get (the node-llama-cpp bundle of
# tests/tools/llama-oracle.sh is another commit), so those are not used.
#
# The Go toolchain: the module wants Go 1.26. A `go` on PATH or in
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
# toolchain) and ollama-0.24.0/{bin/ollama,build.log,smoke.log,.done}. The
# build runs under a lock (flock), so concurrent callers wait for one build;
# it is marked complete (.done, written last) only when `ollama --version`
# names the pinned version and one served request worked: `ollama serve` on
# a free loopback port with a private OLLAMA_MODELS and HOME, a model
# created from the tiny Gemma 3 fixture GGUF (tests/fixtures/gen_gemma3.py
# converted by the llama.cpp oracle's converter), and one /api/generate.
# An interrupted or failed build is simply redone by the next caller.
#
# Environment: OLLAMA_BUILD_JOBS (default 2) for go's -p; OLLAMA_GO, the go
# to use instead of looking (or "fetch": fetch the toolchain as if none).
# Progress goes to stderr; a failure is one line naming the step and its log.
set -eu

version=0.24.0
gover=1.26.0
# sha256 of https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go1.26.0.linux-amd64.zip
toolchain_sha=38461905b98c59173672814302e222ab43b652274bc0c95817b08b71ab66b705
jobs=${OLLAMA_BUILD_JOBS:-2}
mode=bin
case "${1:-}" in
--bin|"") ;;
--check) mode=check ;;
--version) echo "$version"; exit 0 ;;
-h|--help) sed -n '2,45p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
*) echo "ollama.sh: unknown argument: $1" >&2; exit 2 ;;
esac

say() { echo "ollama.sh: $*" >&2; }
die() { say "$*"; exit 1; }
TOP=$(cd "$(dirname "$0")/../.." && pwd)

. "$(dirname "$0")/cache.sh"
dir=$cache/ollama-$version
bin=$dir/bin/ollama

if [ -f "$dir/.done" ] && [ -x "$bin" ]; then
	[ "$mode" = check ] && exit 0
	echo "$bin"
	exit 0
fi
[ "$mode" = check ] && exit 1

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ -f "$dir/.done" ] && [ -x "$bin" ]; then
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
# in as the release scripts set them. A module zip holds no vendor/
# directory (the go command leaves them out), so the header-only libraries
# of llama.cpp's vendor/ (nlohmann json, stb_image, miniaudio) are missing
# from the module's copy of llama.cpp: they come from the llama.cpp oracle's
# tree (tests/tools/llama-oracle.sh), the same upstream files.
eval "$("$TOP/tests/tools/llama-oracle.sh" --env)" || die "step llama.cpp oracle: llama-oracle.sh failed"
for h in nlohmann/json.hpp nlohmann/json_fwd.hpp stb/stb_image.h miniaudio/miniaudio.h; do
	[ -f "$LLAMA_SRC/vendor/$h" ] || die "step vendor headers: $LLAMA_SRC/vendor/$h is missing"
done
export CGO_CPPFLAGS="-I$LLAMA_SRC/vendor"
say "building ollama $version with go install (first time ~15 minutes of 2 cores: ggml and llama.cpp through cgo; cached after)"
t0=$(date +%s)
nice "$GO" install -p "$jobs" -trimpath \
    -ldflags "-w -s -X=github.com/ollama/ollama/version.Version=$version -X=github.com/ollama/ollama/server.mode=release" \
    "github.com/ollama/ollama@v$version" >"$dir/build.log" 2>&1 ||
    die "step go install: failed; see $dir/build.log"
[ -x "$bin" ] || die "step go install: no $bin; see $dir/build.log"
say "built in $(( $(date +%s) - t0 )) s"

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
PYTHONPATH=$LLAMA_SRC:$GGUF_PY /usr/bin/python3 -B "$TOP/tests/standins/convert_stubbed.py" \
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
