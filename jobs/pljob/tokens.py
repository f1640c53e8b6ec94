"""pljob.tokens: the token file tokenize writes and probe and train read."""

from .protocol import BadInput


def load_tokens(path):
    """Examples from a tokens.npz: a list of dicts with key, input_ids,
    prompt_len, response_len, prefix_group and prefix_len (written by
    tokenize_corpus.py; read by probe.py and train.py).  A file written
    before the shared prefixes were recorded reads as having none."""
    import numpy as np
    try:
        z = np.load(path, allow_pickle=False)
        ids, off = z["input_ids"], z["offsets"]
        pl, rl, keys = z["prompt_len"], z["response_len"], z["keys"]
    except (OSError, KeyError, ValueError) as e:
        raise BadInput("%s: not a tokens file: %s" % (path, e))
    n = len(keys)
    pg = z["prefix_group"] if "prefix_group" in z.files else np.full(n, -1, dtype=np.int32)
    px = z["prefix_len"] if "prefix_len" in z.files else np.zeros(n, dtype=np.int32)
    if len(off) != n + 1 or len(pl) != n or len(rl) != n or off[-1] != len(ids) or len(pg) != n or len(px) != n:
        raise BadInput("%s: inconsistent array lengths" % path)
    out = []
    for i in range(n):
        a, b = int(off[i]), int(off[i + 1])
        if pl[i] + rl[i] != b - a or rl[i] < 1:
            raise BadInput("%s: example %s: prompt %d + response %d != %d tokens"
                                 % (path, keys[i], pl[i], rl[i], b - a))
        if pg[i] >= 0 and not 0 < px[i] < pl[i]:
            raise BadInput("%s: example %s: shared prefix %d tokens is not inside its prompt of %d"
                           % (path, keys[i], px[i], pl[i]))
        out.append({"key": str(keys[i]), "input_ids": ids[a:b], "prompt_len": int(pl[i]),
                    "response_len": int(rl[i]), "prefix_group": int(pg[i]), "prefix_len": int(px[i])})
    return out
