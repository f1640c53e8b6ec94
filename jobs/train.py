#!/usr/bin/python3
"""train.py: the LoRA training loop (stage `train`, pipeline-job(7)).

    /usr/bin/python3 jobs/train.py --config CONFIG.json [--events FILE]
                                   [--resume-from CHECKPOINT]

The loop is the engine's (config key engine: tiny or hf; jobs/engines/):
AdamW (paged_adamw_8bit on hf), the linear schedule with warmup of
transformers' get_linear_schedule_with_warmup (the first optimizer step runs
at lr 0 when warmup_steps > 0, as there), gradient accumulation, gradient
clipping, the seed.  Batch size is one example per micro-step (the recipe's
per_device_train_batch_size 1).

Data order: epoch e visits the examples in the permutation drawn by
numpy.random.default_rng([seed, e]); optimizer step s (1-based) covers the
gradient_accumulation_steps examples after the first
(s - 1 - e * steps_per_epoch) * gradient_accumulation_steps of that epoch.
The data position is therefore the step alone, and a resumed run sees the
same examples in the same order.

Resume: with $PL_RESUME_FROM (or --resume-from) naming a checkpoint
directory, the adapter, optimizer, scheduler and RNG states are restored
from it after its COMPLETE marker verifies, and the loop continues at the
next step; the result is bit-identical to an uninterrupted run's (on the CPU:
torch.use_deterministic_algorithms and a fixed thread count).  A checkpoint
whose recorded configuration differs in a key that changes the result is
refused (exit 2).  Without it the run starts from step 0; the program never
picks a checkpoint by itself: that is the daemon's decision.

The stack: the run records the interpreter's ML stack (pljob.this_stack():
the lock of a tests/tools/pyenv.sh environment and its digest, the versions
of torch, transformers, peft, bitsandbytes and accelerate) as the event
stack, and it is part of the configuration digest: a checkpoint made on
one stack is refused by a resume on another (exit 2, both named).

Checkpoints: $PL_WORKDIR/checkpoints/checkpoint-STEP/ every save_steps
steps (not after the last step, which writes the adapter instead): adapter
(adapter_config.json, adapter_model.safetensors), optimizer.pt,
scheduler.json, rng.pt (python, numpy, torch states), trainer_state.json
(step, epoch, data position, configuration digest, loss so far), then
COMPLETE, last.

Events: started; stack {stack, lock, lock_sha256, python, torch,
transformers, peft, bitsandbytes, accelerate} (null where absent); loop_started {step} just before the first optimizer step of
this process (the daemon treats a death before it as a launch failure and
after it as a mid-run death to resume); per optimizer step, metrics loss,
lr, grad_norm, peak_mb, step_cpu_s and step_wall_s (the process's CPU
seconds and the wall seconds of the step's forwards and backwards) and, with shared prefixes, prefix_speedup (the
step's predicted speed-up from its token counts); shared_prefix {on, why,
predicted_ratio, predicted_speedup} before the loop; and progress {step, total}; checkpoint {step,
path}; at the end memory {peak_mb, pre_step_mb} (the run's real peak, for
the probe calibration), artifact adapter, done.  An out-of-memory is an oom
event {phase, mb, capacity_mb} and exit status 3.

Config keys (CONFIG.json): the train stage's, described with their
defaults, bounds and choices in pipeline.ini(5) (its train section, and
`pipelinectl stage train --help`); read through the stage's key table,
jobs/pljob/keys.py, generated from the plugin's C table, which is their one
definition.  The keys a checkpoint records (PL_KEY_CHECKPOINT) make the
configuration digest (config_digest()); shared_prefix, for one, is not
among them, so a run resumes across it.
"""

import json
import hashlib
import math
import os
import sys
import time

import pljob

class Schedule:
    """Linear warmup then linear decay to 0 over total steps: the factor of
    transformers' get_linear_schedule_with_warmup at optimizer step index
    i (0-based)."""

    def __init__(self, base_lr, warmup, total):
        self.base_lr, self.warmup, self.total = base_lr, warmup, total

    def lr(self, i):
        if i < self.warmup:
            return self.base_lr * float(i) / float(max(1, self.warmup))
        return self.base_lr * max(0.0, float(self.total - i) / float(max(1, self.total - self.warmup)))

    def state(self, i):
        return {"kind": "linear", "base_lr": self.base_lr, "warmup_steps": self.warmup,
                "total_steps": self.total, "next_index": i}


class Plan:
    """Which examples each optimizer step sees (see the module docstring)."""

    def __init__(self, n, accum, epochs, max_steps, seed):
        import numpy as np
        self.np = np
        self.n, self.accum, self.seed = n, accum, seed
        self.steps_per_epoch = int(math.ceil(n / float(accum)))
        # max_steps overrides the epochs, as in transformers: the data goes
        # round again (a fresh permutation per epoch) or stops part-way.
        self.total = max_steps if max_steps else self.steps_per_epoch * epochs
        self._perm = {}

    def perm(self, e):
        if e not in self._perm:
            self._perm[e] = self.np.random.default_rng([self.seed, e]).permutation(self.n)
        return self._perm[e]

    def batch(self, s):
        e, j = divmod(s - 1, self.steps_per_epoch)
        p = self.perm(e)
        return e, [int(x) for x in p[j * self.accum:min((j + 1) * self.accum, self.n)]]


def stack_key(st):
    """The part of a stack (pljob.this_stack()) that a resume must match:
    the lock and its digest, and the versions of the packages the result
    depends on, as the interpreter has them (an interpreter without a lock
    is its versions alone).  Not Python's own version: a point release of
    the system's python3 under a virtual environment changes no number."""
    return {k: st.get(k) for k in ("stack", "lock", "lock_sha256", "torch", "transformers",
                                   "peft", "bitsandbytes", "accelerate")}


def config_digest(cfg, tokens_sha, stack):
    """A digest of everything that changes the result, as this program
    reads it (typed, defaults applied, so "25" and 25 agree): every key of
    the train stage's table with PL_KEY_CHECKPOINT (pljob.keys: the C
    table, pipeline.ini(5)), with the token file's sha256 and the stack the
    run trains on (stack_key()): another torch, transformers, PEFT or
    bitsandbytes changes the numbers, so a resume on another stack is
    refused, not continued.  The digest is the sha256 of the JSON of these
    keys' values by name, sorted: a key given the flag changes the digest
    of every checkpoint made before (HACKING.md: The plugin ABI in brief)."""
    d = {k: cfg.value(k) for k, ent in cfg.keys.items() if ent.checkpoint}
    if d.get("lora_alpha") is None:
        # The one key whose default is another key's value (lora_r's).
        d["lora_alpha"] = cfg.float("lora_alpha", float(d["lora_r"]))
    d["tokens_sha256"] = tokens_sha
    d["stack"] = stack_key(stack)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest(), d


def body(job):
    import torch
    import engines
    cfg, ev = job.cfg, job.events
    engine_name = cfg.choice("engine")
    tokens = cfg.path_in("tokens")
    outdir = cfg.str("output_dir", job.workdir)
    epochs = cfg.int("num_train_epochs")
    max_steps = cfg.int("max_steps")
    accum = cfg.int("gradient_accumulation_steps")
    cfg.int("per_device_train_batch_size")  # 1, the table's only value
    cfg.choice("lr_scheduler_type")
    warmup = cfg.int("warmup_steps")
    max_grad_norm = cfg.float("max_grad_norm")
    seed = cfg.int("seed")
    save_steps = cfg.int("save_steps")
    stall_at = cfg.int("test_stall_at_step")
    if not epochs and not max_steps:
        raise pljob.BadInput("%s: num_train_epochs and max_steps are both 0" % cfg.path)

    ev.started(engine=engine_name, attempt=job.attempt)
    # The stack this process trains on, read from the interpreter before
    # anything of it loads: recorded (the stage stores it as the value
    # "stack") and part of the configuration digest.
    stack = pljob.this_stack()
    ev.emit("stack", **stack)
    print("train: stack: %s" % pljob.describe_stack(stack), file=sys.stderr)
    examples = pljob.load_tokens(tokens)
    tokens_sha = pljob.sha256_file(tokens)
    digest, digest_keys = config_digest(cfg, tokens_sha, stack)
    plan = Plan(len(examples), accum, epochs, max_steps, seed)
    sched = Schedule(cfg.float("learning_rate"), warmup, plan.total)

    pljob.seed_everything(seed)
    eng = engines.get(engine_name)(cfg, ev)
    eng.load()
    shared = shared_prefix_setup(eng, examples, plan, ev)
    params = eng.parameters()
    opt = eng.make_optimizer()
    start = 0
    losses = {}
    if job.resume_from:
        start, losses = resume(job.resume_from, eng, opt, digest, digest_keys, plan)
        ev.emit("resumed", step=start, path=os.path.abspath(job.resume_from))
    root = job.checkpoint_dir()
    pljob.sweep_checkpoints(root, log=lambda m: print(m, file=sys.stderr))
    run_peak = 0.0
    # In use before this process's first forward, as the probe reports it.
    pre_step = eng.pre_step_mb()
    ev.emit("loop_started", step=start + 1, total=plan.total)
    for s in range(start + 1, plan.total + 1):
        eng.reset_peak()
        epoch, idx = plan.batch(s)
        lr = sched.lr(s - 1)
        for g in opt.param_groups:
            g["lr"] = lr
        total_loss = 0.0
        t0, w0 = time.process_time(), time.monotonic()
        with eng.train_context():
            got = eng.accumulate([examples[i] for i in idx], len(idx)) if shared else None
            if got is not None:
                total_loss = sum(float(x) / len(idx) for x in got)
            else:
                for i in idx:
                    loss = eng.loss(examples[i]) / len(idx)
                    eng.backward(loss)
                    total_loss += float(loss.detach())
        cpu_s, wall_s = time.process_time() - t0, time.monotonic() - w0
        if max_grad_norm > 0:
            gn = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
        else:
            gn = float(torch.norm(torch.stack([p.grad.detach().norm() for p in params if p.grad is not None])))
        eng.before_step(s)
        eng.step(opt)
        opt.zero_grad(set_to_none=True)
        eng.after_step()
        peak = eng.peak_mb()
        run_peak = max(run_peak, peak)
        losses[s] = total_loss
        ev.metric("loss", s, total_loss)
        ev.metric("lr", s, lr)
        ev.metric("grad_norm", s, gn)
        ev.metric("peak_mb", s, peak)
        ev.metric("step_cpu_s", s, cpu_s)
        ev.metric("step_wall_s", s, wall_s)
        if shared:
            ev.metric("prefix_speedup", s, shared[s])
        ev.progress(s, plan.total, epoch=epoch)
        if save_steps and s % save_steps == 0 and s < plan.total:
            path = save(root, s, eng, opt, sched, plan, digest, digest_keys, losses)
            ev.checkpoint(s, path)
        if stall_at and s == stall_at:
            # Test-only: hold here so a test can kill -9 at a known step.
            while True:
                time.sleep(3600)
    os.makedirs(outdir, exist_ok=True)
    ident = cfg.data.get("base_identity")

    def build(d):
        eng.save_adapter(d)
        # Ours, beside PEFT's files (PEFT ignores it): the base's identity
        # as the train stage computed it, which merge checks its base against.
        if isinstance(ident, dict):
            pljob.write_file(os.path.join(d, "pipeline-base.json"),
                             (json.dumps(ident, sort_keys=True) + "\n").encode())
    adapter = pljob.atomic_dir(os.path.join(outdir, "adapter"), build)
    ev.emit("memory", peak_mb=round(run_peak, 1), pre_step_mb=round(pre_step, 1),
            capacity_mb=round(eng.capacity_mb(), 1))
    ev.artifact("adapter", adapter)
    # The mean over every step of every segment (G30: not only this
    # process's), from the losses carried in the checkpoints.
    ev.done(steps=plan.total, train_loss=sum(losses.values()) / max(1, len(losses)))


def shared_prefix_setup(eng, examples, plan, ev):
    """{step: predicted speed-up} when the engine trains shared prefixes
    once per step (engine hf, key shared_prefix), else None.  The speed-up
    is the step's tokens as the plain loop runs them over the tokens run
    with the prefixes shared: a prediction from token counts (attention's
    quadratic part and the per-call overheads aside), printed and sent as
    the metric prefix_speedup of each step."""
    from engines import prefix
    if not eng.SHARED_PREFIX:
        return None
    on, why = eng.shared_setup(examples)
    if not on:
        print("train: shared prefix: off: %s" % why, file=sys.stderr)
        ev.emit("shared_prefix", on=False, why=why)
        return None
    out = {}
    plain = run = 0
    for s in range(1, plan.total + 1):
        _, idx = plan.batch(s)
        p, r = prefix.step_tokens([examples[i] for i in idx])
        out[s] = p / float(max(1, r))
        plain += p
        run += r
    ratio = run / float(max(1, plain))
    msg = ("train: shared prefix: on: %s; per step the run forwards %.3fx of the plain loop's tokens "
           "(predicted speed-up %.2fx)" % (why, ratio, 1.0 / max(ratio, 1e-9)))
    print(msg, file=sys.stderr)
    ev.emit("shared_prefix", on=True, why=why, predicted_ratio=round(ratio, 4),
            predicted_speedup=round(1.0 / max(ratio, 1e-9), 3))
    return out


def save(root, step, eng, opt, sched, plan, digest, digest_keys, losses):
    import torch

    def build(d):
        eng.save_adapter(d)
        torch.save(opt.state_dict(), os.path.join(d, "optimizer.pt"))
        pljob.write_file(os.path.join(d, "scheduler.json"),
                         (json.dumps(sched.state(step), sort_keys=True) + "\n").encode())
        torch.save(pljob.rng_state(), os.path.join(d, "rng.pt"))
        epoch, _ = plan.batch(step)
        st = {"step": step, "epoch": epoch, "total_steps": plan.total,
              "data_position": {"epoch": epoch, "examples_seen_in_epoch":
                                min((step - epoch * plan.steps_per_epoch) * plan.accum, plan.n)},
              "config_digest": digest, "config": digest_keys,
              "loss": {str(k): v for k, v in sorted(losses.items())}}
        pljob.write_file(os.path.join(d, "trainer_state.json"), (json.dumps(st, indent=1) + "\n").encode())
    return pljob.save_checkpoint(root, step, build)


def resume(path, eng, opt, digest, digest_keys, plan):
    import torch
    why = pljob.verify_checkpoint(path)
    if why:
        raise pljob.BadInput("resume from %s: not a complete checkpoint: %s" % (path, why))
    with open(os.path.join(path, "trainer_state.json")) as f:
        st = json.load(f)
    if st.get("config_digest") != digest:
        old = st.get("config") or {}
        diff = sorted(k for k in set(old) | set(digest_keys) if old.get(k) != digest_keys.get(k))
        if diff == ["stack"]:
            was = old.get("stack")
            raise pljob.BadInput("resume from %s: the checkpoint was made on another stack: %s; this "
                                 "resume would run on %s (a run resumes on the stack it started on: "
                                 "the stage's python key, PYSTACK)"
                                 % (path, pljob.describe_stack(was) if isinstance(was, dict)
                                    else "one not recorded (a checkpoint of an older train.py)",
                                    pljob.describe_stack(digest_keys["stack"])))
        raise pljob.BadInput("resume from %s: the checkpoint was made with a different configuration "
                             "(%s)" % (path, ", ".join(diff) or "digest differs"))
    step = int(st["step"])
    if step >= plan.total:
        raise pljob.BadInput("resume from %s: step %d is not before the last step %d" % (path, step, plan.total))
    acfg, tensors = pljob.read_adapter_dir(path)
    eng.load_adapter_tensors(tensors, path)
    # Our own files, verified against COMPLETE above: torch >= 2.6 loads
    # weights_only by default, which refuses the RNG states' numpy arrays.
    opt.load_state_dict(torch.load(os.path.join(path, "optimizer.pt"), weights_only=False))
    eng.resumed_optimizer()
    pljob.set_rng_state(torch.load(os.path.join(path, "rng.pt"), weights_only=False))
    losses = {int(k): v for k, v in (st.get("loss") or {}).items()}
    return step, losses


if __name__ == "__main__":
    sys.exit(pljob.main("LoRA training loop (stage train).", body, stage="train"))
