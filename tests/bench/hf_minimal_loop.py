"""hf_minimal_loop.py: the peer of tests/bench/hf-step-bench.sh: the
training loop written the shortest way with plain transformers + PEFT +
bitsandbytes on the CPU, with the settings the bench gives jobs/train.py
(nf4 double quant, bf16 compute, prepare_model_for_kbit_training with
non-reentrant checkpointing, LoRA on the seven targets, bf16 lm_head,
token_type_ids, logits_to_keep, 8-bit AdamW, linear warmup, clipping, the
same tokens in the same order; with load_in_4bit false in the config, the
base in float32 unquantized, plain non-reentrant checkpointing, no bf16
cast of a tied head, and optim adamw_torch as the config says).  No events, no checkpoints, no
determinism settings beyond the thread count (--deterministic adds
torch.use_deterministic_algorithms(True), which the engine sets on the CPU
for its bit-identical resume).  Prints one JSON line:
{"step_s": [seconds of each optimizer step, in order], "cpu_s": [its CPU seconds],
"peak_rss_mb": the process's peak resident set}.

    PYENV_PYTHON hf_minimal_loop.py CONFIG.json [--deterministic]
"""

import json
import math
import sys
import time

import numpy as np
import torch


def main(path, deterministic=False):
    import bitsandbytes as bnb
    import peft
    import transformers
    c = json.load(open(path))
    torch.set_num_threads(int(c.get("threads", 1)))
    if deterministic:
        torch.use_deterministic_algorithms(True)
    torch.manual_seed(c["seed"])
    d = np.load(c["tokens"], allow_pickle=False)
    # tokens.npz (pipeline-job(7)): every example's ids back to back.
    ids, off, resp = d["input_ids"], d["offsets"], d["response_len"]
    exs = [(ids[off[i]:off[i + 1]], int(resp[i])) for i in range(len(resp))]
    four = c.get("load_in_4bit", True)
    if four:
        q = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                            bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            c["base"], quantization_config=q, device_map={"": "cpu"}, dtype=torch.bfloat16,
            attn_implementation="sdpa")
        model.config.use_cache = False
        model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=True,
                                                     gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        # Unquantized in float32 (the real base's setting): plain
        # non-reentrant checkpointing; the tied head stays float32.
        model = transformers.AutoModelForCausalLM.from_pretrained(
            c["base"], device_map={"": "cpu"}, dtype=torch.float32, attn_implementation="sdpa")
        model.config.use_cache = False
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = peft.get_peft_model(model, peft.LoraConfig(
        r=c["lora_r"], lora_alpha=c["lora_alpha"], lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
    if four:
        model.get_output_embeddings().to(torch.bfloat16)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    if c.get("optim", "paged_adamw_8bit") == "adamw_torch":
        opt = torch.optim.AdamW(params, lr=c["learning_rate"], weight_decay=0.01)
    else:
        opt = bnb.optim.PagedAdamW8bit(params, lr=c["learning_rate"], weight_decay=0.01)
    accum, steps, warm = c["gradient_accumulation_steps"], c["max_steps"], c["warmup_steps"]
    per_epoch = int(math.ceil(len(exs) / float(accum)))
    times, cpu = [], []
    for s in range(1, steps + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        e, j = divmod(s - 1, per_epoch)
        perm = np.random.default_rng([c["seed"], e]).permutation(len(exs))
        batch = perm[j * accum:(j + 1) * accum]
        i = s - 1
        lr = c["learning_rate"] * (i / max(1, warm) if i < warm else max(0.0, (steps - i) / max(1, steps - warm)))
        for g in opt.param_groups:
            g["lr"] = lr
        for k in batch:
            x, n = exs[k]
            t = torch.as_tensor(x, dtype=torch.long)[None]
            out = model(input_ids=t, attention_mask=torch.ones_like(t), token_type_ids=torch.zeros_like(t),
                        logits_to_keep=n + 1, use_cache=False)
            loss = torch.nn.functional.cross_entropy(out.logits[0, -(n + 1):-1, :].float(), t[0, -n:])
            (loss / len(batch)).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"step_s": times, "cpu_s": cpu, "peak_rss_mb": peak}))


if __name__ == "__main__":
    main(sys.argv[1], "--deterministic" in sys.argv[2:])
