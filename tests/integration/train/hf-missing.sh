#!/bin/bash
# train/hf-missing: the hf engine imports cleanly under an interpreter
# without transformers/peft/bitsandbytes/accelerate, and train.py and
# probe.py with engine = hf fail with exit 2 and an error event naming
# exactly the missing packages (train: the engine's own check; probe:
# pipelinectl doctor's checks, which it runs first; a package put on
# PYTHONPATH drops out of the list, so the check is real).  Nothing is
# trained or loaded.
set -eu
: "${TOP:?}" "${TEST_TMP:?}"
PY=/usr/bin/python3
J=$TOP/jobs
cd "$TEST_TMP"
. "$TOP/tests/lib.sh"

# What this interpreter lacks, by its own account.
missing=$($PY - <<'PY'
import importlib.util
print(", ".join(n for n in ("torch", "transformers", "peft", "bitsandbytes", "accelerate")
                if importlib.util.find_spec(n) is None))
PY
)
[ -n "$missing" ] || { echo "every hf package is installed here; nothing to test" >&2; exit 77; }

# Importing the module needs none of them.
(cd "$J" && $PY -c 'import engines.hf as h; print("import OK; missing:", h.missing_packages())') \
    || fail "engines.hf does not import"

$PY "$TOP/tests/fixtures/gen_gemma3.py" base >/dev/null
$PY "$TOP/tests/fixtures/gen_corpus.py" corpus.jsonl --n 4
printf '{"base":"%s/base","corpus":"%s/corpus.jsonl","output_dir":"%s/tok"}\n' \
    "$TEST_TMP" "$TEST_TMP" "$TEST_TMP" >tok.json
$PY "$J/tokenize_corpus.py" --config tok.json --events tok.ev || fail "tokenize"
printf '{"engine":"hf","base":"%s/base","tokens":"%s/tok/tokens.npz"}\n' "$TEST_TMP" "$TEST_TMP" >hf.json

for prog in train probe; do
	set +e
	PL_WORKDIR=$TEST_TMP $PY "$J/$prog.py" --config hf.json --events $prog.ev 2>$prog.err
	rc=$?
	set -e
	[ $rc -eq 2 ] || { cat $prog.ev $prog.err; fail "$prog: exit $rc, want 2"; }
	if [ $prog = train ]; then
		grep '"type":"error"' $prog.ev | grep -qF "engine hf: missing Python packages: $missing (interpreter $PY)" \
		    || { cat $prog.ev; fail "$prog: the error does not name: $missing"; }
	else
		# The probe runs pipelinectl doctor's checks first (jobs/doctor.py).
		grep '"type":"error"' $prog.ev | grep -qF "doctor: the run may not start: " ||
		    { cat $prog.ev; fail "probe: no doctor refusal"; }
		for m in ${missing//,/}; do
			grep '"type":"error"' $prog.ev | grep -qF "$m: missing from this interpreter" ||
			    { cat $prog.ev; fail "probe: the error does not name $m"; }
		done
		grep -q '"type":"doctor","ok":false' $prog.ev || { cat $prog.ev; fail "probe: no doctor event"; }
	fi
	! grep -q '"loop_started"' $prog.ev || fail "$prog: loop_started without an engine"
	# Nothing on stderr but train's one line naming the stack it runs on.
	! grep -v "^train: stack: " $prog.err | grep -q . || { cat $prog.err; fail "$prog: a traceback on stderr"; }
	[ $prog = probe ] || [ "$(grep -c "^train: stack: " $prog.err)" = 1 ] ||
		{ cat $prog.err; fail "train: not one line naming its stack"; }
done

# Provide a stand-in "transformers" package: it must leave the list.
mkdir -p fake/transformers && : >fake/transformers/__init__.py
set +e
PYTHONPATH=$TEST_TMP/fake PL_WORKDIR=$TEST_TMP $PY "$J/train.py" --config hf.json --events fake.ev 2>/dev/null
rc=$?
set -e
[ $rc -eq 2 ] || fail "with transformers present: exit $rc"
grep '"type":"error"' fake.ev | grep -q "missing Python packages" || fail "no missing-package error"
! grep '"type":"error"' fake.ev | grep -q "transformers" || { cat fake.ev; fail "transformers still reported missing"; }
# Every package present (stand-ins) but no CUDA device here: the engine
# says so instead of loading anything.
if $PY -c 'import torch, sys; sys.exit(1 if torch.cuda.is_available() else 0)'; then
	for p in peft bitsandbytes accelerate; do mkdir -p fake/$p && : >fake/$p/__init__.py; done
	set +e
	PYTHONPATH=$TEST_TMP/fake PL_WORKDIR=$TEST_TMP $PY "$J/train.py" --config hf.json --events nocuda.ev 2>/dev/null
	rc=$?
	set -e
	[ $rc -eq 2 ] || { cat nocuda.ev; fail "without CUDA: exit $rc"; }
	grep '"type":"error"' nocuda.ev | grep -q "engine hf: torch .* sees no CUDA device" || { cat nocuda.ev; fail "no CUDA message"; }
fi
echo "train/hf-missing: OK"
