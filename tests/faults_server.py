"""A misbehaving model provider on 127.0.0.1 for the fault suites: every fault is bounded in time.

Each request is answered by the next :class:`Fault` in the queue (the last one repeats):

* ``reply``: status, headers and a body (bytes, sent at once);
* ``trickle``: a valid 200 body sent one byte every ``gap_s`` seconds;
* ``hang``: read the request, then send nothing until ``hang_s`` passes or the server stops.

The server stops every pending handler on exit, so no test waits for it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from loopback import LoopbackServer

SECRET = "sk-fault-0123456789abcdefSECRETTAIL"


@dataclass(frozen=True)
class Fault:
    kind: str = "reply"  # reply | trickle | hang
    status: int = 200
    body: bytes = b"{}"
    headers: dict = field(default_factory=dict)
    gap_s: float = 0.25
    hang_s: float = 8.0


def reply(body: Any, status: int = 200, **headers: str) -> Fault:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Fault("reply", status, data, {k.replace("_", "-"): v for k, v in headers.items()})


def openai_ok(text: str = "fine") -> dict:
    return {"id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


def deep_json(levels: int) -> bytes:
    """A Chat Completions body whose content is a list nested ``levels`` deep."""
    head = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": '
    return head + b"[" * levels + b"]" * levels + b'}, "finish_reason": "stop"}]}'


class FaultServer(LoopbackServer):
    def __init__(self, *faults: Fault) -> None:
        self.faults, self.requests = list(faults), 0
        self.stop = threading.Event()
        super().__init__(self._handler())

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        super().__exit__(*exc)

    def _next(self) -> Fault:
        fault = self.faults[min(self.requests, len(self.faults) - 1)]
        self.requests += 1
        return fault

    def _handler(self) -> type:
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                self.rfile.read(int(self.headers.get("content-length", 0)))
                fault = srv._next()
                try:
                    if fault.kind == "hang":
                        srv.stop.wait(fault.hang_s)
                        return
                    body = json.dumps(openai_ok("trickled answer")).encode() if fault.kind == "trickle" else fault.body
                    self.send_response(fault.status)
                    for k, v in {"content-type": "application/json", **fault.headers}.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    if fault.kind == "trickle":
                        for i in range(len(body)):
                            if srv.stop.wait(fault.gap_s):
                                return
                            self.wfile.write(body[i:i + 1])
                            self.wfile.flush()
                    else:
                        self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def elapsed(start: float) -> float:
    return time.monotonic() - start
