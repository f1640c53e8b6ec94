#!/bin/bash
# train/hf-dtype.sh: the hf engine loads the model in the dtype key, 4-bit
# or not, and gives bnb_4bit_compute_dtype only to the 4-bit layers (the
# pinned environment's transformers, PEFT and bitsandbytes, on the CPU, a
# fixture Gemma 3 saved in float32):
#  - load_in_4bit = no: dtype float32 with bnb_4bit_compute_dtype bfloat16
#    gives float32 weights, dtype bfloat16 with float32 gives bfloat16 ones
#    (the engine once took the model's dtype from bnb_4bit_compute_dtype);
#  - dtype auto: the checkpoint's own (float32 here);
#  - load_in_4bit = yes: the model is loaded in dtype (its config says so;
#    PEFT's prepare_model_for_kbit_training then casts the unquantized
#    parameters to float32, as it does for the recipe), the 4-bit layers
#    compute in bnb_4bit_compute_dtype.
# train/job-keys checks the keys through check.
. "$(dirname "$0")/../../lib.sh"
"$TOP/tests/tools/pyenv.sh" --check >/dev/null 2>&1 || {
	echo "SKIP: the pinned environment is not built (make pyenv)"
	exit 77
}
PY=$("$TOP/tests/tools/pyenv.sh" --python)
/usr/bin/python3 "$TOP/tests/fixtures/gen_gemma3.py" "$TEST_TMP/base" --layout causal >/dev/null || fail "gen_gemma3"
"$PY" - "$TOP/jobs" "$TEST_TMP/base" <<'PY' || fail "the model's dtype"
import json, os, sys
sys.path.insert(0, sys.argv[1])
import pljob
from engines import hf
import torch

base = sys.argv[2]
saved = json.load(open(os.path.join(base, "config.json"))).get("torch_dtype", "float32")


def load(**kw):
    c = {"engine": "hf", "base": base, "device": "cpu", "lora_r": 4, "lm_head_bf16": False,
         "optim": "adamw_torch", "mlp_chunk": 0}
    c.update(kw)
    cfg = pljob.Config(c, "t.json")
    cfg.use_keys("train")
    e = hf.HfEngine(cfg, None)
    e.load()
    return e.model


def base_dtypes(m):
    """The dtypes of the base's own floating parameters (not LoRA's)."""
    return {p.dtype for n, p in m.named_parameters() if "lora_" not in n and p.is_floating_point()}


m = load(load_in_4bit=False, dtype="float32", bnb_4bit_compute_dtype="bfloat16")
assert base_dtypes(m) == {torch.float32}, base_dtypes(m)
m = load(load_in_4bit=False, dtype="bfloat16", bnb_4bit_compute_dtype="float32")
assert base_dtypes(m) == {torch.bfloat16}, base_dtypes(m)
m = load(load_in_4bit=False, dtype="auto")
assert base_dtypes(m) == {getattr(torch, saved)}, (base_dtypes(m), saved)
print("without 4-bit: the model in dtype (auto: %s)" % saved)

import bitsandbytes as bnb
for dt, cdt in (("float32", "bfloat16"), ("bfloat16", "float32")):
    m = load(load_in_4bit=True, dtype=dt, bnb_4bit_compute_dtype=cdt)
    four = [x for x in m.modules() if isinstance(x, bnb.nn.Linear4bit)]
    assert four, "no 4-bit layer"
    assert {x.compute_dtype for x in four} == {getattr(torch, cdt)}, {x.compute_dtype for x in four}
    loaded = getattr(m.config, "dtype", None) or m.config.torch_dtype
    assert loaded == getattr(torch, dt), (dt, cdt, loaded)
print("4-bit: loaded in dtype, the 4-bit layers computing in bnb_4bit_compute_dtype")
PY
echo ok
