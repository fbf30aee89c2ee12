"""A loopback proxy in front of writ that answers 503 first, then forwards.

writ answers 503 with `Retry-After` when it is over its in-flight limit or
its store is down (docs/http-api.md, "Backpressure"); neither can be made
to happen on cue against one real server, so this proxy answers the first
``fail`` requests with writ's own backpressure problem, then forwards every
request to the real server unchanged.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List


class FlakyProxy:
    def __init__(self, upstream: str, fail: int = 1, retry_after: str = "2", only: str = "") -> None:
        """``only``: fail only the requests whose path contains it (every request when empty)."""
        self.upstream = upstream.rstrip("/")
        self.only = only
        self.remaining = fail
        self.retry_after = retry_after
        self.seen: List[str] = []  # "503 /v1/check", "200 /v1/check", ...
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    fail_now = proxy.remaining > 0 and proxy.only in self.path
                    if fail_now:
                        proxy.remaining -= 1
                if fail_now:
                    doc = json.dumps({"type": "urn:writ:problem:unavailable", "title": "Service unavailable",
                                      "status": 503, "detail": "writ is serving 1024 requests; retry later",
                                      "instance": self.path, "code": "unavailable"}).encode()
                    proxy.seen.append(f"503 {self.path}")
                    self.send_response(503)
                    self.send_header("Content-Type", "application/problem+json")
                    self.send_header("Retry-After", proxy.retry_after)
                    self.send_header("Content-Length", str(len(doc)))
                    self.end_headers()
                    self.wfile.write(doc)
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                req = urllib.request.Request(proxy.upstream + self.path, data=body or None,
                                             method=self.command, headers=headers)
                try:
                    with urllib.request.urlopen(req) as resp:
                        status, rh, rb = resp.status, resp.headers, resp.read()
                except urllib.error.HTTPError as e:
                    status, rh, rb = e.code, e.headers, e.read()
                proxy.seen.append(f"{status} {self.path}")
                self.send_response(status)
                for k, v in rh.items():
                    if k.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(rb)))
                self.end_headers()
                self.wfile.write(rb)

            do_GET = _handle
            do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
