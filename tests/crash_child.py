"""Run ``bara`` with a deterministic kill point: ``python crash_child.py MARKER PREFIX N -- ARGS...``.

Every SQLite connection the process opens reports its statements; when the ``N``-th statement starting
with ``PREFIX`` (case-insensitive, e.g. ``INSERT INTO chunks``) is about to run, the child writes
``MARKER`` and then sleeps, still inside whatever transaction that statement belongs to, until the test
kills it. So a crash test kills at a known point instead of after a guessed number of seconds, and
knows the child was mid-write when it died (``crash_kill`` in the tests waits for the marker).
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


def main(argv: list[str]) -> None:
    marker, prefix, n, sep, *args = argv
    assert sep == "--", "usage: crash_child.py MARKER PREFIX N -- ARGS..."
    _install(Path(marker), " ".join(prefix.upper().split()), int(n))
    sys.argv = ["bara", *args]
    runpy.run_module("bara.cli", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
