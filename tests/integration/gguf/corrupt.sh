#!/bin/bash
# gguf/corrupt.sh: corrupt GGUF inputs are refused with clear errors and
# crash nothing. From a real Q8_0 file: truncations, a huge tensor count, a
# huge KV count, a string length that lies, a huge array count, a
# misaligned tensor offset, an offset that overlaps, an unknown type, a bad
# version, trailing garbage. `pipelinectl gguf` and the quantize and verify
# stages each refuse every one, naming the problem, and leave no output.
# Then the reader runs under ASan and UBSan (the fuzz target, built here)
# on all of them, the fuzz corpus, and 6000 random mutations.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/lib/gguf.sh"
cd "$TEST_TMP"

fixture causal --layout causal
stage convert input=causal output=$TEST_TMP/f16.gguf || { cat convert.out; fail convert; }
stage quantize input=f16.gguf output=$TEST_TMP/good.gguf || { cat quantize.out; fail quantize; }
mkdir -p bad
/usr/bin/python3 - good.gguf bad <<'PY'
import struct, sys
src, out = sys.argv[1], sys.argv[2]
b = open(src, "rb").read()
def u32(o): return struct.unpack_from("<I", b, o)[0]
def u64(o): return struct.unpack_from("<Q", b, o)[0]
# Walk the header to find the places to corrupt.
n_t, n_kv = u64(8), u64(16)
p = 24
kv_at = {}
def skip_val(p, t):
    if t == 8: return p + 8 + u64(p)
    return p + {0:1,1:1,2:2,3:2,4:4,5:4,6:4,7:1,10:8,11:8,12:8}[t]
for _ in range(n_kv):
    k0 = p; kl = u64(p); key = b[p+8:p+8+kl].decode(); p += 8 + kl
    t = u32(p); p += 4
    kv_at[key] = (k0, p)
    if t == 9:
        at = u32(p); n = u64(p + 4); p += 12
        for _ in range(n): p = skip_val(p, at)
    else:
        p = skip_val(p, t)
t_at = []
for _ in range(n_t):
    t0 = p; nl = u64(p); p += 8 + nl
    nd = u32(p); p += 4 + 8 * nd
    t_at.append((t0, p)); p += 12     # p: type; p+4: offset
def put(name, data):
    open(f"{out}/{name}.gguf", "wb").write(data)
def patch(name, off, fmt, val):
    m = bytearray(b); struct.pack_into(fmt, m, off, val); put(name, bytes(m))
put("truncated-header", b[:200])
put("truncated-data", b[:len(b) - 1000])
put("truncated-infos", b[:t_at[10][0] + 5])
patch("huge-tensor-count", 8, "<Q", 1 << 62)
patch("huge-kv-count", 16, "<Q", 1 << 40)
patch("bad-version", 4, "<I", 4)
patch("lying-key-length", kv_at["general.architecture"][0], "<Q", 1 << 29)
patch("lying-string-length", kv_at["general.architecture"][1], "<Q", 1 << 20)
patch("huge-string-length", kv_at["general.architecture"][1], "<Q", 1 << 40)
tok = kv_at["tokenizer.ggml.tokens"][1]
patch("huge-array-count", tok + 4, "<Q", 1 << 61)
patch("lying-token-length", tok + 12, "<Q", 5000000)
patch("misaligned-offset", t_at[3][1] + 4, "<Q", u64(t_at[3][1] + 4) + 2)
patch("overlapping-offset", t_at[3][1] + 4, "<Q", u64(t_at[2][1] + 4))
patch("unknown-type", t_at[5][1], "<I", 77)
patch("array-of-arrays", tok, "<I", 9)
put("trailing-garbage", b + b"\x00" * 40 + b"junk")
PY
want() {	# want FILE PATTERN: every consumer refuses FILE, naming PATTERN
	local f=bad/$1.gguf
	"$PCTL" gguf $f >list.out 2>&1 && fail "$1: pipelinectl gguf accepted it"
	grep -q -- "$2" list.out || { cat list.out; fail "$1: pipelinectl gguf: no \"$2\""; }
	stage quantize input=$f output=$TEST_TMP/out-$1.gguf && fail "$1: quantized"
	grep -q -- "$2" quantize.out || { cat quantize.out; fail "$1: quantize: no \"$2\""; }
	[ ! -e out-$1.gguf ] || fail "$1: quantize left an output"
	stage verify input=$f previous_gguf=f16.gguf && fail "$1: verified"
	grep -q -- "$2" verify.out || { cat verify.out; fail "$1: verify: no \"$2\""; }
	note "$1: $(cat list.out)"
}
want truncated-header "KV count 32 is impossible in a file of 200 bytes"
want truncated-data "tensor blk.3.ffn_up.weight: data .* runs past the end of the file"
want truncated-infos "truncated at byte [0-9]*: name of tensor 10 needs 8 bytes, 5 left"
want huge-tensor-count "tensor count 4611686018427387904 is impossible"
want huge-kv-count "KV count 1099511627776 is impossible"
want bad-version "GGUF version 4 is not supported"
want lying-key-length "key of KV 0 length 536870912 runs past the end"
want lying-string-length "general.architecture length 1048576 runs past the end"
want huge-string-length "general.architecture length 1099511627776 exceeds the 1 GiB limit"
want huge-array-count "tokenizer.ggml.tokens claims 2305843009213693952 strings"
want lying-token-length "element 0 of tokenizer.ggml.tokens length 5000000 runs past the end"
want misaligned-offset "tensor blk.0.attn_k_norm.weight: offset 56834 is not a multiple of the alignment 32"
want overlapping-offset "tensor blk.0.attn_k_norm.weight: offset 52480, expected 56832 (tensor data must be packed in info order)"
want unknown-type "tensor blk.0.attn_output.weight: unknown or removed ggml type 77"
want array-of-arrays "tokenizer.ggml.tokens is an array of arrays"
want trailing-garbage "44 unexpected bytes after the tensor data"
ls -a | grep -q '\.tmp' && fail "a temporary was left behind" || true

# The reader under ASan and UBSan, on everything above and more.
cat >replay.c <<'C'
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static uint64_t s = 88172645463325252ull;
static uint32_t rnd(void) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return (uint32_t)s; }
int main(int argc, char **argv) {
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		if (!f) { perror(argv[i]); return 2; }
		fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
		uint8_t *b = malloc(n ? n : 1);
		if (fread(b, 1, n, f) != (size_t)n) return 2;
		fclose(f);
		LLVMFuzzerTestOneInput(b, n);
		/* Mutations of the header region of each file. */
		size_t hdr = n < 30000 ? n : 30000;
		for (int m = 0; m < 6000 / argc && hdr; m++) {
			uint8_t *c = malloc(n);
			memcpy(c, b, n);
			for (int k = 0; k < 1 + (int)(rnd() % 4); k++)
				c[rnd() % hdr] ^= (uint8_t)(1u << (rnd() % 8));
			size_t len = (rnd() % 8 == 0) ? rnd() % n : (size_t)n;
			LLVMFuzzerTestOneInput(c, len);
			free(c);
		}
		free(b);
	}
	printf("replayed %d files\n", argc - 1);
	return 0;
}
C
cc -std=gnu11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
    -D_GNU_SOURCE -I"$TOP/plugins/lib/io" -I"$TOP/plugins/lib/format" replay.c "$TOP/tests/fuzz/fuzz_gguf.c" \
    "$TOP/plugins/lib/format/gguf.c" "$TOP/plugins/lib/io/atomic.c" "$TOP/plugins/lib/io/mapguard.c" \
    -lm -o replay || fail "building the ASan replay"
ASAN_OPTIONS=detect_leaks=1 ./replay good.gguf bad/*.gguf "$TOP"/tests/fuzz/corpus/gguf/* >replay.out 2>&1 ||
    { tail -40 replay.out; fail "the reader crashed or misbehaved under ASan/UBSan"; }
note "$(cat replay.out)"
