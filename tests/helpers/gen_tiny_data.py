#!/usr/bin/python3
"""gen_tiny_data.py: the routing corpus and case set of the tiny lifecycle
(etc/examples/tiny.ini), written once and committed under etc/examples/tiny/.

    gen_tiny_data.py OUTDIR

Writes system.txt, capabilities.txt, corpus-v1.jsonl, corpus-v2.jsonl
(v1's examples plus more) and cases.jsonl.  Everything is a pure function
of the tables below, so running it again gives the same bytes (a test
checks that the committed files are what it writes).

The task is the reference router's, shrunk to what a 4-layer, 64-wide
Gemma 3 can learn on a CPU in a minute: one user request in, one compact
JSON call out.  The system prompt, the chat template and the answer format
are the ones the bake sends and the schema allows, so what the model
learns is what the bake asks:
  - the system message is system.txt with {{channel}} made "default" (the
    channel of every case), without a trailing newline, since Gemma's
    template keeps the system text as it is but trims the other turns;
  - the answer is {"capability":NAME,"args":{...}} with no spaces, in the
    key order of the bake's schema.
Cases: route cases made from training examples (train_key set), the same
for guards ("do not delete X" must not fire delete_file; the corpus
teaches clarify, a hidden capability), route and guard cases trained only
in v2 (held out for v1), and cases trained by neither (held out for both:
the fair slice).
"""
import json
import os
import sys

SYSTEM = ("Router of channel {{channel}}. One JSON call: open_folder(path), "
          "delete_file(path), search(query), play_music(title), set_timer(minutes).")

CAPS = ["open_folder", "delete_file", "search", "play_music", "set_timer", "clarify hidden"]

# (capability, user text, args): the request and its one right answer.
def req(cap, v):
    if cap == "open_folder":
        return "open the %s folder" % v, {"path": v}
    if cap == "delete_file":
        return "delete the file %s" % v, {"path": v}
    if cap == "search":
        return "search for %s" % v, {"query": v}
    if cap == "play_music":
        return "play the song %s" % v, {"title": v}
    if cap == "set_timer":
        return "set a timer for %d minutes" % v, {"minutes": v}
    if cap == "clarify":
        return "do not delete %s" % v, {}
    raise ValueError(cap)


# v1's corpus: 24 examples; v2 adds 12 more.
V1 = [("open_folder", "docs"), ("open_folder", "src"), ("open_folder", "photos"),
      ("open_folder", "music"), ("delete_file", "notes.txt"), ("delete_file", "old.log"),
      ("delete_file", "draft.md"), ("search", "release notes"), ("search", "lora rank"),
      ("search", "gguf files"), ("search", "cpu speed"), ("play_music", "blue moon"),
      ("play_music", "night train"), ("play_music", "river song"), ("set_timer", 5),
      ("set_timer", 10), ("set_timer", 20), ("set_timer", 45), ("clarify", "notes.txt"),
      ("clarify", "the build"), ("clarify", "report.pdf"), ("open_folder", "build"),
      ("search", "quantization"), ("play_music", "golden hour")]
V2_MORE = [("open_folder", "logs"), ("open_folder", "tmp"), ("delete_file", "cache.bin"),
           ("delete_file", "a.out"), ("search", "merge weights"), ("search", "held out"),
           ("play_music", "slow rain"), ("play_music", "paper moon"), ("set_timer", 15),
           ("set_timer", 30), ("clarify", "cache.bin"), ("clarify", "my photos")]
# Held out for both versions: the fair slice the gate ranks on, at least
# its default min_fair_cases (20) so that tiny-v2's verdict rests on it.
HELD = [("open_folder", "config"), ("delete_file", "core.dump"), ("search", "tensor names"),
        ("play_music", "morning star"), ("set_timer", 25), ("open_folder", "backup"),
        ("clarify", "the logs"), ("clarify", "draft.md"),
        ("open_folder", "assets"), ("open_folder", "scripts"), ("open_folder", "vendor"),
        ("delete_file", "temp.txt"), ("delete_file", "trace.json"), ("search", "adapter merge"),
        ("search", "token masks"), ("search", "bake cases"), ("play_music", "silver wind"),
        ("play_music", "city lights"), ("play_music", "long road"), ("set_timer", 3),
        ("set_timer", 8), ("set_timer", 60), ("clarify", "the cache"), ("clarify", "old.log")]


def answer(cap, args):
    return json.dumps({"capability": cap, "args": args}, separators=(",", ":"))


def example(i, cap, v):
    user, args = req(cap, v)
    return {"key": "k-%03d" % i, "messages": [
        {"role": "system", "content": SYSTEM.replace("{{channel}}", "default")},
        {"role": "user", "content": user},
        {"role": "assistant", "content": answer(cap, args)}]}


def case(cid, cap, v, key):
    user, args = req(cap, v)
    if cap == "clarify":
        c = {"id": cid, "kind": "guard", "user": user, "forbid": ["delete_file"]}
    else:
        c = {"id": cid, "kind": "route", "user": user,
             "expect": {"capability": cap, "args": args}}
        if cap != "delete_file":
            c["forbid"] = ["delete_file"]
    if key:
        c["train_key"] = key
    return c


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    files = {}
    files["system.txt"] = SYSTEM
    files["capabilities.txt"] = ("# The tiny router's capabilities (pipeline-cases(5)); clarify is\n"
                                 "# hidden: not in the system prompt, but in the schema (G26).\n"
                                 + "".join(c + "\n" for c in CAPS))
    v1 = [example(i + 1, c, v) for i, (c, v) in enumerate(V1)]
    v2 = v1 + [example(len(V1) + i + 1, c, v) for i, (c, v) in enumerate(V2_MORE)]
    files["corpus-v1.jsonl"] = "".join(json.dumps(e) + "\n" for e in v1)
    files["corpus-v2.jsonl"] = "".join(json.dumps(e) + "\n" for e in v2)
    cases = []
    # Every fourth v1 example and every v1 guard example become cases with
    # their train key; so do half of v2's additions; then the held-out set.
    for i, (c, v) in enumerate(V1):
        if i % 2 == 0 or c == "clarify":
            cases.append(case("t1-%02d" % (i + 1), c, v, "k-%03d" % (i + 1)))
    for i, (c, v) in enumerate(V2_MORE):
        if i % 2 == 0 or c == "clarify":
            cases.append(case("t2-%02d" % (i + 1), c, v, "k-%03d" % (len(V1) + i + 1)))
    for i, (c, v) in enumerate(HELD):
        cases.append(case("h-%02d" % (i + 1), c, v, None))
    files["cases.jsonl"] = "".join(json.dumps(c) + "\n" for c in cases)
    for name, text in files.items():
        tmp = os.path.join(out, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, os.path.join(out, name))


if __name__ == "__main__":
    main()
