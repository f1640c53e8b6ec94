"""hf_adapter_check.py: does an adapter directory written by the hf engine
load with PEFT's own PeftModel.from_pretrained on its base and give the
trainer's logits?  Real transformers, PEFT and bitsandbytes (the pinned
environment), on the CPU.

    PYENV_PYTHON hf_adapter_check.py TOKENS.npz CONFIG.json ADAPTER_DIR [CONFIG ADAPTER]...

For each pair: the trainer's model is rebuilt by the engine itself
(jobs/engines/hf.py, from the train job's CONFIG.json: the same 4-bit load
or, with load_in_4bit false, the same dtype,
prepare_model_for_kbit_training, LoRA, bf16 lm_head), the adapter's tensors
put in as a resume puts them; PEFT's is
AutoModelForCausalLM.from_pretrained(base, the same BitsAndBytesConfig) +
PeftModel.from_pretrained(ADAPTER_DIR), with the base's non-quantized
layers in float32 and its lm_head (tied to the embedding) in bf16, as the
trainer runs them after prepare_model_for_kbit_training and the recipe's
cast.  Both score the first two examples in eval mode (every position's
logits).  Fails unless the log-softmax is identical at every position and
the adapter changes it (against the trainer's model with the adapter
disabled) by more than 0.01 nats somewhere: an adapter that did nothing,
or one loaded onto the wrong modules, fails.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "jobs"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import pljob  # noqa: E402
from engines import hf  # noqa: E402


def logprobs(model, examples, **kw):
    out = []
    with torch.no_grad():
        for ex in examples:
            ids = torch.as_tensor(np.asarray(ex["input_ids"], dtype=np.int64))[None]
            lg = model(input_ids=ids, attention_mask=torch.ones_like(ids),
                       token_type_ids=torch.zeros_like(ids), use_cache=False, **kw).logits
            out.append(torch.log_softmax(lg[0].double(), dim=-1))
    return out


def check(tokens, config, adapter):
    import peft
    import transformers
    examples = pljob.load_tokens(tokens)[:2]
    with open(config) as f:
        c = json.load(f)
    cfg = pljob.Config(c, config)
    eng = hf.HfEngine(cfg, None)
    eng.load()
    _, tensors = pljob.read_adapter_dir(adapter)
    eng.load_adapter_tensors(tensors, adapter)
    eng.model.eval()
    trainer = logprobs(eng.model, examples)
    with eng.model.disable_adapter():
        bare = logprobs(eng.model, examples)
    del eng

    four = c.get("load_in_4bit", True)
    # The model's dtype (dtype) and the 4-bit layers' (bnb_4bit_compute_dtype).
    mdt = c.get("dtype", "bfloat16")
    dt = mdt if mdt == "auto" else getattr(torch, mdt)
    kw = {}
    if four:
        kw["quantization_config"] = transformers.BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type=c["bnb_4bit_quant_type"],
            bnb_4bit_use_double_quant=c["bnb_4bit_use_double_quant"],
            bnb_4bit_compute_dtype=getattr(torch, c.get("bnb_4bit_compute_dtype", "bfloat16")))
    base = transformers.AutoModelForCausalLM.from_pretrained(
        c["base"], dtype=torch.float32 if four else dt, device_map={"": "cpu"}, **kw)
    head, emb = base.get_output_embeddings(), base.get_input_embeddings()
    tied = head.weight is emb.weight
    if c.get("lm_head_bf16", True) and not (tied and not four and emb.weight.dtype != torch.bfloat16):
        # As the recipe runs it (and the embedding, tied to it); not for
        # a tied head of a model that computes in another dtype.
        head.to(torch.bfloat16)
    model = peft.PeftModel.from_pretrained(base, adapter)
    model.eval()
    theirs = logprobs(model, examples)

    diff = max(float((a - b).abs().max()) for a, b in zip(trainer, theirs))
    effect = max(float((a - b).abs().max()) for a, b in zip(trainer, bare))
    agree = all(bool((a.argmax(-1) == b.argmax(-1)).all()) for a, b in zip(trainer, theirs))
    print("%s (%s): PeftModel vs trainer max |dlogprob| %.3g, adapter effect %.6f, argmax %s"
          % (adapter, type(base).__name__, diff, effect, "agrees" if agree else "DIFFERS"))
    ok = agree and effect > 0.01 and diff == 0.0
    return ok, type(base).__name__


def main(argv):
    if len(argv) < 3 or len(argv) % 2 != 1:
        print(__doc__, file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    bad = 0
    for i in range(1, len(argv), 2):
        ok, _ = check(argv[0], argv[i], argv[i + 1])
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
