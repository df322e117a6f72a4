"""The ASGI app: ``create_app(settings)`` builds it; ``factory()`` is uvicorn's import-string factory.

Routes: the native API under ``/api`` (bara.serve.native), the OpenAI-compatible ``/v1``
(bara.serve.openai_compat), ``/metrics`` (Prometheus), an offline API reference at ``/docs`` (Swagger UI,
which needs a CDN, at ``/swagger``), and the static web
timeline at ``/`` (files in ``bara/serve/static/``, mounted last so every API path wins).

Extension point: ``create_app(..., mounts={"/mcp": asgi_app})`` mounts extra ASGI apps before the
static files; ``user_for_key(app, key)`` resolves a bearer key to its user for such a mounted app
(e.g. an MCP server taking the user from the API key), and ``app.state.runtime`` gives it the
store, the assistants and the settings. ``extend(app, path, asgi_app)`` mounts after creation.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Mapping

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse
from starlette.routing import Match, Mount
from starlette.staticfiles import StaticFiles

from bara.serve import errors, metrics, native, openai_compat
from bara.memory.api_keys import ApiKey
from bara.serve.limits import BodyLimit
from bara.serve.runtime import MODES, Runtime
from bara.serve.auth import Slots
from bara.serve.schemas import ErrorBody
from bara.settings import Settings, load_settings

STATIC_DIR = Path(__file__).parent / "static"
ENV_MODE = "BARA_SERVE_MODE"  # how the CLI passes --mode to worker processes (with BARA_DB for --db)


def create_app(settings: Settings | None = None, *, mode: str = "gated", runtime: Runtime | None = None,
               mounts: Mapping[str, Any] | None = None, static_dir: Path | None = STATIC_DIR,
               warm: bool = True, otlp: str | None = None) -> FastAPI:
    """Build the app. ``runtime`` (tests) shares an already-open Runtime; otherwise one is opened from
    ``settings`` at startup and closed at shutdown. ``otlp`` (or the ``OTEL_EXPORTER_OTLP_*`` variables)
    turns on OpenTelemetry export of every turn (``bara.observe``)."""
    settings = settings or (runtime.settings if runtime else load_settings())
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        import anyio.to_thread

        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.serve_threads
        owned = app.state.runtime is None
        if owned:
            app.state.runtime = Runtime(settings, mode=mode)
        observer = _observer(app.state.runtime, settings, otlp)
        if warm:
            await anyio.to_thread.run_sync(app.state.runtime.warm)
        try:
            yield
        finally:
            if observer is not None:  # flush the spans and metrics still queued
                app.state.runtime.observer = None
                observer.shutdown()
            if owned:
                app.state.runtime.close()

    app = FastAPI(title="bara", version="1", lifespan=lifespan, docs_url="/swagger", redoc_url=None,
                  description="Adaptive retrieval for multi-turn assistants: an OpenAI-compatible chat endpoint "
                              "(/v1) and a native API (/api) whose every turn carries its full trace.")
    app.state.runtime = runtime
    app.state.metrics = metrics.Metrics()
    app.state.slots = Slots(settings.serve_max_concurrent_per_key)
    errors.install(app)
    app.middleware("http")(metrics.middleware)
    app.add_middleware(BodyLimit, max_bytes=settings.serve_max_body_bytes,
                       upload_bytes=settings.serve_max_upload_bytes)
    app.include_router(native.router)
    app.include_router(openai_compat.router)
    app.add_api_route("/metrics", lambda: app.state.metrics.render(), include_in_schema=False)
    app.add_api_route("/docs", _api_docs, include_in_schema=False)
    for path, sub in (mounts or {}).items():
        extend(app, path, sub)
    if static_dir is not None and Path(static_dir).is_dir():
        app.router.routes.append(StaticMount("/", app=StaticFiles(directory=str(static_dir), html=True), name="static"))
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _observer(runtime: Runtime, settings: Settings, otlp: str | None) -> Any:
    """The runtime's span exporter, built at startup when export is on (None, building nothing, when off)."""
    from bara.observe import build_observer

    if runtime.observer is not None:
        return None  # a shared runtime that already exports: its owner shuts it down
    runtime.observer = build_observer(settings, otlp, embedder=runtime.bara.embedder)
    return runtime.observer


API_PREFIXES = ("/api", "/v1")  # paths the static files never serve


class StaticMount(Mount):
    """The web timeline's files at ``/``, claiming no path under the API prefixes: a wrong method on an API
    path (``PATCH /api/turns``) then gets the route's own 405 naming the methods it takes, and an unknown API
    path a JSON 404, instead of the static files' "use GET, HEAD"."""

    def matches(self, scope: Any) -> tuple[Match, Any]:
        path = scope.get("path", "")
        if any(path == p or path.startswith(p + "/") for p in API_PREFIXES):
            return Match.NONE, {}
        return super().matches(scope)


def _api_docs() -> FileResponse:
    """The API reference at /docs: a static page rendering /openapi.json, working with no network
    (FastAPI's Swagger UI, kept at /swagger, loads its scripts from a CDN)."""
    return FileResponse(STATIC_DIR / "apidocs.html", media_type="text/html")


def extend(app: FastAPI, path: str, asgi_app: Any, name: str | None = None) -> None:
    """Mount ``asgi_app`` at ``path``, ahead of the static files at ``/``."""
    routes = app.router.routes
    at = next((i for i, r in enumerate(routes) if isinstance(r, Mount) and r.path == ""), len(routes))
    routes.insert(at, Mount(path, app=asgi_app, name=name or path.strip("/")))


def user_for_key(app: FastAPI, key: str) -> ApiKey | None:
    """The live key (``user_id``, ``admin``) behind a bearer token, or None; for mounted sub-apps."""
    return app.state.runtime.keys.verify(key)


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The generated schema, with every error response documented as :class:`ErrorBody`."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    schemas["ErrorBody"] = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, sub in schemas["ErrorBody"].pop("$defs", {}).items():
        schemas.setdefault(name, sub)
    ref = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    for path, ops in schema.get("paths", {}).items():
        for method, op in ops.items():
            responses = op.setdefault("responses", {})
            codes = ["400", "413", "422", "429", "500"] if method in ("post", "put") else ["422", "500"]
            codes += ["503"]  # a store fault (store_busy, store_full, store_read_only, store_unavailable)
            if path != "/api/health":
                codes += ["401", "404"]
            if path.startswith("/v1/chat") or path == "/api/turns":
                codes += ["502", "503", "504", "400"]
            if path == "/api/ingest":
                codes += ["403", "415"]
            for code in codes:
                responses[code] = {"description": "error", **ref}
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    app.openapi_schema = schema
    return schema


def factory() -> FastAPI:
    """uvicorn ``--factory`` entry (``bara.serve.app:factory``): settings from the environment
    (``BARA_DB``, ``BARA_CONFIG``...), mode from ``BARA_SERVE_MODE``. The MCP server is mounted at ``/mcp``."""
    app = create_app(load_settings(), mode=os.environ.get(ENV_MODE, "gated"))
    mount_mcp_server(app)
    return app


def mount_mcp_server(app: FastAPI, path: str = "/mcp") -> Any:
    """Mount the MCP server at ``path``; its user is the owner of each request's live API key, and each request
    holds one of that key's concurrency slots, the same ones /v1 and /api take (``Slots``)."""
    from bara.mcp.mount import mount_mcp

    def resolve_user(key: str) -> str | None:
        found = user_for_key(app, key)
        return found.user_id if found else None

    def admit(key: str) -> Any:
        found = user_for_key(app, key)
        return app.state.slots.admit(found.key_id if found else key)

    return mount_mcp(app, extend=extend, resolve_user=resolve_user, path=path, admit=admit)
