"""pljob.adapters: PEFT adapter directories: adapter_config.json +
adapter_model.safetensors with PEFT's key names
(base_model.model.<module>.lora_A.weight ...)."""

import json
import os

from .files import write_file
from .protocol import BadInput
from .tensors import read_safetensors, to_float32, write_safetensors


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def adapter_config(base, r, alpha, dropout, rslora, targets=LORA_TARGETS):
    """adapter_config.json for a plain LoRA adapter, PEFT field names."""
    return {
        "alpha_pattern": {},
        "auto_mapping": None,
        "base_model_name_or_path": base,
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "init_lora_weights": True,
        "layers_pattern": None,
        "layers_to_transform": None,
        "lora_alpha": alpha,
        "lora_dropout": dropout,
        "modules_to_save": None,
        "peft_type": "LORA",
        "r": r,
        "rank_pattern": {},
        "revision": None,
        "target_modules": sorted(targets),
        "task_type": "CAUSAL_LM",
        "use_dora": False,
        "use_rslora": bool(rslora),
    }


def write_adapter_dir(path, config, tensors):
    """Write a PEFT adapter directory into path (an existing empty dir)."""
    write_safetensors(os.path.join(path, "adapter_model.safetensors"), tensors, {"format": "pt"})
    write_file(os.path.join(path, "adapter_config.json"),
               (json.dumps(config, indent=2, sort_keys=True) + "\n").encode())


def read_adapter_dir(path):
    """(config dict, name -> float32 numpy array) of a PEFT adapter dir."""
    cfgp = os.path.join(path, "adapter_config.json")
    stp = os.path.join(path, "adapter_model.safetensors")
    if not os.path.isfile(cfgp) or not os.path.isfile(stp):
        raise BadInput("%s: not a PEFT adapter (adapter_config.json and adapter_model.safetensors)" % path)
    with open(cfgp) as f:
        cfg = json.load(f)
    if cfg.get("peft_type") != "LORA":
        raise BadInput("%s: peft_type %r, only LORA is supported" % (cfgp, cfg.get("peft_type")))
    return cfg, {k: to_float32(a, dt) for k, (a, dt) in read_safetensors(stp).items()}
