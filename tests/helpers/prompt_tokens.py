#!/usr/bin/python3
"""tests/helpers/prompt_tokens.py: the prompt tokens a server counts for one user
message, for the tests that compare templates (ollama/register-trim*).

    prompt_tokens.py ollama URL TAG TEXT   # Ollama's /api/chat
    prompt_tokens.py llama URL TEXT        # llama-server's own rendering

Ollama: prompt_eval_count of a one-token answer in JSON (format json, as
register asks again with): the tiny model's one token may be a piece of a
UTF-8 character, which llama-server's chat parser refuses (an answer
without metrics); a JSON grammar allows whole characters only, and the
prompt is the same.

llama-server: its rendering through its Jinja chat template
(/apply-template, what /v1/chat/completions renders; it leaves the
template's BOS out), tokenized as the server tokenizes a prompt: the BOS
added, special tokens parsed.
"""
import json
import sys
import urllib.request


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)


def main(argv):
    msgs = [{"role": "user", "content": argv[-1]}]
    if argv[1] == "ollama" and len(argv) == 5:
        a = post(argv[2] + "/api/chat", {"model": argv[3], "stream": False, "format": "json",
                 "messages": msgs,
                 "options": {"num_ctx": 1024, "num_predict": 1, "temperature": 0}})
        print(a["prompt_eval_count"])
    elif argv[1] == "llama" and len(argv) == 4:
        p = post(argv[2] + "/apply-template", {"messages": msgs})["prompt"]
        t = post(argv[2] + "/tokenize", {"content": p, "add_special": True, "parse_special": True})
        print(len(t["tokens"]))
    else:
        sys.exit("usage: prompt_tokens.py ollama URL TAG TEXT | llama URL TEXT")


if __name__ == "__main__":
    main(sys.argv)
