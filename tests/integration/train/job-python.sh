#!/bin/bash
# train/job-python: the job programs' Python by concern.  The engine interface
# is the abstract base class engines.base.Engine: both engines (tiny, hf)
# implement every abstract method, a subclass that lacks any one of them
# cannot be instantiated, and train.py and probe.py call no method of an
# engine that the interface does not declare.  The safetensors header is
# read in one place, pljob.read_safetensors_header (jobs/pljob/tensors.py),
# by the job programs and by the tests' Python alike, and it refuses a
# truncated file and a lying header naming the file and the tensor.
set -eu
. "$(dirname "$0")/../../lib.sh"
PY=/usr/bin/python3
cd "$TEST_TMP"

$PY - "$TOP/jobs" <<'PY' || fail "engine interface"
import ast, inspect, os, sys
jobs = sys.argv[1]
sys.path.insert(0, jobs)
from engines.base import Engine
from engines import hf, tiny

abstract = set(Engine.__abstractmethods__)
assert len(abstract) >= 18, sorted(abstract)
for cls in (tiny.TinyEngine, hf.HfEngine):
    assert issubclass(cls, Engine), cls
    assert not cls.__abstractmethods__, (cls, cls.__abstractmethods__)

# A subclass that lacks any one abstract method cannot be made.
for missing in sorted(abstract):
    body = {m: (lambda self, *a, **k: None) for m in abstract if m != missing}
    Partial = type("Partial", (Engine,), body)
    try:
        Partial(None, None)
    except TypeError as e:
        assert missing in str(e), (missing, str(e))
    else:
        raise AssertionError("an engine without %s was instantiated" % missing)

# What train.py and probe.py use of an engine: attributes of the names
# bound to one (eng, and the parameters of that name in their functions).
interface = {n for n, _ in inspect.getmembers(Engine) if not n.startswith("_")}
used = {}
for prog in ("train.py", "probe.py"):
    path = os.path.join(jobs, prog)
    for n in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "eng":
            used.setdefault(n.attr, []).append("%s:%d" % (prog, n.lineno))
outside = {k: v for k, v in used.items() if k not in interface}
assert not outside, "train.py/probe.py use engine members outside engines.base.Engine: %s" % outside
# The scan sees the calls, or it proves nothing.
for m in ("load", "loss", "backward", "step", "save_adapter", "load_adapter_tensors",
          "shared_setup", "accumulate", "probe_step", "set_train", "is_training"):
    assert m in used, "the scan missed eng.%s" % m
print("5g: Engine declares %d abstract methods; train.py and probe.py use %d members, all declared"
      % (len(abstract), len(used)))
PY

# One safetensors header reader: no other Python under jobs/ or tests/
# (inline Python of the shell tests included) unpacks a header length.
bad=$(grep -rlE 'unpack(_from)?\(\s*"<Q"|from_bytes\(|"<u8"' "$TOP/jobs" "$TOP/tests" \
    --include='*.py' --include='*.sh' | xargs -r grep -l safetensors |
    grep -v '/jobs/pljob/tensors.py$' | grep -v '/tests/integration/train/job-python.sh$' || true)
[ -z "$bad" ] || fail "safetensors headers parsed outside pljob.read_safetensors_header: $bad"
n=$(grep -rl 'read_safetensors_header' "$TOP/tests" --include='*.py' --include='*.sh' | wc -l)
[ "$n" -ge 8 ] || fail "only $n test files use pljob.read_safetensors_header"

$PY "$TOP/tests/fixtures/gen_gemma3.py" base >/dev/null
$PY - "$TOP/jobs" base/model.safetensors <<'PY' || fail "header reader"
import struct, sys
sys.path.insert(0, sys.argv[1])
import pljob
p = sys.argv[2]
hdr, meta, at = pljob.read_safetensors_header(p)
raw = open(p, "rb").read()
assert at == 8 + struct.unpack("<Q", raw[:8])[0] and hdr and "__metadata__" not in hdr
name = sorted(hdr)[0]
open("short.safetensors", "wb").write(raw[:5])
open("cut.safetensors", "wb").write(raw[:len(raw) - 2])
for f, want in (("short.safetensors", "truncated"), ("cut.safetensors", "do not fit")):
    try:
        pljob.read_safetensors_header(f)
    except pljob.SafetensorsError as e:
        assert f in str(e) and want in str(e), str(e)
    else:
        raise AssertionError("%s was read" % f)
print("5g: header reader ok (%d tensors, data at %d)" % (len(hdr), at))
PY
echo "train/job-python: ok"
