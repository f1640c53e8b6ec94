#!/usr/bin/env python3
"""hook_receiver.py: a webhook receiver on loopback for tests (http/notify).

  hook_receiver.py --port-file F --log L --secret S [--fail-file X] [--hang-file H] [--hang S]
                   [--fail-first-every N]

Checks each POST's X-Pipelined-Signature-256 against HMAC-SHA256 of the
body under its own secret, as a real receiver would (401 when it does not
match); answers 500 while the file X exists; when the file H exists, removes
it and sleeps S seconds before answering (a receiver that hangs). Every
request is one JSON line in L: key, event, sig_ok, status, body."""
import argparse, hashlib, hmac, json, os, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--port-file", required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--secret", required=True)
ap.add_argument("--fail-file")
ap.add_argument("--hang-file")
ap.add_argument("--hang", type=float, default=5)
ap.add_argument("--port", type=int, default=0)
ap.add_argument("--fail-first-every", type=int, default=0,
                help="answer 500 to the first try of every Nth new key")
a = ap.parse_args()


seen, lock = set(), threading.Lock()


class H(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        want = "sha256=" + hmac.new(a.secret.encode(), body, hashlib.sha256).hexdigest()
        got = self.headers.get("X-Pipelined-Signature-256", "")
        ok = hmac.compare_digest(want, got)
        if a.hang_file and os.path.exists(a.hang_file):
            os.unlink(a.hang_file)
            time.sleep(a.hang)
        status = 401 if not ok else 500 if a.fail_file and os.path.exists(a.fail_file) else 200
        key = self.headers.get("Idempotency-Key")
        with lock:
            new = key not in seen
            seen.add(key)
            if status == 200 and new and a.fail_first_every and len(seen) % a.fail_first_every == 0:
                status = 500
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        rec = {"key": key, "event": self.headers.get("X-Pipelined-Event"),
               "sig_ok": ok, "status": status, "body": doc, "t": time.time()}
        with open(a.log, "a") as f:
            f.write(json.dumps(rec) + "\n")
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


srv = ThreadingHTTPServer(("127.0.0.1", a.port), H)
tmp = a.port_file + ".tmp"
with open(tmp, "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(tmp, a.port_file)
srv.serve_forever()
