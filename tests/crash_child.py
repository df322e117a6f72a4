"""Run ``bara`` with a deterministic kill point: ``python crash_child.py MARKER POINT N -- ARGS...``.

With ``POINT`` a statement prefix (case-insensitive, e.g. ``INSERT INTO chunks``), every SQLite connection
the process opens reports its statements; when the ``N``-th statement starting with it is about to run,
the child writes ``MARKER`` and then sleeps, still inside whatever transaction that statement belongs
to, until the test kills it. So a crash test kills at a known point instead of after a guessed number of
seconds, and knows the child was mid-write when it died (``crash_kill`` in the tests waits for the marker).

With ``POINT`` = ``call:module:Class.method`` the child stops the same way at the ``N``-th call of that
method, in Python code, where a SIGINT raises KeyboardInterrupt into the call (a statement callback
would swallow it).
"""

from __future__ import annotations

import runpy
import sqlite3
import sys
import threading
import time
from pathlib import Path


def _install(marker: Path, prefix: str, n: int) -> None:
    real_connect = sqlite3.connect
    seen = 0
    lock = threading.Lock()

    def watch(statement: str) -> None:
        nonlocal seen
        if not " ".join(statement[:2 * len(prefix)].upper().split()).startswith(prefix):
            return
        with lock:
            seen += 1
            reached = seen == n
        if reached:
            marker.write_text(statement[:200])
            while True:  # the test's SIGKILL ends this
                time.sleep(60)

    def connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)  # type: ignore[arg-type]
        conn.set_trace_callback(watch)
        return conn

    sqlite3.connect = connect  # type: ignore[assignment]


def _install_call(marker: Path, target: str, n: int) -> None:
    import functools
    import importlib

    module, _, qualified = target.partition(":")
    owner_name, _, name = qualified.rpartition(".")
    owner = getattr(importlib.import_module(module), owner_name)
    real = getattr(owner, name)
    calls = 0

    @functools.wraps(real)
    def paused(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        if calls == n:
            marker.write_text(target)
            while True:  # the test's signal ends this
                time.sleep(60)
        return real(*args, **kwargs)

    setattr(owner, name, paused)


def main(argv: list[str]) -> None:
    marker, point, n, sep, *args = argv
    assert sep == "--", "usage: crash_child.py MARKER POINT N -- ARGS..."
    if point.startswith("call:"):
        _install_call(Path(marker), point.removeprefix("call:"), int(n))
    else:
        _install(Path(marker), " ".join(point.upper().split()), int(n))
    sys.argv = ["bara", *args]
    runpy.run_module("bara.cli", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
