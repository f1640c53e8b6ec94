#!/bin/bash
# train/resume-stack: a training run records the ML stack it ran on, and
# resumes only on that stack (jobs/pljob/stack.py, jobs/train.py):
#  - jobs/train.py (tiny engine) under Debian's python3 writes checkpoints
#    whose recorded configuration holds the interpreter's stack: no lock,
#    and the versions read from it (torch 1.13, transformers missing);
#  - resumed from such a checkpoint by the recipe environment's
#    interpreter (tests/tools/pyenv.sh, PYSTACK=recipe), it is refused with
#    exit 2 before any step runs, naming both stacks; resumed by the
#    interpreter it started on, it runs to the end;
#  - where the current stack's environment is built too, a checkpoint of
#    the recipe stack is refused by the current one, naming both locks;
#  - through a real pipelined, run v1's train job (the recipe
#    environment) stores the value "stack" (its lock, the lock's digest as
#    tests/tools/pyenv.sh --stack gives it, the versions), and
#    `pipelinectl report v1` shows it, also with --json.
. "$TOP/tests/lib.sh"
. "$TOP/tests/lib/gpu_stages.sh"
PYSTACK=recipe "$TOP/tests/tools/pyenv.sh" --check >/dev/null 2>&1 || {
	echo "SKIP: the recipe ML environment is not built (make pyenv)"
	exit 77
}
PY=$(PYSTACK=recipe "$TOP/tests/tools/pyenv.sh" --python)
read -r _ LOCK SUM <<<"$(PYSTACK=recipe "$TOP/tests/tools/pyenv.sh" --stack)"
trap reap EXIT
set +e +o pipefail
setup_tokens 12
J=$TOP/jobs
cd "$TEST_TMP" || exit 1
stack_note "$PY"

# conf NAME: a tiny training of 4 steps, a checkpoint at 2.
conf() {
	printf '{"engine":"tiny","base":"%s","tokens":"%s","lora_r":4,"max_steps":4,"save_steps":2,
 "gradient_accumulation_steps":1,"seed":3407}\n' "$BASE" "$TOKENS" >"$1.json"
}
# train NAME PYTHON [ARGS]: train.py in w-NAME; sets rc.
train() {
	local n=$1 py=$2
	shift 2
	mkdir -p "w-$n"
	PL_WORKDIR=$TEST_TMP/w-$n "$py" "$J/train.py" --config a.json --events "$n.ev" "$@" >"$n.out" 2>&1
	rc=$?
}
conf a

# Debian's python3: its stack in the checkpoint.
train debian "$PYD"
[ $rc = 0 ] || { cat debian.out; fail "training under Debian's python3: exit $rc"; }
CK=$TEST_TMP/w-debian/checkpoints/checkpoint-2
[ -f "$CK/trainer_state.json" ] || fail "no checkpoint at step 2"
"$PYD" - "$CK/trainer_state.json" debian.ev <<'PY' || fail "the checkpoint or the events do not hold Debian's stack"
import json, sys
from importlib import metadata
st = json.load(open(sys.argv[1]))["config"]["stack"]
assert st["lock"] is None and st["lock_sha256"] is None, st
assert st["torch"] == metadata.version("torch") and st["transformers"] is None, st
ev = [json.loads(l) for l in open(sys.argv[2])]
s = [e for e in ev if e["type"] == "stack"]
assert len(s) == 1 and s[0]["torch"] == st["torch"], s
PY

# The recipe's interpreter may not resume it.
train cross "$PY" --resume-from "$CK"
[ $rc = 2 ] || { cat cross.out; fail "a resume on another stack: exit $rc, want 2"; }
grep -q "resume from $CK: the checkpoint was made on another stack: no lock (the interpreter's own packages); torch 1\.13.*transformers missing.*; this resume would run on recipe ($LOCK sha256 ${SUM:0:12}); torch 2\." cross.ev ||
    { cat cross.ev; fail "the refusal does not name both stacks"; }
grep -q '"type":"loop_started"' cross.ev && fail "the refused resume ran a step"
# The interpreter it started on resumes it.
train same "$PYD" --resume-from "$CK"
[ $rc = 0 ] || { cat same.out; fail "a resume on the same stack: exit $rc"; }
grep -q '"type":"resumed","step":2' same.ev || fail "not resumed at step 2"

# The recipe stack's checkpoint, resumed by the current stack's interpreter.
if PYSTACK=current "$TOP/tests/tools/pyenv.sh" --check >/dev/null 2>&1; then
	PYC=$(PYSTACK=current "$TOP/tests/tools/pyenv.sh" --python)
	read -r _ CLOCK CSUM <<<"$(PYSTACK=current "$TOP/tests/tools/pyenv.sh" --stack)"
	train recipe "$PY"
	[ $rc = 0 ] || { cat recipe.out; fail "training on the recipe stack: exit $rc"; }
	train current "$PYC" --resume-from "$TEST_TMP/w-recipe/checkpoints/checkpoint-2"
	[ $rc = 2 ] || { cat current.out; fail "the current stack resumed the recipe's checkpoint: exit $rc"; }
	grep -q "made on another stack: recipe ($LOCK sha256 ${SUM:0:12}); torch 2\.6\..*; this resume would run on current ($CLOCK sha256 ${CSUM:0:12}); torch 2\.15\." current.ev ||
	    { cat current.ev; fail "the refusal does not name both locks"; }
	note "recipe -> current refused: $(sed -n 's/.*"message":"\([^"]*\)".*/\1/p' current.ev | head -c 300)"
else
	note "the current stack is not built (PYSTACK=current make pyenv): recipe -> current not tried"
fi

# Through a daemon: the value "stack" and pipelinectl report.
cat >"$TEST_TMP/v1.ini" <<INI
[run]
name = v1
[tokenize]
base = $BASE
corpus = $CORPUS
[train]
after = tokenize
engine = tiny
base = $BASE
lora_r = 4
max_steps = 2
gradient_accumulation_steps = 1
python = $PY
INI
pl_conf
pl_start
pctl submit "$TEST_TMP/v1.ini" >/dev/null || fail "submit"
wait_run v1 succeeded 300
v=$(db "SELECT v.value FROM vals v JOIN jobs j ON j.id = v.job_id JOIN runs r ON r.id = j.run_id
    WHERE r.name = 'v1' AND j.name = 'train' AND v.key = 'stack'")
[ -n "$v" ] || fail "train stored no value stack"
"$PY" - "$v" "$SUM" <<'PY' || fail "the value stack is not the interpreter's"
import json, sys
from importlib import metadata
v = json.loads(sys.argv[1])
assert v["stack"] == "recipe" and v["lock"] == "jobs/requirements.lock", v
assert v["lock_sha256"] == sys.argv[2], v
for p in ("torch", "transformers", "peft", "bitsandbytes", "accelerate"):
    assert v[p] == metadata.version(p), (p, v[p])
assert "type" not in v, v
PY
pctl report v1 >report.out 2>&1 || { cat report.out; fail "report v1"; }
cat report.out
grep -q "^stack v1/train: recipe ($LOCK sha256 ${SUM:0:12}); torch 2\.6\.0, transformers 5\.5\.0, peft 0\.20\.0, bitsandbytes 0\.50\.2, accelerate " report.out ||
    fail "report does not show the stack"
pctl --json report v1 >report.json || fail "report --json"
"$PYD" - report.json "$SUM" <<'PY' || fail "report --json has no stacks"
import json, sys
o = json.load(open(sys.argv[1]))
s = o["stacks"]
assert len(s) == 1 and s[0]["job"] == "v1/train" and s[0]["lock_sha256"] == sys.argv[2], s
PY
integrity_ok
echo ok
