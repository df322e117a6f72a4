"""`bara mcp` with the SDK's own client: in memory, over stdio (a subprocess) and over streamable HTTP.

Real store (RFC knowledge base + AMFI data + demo users), real embedder. Expected holdings come
from plain SQL over the transactions table (:class:`bara.domains.funds.golden.Facts`), not from the tools.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from typer.testing import CliRunner

from bara.domains.funds.golden import Facts
from bara.app import Bara
from bara.cli import app
from bara.domains.funds import create_demo_users, load_amfi
from bara.mcp import build_server, fixed_identity, mcp_http_app
from bara.settings import Settings
from bara.mcp.server import call_as
from bara.mcp.tools import build_mcp_tools

ROOT = Path(__file__).resolve().parents[2]
FUND_TOOLS = {"search_documents", "get_holdings", "get_transactions", "compute_xirr", "asset_allocation",
              "compare_funds"}
MEMORY_TOOLS = {"search_knowledge", "recall", "remember"}


@pytest.fixture(scope="module")
def world(rfc_kb, data_dir, embedder):
    db = rfc_kb("mcp")
    bara = Bara(Settings(db=str(db), cache_dir=db.parent / "cache"), embedder=embedder)
    load_amfi(bara.store, data_dir)
    create_demo_users(bara.store)
    yield bara, db
    bara.close()


def run(coro_fn, *args):
    return anyio.run(coro_fn, *args)


def text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def held_codes(bara, user: str) -> list[str]:
    return [h.code for h in Facts(bara.store).holdings(user)]


# ------------------------------------------------------------------- in memory
def test_tools_listed_without_any_user_field_and_with_when_not_to_use(world):
    bara, _ = world

    async def go():
        async with Client(build_server(bara, fixed_identity("u_asha"))) as client:
            return (await client.list_tools()).tools

    tools = run(go)
    assert {t.name for t in tools} == MEMORY_TOOLS | FUND_TOOLS
    for t in tools:
        props = t.input_schema.get("properties", {})
        assert not any("user" in p.lower() or "owner" in p.lower() for p in props), (t.name, props)
        assert t.input_schema.get("additionalProperties") is False, t.name
        assert "Do NOT" in (t.description or ""), t.name
    search = next(t for t in tools if t.name == "search_knowledge")
    assert set(search.input_schema["properties"]) == {"query", "k"}
    assert search.input_schema["required"] == ["query"]


def test_every_tool_can_be_called(world):
    bara, _ = world
    codes = held_codes(bara, "u_dev")

    async def go():
        out = {}
        async with Client(build_server(bara, fixed_identity("u_dev"))) as client:
            calls = {"search_knowledge": {"query": "HSTS max-age directive", "k": 3},
                     "remember": {"text": "We decided to keep the liquid fund as the emergency reserve.",
                                  "kind": "decision"},
                     "recall": {"query": "emergency reserve"},
                     "search_documents": {"query": "what is an expense ratio"},
                     "get_holdings": {}, "get_transactions": {"scheme": codes[0]},
                     "compute_xirr": {}, "asset_allocation": {"by": "fund_house"},
                     "compare_funds": {"schemes": codes[:2]}}
            for name, args in calls.items():
                out[name] = await client.call_tool(name, args)
        return out

    results = run(go)
    for name, result in results.items():
        assert not result.is_error, (name, text(result))
        assert json.loads(text(result)) == result.structured_content, name
    hits = results["search_knowledge"].structured_content["hits"]
    assert len(hits) == 3 and any("rfc6797" in h["source"] for h in hits)
    assert [h["scheme_code"] for h in results["get_holdings"].structured_content["holdings"]] == codes
    assert {t["scheme_code"] for t in results["get_transactions"].structured_content["transactions"]} == {codes[0]}
    assert [n["text"] for n in results["recall"].structured_content["notes"]][0].startswith("We decided")
    assert [f["scheme_code"] for f in results["compare_funds"].structured_content["funds"]] == codes[:2]


def test_bad_argument_is_an_error_result_naming_the_field(world):
    bara, _ = world

    async def go():
        async with Client(build_server(bara, fixed_identity("u_asha"))) as client:
            return [await client.call_tool("search_knowledge", {"query": "hsts", "k": 500}),
                    await client.call_tool("remember", {"text": "x"}),
                    await client.call_tool("asset_allocation", {"by": "colour"})]

    for result, field in zip(run(go), ("k", "text", "by"), strict=False):
        assert result.is_error
        assert text(result).startswith(f"{field}:"), text(result)


def test_an_injected_user_id_is_rejected_and_reveals_nothing(world):
    bara, _ = world
    others = set(held_codes(bara, "u_bilal")) - set(held_codes(bara, "u_asha"))

    async def go():
        async with Client(build_server(bara, fixed_identity("u_asha"))) as client:
            return [await client.call_tool("get_holdings", {"user_id": "u_bilal"}),
                    await client.call_tool("recall", {"query": "anything", "user": "u_bilal"})]

    for result in run(go):
        assert result.is_error and "Extra inputs are not permitted" in text(result)
        assert not any(code in text(result) for code in others)


def test_unknown_tool_is_a_protocol_error(world):
    bara, _ = world

    from mcp.shared.exceptions import MCPError

    async def go():
        async with Client(build_server(bara, fixed_identity("u_asha"))) as client:
            try:
                await client.call_tool("drop_tables", {})
            except MCPError as exc:
                return exc
        return None

    error = run(go)
    assert isinstance(error, MCPError) and "unknown tool 'drop_tables'" in error.message


def test_two_users_in_parallel_each_see_only_their_own(world):
    bara, _ = world
    users = ("u_asha", "u_bilal", "u_chitra")
    seen: dict[str, list[list[str]]] = {u: [] for u in users}

    async def one(user: str):
        async with Client(build_server(bara, fixed_identity(user))) as client:
            for _ in range(3):
                result = await client.call_tool("get_holdings", {})
                seen[user].append([h["scheme_code"] for h in result.structured_content["holdings"]])

    async def go():
        async with anyio.create_task_group() as tg:
            for user in users:
                tg.start_soon(one, user)

    run(go)
    for user in users:
        assert seen[user] == [held_codes(bara, user)] * 3


def test_notes_remembered_by_one_user_are_not_recalled_by_another(world):
    bara, _ = world

    async def go():
        async with Client(build_server(bara, fixed_identity("u_esha"))) as esha, \
                Client(build_server(bara, fixed_identity("u_farhan"))) as farhan:
            await esha.call_tool("remember", {"text": "Conclusion: the arbitrage fund is my parking spot.",
                                              "kind": "conclusion"})
            return (await farhan.call_tool("recall", {"query": "arbitrage parking spot"}),
                    await esha.call_tool("recall", {}))

    theirs, mine = run(go)
    assert theirs.structured_content["notes"] == []
    assert "parking spot" in mine.structured_content["notes"][0]["text"]


def test_memory_tools_only_when_no_fund_data(rfc_kb, embedder):
    db = rfc_kb("mcp_nofunds")
    with Bara(Settings(db=str(db), cache_dir=db.parent / "cache"), embedder=embedder) as bara:
        async def go():
            async with Client(build_server(bara, fixed_identity("u_x"))) as client:
                return {t.name for t in (await client.list_tools()).tools}
        assert run(go) == MEMORY_TOOLS


# ----------------------------------------------------------------------- stdio
def test_empty_user_is_refused_with_exit_2():
    result = CliRunner().invoke(app, ["mcp", "--user", "   "])
    assert result.exit_code == 2
    assert "--user" in result.output


def test_stdio_subprocess_serves_the_fixed_user(world, tmp_path):
    bara, db = world
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BARA_CACHE_DIR": str(tmp_path / "cache")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "bara.cli", "mcp", "--user", "u_chitra",
                                                                 "--db", str(db)], env=env)

    async def go():
        async with Client(params, read_timeout_seconds=120) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            holdings = await client.call_tool("get_holdings", {})
            injected = await client.call_tool("compute_xirr", {"user_id": "u_dev"})
            return names, holdings, injected

    names, holdings, injected = run(go)
    assert names == MEMORY_TOOLS | FUND_TOOLS
    assert [h["scheme_code"] for h in holdings.structured_content["holdings"]] == held_codes(bara, "u_chitra")
    assert injected.is_error and "user_id" in text(injected)


# ------------------------------------------------------------------------ HTTP
KEYS = {"key-asha": "u_asha", "key-bilal": "u_bilal"}


@pytest.fixture(scope="module")
def http_url(world):
    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from bara.mcp import mcp_lifespan

    bara, _ = world
    mcp_app = mcp_http_app(bara, KEYS.get)

    def lifespan(_app):
        return mcp_lifespan(mcp_app)

    host = Starlette(routes=[Mount("/mcp", app=mcp_app)], lifespan=lifespan)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(host, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp/"
    server.should_exit = True
    thread.join(10)
    sock.close()


def http_client(url: str, key: str | None):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=60)))


def test_http_without_a_known_key_is_401(http_url):
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic a2V5LWFzaGE="}):
        response = httpx.post(http_url, json=body, headers={**headers, "Accept": "application/json, "
                                                                                   "text/event-stream"})
        assert response.status_code == 401, headers
        assert response.headers["www-authenticate"].startswith("Bearer")


def test_http_two_keys_in_parallel_act_for_their_own_users(world, http_url):
    bara, _ = world
    seen: dict[str, list] = {}

    async def one(key: str):
        async with http_client(http_url, key) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            results = [await client.call_tool("get_holdings", {}) for _ in range(2)]
            injected = await client.call_tool("get_holdings", {"user_id": "u_dev"})
            seen[key] = [names, [[h["scheme_code"] for h in r.structured_content["holdings"]] for r in results],
                         injected]

    async def go():
        async with anyio.create_task_group() as tg:
            for key in KEYS:
                tg.start_soon(one, key)

    run(go)
    for key, user in KEYS.items():
        names, holdings, injected = seen[key]
        assert names == MEMORY_TOOLS | FUND_TOOLS
        assert holdings == [held_codes(bara, user)] * 2
        assert injected.is_error and "user_id" in text(injected)


def test_clean_line_replaces_only_lone_surrogates():
    from bara.mcp.stdio import clean_line

    lone = '{"jsonrpc": "2.0", "id": 3, "params": {"q": "a\\ud83d b", "k": ["\\udc00"]}}\n'
    assert json.loads(clean_line(lone))["params"] == {"q": "a\ufffd b", "k": ["\ufffd"]}
    pair = '{"q": "\\ud83d\\ude00"}\n'
    assert json.loads(clean_line(pair)) == {"q": "\U0001F600"}
    plain = '{"q": "\\\\ud83d is text"}\n'  # an escaped backslash: literal text, no surrogate
    assert json.loads(clean_line(plain)) == {"q": "\\ud83d is text"}
    assert clean_line("not json \\ud83d\n") == "not json \\ud83d\n"


class StdioProcess:
    """`bara mcp` as a subprocess spoken to line by line (initialised on entry, killed on exit)."""

    def __init__(self, db, tmp_path):
        import subprocess

        env = {**os.environ, "PYTHONPATH": str(ROOT), "BARA_CACHE_DIR": str(tmp_path / "cache")}
        self.proc = subprocess.Popen([sys.executable, "-m", "bara.cli", "mcp", "--user", "u_chitra", "--db", str(db)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env)

    def __enter__(self):
        self.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}))
        assert "result" in self.reply(1)
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait(timeout=10)

    def send(self, line: str) -> None:
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def reply(self, wanted, seconds: float = 60.0) -> dict:
        """The next message whose id is ``wanted`` (None: a reply with a null id)."""
        import select

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            line = self.proc.stdout.readline()
            assert line, "the MCP server closed its output (it exited)"
            message = json.loads(line)
            if message.get("id") == wanted:
                return message
        raise AssertionError(f"no reply to request {wanted} within {seconds} s")


def test_stdio_answers_a_request_carrying_a_lone_surrogate(world, tmp_path):
    """Legal JSON with a lone surrogate escape used to get no reply at all: the client waited for ever."""
    with StdioProcess(world[1], tmp_path) as mcp:
        mcp.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search_knowledge", '
                 '"arguments": {"query": "HSTS max-age \\ud83d"}}}')
        answer = mcp.reply(2)
        assert "result" in answer and not answer["result"].get("isError"), answer


def test_stdio_answers_every_line_it_cannot_read_and_keeps_serving(world, tmp_path):
    """A truncated line, text that is not JSON, JSON that is not JSON-RPC (wrong version, a batch) and a
    request nested past the parser (which, carrying a \\u escape, used to crash the reader and end the
    server) each get a JSON-RPC error (-32700 / -32600) with the request's id when it can be read; a blank
    line is skipped; the next request is served."""
    deep = "[" * 3000 + '"caf\\u00e9"' + "]" * 3000
    with StdioProcess(world[1], tmp_path) as mcp:
        mcp.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search_kn')
        assert mcp.reply(2)["error"]["code"] == -32700
        mcp.send("")
        mcp.send("not json at all")
        assert mcp.reply(None)["error"]["code"] == -32700
        mcp.send('{"jsonrpc": "1.0", "id": "three", "method": "tools/list"}')
        assert mcp.reply("three")["error"]["code"] == -32600
        mcp.send('[{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}]')
        assert "batches" in mcp.reply(None)["error"]["message"]
        mcp.send('{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "search_knowledge", '
                 f'"arguments": {{"query": {deep}}}}}}}')
        assert mcp.reply(5)["error"]["code"] == -32700
        mcp.send(json.dumps({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}))
        assert {t["name"] for t in mcp.reply(6)["result"]["tools"]} >= MEMORY_TOOLS


# QA regressions on `bara mcp`'s tools: what a search returns to the model.


def test_search_knowledge_names_files_not_the_servers_folders(rfc_kb, embedder):
    db = rfc_kb("qa_mcp")
    with Bara(Settings(db=str(db), cache_dir=db.parent / "cache"), embedder=embedder) as bara:
        envelope = call_as(bara, build_mcp_tools(bara.store), "search_knowledge",
                           {"query": "HSTS max-age directive", "k": 3}, "sam")
    assert envelope["ok"], envelope
    hits = envelope["data"]["hits"]
    assert hits and all("/" not in h["source"] and h["source"].endswith(".txt") for h in hits)
    assert not any(str(db.parent) in h["text"] + h["source"] for h in hits)
