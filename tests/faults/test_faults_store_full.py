"""D2 (issue 33): a full disk under `bara serve` and the CLI: 503 ``store_full`` / exit 3, never a 500 or a
traceback; nothing of a refused turn stored; service resumes by itself once space is freed.

The disk is a 3 MB tmpfs mounted for the test (we run as root in CI); where mounting is not allowed the
tests skip, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from serve_helpers import bearer, live_server, make_app, sqlite_runtime

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_disk(tmp_path):
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(where)], capture_output=True,
                             text=True) if shutil.which("mount") else None
    if mounted is None or mounted.returncode != 0:
        pytest.skip("cannot mount a 3 MB tmpfs here (needs root and mount permission): "
                    f"{mounted.stderr.strip() if mounted else 'no mount command'}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(disk: Path, db: Path) -> Path:
    """Empty the store's WAL (so any write needs new space), then take every free byte of the disk."""
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    filler = disk / f"filler-{uuid.uuid4().hex}"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        size = 65536
        while size:  # unbuffered writes, smaller and smaller, until not one byte fits
            try:
                os.write(fd, b"\0" * size)
            except OSError:
                size //= 2
    finally:
        os.close(fd)
    return filler


def _refused(r: httpx.Response, code: str = "store_full") -> None:
    assert r.status_code == 503, r.text
    err = r.json()["error"]
    assert err["code"] == err["type"] == code and err["message"] and "param" in err, err
    assert int(r.headers["retry-after"]) > 0


def test_a_full_disk_is_503_store_full_and_service_resumes(small_disk, rfc_kb, embedder):
    db = small_disk / "kb.db"
    shutil.copy(rfc_kb("full_disk"), db)
    runtime = sqlite_runtime(db, embedder, serve_health_fault_window_s=1.0)
    keys = {u: runtime.keys.create(u).key for u in ("alice", "bob")}
    try:
        with live_server(make_app(runtime)) as url, httpx.Client(base_url=url, timeout=60) as c:
            alice = bearer(keys["alice"])
            first = c.post("/api/turns", json={"message": "What does MUST mean?"}, headers=alice)
            assert first.status_code == 200, first.text
            cid = first.json()["conversation_id"]
            before = c.get(f"/api/conversations/{cid}/turns", headers=alice).json()
            listed = c.get("/api/conversations", headers=alice).json()
            filler = fill(small_disk, db)
            for body in ({"message": "And SHOULD?", "conversation_id": cid}, {"message": "What is HSTS?"}):
                _refused(c.post("/api/turns", json=body, headers=alice))
            chat = {"model": "bara-gated", "stream": True,
                    "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                                 {"role": "user", "content": "What does MAY mean?"}]}
            _refused(c.post("/v1/chat/completions", json=chat, headers=alice))
            health = c.get("/api/health").json()
            assert health["store"] == "down" and health["store_error"] == "store_full" and health["status"] == "degraded"
            # reads go on; nothing of the refused turns was stored
            assert c.get(f"/api/conversations/{cid}/turns", headers=alice).json() == before
            assert c.get("/api/conversations", headers=alice).json() == listed
            assert c.get("/api/search?q=MUST&k=2", headers=bearer(keys["bob"])).status_code == 200
            filler.unlink()
            again = c.post("/api/turns", json={"message": "And SHOULD?", "conversation_id": cid}, headers=alice)
            assert again.status_code == 200, again.text
            assert c.post("/v1/chat/completions", json=chat, headers=alice).status_code == 200
            time.sleep(1.1)
            assert c.get("/api/health").json()["store"] == "ok"
            turns = c.get(f"/api/conversations/{cid}/turns", headers=alice).json()
            assert len(turns["turns"]) == len(before["turns"]) + 1
    finally:
        runtime.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def _cli(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BARA_CACHE_DIR": str(cache), "BARA_MODEL": "",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "bara.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300)


def _one_error_line(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 3, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr and "OperationalError" not in result.stderr, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "disk is full" in errors[0], result.stderr[-2000:]


def test_cli_on_a_full_disk_exits_3_with_one_error_line(small_disk, rfc_kb, data_dir, tmp_path):
    db = small_disk / "kb.db"
    shutil.copy(rfc_kb("full_disk_cli"), db)
    cache = tmp_path / "cache"  # the embedder's cache on another disk: the store is what is full
    count = sqlite3.connect(db).execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    filler = fill(small_disk, db)
    _one_error_line(_cli(["ingest", str(data_dir / "rfc" / "rfc7540.txt"), "--db", str(db)], cache))
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"user": "What does MUST mean?"}) + "\n")
    _one_error_line(_cli(["chat", "--script", str(script), "--user", "u", "--db", str(db)], cache))
    filler.unlink()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == count
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    ok = _cli(["chat", "--script", str(script), "--user", "u", "--db", str(db)], cache)
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_a_store_on_a_read_only_file_system_opens_read_only_for_reads(small_disk, rfc_kb, tmp_path):
    """D6 (issue 33): read commands said "is not a bara database (corrupt or not SQLite: unable to open
    database file)" (a reader could not create the WAL's -shm); now they read it, and writers say read-only."""
    db = small_disk / "kb.db"
    shutil.copy(rfc_kb("read_only_fs"), db)
    remounted = subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], capture_output=True, text=True)
    if remounted.returncode != 0:
        pytest.skip(f"cannot remount the tmpfs read-only here: {remounted.stderr.strip()}")
    cache = tmp_path / "cache"
    found = _cli(["search", "What does MUST mean?", "--db", str(db)], cache)
    assert found.returncode == 0, found.stderr[-2000:]
    assert "rfc2119" in found.stdout and "corrupt" not in found.stderr
    users = _cli(["memory", "inspect", "--user", "nobody", "--db", str(db)], cache)
    assert users.returncode == 0 and "corrupt" not in users.stderr, users.stderr[-2000:]
    refused = _cli(["ingest", str(ROOT / "README.md"), "--db", str(db)], cache)
    assert refused.returncode == 2 and "read-only" in refused.stderr and "corrupt" not in refused.stderr, refused.stderr
    assert "mounted read-only" in refused.stderr
