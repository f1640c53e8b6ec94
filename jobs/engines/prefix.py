"""prefix: train a step's shared prompt prefix once (engine hf, key shared_prefix).

With a causal model the activations of a prompt's first P tokens do not
depend on what follows them, so within one optimizer step the examples that
start with the same P tokens (tokenize finds them: the arrays prefix_group
and prefix_len of tokens.npz) can share one forward and one backward of
those tokens:

  1. the prefix forward, once, with the adapter in place; each attention
     layer's keys and values (after k_norm and RoPE) are captured.  What the
     prefix's backward needs is kept as the model keeps it: under gradient
     checkpointing (non-reentrant) the layer inputs only;
  2. the examples' suffixes (tokens P..T-1), suffix_batch of them in one
     forward (left-padded to the longest; a padding position is a key no
     query sees), run against those keys and values detached into leaf
     tensors (requires_grad, the same storage), at positions P..T-1,
     with the attention masks built here: causal for the global layers,
     causal and within the sliding window for the sliding layers.  Every
     prefix key and value is kept (not the last sliding_window - 1 of a
     sliding layer's cache: that cache is wrong for a suffix that reaches
     past the window) and the window is the mask's;
  3. the suffixes' losses backward: the adapter's gradients from the
     suffixes, and the gradients of the keys and values summed in the
     leaves over the batch and the step's examples;
  4. after the group's last example, one backward of the prefix from its
     captured keys and values with the summed gradients.

The loss and the gradients are the plain loop's up to the order of float
summation.  The cost of a step falls from sum(T_i) tokens to
P + sum(T_i - P); batching the suffixes turns a step's many short forwards
(a few dozen tokens each, where the per-call and small-matrix costs
dominate) into a few longer ones.

The keys and values reach the layers through Gemma3Attention's own
past_key_values.update() call: the patched forward hands it the object
active here when the decoder layer passed none (transformers' gradient
checkpointing drops past_key_values at the layer).  The active object stays
set through the matching backward, so a recomputed layer sees what the
forward saw.

This module imports only the standard library at import time.
"""

import contextlib
import os
import sys

_JOBS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _JOBS not in sys.path:
    sys.path.append(_JOBS)

import pljob  # noqa: E402

MODES = ("auto", "yes", "no")
# auto turns the mode on when the shared prefixes cover at least this share
# of all prompt tokens.
AUTO_MIN_SHARE = 0.25
MODEL_TYPES = ("gemma3", "gemma3_text")
ATTN = ("sdpa", "eager")

_active = None
_patched = False


def _patch_attention():
    """Let Gemma3Attention use the active capture or suffix object as its
    past_key_values when the decoder layer passes none."""
    global _patched
    if _patched:
        return
    from transformers.models.gemma3 import modeling_gemma3 as mg
    orig = mg.Gemma3Attention.forward

    def forward(self, *args, **kw):
        if _active is not None and kw.get("past_key_values") is None:
            kw["past_key_values"] = _active
        return orig(self, *args, **kw)

    mg.Gemma3Attention.forward = forward
    _patched = True


@contextlib.contextmanager
def _using(obj):
    global _active
    prev, _active = _active, obj
    try:
        yield
    finally:
        _active = prev


class _Capture:
    """The prefix pass: records each layer's keys and values of the first
    forward, returns them unchanged (also in a recomputation)."""

    def __init__(self):
        self.kv = {}

    def update(self, k, v, layer_idx, *args, **kw):
        if layer_idx not in self.kv:
            self.kv[layer_idx] = (k, v)
        return k, v


class _Suffix:
    """A suffix pass: the prefix's keys and values (leaves) before the
    suffix's own; nothing is stored, so a recomputation sees the same."""

    def __init__(self, leaves):
        self.leaves = leaves

    def update(self, k, v, layer_idx, *args, **kw):
        import torch
        pk, pv = self.leaves[layer_idx]
        B = k.shape[0]
        if pk.shape[0] != B:
            # One prefix for the batch's rows: a view, whose gradient is
            # the rows' sum.
            pk, pv = pk.expand(B, -1, -1, -1), pv.expand(B, -1, -1, -1)
        return torch.cat([pk.to(k.dtype), k], dim=-2), torch.cat([pv.to(v.dtype), v], dim=-2)


def text_config(model):
    cfg = model.config
    if hasattr(cfg, "get_text_config"):
        return cfg.get_text_config(decoder=True)
    return getattr(cfg, "text_config", cfg)


def unsupported(model, attn):
    """Why the mode cannot run on this model, or None."""
    tc = text_config(model)
    mt = getattr(tc, "model_type", None)
    if mt not in MODEL_TYPES:
        return "model type %s (only Gemma 3's attention is wired)" % mt
    if attn not in ATTN:
        return "attn_implementation %s (the suffix needs an explicit mask: sdpa or eager)" % attn
    return None


def masks(model, P, lens, attn, dtype, device):
    """(masks, positions) of a batch of suffixes of lens[b] tokens after
    the same P-token prefix, left-padded to S = max(lens): masks
    {"full_attention", "sliding_attention"} [B, 1, S, P+S] of the queries
    over every key (bool for sdpa, True: attend; additive for eager) and
    positions [B, S].  A row's real tokens sit at positions P..P+lens[b]-1
    and see the prefix and their own earlier tokens, causally (and within
    the window on sliding layers); a padding key is seen by no query, and
    a padding query (its output unused) sees the prefix only, so that no
    softmax row is empty."""
    import torch
    tc = text_config(model)
    S = max(lens)
    pad = torch.tensor([S - n for n in lens], device=device)[:, None]          # [B, 1]
    j = torch.arange(S, device=device)[None, :]                               # [1, S]
    real_q = j >= pad                                                         # [B, S]
    qpos = torch.where(real_q, P + j - pad, torch.full_like(j - pad, P))      # [B, S]
    k = torch.arange(P + S, device=device)[None, :]                           # [1, P+S]
    kpos = torch.where(k < P, k, k - pad)                                     # [B, P+S]
    real_k = (k < P) | (k - P >= pad)                                         # [B, P+S]
    qp, kp = qpos[:, :, None], kpos[:, None, :]
    seen = real_k[:, None, :] & (real_q[:, :, None] | (k < P)[:, None, :])
    causal = seen & (kp <= qp)
    out = {"full_attention": causal}
    w = getattr(tc, "sliding_window", None)
    out["sliding_attention"] = causal & (kp > qp - w) if w else causal
    for name in out:
        m = out[name][:, None]
        if attn == "eager":
            f = torch.zeros(m.shape, dtype=dtype, device=device)
            m = f.masked_fill(~m, torch.finfo(dtype).min)
        out[name] = m
    return out, qpos


def plan_step(exs):
    """([(P, [example, ...]), ...], [plain example, ...]): the step's
    examples that share a prefix with at least one other, by group, and the
    rest.  An example whose tokens do not start with its group's prefix
    (as tokenize recorded it) is plain."""
    groups = {}
    plain = []
    for ex in exs:
        g, P = ex.get("prefix_group", -1), ex.get("prefix_len", 0)
        if g < 0 or P <= 0 or P >= ex["prompt_len"]:
            plain.append(ex)
            continue
        groups.setdefault((g, P), []).append(ex)
    shared = []
    for (g, P), members in groups.items():
        head = members[0]["input_ids"][:P]
        ok = [m for m in members if (m["input_ids"][:P] == head).all()]
        plain += [m for m in members if not (m["input_ids"][:P] == head).all()]
        if len(ok) >= 2:
            shared.append((P, ok))
        else:
            plain += ok
    return shared, plain


def step_tokens(exs):
    """(tokens run by the plain loop, tokens run with shared prefixes) for
    one step's examples."""
    plain = sum(len(e["input_ids"]) for e in exs)
    shared, rest = plan_step(exs)
    t = sum(len(e["input_ids"]) for e in rest)
    for P, members in shared:
        t += P + sum(len(m["input_ids"]) - P for m in members)
    return plain, t


def corpus_share(examples):
    """The share of all prompt tokens that the recorded prefixes cover."""
    total = sum(e["prompt_len"] for e in examples)
    covered = sum(e.get("prefix_len", 0) for e in examples if e.get("prefix_group", -1) >= 0)
    return covered / float(max(1, total))


def decide(mode, examples, dropout, model, attn):
    """(on, why): whether the run uses shared prefixes, and the reason in
    words for the log."""
    if mode == "no":
        return False, "shared_prefix = no"
    why = unsupported(model, attn)
    if why:
        if mode == "yes":
            raise pljob.BadInput("shared_prefix = yes: not possible with %s" % why)
        return False, why
    share = corpus_share(examples)
    if share <= 0:
        return False, "the token file records no shared prefix"
    if mode == "yes":
        return True, "shared_prefix = yes (prefixes cover %.1f%% of the prompt tokens)" % (100 * share)
    if dropout > 0:
        # The prefix would run once per step with one dropout mask, where
        # the plain loop draws one per example: not the recipe's training.
        return False, "lora_dropout %g > 0 (the prefix would share one dropout mask across a step)" % dropout
    if share < AUTO_MIN_SHARE:
        return False, "prefixes cover %.1f%% of the prompt tokens, under %.0f%%" % (100 * share, 100 * AUTO_MIN_SHARE)
    return True, "prefixes cover %.1f%% of the prompt tokens" % (100 * share)


class Shared:
    """One step's forward and backward with shared prefixes, for HfEngine."""

    def __init__(self, eng):
        self.eng = eng
        _patch_attention()

    def _kwargs(self, ids):
        torch = self.eng.torch
        kw = {}
        if self.eng.token_type_ids:
            kw["token_type_ids"] = torch.zeros_like(ids)  # G12
        return kw

    def _prefix(self, prefix_ids):
        """The prefix forward: {layer: (keys, values)} with their graph."""
        eng = self.eng
        torch = eng.torch
        ids = torch.as_tensor(prefix_ids, dtype=torch.long, device=eng.dev)[None]
        cap = _Capture()
        with eng._oom("forward"), _using(cap):
            # Only the keys and values are wanted: one logit is the least
            # the model computes.
            eng.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False,
                      logits_to_keep=1, **self._kwargs(ids))
        return cap.kv

    def _suffix_losses(self, batch, P, leaves, div):
        """One forward and backward of the batch's suffixes against the
        prefix's leaves; their losses (not divided)."""
        eng = self.eng
        torch = eng.torch
        F = torch.nn.functional
        fulls = [torch.as_tensor(ex["input_ids"], dtype=torch.long, device=eng.dev) for ex in batch]
        ns = [int(ex["response_len"]) for ex in batch]
        lens = [f.shape[0] - P for f in fulls]
        S = max(lens)
        # Left padding (token 0; no query sees it): every row's answer ends
        # at the last position, so logits_to_keep covers all of them.
        ids = torch.zeros((len(batch), S), dtype=torch.long, device=eng.dev)
        for b, f in enumerate(fulls):
            ids[b, S - lens[b]:] = f[P:]
        dtype = leaves[min(leaves)][0].dtype
        m, pos = masks(eng.model, P, lens, eng.attn, dtype, eng.dev)
        kw = self._kwargs(ids)
        if eng.logits_response_only:
            kw["logits_to_keep"] = max(ns) + 1
        sfx = _Suffix(leaves)
        with _using(sfx):
            with eng._oom("forward"):
                out = eng.model(input_ids=ids, attention_mask=m, position_ids=pos, use_cache=False, **kw)
                losses = []
                for b, (f, n) in enumerate(zip(fulls, ns)):
                    pred = out.logits[b, -(n + 1):-1, :].float()
                    losses.append(F.cross_entropy(pred, f[f.shape[0] - n:]))
                    del pred
                del out
                total = torch.stack(losses).sum()
            with eng._oom("backward"):
                (total / div).backward()
        return [float(x.detach()) for x in losses]

    def group(self, P, members, div):
        """Forward and backward of one group's examples; their losses."""
        eng = self.eng
        torch = eng.torch
        kv = self._prefix(members[0]["input_ids"][:P])
        layers = sorted(kv)
        # The leaves share the keys' and values' storage (no copy): the
        # prefix's kept state is its keys and values once, plus their
        # gradient sums in the compute dtype.  (float32 leaves, a copy and
        # float32 sums, measured no closer to the plain loop in bfloat16:
        # the differences are the suffix's own roundings.)
        leaves = {i: tuple(t.detach().requires_grad_(True) for t in kv[i]) for i in layers}
        B = self.eng.suffix_batch
        losses = []
        for i in range(0, len(members), B):
            losses += self._suffix_losses(members[i:i + B], P, leaves, div)
        outs, grads = [], []
        for i in layers:
            for t, leaf in zip(kv[i], leaves[i]):
                if leaf.grad is not None:
                    outs.append(t)
                    grads.append(leaf.grad.to(t.dtype))
        del leaves
        with eng._oom("backward"), _using(_Capture()):
            if outs:
                torch.autograd.backward(outs, grads)
        return losses

    def accumulate(self, exs, div):
        """The step's per-example losses (not divided), in exs's order; the
        gradients of sum(loss_i) / div accumulated in the parameters."""
        shared, plain = plan_step(exs)
        got = {}
        for P, members in shared:
            for ex, loss in zip(members, self.group(P, members, div)):
                got[id(ex)] = loss
        for ex in plain:
            loss = self.eng.loss(ex)
            self.eng.backward(loss / div)
            got[id(ex)] = float(loss.detach())
        return [got[id(ex)] for ex in exs]
