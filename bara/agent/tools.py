"""Tools the model may call, and the runner that turns every failure into a result.

Why it is shaped like this:

* The model chooses arguments, so it will get them wrong. A failure is a
  message for the model's next turn (``limit: Input should be less than or
  equal to 10``), never an exception out of :func:`run_tool`: the model can
  read the error and call again correctly.
* ``user_id`` lives in :class:`ToolContext`, bound by the session, and is never
  a tool argument: ownership scoping is enforced by the tool layer, not asked
  of the model in a prompt.
* Each call runs in a daemon worker thread with a timeout, so one stuck tool
  cannot hang the run. Python cannot kill a thread: a timed-out tool keeps
  running in the background, and its late result is discarded.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import contextvars
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

import pydantic

from bara.errors import InputError, StoreFaultError
from bara.llm.http import DuplicateKey, json_depth, loads_strict
from bara.messages import ToolSpec
from bara.memory.notes import NotesMemory
from bara.memory.profile import ProfileMemory
from bara.memory.qa import QAMemory
from bara.retrieval.protocol import Embedder
from bara.settings import Settings
from bara.store import Store
from bara.types import RetrievalOutcome

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # the intersection of OpenAI's and Anthropic's rules


class ToolError(Exception):
    """Raised by a tool for an expected failure; its message is shown to the model as is.

    ``code`` (optional) names the kind of failure for programs: the envelope carries it next to the
    message (``"code": "scheme_not_found"``) and the turn's trace lists it (``tool_error:<code>``)."""

    def __init__(self, *args: Any, code: str | None = None) -> None:
        super().__init__(*args)
        self.code = code


class ToolInputError(ToolError):
    """A :class:`ToolError` caused by the call's arguments (a scheme that matches nothing): the caller must
    change them. Other ToolErrors (no store, no retriever) are the session's, not the caller's."""


class DocumentSearch(Protocol):
    """What ``search_documents``-style tools need of a retriever (:class:`bara.retrieval.hybrid.HybridRetriever`)."""

    def search(self, query: str, *, k: int | None = None,
               collections: Sequence[str] = ("kb",)) -> RetrievalOutcome: ...


@dataclass(frozen=True)
class ToolServices:
    """What tools may use besides the store; None = this session has none (the tool says so)."""

    retriever: DocumentSearch | None = None
    embedder: Embedder | None = None
    profile: ProfileMemory | None = None  # the memory tiers of the program's Bara (MCP's recall/remember)
    notes: NotesMemory | None = None
    qa: QAMemory | None = None
    domain: Mapping[str, Any] = field(default_factory=dict)  # a plug-in's own objects, e.g. "funds": FundsRepo


@dataclass(frozen=True)
class ToolContext:
    """What a tool may rely on besides its arguments; built by the session, not the model."""

    user_id: str
    store: Store
    settings: Settings
    deadline: float  # time.monotonic() deadline for the whole run
    services: ToolServices = field(default_factory=ToolServices)

    @classmethod
    def start(cls, user_id: str, store: Store, settings: Settings,
              services: ToolServices | None = None) -> "ToolContext":
        """A context whose deadline is ``settings.agent_deadline_s`` from now."""
        return cls(user_id, store, settings, time.monotonic() + settings.agent_deadline_s, services or ToolServices())

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()


@dataclass(frozen=True)
class Tool:
    name: str
    description: str  # must say when NOT to use it
    args_model: type[pydantic.BaseModel]  # model_config = ConfigDict(extra="forbid")
    fn: Callable[[ToolContext, Any], Any]  # called with an args_model instance; returns JSON-serialisable data
    timeout_s: float = 5.0

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise InputError(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-' (provider rule)")
        if not self.description.strip():
            raise InputError(f"tool {self.name!r} needs a description that says when (not) to use it")
        if self.args_model.model_config.get("extra") != "forbid":
            raise InputError(f"tool {self.name!r}: set model_config = ConfigDict(extra='forbid') on "
                             f"{self.args_model.__name__} so misspelt arguments reach the model as errors")

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.args_model.model_json_schema())


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    data: Any = None
    error: str | None = None
    latency_ms: float = 0.0
    bad_input: bool = False  # failed because of the call (unknown tool, refused arguments), not a fault
    code: str | None = None  # a ToolError's code, when it gave one

    def envelope(self) -> dict[str, Any]:
        """What the model sees: ``{"ok": True, "data": ...}`` or ``{"ok": False, "error": ...}`` (plus
        ``"code"`` when the tool named the kind of failure)."""
        if self.ok:
            return {"ok": True, "data": self.data}
        return {"ok": False, "error": self.error, **({"code": self.code} if self.code else {})}

    def to_json(self) -> str:
        return json.dumps(self.envelope(), ensure_ascii=False, allow_nan=False)


def toolbox(tools: Iterable[Tool]) -> dict[str, Tool]:
    """Tools by name; duplicate names are a programming error."""
    out: dict[str, Tool] = {}
    for tool in tools:
        if tool.name in out:
            raise InputError(f"two tools are named {tool.name!r}; tool names must be unique")
        out[tool.name] = tool
    return out


def format_validation_error(exc: pydantic.ValidationError) -> str:
    """``path: message; ...`` — short enough for the model to act on."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {_message(e)}" for e in exc.errors())


def _message(error: Any) -> str:
    """A validator's own words, without pydantic's "Value error, " / "Assertion failed, " prefix."""
    raised = (error.get("ctx") or {}).get("error")
    return str(raised) if error.get("type") in ("value_error", "assertion_error") and raised else error["msg"]


def run_tool(tools: Mapping[str, Tool], name: str, raw_args: Mapping[str, Any] | str | None,
             ctx: ToolContext) -> ToolResult:
    """Validate and run one call; every failure comes back as ``ok=False`` with a readable error."""
    start = time.perf_counter()
    tool = tools.get(name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "(none)"
        return _failed(f"unknown tool {name!r}; known tools: {known}", start, bad_input=True)
    args = _parse_args(tool, raw_args, ctx.settings.tool_args_max_depth)
    if isinstance(args, str):
        return _failed(args, start, bad_input=True)
    result = _call_with_timeout(tool, args, ctx)
    return dataclasses.replace(result, latency_ms=(time.perf_counter() - start) * 1000)


def _failed(error: str, start: float, bad_input: bool = False) -> ToolResult:
    return ToolResult(ok=False, error=error, latency_ms=(time.perf_counter() - start) * 1000, bad_input=bad_input)


def parse_tool_args(raw: Mapping[str, Any] | str | None, max_depth: int) -> dict[str, Any] | str:
    """Decoded tool arguments as a dict, or an error message saying what to send instead.

    Never raises: a nesting bomb (``[[[[...]]]]`` thousands deep) is refused by
    its depth, not met with a RecursionError.
    """
    if isinstance(raw, str):
        try:
            raw = loads_strict(raw) if raw.strip() else {}
        except RecursionError:
            return f"arguments: JSON nested too deeply; send a flat JSON object (at most {max_depth} levels)"
        except DuplicateKey as exc:
            return f"{exc.key}: given more than once in the arguments; send each argument once"
        except ValueError as exc:
            return f"arguments: not valid JSON ({exc}); send a JSON object"
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        return f"arguments: expected a JSON object, got {type(raw).__name__}"
    if json_depth(raw, max_depth) > max_depth:
        return f"arguments: JSON nested deeper than {max_depth} levels; send a flat JSON object"
    if not is_strict_json(raw):
        return "arguments: NaN and Infinity are not JSON numbers; send finite numbers (or omit the field)"
    return dict(raw)


def is_strict_json(value: Any) -> bool:
    """True when ``value`` serialises as standard JSON (no NaN/Infinity, only JSON types)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def _parse_args(tool: Tool, raw: Mapping[str, Any] | str | None, max_depth: int) -> pydantic.BaseModel | str:
    """The validated arguments, or an error message for the model."""
    args = parse_tool_args(raw, max_depth)
    if isinstance(args, str):
        return args
    schema = _schema(tool.args_model)
    refused = booleans_for_numbers(schema, args, schema.get("$defs") or {})
    try:
        valid = tool.args_model.model_validate(args)
    except pydantic.ValidationError as exc:
        paths = {r.split(":", 1)[0] for r in refused}
        others = [e for e in format_validation_error(exc).split("; ") if e.split(":", 1)[0] not in paths]
        return "; ".join(refused + others)
    return "; ".join(refused) if refused else valid


@functools.lru_cache(maxsize=64)
def _schema(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


def booleans_for_numbers(schema: Mapping[str, Any], value: Any, defs: Mapping[str, Any], path: str = "") -> list[str]:
    """``path: ...`` errors for each JSON ``true``/``false`` sent where ``schema`` wants a number.

    Pydantic's lax mode reads ``true`` as 1 for an ``int`` (and 1.0 for a ``float``); strict mode would
    also refuse the integral ``5.0`` and the ``"5"`` the tools accept. So booleans alone are refused,
    by the argument's JSON schema, before validation: the model learns it sent the wrong type."""
    branches = _branches(schema, defs)
    if isinstance(value, bool):
        kinds = {b.get("type") for b in branches}
        if "boolean" in kinds or not kinds & {"integer", "number"}:
            return []
        want = "an integer" if "integer" in kinds else "a number"
        return [f"{path or 'arguments'}: Input should be {want}, not a boolean (got {json.dumps(value)})"]
    out: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            subs = [b["properties"][key] for b in branches if key in (b.get("properties") or {})]
            out += [e for sub in subs[:1] for e in booleans_for_numbers(sub, item, defs, _join(path, key))]
    elif isinstance(value, list):
        subs = [b["items"] for b in branches if isinstance(b.get("items"), Mapping)]
        for i, item in enumerate(value):
            out += [e for sub in subs[:1] for e in booleans_for_numbers(sub, item, defs, _join(path, i))]
    return out


def _branches(schema: Mapping[str, Any], defs: Mapping[str, Any], depth: int = 0) -> list[Mapping[str, Any]]:
    """``schema`` with ``$ref`` resolved and ``anyOf``/``oneOf``/``allOf`` flattened into its alternatives."""
    if depth > 8 or not isinstance(schema, Mapping):
        return []
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _branches(defs.get(ref.rsplit("/", 1)[1]) or {}, defs, depth + 1)
    parts = [p for k in ("anyOf", "oneOf", "allOf") for p in schema.get(k) or ()]
    if not parts:
        return [schema]
    return [b for p in parts for b in _branches(p, defs, depth + 1)]


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _call_with_timeout(tool: Tool, args: pydantic.BaseModel, ctx: ToolContext) -> ToolResult:
    limit = min(tool.timeout_s, ctx.remaining_s())
    if limit <= 0:
        return ToolResult(ok=False, error=f"timeout: the run's deadline passed before tool {tool.name} started")
    box: list[ToolResult] = []
    caller = contextvars.copy_context()  # the tool sees the caller's context, e.g. the store's user scope
    worker = threading.Thread(target=lambda: box.append(caller.run(_invoke, tool, args, ctx)),
                              name=f"bara-tool-{tool.name}", daemon=True)
    worker.start()
    worker.join(limit)
    if not box:
        which = f"tool {tool.name} exceeded {tool.timeout_s}s" if limit == tool.timeout_s else \
            f"tool {tool.name} was cut off by the run deadline after {limit:.2f}s"
        return ToolResult(ok=False, error=f"timeout: {which}")
    return box[0]


def _invoke(tool: Tool, args: pydantic.BaseModel, ctx: ToolContext) -> ToolResult:
    try:
        data = _jsonable(tool.fn(ctx, args))
    except ToolError as exc:
        return ToolResult(ok=False, error=str(exc) or "ToolError", bad_input=isinstance(exc, ToolInputError),
                          code=exc.code)
    except StoreFaultError as exc:  # the store, not the call, failed: its cause, so the caller can retry later
        return store_fault_result(exc)
    except Exception as exc:  # noqa: BLE001 - any tool bug becomes a result the model can read
        return ToolResult(ok=False, error=f"{type(exc).__name__}: {exc}")
    return ToolResult(ok=True, data=data)


def store_fault_result(exc: StoreFaultError) -> ToolResult:
    """A store fault as a failed call whose ``code`` names the cause (``store_busy``, ``store_full``...)."""
    return ToolResult(ok=False, error=f"{exc.code}: {exc}", code=exc.code)


def _jsonable(data: Any) -> Any:
    """Tool output as plain JSON data; pydantic models and dataclasses are converted."""
    if isinstance(data, pydantic.BaseModel):
        data = data.model_dump(mode="json")
    elif dataclasses.is_dataclass(data) and not isinstance(data, type):
        data = dataclasses.asdict(data)
    try:
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"result is not strict JSON ({exc}); the tool must return plain data, None for NaN") from exc
    return data
