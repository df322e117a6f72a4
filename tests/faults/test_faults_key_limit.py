"""D4 (issue 33): one concurrency limit per API key across /v1, /api and /mcp. /mcp had none: 64
concurrent tools/call of one key all got 200 while /v1 and /api capped the same key at 8 with 429."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from serve_helpers import bearer, live_server, sqlite_runtime

from bara.serve.app import create_app, mount_mcp_server

ACCEPT = {"Accept": "application/json, text/event-stream"}
LIMIT = 2


@pytest.fixture(scope="module")
def served(rfc_kb, embedder):
    runtime = sqlite_runtime(rfc_kb("key_limit"), embedder, serve_max_concurrent_per_key=LIMIT)
    keys = {u: runtime.keys.create(u) for u in ("alice", "bob")}
    app = create_app(runtime.settings, runtime=runtime, warm=False)
    mount_mcp_server(app)
    with live_server(app) as url:
        yield url, keys, app
    runtime.close()


def _released(app) -> None:
    """Every slot is given back (a handler finishes just after its response's last byte is sent)."""
    deadline = time.monotonic() + 10
    while app.state.slots._used and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not app.state.slots._used, app.state.slots._used


def _refused(r: httpx.Response) -> None:
    assert r.status_code == 429, r.text
    err = r.json()["error"]
    assert err["code"] == err["type"] == "too_many_concurrent_requests" and err["message"] and "param" in err
    assert r.headers.get("retry-after")


def test_a_key_with_every_slot_taken_is_refused_on_mcp_as_on_v1_and_api(served):
    url, keys, app = served
    alice, bob = keys["alice"], keys["bob"]
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    assert httpx.post(f"{url}/mcp/", json=call, headers={**bearer(alice.key), **ACCEPT}, timeout=60).status_code == 200
    _released(app)
    holds = [app.state.slots.hold(alice.info.key_id) for _ in range(LIMIT)]  # alice's slots, all in flight
    for held in holds:
        held.__enter__()
    try:
        _refused(httpx.post(f"{url}/mcp/", json=call, headers={**bearer(alice.key), **ACCEPT}, timeout=60))
        _refused(httpx.get(f"{url}/v1/models", headers=bearer(alice.key), timeout=60))
        _refused(httpx.get(f"{url}/api/conversations", headers=bearer(alice.key), timeout=60))
        ok = httpx.post(f"{url}/mcp/", json=call, headers={**bearer(bob.key), **ACCEPT}, timeout=60)
        assert ok.status_code == 200, ok.text  # another key is not affected
    finally:
        for held in holds:
            held.__exit__(None, None, None)
    r = httpx.post(f"{url}/mcp/", json=call, headers={**bearer(alice.key), **ACCEPT}, timeout=60)
    assert r.status_code == 200, r.text
    _released(app)


def test_many_concurrent_mcp_calls_of_one_key_are_capped(served):
    url, keys, app = served
    key = keys["alice"].key
    statuses: list[int] = []
    barrier = threading.Barrier(16)

    def one(i: int) -> None:
        barrier.wait()
        body = {"jsonrpc": "2.0", "id": i, "method": "tools/list", "params": {}}
        statuses.append(httpx.post(f"{url}/mcp/", json=body, headers={**bearer(key), **ACCEPT}, timeout=60).status_code)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert set(statuses) <= {200, 429} and len(statuses) == 16
    _released(app)
