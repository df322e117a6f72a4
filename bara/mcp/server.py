"""bara's tools as an MCP server (official ``mcp`` SDK, low-level :class:`mcp.server.Server`).

One server object serves two transports:

* stdio (``bara mcp --user U``, :mod:`bara.mcp.stdio`): the identity is fixed when the process starts;
* streamable HTTP (:func:`mcp_http_app`, mounted at ``/mcp`` by ``bara serve``):
  the identity comes from each request's ``Authorization: Bearer <key>``,
  resolved by the caller-supplied ``resolve_user(key) -> user id | None``.

Identity is resolved per ``tools/call`` from the transport, never from the
model: no tool schema has a user field and ``extra="forbid"`` rejects one.
Every call runs under ``store.scoped((SHARED, user))`` (row security on
PostgreSQL) in a worker thread, with the same timeout and validation as the
agent loop (:func:`bara.agent.tools.run_tool`). A bad argument is a tool
result with ``isError`` set and a message naming the field, so a model can
correct itself on the next turn; an unknown tool is a protocol error, as the
MCP specification asks.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import Any, Callable, Mapping

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from bara.agent.tools import Tool, ToolContext, ToolServices, run_tool, store_fault_result
from bara.app import Bara
from bara.errors import StoreFaultError
from bara.domain import services_of
from bara.mcp.surrogates import clean_line
from bara.prompts.mcp import DUPLICATE_KEY, INSTRUCTIONS, NO_EVENT_STREAM, NO_USER, SERVER_NAME, UNKNOWN_KEY
from bara.types import SHARED

#: ``identity(ctx)`` -> the user id this request acts for, or None (refused).
Identity = Callable[[ServerRequestContext[Any, Any]], "str | None"]
#: ``resolve_user(api_key)`` -> user id, or None for an unknown key.
UserResolver = Callable[[str], "str | None"]
#: ``admit(api_key)`` -> a context manager held for the whole request: it yields None when the key may
#: send one more request now, else the refusal's message (a 429: the host's per-key concurrency limit).
Admission = Callable[[str], "AbstractContextManager[str | None]"]


def fixed_identity(user: str) -> Identity:
    """Every request acts for ``user`` (stdio: one process, one user)."""
    return lambda ctx: user


def bearer_identity(resolve_user: UserResolver) -> Identity:
    """The user of the request's ``Authorization: Bearer <key>`` header (HTTP transports)."""

    def identity(ctx: ServerRequestContext[Any, Any]) -> str | None:
        key = bearer_key(getattr(ctx.request, "headers", None))
        return resolve_user(key) if key else None
    return identity


def bearer_key(headers: Mapping[str, str] | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header ('' when absent or malformed)."""
    value = (headers or {}).get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def tool_listing(tools: Mapping[str, Tool]) -> list[types.Tool]:
    """MCP tool definitions: each argument model's JSON schema (``additionalProperties: false``)."""
    out = []
    for tool in tools.values():
        schema = dict(tool.args_model.model_json_schema())
        schema.setdefault("properties", {})
        schema["additionalProperties"] = False
        out.append(types.Tool(name=tool.name, description=tool.description, input_schema=schema,
                              annotations=types.ToolAnnotations(read_only_hint=tool.name != "remember",
                                                                open_world_hint=False)))
    return out


def build_server(bara: Bara, identity: Identity, tools: Mapping[str, Tool] | None = None) -> Server[Any]:
    """A low-level MCP server over ``tools`` (default: :func:`bara.mcp.tools.build_mcp_tools`)."""
    from bara.mcp.tools import build_mcp_tools

    toolset = dict(tools) if tools is not None else build_mcp_tools(bara.store)
    listing = tool_listing(toolset)

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in toolset:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}; known tools: "
                           f"{', '.join(sorted(toolset))}")
        user = identity(ctx)
        if not user:
            return error_result(NO_USER if ctx.request is None else UNKNOWN_KEY)
        envelope = await anyio.to_thread.run_sync(call_as, bara, toolset, params.name, params.arguments, user)
        return result_of(envelope)

    return Server(SERVER_NAME, version=_version(), instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool, get_tool_input_schema=lambda name: next(
                      (t.input_schema for t in listing if t.name == name), None))


def call_as(bara: Bara, tools: Mapping[str, Tool], name: str, arguments: Any, user: str) -> dict[str, Any]:
    """Run one tool for ``user`` under the store's user scope; the ``{"ok", "data"|"error"}`` envelope."""
    try:
        bara.flush()  # memory tools see what the last turns learned (bara.memory.writebehind)
    except StoreFaultError as exc:
        return store_fault_result(exc).envelope()
    ctx = ToolContext.start(user, bara.store, bara.settings, services(bara))
    with bara.store.scoped((SHARED, user)):
        return run_tool(tools, name, arguments, ctx).envelope()


def services(bara: Bara) -> ToolServices:
    """What the tools may use besides the store: the retriever, the embedder, the memory tiers the
    program's Bara owns (profile, notes, Q&A) and each domain plug-in's services (the fund repository)."""
    return ToolServices(retriever=bara.retriever, embedder=bara.embedder, profile=bara.profile, notes=bara.notes,
                        qa=bara.qa, domain=services_of(bara.store))


def result_of(envelope: Mapping[str, Any]) -> types.CallToolResult:
    """A tool envelope as an MCP result: the JSON as text, the data as structured content."""
    if not envelope.get("ok"):
        return error_result(str(envelope.get("error") or "tool failed"), envelope.get("code"))
    data = envelope.get("data")
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    structured = data if isinstance(data, dict) else {"result": data}
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)


def error_result(message: str, code: str | None = None) -> types.CallToolResult:
    """A failure the model reads and can act on (``isError``), not a protocol error; ``code`` (e.g.
    ``store_busy``) also as structured content, for clients that branch on the cause."""
    structured = {"code": code, "error": message} if code else None
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True,
                                structured_content=structured)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bara")
    except PackageNotFoundError:
        return "0"


# ------------------------------------------------------------------- transports
def mcp_http_app(bara: Bara, resolve_user: UserResolver, path: str = "/", allowed_hosts: list[str] | None = None,
                 admit: Admission | None = None):
    """The MCP server as an ASGI app (streamable HTTP, stateless, JSON responses) for mounting.

    Requests without a known Bearer key get 401 before reaching MCP. The returned
    Starlette app's lifespan runs the SDK's session manager: the host application
    must run it (``bara serve`` enters ``app.router.lifespan_context`` of the
    mounted app, or use :func:`mcp_lifespan`). ``allowed_hosts`` None turns off
    the SDK's DNS-rebinding check (the host application owns the Host policy).
    """
    from mcp.server.transport_security import TransportSecuritySettings

    server = build_server(bara, bearer_identity(resolve_user))
    security = TransportSecuritySettings(enable_dns_rebinding_protection=allowed_hosts is not None,
                                         allowed_hosts=allowed_hosts or [], allowed_origins=[])
    inner = server.streamable_http_app(streamable_http_path=path, stateless_http=True, json_response=True,
                                       transport_security=security)
    return RequireKey(inner, resolve_user, admit)


class RequireKey:
    """ASGI wrapper: 401 (with ``WWW-Authenticate: Bearer``) unless the request carries a known key, and
    405 for GET: a stateless server has no session to push messages on, so the SDK's event stream for a
    GET could never carry one and stayed open for ever (blocking a graceful shutdown of ``bara serve``
    until the client left); the MCP specification lets a server answer 405 instead."""

    def __init__(self, app: Any, resolve_user: UserResolver, admit: Admission | None = None) -> None:
        self.app, self.resolve_user, self.admit = app, resolve_user, admit

    @property
    def router(self) -> Any:  # the inner Starlette router, so a host can run its lifespan
        return self.app.router

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            if sum(k.lower() == b"authorization" for k, _ in scope.get("headers", [])) > 1:
                # the gate would check the last header and the tool call act for the first
                await _refuse(send, 401, "invalid_api_key", DUPLICATE_KEY, (b"www-authenticate", b'Bearer realm="bara"'))
                return
            key = bearer_key(headers)
            if not key or not self.resolve_user(key):
                await _refuse(send, 401, "invalid_api_key", UNKNOWN_KEY, (b"www-authenticate", b'Bearer realm="bara"'))
                return
            if scope.get("method") == "GET":
                await _refuse(send, 405, "method_not_allowed", NO_EVENT_STREAM, (b"allow", b"POST"))
                return
            if scope.get("method") == "POST":
                receive = await _surrogates_replaced(receive)
            if self.admit is not None:
                with self.admit(key) as refused:  # one concurrency limit per key with /v1 and /api
                    if refused:
                        await _refuse(send, 429, "too_many_concurrent_requests", refused, (b"retry-after", b"1"))
                        return
                    await self.app(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _surrogates_replaced(receive: Callable) -> Callable:
    """``receive`` replaying the request body with lone surrogate escapes replaced (:func:`clean_line`), which
    the SDK refused with a 400 parse error over HTTP while stdio served the same request."""
    parts, message = [], {"more_body": True}
    while message.get("more_body", False):
        message = await receive()
        if message["type"] != "http.request":
            return _replay([], message, receive)
        parts.append(message.get("body", b""))
    body = b"".join(parts)
    if b"\\u" in body:
        body = clean_line(body.decode("utf-8", errors="replace")).encode()
    return _replay([{"type": "http.request", "body": body, "more_body": False}], None, receive)


def _replay(messages: list[dict], last: dict | None, receive: Callable) -> Callable:
    queue = [*messages, *([last] if last else [])]

    async def replayed() -> dict:
        return queue.pop(0) if queue else await receive()

    return replayed


def refusal_body(type_: str, message: str) -> bytes:
    """An HTTP refusal of ``/mcp`` in the shape of every other refusal of ``bara serve`` (OpenAI's:
    ``type``, ``message``, ``param``, ``code``), so one client-side error reader serves both."""
    return json.dumps({"error": {"type": type_, "message": message, "param": None, "code": type_}}).encode()


async def _refuse(send: Callable, status: int, type_: str, message: str, header: tuple[bytes, bytes]) -> None:
    body = refusal_body(type_, message)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), header, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def mcp_lifespan(app: Any):
    """The lifespan context of an app from :func:`mcp_http_app` (enter it in the host's lifespan)."""
    return app.router.lifespan_context(app.app)
