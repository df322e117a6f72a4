"""One loopback HTTP server for the tests' fake providers: 127.0.0.1 on an ephemeral port, served
from a daemon thread, stopped on exit. A fake supplies only its request handler (and, for an
OpenAI-compatible base URL, ``path = "/v1"``)."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    """A fake's handler: ``reply(payload)`` writes a JSON response; request logging is off."""

    def reply(self, payload: object, status: int = 200) -> None:
        out = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: object) -> None:
        pass


class LoopbackServer:
    path = ""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads, self.server.block_on_close = True, False
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{self.path}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def stop(proc: subprocess.Popen, wait_s: float = 20) -> None:
    """End a server process the test started: SIGTERM, then SIGKILL if it has not exited in ``wait_s``."""
    proc.terminate()
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
