"""pljob.files: files that appear whole, checkpoints, and the RNG states a
checkpoint carries.

  * Files and directories are written under a temporary name, fsynced and
    renamed into place, so a reader never sees half of one under its final
    name.
  * Checkpoints: a directory checkpoint-STEP/ holding the adapter, optimizer,
    scheduler, RNG states and data position, and a marker file COMPLETE
    written last.  COMPLETE is in sha256sum(1) format ("HEX  NAME" per line)
    and lists every other file of the directory; a checkpoint counts only when
    the marker exists, lists exactly the files present and every hash
    matches.  The directory is built under a temporary name and renamed into
    place.
  * RNG: the seed of a run and the Python, numpy and torch states a
    checkpoint saves and a resume restores.
"""

import hashlib
import os
import random
import re
import shutil

from .protocol import JobError

COMPLETE = "COMPLETE"
CHECKPOINT_RE = re.compile(r"^checkpoint-([0-9]+)$")


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


def fsync_files(path):
    """fsync every plain file directly under the directory path."""
    for name in os.listdir(path):
        p = os.path.join(path, name)
        if os.path.isfile(p):
            fd = os.open(p, os.O_RDONLY)
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
    fsync_files(tmp)
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
        fsync_files(tmp)
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
