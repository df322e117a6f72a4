"""What any agent session shares, whatever its domain: the trace of a run and the chat transcript.

A domain's assistant (e.g. :class:`bara.domains.funds.assistant.AgentAssistant`) owns its tools,
its system prompt and which tools to offer; it runs :func:`bara.agent.loop.run_agent` and reports
the run with these helpers, so every agent turn traces the same way (``route="agent"``; tool calls,
status and usage under ``trace.gates.agent``). Nothing here names a domain or a tool, except the
one the caller passes as its document search.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from bara.agent.loop import AgentRun, ToolCallRecord
from bara.messages import AssistantMessage, Message, SystemMessage, UserMessage
from bara.trace import AgentRecord, HitRecord, TokenUsage, ToolCallTrace, TurnRecorder


def chat_messages(system: str, history: Sequence[tuple[str, str]], text: str) -> list[Message]:
    """The system prompt, the non-empty user/assistant history as (role, text), then the new message."""
    out: list[Message] = [SystemMessage(system)]
    out += [UserMessage(t) if role == "user" else AssistantMessage(text=t) for role, t in history
            if role in ("user", "assistant") and t.strip()]
    return out + [UserMessage(text)]


def run_reasons(run: AgentRun, search_tool: str) -> tuple[str, ...]:
    """Reason codes for the trace: status, each tool used (``tool_error:<code>`` for a failure a tool
    named), and what happened to ``search_tool``."""
    codes = [f"agent:status_{run.status}"]
    codes += [f"tool:{c.name}" + ("" if c.ok else "_failed") for c in run.tool_calls]
    codes += [f"tool_error:{c.result['code']}" for c in run.tool_calls if not c.ok and c.result.get("code")]
    searches = sum(c.name == search_tool for c in run.tool_calls)
    codes.append("search:skipped" if not searches else "search:reformulated" if searches > 1 else "search:once")
    return tuple(dict.fromkeys(codes))


def agent_details(run: AgentRun, offered: Sequence[str]) -> AgentRecord:
    """``trace.gates.agent``: status, counts, the tools offered, usage and every call."""
    return AgentRecord(status=run.status, error=run.error, model_calls=run.model_calls, iterations=run.iterations,
                       tools_offered=tuple(offered), usage=TokenUsage(run.usage.input_tokens, run.usage.output_tokens),
                       tool_calls=tuple(call_details(c) for c in run.tool_calls))


def call_details(c: ToolCallRecord) -> ToolCallTrace:
    return ToolCallTrace(name=c.name, args=c.args, ok=c.ok, error=c.result.get("error"),
                         latency_ms=round(c.latency_ms, 3), iteration=c.iteration)


def hit_records(call: ToolCallRecord) -> tuple[HitRecord, ...]:
    """A search call's hits as trace records (``score`` and ``fused`` are the fused RRF score)."""
    data = call.result.get("data") or {}
    return tuple(HitRecord(id=n, source=str(h.get("source", "")), section="", score=float(h.get("score") or 0.0),
                           title=str(h.get("title", "")), fused=float(h.get("score") or 0.0), tier="kb")
                 for n, h in enumerate(data.get("hits") or [], start=1))


def call_query(call: ToolCallRecord) -> str:
    """The ``query`` argument of a search call (its raw arguments when they are not an object)."""
    return str(call.args.get("query", "")) if isinstance(call.args, Mapping) else str(call.args)



def mark_run(rec: TurnRecorder, run: AgentRun, model_name: str) -> None:
    """Each model call and tool call of ``run`` as an interval of the turn's timeline (for span
    exporters: ``bara.observe``); a tool call keeps its id, arguments and result envelope."""
    for m in run.model_log:
        rec.mark("model_call", m.start_ns, m.end_ns, model=model_name, iteration=m.iteration,
                 input_tokens=m.usage.input_tokens, output_tokens=m.usage.output_tokens,
                 stop_reason=m.stop_reason, tool_calls=m.tool_calls, error=m.error)
    for c in run.tool_calls:
        rec.mark("tool_call", c.started_ns, c.started_ns + int(c.latency_ms * 1e6), id=c.id, name=c.name,
                 args=c.args, result=c.result, ok=c.ok, iteration=c.iteration)
