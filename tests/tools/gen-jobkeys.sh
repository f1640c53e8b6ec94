#!/bin/bash
# gen-jobkeys.sh [--check]: write jobs/pljob/keys.py, the key tables of the
# stages whose work is a Python job program (train, probe, tokenize) as
# their plugins declare them (plugins/train.c, plugins/probe.c, the
# recipe's keys in trainkeys.h, plugins/tokenize.c), from the built
# plugins (tests/tools/stagekeys.c reads them); `make jobkeys` runs it.
# The C tables are the one definition of those keys: their defaults,
# bounds, choices and which of them a checkpoint records. The job programs
# take all of it from keys.py (pljob.Config) and refuse a key it lacks.
# With --check [FILE] nothing is written: exit 1 with the difference when
# keys.py (or FILE) is not what the plugins declare
# (tests/integration/train/job-keys.sh).
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$TOP/jobs/pljob/keys.py
check=0
if [ "${1:-}" = --check ]; then
	check=1
	OUT=${2:-$OUT}
fi
STAGES="train probe tokenize"
for p in $STAGES; do
	[ -f "$TOP/plugins/$p.so" ] || { echo "gen-jobkeys: $TOP/plugins/$p.so is not built (make)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -std=gnu11 -Wall -Wextra -Werror -I"$TOP/include" -o "$tmp/stagekeys" \
    "$TOP/tests/tools/stagekeys.c" -ldl
for p in $STAGES; do
	"$tmp/stagekeys" "$TOP/plugins/$p.so" "$p" >"$tmp/$p"
done
# The keys train's and probe's tables hold alike (trainkeys.h's recipe
# keys, gpu, recipe) once, as COMMON; each stage's own after it.
/usr/bin/python3 - "$tmp" >"$tmp/keys.py" <<'PY'
import sys
d = sys.argv[1]
train = open(d + "/train").read().splitlines()
probe = open(d + "/probe").read().splitlines()
tokenize = open(d + "/tokenize").read().splitlines()
common = [x for x in train if x in probe]
print('"""pljob.keys: the key tables of the stages whose work is a job program')
print("(train, probe, tokenize) as their plugins declare them; GENERATED from")
print("the built plugins by tests/tools/gen-jobkeys.sh (make jobkeys), do not")
print("edit (train/job-keys checks it).  pljob.protocol.Config reads every key")
print("of train.py, probe.py and tokenize_corpus.py here: each is a K of the")
print("key's type (pipeline.ini(5)), its default's text, its bounds (PL_KEY_MIN,")
print("PL_KEY_MAX), its choices, and whether a checkpoint records it")
print('(PL_KEY_CHECKPOINT: train.py\'s configuration digest)."""')
print()
print("import collections")
print()
print('K = collections.namedtuple("K", "type default min max choices checkpoint")')
print()
print("COMMON = {")
print("\n".join(common))
print("}")
for name, lines in (("TRAIN", train), ("PROBE", probe)):
    print()
    print("%s = dict(COMMON, **{" % name)
    print("\n".join(x for x in lines if x not in common))
    print("})")
print()
print("TOKENIZE = {")
print("\n".join(tokenize))
print("}")
print()
print('STAGES = {"train": TRAIN, "probe": PROBE, "tokenize": TOKENIZE}')
PY
if [ $check = 1 ]; then
	if ! cmp -s "$tmp/keys.py" "$OUT"; then
		diff -u "$OUT" "$tmp/keys.py" >&2 || true
		echo "gen-jobkeys: $OUT is stale: run make jobkeys" >&2
		exit 1
	fi
	exit 0
fi
cp "$tmp/keys.py" "$OUT.tmp-$$"
mv "$OUT.tmp-$$" "$OUT"
echo "gen-jobkeys: wrote $OUT"
