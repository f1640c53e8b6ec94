"""pljob.protocol: what makes a program a job program (pipeline-job(7)).

  * Events: each line is written whole with a single write(2) on a file opened
    O_APPEND, so a reader (the shim, a re-adopting daemon) never sees half a
    line, and lines from a killed attempt stay intact.  The file is
    --events FILE, else $PL_EVENTS, else standard output.
  * Config: CONFIG.json, written by the stage plugin, holds every spec key of
    the stage, resolved.  Values may arrive as JSON numbers/bools or as the
    strings a run spec holds ("25", "yes"); Config converts them and names the
    key when it cannot.  With a stage's key table (pljob.keys, generated from
    the C tables) a key's default, bounds and choices are the table's, a value
    outside them is refused with the words the daemon's check uses, and
    reading a key the table lacks, as another type, with another default or
    with bounds or choices of the program's own, is a JobError.
  * Exit statuses: 0 success, 1 other failure, 2 bad input (after an "error"
    event), 3 out of memory (after an "oom" event).

Environment read here: PL_EVENTS, PL_WORKDIR, PL_JOB_DIR, PL_ATTEMPT, PL_RUN,
PL_JOB, PL_RESUME_FROM.  Without them (a program run by hand) events go to
standard output and the work directory is the current directory.
"""

import errno
import json
import math
import os
import sys

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_BADINPUT = 2
EXIT_OOM = 3


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


# The key types of pipeline.ini(5) each accessor reads.
_KINDS = {"str": ("string", "path", "input", "list"), "int": ("int",),
          "float": ("float",), "bool": ("bool",)}


class Config:
    """The resolved stage keys from CONFIG.json.  Accessors convert and check
    types and raise BadInput naming the config file and key.

    With a stage's key table (use_keys(), pljob.keys: the plugin's C table)
    the table is the one definition of every key: a key's default, bounds
    and choices are the table's, and a value outside them is refused as
    pipelinectl check refuses it in a spec ("KEY: 0 is out of range: must
    be 1 or more", "KEY: \"x\" is not a, b or c").  Reading a key the table
    lacks, as another type, with a default that differs from the table's,
    or with bounds or choices given here is a JobError (a bug of the
    program, not of the input).  A default given here is used only for a
    key whose table entry has none (lora_alpha: lora_r)."""

    def __init__(self, data, path="<config>"):
        if not isinstance(data, dict):
            raise BadInput("%s: the config must be a JSON object" % path)
        self.data = data
        self.path = path
        self.read = set()
        self.keys = None
        self.stage = None

    def use_keys(self, stage):
        """Read keys through the key table of stage (train, probe, tokenize)."""
        from . import keys
        self.keys = keys.STAGES[stage]
        self.stage = stage

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

    def entry(self, key, kind):
        """The key table's entry of key (pljob.keys.K: type, default, min,
        max, choices, checkpoint), checked against the accessor kind (str,
        int, float, bool); None without a table."""
        if self.keys is None:
            return None
        ent = self.keys.get(key)
        if ent is None:
            raise JobError("%s: key %s is not in the %s stage's key table (jobs/pljob/keys.py, "
                           "from the plugin's)" % (self.path, key, self.stage))
        if ent[0] not in _KINDS[kind]:
            raise JobError("%s: key %s is read as %s, the %s stage's key table declares it %s"
                           % (self.path, key, kind, self.stage, ent[0]))
        return ent

    def _raw(self, key, default, required, kind):
        self.read.add(key)
        ent = self.entry(key, kind)
        tdef = ent[1] if ent else None
        if tdef is not None and default is not None and _typed(kind, tdef) != default:
            raise JobError("%s: key %s: the default %r differs from the %s stage's key table's %r"
                           % (self.path, key, default, self.stage, tdef))
        v = self.data.get(key)
        if v is None or (isinstance(v, str) and v == "" and (default is not None or tdef is not None)):
            if tdef is not None:
                return tdef
            if required:
                raise BadInput("%s: key %s is required" % (self.path, key))
            return None
        return v

    def str(self, key, default=None, required=False):
        """A string key; one with choices in the key table must be one of
        them, however it is read."""
        v = self._raw(key, default, required, "str")
        if v is None:
            return default
        if isinstance(v, (dict, list)):
            raise BadInput("%s: key %s: expected a string, got %s" % (self.path, key, json.dumps(v)))
        v = str(v)
        ent = self.keys.get(key) if self.keys else None
        if ent and ent.choices and v not in ent.choices:
            raise BadInput("%s: key %s: %s" % (self.path, key, choice_error(v, ent.choices)))
        return v

    def int(self, key, default=None, required=False, min=None, max=None):
        v = self._raw(key, default, required, "int")
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
        v = self._raw(key, default, required, "float")
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
        v = self._raw(key, default, required, "bool")
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

    def choice(self, key, choices=None, default=None, required=False):
        """A string key that takes one of its choices: the key table's, or,
        without a table, choices."""
        ent = self.entry(key, "str")
        if ent is not None:
            if choices is not None:
                raise JobError("%s: key %s: choices given beside the %s stage's key table's "
                               "(they are the table's alone)" % (self.path, key, self.stage))
            choices = ent.choices
        if not choices:
            raise JobError("%s: key %s has no choices" % (self.path, key))
        v = self.str(key, default, required)
        if v is not None and v not in choices:
            raise BadInput("%s: key %s: %s" % (self.path, key, choice_error(v, choices)))
        return v

    def value(self, key, default=None):
        """key read as its table type declares it (int, float, bool, else
        a string), checked as the accessor of that type checks it."""
        kind = {"int": "int", "float": "float", "bool": "bool"}.get(self.keys[key].type, "str")
        return getattr(self, kind)(key, default)

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
        ent = self.keys.get(key) if self.keys else None
        if ent:
            if lo is not None or hi is not None:
                raise JobError("%s: key %s: bounds given beside the %s stage's key table's "
                               "(they are the table's alone)" % (self.path, key, self.stage))
            lo, hi = ent.min, ent.max
        why = range_error(self.data.get(key), v, lo, hi)
        if why:
            raise BadInput("%s: key %s: %s" % (self.path, key, why))


def range_error(raw, v, lo, hi):
    """Why the value v (raw as the config holds it) is outside [lo, hi], in
    the words of the daemon's check (plugin_key_value() in
    daemon/server/plugin.c), or None."""
    if not ((lo is not None and v < lo) or (hi is not None and v > hi)):
        return None
    text = raw if isinstance(raw, str) else json.dumps(raw)
    if lo is not None and lo == hi:
        return "%s is out of range: must be %s" % (text, lo)
    if lo is not None and hi is not None:
        return "%s is out of range: must be between %s and %s" % (text, lo, hi)
    if lo is not None:
        return "%s is out of range: must be %s or more" % (text, lo)
    return "%s is out of range: must be %s or less" % (text, hi)


def choice_error(v, choices):
    """Why v is not one of choices, in the words of the daemon's check."""
    if len(choices) == 1:
        return '"%s" is not %s' % (v, choices[0])
    return '"%s" is not %s or %s' % (v, ", ".join(choices[:-1]), choices[-1])


def _typed(kind, text):
    """A key table's default text as the accessor kind returns it."""
    if kind == "int":
        return int(text, 10)
    if kind == "float":
        return float(text)
    if kind == "bool":
        return text.strip().lower() in _TRUE
    return text


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


def main(description, body, argv=None, stage=None):
    """Run body(job) with pipeline-job(7)'s error handling: BadInput and
    JobError become an error event and exit 2 or 1, OutOfMemory an oom event
    and exit 3, anything else an error event with the exception and exit 1.
    With stage (train, probe) the config reads keys through that stage's
    key table (Config.use_keys)."""
    argv = sys.argv[1:] if argv is None else argv
    job = Job(argv, description)
    ev = job.events
    try:
        job.cfg = Config.load(job.config_path)
        if stage:
            job.cfg.use_keys(stage)
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
