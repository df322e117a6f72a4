"""bara's retrieval and memory as MCP tools: ``bara mcp`` (stdio) and ``/mcp`` in ``bara serve`` (HTTP).

Public API::

    build_mcp_tools(store)                       -> {name: Tool}
    build_server(bara, identity)                 -> mcp.server.Server
    serve_stdio(bara, user)                      (async; ``bara mcp``)
    mcp_http_app(bara, resolve_user, path="/")   -> ASGI app (Bearer key -> user per request)
"""

from bara.mcp.server import bearer_identity, build_server, fixed_identity, mcp_http_app, mcp_lifespan
from bara.mcp.stdio import serve_stdio
from bara.mcp.tools import build_mcp_tools, build_memory_tools

__all__ = ["bearer_identity", "build_mcp_tools", "build_memory_tools", "build_server", "fixed_identity",
           "mcp_http_app", "mcp_lifespan", "serve_stdio"]
