"""``/mcp`` inside ``bara serve``: the MCP server mounted through the serve app's extension point, the
user taken from each request's API key (keys issued by the serve key store), over a loopback server."""

from __future__ import annotations

import json
import socket
import threading
import time

import anyio
import httpx
import pytest
from mcp import Client

from bara.domains.funds.golden import Facts
from bara.app import Bara
from bara.domains.funds import create_demo_users, load_amfi
from bara.serve.app import create_app, mount_mcp_server
from bara.serve.runtime import Runtime
from bara.settings import Settings


@pytest.fixture(scope="module")
def served(rfc_kb, data_dir, embedder):
    import uvicorn

    db = rfc_kb("mcp_serve")
    settings = Settings(db=str(db), cache_dir=db.parent / "cache")
    bara = Bara(settings, embedder=embedder)
    load_amfi(bara.store, data_dir)
    create_demo_users(bara.store)
    runtime = Runtime(settings, bara=bara)
    keys = {user: runtime.keys.create(user).key for user in ("u_asha", "u_dev")}
    revoked = runtime.keys.create("u_esha")
    runtime.keys.revoke(revoked.info.key_id)
    app = create_app(settings, runtime=runtime, warm=False)
    mount_mcp_server(app)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp/", keys, revoked.key, bara
    server.should_exit = True
    thread.join(10)
    sock.close()
    bara.close()


def client(url: str, key: str) -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"}, timeout=60)))


def test_mcp_is_mounted_and_needs_a_live_key(served):
    url, keys, revoked, _ = served
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in ({}, {"Authorization": f"Bearer {revoked}"}, {"Authorization": "Bearer bara_nope_x"}):
        assert httpx.post(url, json=body, headers={**headers, **accept}).status_code == 401
    assert httpx.get(url.replace("/mcp/", "/api/health")).status_code == 200  # the host's API still answers


def test_each_key_acts_for_its_own_user_in_parallel(served):
    url, keys, _, bara = served
    seen = {}

    async def one(user: str, key: str):
        async with client(url if user == "u_asha" else url.rstrip("/"), key) as c:  # /mcp/ and /mcp
            names = {t.name for t in (await c.list_tools()).tools}
            holdings = await c.call_tool("get_holdings", {})
            await c.call_tool("remember", {"text": f"Decision: {user} keeps the index fund.", "kind": "decision"})
            recalled = await c.call_tool("recall", {})
            seen[user] = names, [h["scheme_code"] for h in holdings.structured_content["holdings"]], \
                [n["text"] for n in recalled.structured_content["notes"]]

    async def go():
        async with anyio.create_task_group() as tg:
            for user, key in keys.items():
                tg.start_soon(one, user, key)

    anyio.run(go)
    facts = Facts(bara.store)
    for user in keys:
        names, codes, notes = seen[user]
        assert {"search_knowledge", "recall", "remember", "get_holdings"} <= names
        assert codes == [h.code for h in facts.holdings(user)]
        assert notes == [f"Decision: {user} keeps the index fund."]


def test_get_opens_no_event_stream_that_could_block_shutdown(served):
    """Stateless /mcp has no session to push on: a GET (some clients open one after initialize) is a 405
    saying to POST, not an event stream held open until the client leaves, which kept `bara serve` from
    shutting down."""
    url, keys, _, _ = served
    for accept in ("text/event-stream", "application/json, text/event-stream"):
        headers = {"Authorization": f"Bearer {keys['u_asha']}", "Accept": accept}
        with httpx.stream("GET", url, headers=headers, timeout=30) as r:  # the status, without waiting on a body
            assert r.status_code == 405 and r.headers["allow"] == "POST", r.headers
            assert "POST" in json.loads(r.read())["error"]["message"]
    assert httpx.get(url, headers={"Accept": "text/event-stream"}, timeout=30).status_code == 401  # key first


def test_a_lone_surrogate_escape_is_served_over_http_as_over_stdio(served):
    """Half an emoji ("\\ud83d", legal JSON) in a tool argument: served (U+FFFD in its place), not the
    SDK's 400 'Parse error: unexpected end of hex escape' for a request stdio serves."""
    url, keys, _, _ = served
    body = ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search_knowledge", '
            '"arguments": {"query": "HSTS max-age \\ud83d"}}}')
    r = httpx.post(url, content=body.encode(), timeout=60, headers={
        "Authorization": f"Bearer {keys['u_asha']}", "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    assert not result.get("isError") and result["structuredContent"]["query"] == "HSTS max-age \ufffd"
