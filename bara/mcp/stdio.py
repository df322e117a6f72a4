"""``bara mcp``'s stdio transport: the SDK's, with every line it cannot read answered instead of dropped.

The SDK's stdio reader drops a line that is not a valid JSON-RPC message without a word, so a client
waits for ever on the request it thinks it sent. Lines pass through :class:`CleanLines` first:

* a lone UTF-16 surrogate escape (``"\\ud83d"``, legal JSON the SDK's parser rejects) becomes U+FFFD
  (:func:`clean_line`), so the request is served;
* a line that is still not a JSON-RPC message gets a JSON-RPC error reply, as JSON-RPC 2.0 asks:
  -32700 (parse error) for text that is not one JSON object, -32600 (invalid request) for JSON that
  is not a JSON-RPC message; its ``id`` is the request's when it can be read, else null;
* a blank line is skipped.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from bara.app import Bara
from bara.mcp.server import build_server, fixed_identity
from bara.mcp.surrogates import clean_line
from bara.prompts.mcp import LINE_NOT_JSON, LINE_NOT_JSONRPC

_ID = re.compile(r'"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")\s*[,}]')


async def serve_stdio(bara: Bara, user: str) -> None:
    """Serve ``bara``'s tools for ``user`` on this process's stdin/stdout until the client disconnects."""
    import io
    import sys

    from mcp.server.stdio import stdio_server

    server = build_server(bara, fixed_identity(user))
    refusals, refused = anyio.create_memory_object_stream[SessionMessage](math.inf)
    stdin = CleanLines(anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")),
                       refusals)
    async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            tg.start_soon(_send_all, refused, write_stream.clone())
            await server.run(read_stream, write_stream, server.create_initialization_options())


async def _send_all(source: Any, sink: Any) -> None:
    """Forward the refusals onto the transport's own writer until stdin ends."""
    async with source, sink:
        async for message in source:
            await sink.send(message)


def refusal(line: str) -> types.JSONRPCError | None:
    """The error reply to a line the SDK cannot read, or None when it reads it."""
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except ValidationError as exc:
        if any(e.get("type") == "json_invalid" for e in exc.errors()):
            return _error(_raw_id(line), types.PARSE_ERROR, LINE_NOT_JSON)
    return _error(_parsed_id(line), types.INVALID_REQUEST, LINE_NOT_JSONRPC)


def _error(request_id: int | str | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def _raw_id(line: str) -> int | str | None:
    """The top-level ``id`` of text that does not parse, read before the first nested object or list."""
    head = line.lstrip()[1:]
    cut = min((i for i in (head.find("{"), head.find("[")) if i >= 0), default=len(head))
    found = _ID.search(line.lstrip()[:1] + head[:cut] + "}")
    return None if found is None else json.loads(found.group(1))


def _parsed_id(line: str) -> int | str | None:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, (int, str)) and not isinstance(found, bool) else None


class CleanLines:
    """stdin for the SDK's stdio transport: its lines through :func:`clean_line`; a line the SDK cannot
    read is answered on ``refusals`` (closed when stdin ends) instead of passed on."""

    def __init__(self, inner: Any, refusals: Any):
        self.inner, self.refusals = inner, refusals

    def __aiter__(self) -> Any:
        return self._lines()

    async def _lines(self) -> Any:
        try:
            async for line in self.inner:
                if not line.strip():
                    continue
                line = clean_line(line)
                refused = refusal(line)
                if refused is None:
                    yield line
                else:
                    await self.refusals.send(SessionMessage(refused))
        finally:
            self.refusals.close()
