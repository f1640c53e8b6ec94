#!/usr/bin/python3
"""
merge_numpy.py: a whole-model LoRA merge in numpy, the shape of the
reference program's merge (load the whole base in bf16, merge, save), for
the benchmark: every base tensor is read into memory, each LoRA module's
W + alpha/r * (B @ A) is computed in float32 and rounded back to bf16
(nearest-even), and the whole model is written out, one file per input
file, with config and tokenizer files copied. Plain LoRA only (no
patterns, DoRA or modules_to_save: the benchmark's adapter has none).

    /usr/bin/python3 tests/bench/merge_numpy.py BASE ADAPTER OUTPUT_DIR
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

DT = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32}


def load(path):
    out = {}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        hdr.pop("__metadata__", None)
        for name, e in sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"][0]):
            b, end = e["data_offsets"]
            f.seek(8 + n + b)
            out[name] = (e["dtype"], np.frombuffer(f.read(end - b), dtype=DT[e["dtype"]]).reshape(e["shape"]))
    return out


def save(path, tensors):
    hdr, off = {"__metadata__": {"format": "pt"}}, 0
    for name, (dt, a) in tensors.items():
        hdr[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    js = json.dumps(hdr, separators=(",", ":")).encode()
    js += b" " * ((8 - len(js) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js)
        for _, a in tensors.values():
            f.write(np.ascontiguousarray(a).tobytes())


def f32(dt, a):
    if dt == "BF16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def bf16(x):
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def main():
    base, adir, out = sys.argv[1:4]
    idx = os.path.join(base, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) \
        else ["model.safetensors"]
    model = {fn: load(os.path.join(base, fn)) for fn in files}   # the whole model
    cfg = json.load(open(os.path.join(adir, "adapter_config.json")))
    ad = load(os.path.join(adir, "adapter_model.safetensors"))
    scale = cfg["lora_alpha"] / (np.sqrt(cfg["r"]) if cfg.get("use_rslora") else cfg["r"])
    where = {name: fn for fn, ts in model.items() for name in ts}
    n = 0
    for k in ad:
        if not k.endswith(".lora_A.weight"):
            continue
        mod = k[len("base_model.model."):-len(".lora_A.weight")]
        name = mod + ".weight"
        if name not in where:
            continue
        dt, W = model[where[name]][name]
        A = f32(*ad[k])
        B = f32(*ad[k.replace("lora_A", "lora_B")])
        merged = f32(dt, W) + np.float32(scale) * (B @ A)
        model[where[name]][name] = (dt, bf16(merged) if dt == "BF16" else merged.astype(DT[dt]))
        n += 1
    os.makedirs(out, exist_ok=True)
    for fn, ts in model.items():
        save(os.path.join(out, fn), ts)
    for fn in os.listdir(base):
        p = os.path.join(base, fn)
        if os.path.isfile(p) and not fn.endswith(".safetensors"):
            shutil.copyfile(p, os.path.join(out, fn))
    print("numpy: merged %d modules" % n)


if __name__ == "__main__":
    main()
