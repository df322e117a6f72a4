"""`bara serve --workers 2` spreads a burst of keep-alive connections over both workers, and a worker that
dies is replaced on its own socket (bara.serve.workers)."""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bara.serve.workers import balanced_available
from loopback import stop

pytestmark = pytest.mark.skipif(not balanced_available(), reason="SO_REUSEPORT balancing is Linux's")

CONNECTIONS = 32


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker_seen(port: int) -> int | None:
    """The worker pid a new connection's /api/health names (None while nothing answers)."""
    try:
        return int(httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=5).json()["worker"])
    except httpx.HTTPError:
        return None


def _wait_for_workers(port: int, proc: subprocess.Popen, n: int, not_in: frozenset[int] = frozenset(),
                      timeout_s: float = 180) -> set[int]:
    """Poll with new connections until ``n`` distinct workers (none of ``not_in``) have answered."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "server exited"
        pid = _worker_seen(port)
        if pid is not None and pid not in not_in:
            seen.add(pid)
            if len(seen) == n:
                return seen
        else:
            time.sleep(0.2)
    raise AssertionError(f"only workers {sorted(seen)} answered in {timeout_s} s")


def _burst(port: int) -> collections.Counter:
    """Open ``CONNECTIONS`` connections at once, then ask each which worker holds it (one keep-alive
    request per connection, as a client pool's first requests)."""
    conns = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(CONNECTIONS)]
    try:
        for c in conns:
            c.sendall(f"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        seen: collections.Counter = collections.Counter()
        for c in conns:
            data = b""
            while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
                chunk = c.recv(65536)
                assert chunk, "the server closed a connection before answering"
                data += chunk
            seen[json.loads(data.split(b"\r\n\r\n", 1)[1])["worker"]] += 1
        return seen
    finally:
        for c in conns:
            c.close()


def test_a_burst_of_connections_reaches_both_workers_and_a_dead_worker_is_replaced(tmp_path):
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "bara.cli", "serve", "--db", str(tmp_path / "w.db"),
                             "--port", str(port), "--workers", "2"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        workers = _wait_for_workers(port, proc, 2)
        for _ in range(3):  # three bursts: each must reach both (binomial(32, 1/2) <= 5: p ~ 1e-5 a side)
            seen = _burst(port)
            assert set(seen) == workers and min(seen.values()) >= 6, seen
        gone = min(workers)
        os.kill(gone, signal.SIGKILL)
        replaced = _wait_for_workers(port, proc, 2, not_in=frozenset({gone}))
        assert gone not in replaced and len(replaced & workers) == 1, (workers, replaced)
        seen = _burst(port)
        assert set(seen) == replaced and min(seen.values()) >= 6, seen
    finally:
        stop(proc)
