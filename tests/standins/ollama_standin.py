#!/usr/bin/env python3
"""tests/standins/ollama_standin.py: a STAND-IN for the Ollama HTTP API, for tests only.

This is not Ollama. It serves the part of Ollama's API that the pipeline's
lifecycle stages use, from a model table, with the behaviours documented in
HACKING.md: Ollama (and G21 in pipeline-gotchas(7)) that
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
Admin half (class AdminHandlers; see its docstring), for register, bake
and gate:
  HEAD/POST /api/blobs/sha256:HEX   blob presence / upload (digest checked)
  POST /api/create        JSON form: model, files {name: "sha256:HEX"},
                          template, system, parameters; stream or not
  POST /api/show          modelfile (FROM .../blobs/sha256-HEX), template,
                          parameters, details, model_info
  POST /api/copy          source -> destination, empty 200 body
  DELETE /api/delete      {"model"}
  POST /api/chat          inference forwarded to a real llama-server's
                          /v1/chat/completions (--upstream URL); empty
                          messages load/unload as /api/generate does.
                          With --llama-server BIN instead, every model is
                          served by a llama-server of its own started on
                          its weights blob, as Ollama starts a runner per
                          model: two tags with different weights answer
                          differently (runners stop on exit)
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
    """Seconds, or None for the default; negative: forever."""
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
        self.runners = {}    # (weights hex, ctx) -> (Popen, url), --llama-server
        self.runners_lock = threading.Lock()
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

    def runner(self, m, ctx):
        """--llama-server: the base URL of the llama-server serving this
        model's weights blob with at least ctx of context, started on first
        use (one per blob and context, as Ollama starts a runner per model);
        RuntimeError when it cannot start."""
        import subprocess
        import socket
        import urllib.request
        w = m.get("weights")
        if not w:
            raise RuntimeError("model %s has no weights blob" % m["name"])
        with self.runners_lock:
            key = (w, int(ctx))
            r = self.runners.get(key)
            if r is not None and r[0].poll() is None:
                return r[1]
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            logp = os.path.join(self.blobs_dir, "runner-%s-%d.log" % (w[:12], int(ctx)))
            with open(logp, "ab") as lf:
                p = subprocess.Popen([self.args.llama_server, "-m", os.path.join(self.blobs_dir, "sha256-" + w),
                                      "-c", str(int(ctx)), "-np", "1", "-t", str(self.args.runner_threads),
                                      "--host", "127.0.0.1", "--port", str(port)],
                                     stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            url = "http://127.0.0.1:%d" % port
            for _ in range(600):
                if p.poll() is not None:
                    raise RuntimeError("llama-server exited %s; see %s" % (p.returncode, logp))
                try:
                    with urllib.request.urlopen(url + "/health", timeout=2) as f:
                        if f.status == 200:
                            break
                except OSError:
                    pass
                time.sleep(0.1)
            else:
                p.kill()
                raise RuntimeError("llama-server did not come up; see %s" % logp)
            self.runners[key] = (p, url)
            self.log("runner", m["name"], weights=w, ctx=int(ctx), url=url)
            return url

    def stop_runners(self):
        with self.runners_lock:
            for p, _ in self.runners.values():
                if p.poll() is None:
                    p.terminate()
            for p, _ in self.runners.values():
                try:
                    p.wait(timeout=5)
                except Exception:
                    p.kill()
            self.runners.clear()

    def expire(self):
        """Runners whose keep-alive ran out leave, as Ollama's would."""
        now = time.time()
        for n, r in list(self.loaded.items()):
            if not r["stopping"] and r["expires"] < now:
                del self.loaded[n]
                self.log("expired", n)


class AdminHandlers:
    """The admin half of the API: blobs, create, show, copy, delete, chat.

    A created model is an entry of State.models with its manifest: the
    weights layer is the uploaded blob (as Ollama < 0.30 stores it), plus
    template and params layers; the manifest digest is the sha256 of the
    manifest's bytes, so identical inputs give identical digests and copy
    gives the destination the same digest. (Which template Ollama 0.30 and
    later serve is shown by the real 0.34.2 server in
    ollama/register-template, not here.) Chat forwards to --upstream
    (llama-server); its 400 for an over-long prompt comes back as Ollama's
    400 with the upstream body in "error"; --cut-prompts instead answers
    200 with prompt_eval_count cut to num_ctx/2 + 2 (G01).
    """

    ADMIN_POST = {"/api/create": "admin_create", "/api/show": "admin_show",
                  "/api/copy": "admin_copy", "/api/chat": "admin_chat"}
    MT = "application/vnd.ollama.image."

    def read_json_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n > 0 else b""
        if not raw:
            return None
        try:
            req = json.loads(raw)
        except ValueError:
            return None
        return req if isinstance(req, dict) else None

    def blob_path(self, hexd):
        return os.path.join(self.server.state.blobs_dir, "sha256-" + hexd)

    def blob_digest(self):
        d = self.path.split("?", 1)[0][len("/api/blobs/"):]
        m = re.fullmatch(r"sha256[:-]([0-9a-f]{64})", d)
        return m.group(1) if m else None

    def admin_blob_head(self):
        h = self.blob_digest()
        if h is None:
            return self.send_json(400, {"error": "invalid digest format"})
        code = 200 if os.path.exists(self.blob_path(h)) else 404
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def admin_blob_post(self):
        h = self.blob_digest()
        n = int(self.headers.get("Content-Length") or 0)
        if h is None:
            self.rfile.read(n)
            return self.send_json(400, {"error": "invalid digest format"})
        if os.path.exists(self.blob_path(h)):
            self.rfile.read(n)
            return self.send_json(200, {})
        tmp = self.blob_path(h) + ".partial.%d" % threading.get_ident()
        sha = hashlib.sha256()
        with open(tmp, "wb") as f:
            left = n
            while left > 0:
                chunk = self.rfile.read(min(left, 1 << 20))
                if not chunk:
                    break
                sha.update(chunk)
                f.write(chunk)
                left -= len(chunk)
        if sha.hexdigest() != h:
            os.unlink(tmp)
            return self.send_json(400, {"error": 'digest mismatch, expected "sha256:%s", got "sha256:%s"'
                                        % (h, sha.hexdigest())})
        os.rename(tmp, self.blob_path(h))
        self.server.state.log("blob", None, digest=h, size=n)
        return self.send_json(201, {})

    def admin_create(self, req):
        st = self.server.state
        if req is None:
            return self.send_json(400, {"error": "missing request body"})
        name = req.get("model") or req.get("name")
        files = req.get("files") or {}
        if not isinstance(name, str) or not name:
            return self.send_json(400, {"error": "model is required"})
        if not isinstance(files, dict) or len(files) != 1:
            return self.send_json(400, {"error": "neither 'from' or 'files' was specified"})
        fname, dig = next(iter(files.items()))
        if fname.startswith("/") or ".." in fname.split("/"):
            return self.send_json(400, {"error": "file path must be relative"})
        m = re.fullmatch(r"sha256:([0-9a-f]{64})", dig or "")
        if not m:
            return self.send_json(400, {"error": "invalid digest format"})
        w = m.group(1)
        if not os.path.exists(self.blob_path(w)):
            return self.send_json(400, {"error": "blob sha256:%s not found" % w})
        with open(self.blob_path(w), "rb") as f:
            if f.read(4) != b"GGUF":
                return self.send_json(400, {"error": "unsupported file format"})
        template = req.get("template") or ""
        params = req.get("parameters") or {}
        system = req.get("system") or ""
        layers = [{"mediaType": self.MT + "model", "digest": "sha256:" + w,
                   "size": os.path.getsize(self.blob_path(w))}]
        for kind, body in (("template", template), ("system", system),
                           ("params", json.dumps(params, sort_keys=True))):
            if body:
                layers.append({"mediaType": self.MT + kind,
                               "digest": "sha256:" + hashlib.sha256(body.encode()).hexdigest(),
                               "size": len(body.encode())})
        manifest = json.dumps({"schemaVersion": 2, "layers": layers}, sort_keys=True)
        n = norm(name)
        with st.lock:
            st.models[n] = {"name": n, "size": layers[0]["size"], "weights": w,
                            "digest": hashlib.sha256(manifest.encode()).hexdigest(),
                            "template": template, "system": system, "parameters": params}
            st.log("create", n, weights=w)
        steps = [{"status": "parsing GGUF"}, {"status": "using existing layer sha256:" + w}]
        steps += [{"status": "creating new layer " + l["digest"]} for l in layers[1:]]
        steps += [{"status": "writing manifest"}, {"status": "success"}]
        if req.get("stream") is False:
            return self.send_json(200, steps[-1])
        body = "".join(json.dumps(x) + "\n" for x in steps).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def lookup(self, req, key="model"):
        st = self.server.state
        name = (req or {}).get(key) or (req or {}).get("name")
        if not isinstance(name, str) or not name:
            return None, None
        return name, st.models.get(norm(name))

    def admin_show(self, req):
        st = self.server.state
        name, m = self.lookup(req)
        if name is None:
            return self.send_json(400, {"error": "model is required"})
        if m is None:
            return self.send_json(404, {"error": "model '%s' not found" % name})
        w = m.get("weights") or hashlib.sha256(("weights:" + m["name"]).encode()).hexdigest()
        template = m.get("template", "")
        params = m.get("parameters", {})
        plines, mflines = [], ["# Modelfile generated by \"ollama show\"",
                               "FROM %s" % os.path.join(st.blobs_dir, "sha256-" + w),
                               'TEMPLATE """%s"""' % template]
        for k, v in sorted(params.items()):
            for x in (v if isinstance(v, list) else [v]):
                plines.append("%-30s %s" % (k, json.dumps(x) if isinstance(x, str) else x))
                mflines.append("PARAMETER %s %s" % (k, x))
        return self.send_json(200, {
            "modelfile": "\n".join(mflines) + "\n", "parameters": "\n".join(plines),
            "template": template, "system": m.get("system", ""),
            "details": {"format": "gguf", "family": "gemma3", "parameter_size": "0B",
                        "quantization_level": "Q8_0"},
            "model_info": {"general.architecture": "gemma3",
                           "gemma3.context_length": st.args.context_length},
            "capabilities": ["completion"]})

    def admin_copy(self, req):
        st = self.server.state
        src, m = self.lookup(req, "source")
        dst = (req or {}).get("destination")
        if src is None or not isinstance(dst, str) or not dst:
            return self.send_json(400, {"error": "invalid source or destination"})
        if m is None:
            return self.send_json(404, {"error": 'model "%s" not found' % src})
        with st.lock:
            c = dict(m)
            c["name"] = norm(dst)
            st.models[norm(dst)] = c
            st.log("copy", norm(src), destination=norm(dst))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def admin_delete(self, req):
        st = self.server.state
        name, m = self.lookup(req)
        if name is None:
            return self.send_json(400, {"error": "model is required"})
        if m is None:
            return self.send_json(404, {"error": "model '%s' not found" % name})
        with st.lock:
            del st.models[norm(name)]
            st.log("delete", norm(name))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def admin_chat(self, req):
        st = self.server.state
        if req is None:
            return self.send_json(400, {"error": "missing request body"})
        name, m = self.lookup(req)
        if name is None:
            return self.send_json(400, {"error": "model is required"})
        if m is None:
            return self.send_json(404, {"error": "model '%s' not found" % name})
        n = norm(name)
        opts = req.get("options") or {}
        msgs = req.get("messages") or []
        try:
            ka = req.get("keep_alive")
            secs = parse_keep_alive(ka) if ka is not None else None
        except ValueError as e:
            return self.send_json(400, {"error": str(e)})
        base = {"model": name, "created_at": rfc3339(time.time()), "done": True}
        with st.lock:
            if not msgs and secs == 0:
                st.unload(n)
                base.update({"message": {"role": "assistant", "content": ""},
                             "done_reason": "unload"})
                return self.send_json(200, base)
            ctx = opts.get("num_ctx") or m.get("parameters", {}).get("num_ctx") or st.args.num_ctx
            st.load(n, secs if secs is not None else 300.0, ctx)
            if not msgs:
                base.update({"message": {"role": "assistant", "content": ""},
                             "done_reason": "load"})
                return self.send_json(200, base)
            st.log("chat", n)
        upstream = st.args.upstream
        if st.args.llama_server:
            try:
                upstream = st.runner(m, ctx)
            except RuntimeError as e:
                return self.send_json(500, {"error": "llama runner: %s" % e})
        if not upstream:
            return self.send_json(500, {"error": "stand-in: no --upstream for inference"})
        up = {"model": "upstream", "messages": msgs, "stream": False, "cache_prompt": False,
              "temperature": opts.get("temperature", 0.8), "seed": opts.get("seed", -1)}
        if "num_predict" in opts:
            up["max_tokens"] = opts["num_predict"]
        fmt = req.get("format")
        if isinstance(fmt, dict):
            up["response_format"] = {"type": "json_schema",
                                     "json_schema": {"name": "format", "schema": fmt}}
        elif fmt == "json":
            up["response_format"] = {"type": "json_object"}
        import urllib.request, urllib.error
        t0 = time.time()
        r = urllib.request.Request(upstream.rstrip("/") + "/v1/chat/completions",
                                   data=json.dumps(up).encode(),
                                   headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(r, timeout=600) as f:
                ans = json.loads(f.read())
        except urllib.error.HTTPError as e:
            body = e.read().decode(errors="replace")
            if e.code == 400 and "exceed" in body and st.args.cut_prompts:
                # Ollama's silent half-context cut (G01): 200, and only
                # prompt_eval_count shows it.
                base.update({"message": {"role": "assistant", "content": "{}"},
                             "done_reason": "stop", "prompt_eval_count": ctx // 2 + 2,
                             "eval_count": 2})
                return self.send_json(200, base)
            return self.send_json(e.code, {"error": body})
        except (urllib.error.URLError, OSError) as e:
            return self.send_json(500, {"error": "llama runner: %s" % e})
        c0 = (ans.get("choices") or [{}])[0]
        u = ans.get("usage") or {}
        dt = int((time.time() - t0) * 1e9)
        base.update({"message": {"role": "assistant",
                                 "content": (c0.get("message") or {}).get("content") or ""},
                     "done_reason": c0.get("finish_reason") or "",
                     "total_duration": dt, "eval_duration": dt})
        # omitempty: zero metrics are absent, as Ollama sends them
        if u.get("prompt_tokens"):
            base["prompt_eval_count"] = u["prompt_tokens"]
        if u.get("completion_tokens"):
            base["eval_count"] = u["completion_tokens"]
        return self.send_json(200, base)


class Handler(AdminHandlers, BaseHTTPRequestHandler):
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
        if self.path.startswith("/api/blobs/"):
            return self.admin_blob_head()
        self.do_GET()

    def do_DELETE(self):
        if self.path.split("?", 1)[0] == "/api/delete":
            return self.admin_delete(self.read_json_body())
        return self.send_json(405, {"error": "405 method not allowed"})

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
                    # --vram-fraction: a model only partly on the GPU, the
                    # rest on the CPU, as Ollama reports it when VRAM runs
                    # short (G22).
                    vram = int(e["size"] * st.args.vram_fraction)
                    e.update({"size_vram": vram, "expires_at": rfc3339(min(r["expires"], time.time() + 292 * 365 * 86400)),
                              "context_length": r["ctx"]})
                    del e["modified_at"]
                    out.append(e)
            return self.send_json(200, {"models": out})
        return self.send_json(404, {"error": "404 page not found"})

    @staticmethod
    def entry(st, n):
        m = st.models[n]
        return {"name": n, "model": n, "size": m["size"],
                "digest": m.get("digest") or hashlib.sha256(n.encode()).hexdigest(),
                "modified_at": rfc3339(0),
                "details": {"format": "gguf", "family": "standin",
                            "parameter_size": "0B", "quantization_level": "Q8_0"}}

    def do_POST(self):
        st = self.server.state
        path = self.path.split("?", 1)[0]
        if path.startswith("/api/blobs/"):
            return self.admin_blob_post()
        if path in self.ADMIN_POST:
            return getattr(self, self.ADMIN_POST[path])(self.read_json_body())
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
    ap.add_argument("--vram-fraction", type=float, default=1.0,
                    help="size_vram reported as this fraction of size (G22: a model partly on the CPU)")
    ap.add_argument("--log")
    ap.add_argument("--version", default="0.12.6")
    ap.add_argument("--verbose", action="store_true")
    # admin half (AdminHandlers)
    ap.add_argument("--upstream", help="llama-server base URL for /api/chat")
    ap.add_argument("--llama-server", help="llama-server program: one runner per model's weights")
    ap.add_argument("--runner-threads", type=int, default=1)
    ap.add_argument("--blobs-dir", help="where blobs go (default: a temporary dir)")
    ap.add_argument("--cut-prompts", action="store_true")
    ap.add_argument("--context-length", type=int, default=131072,
                    help="model_info <arch>.context_length that show reports")
    args = ap.parse_args()
    if args.race is not None and args.race != "forever":
        try:
            if int(args.race) < 0:
                raise ValueError
        except ValueError:
            ap.error("--race takes a count or 'forever'")

    st = State(args)
    if args.blobs_dir:
        os.makedirs(args.blobs_dir, exist_ok=True)
        st.blobs_dir = args.blobs_dir
    else:
        import tempfile
        st.blobs_dir = tempfile.mkdtemp(prefix="ollama-standin-blobs.")
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
    import signal
    # SIGTERM stops the runners too (--llama-server), as stopping Ollama does.
    def on_term(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        srv.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        st.stop_runners()


if __name__ == "__main__":
    main()
