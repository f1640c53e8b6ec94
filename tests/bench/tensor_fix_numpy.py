#!/usr/bin/python3
"""
tensor_fix_numpy.py: the reference program's approach to the tensor fix,
for the benchmark: load every tensor of the checkpoint into memory with
numpy (as safetensors.numpy.load_file does: one array per tensor, copied
out of the file), drop the vision tower and the projector, rename
model.language_model.* to model.*, and save the rest in one file
(as save_file does: header, then every tensor's bytes).

    /usr/bin/python3 tests/bench/tensor_fix_numpy.py INPUT_DIR OUTPUT_FILE
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "jobs"))
import pljob  # noqa: E402

DT = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32}


def load(path):
    out = {}
    hdr, _, base = pljob.read_safetensors_header(path)
    with open(path, "rb") as f:
        for name, e in hdr.items():
            b, end = e["data_offsets"]
            f.seek(base + b)
            a = np.frombuffer(f.read(end - b), dtype=DT[e["dtype"]]).reshape(e["shape"])
            out[name] = (e["dtype"], a)
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
            f.write(a.tobytes())


def main():
    src, dst = sys.argv[1], sys.argv[2]
    idx = os.path.join(src, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) \
        else ["model.safetensors"]
    tensors = {}
    for fn in files:
        tensors.update(load(os.path.join(src, fn)))
    kept, dropped = {}, 0
    for name, v in tensors.items():
        if "vision_tower." in name or "multi_modal_projector." in name:
            dropped += 1
            continue
        if name.startswith("model.language_model."):
            name = "model." + name[len("model.language_model."):]
        kept[name] = v
    save(dst, kept)
    print("numpy: %d dropped, %d kept" % (dropped, len(kept)))


if __name__ == "__main__":
    main()
