#!/bin/bash
# cli/doctor.sh: pipelinectl doctor [SPEC] runs jobs/doctor.py with the
# interpreter the jobs would use, against the real packages there:
#  - the pinned environment (tests/tools/pyenv.sh) passes for a spec whose
#    probe and train run on the CPU (one check covering both jobs); without a
#    spec (daemon.python, device auto) it checks the device this machine has
#    (the CPU here, said so) and passes, with no install hint;
#  - Debian's /usr/bin/python3 (torch 1.13, no transformers) fails, naming
#    every missing package with the command that installs it, and G08;
#  - every check names the interpreter's stack: the lock of the
#    environment PYSTACK names and its digest (tests/tools/pyenv.sh
#    --stack) with the versions; "no lock" for Debian's python3; an
#    environment whose lock is not the repository's warns;
#  - a job whose python does not exist fails clearly, naming it;
#  - --json gives one object per check run.
. "$TOP/tests/lib.sh"
"$TOP/tests/tools/pyenv.sh" --check >/dev/null 2>&1 || {
	echo "SKIP: the pinned environment is not built (make pyenv)"
	exit 77
}
PY=$("$TOP/tests/tools/pyenv.sh" --python)
read -r STACK LOCK SUM <<<"$("$TOP/tests/tools/pyenv.sh" --stack)"
stack_note "$PY"
PL_PYTHON=$PY pl_conf
/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$TEST_TMP/base" --layout causal >/dev/null || fail "gen_gemma3"
: >"$TEST_TMP/corpus.jsonl"
spec() { # spec NAME PROBE-PYTHON TRAIN-PYTHON
	cat >"$TEST_TMP/$1.ini" <<INI
[run]
name = $1
[tokenize]
base = $TEST_TMP/base
corpus = $TEST_TMP/corpus.jsonl
[probe]
after = tokenize
base = $TEST_TMP/base
device = cpu
python = $2
[train]
after = probe
base = $TEST_TMP/base
device = cpu
python = $3
INI
}

spec good "$PY" "$PY"
pctl doctor "$TEST_TMP/good.ini" >"$TEST_TMP/good.out" 2>&1 || { cat "$TEST_TMP/good.out"; fail "doctor fails the pinned environment"; }
cat "$TEST_TMP/good.out"
grep -q "^== probe, train: $PY (device cpu, cuda_device 0)$" "$TEST_TMP/good.out" || fail "not one check for both jobs"
for p in torch transformers peft bitsandbytes accelerate; do
	grep -q "^ok   $p: [0-9]" "$TEST_TMP/good.out" || fail "no version of $p"
done
grep -q "^ok   bitsandbytes: .*nf4 with double quantization on cpu" "$TEST_TMP/good.out" || fail "no 4-bit check"
grep -q "^ok   stack: $STACK ($LOCK sha256 ${SUM:0:12}); torch [0-9].*, transformers [0-9].*, peft [0-9].*, bitsandbytes [0-9].*, accelerate [0-9]" \
    "$TEST_TMP/good.out" || fail "the stack is not named"
grep -q '^warn' "$TEST_TMP/good.out" && fail "a warning on the $STACK stack's own environment"
grep -q "^probe, train: the run may start$" "$TEST_TMP/good.out" || fail "no verdict"

# Without a spec: daemon.python on the device this machine has: CUDA where
# an NVIDIA driver is, else the CPU, said so; a machine without a GPU is
# no failure, and no install hint is printed when nothing is missing.
pctl doctor >"$TEST_TMP/conf.out" 2>&1
rc=$?
[ $rc = 0 ] || { cat "$TEST_TMP/conf.out"; fail "doctor without a spec: exit $rc, want 0"; }
grep -q "(device auto, cuda_device 0)$" "$TEST_TMP/conf.out" || { cat "$TEST_TMP/conf.out"; fail "not device auto"; }
if [ -e /proc/driver/nvidia/version ]; then
	grep -q '^ok   cuda: device 0' "$TEST_TMP/conf.out" || { cat "$TEST_TMP/conf.out"; fail "no CUDA check on this GPU machine"; }
else
	grep -q '^ok   device-choice: device auto: no NVIDIA driver found, checking cpu' "$TEST_TMP/conf.out" ||
	    { cat "$TEST_TMP/conf.out"; fail "without a GPU doctor should check the CPU, and say so"; }
fi
grep -q '^hint:' "$TEST_TMP/conf.out" && { cat "$TEST_TMP/conf.out"; fail "an install hint with nothing missing"; }

# Debian's interpreter: the missing packages and G08.
spec debian /usr/bin/python3 "$PY"
pctl doctor "$TEST_TMP/debian.ini" >"$TEST_TMP/debian.out" 2>&1
rc=$?
cat "$TEST_TMP/debian.out"
[ $rc = 1 ] || fail "doctor with Debian's python3: exit $rc, want 1"
for p in transformers peft bitsandbytes accelerate; do
	grep -q "^FAIL $p: missing from this interpreter (\`make pyenv\` installs it)$" "$TEST_TMP/debian.out" ||
	    fail "$p not named missing"
done
grep -q '^FAIL mask-utils: torch 1\.13.* is older than 2\.6, .*transformers 5\.5\.0 (the pinned one).* (G08)$' \
    "$TEST_TMP/debian.out" || fail "G08 not named"
grep -q '^hint: `make pyenv` (tests/tools/pyenv.sh) installs the pinned environment' "$TEST_TMP/debian.out" ||
    fail "no install hint"
grep -q '^probe: the run may not start' "$TEST_TMP/debian.out" || fail "no refusal for probe"
grep -q "^ok   stack: no lock (the interpreter's own packages); torch 1\.13.*, transformers missing, peft missing" \
    "$TEST_TMP/debian.out" || fail "Debian's python3 is not named a stack without a lock"
grep -q '^train: the run may start$' "$TEST_TMP/debian.out" || fail "train's interpreter not passed"
grep -q '^doctor: 1 of 2 checks allow the run$' "$TEST_TMP/debian.out" || fail "no tally"

# An environment built from another version of its lock: a warning
# naming the command that builds the one the repository holds.
/usr/bin/python3 -m venv --system-site-packages "$TEST_TMP/stale" || fail "venv"
printf '{"lock": "%s", "sha256": "%s", "stack": "%s"}\n' "$LOCK" "$(printf 0%.0s {1..64})" "$STACK" \
    >"$TEST_TMP/stale/pipeline-stack.json"
spec stale "$TEST_TMP/stale/bin/python" "$PY"
pctl doctor "$TEST_TMP/stale.ini" >"$TEST_TMP/stale.out" 2>&1
grep -q "^warn lock: the environment was built from another $LOCK (sha256 000000000000; the repository's is ${SUM:0:12}): PYSTACK=$STACK tests/tools/pyenv.sh builds the one it names$" \
    "$TEST_TMP/stale.out" || { cat "$TEST_TMP/stale.out"; fail "a stale environment not warned"; }

# A python that does not exist.
spec bogus "$TEST_TMP/no/such/python" "$PY"
pctl doctor "$TEST_TMP/bogus.ini" >"$TEST_TMP/bogus.out" 2>&1
rc=$?
[ $rc = 1 ] || { cat "$TEST_TMP/bogus.out"; fail "a bogus python: exit $rc, want 1"; }
grep -q "probe: python $TEST_TMP/no/such/python: cannot run it: No such file or directory" "$TEST_TMP/bogus.out" ||
    { cat "$TEST_TMP/bogus.out"; fail "the bogus python is not named"; }

# A spec that does not check is exit 1, with its error (pipelinectl(1)
# EXIT STATUS).
printf '[run]\nname = x\n[probe]\nbase = %s\nlora_alhpa = 3\n' "$TEST_TMP/base" >"$TEST_TMP/typo.ini"
pctl doctor "$TEST_TMP/typo.ini" >"$TEST_TMP/typo.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "typo.ini:5: lora_alhpa: unknown key" "$TEST_TMP/typo.out" || { cat "$TEST_TMP/typo.out"; fail "bad spec: exit $rc"; }

# --json: one object per check run.
pctl --json doctor "$TEST_TMP/good.ini" >"$TEST_TMP/good.json" || fail "--json"
/usr/bin/python3 - "$TEST_TMP/good.json" "$SUM" <<'PY' || fail "--json output"
import json, sys
objs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(objs) == 1 and objs[0]["ok"] is True and objs[0]["label"] == "probe, train", objs
names = [c["name"] for c in objs[0]["checks"]]
st = objs[0]["stack"]
assert st["lock_sha256"] == sys.argv[2] and st["torch"] and st["transformers"], st
assert "torch" in names and "bitsandbytes" in names, names
PY
echo ok
