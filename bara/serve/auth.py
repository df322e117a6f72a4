"""Who is asking: the user comes only from ``Authorization: Bearer <key>``, never from a body field.

``caller`` is the FastAPI dependency every private route uses. It also holds one of the key's
concurrency slots for the duration of the request (``Settings.serve_max_concurrent_per_key``).
"""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import contextmanager
from typing import Iterator

from fastapi import Request

from bara.serve.errors import ApiError
from bara.memory.api_keys import ApiKey

_BEARER = {"WWW-Authenticate": "Bearer"}


class Slots:
    """Per-key in-flight request counter with a fixed ceiling."""

    def __init__(self, limit: int):
        self.limit = limit
        self._used: Counter[str] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def admit(self, key_id: str) -> Iterator[str | None]:
        """:meth:`hold` for a mounted app that answers its own refusals (``/mcp``): yields None while holding a
        slot, or the 429's message when the key has none free."""
        held = self.hold(key_id)
        try:
            held.__enter__()
        except ApiError as exc:
            yield exc.message
            return
        try:
            yield None
        finally:
            held.__exit__(None, None, None)

    @contextmanager
    def hold(self, key_id: str) -> Iterator[None]:
        with self._lock:
            if self._used[key_id] >= self.limit:
                raise ApiError(429, "too_many_concurrent_requests",
                               f"this API key already has {self.limit} requests in flight: wait for one to "
                               "finish before sending another (or ask the operator to raise "
                               "serve_max_concurrent_per_key)", {"Retry-After": "1"})
            self._used[key_id] += 1
        try:
            yield
        finally:
            with self._lock:
                self._used[key_id] -= 1
                if not self._used[key_id]:
                    del self._used[key_id]


def bearer(request: Request) -> str:
    sent = request.headers.getlist("authorization")
    if len(sent) > 1:  # which one would count is up to each proxy and library: refuse, as /mcp does
        raise ApiError(401, "invalid_api_key", f"the request has {len(sent)} Authorization headers: send exactly "
                       "one, 'Authorization: Bearer <key>'", _BEARER)
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not header:
        raise ApiError(401, "missing_api_key", "no API key: send the header 'Authorization: Bearer <key>' "
                       "(create a key with `bara keys create --user U`)", _BEARER)
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "invalid_api_key", "the Authorization header must be 'Bearer <key>'", _BEARER)
    return token.strip()


def authenticate(request: Request) -> ApiKey:
    key = request.app.state.runtime.keys.verify(bearer(request))
    if key is None:
        raise ApiError(401, "invalid_api_key", "unknown or revoked API key: check the key, or create a new "
                       "one with `bara keys create --user U`", _BEARER)
    return key


def caller(request: Request) -> Iterator[ApiKey]:
    """Dependency: the authenticated key, holding one concurrency slot until the response is done."""
    key = authenticate(request)
    request.state.user = key.user_id
    with request.app.state.slots.hold(key.key_id):
        yield key


def admin_caller(request: Request) -> ApiKey:
    key = authenticate(request)
    if not key.admin:
        raise ApiError(403, "admin_required", "the shared knowledge base needs an admin key: create one with "
                       "`bara keys create --user U --admin`")
    return key
