"""base: the engine interface, as an abstract base class.

jobs/train.py and jobs/probe.py drive an engine through these methods and
nothing else (tests/integration/train/job-python.sh checks both: a subclass
that lacks one of the abstract methods cannot be instantiated, and the two
programs call no other method of an engine).  Both engines implement it:
tiny.TinyEngine (pure PyTorch on the CPU) and hf.HfEngine (transformers,
peft, bitsandbytes).

Examples are dicts from pljob.load_tokens(): key, input_ids (numpy int32),
prompt_len, response_len, prefix_group, prefix_len.

The shared-prefix mode (jobs/engines/prefix.py) is optional: an engine that
has it sets SHARED_PREFIX = True and overrides shared_setup(), accumulate()
and probe_step(); for the others train.py and probe.py run the plain loop
and emit no shared_prefix event.

This module imports only the standard library.
"""

import abc


class Engine(abc.ABC):
    """One training engine, constructed with the job's pljob.Config and
    pljob.Events.  The config reads its keys through a stage's key table
    (pljob.keys, the plugin's C table): the program's (train, probe), else
    train's."""

    name = None
    SHARED_PREFIX = False

    def __init__(self, cfg, events):
        if cfg.keys is None:
            cfg.use_keys("train")
        self.cfg = cfg
        self.ev = events

    # -- the model
    @abc.abstractmethod
    def load(self):
        """Load the base and add LoRA, or raise pljob.OutOfMemory or
        pljob.BadInput.  The model is in training mode afterwards."""

    @abc.abstractmethod
    def set_train(self):
        """Put the model in training mode (model.train(), G20)."""

    @abc.abstractmethod
    def is_training(self):
        """Whether every module is in training mode."""

    @abc.abstractmethod
    def parameters(self):
        """The trainable parameters, in a fixed order."""

    @abc.abstractmethod
    def make_optimizer(self):
        """The optimizer over parameters(), with the config's lr, betas,
        epsilon and weight decay."""

    # -- one micro-step and one optimizer step
    @abc.abstractmethod
    def train_context(self):
        """The context manager every forward and backward runs in."""

    @abc.abstractmethod
    def loss(self, ex):
        """The forward of one example: a scalar loss tensor over its
        response tokens."""

    @abc.abstractmethod
    def backward(self, loss):
        """The backward of loss (memory accounted)."""

    @abc.abstractmethod
    def before_step(self, step):
        """Called before the optimizer step of step (1-based)."""

    @abc.abstractmethod
    def step(self, opt):
        """The optimizer step (an out-of-memory mapped to pljob.OutOfMemory)."""

    @abc.abstractmethod
    def after_step(self):
        """Called after the step and zero_grad."""

    @abc.abstractmethod
    def resumed_optimizer(self):
        """Called after a checkpoint's optimizer state was loaded."""

    # -- memory
    @abc.abstractmethod
    def pre_step_mb(self):
        """The memory in use now, before a forward, MB."""

    @abc.abstractmethod
    def peak_mb(self):
        """The highest memory in use since reset_peak(), MB."""

    @abc.abstractmethod
    def reset_peak(self):
        """Start a new peak at the memory in use now."""

    @abc.abstractmethod
    def capacity_mb(self):
        """The memory the run has, MB (0 when unknown)."""

    # -- adapters
    @abc.abstractmethod
    def adapter_tensors(self):
        """PEFT key -> float32 numpy array of the LoRA weights."""

    @abc.abstractmethod
    def load_adapter_tensors(self, tensors, where="adapter"):
        """The reverse of adapter_tensors() (resume); where names the source
        in errors."""

    @abc.abstractmethod
    def adapter_config(self):
        """The contents of adapter_config.json."""

    @abc.abstractmethod
    def save_adapter(self, path):
        """Write a PEFT adapter directory into path (existing and empty)."""

    # -- shared prefixes (optional: SHARED_PREFIX)
    def shared_setup(self, examples):
        """(on, why): whether accumulate() trains shared prefixes once per
        step; called after load() when SHARED_PREFIX."""
        return False, "engine %s has no shared-prefix mode" % self.name

    def accumulate(self, exs, div):
        """One step's forwards and backwards over exs (the gradients of
        sum(loss) / div) with shared prefixes: the per-example losses, or
        None when the plain loop should run."""
        return None

    def probe_step(self, ex):
        """The probe's forward and backward of ex as train runs it:
        (loss, shared prefix tokens)."""
        loss = self.loss(ex)
        self.backward(loss)
        return float(loss.detach()), 0
