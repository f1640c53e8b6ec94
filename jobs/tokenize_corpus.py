#!/usr/bin/python3
"""tokenize_corpus.py: pre-tokenize and mask a chat corpus in one process (stage
`tokenize`, pipeline-job(7)).

    /usr/bin/python3 jobs/tokenize_corpus.py --config CONFIG.json [--events FILE]

No datasets.map() anywhere (G10): the corpus is read, rendered with the
base's own chat template (Jinja, from tokenizer_config.json, or
chat_template.jinja where transformers 5 saved it) and tokenized
here, in the main process.

Corpus: JSONL, one example per line:

    {"key": "ex0001", "messages": [{"role": "system", "content": "..."},
                                   {"role": "user", "content": "..."},
                                   {"role": "assistant", "content": "..."}]}

roles system|user|assistant, contents strings, the last message the
assistant's response.  Keys are unique; they name the example in every
refusal and are listed in the stats for the held-out computation later.

For each example the prompt is the template rendered over every message but
the last with add_generation_prompt, and the response is what rendering the
whole conversation adds after it, cut just after the end-of-turn marker
(the newline the template puts after it is not trained).  Prompt and
response are tokenized separately, special-token strings (<start_of_turn>,
<bos>, ...) mapped to their ids as transformers does, and concatenated:
labels are the response plus end-of-turn, the prompt is masked.

Refused (exit 2, an error event naming the example's key and its counts;
up to 5 examples are named, with the total):
  * an example longer than max_seq_length tokens;
  * an empty response span (nothing before the end-of-turn marker);
  * a double BOS (more than one BOS id in the example: the template's BOS
    plus a tokenizer's, with add_special_tokens);
  * a prompt longer than num_ctx - num_ctx_margin tokens: the serving context
    would truncate it silently (G01);
  * a token id at or beyond the model's vocabulary (config.json's
    vocab_size; both numbers named), e.g. Gemma 3's <image_soft_token>
    (262144) for a text model of 262144 rows;
  * an assistant reply that contains the end-of-turn marker as text (it
    would end the turn there, the rest of the reply out of the labels);
  * a malformed line, a duplicate key, a template that is not
    prefix-stable (the prompt's rendering is not a prefix of the full one).

Special tokens: tokenizer_config.json's added_tokens_decoder gives their
ids (as transformers), also those that are no piece of tokenizer.model.

Config keys (CONFIG.json): the tokenize stage's, described with their
defaults, bounds and choices in pipeline.ini(5) (its tokenize section);
read through the stage's key table (jobs/pljob/keys.py, generated from
plugins/tokenize.c's), their one definition.  base is the base model's
directory: tokenizer.model (SentencePiece) or tokenizer.json (HF
tokenizers, when importable; tokenizer auto takes it then), tokenizer_config.json
with chat_template (or, without it, chat_template.jinja or
chat_template.json beside it), and config.json (its vocab_size).

Artifacts:
  tokens  tokens.npz (numpy, no pickles): input_ids int32 (all examples
          concatenated), offsets int64 [n+1] (example i is
          input_ids[offsets[i]:offsets[i+1]]), prompt_len int32 [n],
          response_len int32 [n] (labels: -100 for the first prompt_len
          positions, the ids after), keys (unicode) [n], prefix_group
          int32 [n] (the example's shared-prefix group, -1: none) and
          prefix_len int32 [n] (the tokens it shares with its group, 0:
          none; see Shared prefixes)
  stats   stats.json: examples, tokens, longest {key, tokens, response_len},
          response_span {min, median, max}, prompt {min, max},
          shared_prefix_tokens, shared_prefix_share, shared_prefix
          {groups: [{tokens, examples}], plain}, corpus_keys

Shared prefixes (what train's shared_prefix trains once per step): the
examples are grouped by their system message (the first message when its
role is system; the examples without one form a group of their own).  In
each group the prefix is the longest run of leading tokens shared by the
most examples, chosen to save the most tokens (length x (examples - 1)):
an outlier whose tokens part earlier (a different tokenization where the
system prompt meets the user turn) does not shorten the others' prefix; it
is trained the plain way (prefix_group -1).  A prefix stops at least one
token before the shortest of its prompts, so every suffix holds the token
that predicts the response's first.  shared_prefix_tokens is the longest
group's prefix, shared_prefix_share the share of all prompt tokens the
prefixes cover.  The data order of train is unchanged by any of it.
"""

import json
import os
import re
import sys

# This file is named like the standard library's tokenize module, which
# torch, inspect and linecache import.  Running it puts jobs/ first on
# sys.path, where "import tokenize" would find this script again: move
# jobs/ behind the standard library before importing anything else.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.realpath(_HERE)] + [_HERE]

import pljob  # noqa: E402

MAX_NAMED = 5


def base_template(base, tc):
    """(source, where) of the base's chat template, where the checkpoint
    keeps it: tokenizer_config.json's chat_template (transformers 4 wrote
    it there), else chat_template.jinja (transformers 5's save_pretrained
    writes it there instead), else chat_template.json's, as convert reads
    them (plugins/lib/convert/gguf_convert.c)."""
    tc_path = os.path.join(base, "tokenizer_config.json")
    src = tc.get("chat_template")
    if isinstance(src, list):  # the named-template form
        src = next((t.get("template") for t in src if t.get("name") == "default"), None)
    if src:
        return src, tc_path
    jpath = os.path.join(base, "chat_template.jinja")
    try:
        with open(jpath, encoding="utf-8") as f:
            return f.read(), jpath
    except FileNotFoundError:
        pass
    except OSError as e:
        raise pljob.BadInput("%s: %s" % (jpath, e.strerror))
    cpath = os.path.join(base, "chat_template.json")
    try:
        with open(cpath, encoding="utf-8") as f:
            src = json.load(f).get("chat_template")
    except FileNotFoundError:
        src = None
    except (OSError, ValueError, AttributeError) as e:
        raise pljob.BadInput("%s: %s" % (cpath, getattr(e, "strerror", None) or e))
    if src:
        return src, cpath
    raise pljob.BadInput("%s: no chat_template, and no chat_template.jinja or chat_template.json "
                         "beside it (set the chat_template key)" % tc_path)


class Tokenizer:
    """SentencePiece or HF tokenizers behind one encode_batch(), with the
    special tokens of tokenizer_config.json split out first."""

    def __init__(self, base, kind, threads):
        self.threads = threads
        tc_path = os.path.join(base, "tokenizer_config.json")
        try:
            with open(tc_path) as f:
                self.tc = json.load(f)
        except OSError as e:
            raise pljob.BadInput("%s: %s" % (tc_path, e.strerror))
        except ValueError as e:
            raise pljob.BadInput("%s: not JSON: %s" % (tc_path, e))
        spm_path = os.path.join(base, "tokenizer.model")
        hf_path = os.path.join(base, "tokenizer.json")
        if kind == "auto":
            kind = "sentencepiece"
            if os.path.isfile(hf_path):
                import importlib.util
                if importlib.util.find_spec("tokenizers") is not None:
                    kind = "hf"
        self.kind = kind
        if kind == "hf":
            try:
                import tokenizers
            except ImportError:
                raise pljob.BadInput("tokenizer = hf: the tokenizers package is not importable")
            if not os.path.isfile(hf_path):
                raise pljob.BadInput("%s: no such file" % hf_path)
            self.hf = tokenizers.Tokenizer.from_file(hf_path)
            self.vocab = self.hf.get_vocab_size()
            self._id = lambda s: self.hf.token_to_id(s)
        else:
            import sentencepiece as spm
            if not os.path.isfile(spm_path):
                raise pljob.BadInput("%s: no such file (and no usable tokenizer.json)" % spm_path)
            self.sp = spm.SentencePieceProcessor(model_file=spm_path)
            self.vocab = self.sp.get_piece_size()
            self._id = self._sp_id
        self.bos_token = _tok_str(self.tc.get("bos_token")) or "<bos>"
        self.eos_token = _tok_str(self.tc.get("eos_token")) or "<eos>"
        specials = {self.bos_token, self.eos_token}
        for k in ("pad_token", "unk_token"):
            if _tok_str(self.tc.get(k)):
                specials.add(_tok_str(self.tc.get(k)))
        for s in ("<start_of_turn>", "<end_of_turn>"):
            specials.add(s)
        self.special = {}
        for s in specials:
            i = self._id(s)
            if i is not None:
                self.special[s] = i
        # The added tokens take their ids from added_tokens_decoder, as
        # transformers does: some are no piece of tokenizer.model at all
        # (Gemma 3's <image_soft_token> is 262144, past the SentencePiece
        # model's last id) and would otherwise be tokenized as text.
        for k, v in (self.tc.get("added_tokens_decoder") or {}).items():
            if not (isinstance(v, dict) and isinstance(v.get("content"), str) and v["content"]):
                continue
            try:
                i = int(k)
            except ValueError:
                raise pljob.BadInput("%s: added_tokens_decoder key %r is not a token id" % (tc_path, k))
            have = self._id(v["content"])
            if have is not None and have != i:
                raise pljob.BadInput("%s: added token %r is id %d in added_tokens_decoder but %d in the %s "
                                     "tokenizer" % (tc_path, v["content"], i, have, kind))
            self.special[v["content"]] = i
        self.bos_id = self.special.get(self.bos_token)
        if self.bos_id is None:
            raise pljob.BadInput("%s: BOS token %r is not in the vocabulary" % (tc_path, self.bos_token))
        self.add_bos_token = bool(self.tc.get("add_bos_token", True))
        self.n_ids = max([self.vocab] + [i + 1 for i in self.special.values()])
        # Gemma 3's tokenizer_config.json lists some 6,400 added tokens; an
        # alternation of all of them would be tried at every character of a
        # 6k-token prompt.  Those of the form <...> are found by one generic
        # pattern and a dictionary lookup; the rest (few) are alternated.
        generic = r"<[^<>\s]{1,128}>"
        others = sorted((t for t in self.special if not re.fullmatch(generic, t)), key=len, reverse=True)
        self.split_re = re.compile("|".join([re.escape(t) for t in others] + [generic]))

    def _split(self, text):
        """[plain, special, plain, special, ..., plain]: text cut at every
        added token, leftmost first, as transformers does."""
        out = []
        last = pos = 0
        while True:
            m = self.split_re.search(text, pos)
            if m is None:
                break
            if m.group(0) in self.special:
                out += [text[last:m.start()], m.group(0)]
                last = pos = m.end()
            else:
                pos = m.start() + 1  # a bracketed word that is no token
        out.append(text[last:])
        return out

    def _sp_id(self, s):
        i = self.sp.piece_to_id(s)
        return i if self.sp.id_to_piece(i) == s else None

    def encode_batch(self, texts):
        """Token ids for each text, special-token strings mapped to their ids
        and the plain runs between them tokenized in one batch call."""
        if self.kind == "hf":
            return [e.ids for e in self.hf.encode_batch(texts, add_special_tokens=False)]
        parts = [self._split(t) for t in texts]
        plain = [p for ps in parts for i, p in enumerate(ps) if i % 2 == 0 and p]
        enc = iter(self.sp.encode(plain, num_threads=self.threads) if plain else [])
        out = []
        for ps in parts:
            ids = []
            for i, p in enumerate(ps):
                if i % 2:
                    ids.append(self.special[p])
                elif p:
                    ids.extend(next(enc))
            out.append(ids)
        return out


def _tok_str(v):
    if isinstance(v, dict):
        return v.get("content")
    return v


def make_template(source, where):
    """A Jinja template rendered as transformers' apply_chat_template does
    (sandboxed, trim_blocks, lstrip_blocks, raise_exception)."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False: json.dumps(
        x, indent=indent, ensure_ascii=ensure_ascii)
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise pljob.BadInput("%s: chat template line %s: %s" % (where, e.lineno, e.message))


def model_vocab(base):
    """The model's vocabulary size: config.json's vocab_size (text_config's
    for a multimodal checkpoint)."""
    path = os.path.join(base, "config.json")
    try:
        with open(path) as f:
            cfg = json.load(f)
    except OSError as e:
        raise pljob.BadInput("%s: %s (the model's vocab_size is needed to check the token ids)"
                             % (path, e.strerror))
    except ValueError as e:
        raise pljob.BadInput("%s: not JSON: %s" % (path, e))
    tc = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    v = tc.get("vocab_size", cfg.get("vocab_size"))
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise pljob.BadInput("%s: vocab_size %r is not a positive integer" % (path, v))
    return v


def read_corpus(path):
    """[(key, messages, line number)] with the format checked."""
    # The shape every line must have, shown with the errors about it.
    shape = ('; a line is one JSON object: {"key": "ex1", "messages": [{"role": "system", '
             '"content": "..."}, {"role": "user", "content": "..."}, {"role": "assistant", '
             '"content": "..."}]} (the system message optional)')
    out = []
    keys = {}
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                ex = json.loads(raw.decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as e:
                raise pljob.BadInput("%s:%d: not a JSON object: %s%s" % (path, n, e, shape))
            if not isinstance(ex, dict) or not isinstance(ex.get("key"), str) or not ex["key"]:
                raise pljob.BadInput("%s:%d: an example needs a non-empty string \"key\"%s" % (path, n, shape))
            key = ex["key"]
            if key in keys:
                raise pljob.BadInput("%s:%d: example %s: duplicate key (first on line %d)" % (path, n, key, keys[key]))
            keys[key] = n
            msgs = ex.get("messages")
            if not isinstance(msgs, list) or len(msgs) < 2:
                raise pljob.BadInput("%s:%d: example %s: \"messages\" must list at least a prompt and a "
                                     "response%s" % (path, n, key, shape))
            for i, m in enumerate(msgs):
                if (not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant")
                        or not isinstance(m.get("content"), str)):
                    raise pljob.BadInput("%s:%d: example %s: message %d needs role system|user|assistant "
                                         "and a string content" % (path, n, key, i))
            if msgs[-1]["role"] != "assistant":
                raise pljob.BadInput("%s:%d: example %s: the last message must be the assistant's response"
                                     % (path, n, key))
            out.append((key, msgs, n))
    if not out:
        raise pljob.BadInput("%s: the corpus has no examples" % path)
    return out


def render_pair(tmpl, tok, msgs, key, eot):
    """(prompt text, response text up to and including eot)."""
    import jinja2
    kw = {"bos_token": tok.bos_token, "eos_token": tok.eos_token}
    try:
        prompt = tmpl.render(messages=msgs[:-1], add_generation_prompt=True, **kw)
        full = tmpl.render(messages=msgs, add_generation_prompt=False, **kw)
    except jinja2.exceptions.TemplateError as e:
        raise pljob.BadInput("example %s: chat template: %s" % (key, e))
    if not full.startswith(prompt):
        raise pljob.BadInput("example %s: the chat template is not prefix-stable: the prompt's rendering "
                             "is not a prefix of the whole conversation's" % key)
    resp = full[len(prompt):]
    # The template's own marker is the last one: it closes the reply.  An
    # earlier one is the reply's own text, which tokenizes as the special
    # token and would end the turn there (the rest of the reply lost from
    # the labels, and the model taught to stop early): refused.
    cut = resp.rfind(eot)
    if cut < 0:
        raise pljob.BadInput("example %s: the rendered response has no end-of-turn marker %r" % (key, eot))
    first = resp.find(eot)
    if first < cut:
        raise pljob.BadInput("example %s: the assistant's reply contains the end-of-turn marker %r as text "
                             "(at character %d of %d of the rendered reply); it would end the turn there. "
                             "Remove it from the reply" % (key, eot, first, cut))
    return prompt, resp[:cut + len(eot)]


def _lcp(a, b, cap):
    """How many leading tokens the sequences a and b share, at most cap."""
    n = min(len(a), len(b), cap)
    if n <= 0:
        return 0
    import numpy as np
    ne = np.flatnonzero(a[:n] != b[:n])
    return int(ne[0]) if len(ne) else n


def shared_prefixes(ids, plen, system):
    """(prefix_group [n], prefix_len [n], groups [{tokens, examples}]): the
    shared prefixes of the prompts (see Shared prefixes above).  ids are
    the examples' token arrays, plen their prompt lengths, system their
    system message (None: none)."""
    n = len(ids)
    group = [-1] * n
    length = [0] * n
    out = []
    bysys = {}
    for i, s in enumerate(system):
        bysys.setdefault(s, []).append(i)
    for s in sorted(bysys, key=lambda x: (x is not None, x or "")):
        members = bysys[s]
        if len(members) < 2:
            continue
        # Sorted by their prompt tokens, the examples sharing a prefix of
        # length L are a contiguous run, whose common prefix is the least
        # of its neighbours' (capped) common prefixes: the run saving the
        # most is the largest rectangle under that histogram.
        order = sorted(members, key=lambda i: tuple(ids[i][:plen[i]].tolist()))
        h = [_lcp(ids[a][:plen[a]], ids[b][:plen[b]], min(plen[a], plen[b]) - 1)
             for a, b in zip(order, order[1:])]
        best = (0, 0, 0)  # (saved tokens, first pair, last pair + 1)
        stack = []  # (start, height)
        for j, hj in enumerate(h + [0]):
            start = j
            while stack and stack[-1][1] >= hj:
                st, sh = stack.pop()
                if sh * (j - st) > best[0]:
                    best = (sh * (j - st), st, j)
                start = st
            stack.append((start, hj))
        saved, a, b = best
        if saved <= 0:
            continue
        run = order[a:b + 1]
        L = min(h[a:b])
        g = len(out)
        for i in run:
            group[i], length[i] = g, L
        out.append({"tokens": L, "examples": len(run)})
    return group, length, out


def body(job):
    import numpy as np
    cfg, ev = job.cfg, job.events
    base = cfg.path_in("base", kind="dir")
    corpus = cfg.path_in("corpus")
    outdir = cfg.str("output_dir", job.workdir)
    max_len = cfg.int("max_seq_length")
    num_ctx = cfg.int("num_ctx")
    margin = cfg.int("num_ctx_margin")
    add_special = cfg.bool("add_special_tokens")
    eot = cfg.str("end_of_turn")
    kind = cfg.choice("tokenizer")
    threads = cfg.int("threads")
    tmpl_path = cfg.str("chat_template")
    ev.started()
    tok = Tokenizer(base, kind, threads)
    if tmpl_path:
        with open(tmpl_path) as f:
            src, where = f.read(), tmpl_path
    else:
        src, where = base_template(base, tok.tc)
    tmpl = make_template(src, where)
    if eot not in tok.special:
        raise pljob.BadInput("end_of_turn %r is not a special token of %s" % (eot, base))
    eot_id = tok.special[eot]

    n_model = model_vocab(base)
    examples = read_corpus(corpus)
    n = len(examples)
    ev.progress(0, n, unit="examples")
    keys, ids_all, plen, rlen, system = [], [], [], [], []
    bad = {"over_length": [], "empty_response": [], "double_bos": [], "prompt_over_ctx": [],
           "over_vocab": []}
    limit_ctx = num_ctx - margin
    batch = 64
    for b0 in range(0, n, batch):
        chunk = examples[b0:b0 + batch]
        texts = []
        for key, msgs, _ in chunk:
            p, r = render_pair(tmpl, tok, msgs, key, eot)
            texts += [p, r]
        enc = tok.encode_batch(texts)
        for i, (key, msgs, line) in enumerate(chunk):
            p_ids, r_ids = enc[2 * i], enc[2 * i + 1]
            if add_special and tok.add_bos_token:
                p_ids = [tok.bos_id] + p_ids
            if not r_ids or r_ids[-1] != eot_id:
                raise pljob.BadInput("example %s: the response does not end in %s after tokenizing" % (key, eot))
            ids = p_ids + r_ids
            total = len(ids)
            nbos = ids.count(tok.bos_id)
            if total > max_len:
                bad["over_length"].append("%s (%d tokens: prompt %d + response %d; max_seq_length %d)"
                                          % (key, total, len(p_ids), len(r_ids), max_len))
            if len(r_ids) < 2:
                bad["empty_response"].append("%s (response span %d tokens: only the end-of-turn; prompt %d)"
                                             % (key, len(r_ids), len(p_ids)))
            if nbos > 1:
                pos = [j for j, t in enumerate(ids) if t == tok.bos_id][:4]
                bad["double_bos"].append("%s (%d BOS tokens, at positions %s)" % (key, nbos, pos))
            if len(p_ids) > limit_ctx:
                bad["prompt_over_ctx"].append("%s (prompt %d tokens > num_ctx %d - num_ctx_margin %d = %d; G01)"
                                              % (key, len(p_ids), num_ctx, margin, limit_ctx))
            top = max(ids)
            if top >= n_model:
                j = ids.index(top)
                bad["over_vocab"].append("%s (token id %d at position %d, %s; the model's vocab_size is %d)"
                                         % (key, top, j, "prompt" if j < len(p_ids) else "response", n_model))
            keys.append(key)
            system.append(msgs[0]["content"] if msgs[0]["role"] == "system" else None)
            ids_all.append(np.asarray(ids, dtype=np.int32))
            plen.append(len(p_ids))
            rlen.append(len(r_ids))
        ev.progress(min(b0 + batch, n), n, unit="examples")
    msgs = []
    what = {"over_length": "over max_seq_length", "empty_response": "with an empty response span",
            "double_bos": "with a double BOS", "prompt_over_ctx": "with a prompt over num_ctx minus num_ctx_margin",
            "over_vocab": "with a token id at or beyond the model's vocabulary (%d, config.json's vocab_size; "
                          "the tokenizer has %d ids)" % (n_model, tok.n_ids)}
    for k, lst in bad.items():
        if lst:
            more = "" if len(lst) <= MAX_NAMED else ", and %d more" % (len(lst) - MAX_NAMED)
            msgs.append("%d example%s %s: %s%s" % (len(lst), "" if len(lst) == 1 else "s", what[k],
                                                   "; ".join(lst[:MAX_NAMED]), more))
    if msgs:
        raise pljob.BadInput("%s: " % corpus + " | ".join(msgs))

    lengths = np.array([len(x) for x in ids_all], dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    longest = int(np.argmax(lengths))
    resp = np.array(rlen, dtype=np.int64)
    pgroup, plens, pgroups = shared_prefixes(ids_all, plen, system)
    stats = {
        "examples": n,
        "tokens": int(offsets[-1]),
        "longest": {"key": keys[longest], "tokens": int(lengths[longest]),
                    "response_len": int(rlen[longest]), "prompt_len": int(plen[longest])},
        "response_span": {"min": int(resp.min()), "median": float(np.median(resp)), "max": int(resp.max())},
        "prompt": {"min": int(min(plen)), "max": int(max(plen))},
        "shared_prefix_tokens": max([g["tokens"] for g in pgroups] or [0]),
        "shared_prefix_share": round(sum(plens) / float(max(1, sum(plen))), 6),
        "shared_prefix": {"groups": pgroups, "plain": sum(1 for g in pgroup if g < 0)},
        "max_seq_length": max_len, "num_ctx": num_ctx, "num_ctx_margin": margin,
        "tokenizer": tok.kind, "vocab_size": tok.vocab,
        "corpus_keys": keys,
    }
    os.makedirs(outdir, exist_ok=True)
    tok_path = os.path.join(outdir, "tokens.npz")
    tmp = "%s.tmp-%d.npz" % (tok_path[:-4], os.getpid())
    np.savez(tmp, input_ids=np.concatenate(ids_all), offsets=offsets,
             prompt_len=np.asarray(plen, dtype=np.int32), response_len=np.asarray(rlen, dtype=np.int32),
             keys=np.asarray(keys, dtype=str), prefix_group=np.asarray(pgroup, dtype=np.int32),
             prefix_len=np.asarray(plens, dtype=np.int32))
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, tok_path)
    pljob.fsync_dir(outdir)
    stats_path = os.path.join(outdir, "stats.json")
    pljob.atomic_write(stats_path, (json.dumps(stats, indent=1) + "\n").encode())
    ev.artifact("tokens", tok_path)
    ev.artifact("stats", stats_path)
    ev.done(examples=n, tokens=int(offsets[-1]))


if __name__ == "__main__":
    sys.exit(pljob.main("Pre-tokenize and mask a chat corpus (stage tokenize).", body,
                        stage="tokenize"))
