"""The agent loop: the model decides whether and which tools to call, bara runs them.

Why it is shaped like this:

* Retrieval is one tool among several, so the model can skip it, run it after
  a computation, or run it twice; the loop only executes what was asked.
* Every tool failure is returned to the model as a result it can read (see
  :mod:`bara.agent.tools`); only model/provider failures end a run early, as
  ``status="error"`` with the transcript kept for the trace.
* ``max_iterations`` caps the model calls that offer tools. If the model still
  wants tools after the last one, those calls are answered "not run", and ONE
  final call without tools asks for an answer from what was gathered; that
  answer is prefixed with :data:`INCOMPLETE_NOTE` and the run is
  ``incomplete``: say so rather than fail or spiral.
* ``agent_max_tool_calls`` caps the tool calls executed in one run, since one
  reply may list any number of parallel calls: calls past it are answered
  "not run" and the run wraps up the same way.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from bara.agent.tools import Tool, ToolContext, ToolResult, is_strict_json, run_tool, toolbox
from bara.errors import InputError
from bara.llm.base import Model, ModelResponse
from bara.llm.errors import public_reason
from bara.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, ToolSpec, Usage

INCOMPLETE_NOTE = "(Based on incomplete work: the tool-call limit was reached before every lookup finished.)\n\n"
NOT_RUN = ("not run: the limit of {cap} tool rounds was reached; answer now from the results you already "
           "have and say what could not be checked")

TOO_MANY = ("not run: this run already executed its limit of {cap} tool calls; answer now from the results "
            "you already have and say what could not be checked")

COMPLETE, INCOMPLETE, ERROR = "complete", "incomplete", "error"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolCallRecord:
    """One executed (or refused) tool call, as the trace shows it."""

    id: str
    name: str
    args: Any  # the arguments as sent: a dict, or the raw string when it was not JSON
    result: Mapping[str, Any]  # the envelope the model saw
    latency_ms: float
    iteration: int
    started_ns: int = 0  # wall clock (``time.time_ns``) when the call began; 0 = unknown

    @property
    def ok(self) -> bool:
        return self.result.get("ok") is True


@dataclass(frozen=True)
class ModelCallRecord:
    """One model call of a run: when (wall-clock ns), what it cost and why it stopped."""

    iteration: int
    start_ns: int
    end_ns: int
    usage: Usage
    stop_reason: str
    tool_calls: int  # calls the reply asked for
    error: str | None = None  # why the call failed (the run then ends with ``status="error"``)


@dataclass(frozen=True)
class AgentEvent:
    """Progress for ``on_event``: ``model_response``, ``tool_result`` or ``finished``."""

    kind: str
    iteration: int
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentRun:
    status: str  # complete | incomplete | error
    messages: tuple[Message, ...]  # full transcript, input messages included
    tool_calls: tuple[ToolCallRecord, ...]
    usage: Usage
    iterations: int  # model calls that offered tools (<= max_iterations)
    error: str | None = None
    model_calls: int = 0  # iterations, plus 1 when a wrap-up call was made
    model_log: tuple[ModelCallRecord, ...] = ()  # every model call, in order (for span exporters)

    @property
    def answer(self) -> str:
        """Text of the last assistant message ("" if the model never answered)."""
        last = [m for m in self.messages if isinstance(m, AssistantMessage)]
        return last[-1].text if last else ""


class _Run:
    """Mutable accumulator for one run; frozen into an AgentRun at the end."""

    def __init__(self, messages: Sequence[Message], on_event: Callable[[AgentEvent], None] | None) -> None:
        self.messages: list[Message] = list(messages)
        self.records: list[ToolCallRecord] = []
        self.calls: list[ModelCallRecord] = []
        self.usage = Usage()
        self.iterations = 0
        self.model_calls = 0
        self.executed = 0  # tool calls actually run (refused ones are recorded but not counted)
        self.on_event = on_event

    def emit(self, kind: str, **detail: Any) -> None:
        if self.on_event is not None:
            self.on_event(AgentEvent(kind, self.iterations, detail))

    def finish(self, status: str, error: str | None = None) -> AgentRun:
        self.emit("finished", status=status, error=error)
        return AgentRun(status, tuple(self.messages), tuple(self.records), self.usage, self.iterations,
                        error, self.model_calls, tuple(self.calls))


def run_agent(model: Model, messages: Sequence[Message], tools: Mapping[str, Tool] | Sequence[Tool],
              ctx: ToolContext, max_iterations: int | None = None,
              on_event: Callable[[AgentEvent], None] | None = None) -> AgentRun:
    """Let ``model`` answer ``messages``, calling ``tools`` for at most ``max_iterations`` model calls.

    ``max_iterations`` defaults to ``ctx.settings.agent_max_iterations`` (6).
    Never raises for model, provider or tool failures: see ``AgentRun.status``.
    """
    cap = ctx.settings.agent_max_iterations if max_iterations is None else max_iterations
    if cap < 1:
        raise InputError(f"max_iterations must be >= 1, got {cap}")
    box = toolbox(tools.values() if isinstance(tools, Mapping) else tools)
    specs = tuple(t.spec() for t in box.values())
    run = _Run(messages, on_event)
    while run.iterations < cap:
        run.iterations += 1
        reply = _ask(model, run, specs, ctx)
        if isinstance(reply, str):
            return run.finish(ERROR, reply)
        calls = reply.message.tool_calls
        if not calls:
            return run.finish(COMPLETE)
        if run.iterations == cap:
            break
        if not _execute(calls, box, ctx, run):
            break  # the run's tool-call budget is spent: wrap up as at the iteration cap
    return _wrap_up(model, run, cap, ctx)


def _ask(model: Model, run: _Run, specs: tuple[ToolSpec, ...], ctx: ToolContext) -> ModelResponse | str:
    """One model call appended to the transcript; an error message instead if it failed."""
    if ctx.remaining_s() <= 0:
        return (f"the run's deadline passed before model call {run.model_calls + 1}; "
                "raise agent_deadline_s or offer fewer tools")
    run.model_calls += 1
    start = time.time_ns()
    try:
        reply = model.complete(tuple(run.messages), specs, deadline=ctx.deadline)
    except Exception as exc:  # noqa: BLE001 - any provider failure ends the run, transcript kept
        # The error reaches the user's answer: say what kind of failure, never the provider's URL or text.
        log.warning("model %s failed: %s: %s", getattr(model, "name", "?"), type(exc).__name__, exc)
        run.calls.append(ModelCallRecord(run.iterations, start, time.time_ns(), Usage(), "error", 0,
                                         type(exc).__name__))
        return f"{public_reason(exc)} ({type(exc).__name__})"
    run.calls.append(ModelCallRecord(run.iterations, start, time.time_ns(), reply.usage, reply.stop_reason,
                                     len(reply.message.tool_calls)))
    reply = dataclasses.replace(reply, message=_unique_ids(reply.message, run.messages))
    run.messages.append(reply.message)
    run.usage = run.usage + reply.usage
    run.emit("model_response", text=reply.message.text, tool_calls=[c.name for c in reply.message.tool_calls],
             stop_reason=reply.stop_reason)
    return reply


def _unique_ids(message: AssistantMessage, transcript: Sequence[Message]) -> AssistantMessage:
    """``message`` with every call id that repeats one already used given a fresh one.

    Providers pair a result with its call by id, and the Anthropic API rejects a request whose
    ``tool_use`` ids repeat; a model (or a compatible server that numbers calls ``call_0``...
    afresh each turn) that reuses an id would otherwise end the run on the next call.
    """
    seen = {c.id for m in transcript if isinstance(m, AssistantMessage) for c in m.tool_calls}
    calls: list[ToolCall] = []
    for call in message.tool_calls:
        fresh, n = call.id, 1
        while fresh in seen:
            n += 1
            fresh = f"{call.id}_{n}"
        seen.add(fresh)
        calls.append(call if fresh == call.id else dataclasses.replace(call, id=fresh))
    return message if calls == list(message.tool_calls) else dataclasses.replace(message, tool_calls=tuple(calls))


def _execute(calls: Sequence[ToolCall], box: Mapping[str, Tool], ctx: ToolContext, run: _Run) -> bool:
    """Run each call of one assistant message in order and append its result; past the run's
    ``agent_max_tool_calls`` a call is answered "not run" instead. False when any call was refused."""
    cap, refused = ctx.settings.agent_max_tool_calls, False
    for call in calls:
        if run.executed >= cap:
            _record(run, call, ToolResult(ok=False, error=TOO_MANY.format(cap=cap)))
            refused = True
            continue
        run.executed += 1
        raw = call.raw_arguments if call.raw_arguments is not None else call.arguments
        start = time.time_ns()
        _record(run, call, run_tool(box, call.name, raw, ctx), start)
    return not refused


def _record(run: _Run, call: ToolCall, result: ToolResult, started_ns: int = 0) -> None:
    envelope = result.envelope()
    args = call.raw_arguments if call.raw_arguments is not None else dict(call.arguments)
    if not is_strict_json(args):  # e.g. NaN from a lenient parser: the trace keeps it as text, still JSON
        args = json.dumps(args, ensure_ascii=False, default=repr)
    run.records.append(ToolCallRecord(call.id, call.name, args, envelope, result.latency_ms, run.iterations,
                                      started_ns or time.time_ns()))
    run.messages.append(ToolResultMessage(call.id, call.name, _dumps(envelope), is_error=not result.ok))
    run.emit("tool_result", name=call.name, ok=result.ok, latency_ms=result.latency_ms)


def _dumps(envelope: Mapping[str, Any]) -> str:
    return json.dumps(envelope, ensure_ascii=False, allow_nan=False)


def _wrap_up(model: Model, run: _Run, cap: int, ctx: ToolContext) -> AgentRun:
    """Refuse the pending calls, then ask once more with no tools offered."""
    pending = run.messages[-1]
    for call in pending.tool_calls if isinstance(pending, AssistantMessage) else ():
        _record(run, call, ToolResult(ok=False, error=NOT_RUN.format(cap=cap)))
    reply = _ask(model, run, (), ctx)
    if isinstance(reply, str):
        return run.finish(ERROR, reply)
    text = reply.message.text.strip() or "I could not finish gathering what this question needs."
    run.messages[-1] = AssistantMessage(text=INCOMPLETE_NOTE + text)  # calls made now could not be answered
    return run.finish(INCOMPLETE)
