#!/usr/bin/python3
"""drop_truncate_proxy.py: a forwarding HTTP proxy in front of a REAL
Ollama server (tests only) that sends every request on as it came, except
that a JSON body's "truncate" field is taken out: the shape of a live
client that does not send truncate:false, so that the server answers an
over-long prompt as it answers such clients (from 0.30: the prompt cut in
the runner, a 200 whose prompt_eval_count is short of the prompt). The
answers are the server's own, passed back unchanged.

    drop_truncate_proxy.py UPSTREAM_URL PORT_FILE

It listens on a free loopback port, writes that port to PORT_FILE once
listening, and counts the bodies it changed in PORT_FILE.dropped (one line
each). Debian's python3, standard library.
"""
import http.server
import json
import os
import sys
import urllib.error
import urllib.request

UPSTREAM, PORT_FILE = sys.argv[1].rstrip("/"), sys.argv[2]


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        if body:
            try:
                j = json.loads(body)
            except ValueError:
                j = None
            if isinstance(j, dict) and "truncate" in j:
                del j["truncate"]
                body = json.dumps(j).encode()
                with open(PORT_FILE + ".dropped", "a") as f:
                    f.write(self.path + "\n")
        req = urllib.request.Request(UPSTREAM + self.path, data=body, method=self.command,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                status, data = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, data = e.code, e.read()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_HEAD = forward


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    tmp = PORT_FILE + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, PORT_FILE)
    srv.serve_forever()


if __name__ == "__main__":
    main()
