"""pljob.keys: the key tables of the stages whose work is a job program
(train, probe, tokenize) as their plugins declare them; GENERATED from
the built plugins by tests/tools/gen-jobkeys.sh (make jobkeys), do not
edit (train/job-keys checks it).  pljob.protocol.Config reads every key
of train.py, probe.py and tokenize_corpus.py here: each is a K of the
key's type (pipeline.ini(5)), its default's text, its bounds (PL_KEY_MIN,
PL_KEY_MAX), its choices, and whether a checkpoint records it
(PL_KEY_CHECKPOINT: train.py's configuration digest)."""

import collections

K = collections.namedtuple("K", "type default min max choices checkpoint")

COMMON = {
    "engine": K("string", "hf", None, None, ("tiny", "hf"), True),
    "base": K("path", None, None, None, None, False),
    "tokens": K("input", None, None, None, None, False),
    "output_dir": K("path", None, None, None, None, False),
    "num_train_epochs": K("int", "3", 0, None, None, True),
    "max_steps": K("int", "0", 0, None, None, True),
    "learning_rate": K("float", "0.0002", 0, None, None, True),
    "lr_scheduler_type": K("string", "linear", None, None, ("linear",), False),
    "warmup_steps": K("int", "5", 0, None, None, True),
    "gradient_accumulation_steps": K("int", "8", 1, None, None, True),
    "per_device_train_batch_size": K("int", "1", 1, 1, None, False),
    "weight_decay": K("float", "0.01", 0, None, None, True),
    "max_grad_norm": K("float", "1.0", 0, None, None, True),
    "adam_beta1": K("float", "0.9", 0, 1, None, True),
    "adam_beta2": K("float", "0.999", 0, 1, None, True),
    "adam_epsilon": K("float", "1e-8", 0, None, None, True),
    "seed": K("int", "3407", None, None, None, True),
    "lora_r": K("int", "112", 1, None, None, True),
    "lora_alpha": K("float", None, 0, None, None, True),
    "lora_dropout": K("float", "0", 0, 1, None, True),
    "use_rslora": K("bool", "no", None, None, None, True),
    "logits_to_keep": K("bool", "yes", None, None, None, True),
    "threads": K("int", "1", 1, None, None, True),
    "gpu_capacity_mb": K("float", "0", 0, None, None, False),
    "load_in_4bit": K("bool", "yes", None, None, None, True),
    "bnb_4bit_quant_type": K("string", "nf4", None, None, ("nf4", "fp4"), True),
    "bnb_4bit_use_double_quant": K("bool", "yes", None, None, None, True),
    "bnb_4bit_compute_dtype": K("string", "bfloat16", None, None, ("bfloat16", "float16", "float32"), True),
    "dtype": K("string", "bfloat16", None, None, ("auto", "float32", "bfloat16", "float16"), True),
    "gradient_checkpointing": K("bool", "yes", None, None, None, False),
    "attn_implementation": K("string", "sdpa", None, None, ("sdpa", "eager", "flash_attention_2"), False),
    "lm_head_bf16": K("bool", "yes", None, None, None, False),
    "mlp_chunk": K("int", "2048", 0, None, None, False),
    "save_on_cpu": K("bool", "yes", None, None, None, False),
    "pin_memory": K("bool", "yes", None, None, None, False),
    "token_type_ids": K("bool", "yes", None, None, None, False),
    "optim": K("string", "paged_adamw_8bit", None, None, ("paged_adamw_8bit", "adamw_torch"), True),
    "cuda_device": K("int", "0", 0, None, None, False),
    "device": K("string", "cuda", None, None, ("cuda", "cpu"), True),
    "expandable_segments": K("bool", "no", None, None, None, False),
    "shared_prefix": K("string", "auto", None, None, ("auto", "yes", "no"), False),
    "suffix_batch": K("int", "1", 1, None, None, False),
    "oom_at_step": K("int", "0", 0, None, None, False),
    "python": K("string", None, None, None, None, False),
    "jobs_dir": K("path", None, None, None, None, False),
    "gpu": K("string", None, None, None, None, False),
    "recipe": K("string", None, None, None, None, False),
}

TRAIN = dict(COMMON, **{
    "save_steps": K("int", "25", 0, None, None, False),
    "test_stall_at_step": K("int", "0", None, None, None, False),
    "resume": K("bool", "yes", None, None, None, False),
    "ollama_url": K("string", "", None, None, None, False),
    "keep_loaded": K("list", "", None, None, None, False),
    "embedding_model": K("string", "", None, None, None, False),
    "unload_wait": K("duration", "30", None, None, None, False),
    "launch_retries": K("int", "15", 0, None, None, False),
    "launch_backoff": K("duration", "5", None, None, None, False),
    "launch_backoff_max": K("duration", "60", None, None, None, False),
    "max_resumes": K("int", "10", 0, None, None, False),
    "evict_during_training": K("bool", "no", None, None, None, False),
    "watch_interval": K("duration", "2", None, None, None, False),
    "probe_job": K("string", "probe", None, None, None, False),
    "probe_mb": K("float", None, None, None, None, False),
})

PROBE = dict(COMMON, **{
    "example_key": K("string", None, None, None, None, False),
    "budget_mb": K("float", None, None, None, None, False),
    "margin_mb": K("float", "256", 0, None, None, False),
    "over_estimate": K("float", "4.7", None, None, None, False),
    "calibration_pairs": K("int", "5", 0, None, None, False),
    "mb_per_rank": K("float", "15", None, None, None, False),
    "prune": K("bool", "no", None, None, None, False),
    "fits_if": K("string", None, None, None, None, False),
    "host_mem_cap": K("string", "12G", None, None, None, False),
})

TOKENIZE = {
    "base": K("path", None, None, None, None, False),
    "corpus": K("input", None, None, None, None, False),
    "max_seq_length": K("int", "8192", 2, None, None, False),
    "num_ctx": K("int", "9216", 1, None, None, False),
    "num_ctx_margin": K("int", "256", 0, None, None, False),
    "output_dir": K("path", None, None, None, None, False),
    "add_special_tokens": K("bool", "no", None, None, None, False),
    "chat_template": K("path", None, None, None, None, False),
    "end_of_turn": K("string", "<end_of_turn>", None, None, None, False),
    "tokenizer": K("string", "auto", None, None, ("auto", "sentencepiece", "hf"), False),
    "threads": K("int", "2", 1, None, None, False),
    "python": K("string", None, None, None, None, False),
    "jobs_dir": K("path", None, None, None, None, False),
}

STAGES = {"train": TRAIN, "probe": PROBE, "tokenize": TOKENIZE}
