"""hf: the training recipe itself (HACKING.md: The training recipe), on a CUDA GPU or on the CPU.

transformers + peft + bitsandbytes QLoRA:

  * the base loaded in dtype (bfloat16; auto: the checkpoint's own) and
    4-bit (BitsAndBytesConfig: load_in_4bit, nf4, double quant, the 4-bit
    layers computing in bnb_4bit_compute_dtype, bfloat16),
    device_map {"": cuda_device};
  * prepare_model_for_kbit_training with gradient checkpointing,
    use_reentrant=False;
  * LoRA (peft.LoraConfig) on q_proj k_proj v_proj o_proj gate_proj up_proj
    down_proj, r 112, alpha = r, dropout 0 (G17: any dropout above 0 costs a
    saved mask per call), no rsLoRA, bias none;
  * lm_head cast from fp32 to bf16 after get_peft_model (2.68 GB -> half;
    pre-training memory 4502 -> 3221 MB on the reference card); not when
    the head is tied to the input embeddings and the model computes in
    another dtype than bf16 without 4-bit (Gemma 3 270M in fp32), where
    the cast would feed bf16 embeddings to fp32 layers;
  * Gemma3MLP.forward patched to run over 2048-token slices of the sequence
    (G14: gate_proj(x) and up_proj(x) over the whole sequence was the OOM);
  * torch.autograd.graph.save_on_cpu(pin_memory=True) around forward and
    backward (checkpoint-boundary tensors of every layer off the GPU);
  * logits only for the response span: logits_to_keep = response_len + 1
    (checked: a model that returns more positions fails the step, as the
    262144-entry vocabulary makes whole-sequence logits the peak);
  * token_type_ids all zeros (G12: Gemma 3 requires them in training);
  * paged_adamw_8bit (bitsandbytes PagedAdamW8bit), weight decay 0.01; the
    linear schedule with warmup and the seed are train.py's.

device = cpu (default cuda) runs the same code on the CPU, for the tests and
the benchmark of a machine without a GPU: the base in either layout
(Gemma3ForConditionalGeneration, Gemma3ForCausalLM), the same PEFT LoRA
and the levers that exist there (non-reentrant gradient checkpointing, the
chunked MLP, logits_to_keep, token_type_ids, the bf16 lm_head, nf4 with
double quantization: bitsandbytes' CPU backend quantizes and trains it,
and paged_adamw_8bit, which bitsandbytes runs unpaged there); save_on_cpu
has nothing to move off a CPU and is off.
On the CPU the job is deterministic (torch.use_deterministic_algorithms,
threads torch threads), as train.py's bit-identical resume needs; memory
figures are the process's resident set (peak: VmHWM, reset through
/proc/self/clear_refs) against the host's memory.

Every recipe value above is a config key of the train and probe stages,
whose defaults are the recipe's: pipeline.ini(5) describes each with its
default, bounds and choices; the job reads them through the stage's key
table (jobs/pljob/keys.py, generated from the plugins' C table,
plugins/lib/job/trainkeys.h), their one definition.

This module imports only the standard library at import time, so it loads
under any Python; constructing HfEngine checks for torch (with CUDA),
transformers, peft, bitsandbytes and accelerate and fails with one message
naming every missing package (exit 2), before anything is loaded.
"""

import contextlib
import importlib.util
import json
import os
import re
import sys

_JOBS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _JOBS not in sys.path:
    sys.path.append(_JOBS)

import pljob  # noqa: E402
from engines import prefix  # noqa: E402
from engines.base import Engine  # noqa: E402

REQUIRED = ("torch", "transformers", "peft", "bitsandbytes", "accelerate")
MB = 1024.0 * 1024.0


def missing_packages():
    """The packages of REQUIRED that this interpreter cannot import."""
    out = []
    for name in REQUIRED:
        try:
            if importlib.util.find_spec(name) is None:
                out.append(name)
        except (ImportError, ValueError):
            out.append(name)
    return out


class HfEngine(Engine):
    """The engine interface (engines.base.Engine) on transformers, peft and
    bitsandbytes, with the shared-prefix mode (engines.prefix)."""

    name = "hf"
    SHARED_PREFIX = True

    def __init__(self, cfg, events):
        missing = missing_packages()
        if missing:
            raise pljob.BadInput(
                "engine hf: missing Python packages: %s (interpreter %s); install them there, "
                "or point the stage's python key at an interpreter that has them"
                % (", ".join(missing), sys.executable))
        super().__init__(cfg, events)
        self.base = cfg.path_in("base", kind="dir")
        self.load_in_4bit = cfg.bool("load_in_4bit")
        self.quant_type = cfg.choice("bnb_4bit_quant_type")
        self.double_quant = cfg.bool("bnb_4bit_use_double_quant")
        self.compute_dtype = cfg.choice("bnb_4bit_compute_dtype")
        self.dtype = cfg.choice("dtype")
        self.grad_ckpt = cfg.bool("gradient_checkpointing")
        self.attn = cfg.choice("attn_implementation")
        self.r = cfg.int("lora_r")
        self.alpha = cfg.float("lora_alpha", float(self.r))
        self.dropout = cfg.float("lora_dropout")
        self.rslora = cfg.bool("use_rslora")
        self.lm_head_bf16 = cfg.bool("lm_head_bf16")
        self.mlp_chunk = cfg.int("mlp_chunk")
        self.save_on_cpu = cfg.bool("save_on_cpu")
        self.pin_memory = cfg.bool("pin_memory")
        self.logits_response_only = cfg.bool("logits_to_keep")
        self.token_type_ids = cfg.bool("token_type_ids")
        self.optim = cfg.choice("optim")
        self.lr = cfg.float("learning_rate")
        self.weight_decay = cfg.float("weight_decay")
        self.betas = (cfg.float("adam_beta1"), cfg.float("adam_beta2"))
        self.eps = cfg.float("adam_epsilon")
        self.seed = cfg.int("seed")
        self.device = cfg.int("cuda_device")
        self.cpu = cfg.choice("device") == "cpu"
        self.threads = cfg.int("threads")
        self.shared_prefix = cfg.choice("shared_prefix")
        self.suffix_batch = cfg.int("suffix_batch")
        self.shared = None
        if cfg.bool("expandable_segments"):
            # Read by the CUDA caching allocator at its first use.
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        import torch
        self.torch = torch
        if self.cpu:
            torch.set_num_threads(self.threads)
            torch.use_deterministic_algorithms(True)
            self.dev = torch.device("cpu")
            self.save_on_cpu = False
            return
        if not torch.cuda.is_available():
            raise pljob.BadInput("engine hf: torch %s sees no CUDA device (interpreter %s); "
                                 "pipelinectl doctor says why, device = cpu runs on the CPU"
                                 % (torch.__version__, sys.executable))
        self.dev = torch.device("cuda", self.device)
        torch.cuda.set_device(self.dev)

    # -- out-of-memory mapping
    @contextlib.contextmanager
    def _oom(self, phase):
        torch = self.torch
        if self.cpu:
            try:
                yield
            except MemoryError as e:
                raise pljob.OutOfMemory(phase, _rss_mb("VmRSS"), self.capacity_mb(), str(e) or "MemoryError")
            return
        try:
            yield
        except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
            # bitsandbytes' kernels report a failed allocation as a plain
            # RuntimeError ("CUDA error: out of memory"); anything else
            # is not ours to translate.
            if not isinstance(e, torch.cuda.OutOfMemoryError) and "out of memory" not in str(e):
                raise
            m = re.search(r"Tried to allocate ([0-9.]+) (MiB|GiB)", str(e))
            tried = 0.0
            if m:
                tried = float(m.group(1)) * (1024.0 if m.group(2) == "GiB" else 1.0)
            used = torch.cuda.memory_allocated(self.dev) / MB
            cap = torch.cuda.get_device_properties(self.dev).total_memory / MB
            raise pljob.OutOfMemory(phase, used + tried, cap, str(e).splitlines()[0])

    # -- load
    def load(self):
        torch = self.torch
        import transformers
        import peft
        # The model's dtype (dtype) and what its 4-bit layers compute in
        # (bnb_4bit_compute_dtype) are two keys: the second means nothing
        # without load_in_4bit.
        dt = self.dtype if self.dtype == "auto" else getattr(torch, self.dtype)
        q = None
        if self.load_in_4bit:
            q = transformers.BitsAndBytesConfig(
                load_in_4bit=True, bnb_4bit_quant_type=self.quant_type,
                bnb_4bit_use_double_quant=self.double_quant,
                bnb_4bit_compute_dtype=getattr(torch, self.compute_dtype))
        # transformers 4.56 renamed torch_dtype to dtype (the recipe's 5.5
        # wants the new name).
        ver = tuple(int(x) for x in re.findall(r"\d+", transformers.__version__)[:2])
        dkw = {"dtype": dt} if ver >= (4, 56) else {"torch_dtype": dt}
        with self._oom("load"):
            model = transformers.AutoModelForCausalLM.from_pretrained(
                self.base, quantization_config=q, device_map={"": "cpu" if self.cpu else self.device},
                attn_implementation=self.attn, **dkw)
            model.config.use_cache = False
            if self.load_in_4bit:
                model = peft.prepare_model_for_kbit_training(
                    model, use_gradient_checkpointing=self.grad_ckpt,
                    gradient_checkpointing_kwargs={"use_reentrant": False})
            elif self.grad_ckpt:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            torch.manual_seed(self.seed)
            lcfg = peft.LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout,
                                   target_modules=list(pljob.LORA_TARGETS), bias="none",
                                   task_type="CAUSAL_LM", use_rslora=self.rslora)
            model = peft.get_peft_model(model, lcfg)
            if self.lm_head_bf16:
                head = model.get_output_embeddings()
                emb = model.get_input_embeddings()
                tied = head is not None and emb is not None and head.weight is emb.weight
                if tied and not self.load_in_4bit and emb.weight.dtype != torch.bfloat16:
                    # Tied (Gemma 3's 262144 x hidden table is both): the
                    # cast would make the embeddings' output bf16 too, into
                    # layers that compute in another dtype.
                    print("hf: lm_head_bf16 not applied: lm_head is tied to the input embeddings "
                          "and the model computes in %s" % str(emb.weight.dtype).replace("torch.", ""),
                          file=sys.stderr)
                elif head is not None:
                    head.to(torch.bfloat16)
        if self.mlp_chunk:
            _patch_mlp(self.mlp_chunk)
        self.model = model
        self.model.train()

    def set_train(self):
        self.model.train()

    def is_training(self):
        return self.model.training

    def parameters(self):
        return [p for p in self.model.parameters() if p.requires_grad]

    def make_optimizer(self):
        if self.optim == "paged_adamw_8bit":
            import bitsandbytes as bnb
            return bnb.optim.PagedAdamW8bit(self.parameters(), lr=self.lr, betas=self.betas,
                                            eps=self.eps, weight_decay=self.weight_decay)
        return self.torch.optim.AdamW(self.parameters(), lr=self.lr, betas=self.betas,
                                      eps=self.eps, weight_decay=self.weight_decay)

    def train_context(self):
        if self.save_on_cpu:
            return self.torch.autograd.graph.save_on_cpu(pin_memory=self.pin_memory)
        return contextlib.nullcontext()

    # -- one micro-step
    def loss(self, ex):
        torch = self.torch
        F = torch.nn.functional
        ids = torch.as_tensor(ex["input_ids"], dtype=torch.long, device=self.dev)[None]
        n = int(ex["response_len"])
        T = ids.shape[1]
        kw = {}
        if self.token_type_ids:
            kw["token_type_ids"] = torch.zeros_like(ids)  # G12
        if self.logits_response_only:
            kw["logits_to_keep"] = n + 1
        with self._oom("forward"):
            out = self.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False, **kw)
            logits = out.logits
            if self.logits_response_only and logits.shape[1] != n + 1:
                # At Gemma 3's 262144 entries the whole sequence's logits
                # are T MB a position in float32: never for the prompt.
                raise RuntimeError("hf: the model returned logits for %d positions, not the %d of "
                                   "logits_to_keep" % (logits.shape[1], n + 1))
            pred = logits[0, -(n + 1):-1, :].float()
            return F.cross_entropy(pred, ids[0, T - n:])

    def shared_setup(self, examples):
        """(on, why): whether accumulate() trains shared prefixes once per
        step (prefix.decide); call after load()."""
        on, why = prefix.decide(self.shared_prefix, examples, self.dropout, self.model, self.attn)
        self.shared = prefix.Shared(self) if on else None
        return on, why

    def accumulate(self, exs, div):
        """One step's forward and backward over exs, the gradients of
        sum(loss) / div: with shared prefixes when shared_setup() turned
        them on.  The per-example losses, or None when the plain loop
        should run."""
        if self.shared is None:
            return None
        return self.shared.accumulate(exs, div)

    def probe_step(self, ex):
        """The probe's forward and backward of ex as train runs it: with
        its shared prefix when shared_setup() turned them on and ex has
        one (the prefix's kept state and keys/values plus one batch of
        suffix_batch suffixes, each ex's own: the peak of a shared-prefix
        step), else the plain way.  (loss, prefix tokens)."""
        P = ex.get("prefix_len", 0) if ex.get("prefix_group", -1) >= 0 else 0
        if self.shared is None or P <= 0:
            return super().probe_step(ex)
        return self.shared.group(P, [ex] * self.suffix_batch, self.suffix_batch)[0], P

    def backward(self, loss):
        with self._oom("backward"):
            loss.backward()

    def before_step(self, step):
        pass

    def after_step(self):
        pass

    def resumed_optimizer(self):
        pass

    def step(self, opt):
        with self._oom("step"):
            opt.step()

    def pre_step_mb(self):
        if self.cpu:
            return _rss_mb("VmRSS")
        return self.torch.cuda.memory_allocated(self.dev) / MB

    def peak_mb(self):
        if self.cpu:
            return _rss_mb("VmHWM")
        return self.torch.cuda.max_memory_allocated(self.dev) / MB

    def reset_peak(self):
        if self.cpu:
            # Linux: 5 resets the peak resident set (VmHWM) to the current.
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            return
        self.torch.cuda.reset_peak_memory_stats(self.dev)

    def capacity_mb(self):
        if self.cpu:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemTotal:"):
                        return int(line.split()[1]) / 1024.0
            return 0.0
        return self.torch.cuda.get_device_properties(self.dev).total_memory / MB

    # -- adapters
    def adapter_tensors(self):
        import peft
        sd = peft.get_peft_model_state_dict(self.model)
        return {k: v.detach().float().cpu().numpy() for k, v in sd.items()}

    def load_adapter_tensors(self, tensors, where="adapter"):
        import peft
        sd = {k: self.torch.from_numpy(v.copy()) for k, v in tensors.items()}
        res = peft.set_peft_model_state_dict(self.model, sd)
        unexpected = getattr(res, "unexpected_keys", None) or []
        if unexpected:
            raise pljob.BadInput("%s: unexpected tensor %s" % (where, unexpected[0]))

    def adapter_config(self):
        return self.model.peft_config["default"].to_dict()

    def save_adapter(self, path):
        self.model.save_pretrained(path, safe_serialization=True)
        # PEFT keeps target_modules as a set and writes it in the set's
        # order, which changes with the string hash seed of the process:
        # sorted, the file (and the adapter's digest) is the same in every
        # run.
        cpath = os.path.join(path, "adapter_config.json")
        with open(cpath) as f:
            acfg = json.load(f)
        if isinstance(acfg.get("target_modules"), list):
            acfg["target_modules"] = sorted(acfg["target_modules"])
        pljob.write_file(cpath, (json.dumps(acfg, indent=2, sort_keys=True) + "\n").encode())


def _rss_mb(field):
    """VmRSS or VmHWM of this process, MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return 0.0


_patched = False


def _patch_mlp(chunk):
    """Run Gemma3MLP over chunk-token slices of the sequence (G14): the
    gate and up projections of one slice at a time coexist, not of all."""
    global _patched
    if _patched:
        return
    import torch
    from transformers.models.gemma3 import modeling_gemma3 as mg
    orig = mg.Gemma3MLP.forward

    def forward(self, x):
        T = x.shape[-2]
        if T <= chunk:
            return orig(self, x)
        return torch.cat([orig(self, x[..., i:i + chunk, :]) for i in range(0, T, chunk)], dim=-2)

    mg.Gemma3MLP.forward = forward
    _patched = True
