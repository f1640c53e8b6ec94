#!/usr/bin/python3
"""make_tiny_base.py: write a tiny random Gemma 3 base model directory for
the job programs' tests: config.json, model.safetensors (BF16),
tokenizer.model (a SentencePiece model trained here on the test corpus's
text, with Gemma's special pieces and ids: <pad> 0, <eos> 1, <bos> 2,
<unk> 3, <start_of_turn>, <end_of_turn>) and tokenizer_config.json carrying
Gemma 3's own chat template.

    make_tiny_base.py OUTDIR [--layout conditional|causal] [--layers N]
                      [--hidden H] [--seed S]

It is a test fixture for jobs/ only; tests/fixtures/gen_gemma3.py is the
project's shared Gemma 3 fixture.  51-job-train-tiny uses this one with 6
layers for what the shared one lacks: a global (full-attention) layer in
the 5:1 pattern and linear RoPE scaling on it, in the forward check against
llama.cpp.  Its weights are larger than the shared fixture's, so its
next-token distributions are peaked and the check compares runner-up
log-probabilities too.
"""
import argparse
import io
import json
import os
import random
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.dirname(HERE))  # after the standard library: jobs/tokenize.py
import gen_corpus  # noqa: E402
import pljob  # noqa: E402

# Gemma 3's chat template as shipped in google/gemma-3-*-it's
# tokenizer_config.json (text parts).
GEMMA3_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n")


def train_tokenizer(out, vocab):
    import sentencepiece as spm
    rng = random.Random(1)
    lines = []
    for i in range(300):
        ex = gen_corpus.example(i, rng, 40, "t")
        for m in ex["messages"]:
            lines.extend(m["content"].splitlines())
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab,
        model_type="bpe", byte_fallback=True, add_dummy_prefix=False,
        pad_id=0, eos_id=1, bos_id=2, unk_id=3,
        pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>",
        user_defined_symbols=["<start_of_turn>", "<end_of_turn>"],
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        split_digits=True, minloglevel=2)
    pljob.write_file(os.path.join(out, "tokenizer.model"), model.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    return sp


def bf16(a):
    """float32 -> BF16 bits (round to nearest even) as uint16."""
    u = a.astype(np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layout", choices=("conditional", "causal"), default="conditional")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    sp = train_tokenizer(a.out, a.vocab)
    V = sp.get_piece_size()
    H, I, L, nh, nkv, hd = a.hidden, a.hidden * 2, a.layers, 4, 2, 16
    text = {
        "model_type": "gemma3_text", "vocab_size": V, "hidden_size": H,
        "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": nh,
        "num_key_value_heads": nkv, "head_dim": hd, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        "sliding_window": 32, "sliding_window_pattern": 6,
        "query_pre_attn_scalar": hd, "max_position_embeddings": 8192,
        "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": None,
        "attn_logit_softcapping": None, "attention_bias": False,
    }
    rng = np.random.default_rng(a.seed)
    P = "model.language_model." if a.layout == "conditional" else "model."
    t = {P + "embed_tokens.weight": rng.normal(0, 0.5, (V, H)),
         P + "norm.weight": rng.normal(0, 0.1, (H,))}
    for i in range(L):
        p = "%slayers.%d." % (P, i)
        for n, shp in (("self_attn.q_proj", (nh * hd, H)), ("self_attn.k_proj", (nkv * hd, H)),
                       ("self_attn.v_proj", (nkv * hd, H)), ("self_attn.o_proj", (H, nh * hd)),
                       ("mlp.gate_proj", (I, H)), ("mlp.up_proj", (I, H)), ("mlp.down_proj", (H, I))):
            t[p + n + ".weight"] = rng.normal(0, 1.0 / np.sqrt(shp[1]), shp)
        for n, d in (("input_layernorm", H), ("post_attention_layernorm", H),
                     ("pre_feedforward_layernorm", H), ("post_feedforward_layernorm", H),
                     ("self_attn.q_norm", hd), ("self_attn.k_norm", hd)):
            t[p + n + ".weight"] = rng.normal(0, 0.1, (d,))
    if a.layout == "conditional":
        cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
               "text_config": text, "vision_config": {"model_type": "siglip_vision_model"},
               "torch_dtype": "bfloat16"}
        # A stray vision tensor, as in the real checkpoint; the engine skips it.
        t["model.vision_tower.vision_model.post_layernorm.weight"] = np.ones((8,))
    else:
        cfg = dict(text, architectures=["Gemma3ForCausalLM"], torch_dtype="bfloat16")
    # BF16 on disk, as the real checkpoint: stored as raw uint16 bits under
    # dtype BF16 (write_safetensors knows no BF16, so patch the header).
    _write_bf16(os.path.join(a.out, "model.safetensors"), t)
    pljob.write_file(os.path.join(a.out, "config.json"), json.dumps(cfg, indent=1).encode())
    tk = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
          "add_bos_token": True, "add_eos_token": False, "chat_template": GEMMA3_TEMPLATE,
          "added_tokens_decoder": {str(sp.piece_to_id(s)): {"content": s, "special": True}
                                   for s in ("<pad>", "<eos>", "<bos>", "<unk>",
                                             "<start_of_turn>", "<end_of_turn>")}}
    pljob.write_file(os.path.join(a.out, "tokenizer_config.json"), json.dumps(tk, indent=1).encode())


def _write_bf16(path, tensors):
    import struct
    hdr, blobs, off = {}, [], 0
    for name in sorted(tensors):
        b = bf16(np.asarray(tensors[name])).tobytes()
        hdr[name] = {"dtype": "BF16", "shape": list(np.shape(tensors[name])), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hdr["__metadata__"] = {"format": "pt"}
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    pljob.write_file(path, struct.pack("<Q", len(h)) + h + b"".join(blobs))


if __name__ == "__main__":
    main()
