"""pljob: the shared half of pipelined's Python job programs.

Every job program under jobs/ (tokenize_corpus.py, probe.py, train.py) is started as

    /usr/bin/python3 jobs/NAME.py --config CONFIG.json [--events FILE]

and speaks pipeline-job(7): it appends one JSON object per line to its events
file and ends with an exit status.  This package holds what they share, one
concern a module:

  protocol  events, the config (CONFIG.json), exit statuses, Job and main()
  keys      the train, probe and tokenize stages' key tables, generated
            from the C tables (make jobkeys); Config takes defaults, bounds
            and choices there
  files     files written whole, checkpoints (COMPLETE marker) and the RNG
            states they carry
  tensors   safetensors reading and writing with numpy only: the one header
            reader of the job programs and the tests
  adapters  PEFT adapter directories
  tokens    the token file (tokens.npz)
  stack     which ML stack (lock, package versions) the interpreter is

Every name is also importable from pljob itself (pljob.Config,
pljob.read_safetensors, ...), as the programs and tests use them.

    python3 jobs/pljob newest-checkpoint DIR   print the newest complete checkpoint
    python3 jobs/pljob verify-checkpoint DIR   exit 0 when complete, else say why
    PYTHON jobs/pljob stack [--json]           the ML stack of PYTHON
"""

from .protocol import (EXIT_OK, EXIT_FAIL, EXIT_BADINPUT, EXIT_OOM,  # noqa: F401
                       JobError, BadInput, OutOfMemory, Events, Config, Job, main)
from .files import (COMPLETE, CHECKPOINT_RE, LEFTOVER_RE, sha256_file,  # noqa: F401
                    fsync_dir, fsync_files, write_file, atomic_write, atomic_dir, write_complete_marker,
                    verify_checkpoint, list_checkpoints, newest_complete_checkpoint,
                    sweep_checkpoints, save_checkpoint, rng_state, set_rng_state,
                    seed_everything)
from .tensors import (ST_DTYPES, SafetensorsError, read_safetensors_header,  # noqa: F401
                      read_safetensors, to_float32, write_safetensors, checkpoint_tensor_files)
from .adapters import LORA_TARGETS, adapter_config, write_adapter_dir, read_adapter_dir  # noqa: F401
from .tokens import load_tokens  # noqa: F401
from .stack import STACK_FILE, this_stack, describe_stack  # noqa: F401
