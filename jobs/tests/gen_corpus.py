#!/usr/bin/python3
"""gen_corpus.py: a deterministic routing corpus for the job programs' tests
and the tokenize benchmark (not a fixture of the real model: its text only
has to look like the reference task and be learnable).

    gen_corpus.py OUT.jsonl [--n N] [--seed S] [--filler WORDS] [--keyprefix P]

Each line is one example in the corpus format tokenize.py reads:
{"key": "...", "messages": [{"role": "system", ...}, {"role": "user", ...},
{"role": "assistant", "content": "<JSON capability call>"}]}.  The call is a
function of the request, so a model can learn it.  --filler pads the system
prompt with N words of capability documentation (the reference prompts are
~6k tokens of it).
"""
import argparse
import json
import random

ROOMS = ["kitchen", "bedroom", "office", "garage", "hall", "bath"]
DEVICES = {"light": "lights", "heater": "climate", "fan": "climate", "music": "media", "blinds": "covers"}
ACTIONS = {"turn on": "on", "switch off": "off", "dim": "dim", "open": "open", "close": "close"}
WORDS = ("capability returns status value when the user asks for a device in a room the router "
         "selects exactly one call with arguments taken from the request and never invents a room").split()


def system_prompt(rng, filler):
    doc = ["You route requests to one capability call. Answer with JSON only."]
    for dev, cap in sorted(DEVICES.items()):
        doc.append("%s.<action>(room): controls the %s." % (cap, dev))
    if filler:
        doc.append(" ".join(rng.choice(WORDS) for _ in range(filler)))
    return "\n".join(doc)


def example(i, rng, filler, prefix):
    verb = rng.choice(sorted(ACTIONS))
    dev = rng.choice(sorted(DEVICES))
    room = rng.choice(ROOMS)
    user = "please %s the %s in the %s" % (verb, dev, room)
    call = {"call": "%s.%s" % (DEVICES[dev], ACTIONS[verb]), "room": room}
    return {"key": "%s%04d" % (prefix, i), "messages": [
        {"role": "system", "content": system_prompt(rng, filler)},
        {"role": "user", "content": user},
        {"role": "assistant", "content": json.dumps(call, sort_keys=True)},
    ]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--filler", type=int, default=0)
    ap.add_argument("--keyprefix", default="ex")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    with open(a.out, "w") as f:
        for i in range(a.n):
            f.write(json.dumps(example(i, rng, a.filler, a.keyprefix)) + "\n")


if __name__ == "__main__":
    main()
