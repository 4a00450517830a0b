"""Fault injection for REST catalog commits: an HTTP proxy in front of a real REST catalog.

Forwards every request to --target unchanged, except the first --count table commits
(POST .../namespaces/{ns}/tables/{t}), which it breaks in one of two ways:

  lose-response  forward the commit (the server applies it), then answer 504 to the client,
                 as a gateway timeout after the request was sent would;
  drop-request   answer 504 without forwarding (the server never sees it);
  unavailable    answer 503 without forwarding (a server that sheds load).

Prints "ready <port>" on stdout once listening, then serves until killed. Each broken commit
is logged as one JSON line on stderr.
"""
import argparse
import http.server
import json
import re
import sys
import threading
import urllib.error
import urllib.request

COMMIT = re.compile(r"^/v1/(.+/)?namespaces/[^/]+/tables/[^/]+/?$")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True, help="REST catalog base URI, e.g. http://127.0.0.1:8181")
    p.add_argument("--mode", choices=["lose-response", "drop-request", "unavailable"], required=True)
    p.add_argument("--count", type=int, default=1, help="commits to break")
    args = p.parse_args()
    target = args.target.rstrip("/")
    lock = threading.Lock()
    remaining = [args.count]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # quiet
            pass

        def _forward(self, body: bytes):
            req = urllib.request.Request(target + self.path, data=body if body else None, method=self.command)
            for k, v in self.headers.items():
                if k.lower() not in ("host", "content-length", "connection", "accept-encoding"):
                    req.add_header(k, v)
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    return r.status, r.headers, r.read()
            except urllib.error.HTTPError as e:
                return e.code, e.headers, e.read()

        def _answer(self, status: int, headers, payload: bytes):
            self.send_response(status)
            ctype = headers.get("Content-Type") if headers else None
            self.send_header("Content-Type", ctype or "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        def _handle(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            broken = False
            if self.command == "POST" and COMMIT.match(self.path.split("?")[0]):
                with lock:
                    if remaining[0] > 0:
                        remaining[0] -= 1
                        broken = True
            if broken:
                forwarded = None
                if args.mode == "lose-response":
                    forwarded, _, _ = self._forward(body)
                print(json.dumps({"broken": self.path, "mode": args.mode, "server_status": forwarded}),
                      file=sys.stderr, flush=True)
                code = 503 if args.mode == "unavailable" else 504
                msg = json.dumps({"error": {"message": "injected fault", "type": "InjectedFault", "code": code}}).encode()
                self._answer(code, None, msg)
                return
            status, headers, payload = self._forward(body)
            self._answer(status, headers, payload)

        do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _handle

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
