"""The SQLite store's connections: one writer behind a bounded lock, and a read connection per thread.

Why: with one connection and one process lock, a turn waiting in SQLite's busy wait
for another process's write lock held that lock, so every read of every request (key checks, search,
listings) waited too. Now reads never take the writer's lock: each thread reads on its own connection
(WAL lets readers go on while a writer holds the lock, and they see only committed rows), and the
writer's lock is taken with the same bound as SQLite's busy wait (``store_busy_timeout_s``), so a
writer that cannot get in is a :class:`~bara.errors.StoreBusyError` in bounded time.

A thread inside a write transaction reads on the writer's connection (its own uncommitted rows).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from bara.errors import StoreBusyError


def busy(location: str) -> StoreBusyError:
    return StoreBusyError(f"{location} is busy: another process (a `bara ingest`, `bara chat` or `bara serve` on "
                          "the same --db?) or another request held its write lock for longer than "
                          "store_busy_timeout_s. Retry when it has finished, or stop it.")


class WriterLock:
    """The writer connection's lock: re-entrant, knows its owner, and gives up after ``timeout_s``."""

    def __init__(self, location: str, timeout_s: float):
        self.location, self.timeout_s = location, timeout_s
        self._lock = threading.RLock()
        self._owner: int | None = None
        self._depth = 0

    def __enter__(self) -> "WriterLock":
        if not self._lock.acquire(timeout=self.timeout_s):
            raise busy(self.location)
        self._owner = threading.get_ident()
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if not self._depth:
            self._owner = None
        self._lock.release()

    def mine(self) -> bool:
        """Whether the calling thread holds it (is inside a write, or a transaction)."""
        return self._owner == threading.get_ident()


class Readers:
    """One read-only connection per thread to the store's file; None for ``:memory:`` (one connection)."""

    def __init__(self, uri: str | None, busy_timeout_s: float):
        self.uri, self.busy_timeout_s = uri, busy_timeout_s
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._trace: Callable[[str], object] | None = None

    def trace(self, callback: Callable[[str], object] | None) -> None:
        """Every read connection's statements, open or opened later, to ``callback`` (tests, debugging)."""
        with self._lock:
            self._trace = callback
            for conn in self._opened:
                conn.set_trace_callback(callback)

    def get(self) -> sqlite3.Connection | None:
        """The calling thread's read connection (opened on first use), or None when there are none."""
        if self.uri is None or self._closed:
            return None
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():  # a forked child opens its own
            conn = sqlite3.connect(self.uri, uri=True, isolation_level=None, check_same_thread=False,
                                   timeout=self.busy_timeout_s)
            with self._lock:
                self._opened.append(conn)
                conn.set_trace_callback(self._trace)
            self._local.conn, self._local.pid, self._local.depth = conn, os.getpid(), 0
        return conn

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read of this thread inside sees one snapshot (one read transaction; nested: the outer)."""
        conn = self.get()
        if conn is None or self._local.depth:
            if conn is not None:
                self._local.depth += 1
            try:
                yield
            finally:
                if conn is not None:
                    self._local.depth -= 1
            return
        conn.execute("BEGIN")
        self._local.depth = 1
        try:
            yield
        finally:
            self._local.depth = 0
            if conn.in_transaction:
                conn.rollback()  # it only read

    def close(self) -> None:
        with self._lock:
            self._closed = True
            opened, self._opened = self._opened, []
        for conn in opened:
            try:
                conn.close()
            except sqlite3.Error:  # a connection another thread is using ends with that use
                pass
