/*
 * trainkeys.h: the training recipe's keys, shared by the probe and train
 * stages so that the probe measures exactly the configuration train will
 * run. Each is passed to the job program (jobs/probe.py, jobs/train.py and
 * their engines) in its CONFIG.json; the defaults are the recipe's
 * (HACKING.md: The training recipe) and match the job programs' own.
 */
#ifndef PL_TRAINKEYS_H
#define PL_TRAINKEYS_H

#define PL_TRAIN_RECIPE_KEYS                                                   \
	{ "engine", PL_KEY_STRING, "hf", 0, NULL,                              \
	  "hf (transformers + peft + bitsandbytes QLoRA) or tiny (CPU)" },     \
	{ "base", PL_KEY_PATH, NULL, PL_KEY_REQUIRED | PL_KEY_DIR, NULL,       \
	  "the base model directory" },                                        \
	{ "tokens", PL_KEY_INPUT, NULL, PL_KEY_REQUIRED, "tokens",             \
	  "the token file from tokenize (default: its tokens artifact)" },     \
	{ "output_dir", PL_KEY_PATH, NULL, 0, NULL,                            \
	  "where outputs go (default: the job's work directory)" },            \
	{ "num_train_epochs", PL_KEY_INT, "3", 0, NULL, "epochs" },            \
	{ "max_steps", PL_KEY_INT, "0", 0, NULL,                               \
	  "stop after this many optimizer steps (0: the epochs decide)" },     \
	{ "learning_rate", PL_KEY_FLOAT, "0.0002", 0, NULL, "peak learning rate" }, \
	{ "lr_scheduler_type", PL_KEY_STRING, "linear", 0, NULL,               \
	  "learning-rate schedule (linear)" },                                 \
	{ "warmup_steps", PL_KEY_INT, "5", 0, NULL, "linear warmup steps" },   \
	{ "gradient_accumulation_steps", PL_KEY_INT, "8", 0, NULL,             \
	  "micro-steps per optimizer step" },                                  \
	{ "per_device_train_batch_size", PL_KEY_INT, "1", 0, NULL,             \
	  "examples per micro-step (1)" },                                     \
	{ "weight_decay", PL_KEY_FLOAT, "0.01", 0, NULL, "AdamW weight decay" }, \
	{ "max_grad_norm", PL_KEY_FLOAT, "1.0", 0, NULL,                       \
	  "gradient clipping norm (0: none)" },                                \
	{ "adam_beta1", PL_KEY_FLOAT, "0.9", 0, NULL, "AdamW beta1" },         \
	{ "adam_beta2", PL_KEY_FLOAT, "0.999", 0, NULL, "AdamW beta2" },       \
	{ "adam_epsilon", PL_KEY_FLOAT, "1e-8", 0, NULL, "AdamW epsilon" },    \
	{ "seed", PL_KEY_INT, "3407", 0, NULL, "the seed" },                   \
	{ "lora_r", PL_KEY_INT, "112", PL_KEY_MIN, NULL, "LoRA rank", 1, 0 },                 \
	{ "lora_alpha", PL_KEY_FLOAT, NULL, 0, NULL,                           \
	  "LoRA alpha (default: lora_r, scale 1.0)" },                         \
	{ "lora_dropout", PL_KEY_FLOAT, "0", 0, NULL, "LoRA dropout" },        \
	{ "use_rslora", PL_KEY_BOOL, "no", 0, NULL, "rank-stabilised LoRA" },  \
	{ "logits_to_keep", PL_KEY_BOOL, "yes", 0, NULL,                       \
	  "compute logits only for the response span" },                       \
	{ "threads", PL_KEY_INT, "1", 0, NULL,                                 \
	  "CPU threads of the job (part of the tiny engine's determinism)" },  \
	{ "gpu_capacity_mb", PL_KEY_FLOAT, "0", 0, NULL,                       \
	  "tiny engine: the GPU-memory stand-in's card size in MB (0: none)" }, \
	{ "load_in_4bit", PL_KEY_BOOL, "yes", 0, NULL,                        \
	  "hf: load the base in 4 bits (QLoRA)" },                             \
	{ "bnb_4bit_quant_type", PL_KEY_STRING, "nf4", 0, NULL,                \
	  "hf: nf4 or fp4" },                                                  \
	{ "bnb_4bit_use_double_quant", PL_KEY_BOOL, "yes", 0, NULL,            \
	  "hf: double quantization" },                                         \
	{ "bnb_4bit_compute_dtype", PL_KEY_STRING, "bfloat16", 0, NULL,        \
	  "hf: bfloat16, float16 or float32" },                                \
	{ "gradient_checkpointing", PL_KEY_BOOL, "yes", 0, NULL,               \
	  "hf: gradient checkpointing (non-reentrant)" },                      \
	{ "attn_implementation", PL_KEY_STRING, "sdpa", 0, NULL,               \
	  "hf: sdpa, eager or flash_attention_2" },                            \
	{ "lm_head_bf16", PL_KEY_BOOL, "yes", 0, NULL,                         \
	  "hf: cast lm_head to bf16 after get_peft_model" },                   \
	{ "mlp_chunk", PL_KEY_INT, "2048", 0, NULL,                            \
	  "hf: run the MLP over slices of this many tokens (0: off)" },        \
	{ "save_on_cpu", PL_KEY_BOOL, "yes", 0, NULL,                          \
	  "hf: offload saved activations to host memory" },                    \
	{ "pin_memory", PL_KEY_BOOL, "yes", 0, NULL,                           \
	  "hf: pin that host memory" },                                        \
	{ "token_type_ids", PL_KEY_BOOL, "yes", 0, NULL,                       \
	  "hf: pass all-zero token_type_ids" },                                \
	{ "optim", PL_KEY_STRING, "paged_adamw_8bit", 0, NULL,                 \
	  "hf: paged_adamw_8bit or adamw_torch" },                             \
	{ "cuda_device", PL_KEY_INT, "0", 0, NULL,                             \
	  "hf: the CUDA device index" },                                       \
	{ "device", PL_KEY_STRING, "cuda", 0, NULL,                            \
	  "hf: cuda, or cpu (the same recipe on the CPU, deterministic)" },    \
	{ "expandable_segments", PL_KEY_BOOL, "no", 0, NULL,                   \
	  "hf: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" },            \
	{ "shared_prefix", PL_KEY_STRING, "auto", 0, NULL,                     \
	  "hf: train a step's shared prompt prefix once: auto, yes or no" },   \
	{ "oom_at_step", PL_KEY_INT, "0", PL_KEY_HIDDEN, NULL,                 \
	  "test only: the tiny engine fails like a CUDA OOM at this step" },   \
	{ "python", PL_KEY_STRING, NULL, 0, NULL,                              \
	  "the Python interpreter (default: daemon.python, else /usr/bin/python3)" }, \
	{ "jobs_dir", PL_KEY_PATH, NULL, 0, NULL,                              \
	  "the directory of the job programs (default: daemon.jobs_dir)" }

/* The checks of the recipe keys both stages make in their check hooks. */
static inline void
trainkeys_check(const struct pl_host *h, pl_job *job)
{
	const char *d = h->get(job, "device");

	if (d != NULL && strcmp(d, "cuda") != 0 && strcmp(d, "cpu") != 0)
		h->check_error(job, "device", "\"%s\" is not cuda or cpu", d);
	d = h->get(job, "shared_prefix");
	if (d != NULL && strcmp(d, "auto") != 0 && strcmp(d, "yes") != 0 &&
	    strcmp(d, "no") != 0)
		h->check_error(job, "shared_prefix", "\"%s\" is not auto, yes or no", d);
	if (h->get_int(job, "lora_r", 112) < 1)
		h->check_error(job, "lora_r", "must be at least 1");
	if (h->get_int(job, "threads", 1) < 1)
		h->check_error(job, "threads", "must be at least 1");
}

#endif
