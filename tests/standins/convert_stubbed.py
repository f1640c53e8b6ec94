#!/usr/bin/python3
"""tests/standins/convert_stubbed.py: a STAND-IN for the `transformers` and
`tqdm` packages (not them), for tests only: runs llama.cpp's
convert_hf_to_gguf.py on this machine's Debian Python, which has torch 1.13
and numpy but no transformers or tqdm.

For the tiny Gemma 3 fixture (tests/fixtures/gen_gemma3.py) the converter
needs neither: it reads config.json when AutoConfig fails and the
SentencePiece vocabulary directly. So this stands in a `transformers` whose
loaders raise, a silent `tqdm`, and the float8/uint dtype names torch 1.13
lacks (the fixture has no tensors of those types), then runs the converter.

    PYTHONPATH=$LLAMA_SRC:$GGUF_PY /usr/bin/python3 -B convert_stubbed.py \
        $LLAMA_SRC/convert_hf_to_gguf.py CKPT --outtype f16 --outfile OUT
"""
import sys, types, runpy
import torch
for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "uint16", "uint32", "uint64"):
    if not hasattr(torch, name):
        setattr(torch, name, object())
tr = types.ModuleType("transformers")
class _Stub:
    @staticmethod
    def from_pretrained(*a, **k):
        raise RuntimeError("transformers stand-in")
tr.AutoConfig = _Stub
tr.AutoTokenizer = _Stub
sys.modules["transformers"] = tr
tq = types.ModuleType("tqdm")
class _Bar:
    def __init__(self, *a, **k): pass
    def __enter__(self): return self
    def __exit__(self, *a): return False
    def update(self, *a, **k): pass
    def close(self): pass
tq.tqdm = _Bar
sys.modules.setdefault("tqdm", tq)
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
