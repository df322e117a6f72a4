"""Request-size limits enforced before any parsing, as JSON 413 errors that say what to change.

:class:`BodyLimit` is pure ASGI: it refuses a declared ``Content-Length`` over the limit at once and
reads a body without one (chunked) up to the limit before the app sees it, so a chunked body cannot
sneak past and gets the same JSON 413. Uploads to ``/api/ingest`` get their own, larger limit.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

from starlette.exceptions import HTTPException

from bara.serve.errors import error_body

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class TooLarge(HTTPException):
    """Raised from ``receive`` when a body passes its declared size's limit. An HTTPException, so
    FastAPI's body parser re-raises it (instead of a generic 400) when nothing wraps ``receive``."""

    def __init__(self, limit: int, what: str):
        super().__init__(413, _message(limit, what))


def _message(limit: int, what: str) -> str:
    return (f"the {what} is larger than {limit} bytes: send less (fewer or shorter messages, a smaller "
            "file) or ask the operator to raise the limit")


def _refusal(limit: int, what: str) -> bytes:
    return json.dumps(error_body("request_too_large", _message(limit, what))).encode()


class BodyLimit:
    def __init__(self, app: Any, max_bytes: int, upload_bytes: int, upload_paths: tuple[str, ...] = ("/api/ingest",)):
        self.app, self.max_bytes, self.upload_bytes, self.upload_paths = app, max_bytes, upload_bytes, upload_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        upload = scope.get("path", "") in self.upload_paths
        limit = self.upload_bytes if upload else self.max_bytes
        what = "upload" if upload else "request body"
        checked = await _within_limit(scope, receive, limit)
        if checked is None:
            await _send_413(send, limit, what)
            return
        receive = checked
        seen, started = 0, False

        async def counted() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise TooLarge(limit, what)
            return message

        async def tracking_send(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracking_send)
        except TooLarge:
            if not started:
                await _send_413(send, limit, what)


async def _within_limit(scope: Scope, receive: Receive, limit: int) -> Receive | None:
    """None when the body is over ``limit`` (declared, or read whole when streamed without a length), else
    the ``receive`` the app should use."""
    declared = dict(scope.get("headers") or []).get(b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    if declared is None:  # streamed (chunked): read it whole here, so the refusal is ours, not a parse error
        body = await _read_capped(receive, limit)
        return None if body is None else _replay(body, receive)
    return receive


async def _read_capped(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None as soon as it passes ``limit`` bytes."""
    parts: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts)  # a disconnect: the app sees a short body and the disconnect after it
        parts.append(message.get("body", b""))
        seen += len(parts[-1])
        if seen > limit:
            return None
        if not message.get("more_body", False):
            return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


async def _send_413(send: Send, limit: int, what: str) -> None:
    body = _refusal(limit, what)
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
