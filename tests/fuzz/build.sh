#!/bin/bash
# tests/fuzz/build.sh: `make fuzz`. Builds every tests/fuzz/fuzz_NAME.c
# with clang's libFuzzer and ASan/UBSan as tests/fuzz/fuzz_NAME, linked
# with the daemon core and the plugins' common library (built the same
# way under build/fuzz). Run one with, for example:
#   tests/fuzz/fuzz_spec -max_total_time=60 tests/fuzz/corpus/spec
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
cd "$TOP"
B=build/fuzz
mkdir -p "$B"
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -g -O1"
CFL="-std=gnu11 -D_GNU_SOURCE -Iinclude -Idaemon -Iplugins/common $(pkg-config --cflags libuv libcjson openblas) -DPL_PREFIX=\"/usr/local\""
objs=()
for f in $(ls daemon/*.c plugins/common/*.c | grep -v -e daemon/pipelined.c -e daemon/pipelinectl.c -e daemon/shim.c -e daemon/ctl_); do
	o=$B/$(echo "$f" | tr / _).o
	clang $CFL $SAN -c -o "$o" "$f"
	objs+=("$o")
done
LIBS="$(pkg-config --libs libuv sqlite3 libcjson libcurl inih libcrypto libsystemd openblas) -lm -lpthread -ldl"
for t in tests/fuzz/fuzz_*.c; do
	name=$(basename "$t" .c)
	clang $CFL -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer -g -O1 \
	    -o "tests/fuzz/$name" "$t" "${objs[@]}" $LIBS
	echo "built tests/fuzz/$name"
done
