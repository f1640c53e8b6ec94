#!/usr/bin/python3
"""race_client.py: production traffic for the G21 reload race, as a client
of a REAL Ollama server (tests only).

    race_client.py URL MODEL ROUNDS|forever LOG [--delay S] [--poll S]
                   [--num-ctx N]

It watches /api/ps; each time MODEL, once loaded, is gone from it (someone
evicted it), it waits --delay seconds and sends MODEL a real /api/generate
(a one-token answer, keep_alive -1), which makes Ollama's scheduler load
the model again: the reload. After ROUNDS reloads it stops reloading
(keeps running, idle, until killed). Once it has seen /api/ps for the
first time it writes {"t", "event": "ready", "model", "loaded"} to LOG
(whoever starts it waits for that line); every reload is a JSON line
{"t": UNIX_TIME, "event": "reload", "model": MODEL, "round": N,
"load_s": SECONDS_THE_REQUEST_TOOK, "context_length": the context /api/ps
shows the reloaded runner at, read right after}. With --num-ctx N every reload asks
for a context of N tokens: a client whose num_ctx differs from the one the
model was loaded with, which from Ollama 0.30 on makes the scheduler
reload a runner that is still loaded (server/sched.go: needsReload).
Debian's python3, standard library.
"""
import json
import sys
import time
import urllib.request


def call(url, path, body=None, timeout=120):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read() or b"{}")


def loaded(url, model):
    try:
        names = [m["name"] for m in call(url, "/api/ps", timeout=5)["models"]]
    except OSError:
        return None
    return model in names


def context_length(url, model):
    """The context the model's runner was loaded with (/api/ps), None when
    it is not listed."""
    try:
        for m in call(url, "/api/ps", timeout=5)["models"]:
            if m["name"] == model:
                return m.get("context_length")
    except OSError:
        pass
    return None


def main():
    args = sys.argv[1:]
    delay, poll, num_ctx = 0.5, 0.1, None
    while "--num-ctx" in args:
        i = args.index("--num-ctx")
        num_ctx = int(args[i + 1])
        del args[i:i + 2]
    while "--delay" in args:
        i = args.index("--delay")
        delay = float(args[i + 1])
        del args[i:i + 2]
    while "--poll" in args:
        i = args.index("--poll")
        poll = float(args[i + 1])
        del args[i:i + 2]
    url, model, rounds, log = args
    rounds = None if rounds == "forever" else int(rounds)
    done = 0
    was = None
    with open(log, "a", buffering=1) as f:
        while rounds is None or done < rounds:
            now = loaded(url, model)
            if now is None:
                time.sleep(poll)
                continue
            if was is None:
                f.write(json.dumps({"t": time.time(), "event": "ready", "model": model,
                                    "loaded": now}) + "\n")
            if was and not now:
                time.sleep(delay)
                t0 = time.time()
                opts = {"num_predict": 1}
                if num_ctx is not None:
                    opts["num_ctx"] = num_ctx
                call(url, "/api/generate", {"model": model, "prompt": "hello", "stream": False,
                                            "keep_alive": -1, "options": opts})
                done += 1
                f.write(json.dumps({"t": time.time(), "event": "reload", "model": model,
                                    "round": done, "load_s": round(time.time() - t0, 3),
                                    "context_length": context_length(url, model)}) + "\n")
                now = True
            was = now
            time.sleep(poll)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
