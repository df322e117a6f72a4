"""Shared pieces of the serve tests: runtimes on SQLite / PostgreSQL and a live loopback server."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from bara.app import Bara
from bara.serve.app import create_app
from bara.serve.runtime import Runtime
from bara.settings import Settings


def sqlite_runtime(db: Path, embedder: Any, **overrides: Any) -> Runtime:
    settings = Settings(db=str(db), cache_dir=Path(db).parent, **overrides)
    return Runtime(settings, bara=Bara(settings, embedder=embedder))


def pg_runtime(store: Any, tmp: Path, embedder: Any, **overrides: Any) -> Runtime:
    settings = Settings(db=store.location, cache_dir=tmp, **overrides)
    return Runtime(settings, bara=Bara(settings, store=store, embedder=embedder))


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@contextmanager
def live_server(app: Any, timeout_s: float = 30.0) -> Iterator[str]:
    """Run ``app`` on uvicorn on a free loopback port in a thread; yields the base URL."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    start = time.monotonic()
    while not server.started:
        if not thread.is_alive() or time.monotonic() - start > timeout_s:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout_s)


def make_app(runtime: Runtime, **kw: Any) -> Any:
    return create_app(runtime.settings, runtime=runtime, **kw)


@contextmanager
def keyed_server(db: Path, embedder: Any, users: tuple[str, ...] = ("alice", "bob")) -> Iterator[tuple[str, dict]]:
    """A live loopback server over the SQLite store ``db`` and an API key per user: ``(url, {user: key})``."""
    runtime = sqlite_runtime(db, embedder)
    try:
        keys = {u: runtime.keys.create(u).key for u in users}
        with live_server(make_app(runtime)) as url:
            yield url, keys
    finally:
        runtime.close()
