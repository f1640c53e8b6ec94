"""pljob.tensors: safetensors reading (F32, F16, BF16, integer types; sharded
checkpoints via model.safetensors.index.json) and writing, with numpy only:
Debian 12 has no python3-safetensors.  read_safetensors_header() is the one
header reader of the job programs and of the tests' Python."""

import json
import os
import struct

from .files import write_file
from .protocol import BadInput, JobError


# dtype string -> (numpy dtype name, element size).  BF16 has no numpy type;
# it is read as uint16 and widened to float32 by to_float32().
ST_DTYPES = {
    "F64": ("<f8", 8), "F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2),
    "I64": ("<i8", 8), "I32": ("<i4", 4), "I16": ("<i2", 2), "I8": ("i1", 1),
    "U8": ("u1", 1), "BOOL": ("?", 1),
}


class SafetensorsError(BadInput):
    pass


def read_safetensors_header(path):
    """(header dict without __metadata__, metadata dict, data start offset)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise SafetensorsError("%s: truncated (no header length)" % path)
        (n,) = struct.unpack("<Q", raw)
        if n > size - 8 or n > 100 << 20:
            raise SafetensorsError("%s: header length %d exceeds the file (%d bytes)" % (path, n, size))
        try:
            hdr = json.loads(f.read(n).decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise SafetensorsError("%s: header is not JSON: %s" % (path, e))
    if not isinstance(hdr, dict):
        raise SafetensorsError("%s: header is not an object" % path)
    meta = hdr.pop("__metadata__", None) or {}
    base = 8 + n
    for name, t in hdr.items():
        try:
            dt = t["dtype"]
            shape = [int(x) for x in t["shape"]]
            a, b = (int(x) for x in t["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError("%s: tensor %s: malformed header entry" % (path, name))
        if dt not in ST_DTYPES:
            raise SafetensorsError("%s: tensor %s: unsupported dtype %s" % (path, name, dt))
        want = ST_DTYPES[dt][1]
        for d in shape:
            want *= d
        if b - a != want or a < 0 or base + b > size:
            raise SafetensorsError("%s: tensor %s: data_offsets [%d, %d] do not fit shape %s %s in %d bytes"
                                   % (path, name, a, b, shape, dt, size))
    return hdr, meta, base


def read_safetensors(path, names=None):
    """name -> (numpy array (memory-mapped, BF16 as uint16), dtype string)."""
    import numpy as np
    hdr, _, base = read_safetensors_header(path)
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, t in hdr.items():
        if names is not None and name not in names:
            continue
        a, b = t["data_offsets"]
        arr = mm[base + a:base + b].view(np.dtype(ST_DTYPES[t["dtype"]][0])).reshape(t["shape"])
        out[name] = (arr, t["dtype"])
    return out


def to_float32(arr, dtype):
    import numpy as np
    if dtype == "BF16":
        return (np.asarray(arr).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(arr, dtype=np.float32)


def write_safetensors(path, tensors, metadata=None):
    """Write name -> numpy array (float32/float16/int) as safetensors, keys
    sorted, so the same tensors always give the same bytes."""
    import numpy as np
    rev = {"<f8": "F64", "<f4": "F32", "<f2": "F16", "<i8": "I64", "<i4": "I32",
           "<i2": "I16", "|i1": "I8", "|u1": "U8", "|b1": "BOOL"}
    hdr = {}
    blobs = []
    off = 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        key = a.dtype.newbyteorder("<").str if a.dtype.byteorder not in ("|",) else a.dtype.str
        if key not in rev:
            raise JobError("safetensors %s: tensor %s: unsupported dtype %s" % (path, name, a.dtype))
        a = a.astype(np.dtype(key), copy=False)
        b = a.tobytes()
        hdr[name] = {"dtype": rev[key], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hdr["__metadata__"] = dict(metadata or {"format": "pt"})
    h = json.dumps(hdr, separators=(",", ":"), sort_keys=False).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    data = struct.pack("<Q", len(h)) + h + b"".join(blobs)
    write_file(path, data)


def checkpoint_tensor_files(model_dir):
    """The safetensors files of a model directory (sharded or not)."""
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.isfile(idx):
        with open(idx) as f:
            wm = json.load(f).get("weight_map") or {}
        files = sorted(set(wm.values()))
        return [os.path.join(model_dir, x) for x in files]
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.isfile(single):
        return [single]
    files = sorted(x for x in os.listdir(model_dir) if x.endswith(".safetensors"))
    if not files:
        raise BadInput("%s: no safetensors weights (model.safetensors or an index)" % model_dir)
    return [os.path.join(model_dir, x) for x in files]
