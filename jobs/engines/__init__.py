"""Training engines behind jobs/probe.py and jobs/train.py.

An engine is chosen by the config key `engine`:

  tiny  jobs/engines/tiny.py: a pure-PyTorch Gemma 3 text model on the CPU
        (Debian's python3-torch), LoRA on the seven projections, PEFT-format
        adapters, and a GPU-memory stand-in.  Runs anywhere.
  hf    jobs/engines/hf.py: the recipe itself (transformers + peft +
        bitsandbytes nf4 QLoRA on a CUDA GPU).

Both implement the same interface, the abstract base class
engines.base.Engine, so the training loop, checkpoints and resume in
train.py and the probe in probe.py are shared.  An engine reads its keys
through the stage's key table (pljob.keys): no default is written here.
"""

ENGINES = ("tiny", "hf")


def get(name):
    """The engine class for name.  Importing hf never fails: a missing
    package is reported when the engine is constructed."""
    if name == "tiny":
        from engines import tiny
        return tiny.TinyEngine
    if name == "hf":
        from engines import hf
        return hf.HfEngine
    raise ValueError("unknown engine %r (known: %s)" % (name, ", ".join(ENGINES)))
