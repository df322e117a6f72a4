"""JSON errors: every refusal is ``{"error": {"type", "message", "param", "code"}}`` and says what to change.

That is OpenAI's error shape, so OpenAI clients read it on ``/v1`` (``code`` repeats bara's stable
``type``; ``param`` names the request field to change, or is null).

Provider faults become 502 (the model failed) or 504 (it did not answer in time) with a fixed
message that names neither the provider's URL nor any key.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from bara.errors import BaraError, InputError, StoreFaultError, UnknownConversationError
from bara.llm.errors import LLMDeadlineError, LLMError


class ApiError(Exception):
    def __init__(self, status: int, type_: str, message: str, headers: dict[str, str] | None = None,
                 param: str | None = None):
        super().__init__(message)
        self.status, self.type, self.message, self.headers, self.param = status, type_, message, headers, param


def not_found(what: str = "conversation") -> ApiError:
    """The one answer for unknown ids and other users' ids alike."""
    return ApiError(404, "not_found", f"no such {what}: use an id returned to this API key")


def error_body(type_: str, message: str, param: str | None = None) -> dict[str, dict[str, str | None]]:
    return {"error": {"type": type_, "message": message, "param": param, "code": type_}}


def error_json(status: int, type_: str, message: str, headers: dict[str, str] | None = None,
               param: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(type_, message, param), status_code=status, headers=headers)


def _http_message(request: Request, exc: StarletteHTTPException) -> str:
    """Starlette's bare "Not Found" / "Method Not Allowed" turned into what to change."""
    where = f"{request.method} {request.url.path}"
    if exc.status_code == 404 and exc.detail == "Not Found":
        return f"no such path: {where}; the API's paths are listed at /docs (OpenAPI schema at /openapi.json)"
    if exc.status_code == 405:
        allowed = _allow_header(request, exc) or "another method"
        return f"{request.method} is not allowed on {request.url.path}: use {allowed} (see /docs)"
    if exc.status_code == 400:  # only a body that could not be parsed raises a bare 400 here
        if "multipart/" in request.headers.get("content-type", ""):
            return (f"the multipart upload could not be read ({exc.detail}): send multipart/form-data with the "
                    "file in a field named 'file' (with curl: -F file=@notes.txt)")
        return ("the request body could not be parsed: send one complete JSON object, nested at most a few "
                "hundred levels deep, with Content-Type: application/json")
    return str(exc.detail)


def _allow_header(request: Request, exc: StarletteHTTPException) -> str:
    """Every method the API documents for this path (``/api/memory``: GET and DELETE, two routes), else the
    Allow header of the one route the router tried first."""
    methods = {m.upper() for m in documented_operations(request)}
    return ", ".join(sorted(methods)) or (getattr(exc, "headers", None) or {}).get("Allow", "")


def documented_operations(request: Request) -> dict[str, Any]:
    """method -> OpenAPI operation, of every path template of the schema that matches this request's path
    (``/api/memory`` has two routes: GET and DELETE)."""
    return {method: op for template, ops in request.app.openapi().get("paths", {}).items()
            if path_pattern(template).fullmatch(request.url.path) for method, op in ops.items()}


@lru_cache(maxsize=256)
def path_pattern(template: str) -> re.Pattern[str]:
    """``/api/traces/{trace_id}`` as a regular expression (a parameter matches any non-empty text)."""
    return re.compile("".join(".+" if part.startswith("{") else re.escape(part)
                              for part in re.split(r"(\{[^}]+\})", template)))


def _validation_message(request: Request, exc: RequestValidationError) -> str:
    errors = exc.errors()
    if _json_sent_as_something_else(request, errors):
        sent = request.headers.get("content-type") or "none"
        return (f"the request body must be a JSON object sent with the header Content-Type: application/json "
                f"(this request's Content-Type: {sent}); with curl, add -H 'Content-Type: application/json'")
    if any(e.get("type") == "json_invalid" for e in errors):
        e = next(e for e in errors if e.get("type") == "json_invalid")
        at = e.get("loc", ("body", "?"))[-1]
        return (f"the request body is not valid JSON (error near character {at}): send a JSON object "
                "with Content-Type: application/json")
    parts = []
    for e in errors[:5]:
        loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
        parts.append(f"{loc}: {e.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(parts) + " (fix these fields and retry)"


def _json_sent_as_something_else(request: Request, errors: Any) -> bool:
    """A body refused as a whole (not an object) whose Content-Type is not JSON: FastAPI then reads the
    body as raw bytes, so even a valid JSON object fails, and "fix these fields" would mislead."""
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    whole_body = any(tuple(e.get("loc", ())) == ("body",) and e.get("type") != "missing" for e in errors)
    return whole_body and not (kind == "application/json" or kind.endswith("+json"))


def _validation_param(exc: RequestValidationError) -> str | None:
    """The first invalid field, dotted as the request spells it (``messages.0.role``); None for the body."""
    for e in exc.errors():
        loc = [str(p) for p in e.get("loc", ()) if p not in ("body", "query", "path", "header")]
        if loc and e.get("type") != "json_invalid":
            return ".".join(loc)
    return None


def provider_error(exc: LLMError) -> ApiError:
    if isinstance(exc, LLMDeadlineError) or "Timeout" in str(exc):  # the text stays internal
        return ApiError(504, "provider_timeout", "the model provider did not answer in time; retry later")
    return ApiError(502, "provider_error", f"the model provider failed ({type(exc).__name__}); retry later "
                    "or ask the operator to check the model configuration")


STORE_RETRY_AFTER_S = 2  # what a store fault's Retry-After asks: a short wait, since most clear by themselves
STORE_FAULTS = {"store_busy": "the store is busy (another writer holds it, or every connection is in use)",
                "store_full": "the store's disk is full", "store_read_only": "the store has become read-only",
                "store_unavailable": "the store cannot be reached or read now"}


def store_fault(exc: StoreFaultError) -> ApiError:
    """A store fault as a 503 naming its cause (``code``), never the file path or the database URL; the
    request was not completed and nothing of it was stored."""
    what = STORE_FAULTS.get(exc.code, STORE_FAULTS["store_unavailable"])
    return ApiError(503, exc.code, f"{what}: this request was not completed and nothing of it was stored; "
                    f"retry after {STORE_RETRY_AFTER_S} s, or ask the operator if it persists",
                    {"Retry-After": str(STORE_RETRY_AFTER_S)})


def _install_store(app: FastAPI) -> None:
    @app.exception_handler(StoreFaultError)
    async def _store(request: Request, exc: StoreFaultError) -> JSONResponse:
        runtime = getattr(request.app.state, "runtime", None)
        if runtime is not None:
            runtime.store_fault(exc.code)  # /api/health reports the store down for a while
        err = store_fault(exc)
        return error_json(err.status, err.type, err.message, err.headers)


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return error_json(exc.status, exc.type, exc.message, exc.headers, exc.param)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_json(422, "invalid_request", _validation_message(request, exc), param=_validation_param(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {400: "invalid_body", 404: "not_found", 405: "method_not_allowed",
                413: "request_too_large"}.get(exc.status_code, "http_error")
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:
            headers = {**(headers or {}), "Allow": _allow_header(request, exc)}
        return error_json(exc.status_code, kind, _http_message(request, exc), headers)

    @app.exception_handler(LLMError)
    async def _llm(_: Request, exc: LLMError) -> JSONResponse:
        err = provider_error(exc)
        return error_json(err.status, err.type, err.message)

    @app.exception_handler(UnknownConversationError)
    async def _gone(_: Request, exc: UnknownConversationError) -> JSONResponse:
        # e.g. deleted (DELETE /api/memory?conversations=true) while a turn on it waited for its lock
        err = not_found()
        return error_json(err.status, err.type, err.message)

    @app.exception_handler(InputError)
    async def _input(_: Request, exc: InputError) -> JSONResponse:
        return error_json(400, "invalid_input", str(exc))

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        return error_json(500, "internal_error", "the server failed on this request (a bug); it was not "
                          "completed: retry, and report it if it persists")

    _install_store(app)

    @app.exception_handler(BaraError)
    async def _bara(_: Request, exc: BaraError) -> JSONResponse:
        return error_json(503, "unavailable", f"the service cannot serve this now ({type(exc).__name__}); "
                          "retry later or ask the operator")

