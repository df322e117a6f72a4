"""Kill -9 `bara serve` during streamed turns, then check every stored turn is traced and learned (issue 33,
D5). Shared by ``tests/faults/test_faults_crash_serve.py`` (a bounded number of kills) and
``bench/bench_crash_serve.py`` (the issue's >= 200 killed turns)."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ("What does MUST mean?", "And SHOULD?", "My name is Ravi and I like TCP.", "What about MAY?",
             "Is OPTIONAL the same as MAY?", "What does HSTS max-age do?", "thanks!", "What is RFC 2119 for?")


def env(cache: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "BARA_CACHE_DIR": str(cache), "BARA_MODEL": "",
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def create_key(db: Path, cache: Path, user: str) -> str:
    out = subprocess.run([sys.executable, "-m", "bara.cli", "keys", "create", "--user", user, "--json", "--db", str(db)],
                         env=env(cache), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)["key"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db: Path, cache: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "bara.cli", "serve", "--db", str(db), "--port", str(port)],
                            env=env(cache), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError("bara serve exited at start")
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("bara serve did not start")


def stream_turns(port: int, key: str, conversations: list[str], stop: threading.Event, rng: random.Random) -> None:
    """Streamed turns, one conversation per thread, until the server dies."""
    def run(cid: str) -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
            while not stop.is_set():
                body = {"model": "bara-gated", "stream": True,
                        "messages": [{"role": "user", "content": rng.choice(QUESTIONS)}]}
                try:
                    with c.stream("POST", "/v1/chat/completions", json=body,
                                  headers={"Authorization": f"Bearer {key}", "X-Bara-Conversation": cid}) as r:
                        for _ in r.iter_lines():
                            pass
                except httpx.HTTPError:
                    return
    threads = [threading.Thread(target=run, args=(cid,), daemon=True) for cid in conversations]
    for t in threads:
        t.start()


def kill_round(db: Path, cache: Path, key: str, conversations: list[str], delay: float, seed: int) -> None:
    """One server, streamed turns on every conversation, SIGKILL after ``delay`` seconds (asserted)."""
    port = free_port()
    proc = start_server(db, cache, port)
    stop = threading.Event()
    stream_turns(port, key, conversations, stop, random.Random(seed))
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    stop.set()
    assert proc.returncode == -signal.SIGKILL, proc.returncode


def untraced_or_unlearned(db: Path, user: str) -> tuple[int, list[str]]:
    """(stored turns, problems): every stored turn of ``user`` must have its trace and its episodic record."""
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = conn.execute("SELECT id, turn_count FROM conversations WHERE user_id=?", (user,)).fetchall()
        problems, total = [], 0
        for cid, turns in rows:
            total += turns
            traced = {t for (t,) in conn.execute("SELECT turn FROM serve_traces WHERE user_id=? AND conversation_id=?",
                                                 (user, cid))}
            sessions = conn.execute("SELECT COUNT(*) FROM episodic_sessions WHERE user_id=? AND conversation_id=?",
                                    (user, cid)).fetchone()[0]
            if len(traced) != turns:
                problems.append(f"{cid}: {turns} turns, {len(traced)} traced")
            if sessions != turns:
                problems.append(f"{cid}: {turns} turns, {sessions} episodic records")
    return total, problems
