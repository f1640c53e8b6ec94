#!/usr/bin/env python3
"""ollama_standin.py: a STAND-IN for the Ollama HTTP API, for tests only.

This is not Ollama. It serves the part of Ollama's API that the pipeline's
lifecycle stages use, from a model table, with the behaviours documented in
shared/reference/inference-api.md section 1 (and G21 in gotchas.md) that
the stages must cope with. Python standard library only.

Served:
  GET/HEAD /              "Ollama is running"
  GET /api/version        {"version": VERSION}
  GET /api/tags           the model table (name, model, size, digest, ...)
  GET /api/ps             the loaded runners: name, model, size, size_vram,
                          digest, expires_at (in the past while "Stopping"),
                          context_length; sorted by expires_at, latest first
  POST /api/generate      only the lifecycle forms:
                          - no prompt, keep_alive 0 (or "0", "0s"): unload.
                            Answers {"done_reason": "unload"} AT ONCE; the
                            runner stays listed by ps (expires_at in the
                            past) for --unload-delay seconds, then goes.
                            Unloading a model that is not loaded is a no-op
                            answered 200 "unload", as Ollama does.
                          - no prompt, other keep_alive: load (pre-warm),
                            {"done_reason": "load"}.
                          - a prompt: loads the model and answers a fixed
                            text, {"done_reason": "stop"}.
                          Unknown model: 404 {"error": "model 'X' not found"}.
                          Missing body or bad JSON: 400.
Names normalise as Ollama's do: "m" is "m:latest", case-insensitively; the
listings always print the tag.

The G21 reload race: with --race N, every time a model's runner is gone
after an eviction, "production traffic" loads it again --race-delay seconds
later, N times per model (--race forever: no end). --race-models limits the
race to the named models. Every request and state change is appended to
--log as a JSON line {"t", "event", "model", ...}; events are "load",
"unload" (an eviction request), "gone" (the runner left), "reload" (the
race brought it back), "generate".

Usage:
  ollama_standin.py [--port N | --port-file F] [--model NAME[=SIZE_MB]]...
      [--models-file JSON] [--loaded NAME]... [--unload-delay S]
      [--race N|forever] [--race-delay S] [--race-models A,B] [--log F]
      [--version V]

--models-file holds {"models": [{"name": "m:tag", "size_mb": 4100}, ...],
"loaded": ["m:tag", ...]}. --loaded names models loaded at start (keep
alive forever). With --port-file the server binds an ephemeral port and
writes it (then a newline) to the file, atomically, once it listens.

Extend it (blobs, create, show, copy, chat) in the same style: state in
State, one method per route.
"""
import argparse
import datetime
import hashlib
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FOREVER = 10 ** 9


def norm(name):
    """Ollama's name normalisation, as the client compares: lower case,
    default namespace dropped, ":latest" when no tag."""
    n = name.strip().lower()
    for p in ("registry.ollama.ai/library/", "library/"):
        if n.startswith(p) and len(n) > len(p):
            n = n[len(p):]
            break
    last = n.rsplit("/", 1)[-1]
    if ":" not in last:
        n += ":latest"
    return n


def rfc3339(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(
        timespec="microseconds").replace("+00:00", "Z")


def parse_keep_alive(v):
    """Seconds, or None for the default; negative: forever (1.2)."""
    if v is None:
        return 300.0
    if isinstance(v, bool):
        raise ValueError("keep_alive: not a duration")
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        if v in ("0",):
            return 0.0
        m = re.fullmatch(r"(-?)((?:\d+(?:\.\d+)?(?:ns|us|ms|s|m|h))+)", v)
        if not m:
            raise ValueError('time: missing unit in duration "%s"' % v)
        mult = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
        secs = sum(float(x) * mult[u] for x, u in
                   re.findall(r"(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)", m.group(2)))
        return -secs if m.group(1) else secs
    raise ValueError("keep_alive: not a duration")


class State:
    def __init__(self, args):
        self.lock = threading.Lock()
        self.models = {}     # norm name -> {"name", "size"}
        self.loaded = {}     # norm name -> {"expires", "stopping", "ctx"}
        self.race_left = {}  # norm name -> remaining reloads
        self.args = args
        self.logf = open(args.log, "a", buffering=1) if args.log else None
        self.race_models = None
        if args.race_models:
            self.race_models = {norm(x) for x in args.race_models.split(",") if x}

    def log(self, event, model, **kw):
        if self.logf is None:
            return
        rec = {"t": round(time.time(), 3), "event": event, "model": model}
        rec.update(kw)
        self.logf.write(json.dumps(rec) + "\n")

    def add_model(self, name, size_mb):
        n = norm(name)
        self.models[n] = {"name": n, "size": int(size_mb * 1024 * 1024)}

    def race_budget(self, n):
        if self.args.race is None:
            return 0
        if self.race_models is not None and n not in self.race_models:
            return 0
        if n not in self.race_left:
            self.race_left[n] = FOREVER if self.args.race == "forever" else int(self.args.race)
        return self.race_left[n]

    # Callers hold the lock.
    def load(self, n, ka, ctx=None, event="load"):
        """ka: keep-alive seconds, negative for forever."""
        exp = time.time() + (FOREVER if ka < 0 else ka)
        self.loaded[n] = {"expires": exp, "stopping": False,
                          "ctx": ctx or self.args.num_ctx, "gen": self.loaded.get(n, {}).get("gen", 0) + 1}
        self.log(event, n)

    def unload(self, n):
        self.log("unload", n, loaded=n in self.loaded)
        r = self.loaded.get(n)
        if r is None:
            return
        r["stopping"] = True
        r["expires"] = time.time() - 0.001
        gen = r["gen"]
        t = threading.Timer(self.args.unload_delay, self.gone, (n, gen))
        t.daemon = True
        t.start()

    def gone(self, n, gen):
        with self.lock:
            r = self.loaded.get(n)
            if r is None or r["gen"] != gen or not r["stopping"]:
                return
            del self.loaded[n]
            self.log("gone", n)
            left = self.race_budget(n)
            if left <= 0:
                return
            self.race_left[n] = left - 1
        t = threading.Timer(self.args.race_delay, self.reload, (n,))
        t.daemon = True
        t.start()

    def reload(self, n):
        with self.lock:
            if n in self.loaded and not self.loaded[n]["stopping"]:
                return
            self.load(n, 300.0, event="reload")

    def expire(self):
        """Runners whose keep-alive ran out leave, as Ollama's would."""
        now = time.time()
        for n, r in list(self.loaded.items()):
            if not r["stopping"] and r["expires"] < now:
                del self.loaded[n]
                self.log("expired", n)


class Handler(BaseHTTPRequestHandler):
    server_version = "ollama-standin/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        if self.server.state.args.verbose:
            sys.stderr.write("standin: " + fmt % a + "\n")

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        st = self.server.state
        path = self.path.split("?", 1)[0]
        if path == "/":
            body = b"Ollama is running"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return
        if path == "/api/version":
            return self.send_json(200, {"version": st.args.version})
        if path == "/api/tags":
            with st.lock:
                out = [self.entry(st, n) for n in sorted(st.models)]
            return self.send_json(200, {"models": out})
        if path == "/api/ps":
            with st.lock:
                st.expire()
                items = sorted(st.loaded.items(), key=lambda kv: -kv[1]["expires"])
                out = []
                for n, r in items:
                    e = self.entry(st, n)
                    e.update({"size_vram": e["size"], "expires_at": rfc3339(min(r["expires"], time.time() + 292 * 365 * 86400)),
                              "context_length": r["ctx"]})
                    del e["modified_at"]
                    out.append(e)
            return self.send_json(200, {"models": out})
        return self.send_json(404, {"error": "404 page not found"})

    @staticmethod
    def entry(st, n):
        m = st.models[n]
        return {"name": n, "model": n, "size": m["size"],
                "digest": hashlib.sha256(n.encode()).hexdigest(),
                "modified_at": rfc3339(0),
                "details": {"format": "gguf", "family": "standin",
                            "parameter_size": "0B", "quantization_level": "Q8_0"}}

    def do_POST(self):
        st = self.server.state
        path = self.path.split("?", 1)[0]
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n > 0 else b""
        if path != "/api/generate":
            return self.send_json(404, {"error": "404 page not found"})
        if not raw:
            return self.send_json(400, {"error": "missing request body"})
        try:
            req = json.loads(raw)
            if not isinstance(req, dict):
                raise ValueError("json: cannot unmarshal into Go value of type api.GenerateRequest")
        except ValueError as e:
            return self.send_json(400, {"error": str(e)})
        name = req.get("model")
        if not isinstance(name, str) or not name:
            return self.send_json(400, {"error": "model is required"})
        mn = norm(name)
        with st.lock:
            if mn not in st.models:
                return self.send_json(404, {"error": "model '%s' not found" % name})
            try:
                ka = req.get("keep_alive")
                secs = parse_keep_alive(ka) if ka is not None else None
            except ValueError as e:
                return self.send_json(400, {"error": str(e)})
            prompt = req.get("prompt") or ""
            ctx = (req.get("options") or {}).get("num_ctx")
            base = {"model": name, "created_at": rfc3339(time.time()),
                    "response": "", "done": True}
            if not prompt and secs == 0:
                st.unload(mn)
                base["done_reason"] = "unload"
                return self.send_json(200, base)
            st.load(mn, secs if secs is not None else 300.0, ctx)
            if not prompt:
                base["done_reason"] = "load"
                return self.send_json(200, base)
            st.log("generate", mn)
        base.update({"response": "stand-in answer", "done_reason": "stop"})
        return self.send_json(200, base)


def main():
    ap = argparse.ArgumentParser(description="Ollama API STAND-IN for tests")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--model", action="append", default=[],
                    help="NAME[=SIZE_MB], repeatable")
    ap.add_argument("--models-file")
    ap.add_argument("--loaded", action="append", default=[])
    ap.add_argument("--unload-delay", type=float, default=0.3)
    ap.add_argument("--race", default=None, help="N or forever")
    ap.add_argument("--race-delay", type=float, default=1.5)
    ap.add_argument("--race-models", default=None)
    ap.add_argument("--num-ctx", type=int, default=4096)
    ap.add_argument("--log")
    ap.add_argument("--version", default="0.12.6")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    if args.race is not None and args.race != "forever":
        try:
            if int(args.race) < 0:
                raise ValueError
        except ValueError:
            ap.error("--race takes a count or 'forever'")

    st = State(args)
    loaded = list(args.loaded)
    if args.models_file:
        with open(args.models_file) as f:
            tab = json.load(f)
        for m in tab.get("models", []):
            st.add_model(m["name"], float(m.get("size_mb", 1000)))
        loaded += tab.get("loaded", [])
    for spec in args.model:
        name, _, size = spec.partition("=")
        st.add_model(name, float(size) if size else 1000.0)
    for name in loaded:
        n = norm(name)
        if n not in st.models:
            st.add_model(n, 1000.0)
        st.load(n, -1.0)

    srv = ThreadingHTTPServer((args.host, args.port), Handler)
    srv.daemon_threads = True
    srv.state = st
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % srv.server_address[1])
        os.rename(tmp, args.port_file)
    try:
        srv.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
