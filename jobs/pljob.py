"""pljob: the shared half of pipelined's Python job programs.

Every job program under jobs/ (tokenize_corpus.py, probe.py, train.py) is started as

    /usr/bin/python3 jobs/NAME.py --config CONFIG.json [--events FILE]

and speaks pipeline-job(7): it appends one JSON object per line to its events
file and ends with an exit status.  This module holds what they share:

  * Events: each line is written whole with a single write(2) on a file opened
    O_APPEND, so a reader (the shim, a re-adopting daemon) never sees half a
    line, and lines from a killed attempt stay intact.  The file is
    --events FILE, else $PL_EVENTS, else standard output.
  * Config: CONFIG.json, written by the stage plugin, holds every spec key of
    the stage, resolved.  Values may arrive as JSON numbers/bools or as the
    strings a run spec holds ("25", "yes"); Config converts them and names the
    key when it cannot.
  * Exit statuses: 0 success, 1 other failure, 2 bad input (after an "error"
    event), 3 out of memory (after an "oom" event).
  * Checkpoints: a directory checkpoint-STEP/ holding the adapter, optimizer,
    scheduler, RNG states and data position, and a marker file COMPLETE
    written last.  COMPLETE is in sha256sum(1) format ("HEX  NAME" per line)
    and lists every other file of the directory; a checkpoint counts only when
    the marker exists, lists exactly the files present and every hash
    matches.  The directory is built under a temporary name and renamed into
    place, so a reader never sees a half-written checkpoint under its final
    name either.
  * safetensors reading (F32, F16, BF16, integer types; sharded checkpoints
    via model.safetensors.index.json) and writing, with numpy only: Debian 12
    has no python3-safetensors.
  * PEFT adapter directories: adapter_config.json + adapter_model.safetensors
    with PEFT's key names (base_model.model.<module>.lora_A.weight ...).

Environment read here: PL_EVENTS, PL_WORKDIR, PL_JOB_DIR, PL_ATTEMPT, PL_RUN,
PL_JOB, PL_RESUME_FROM.  Without them (a program run by hand) events go to
standard output and the work directory is the current directory.
"""

import errno
import hashlib
import json
import math
import os
import random
import re
import shutil
import struct
import sys
import time

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_BADINPUT = 2
EXIT_OOM = 3

COMPLETE = "COMPLETE"
CHECKPOINT_RE = re.compile(r"^checkpoint-([0-9]+)$")


class JobError(Exception):
    """A failure the job reports and exits on.  status is the exit status."""

    def __init__(self, message, status=EXIT_FAIL):
        super().__init__(message)
        self.status = status


class BadInput(JobError):
    """Bad input: a config key, a corpus example, a file.  Exit status 2."""

    def __init__(self, message):
        super().__init__(message, EXIT_BADINPUT)


class OutOfMemory(Exception):
    """An accelerator out-of-memory, real (torch.cuda.OutOfMemoryError mapped
    by the hf engine) or from the tiny engine's GPU-memory stand-in.  phase is
    load, forward, backward or step; mb is the memory in use plus the failed
    request, capacity_mb the card's size (0 when unknown)."""

    def __init__(self, phase, mb, capacity_mb, detail=""):
        super().__init__("out of memory in %s: %.2f MB needed of %.2f MB%s" %
                         (phase, mb, capacity_mb, (": " + detail) if detail else ""))
        self.phase = phase
        self.mb = float(mb)
        self.capacity_mb = float(capacity_mb)


# ---------------------------------------------------------------- events

class Events:
    """The job's event writer.  Each emit() is one write(2) of one whole line
    ending in a newline on an O_APPEND descriptor (pipeline-job(7))."""

    def __init__(self, path=None):
        path = path or os.environ.get("PL_EVENTS") or None
        if path:
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self.owned = True
        else:
            self.fd = sys.stdout.fileno()
            self.owned = False
        self.path = path

    def emit(self, type_, **fields):
        obj = {"type": type_}
        obj.update(fields)
        line = (json.dumps(obj, separators=(",", ":"), allow_nan=False,
                           default=_json_default) + "\n").encode()
        # One write for the whole line: a short write on a regular file only
        # happens on a full disk, and then the remainder must not be retried
        # as a separate write that could interleave; report it instead.
        n = os.write(self.fd, line)
        if n != len(line):
            raise OSError(errno.ENOSPC, "short write of an event line")

    def started(self, **kw):
        self.emit("started", **kw)

    def progress(self, step, total, **kw):
        self.emit("progress", step=int(step), total=int(total), **kw)

    def metric(self, name, step, value):
        v = float(value)
        if not math.isfinite(v):
            # JSON has no NaN; a non-finite loss is reported as a string so
            # the store sees it and the line stays valid JSON.
            self.emit("metric", name=name, step=int(step), value=repr(v))
            return
        self.emit("metric", name=name, step=int(step), value=v)

    def checkpoint(self, step, path):
        self.emit("checkpoint", step=int(step), path=os.path.abspath(path))

    def artifact(self, name, path):
        self.emit("artifact", name=name, path=os.path.abspath(path))

    def error(self, message):
        self.emit("error", message=str(message))

    def done(self, **kw):
        self.emit("done", **kw)


def _json_default(o):
    # numpy scalars and the like.
    if hasattr(o, "item"):
        return o.item()
    raise TypeError("not JSON serialisable: %r" % (o,))


# ---------------------------------------------------------------- config

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


class Config:
    """The resolved stage keys from CONFIG.json.  Accessors convert and check
    types and raise BadInput naming the config file and key."""

    def __init__(self, data, path="<config>"):
        if not isinstance(data, dict):
            raise BadInput("%s: the config must be a JSON object" % path)
        self.data = data
        self.path = path
        self.read = set()

    @classmethod
    def load(cls, path):
        try:
            with open(path, "rb") as f:
                data = json.loads(f.read().decode("utf-8"))
        except OSError as e:
            raise BadInput("%s: %s" % (path, e.strerror))
        except (ValueError, UnicodeDecodeError) as e:
            raise BadInput("%s: not valid JSON: %s" % (path, e))
        return cls(data, path)

    def has(self, key):
        v = self.data.get(key)
        return v is not None and v != ""

    def _raw(self, key, default, required):
        self.read.add(key)
        v = self.data.get(key)
        if v is None or (isinstance(v, str) and v == "" and default is not None):
            if required:
                raise BadInput("%s: key %s is required" % (self.path, key))
            return None
        return v

    def str(self, key, default=None, required=False):
        v = self._raw(key, default, required)
        if v is None:
            return default
        if isinstance(v, (dict, list)):
            raise BadInput("%s: key %s: expected a string, got %s" % (self.path, key, json.dumps(v)))
        return str(v)

    def int(self, key, default=None, required=False, min=None, max=None):
        v = self._raw(key, default, required)
        if v is None:
            return default
        try:
            if isinstance(v, bool):
                raise ValueError
            if isinstance(v, float):
                if v != int(v):
                    raise ValueError
                v = int(v)
            elif isinstance(v, str):
                v = int(v.strip(), 10)
            elif not isinstance(v, int):
                raise ValueError
        except ValueError:
            raise BadInput("%s: key %s: expected an integer, got %s" % (self.path, key, json.dumps(v)))
        self._range(key, v, min, max)
        return v

    def float(self, key, default=None, required=False, min=None, max=None):
        v = self._raw(key, default, required)
        if v is None:
            return default
        try:
            if isinstance(v, bool):
                raise ValueError
            v = float(v)
            if not math.isfinite(v):
                raise ValueError
        except ValueError:
            raise BadInput("%s: key %s: expected a number, got %s" % (self.path, key, json.dumps(v)))
        self._range(key, v, min, max)
        return v

    def bool(self, key, default=None, required=False):
        v = self._raw(key, default, required)
        if v is None:
            return default
        if isinstance(v, bool):
            return v
        if isinstance(v, int) and v in (0, 1):
            return bool(v)
        if isinstance(v, str) and v.strip().lower() in _TRUE:
            return True
        if isinstance(v, str) and v.strip().lower() in _FALSE:
            return False
        raise BadInput("%s: key %s: expected a boolean, got %s" % (self.path, key, json.dumps(v)))

    def choice(self, key, choices, default=None, required=False):
        v = self.str(key, default, required)
        if v is not None and v not in choices:
            raise BadInput("%s: key %s: %r is not one of %s" % (self.path, key, v, ", ".join(choices)))
        return v

    def path_in(self, key, required=True, kind="file"):
        """An input path key; it must exist (as a file or a directory)."""
        v = self.str(key, None, required)
        if v is None:
            return None
        if kind == "file" and not os.path.isfile(v):
            raise BadInput("%s: key %s: %s: no such file" % (self.path, key, v))
        if kind == "dir" and not os.path.isdir(v):
            raise BadInput("%s: key %s: %s: no such directory" % (self.path, key, v))
        return v

    def _range(self, key, v, lo, hi):
        if lo is not None and v < lo:
            raise BadInput("%s: key %s: %s is below the minimum %s" % (self.path, key, v, lo))
        if hi is not None and v > hi:
            raise BadInput("%s: key %s: %s is above the maximum %s" % (self.path, key, v, hi))


# ---------------------------------------------------------------- the job

class Job:
    """The environment of one job program run (pipeline-job(7))."""

    def __init__(self, argv, description):
        import argparse
        ap = argparse.ArgumentParser(description=description)
        ap.add_argument("--config", required=True, help="the stage's resolved keys (JSON)")
        ap.add_argument("--events", help="events file (default: $PL_EVENTS, else standard output)")
        ap.add_argument("--resume-from", help="checkpoint directory (default: $PL_RESUME_FROM)")
        args = ap.parse_args(argv)
        self.events = Events(args.events)
        self.config_path = args.config
        self.workdir = os.environ.get("PL_WORKDIR") or os.getcwd()
        self.jobdir = os.environ.get("PL_JOB_DIR") or self.workdir
        self.attempt = int(os.environ.get("PL_ATTEMPT") or 1)
        self.run = os.environ.get("PL_RUN") or ""
        self.job = os.environ.get("PL_JOB") or ""
        self.resume_from = args.resume_from or os.environ.get("PL_RESUME_FROM") or None
        self.cfg = None

    def checkpoint_dir(self):
        return os.path.join(self.workdir, "checkpoints")


def main(description, body, argv=None):
    """Run body(job) with pipeline-job(7)'s error handling: BadInput and
    JobError become an error event and exit 2 or 1, OutOfMemory an oom event
    and exit 3, anything else an error event with the exception and exit 1."""
    argv = sys.argv[1:] if argv is None else argv
    job = Job(argv, description)
    ev = job.events
    try:
        job.cfg = Config.load(job.config_path)
        body(job)
        return EXIT_OK
    except OutOfMemory as e:
        ev.emit("oom", phase=e.phase, mb=round(e.mb, 2), capacity_mb=round(e.capacity_mb, 2))
        ev.error(str(e))
        return EXIT_OOM
    except JobError as e:
        ev.error(str(e))
        return e.status
    except KeyboardInterrupt:
        ev.error("interrupted")
        return EXIT_FAIL
    except Exception as e:  # the message must reach the store, not only stderr
        import traceback
        traceback.print_exc()
        ev.error("%s: %s" % (type(e).__name__, e))
        return EXIT_FAIL


# ---------------------------------------------------------------- files

def sha256_file(path, bufsize=1 << 20):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(bufsize)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path, data):
    """Write bytes to path and fsync (the caller renames into place)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write(path, data):
    """Write bytes under a temporary name, fsync, rename to path."""
    tmp = "%s.tmp-%d" % (path, os.getpid())
    write_file(tmp, data)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def atomic_dir(final, build):
    """Build a directory under a temporary name with build(tmpdir), fsync
    its files, then rename it to final (replacing an older one).  The
    directory appears under its final name only when whole."""
    parent = os.path.dirname(os.path.abspath(final))
    os.makedirs(parent, exist_ok=True)
    tmp = "%s.tmp-%d" % (final, os.getpid())
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.mkdir(tmp)
    build(tmp)
    for name in os.listdir(tmp):
        p = os.path.join(tmp, name)
        if os.path.isfile(p):
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    fsync_dir(tmp)
    old = None
    if os.path.exists(final):
        old = "%s.old-%d" % (final, os.getpid())
        os.rename(final, old)
    os.rename(tmp, final)
    fsync_dir(parent)
    if old:
        shutil.rmtree(old, ignore_errors=True)
    return final


# ---------------------------------------------------------------- checkpoints

def write_complete_marker(ckdir):
    """Write COMPLETE last: the sha256 of every other file, sha256sum(1)
    format, sorted by name.  Subdirectories are not allowed in a checkpoint."""
    lines = []
    for name in sorted(os.listdir(ckdir)):
        if name == COMPLETE:
            continue
        p = os.path.join(ckdir, name)
        if not os.path.isfile(p):
            raise JobError("checkpoint %s: %s is not a plain file" % (ckdir, name))
        lines.append("%s  %s\n" % (sha256_file(p), name))
    write_file(os.path.join(ckdir, COMPLETE), "".join(lines).encode())


def verify_checkpoint(ckdir):
    """Return None when ckdir is a complete checkpoint, else the reason."""
    marker = os.path.join(ckdir, COMPLETE)
    if not os.path.isfile(marker):
        return "no %s marker" % COMPLETE
    try:
        with open(marker, "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return "%s unreadable: %s" % (COMPLETE, e)
    listed = {}
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^([0-9a-f]{64})  (.+)$", line)
        if not m:
            return "%s line %d is malformed" % (COMPLETE, n)
        listed[m.group(2)] = m.group(1)
    if not listed:
        return "%s lists no files" % COMPLETE
    present = set(x for x in os.listdir(ckdir) if x != COMPLETE)
    if present != set(listed):
        missing = sorted(set(listed) - present)
        extra = sorted(present - set(listed))
        return "files differ from %s (missing %s, unlisted %s)" % (COMPLETE, missing, extra)
    for name, want in sorted(listed.items()):
        got = sha256_file(os.path.join(ckdir, name))
        if got != want:
            return "%s: sha256 %s, %s records %s" % (name, got, COMPLETE, want)
    return None


def list_checkpoints(root):
    """(step, path) for every checkpoint-STEP directory, newest first."""
    out = []
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return out
    for name in names:
        m = CHECKPOINT_RE.match(name)
        if m and os.path.isdir(os.path.join(root, name)):
            out.append((int(m.group(1)), os.path.join(root, name)))
    out.sort(reverse=True)
    return out


def newest_complete_checkpoint(root, log=None):
    """The path of the newest checkpoint under root whose marker verifies,
    or None.  Incomplete ones are skipped (log(msg) is told why)."""
    for step, path in list_checkpoints(root):
        why = verify_checkpoint(path)
        if why is None:
            return path
        if log:
            log("%s: skipped: %s" % (path, why))
    return None


LEFTOVER_RE = re.compile(r"^(checkpoint-[0-9]+)\.(tmp|old)-[0-9]+$")


def sweep_checkpoints(root, log=None):
    """Remove what a trainer killed inside save_checkpoint left under root:
    checkpoint-STEP.tmp-PID (a save that never finished) and
    checkpoint-STEP.old-PID (the previous copy, renamed away just before
    the new one moved in).  An .old whose checkpoint-STEP is missing (the
    kill fell between the two renames) is renamed back instead: it was
    complete.  Only one attempt of a job runs at a time, so nothing else
    is writing here.  Returns the names removed."""
    removed = []
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return removed
    for name in names:
        m = LEFTOVER_RE.match(name)
        if not m:
            continue
        path = os.path.join(root, name)
        final = os.path.join(root, m.group(1))
        if m.group(2) == "old" and not os.path.exists(final) and verify_checkpoint(path) is None:
            os.rename(path, final)
            fsync_dir(root)
            if log:
                log("%s: restored from %s" % (final, name))
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(name)
        if log:
            log("%s: removed (left by an interrupted save)" % path)
    return removed


def save_checkpoint(root, step, build):
    """Save checkpoint-STEP under root: build(tmpdir) writes the files, the
    marker is written last, and the directory is renamed into place."""
    def _build(tmp):
        build(tmp)
        for name in os.listdir(tmp):
            p = os.path.join(tmp, name)
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        write_complete_marker(tmp)
    return atomic_dir(os.path.join(root, "checkpoint-%d" % step), _build)


def rng_state():
    """Python, numpy (when importable) and torch CPU (and CUDA) RNG states,
    for torch.save."""
    st = {"python": random.getstate()}
    try:
        import numpy as np
        st["numpy"] = np.random.get_state()
    except ImportError:
        pass
    try:
        import torch
        st["torch"] = torch.get_rng_state()
        if torch.cuda.is_available():
            st["cuda"] = torch.cuda.get_rng_state_all()
    except ImportError:
        pass
    return st


def set_rng_state(st):
    random.setstate(st["python"])
    if "numpy" in st:
        import numpy as np
        np.random.set_state(st["numpy"])
    if "torch" in st:
        import torch
        torch.set_rng_state(st["torch"])
        if "cuda" in st and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(st["cuda"])


def seed_everything(seed):
    random.seed(seed)
    try:
        import numpy as np
        np.random.seed(seed % (1 << 32))
    except ImportError:
        pass
    try:
        import torch
        torch.manual_seed(seed)
    except ImportError:
        pass


# ---------------------------------------------------------------- safetensors

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


# ---------------------------------------------------------------- PEFT adapters

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def adapter_config(base, r, alpha, dropout, rslora, targets=LORA_TARGETS):
    """adapter_config.json for a plain LoRA adapter, PEFT field names."""
    return {
        "alpha_pattern": {},
        "auto_mapping": None,
        "base_model_name_or_path": base,
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "init_lora_weights": True,
        "layers_pattern": None,
        "layers_to_transform": None,
        "lora_alpha": alpha,
        "lora_dropout": dropout,
        "modules_to_save": None,
        "peft_type": "LORA",
        "r": r,
        "rank_pattern": {},
        "revision": None,
        "target_modules": sorted(targets),
        "task_type": "CAUSAL_LM",
        "use_dora": False,
        "use_rslora": bool(rslora),
    }


def write_adapter_dir(path, config, tensors):
    """Write a PEFT adapter directory into path (an existing empty dir)."""
    write_safetensors(os.path.join(path, "adapter_model.safetensors"), tensors, {"format": "pt"})
    write_file(os.path.join(path, "adapter_config.json"),
               (json.dumps(config, indent=2, sort_keys=True) + "\n").encode())


def read_adapter_dir(path):
    """(config dict, name -> float32 numpy array) of a PEFT adapter dir."""
    cfgp = os.path.join(path, "adapter_config.json")
    stp = os.path.join(path, "adapter_model.safetensors")
    if not os.path.isfile(cfgp) or not os.path.isfile(stp):
        raise BadInput("%s: not a PEFT adapter (adapter_config.json and adapter_model.safetensors)" % path)
    with open(cfgp) as f:
        cfg = json.load(f)
    if cfg.get("peft_type") != "LORA":
        raise BadInput("%s: peft_type %r, only LORA is supported" % (cfgp, cfg.get("peft_type")))
    return cfg, {k: to_float32(a, dt) for k, (a, dt) in read_safetensors(stp).items()}


# ---------------------------------------------------------------- token files

def load_tokens(path):
    """Examples from a tokens.npz: a list of dicts with key, input_ids,
    prompt_len, response_len, prefix_group and prefix_len (written by
    tokenize_corpus.py; read by probe.py and train.py).  A file written
    before the shared prefixes were recorded reads as having none."""
    import numpy as np
    try:
        z = np.load(path, allow_pickle=False)
        ids, off = z["input_ids"], z["offsets"]
        pl, rl, keys = z["prompt_len"], z["response_len"], z["keys"]
    except (OSError, KeyError, ValueError) as e:
        raise BadInput("%s: not a tokens file: %s" % (path, e))
    n = len(keys)
    pg = z["prefix_group"] if "prefix_group" in z.files else np.full(n, -1, dtype=np.int32)
    px = z["prefix_len"] if "prefix_len" in z.files else np.zeros(n, dtype=np.int32)
    if len(off) != n + 1 or len(pl) != n or len(rl) != n or off[-1] != len(ids) or len(pg) != n or len(px) != n:
        raise BadInput("%s: inconsistent array lengths" % path)
    out = []
    for i in range(n):
        a, b = int(off[i]), int(off[i + 1])
        if pl[i] + rl[i] != b - a or rl[i] < 1:
            raise BadInput("%s: example %s: prompt %d + response %d != %d tokens"
                                 % (path, keys[i], pl[i], rl[i], b - a))
        if pg[i] >= 0 and not 0 < px[i] < pl[i]:
            raise BadInput("%s: example %s: shared prefix %d tokens is not inside its prompt of %d"
                           % (path, keys[i], px[i], pl[i]))
        out.append({"key": str(keys[i]), "input_ids": ids[a:b], "prompt_len": int(pl[i]),
                    "response_len": int(rl[i]), "prefix_group": int(pg[i]), "prefix_len": int(px[i])})
    return out


# ---------------------------------------------------------------- misc

def now():
    return time.time()


if __name__ == "__main__":
    # A small command line for scripts and tests:
    #   pljob.py newest-checkpoint DIR   print the newest complete checkpoint
    #   pljob.py verify-checkpoint DIR   exit 0 when complete, else say why
    if len(sys.argv) == 3 and sys.argv[1] == "newest-checkpoint":
        p = newest_complete_checkpoint(sys.argv[2], log=lambda m: print(m, file=sys.stderr))
        if p is None:
            sys.exit(1)
        print(p)
        sys.exit(0)
    if len(sys.argv) == 3 and sys.argv[1] == "verify-checkpoint":
        why = verify_checkpoint(sys.argv[2])
        if why:
            print("%s: %s" % (sys.argv[2], why), file=sys.stderr)
            sys.exit(1)
        sys.exit(0)
    print("usage: pljob.py newest-checkpoint DIR | verify-checkpoint DIR", file=sys.stderr)
    sys.exit(2)
