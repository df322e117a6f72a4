"""Mount the MCP server at ``/mcp`` inside ``bara serve`` (the serve app's ``extend`` extension point).

The MCP app needs the runtime's :class:`~bara.app.Bara`, which exists only once
the host's lifespan has opened it, and the SDK's session manager must run for
as long as the host does. :func:`mount_mcp` therefore mounts a placeholder
at ``path`` and wraps the host's lifespan: after the host's startup it builds
the MCP app for the runtime (identity: the user of the request's API key, via
the injected ``resolve_user``) and runs its session manager until shutdown. Before that, or
after shutdown, ``/mcp`` answers 503.

The host injects how to mount a sub-app (``extend``) and how to find the user of an API key
(``resolve_user``): mcp sits below serve and never imports it (bara.serve.app.mount_mcp_server wires both).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

from bara.mcp.server import Admission, mcp_http_app, mcp_lifespan, refusal_body
from bara.prompts.mcp import NOT_READY


class McpMount:
    """The ASGI app mounted at ``/mcp``; forwards to the MCP app once the host has started."""

    def __init__(self) -> None:
        self.app: Any = None

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if self.app is None:
            if scope["type"] != "http":
                return
            body = refusal_body("unavailable", NOT_READY)
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        # a copy: the inner Starlette app sets scope["app"] to itself, and the host's middleware (metrics)
        # reads the host app's state from the same scope after the call
        await self.app(dict(scope), receive, send)


class ExactPath:
    """``/mcp`` without the trailing slash: served as ``/mcp/`` (the static files at ``/`` would take it)."""

    def __init__(self, mount: McpMount, path: str) -> None:
        self.mount, self.path = mount, path

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        root = scope.get("root_path", "")
        inner = {**scope, "path": f"{root}{self.path}/", "raw_path": f"{root}{self.path}/".encode(),
                 "root_path": f"{root}{self.path}"}
        await self.mount(inner, receive, send)


def mount_mcp(app: Any, *, extend: Callable[..., None], resolve_user: Callable[[str], str | None],
              path: str = "/mcp", admit: Admission | None = None) -> McpMount:
    """Mount the MCP server at ``path`` (and ``path/``) on a host app with the host's ``extend(app, path,
    asgi_app, name=...)``; ``resolve_user(key)`` is the user of a request's API key (None: refused); ``admit``
    the host's per-key concurrency limit (``bara.mcp.server.Admission``)."""
    from starlette.routing import Route

    mount = McpMount()
    extend(app, path, mount, name="mcp")
    at = next(i for i, r in enumerate(app.router.routes) if getattr(r, "name", None) == "mcp")
    app.router.routes.insert(at, Route(path, endpoint=ExactPath(mount, path), name="mcp-exact"))
    host_lifespan = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(host: Any) -> AsyncIterator[Any]:
        async with host_lifespan(host) as state:
            mount.app = mcp_http_app(host.state.runtime.bara, resolve_user, admit=admit)
            try:
                async with mcp_lifespan(mount.app):
                    yield state
            finally:
                mount.app = None

    app.router.lifespan_context = lifespan
    return mount
