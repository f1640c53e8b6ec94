#!/usr/bin/python3
"""gguf_tool.py: test helpers for the GGUF stages, on gguf-py (llama.cpp's
own reader and writer, from tests/tools/llama-oracle.sh's tree). Run with
Debian's Python:

    PYTHONPATH=$GGUF_PY /usr/bin/python3 -B gguf_tool.py CMD ...

  compare OURS REF [EXPECT]
                         every KV and tensor of OURS against REF (a file
                         llama.cpp's convert_hf_to_gguf.py wrote from the
                         same checkpoint): KVs in type and value, tensors
                         in order, type, shape and bytes. The differences
                         found must be exactly the ids listed in EXPECT
                         (KV keys, "tensor order", tensor names; one a
                         line), or none; a special id only OURS has must
                         name its token. An id ending in "?" may differ
                         or not (the reference writes it for some names)
  listed MANPAGE         the ids of pipeline.ini(5)'s convert-differences
                         list, one a line, for compare's EXPECT (an entry
                         followed by the comment line `.\" optional` gets
                         a "?")
  spec OURS CKPT OUTTYPE every KV and tensor of OURS against what
                         HACKING.md (Gemma 3 to GGUF) says, computed from the
                         checkpoint with numpy and sentencepiece
  edit IN OUT OP...      copy IN with defects: drop=NAME, f16=NAME (a Q8_0
                         tensor dequantized to F16), nan=NAME (first value
                         of a F16/F32 tensor), extra=NAME:NE0:NE1 (a
                         random F32 tensor), setu32=KEY:VALUE, delkv=KEY
"""
import json, os, re, sys

import numpy as np
import gguf
from gguf import GGUFReader, GGUFWriter, GGUFValueType, GGMLQuantizationType as Q

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "jobs"))
import pljob  # noqa: E402


def fields(r):
    out = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        out[k] = (list(f.types), f.contents())
    return out


SPECIAL_IDS = {"tokenizer.ggml.eos_token_id": "<eos>", "tokenizer.ggml.unknown_token_id": "<unk>",
               "tokenizer.ggml.bos_token_id": "<bos>", "tokenizer.ggml.padding_token_id": "<pad>"}


def cmd_compare(ours, ref, expect=None):
    """Every difference as (id, detail): the id is a KV's key, "tensor
    order", or a tensor's name. With EXPECT (a file of ids, one a line)
    the ids found must be exactly those; without, there must be none."""
    a, b = GGUFReader(ours), GGUFReader(ref)
    fa, fb = fields(a), fields(b)
    diffs = []
    for k in sorted(set(fa) | set(fb)):
        if k not in fa:
            diffs.append((k, f"only in the reference ({str(fb[k][1])[:60]})"))
        elif k not in fb:
            diffs.append((k, f"only in ours ({str(fa[k][1])[:60]})"))
            # A special id the reference left out must name its token.
            want = SPECIAL_IDS.get(k)
            toks = fa["tokenizer.ggml.tokens"][1]
            if want is not None and toks[fa[k][1]] != want:
                diffs.append((k + " (token)", f"{fa[k][1]} is {toks[fa[k][1]]!r}, not {want!r}"))
        elif fa[k][0] != fb[k][0]:
            diffs.append((k, f"type {fa[k][0]} != ref {fb[k][0]}"))
        elif fa[k][1] != fb[k][1]:
            diffs.append((k, f"{str(fa[k][1])[:60]!r} != ref {str(fb[k][1])[:60]!r}"))
    ta = {t.name: t for t in a.tensors}
    tb = {t.name: t for t in b.tensors}
    for n in sorted(set(ta) ^ set(tb)):
        diffs.append((n, "only in ours" if n in ta else "only in the reference"))
    if set(ta) == set(tb) and [t.name for t in a.tensors] != [t.name for t in b.tensors]:
        diffs.append(("tensor order", "same tensors, in another order"))
    for n in sorted(set(ta) & set(tb)):
        x, y = ta[n], tb[n]
        if x.tensor_type != y.tensor_type:
            diffs.append((n, f"{x.tensor_type.name} != ref {y.tensor_type.name}"))
        elif list(x.shape) != list(y.shape):
            diffs.append((n, f"shape {list(x.shape)} != ref {list(y.shape)}"))
        elif x.data.tobytes() != y.data.tobytes():
            d = np.frombuffer(x.data.tobytes(), np.uint8) != np.frombuffer(y.data.tobytes(), np.uint8)
            diffs.append((n, f"{int(d.sum())} bytes differ, first at {int(np.argmax(d))}"))
    listed = [l.strip() for l in open(expect)] if expect else []
    optional = {l[:-1] for l in listed if l.endswith("?")}
    listed = [l for l in listed if l and not l.endswith("?")]
    found = {i for i, _ in diffs}
    bad = 0
    for i, m in diffs:
        ok = i in listed or i in optional
        bad += not ok
        print(f"compare: {i}: {m}" + ("" if ok else "  (NOT LISTED)"))
    for i in listed:
        if i not in found:
            print(f"compare: {i}: listed, but no longer differs")
            bad += 1
    same = sum(1 for n in set(ta) & set(tb) if ta[n].data.tobytes() == tb[n].data.tobytes())
    print(f"compare: {len(fa)} KVs, {len(ta)} tensors ({same} byte-identical), "
          f"{len(diffs)} differences, {bad} unexpected")
    return 1 if bad else 0


# ---- the spec, from the checkpoint ----

def st_load(ckpt):
    """All tensors of a checkpoint (one file or shards) as float32 arrays."""
    files = sorted(f for f in os.listdir(ckpt) if f.endswith(".safetensors"))
    out = {}
    for fn in files:
        hdr, _, base = pljob.read_safetensors_header(os.path.join(ckpt, fn))
        with open(os.path.join(ckpt, fn), "rb") as f:
            f.seek(base)
            data = f.read()
        for k, v in hdr.items():
            b, e = v["data_offsets"]
            raw = data[b:e]
            dt = v["dtype"]
            if dt == "BF16":
                a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
            elif dt == "F16":
                a = np.frombuffer(raw, np.float16)
            elif dt == "F32":
                a = np.frombuffer(raw, np.float32)
            else:
                raise SystemExit(f"spec: {k}: dtype {dt} not handled here")
            out[k] = (dt, a.reshape(v["shape"]))
    return out


LAYER = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
         "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
         "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "post_attention_norm",
         "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
         "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def cmd_spec(ours, ckpt, outtype):
    import sentencepiece as spm
    r = GGUFReader(ours)
    f = {k: v[1] for k, v in fields(r).items()}
    ty = {k: v[0] for k, v in fields(r).items()}
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    hp = {**cfg, **cfg.get("text_config", {})}
    tc = json.load(open(os.path.join(ckpt, "tokenizer_config.json")))
    bad = []

    def want(key, value, vt):
        if key not in f:
            bad.append(f"{key}: missing")
        elif f[key] != value:
            bad.append(f"{key}: {str(f[key])[:60]} != spec {str(value)[:60]}")
        elif ty[key][0] != vt:
            bad.append(f"{key}: type {ty[key]} != {vt}")

    U32, F32, STR, BOOL = GGUFValueType.UINT32, GGUFValueType.FLOAT32, GGUFValueType.STRING, GGUFValueType.BOOL
    f32 = lambda x: float(np.float32(x))
    want("general.architecture", "gemma3", STR)
    want("gemma3.block_count", hp["num_hidden_layers"], U32)
    want("gemma3.context_length", hp.get("max_position_embeddings", 131072), U32)
    want("gemma3.embedding_length", hp["hidden_size"], U32)
    want("gemma3.feed_forward_length", hp["intermediate_size"], U32)
    want("gemma3.attention.head_count", hp.get("num_attention_heads", 8), U32)
    want("gemma3.attention.head_count_kv", hp.get("num_key_value_heads", 4), U32)
    want("gemma3.attention.key_length", hp.get("head_dim", 256), U32)
    want("gemma3.attention.value_length", hp.get("head_dim", 256), U32)
    want("gemma3.attention.layer_norm_rms_epsilon", f32(hp.get("rms_norm_eps", 1e-6)), F32)
    want("gemma3.rope.freq_base", f32(hp.get("rope_theta", 1e6)), F32)
    want("gemma3.rope.freq_base_swa", f32(hp.get("rope_local_base_freq", 10000.0)), F32)
    if hp.get("sliding_window_pattern", 6) != 1:
        want("gemma3.attention.sliding_window", hp.get("sliding_window", 4096), U32)
    want("general.file_type", {"f16": 1, "bf16": 32, "f32": 0}[outtype], U32)
    want("general.quantization_version", 2, U32)
    want("tokenizer.ggml.model", "llama", STR)
    want("tokenizer.ggml.pre", "default", STR)
    want("tokenizer.ggml.add_space_prefix", False, BOOL)
    want("tokenizer.ggml.add_bos_token", tc.get("add_bos_token", True), BOOL)
    want("tokenizer.ggml.add_eos_token", tc.get("add_eos_token", False), BOOL)
    want("tokenizer.chat_template", tc["chat_template"], STR)
    rs = hp.get("rope_scaling")
    if rs and rs.get("rope_type", rs.get("type")) == "linear":
        want("gemma3.rope.scaling.type", "linear", STR)
        want("gemma3.rope.scaling.factor", f32(rs["factor"]), F32)
    for k in f:
        if "rope.scaling" in k and not rs:
            bad.append(f"{k}: written without rope_scaling")

    # Vocabulary (HACKING.md: Gemma 3 to GGUF).
    sp = spm.SentencePieceProcessor(model_file=os.path.join(ckpt, "tokenizer.model"))
    n = hp.get("vocab_size", 262208)
    toks = [f"[PAD{i}]" for i in range(n)]
    scores = [-10000.0] * n
    types = [5] * n
    for i in range(min(n, sp.vocab_size())):
        toks[i] = sp.id_to_piece(i)
        scores[i] = sp.get_score(i)
        types[i] = (2 if sp.is_unknown(i) else 3 if sp.is_control(i) else
                    5 if sp.is_unused(i) else 6 if sp.is_byte(i) else 1)
    for sid, d in tc.get("added_tokens_decoder", {}).items():
        i = int(sid)
        if i >= n:
            continue
        t = d["content"]
        special = d.get("special") or t in ("<pad>", "<mask>") or (t.startswith("<unused") and t.endswith(">"))
        types[i] = 3 if special else 4
        toks[i] = t if special else t.replace("\u2581", " ")
        scores[i] = -1000.0
    want("tokenizer.ggml.tokens", toks, GGUFValueType.ARRAY)
    got_scores = f.get("tokenizer.ggml.scores")
    if got_scores is None or [f32(x) for x in got_scores] != [f32(x) for x in scores]:
        bad.append("tokenizer.ggml.scores differ from the SentencePiece model")
    want("tokenizer.ggml.token_type", types, GGUFValueType.ARRAY)
    ids = {"bos": "<bos>", "eos": "<eos>", "unknown": "<unk>", "padding": "<pad>"}
    for k, t in ids.items():
        want(f"tokenizer.ggml.{k}_token_id", toks.index(t), U32)

    # Tensors (HACKING.md: Gemma 3 to GGUF).
    src = st_load(ckpt)
    exp = {}
    for name, (dt, a) in src.items():
        nm = name.replace("language_model.", "")
        if "vision_tower" in nm or "multi_modal_projector" in nm:
            continue
        if nm == "model.embed_tokens.weight":
            exp["token_embd.weight"] = (dt, a[:n], False)
        elif nm == "model.norm.weight":
            exp["output_norm.weight"] = (dt, a, True)
        elif nm == "lm_head.weight":
            exp["output.weight"] = (dt, a[:n], False)
        else:
            parts = nm.split(".")
            assert parts[:2] == ["model", "layers"], nm
            mod = ".".join(parts[3:-1])
            exp[f"blk.{parts[2]}.{LAYER[mod]}.weight"] = (dt, a, mod.endswith("norm"))
    got = {t.name: t for t in r.tensors}
    if set(got) != set(exp):
        bad.append(f"tensor names: {sorted(set(got) ^ set(exp))}")
    for name in sorted(set(got) & set(exp)):
        dt, a, norm = exp[name]
        t = got[name]
        if norm:
            if dt == "F16":
                e = (a.astype(np.float16) + np.float16(1)).astype(np.float32)
            else:
                e = a.astype(np.float32) + np.float32(1)
            wt = Q.F32
        else:
            wt = {"f16": Q.F16, "bf16": Q.BF16, "f32": Q.F32}[outtype]
            a32 = a.astype(np.float32)
            if wt == Q.F16:
                e = a32.astype(np.float16)
            elif wt == Q.BF16:
                u = a32.view(np.uint32).astype(np.uint64)
                e = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
            else:
                e = a32
        if t.tensor_type != wt:
            bad.append(f"{name}: {t.tensor_type.name}, spec {wt.name}")
            continue
        if list(t.shape) != list(reversed(a.shape)):
            bad.append(f"{name}: ne {list(t.shape)}, spec {list(reversed(a.shape))}")
            continue
        if t.data.tobytes() != np.ascontiguousarray(e).tobytes():
            bad.append(f"{name}: values differ from the spec")
    for m in bad:
        print("spec:", m)
    print(f"spec: {len(f)} KVs, {len(got)} tensors, {len(bad)} differences")
    return 1 if bad else 0


def cmd_edit(inp, out, ops):
    r = GGUFReader(inp)
    arch = r.fields["general.architecture"].contents()
    w = GGUFWriter(out, arch)
    drop, to_f16, nan, extra, setu32, delkv = set(), set(), set(), [], {}, set()
    for op in ops:
        k, v = op.split("=", 1)
        if k == "drop": drop.add(v)
        elif k == "f16": to_f16.add(v)
        elif k == "nan": nan.add(v)
        elif k == "extra": extra.append(v)
        elif k == "setu32": setu32[v.split(":")[0]] = int(v.split(":")[1])
        elif k == "delkv": delkv.add(v)
        else: raise SystemExit(f"edit: unknown op {op}")
    for fld in r.fields.values():
        if fld.name == "general.architecture" or fld.name.startswith("GGUF.") or fld.name in delkv:
            continue
        vt = fld.types[0]
        sub = fld.types[-1] if vt == GGUFValueType.ARRAY else None
        val = fld.contents()
        if fld.name in setu32:
            val, vt = setu32.pop(fld.name), GGUFValueType.UINT32
        w.add_key_value(fld.name, val, vt, sub_type=sub)
    for k, v in setu32.items():
        w.add_uint32(k, v)
    for t in r.tensors:
        if t.name in drop:
            continue
        if t.name in to_f16:
            a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float16)
            w.add_tensor(t.name, a)
        elif t.name in nan:
            a = np.array(t.data).copy()
            a.reshape(-1)[0] = np.nan
            w.add_tensor(t.name, a, raw_dtype=t.tensor_type)
        else:
            w.add_tensor(t.name, np.array(t.data), raw_shape=None, raw_dtype=t.tensor_type)
    rng = np.random.default_rng(7)
    for e in extra:
        name, ne0, ne1 = e.split(":")
        w.add_tensor(name, rng.standard_normal((int(ne1), int(ne0))).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


def cmd_listed(man):
    """Print the convert-differences list of a pipeline.ini(5) source."""
    ids, on = [], False
    for line in open(man):
        line = line.rstrip("\n")
        if "convert-differences" in line:
            on = True
        elif on and line.startswith(".El"):
            break
        elif on and line.startswith(".It "):
            ids.append(re.sub(r"^\.It (Li )?", "", line))
        elif on and line == '.\\" optional' and ids:
            ids[-1] += "?"
    if not ids:
        raise SystemExit(f"{man}: no convert-differences list")
    print("\n".join(ids))
    return 0


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "compare":
        return cmd_compare(*args)
    if cmd == "listed":
        return cmd_listed(*args)
    if cmd == "spec":
        return cmd_spec(*args)
    if cmd == "edit":
        return cmd_edit(args[0], args[1], args[2:])
    raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    sys.exit(main())
