"""doctor.py: may a training run start with this interpreter?

    PYTHON jobs/doctor.py [--device auto|cuda|cpu] [--cuda-device N] [--label L] [--json]

Run with the interpreter a probe or train job will use (pipelinectl doctor
does, for the configuration and each hf job of a spec; jobs/probe.py runs
the same checks first).  It checks, each line "ok", "warn" or "FAIL":

  * the interpreter and its version;
  * the stack it is (check "stack"): the lock of the tests/tools/pyenv.sh
    environment it belongs to (recipe: jobs/requirements.lock, current:
    jobs/requirements-current.lock; its pipeline-stack.json) with the
    lock's digest, or "no lock" for an interpreter of the operator's own,
    and the versions of torch, transformers, peft, bitsandbytes and
    accelerate read from the interpreter: what a train run records as its
    stack and resumes only on; an environment built from another version
    of its lock than the repository's warns;
  * torch, transformers, peft, bitsandbytes, accelerate, safetensors,
    numpy, sentencepiece: importable, at which version, and whether that is
    the version pinned in the environment's own lock (jobs/requirements.lock
    for an interpreter without one; another version warns);
    a missing one fails, naming the command that builds the pinned
    environment;
  * the reference program's known-bad combinations:
      G08  torch older than 2.6 under transformers 5 (5.5's mask utilities
           refuse it on the first Gemma 3 forward); with transformers
           missing, against the pinned 5.5;
      G03  torchao installed that does not import against this torch
           (torchao 0.18 references torch.int1, missing before torch 2.6);
      G02  the NVIDIA kernel module and the user-space driver libraries at
           different versions (new CUDA processes fail, running ones do
           not: reboot), or a driver older than torch's CUDA runtime;
      G05  Unsloth installed: its loader given device_map={'': N} silently
           switches to 16-bit LoRA (the hf engine loads with plain
           transformers, which honours the map; a warning);
      G06  the single-device map {'': cuda_device} naming no device (an
           automatic map that puts any module on the CPU is refused by
           bitsandbytes);
  * with --device cuda: CUDA available, the device's name and memory, the
    driver version and its CUDA version, torch's CUDA runtime version, and
    a 4-bit nf4 double-quant quantize on the device; with --device cpu: the
    same quantize on bitsandbytes' CPU backend;
  * transformers' own Gemma 3 (transformers.models.gemma3).

Exit status: 0 the run may start (warnings allowed), 1 it may not, 2 usage.
With --json one object: {"ok", "label", "python", "device", "stack"
(jobs/pljob/stack.py: stack, lock, lock_sha256, python and the versions),
"checks": [{"status", "name", "detail", "gotcha"}]}.  Only the standard library is
imported before the checks, so it runs under any Python 3.
"""

import hashlib
import importlib
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pljob  # noqa: E402  (the standard library only)

PACKAGES = ("torch", "transformers", "peft", "bitsandbytes", "accelerate", "safetensors",
            "numpy", "sentencepiece")
INSTALL = ("`make pyenv` (tests/tools/pyenv.sh) installs the pinned environment; point daemon.python "
           "or the stage's python key at /var/cache/pipelined/pyenv/venv/bin/python "
           "(tests/tools/pyenv.sh --python; PYSTACK=current for today's releases, "
           "/var/cache/pipelined/pyenv-current/venv/bin/python)")


def vtuple(v):
    """(2, 6) of "2.6.0+cu124", (1, 13) of "1.13.0a0"."""
    return tuple(int(x) for x in re.findall(r"\d+", v or "")[:2]) or (0, 0)


def lock_path(st):
    """The lock file under this jobs directory that the stack names (the
    recipe's for an interpreter without one)."""
    return os.path.join(HERE, os.path.basename(st.get("lock") or "requirements.lock"))


def stack_check(r, st):
    """The check "stack": which stack the interpreter is, and whether its
    environment was built from the lock the repository holds now."""
    r.add("ok", "stack", pljob.describe_stack(st))
    if not st.get("lock"):
        return
    try:
        with open(lock_path(st), "rb") as f:
            now = hashlib.sha256(f.read()).hexdigest()
    except OSError as e:
        r.add("warn", "lock", "%s: %s" % (lock_path(st), e.strerror))
        return
    if now != st.get("lock_sha256"):
        r.add("warn", "lock", "the environment was built from another %s (sha256 %.12s; the "
              "repository's is %.12s): PYSTACK=%s tests/tools/pyenv.sh builds the one it names"
              % (st["lock"], st.get("lock_sha256") or "?", now, st.get("stack") or "recipe"))


def pinned(lock=os.path.join(HERE, "requirements.lock")):
    out = {}
    try:
        with open(lock) as f:
            for line in f:
                m = re.match(r"^([A-Za-z0-9_.-]+)==([^ \\]+)", line)
                if m:
                    out[m.group(1).lower()] = m.group(2)
    except OSError:
        pass
    return out


def dist_version(name):
    try:
        from importlib import metadata
    except ImportError:
        return None
    try:
        return metadata.version(name)
    except Exception:
        return None


class Report:
    def __init__(self):
        self.checks = []

    def add(self, status, name, detail, gotcha=None):
        self.checks.append({"status": status, "name": name, "detail": detail, "gotcha": gotcha})

    def ok(self):
        return not any(c["status"] == "FAIL" for c in self.checks)

    def failures(self):
        return [c for c in self.checks if c["status"] == "FAIL"]

    def summary(self):
        """One line: every failed check, and how to get the pinned stack."""
        return "the run may not start: %s; %s" % ("; ".join(line(c)[5:] for c in self.failures()), INSTALL)


def line(c):
    g = " (%s)" % c["gotcha"] if c["gotcha"] else ""
    return "%-4s %s: %s%s" % (c["status"], c["name"], c["detail"], g)


def _nvidia_versions():
    """The kernel module's version and the user-space libraries' (from
    their file names), as strings; None where not found."""
    kmod = None
    try:
        with open("/proc/driver/nvidia/version") as f:
            m = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?([0-9]+\.[0-9.]+)", f.read())
            kmod = m.group(1) if m else None
    except OSError:
        pass
    libs = {}
    try:
        import ctypes
        for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
            try:
                ctypes.CDLL(lib)
            except OSError:
                continue
            with open("/proc/self/maps") as f:
                for ln in f:
                    p = ln.split()[-1] if ln.strip() else ""
                    if os.path.basename(p).startswith(lib.split(".so")[0] + ".so"):
                        real = os.path.basename(os.path.realpath(p))
                        m = re.search(r"\.so\.([0-9]+\.[0-9.]+)$", real)
                        if m:
                            libs[lib] = m.group(1)
                        break
    except Exception:
        pass
    return kmod, libs


def _driver_cuda():
    """cuInit's status and cuDriverGetVersion (e.g. 12040), or None."""
    try:
        import ctypes
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None, None
    rc = cu.cuInit(0)
    v = ctypes.c_int(0)
    if cu.cuDriverGetVersion(ctypes.byref(v)) != 0:
        return rc, None
    return rc, v.value


def run_checks(device="cuda", cuda_device=0, st=None):
    r = Report()
    r.add("ok", "interpreter", "%s (Python %s)" % (sys.executable, sys.version.split()[0]))
    st = st or pljob.this_stack()
    stack_check(r, st)
    if device == "auto":
        # What this machine has: CUDA where an NVIDIA driver is found,
        # else the CPU (a machine without a GPU is not a failure; a spec
        # whose jobs say device = cuda is checked for CUDA).
        kmod, libs = _nvidia_versions()
        device = "cuda" if (kmod or libs) else "cpu"
        r.add("ok", "device-choice", "device auto: %s" % (
            "an NVIDIA driver is here, checking cuda" if device == "cuda" else
            "no NVIDIA driver found, checking cpu (a spec's jobs with device = cuda are checked for CUDA)"))
    pins = pinned(lock_path(st))
    have = {}
    for name in PACKAGES:
        v = dist_version(name)
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            r.add("FAIL", name, "missing from this interpreter (`make pyenv` installs it)")
            continue
        have[name] = v or "?"
        want = pins.get(name)
        if want and v and v.split("+")[0] != want.split("+")[0]:
            r.add("warn", name, "%s, not the pinned %s" % (v, want))
        else:
            r.add("ok", name, v or "version unknown")

    torch_v = have.get("torch")
    tf_v = have.get("transformers")
    if torch_v and vtuple(torch_v) < (2, 6):
        if tf_v is None or vtuple(tf_v) >= (5, 0):
            r.add("FAIL", "mask-utils",
                  "torch %s is older than 2.6, which the mask utilities of transformers %s%s "
                  "require on the first Gemma 3 forward"
                  % (torch_v, tf_v or pins.get("transformers", "5.5.0"), "" if tf_v else " (the pinned one)"),
                  "G08")
    if "torch" not in have:
        return r
    try:
        import torch
    except Exception as e:
        r.add("FAIL", "torch", "does not import: %s" % str(e).splitlines()[0])
        return r

    tao = dist_version("torchao")
    if tao:
        try:
            import torchao  # noqa: F401
            if not hasattr(torch, "int1") and vtuple(tao) > (0, 9):
                raise ImportError("torchao %s needs torch.int1, missing from torch %s" % (tao, torch.__version__))
            r.add("ok", "torchao", "%s imports against torch %s" % (tao, torch.__version__))
        except Exception as e:
            r.add("FAIL", "torchao", "%s is too new for torch %s: %s; pin torchao to the torch's "
                  "contemporary (0.9.0 for torch 2.5) or remove it"
                  % (tao, torch.__version__, str(e).splitlines()[0] if str(e) else type(e).__name__), "G03")
    if dist_version("unsloth"):
        r.add("warn", "unsloth", "%s installed: its loader given device_map={'': N} silently switches to "
              "16-bit LoRA; the hf engine loads with plain transformers + BitsAndBytesConfig"
              % dist_version("unsloth"), "G05")

    if "transformers" in have:
        try:
            importlib.import_module("transformers.models.gemma3.modeling_gemma3")
            r.add("ok", "gemma3", "transformers %s has Gemma 3" % tf_v)
        except Exception as e:
            r.add("FAIL", "gemma3", "transformers %s: %s" % (tf_v, str(e).splitlines()[0] if str(e) else e))

    if device == "cuda":
        _cuda_checks(r, torch, cuda_device)
    else:
        r.add("ok", "device", "cpu (%d CPUs); torch %s" % (os.cpu_count() or 0, torch.__version__))
    if "bitsandbytes" in have and r.ok():
        _bnb_check(r, torch, device, cuda_device)
    return r


def _cuda_checks(r, torch, idx):
    kmod, libs = _nvidia_versions()
    rc, drv = _driver_cuda()
    mismatch = [("%s %s" % (k, v)) for k, v in sorted(libs.items()) if kmod and v != kmod]
    if mismatch:
        r.add("FAIL", "driver", "kernel module %s but %s: new CUDA processes cannot create a context "
              "(running ones keep theirs); reboot to reload the module" % (kmod, ", ".join(mismatch)), "G02")
    if not torch.cuda.is_available():
        why = "torch %s was built without CUDA" % torch.__version__ if not torch.version.cuda else \
            "torch %s (CUDA %s) sees no device" % (torch.__version__, torch.version.cuda)
        if kmod is None and not libs:
            why += "; no NVIDIA driver found"
        elif rc not in (None, 0):
            why += "; cuInit returned %d%s" % (rc, " (forward compatibility on unsupported hardware)"
                                               if rc == 804 else "")
        r.add("FAIL", "cuda", why + "; device = cpu runs the recipe on the CPU",
              "G02" if (rc == 804 or mismatch) else None)
        return
    n = torch.cuda.device_count()
    if idx >= n:
        r.add("FAIL", "device_map", "cuda_device %d but %d device(s): the map {'': %d} names no device, and "
              "an automatic map that places any module on the CPU is refused by bitsandbytes" % (idx, n, idx),
              "G06")
        return
    p = torch.cuda.get_device_properties(idx)
    r.add("ok", "cuda", "device %d of %d: %s, %.0f MB, compute capability %d.%d"
          % (idx, n, p.name, p.total_memory / 1048576.0, p.major, p.minor))
    rt = torch.version.cuda
    dv = "%d.%d" % (drv // 1000, (drv % 1000) // 10) if drv else "unknown"
    if drv and rt and vtuple(dv) < vtuple(rt):
        r.add("FAIL", "driver", "driver %s supports CUDA %s, older than torch's runtime %s"
              % (kmod or "?", dv, rt), "G02")
    else:
        r.add("ok", "driver", "kernel module %s, driver CUDA %s, torch's CUDA runtime %s; map {'': %d}"
              % (kmod or "unknown", dv, rt, idx))


def _bnb_check(r, torch, device, idx):
    try:
        import bitsandbytes as bnb
        import bitsandbytes.functional as bf
        dev = torch.device("cuda", idx) if device == "cuda" else torch.device("cpu")
        w = torch.randn(128, 64, dtype=torch.bfloat16, device=dev)
        q, st = bf.quantize_4bit(w, quant_type="nf4", compress_statistics=True)
        back = bf.dequantize_4bit(q, st, quant_type="nf4")
        err = float((back.float() - w.float()).abs().max())
        if not err < 1.0:
            raise RuntimeError("nf4 round trip off by %g" % err)
        r.add("ok", "bitsandbytes", "%s: nf4 with double quantization on %s (round trip within %.3f)"
              % (bnb.__version__, dev, err))
    except Exception as e:
        r.add("FAIL", "bitsandbytes", "4-bit nf4 on %s: %s" % (device, str(e).splitlines()[0] if str(e) else
                                                              type(e).__name__))


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="may a training run start with this interpreter?")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="cuda")
    ap.add_argument("--cuda-device", type=int, default=0)
    ap.add_argument("--label", default="")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    import warnings
    warnings.simplefilter("ignore")
    st = pljob.this_stack()
    r = run_checks(a.device, a.cuda_device, st)
    if a.json:
        print(json.dumps({"ok": r.ok(), "label": a.label, "python": sys.executable,
                          "device": a.device, "stack": st, "checks": r.checks}, sort_keys=True))
    else:
        for c in r.checks:
            print(line(c))
        # The install hint where a package is missing or too old; a failure
        # of the device or the driver says its own fix.
        if any(c["name"] in PACKAGES + ("mask-utils", "torchao", "torch") for c in r.failures()):
            print("hint: " + INSTALL)
        print("%s: %s" % (a.label or "doctor", "the run may start" if r.ok() else
                          "the run may not start (%d failed)" % len(r.failures())))
    return 0 if r.ok() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
