"""stack: which ML stack this interpreter is (HACKING.md: The ML environment).

An environment built by tests/tools/pyenv.sh holds pipeline-stack.json in
its root (sys.prefix): {"stack": "recipe" or "current", "lock": the lock
file's name under the repository, "sha256": the lock's digest}.  An
interpreter without it (an operator's own python, Debian's) has no lock;
its stack is the versions of the packages alone.  The versions are read
from the interpreter's installed distributions (importlib.metadata), which
imports none of them, so this is cheap and runs before any of them loads.

This module imports only the standard library.
"""

import json
import os
import sys

STACK_FILE = "pipeline-stack.json"
# The packages a run's stack is named by, in the order they are shown.
PACKAGES = ("torch", "transformers", "peft", "bitsandbytes", "accelerate")


def _version(name):
    try:
        from importlib import metadata
        return metadata.version(name)
    except Exception:
        return None


def lock_info(prefix=None):
    """(name, lock, sha256) from the environment's pipeline-stack.json, or
    (None, None, None) when the interpreter has none (or it is unreadable)."""
    path = os.path.join(prefix or sys.prefix, STACK_FILE)
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return None, None, None
    if not isinstance(d, dict):
        return None, None, None
    return d.get("stack"), d.get("lock"), d.get("sha256")


def this_stack():
    """The stack of this interpreter: {"stack", "lock", "lock_sha256"} (None
    without a lock), "python" and the version of each of PACKAGES (None
    where it is not installed)."""
    name, lock, sha = lock_info()
    out = {"stack": name, "lock": lock, "lock_sha256": sha,
           "python": "%d.%d.%d" % sys.version_info[:3]}
    for p in PACKAGES:
        out[p] = _version(p)
    return out


def describe_stack(st):
    """One line naming a this_stack() for people: "recipe (jobs/requirements.lock
    sha256 848dbb3fd108); torch 2.6.0, ..." or "no lock (this interpreter's
    own packages); torch ..."."""
    if st.get("lock"):
        head = "%s (%s sha256 %s)" % (st.get("stack") or "?", st["lock"], (st.get("lock_sha256") or "?")[:12])
    else:
        head = "no lock (the interpreter's own packages)"
    vers = ", ".join("%s %s" % (p, st.get(p) or "missing") for p in PACKAGES)
    return "%s; %s" % (head, vers)
