"""A store fault inside an MCP tool call: the tool result is an error naming the cause (``store_busy``,
``store_unavailable``, ...) the client can act on, the server keeps serving, and once the fault clears
the same server's tools work again. The fault is real: another process holds the SQLite write lock
while ``remember`` needs it (``store_busy_timeout_s`` short)."""

from __future__ import annotations

import subprocess
import sys

import anyio
from mcp import Client

from bara.app import Bara
from bara.mcp import build_server, fixed_identity
from bara.settings import Settings

HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


def _text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_a_store_fault_in_a_tool_is_a_typed_tool_error_and_the_server_recovers(rfc_kb, embedder):
    db = rfc_kb("mcp_fault")
    bara = Bara(Settings(db=str(db), cache_dir=db.parent / "cache", store_busy_timeout_s=1.0), embedder=embedder)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"

        async def go():
            async with Client(build_server(bara, fixed_identity("u_asha"))) as client:
                refused = await client.call_tool("remember", {"text": "Decision: the liquid fund is my reserve."})
                found = await client.call_tool("search_knowledge", {"query": "HSTS max-age"})  # reads still work
                assert holder.stdin is not None
                holder.stdin.write("go\n")
                holder.stdin.flush()
                holder.wait(30)
                stored = await client.call_tool("remember", {"text": "Decision: the liquid fund is my reserve."})
                recalled = await client.call_tool("recall", {"query": "liquid fund reserve"})
                return refused, found, stored, recalled

        refused, found, stored, recalled = anyio.run(go)
        assert refused.is_error, _text(refused)
        assert (refused.structured_content or {}).get("code") == "store_busy", refused
        assert _text(refused).startswith("store_busy: ") and "Traceback" not in _text(refused)
        assert not found.is_error, _text(found)
        assert not stored.is_error, _text(stored)  # the same server, once the lock is gone
        assert not recalled.is_error and "liquid fund" in _text(recalled), _text(recalled)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)
        bara.close()
