# tests/tools/cache.sh: sourced by the scripts that build or fetch what the
# tests use (llama-oracle.sh, ollama.sh, pyenv.sh, playwright.sh): sets
# `cache` to $PIPELINED_CACHE (default /var/cache/pipelined), or to
# ~/.cache/pipelined when that cannot be written, and makes it.
cache=${PIPELINED_CACHE:-/var/cache/pipelined}
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
	cache=${XDG_CACHE_HOME:-$HOME/.cache}/pipelined
	mkdir -p "$cache"
fi
