/*
 * trainkeys.h: the training recipe's keys, shared by the probe and train
 * stages so that the probe measures exactly the configuration train will
 * run. Each is passed to the job program (jobs/probe.py, jobs/train.py and
 * their engines) in its CONFIG.json; the defaults are the recipe's
 * (HACKING.md: The training recipe). This table is their one definition,
 * defaults, bounds and choices (checked by the host), and PL_KEY_CHECKPOINT
 * on the keys train.py's checkpoints record: the job programs read it from
 * jobs/pljob/keys.py, generated from the built plugins by make jobkeys
 * (train/job-keys: not stale).
 */
#ifndef PL_TRAINKEYS_H
#define PL_TRAINKEYS_H

#define PL_TRAIN_RECIPE_KEYS                                                            \
	PL_KEY_STRING(.name = "engine", .def = "hf", .flags = PL_KEY_CHECKPOINT,        \
	    .choices = "tiny|hf",                                                       \
	    .help = "hf (transformers + peft + bitsandbytes QLoRA) or tiny (CPU)"),     \
	PL_KEY_PATH(.name = "base", .flags = PL_KEY_REQUIRED | PL_KEY_DIR,              \
	    .help = "the base model directory"),                                        \
	PL_KEY_INPUT(.name = "tokens", .flags = PL_KEY_REQUIRED, .artifact = "tokens",  \
	    .help = "the token file from tokenize (default: its tokens artifact)"),     \
	PL_KEY_PATH(.name = "output_dir",                                               \
	    .help = "where outputs go (default: the job's work directory)"),            \
	PL_KEY_INT(.name = "num_train_epochs", .def = "3",                              \
	    .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN, .min = 0, .help = "epochs"),       \
	PL_KEY_INT(.name = "max_steps", .def = "0",                                     \
	    .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN, .min = 0,                          \
	    .help = "stop after this many optimizer steps (0: the epochs decide)"),     \
	PL_KEY_FLOAT(.name = "learning_rate", .def = "0.0002",                          \
	    .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN, .min = 0,                          \
	    .help = "peak learning rate"),                                              \
	PL_KEY_STRING(.name = "lr_scheduler_type", .def = "linear",                     \
	    .choices = "linear", .help = "learning-rate schedule"),                     \
	PL_KEY_INT(.name = "warmup_steps", .def = "5",                                  \
	    .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN, .min = 0,                          \
	    .help = "linear warmup steps"),                                             \
	PL_KEY_INT(.name = "gradient_accumulation_steps", .def = "8",                   \
	    .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN, .min = 1,                          \
	    .help = "micro-steps per optimizer step"),                                  \
	PL_KEY_INT(.name = "per_device_train_batch_size", .def = "1",                   \
	    .flags = PL_KEY_MIN | PL_KEY_MAX, .min = 1, .max = 1,                       \
	    .help = "examples per micro-step (use gradient_accumulation_steps)"),       \
	PL_KEY_FLOAT(.name = "weight_decay", .def = "0.01",                             \
	    .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN, .min = 0,                          \
	    .help = "AdamW weight decay"),                                              \
	PL_KEY_FLOAT(.name = "max_grad_norm", .def = "1.0",                             \
	    .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN, .min = 0,                          \
	    .help = "gradient clipping norm (0: none)"),                                \
	PL_KEY_FLOAT(.name = "adam_beta1", .def = "0.9",                                \
	    .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN | PL_KEY_MAX, .min = 0, .max = 1,   \
	    .help = "AdamW beta1"),                                                     \
	PL_KEY_FLOAT(.name = "adam_beta2", .def = "0.999",                              \
	    .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN | PL_KEY_MAX, .min = 0, .max = 1,   \
	    .help = "AdamW beta2"),                                                     \
	PL_KEY_FLOAT(.name = "adam_epsilon", .def = "1e-8",                             \
	    .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN, .min = 0,                          \
	    .help = "AdamW epsilon"),                                                   \
	PL_KEY_INT(.name = "seed", .def = "3407", .flags = PL_KEY_CHECKPOINT,           \
	    .help = "the seed"),                                                        \
	PL_KEY_INT(.name = "lora_r", .def = "112",                                      \
	    .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN, .min = 1, .help = "LoRA rank"),    \
	PL_KEY_FLOAT(.name = "lora_alpha", .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN,     \
	    .min = 0, .help = "LoRA alpha (default: lora_r, scale 1.0)"),               \
	PL_KEY_FLOAT(.name = "lora_dropout", .def = "0",                                \
	    .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN | PL_KEY_MAX, .min = 0, .max = 1,   \
	    .help = "LoRA dropout"),                                                    \
	PL_KEY_BOOL(.name = "use_rslora", .def = "no", .flags = PL_KEY_CHECKPOINT,      \
	    .help = "rank-stabilised LoRA"),                                            \
	PL_KEY_BOOL(.name = "logits_to_keep", .def = "yes",                             \
	    .flags = PL_KEY_CHECKPOINT,                                                 \
	    .help = "compute logits only for the response span"),                       \
	PL_KEY_INT(.name = "threads", .def = "1",                                       \
	    .flags = PL_KEY_CHECKPOINT | PL_KEY_MIN, .min = 1,                          \
	    .help = "CPU threads of the job (part of the tiny engine's determinism)"),  \
	PL_KEY_FLOAT(.name = "gpu_capacity_mb", .def = "0", .flags = PL_KEY_MIN,        \
	    .min = 0,                                                                   \
	    .help = "tiny engine: the GPU-memory stand-in's card size in MB (0: none)"), \
	PL_KEY_BOOL(.name = "load_in_4bit", .def = "yes", .flags = PL_KEY_CHECKPOINT,   \
	    .help = "hf: load the base in 4 bits (QLoRA)"),                             \
	PL_KEY_STRING(.name = "bnb_4bit_quant_type", .def = "nf4",                      \
	    .flags = PL_KEY_CHECKPOINT, .choices = "nf4|fp4",                           \
	    .help = "hf: the 4-bit quantization type"),                                 \
	PL_KEY_BOOL(.name = "bnb_4bit_use_double_quant", .def = "yes",                  \
	    .flags = PL_KEY_CHECKPOINT, .help = "hf: double quantization"),             \
	PL_KEY_STRING(.name = "bnb_4bit_compute_dtype", .def = "bfloat16",              \
	    .flags = PL_KEY_CHECKPOINT, .choices = "bfloat16|float16|float32",          \
	    .help = "hf: what the 4-bit layers compute in"),                            \
	PL_KEY_STRING(.name = "dtype", .def = "bfloat16", .flags = PL_KEY_CHECKPOINT,   \
	    .choices = "auto|float32|bfloat16|float16",                                 \
	    .help = "hf: the model's dtype, 4-bit or not"),                             \
	PL_KEY_BOOL(.name = "gradient_checkpointing", .def = "yes",                     \
	    .help = "hf: gradient checkpointing (non-reentrant)"),                      \
	PL_KEY_STRING(.name = "attn_implementation", .def = "sdpa",                     \
	    .choices = "sdpa|eager|flash_attention_2",                                  \
	    .help = "hf: the attention implementation"),                               \
	PL_KEY_BOOL(.name = "lm_head_bf16", .def = "yes",                               \
	    .help = "hf: cast lm_head to bf16 after get_peft_model"),                   \
	PL_KEY_INT(.name = "mlp_chunk", .def = "2048", .flags = PL_KEY_MIN, .min = 0,   \
	    .help = "hf: run the MLP over slices of this many tokens (0: off)"),        \
	PL_KEY_BOOL(.name = "save_on_cpu", .def = "yes",                                \
	    .help = "hf: offload saved activations to host memory"),                    \
	PL_KEY_BOOL(.name = "pin_memory", .def = "yes",                                 \
	    .help = "hf: pin that host memory"),                                        \
	PL_KEY_BOOL(.name = "token_type_ids", .def = "yes",                             \
	    .help = "hf: pass all-zero token_type_ids"),                                \
	PL_KEY_STRING(.name = "optim", .def = "paged_adamw_8bit",                       \
	    .flags = PL_KEY_CHECKPOINT, .choices = "paged_adamw_8bit|adamw_torch",      \
	    .help = "hf: the optimizer"),                                               \
	PL_KEY_INT(.name = "cuda_device", .def = "0", .flags = PL_KEY_MIN, .min = 0,    \
	    .help = "hf: the CUDA device index"),                                       \
	PL_KEY_STRING(.name = "device", .def = "cuda", .flags = PL_KEY_CHECKPOINT,      \
	    .choices = "cuda|cpu",                                                      \
	    .help = "hf: where it runs (cpu: the same recipe, deterministic)"),         \
	PL_KEY_BOOL(.name = "expandable_segments", .def = "no",                         \
	    .help = "hf: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),            \
	PL_KEY_STRING(.name = "shared_prefix", .def = "auto",                           \
	    .choices = "auto|yes|no",                                                   \
	    .help = "hf: train a step's shared prompt prefix once"),                    \
	PL_KEY_INT(.name = "suffix_batch", .def = "1", .flags = PL_KEY_MIN, .min = 1,   \
	    .help = "hf: suffixes run in one forward when shared_prefix is on"),        \
	PL_KEY_INT(.name = "oom_at_step", .def = "0",                                   \
	    .flags = PL_KEY_HIDDEN | PL_KEY_MIN, .min = 0,                              \
	    .help = "test only: the tiny engine fails like a CUDA OOM at this step"),   \
	PL_KEY_STRING(.name = "python",                                                 \
	    .help = "the Python interpreter (default: daemon.python, else "            \
	    "/usr/bin/python3)"),                                                       \
	PL_KEY_PATH(.name = "jobs_dir",                                                 \
	    .help = "the directory of the job programs (default: daemon.jobs_dir)")

/* The checks of the recipe keys both stages make in their check hooks,
 * beyond the bounds and choices of the table, which the host checks. */
static inline void
trainkeys_check(const struct pl_host *h, pl_job *job)
{
	const char *d = h->get(job, "bnb_4bit_compute_dtype");

	/* The 4-bit layers' compute dtype once set the model's dtype too: a
	 * spec that still counts on that would get its model in another
	 * dtype, silently, unless told. (A value not among the key's
	 * choices is the host's to refuse.) */
	if (d != NULL && (strcmp(d, "float16") == 0 || strcmp(d, "float32") == 0) &&
	    !h->get_bool(job, "load_in_4bit", 0)) {
		const char *m = h->get(job, "dtype");
		if (m != NULL && strcmp(m, d) != 0)
			h->check_error(job, "bnb_4bit_compute_dtype", "%s has no effect with "
			    "load_in_4bit = no: the model's dtype is the dtype key (%s); set "
			    "dtype = %s", d, m, d);
	}
}

#endif
