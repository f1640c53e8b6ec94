"""tiny: a pure-PyTorch Gemma 3 text model with LoRA, for the CPU.

It follows transformers' modeling_gemma3 (Gemma3ForCausalLM's text path)
operation for operation, in float32 whatever the checkpoint's dtype:

  * embedding scaled by sqrt(hidden_size);
  * RMSNorm computing x * rsqrt(mean(x^2) + eps) * (1 + weight);
  * per layer: input_layernorm -> attention -> post_attention_layernorm ->
    residual add; pre_feedforward_layernorm -> MLP ->
    post_feedforward_layernorm -> residual add;
  * attention: q/k/v projections, q_norm and k_norm per head, RoPE (the
    non-interleaved rotate_half form) with rope_theta and its rope scaling on
    global layers and rope_local_base_freq unscaled on sliding layers, GQA
    by repeating k/v heads, scores scaled by query_pre_attn_scalar^-0.5,
    causal mask plus, on sliding layers, a window of sliding_window
    positions (key j visible from query i when i - sliding_window < j <= i),
    softmax in float32, o_proj;
  * the sliding/global pattern from layer_types, else sliding_window_pattern
    (default 6: every sixth layer global, the 5:1 pattern);
  * MLP down(gelu_tanh(gate(x)) * up(x));
  * final norm, lm_head tied to the embedding (unless the checkpoint has its
    own lm_head and tie_word_embeddings is false), final_logit_softcapping
    when set.

It loads a checkpoint directory in either layout: Gemma3ForConditionalGeneration
(model.language_model.*, vision tensors skipped) or Gemma3ForCausalLM
(model.*), and the older language_model.model.* one.  LoRA goes on q, k, v,
o, gate, up and down; adapters are saved under PEFT's key names for the
checkpoint's layout (HACKING.md: PEFT adapters and the merge).

GPU-memory STAND-IN (GpuMemoryStandIn): with gpu_capacity_mb set, the engine
accounts the bytes a card would hold and raises an out-of-memory like CUDA's
when they exceed it.  The count, per micro-step:

    static      every parameter (frozen base and LoRA), at its element size
    optimizer   AdamW's exp_avg and exp_avg_sq: 2 x LoRA bytes, from the
                first optimizer step on
    gradients   1 x LoRA bytes, from backward until zero_grad
    activations measured: the bytes of every distinct tensor storage autograd
                saves for backward during the forward (saved_tensors_hooks),
                parameters excluded; the logits of logits_to_keep included;
                freed after backward

peak = static + optimizer + activations + gradients at the end of the
forward/backward; the pre-step figure is static + optimizer before the
forward.  It is an accounting of what the model must hold, not of an
allocator's fragmentation or workspace, so it under-states a real card: it
exists to exercise the probe and train policies (calibration, refusal,
OOM relaunch) on machines without a GPU.
"""

import json
import math
import os
import sys

_JOBS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _JOBS not in sys.path:
    sys.path.append(_JOBS)

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import pljob
from engines.base import Engine

MB = 1024.0 * 1024.0


# ---------------------------------------------------------------- config

class TextConfig:
    """Gemma 3 text config, with transformers' Gemma3TextConfig defaults for
    missing fields (the 4B config.json omits several)."""

    DEFAULTS = {
        "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
        "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0, "rope_scaling": None,
        "query_pre_attn_scalar": 256, "sliding_window": 4096,
        "sliding_window_pattern": 6, "final_logit_softcapping": None,
        "attn_logit_softcapping": None, "hidden_activation": "gelu_pytorch_tanh",
        "tie_word_embeddings": True, "attention_bias": False,
    }

    def __init__(self, raw, path="config.json"):
        d = dict(raw)
        if isinstance(d.get("text_config"), dict):
            # Multimodal config: the text config over the root, as the
            # converter and AutoConfig see it.
            tie = d.get("tie_word_embeddings")
            d = dict(d, **d["text_config"])
            if tie is not None and "tie_word_embeddings" not in raw["text_config"]:
                d["tie_word_embeddings"] = tie
        for k, v in self.DEFAULTS.items():
            if d.get(k) is None and v is not None:
                d[k] = v
            elif k not in d:
                d[k] = v
        self.d = d
        for k in self.DEFAULTS:
            setattr(self, k, d.get(k))
        if d.get("hidden_activation") not in ("gelu_pytorch_tanh", None):
            raise pljob.BadInput("%s: hidden_activation %r: only gelu_pytorch_tanh is supported"
                                 % (path, d["hidden_activation"]))
        if self.attn_logit_softcapping:
            raise pljob.BadInput("%s: attn_logit_softcapping is set; Gemma 3 has none" % path)
        L = int(self.num_hidden_layers)
        lt = d.get("layer_types")
        if lt:
            if len(lt) != L:
                raise pljob.BadInput("%s: layer_types has %d entries for %d layers" % (path, len(lt), L))
            self.sliding = [t == "sliding_attention" for t in lt]
        else:
            p = int(self.sliding_window_pattern or 6)
            self.sliding = [bool((i + 1) % p) for i in range(L)]
        # RoPE: the newer rope_parameters form, else rope_theta +
        # rope_scaling (global) and rope_local_base_freq (sliding).
        rp = d.get("rope_parameters")
        if isinstance(rp, dict) and "full_attention" in rp:
            full = rp.get("full_attention") or {}
            slide = rp.get("sliding_attention") or {}
            self.rope_global = (float(full.get("rope_theta", self.rope_theta)), full)
            self.rope_local = (float(slide.get("rope_theta", self.rope_local_base_freq)), slide)
        else:
            self.rope_global = (float(self.rope_theta), self.rope_scaling or {})
            self.rope_local = (float(self.rope_local_base_freq), {})
        for theta, sc in (self.rope_global, self.rope_local):
            t = (sc or {}).get("rope_type", (sc or {}).get("type", "default"))
            if t not in ("default", "linear"):
                raise pljob.BadInput("%s: rope type %r is not supported (default, linear)" % (path, t))


def inv_freq(theta, scaling, dim):
    f = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    sc = scaling or {}
    if sc.get("rope_type", sc.get("type", "default")) == "linear":
        f = f / float(sc["factor"])
    return f


# ---------------------------------------------------------------- modules

class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim), requires_grad=False)

    def forward(self, x):
        x32 = x.float()
        out = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * (1.0 + self.weight.float())).type_as(x)


class LoRALinear(nn.Module):
    """A frozen nn.Linear plus scaling * B(A(dropout(x))), as PEFT's
    lora.Linear.  At dropout 0 no dropout module is applied (G17)."""

    def __init__(self, base):
        super().__init__()
        self.base = base
        self.r = 0

    def add(self, r, alpha, dropout, rslora):
        self.r = r
        if r > 0:
            self.lora_A = nn.Parameter(torch.empty(r, self.base.in_features))
            self.lora_B = nn.Parameter(torch.zeros(self.base.out_features, r))
            # PEFT's default init: A kaiming-uniform (a = sqrt(5)), B zero.
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            self.scaling = alpha / math.sqrt(r) if rslora else alpha / r
            self.dropout = nn.Dropout(dropout) if dropout > 0 else None

    def forward(self, x):
        y = self.base(x)
        if self.r > 0:
            xd = self.dropout(x) if self.dropout is not None else x
            y = y + F.linear(F.linear(xd, self.lora_A), self.lora_B) * self.scaling
        return y


def _linear(i, o):
    lin = nn.Linear(i, o, bias=False)
    lin.weight.requires_grad_(False)
    return lin


class Attention(nn.Module):
    def __init__(self, c, sliding):
        super().__init__()
        H, nh, nkv, hd = c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.nh, self.nkv, self.hd = nh, nkv, hd
        self.q_proj = LoRALinear(_linear(H, nh * hd))
        self.k_proj = LoRALinear(_linear(H, nkv * hd))
        self.v_proj = LoRALinear(_linear(H, nkv * hd))
        self.o_proj = LoRALinear(_linear(nh * hd, H))
        self.q_norm = RMSNorm(hd, c.rms_norm_eps)
        self.k_norm = RMSNorm(hd, c.rms_norm_eps)
        self.scaling = float(c.query_pre_attn_scalar) ** -0.5
        self.sliding = sliding

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        q = self.q_norm(q)
        k = self.k_norm(k)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        rep = self.nh // self.nkv
        if rep > 1:
            k = k[:, :, None].expand(B, self.nkv, rep, T, self.hd).reshape(B, self.nh, T, self.hd)
            v = v[:, :, None].expand(B, self.nkv, rep, T, self.hd).reshape(B, self.nh, T, self.hd)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling + mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(w, v).transpose(1, 2).reshape(B, T, self.nh * self.hd)
        return self.o_proj(o)


def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = LoRALinear(_linear(c.hidden_size, c.intermediate_size))
        self.up_proj = LoRALinear(_linear(c.hidden_size, c.intermediate_size))
        self.down_proj = LoRALinear(_linear(c.intermediate_size, c.hidden_size))

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c, sliding):
        super().__init__()
        H, eps = c.hidden_size, c.rms_norm_eps
        self.self_attn = Attention(c, sliding)
        self.mlp = MLP(c)
        self.input_layernorm = RMSNorm(H, eps)
        self.post_attention_layernorm = RMSNorm(H, eps)
        self.pre_feedforward_layernorm = RMSNorm(H, eps)
        self.post_feedforward_layernorm = RMSNorm(H, eps)

    def forward(self, x, cos, sin, mask):
        r = x
        x = self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), cos, sin, mask))
        x = r + x
        r = x
        x = self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
        return r + x


class Gemma3Text(nn.Module):
    """The text model; module paths mirror transformers' (model.layers.N...)
    under the prefix the checkpoint used."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.embed_tokens.weight.requires_grad_(False)
        self.layers = nn.ModuleList(DecoderLayer(c, c.sliding[i]) for i in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.lm_head = None  # tied unless the checkpoint brings one
        self.inv_global = inv_freq(*c.rope_global, c.head_dim)
        self.inv_local = inv_freq(*c.rope_local, c.head_dim)

    def _rope(self, inv, T):
        pos = torch.arange(T, dtype=torch.float32)
        freqs = torch.outer(pos, inv.float())
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[None, None], emb.sin()[None, None]

    def _masks(self, T):
        i = torch.arange(T)[:, None]
        j = torch.arange(T)[None, :]
        neg = torch.finfo(torch.float32).min
        causal = j <= i
        full = torch.where(causal, 0.0, neg)
        win = torch.where(causal & (j > i - int(self.c.sliding_window)), 0.0, neg)
        return full[None, None], win[None, None]

    def hidden(self, ids):
        """Final-normed hidden states [B, T, H] for token ids [B, T]."""
        T = ids.shape[1]
        x = self.embed_tokens(ids) * torch.tensor(float(self.c.hidden_size) ** 0.5, dtype=torch.float32)
        cg, sg = self._rope(self.inv_global, T)
        cl, sl = self._rope(self.inv_local, T)
        full, win = self._masks(T)
        for layer in self.layers:
            if layer.self_attn.sliding:
                x = layer(x, cl, sl, win)
            else:
                x = layer(x, cg, sg, full)
        return self.norm(x)

    def logits(self, h):
        w = self.lm_head if self.lm_head is not None else self.embed_tokens.weight
        out = F.linear(h, w)
        cap = self.c.final_logit_softcapping
        if cap:
            out = torch.tanh(out / cap) * cap
        return out

    def forward(self, ids, logits_to_keep=0):
        h = self.hidden(ids)
        if logits_to_keep:
            h = h[:, -logits_to_keep:, :]
        return self.logits(h)


# ---------------------------------------------------------------- loading

_PREFIXES = ("model.language_model.", "language_model.model.", "model.")
_SKIP = ("vision_tower", "multi_modal_projector", "vision_", "audio_", "embed_vision", "embed_audio")


def load_model(model_dir, dtype=torch.float32):
    """(Gemma3Text with frozen base weights, TextConfig, module prefix used
    in the checkpoint) for a HF checkpoint directory."""
    cpath = os.path.join(model_dir, "config.json")
    try:
        with open(cpath) as f:
            raw = json.load(f)
    except OSError as e:
        raise pljob.BadInput("%s: %s" % (cpath, e.strerror))
    except ValueError as e:
        raise pljob.BadInput("%s: not JSON: %s" % (cpath, e))
    c = TextConfig(raw, cpath)
    model = Gemma3Text(c)
    want = {}
    for n, p in model.named_parameters():
        if ".lora_" in n:
            continue
        want[n.replace(".base.weight", ".weight")] = p
    seen = set()
    prefix = None
    lm_head = None
    for path in pljob.checkpoint_tensor_files(model_dir):
        for name, (arr, dt) in pljob.read_safetensors(path).items():
            if any(s in name for s in _SKIP):
                continue
            if name in ("lm_head.weight", "language_model.lm_head.weight"):
                lm_head = (name, arr, dt)
                continue
            if name.endswith("rotary_emb.inv_freq"):
                continue
            for pre in _PREFIXES:
                if name.startswith(pre):
                    break
            else:
                raise pljob.BadInput("%s: tensor %s is not a Gemma 3 text tensor" % (path, name))
            if prefix is None:
                prefix = pre
            elif pre != prefix:
                raise pljob.BadInput("%s: tensor %s mixes the %s and %s layouts" % (path, name, prefix, pre))
            short = name[len(pre):]
            p = want.get(short)
            if p is None:
                raise pljob.BadInput("%s: tensor %s is not part of the Gemma 3 text model" % (path, name))
            if tuple(arr.shape) != tuple(p.shape):
                raise pljob.BadInput("%s: tensor %s has shape %s, the config implies %s"
                                     % (path, name, list(arr.shape), list(p.shape)))
            with torch.no_grad():
                p.copy_(torch.from_numpy(pljob.to_float32(arr, dt).copy()))
            seen.add(short)
    missing = sorted(set(want) - seen)
    if missing:
        raise pljob.BadInput("%s: %d tensors missing, first %s%s" % (model_dir, len(missing), prefix or "model.", missing[0]))
    if lm_head is not None and not c.tie_word_embeddings:
        name, arr, dt = lm_head
        model.lm_head = nn.Parameter(torch.from_numpy(pljob.to_float32(arr, dt).copy()), requires_grad=False)
    if dtype != torch.float32:
        model.to(dtype)
    return model, c, prefix


def add_lora(model, r, alpha, dropout, rslora, targets=pljob.LORA_TARGETS):
    """Give every target projection a LoRA pair (in module order, so the
    same seed gives the same init)."""
    for n, m in model.named_modules():
        if isinstance(m, LoRALinear) and n.rsplit(".", 1)[-1] in targets:
            m.add(r, alpha, dropout, rslora)


def lora_modules(model):
    return [(n, m) for n, m in model.named_modules() if isinstance(m, LoRALinear) and m.r > 0]


# ---------------------------------------------------------------- memory stand-in

class GpuMemoryStandIn:
    """GPU-memory STAND-IN: accounts the bytes a card of capacity_mb would
    hold (see the module docstring) and raises pljob.OutOfMemory like a CUDA
    OOM when they exceed it.  capacity_mb 0: account only, never fail."""

    def __init__(self, capacity_mb):
        self.cap = float(capacity_mb) * MB
        self.static = 0
        self.optimizer = 0
        self.grads = 0
        self.act = 0
        self.peak = 0
        self.param_ptrs = set()
        self._seen = set()
        self.phase = "load"
        self.pending = None

    def used(self):
        return self.static + self.optimizer + self.grads + self.act

    def check(self, phase, extra=0):
        need = self.used() + extra
        self.peak = max(self.peak, need)
        if self.cap and need > self.cap:
            raise pljob.OutOfMemory(phase, need / MB, self.cap / MB,
                                    "GPU-memory stand-in: tried to allocate %.2f MB with %.2f MB in use"
                                    % (extra / MB if extra else 0.0, self.used() / MB))

    def pack(self, t):
        # Called by autograd for every tensor saved for backward.  An
        # exception raised here would reach the caller as a RuntimeError
        # wrapped by autograd's C++ layer, so the first overflow is kept in
        # self.pending and raised by the engine when the forward returns.
        try:
            st = t.storage()
            key = (st.data_ptr(), st.nbytes())
        except (RuntimeError, NotImplementedError):
            key = (t.data_ptr(), t.numel() * t.element_size())
        if key[0] in self.param_ptrs or key in self._seen:
            return t
        self._seen.add(key)
        if self.pending is None:
            try:
                self.check("forward", key[1])
            except pljob.OutOfMemory as e:
                self.pending = e
        self.act += key[1]
        return t

    def unpack(self, t):
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

    def end_backward(self):
        self._seen = set()
        self.act = 0


# ---------------------------------------------------------------- engine

class TinyEngine(Engine):
    """The engine interface (engines.base.Engine) on the model above, with
    the GPU-memory stand-in's accounting around each phase."""

    name = "tiny"

    def __init__(self, cfg, events):
        super().__init__(cfg, events)
        self.base = cfg.path_in("base", kind="dir")
        self.r = cfg.int("lora_r")
        self.alpha = cfg.float("lora_alpha", float(self.r))
        self.dropout = cfg.float("lora_dropout")
        self.rslora = cfg.bool("use_rslora")
        self.lr = cfg.float("learning_rate")
        self.weight_decay = cfg.float("weight_decay")
        self.beta1 = cfg.float("adam_beta1")
        self.beta2 = cfg.float("adam_beta2")
        self.eps = cfg.float("adam_epsilon")
        self.seed = cfg.int("seed")
        self.threads = cfg.int("threads")
        self.logits_response_only = cfg.bool("logits_to_keep")
        self.mem = GpuMemoryStandIn(cfg.float("gpu_capacity_mb"))
        self.oom_at_step = cfg.int("oom_at_step")  # test-only failure injection
        self.step_no = 0
        torch.set_num_threads(self.threads)
        torch.use_deterministic_algorithms(True)

    # -- load
    def load(self):
        self.model, self.c, self.prefix = load_model(self.base)
        # LoRA init draws from torch's RNG: seed it here, as PEFT's
        # get_peft_model runs after the trainer's set_seed.
        torch.manual_seed(self.seed)
        add_lora(self.model, self.r, self.alpha, self.dropout, self.rslora)
        params = list(self.model.parameters())
        if self.model.lm_head is not None:
            params.append(self.model.lm_head)
        self.mem.param_ptrs = set(p.data_ptr() for p in params)
        static = sum(p.numel() * p.element_size() for p in params)
        self.mem.check("load", static)
        self.mem.static = static
        self.model.train()

    def set_train(self):
        self.model.train()

    def train_context(self):
        # The recipe's save_on_cpu offload has nothing to move off a CPU.
        import contextlib
        return contextlib.nullcontext()

    def step(self, opt):
        opt.step()

    def is_training(self):
        return all(m.training for m in self.model.modules())

    def parameters(self):
        out = []
        for _, m in lora_modules(self.model):
            out += [m.lora_A, m.lora_B]
        return out

    def trainable_bytes(self):
        return sum(p.numel() * p.element_size() for p in self.parameters())

    def make_optimizer(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr, betas=(self.beta1, self.beta2),
                                 eps=self.eps, weight_decay=self.weight_decay)

    # -- one micro-step
    def loss(self, ex):
        ids = torch.from_numpy(np.asarray(ex["input_ids"], dtype=np.int64))[None]
        n = int(ex["response_len"])
        T = ids.shape[1]
        if n < 1 or n >= T:
            raise pljob.BadInput("example %s: response length %d of %d tokens" % (ex.get("key"), n, T))
        keep = n + 1 if self.logits_response_only else T
        with self.mem.hooks():
            logits = self.model(ids, logits_to_keep=keep)
            # logits[:, i] predicts token i+1; the last kept position predicts
            # nothing (logits_to_keep = response_len + 1, as in the recipe).
            pred = logits[0, -(n + 1):-1, :].float()
            target = ids[0, T - n:]
            loss = F.cross_entropy(pred, target)
        if self.mem.pending is not None:
            e, self.mem.pending = self.mem.pending, None
            raise e
        return loss

    def backward(self, loss):
        self.mem.phase = "backward"
        self.mem.check("backward", self.trainable_bytes() if self.mem.grads == 0 else 0)
        self.mem.grads = self.trainable_bytes()
        loss.backward()
        self.mem.end_backward()

    def before_step(self, step):
        if self.oom_at_step and step == self.oom_at_step:
            raise pljob.OutOfMemory("step", self.mem.used() / MB, self.mem.cap / MB,
                                    "injected by oom_at_step (test-only)")
        if self.mem.optimizer == 0:
            # AdamW allocates exp_avg and exp_avg_sq on its first step.
            self.mem.check("step", 2 * self.trainable_bytes())
            self.mem.optimizer = 2 * self.trainable_bytes()

    def after_step(self):
        self.mem.grads = 0

    def resumed_optimizer(self):
        # Restored AdamW state is resident from the first step on.
        self.mem.check("load", 2 * self.trainable_bytes())
        self.mem.optimizer = 2 * self.trainable_bytes()

    def pre_step_mb(self):
        return (self.mem.static + self.mem.optimizer) / MB

    def peak_mb(self):
        return self.mem.peak / MB

    def reset_peak(self):
        self.mem.peak = self.mem.used()

    def capacity_mb(self):
        return self.mem.cap / MB

    # -- adapters
    def _peft_prefix(self):
        # PEFT key = "base_model.model." + module path in the base model.
        return "base_model.model." + self.prefix

    def adapter_tensors(self):
        pre = self._peft_prefix()
        out = {}
        for n, m in lora_modules(self.model):
            out[pre + n + ".lora_A.weight"] = m.lora_A.detach().numpy().astype(np.float32, copy=True)
            out[pre + n + ".lora_B.weight"] = m.lora_B.detach().numpy().astype(np.float32, copy=True)
        return out

    def load_adapter_tensors(self, tensors, where="adapter"):
        load_lora(self.model, self._peft_prefix(), tensors, where)

    def adapter_config(self):
        return pljob.adapter_config(os.path.abspath(self.base), self.r, self.alpha, self.dropout, self.rslora)

    def save_adapter(self, path):
        pljob.write_adapter_dir(path, self.adapter_config(), self.adapter_tensors())


def load_lora(model, pre, tensors, where):
    """Copy PEFT-named LoRA tensors into model's LoRA pairs; every pair
    must be present and nothing else."""
    mods = dict(lora_modules(model))
    want = set()
    for n, m in mods.items():
        for part, p in (("lora_A", m.lora_A), ("lora_B", m.lora_B)):
            key = "%s%s.%s.weight" % (pre, n, part)
            want.add(key)
            if key not in tensors:
                raise pljob.BadInput("%s: tensor %s missing" % (where, key))
            a = tensors[key]
            if tuple(a.shape) != tuple(p.shape):
                raise pljob.BadInput("%s: tensor %s has shape %s, expected %s"
                                     % (where, key, list(a.shape), list(p.shape)))
            with torch.no_grad():
                p.copy_(torch.from_numpy(np.array(a, dtype=np.float32)))
    extra = sorted(set(tensors) - want)
    if extra:
        raise pljob.BadInput("%s: unexpected tensor %s" % (where, extra[0]))


# ---------------------------------------------------------------- command line

def _main(argv):
    """tiny.py top1 MODEL_DIR [ADAPTER_DIR] [--logprobs K] < ids.json: for
    each sequence (a JSON list of lists of ids on stdin) print the top-1
    next token at every position, or with --logprobs K the K best
    [id, log-probability] pairs at every position: for comparing this
    forward with llama.cpp's."""
    k = 0
    if "--logprobs" in argv:
        i = argv.index("--logprobs")
        k = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if len(argv) < 2 or argv[0] != "top1":
        print("usage: tiny.py top1 MODEL_DIR [ADAPTER_DIR] [--logprobs K] < ids.json", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    model, c, prefix = load_model(argv[1])
    if len(argv) > 2:
        acfg, tensors = pljob.read_adapter_dir(argv[2])
        add_lora(model, int(acfg["r"]), float(acfg["lora_alpha"]), 0.0, bool(acfg.get("use_rslora")))
        load_lora(model, "base_model.model." + prefix, tensors, argv[2])
    model.eval()
    out = []
    with torch.no_grad():
        for seq in json.load(sys.stdin):
            lg = model(torch.tensor([seq], dtype=torch.int64))[0]
            if k:
                lp = F.log_softmax(lg.double(), dim=-1)
                v, i = lp.topk(k, dim=-1)
                out.append([[[int(a), float(b)] for a, b in zip(ii, vv)] for ii, vv in zip(i.tolist(), v.tolist())])
            else:
                out.append(lg.argmax(-1).tolist())
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
