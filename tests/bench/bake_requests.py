#!/usr/bin/python3
"""bake_requests.py: the request bodies the bake stage sends for each case
of a case file (plugins/lib/serve/chat.c: chat_request_json), one JSON file
per case in OUTDIR (00.json, 01.json, ... in case order), for the
benchmarks' plain curl loops.

    bake_requests.py DATA OUTDIR openai|ollama MODEL

DATA holds cases.jsonl, system.txt and capabilities.txt (as
tests/fixtures/bake). Greedy, seed 3407, a 64-token cap, num_ctx
1024 (ollama), and the schema whose enum holds every capability not marked
disabled, hidden ones included (G26).
"""
import json
import os
import sys

d, out, backend, model = sys.argv[1:5]
os.makedirs(out, exist_ok=True)
caps = [l.split("#")[0].split() for l in open(d + "/capabilities.txt")]
enum = [c[0] for c in caps if c and "disabled" not in c[1:]]
schema = {"type": "object", "properties": {"capability": {"type": "string", "enum": enum},
          "args": {"type": "object"}}, "required": ["capability", "args"]}
system = open(d + "/system.txt").read()
for i, line in enumerate(l for l in open(d + "/cases.jsonl") if l.strip()):
    c = json.loads(line)
    msgs = [{"role": "system", "content": system.replace("{{channel}}", c.get("channel", "default"))}]
    msgs += c.get("setup", []) + [{"role": "user", "content": c["user"]}]
    if backend == "ollama":
        body = {"model": model, "messages": msgs, "stream": False, "format": schema,
                "options": {"num_ctx": 1024, "temperature": 0, "seed": 3407, "num_predict": 64},
                "truncate": False, "keep_alive": -1}
    else:
        body = {"model": model, "messages": msgs, "stream": False, "temperature": 0, "seed": 3407,
                "max_tokens": 64, "cache_prompt": False,
                "response_format": {"type": "json_schema", "json_schema": {"name": "route", "schema": schema}}}
    json.dump(body, open("%s/%02d.json" % (out, i), "w"))
