#!/bin/bash
# gen-jobkeys.sh [--check]: write jobs/pljob/keys.py, the key tables of the
# train and probe stages as their plugins declare them (plugins/train.c,
# plugins/probe.c, the recipe's keys in trainkeys.h), from the built
# plugins/train.so and plugins/probe.so (tests/tools/stagekeys.c reads them).
# The C tables are the one definition of the training keys: the job
# programs take every default from keys.py and refuse a key it lacks.
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
for p in train probe; do
	[ -f "$TOP/plugins/$p.so" ] || { echo "gen-jobkeys: $TOP/plugins/$p.so is not built (make)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -std=gnu11 -Wall -Wextra -Werror -I"$TOP/include" -o "$tmp/stagekeys" \
    "$TOP/tests/tools/stagekeys.c" -ldl
"$tmp/stagekeys" "$TOP/plugins/train.so" train >"$tmp/train"
"$tmp/stagekeys" "$TOP/plugins/probe.so" probe >"$tmp/probe"
# The keys both tables hold alike (trainkeys.h's recipe keys, gpu, recipe)
# once, as COMMON; each stage's own after it.
/usr/bin/python3 - "$tmp" >"$tmp/keys.py" <<'PY'
import sys
d = sys.argv[1]
train = open(d + "/train").read().splitlines()
probe = open(d + "/probe").read().splitlines()
common = [x for x in train if x in probe]
print('"""pljob.keys: the train and probe stages\' key tables (type, default text,')
print("min, max) as their plugins declare them; GENERATED from the built plugins")
print("by tests/tools/gen-jobkeys.sh, do not edit (train/job-keys checks it).")
print('pljob.protocol.Config reads every key of train.py and probe.py here."""')
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
print('STAGES = {"train": TRAIN, "probe": PROBE}')
PY
if [ $check = 1 ]; then
	if ! cmp -s "$tmp/keys.py" "$OUT"; then
		diff -u "$OUT" "$tmp/keys.py" >&2 || true
		echo "gen-jobkeys: $OUT is stale: run tests/tools/gen-jobkeys.sh" >&2
		exit 1
	fi
	exit 0
fi
cp "$tmp/keys.py" "$OUT.tmp-$$"
mv "$OUT.tmp-$$" "$OUT"
echo "gen-jobkeys: wrote $OUT"
