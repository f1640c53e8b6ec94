#!/usr/bin/python3
"""tests/standins/vllm_standin.py: a STAND-IN for vLLM's OpenAI-compatible server, for the
bake tests only (vLLM needs a GPU and cannot be installed here).

Serves what the bake reads from vLLM (HACKING.md: llama-server and
vLLM) and nothing else:
  GET /props              404, as vLLM has no such endpoint
  GET /v1/models          {"data": [{"id", "max_model_len"}]}
  POST /v1/chat/completions
                          forwarded to a real llama-server (--upstream);
                          its context refusal comes back in vLLM's old flat
                          envelope {"object": "error", "message": "This
                          model's maximum context length is N tokens. ...",
                          "type": "BadRequestError", "code": 400}
Usage: vllm_standin.py --upstream URL --max-model-len N --port-file F
"""
import argparse
import json
import os
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        a = self.server.args
        if self.path == "/v1/models":
            return self.send_json(200, {"object": "list", "data": [
                {"id": a.model, "object": "model", "owned_by": "vllm",
                 "max_model_len": a.max_model_len}]})
        return self.send_json(404, {"detail": "Not Found"})

    def do_POST(self):
        a = self.server.args
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/v1/chat/completions":
            return self.send_json(404, {"detail": "Not Found"})
        req = urllib.request.Request(a.upstream + "/v1/chat/completions", data=raw,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as f:
                return self.send_json(200, json.loads(f.read()))
        except urllib.error.HTTPError as e:
            body = json.loads(e.read() or b"{}")
            err = body.get("error") or {}
            if err.get("type") == "exceed_context_size_error":
                return self.send_json(400, {
                    "object": "error", "type": "BadRequestError", "code": 400,
                    "message": "This model's maximum context length is %d tokens. However, "
                               "you requested %d tokens." % (a.max_model_len,
                                                            err.get("n_prompt_tokens", 0))})
            return self.send_json(e.code, body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--max-model-len", type=int, required=True)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.args = args
    with open(args.port_file + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(args.port_file + ".tmp", args.port_file)
    srv.serve_forever(poll_interval=0.1)


if __name__ == "__main__":
    main()
