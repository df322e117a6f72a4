"""Test-wide guards: no network, a private cache and data dir location."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

DATA = Path(os.environ.get("BARA_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data")).resolve()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: object) -> object:
    host = address[0] if isinstance(address, tuple) else str(address)
    if self.family == socket.AF_UNIX or str(host) in ("127.0.0.1", "::1", "localhost") or str(host).startswith("127."):
        return _real_connect(self, address)
    raise OSError(f"network access blocked in tests: {address!r}")


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]

from pg_fixtures import pg_schema, pg_server_urls, pg_store_factory  # noqa: E402,F401 - embedded PostgreSQL


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.skip(f"shared data not found at {DATA} (set BARA_DATA)")
    return DATA


@pytest.fixture(scope="session")
def embedder():
    """The real default embedder (ONNX MiniLM), loaded once for the session, uncached."""
    from bara.retrieval.embedders import OnnxMiniLMEmbedder

    return OnnxMiniLMEmbedder()
