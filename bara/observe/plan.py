"""A finished turn's trace as a tree of span plans: pure, with no OpenTelemetry import.

Each plan names its span, its real start and end (the trace's timeline: ``TurnRecorder`` intervals
and the intervals an assistant marked, wall-clock nanoseconds) and its attributes: the GenAI
semantic conventions (v1.36 names, or the latest experimental ones when ``config.latest``) and
OpenInference's side by side. A span is the child of the innermost span whose interval holds it,
else of the turn; memory writes are children of the persist span. Attribute maps live in
:mod:`bara.observe.attrs`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from bara.observe import attrs as A
from bara.observe.config import ObserveConfig
from bara.trace import StageSpan, TurnTrace

#: Trace stages that search one memory tier, and the tier.
TIER_STAGES = {"retrieve_kb": "kb", "retrieve_notes": "notes", "retrieve_qa": "qa", "retrieve_episodic": "episodic"}
#: Stages shown as their own ``bara.<stage>`` CHAIN span (the rest map to GenAI operations). Sanitising,
#: loading the window and assembling the prompt (tens of microseconds each) are left as the turn's
#: own time: every span costs the export ~0.2 ms of CPU (bench/bench_otel.py).
PLAIN_STAGES = ("load_vectors", "rewrite", "retrieve_history")
TURN = "turn"


@dataclass(frozen=True)
class SpanPlan:
    """One span to emit: ``parent`` is another plan's key (None only for the turn)."""

    key: str
    name: str
    start_ns: int
    end_ns: int
    attrs: Mapping[str, Any] = field(default_factory=dict)
    parent: str | None = None
    client: bool = False  # SpanKind.CLIENT (a call out of the process) rather than INTERNAL
    error: str | None = None  # error.type; the span's status is then ERROR


def _merged(intervals: Sequence[StageSpan]) -> tuple[int, int]:
    return min(i.start_ns for i in intervals), max(i.end_ns for i in intervals)


def _by_stage(timeline: Sequence[StageSpan]) -> dict[str, list[StageSpan]]:
    out: dict[str, list[StageSpan]] = {}
    for interval in timeline[1:]:
        out.setdefault(interval.stage, []).append(interval)
    return out


def _turn_interval(trace: TurnTrace) -> StageSpan:
    if trace.timeline:
        return trace.timeline[0]
    end = time.time_ns()  # a trace built without a recorder (tests, replays): ends now, as long as it took
    return StageSpan("total", end - int(float(trace.latency_ms.get("total", 0.0)) * 1e6), end)


def _failed(trace: TurnTrace, stage: str) -> str | None:
    prefix = f"{stage}:failed:"
    return next((r[len(prefix):] for r in trace.reasons if r.startswith(prefix)), None)


def plan_turn(trace: TurnTrace, config: ObserveConfig, message: str = "") -> tuple[SpanPlan, ...]:
    """The turn's spans, the turn first; ``message`` is the user's text (recorded only with content capture)."""
    turn = _turn_interval(trace)
    stages = _by_stage(trace.timeline)
    plans: list[SpanPlan] = []
    if "gate" in stages:
        plans.append(SpanPlan("gate", "bara.gate", *_merged(stages["gate"]), A.gate(trace)))
    plans += [SpanPlan(f"embed:{n}", f"embeddings {config.embedder_model}".strip(), i.start_ns, i.end_ns,
                       A.embedding(config)) for n, i in enumerate(stages.get("embed", ()))]
    for stage, tier in TIER_STAGES.items():
        if stage in stages:
            plans.append(SpanPlan(f"retrieval:{tier}", f"retrieval {tier}", *_merged(stages[stage]),
                                  A.retrieval(trace, tier, config), error=_failed(trace, stage)))
    plans += [SpanPlan(f"stage:{s}:{n}", f"bara.{s}", i.start_ns, i.end_ns, A.chain(s))
              for s in PLAIN_STAGES for n, i in enumerate(stages.get(s, ()))]
    plans += _model_plans(trace, stages, config)
    plans += [SpanPlan(f"tool:{n}", f"execute_tool {i.detail.get('name', '')}", i.start_ns, i.end_ns,
                       A.tool(i.detail, config), error=A.tool_error(i.detail))
              for n, i in enumerate(stages.get("tool_call", ()))]
    nested = _nest(turn, plans)
    nested += _rerank_plans(stages, nested, config)
    nested += _persist_plans(trace, stages, config)
    root = SpanPlan(TURN, A.turn_name(trace), turn.start_ns, turn.end_ns, A.turn(trace, config, message),
                    error=A.turn_error(trace))
    return (root, *nested)


def _model_plans(trace: TurnTrace, stages: Mapping[str, list[StageSpan]], config: ObserveConfig) -> list[SpanPlan]:
    calls = stages.get("model_call", ())
    if calls:  # an agent run: one span per model call
        return [SpanPlan(f"llm:{n}", f"chat {i.detail.get('model', '')}", i.start_ns, i.end_ns,
                         A.agent_llm(trace, i.detail, config, last=n == len(calls) - 1),
                         client=config.llm_provider != "bara", error=i.detail.get("error"))
                for n, i in enumerate(calls)]
    if "generate" not in stages:
        return []
    failed = next((r.rsplit(":", 1)[-1] for r in trace.reasons if r.startswith("generate:model_failed")), None)
    return [SpanPlan("llm:0", f"chat {A.model_name(trace.generator)}", *_merged(stages["generate"]),
                     A.gated_llm(trace, config), client=config.llm_provider != "bara", error=failed)]


def _nest(turn: StageSpan, plans: list[SpanPlan]) -> list[SpanPlan]:
    """Each plan parented by the innermost earlier plan whose interval holds it (else the turn)."""
    ordered = sorted(plans, key=lambda p: (p.start_ns, -p.end_ns))
    stack: list[SpanPlan] = []
    out: list[SpanPlan] = []
    for plan in ordered:
        while stack and not (stack[-1].start_ns <= plan.start_ns and plan.end_ns <= stack[-1].end_ns):
            stack.pop()
        parent = stack[-1].key if stack else TURN
        out.append(SpanPlan(plan.key, plan.name, plan.start_ns, plan.end_ns, plan.attrs, parent, plan.client,
                            plan.error))
        stack.append(out[-1])
    return out


def _rerank_plans(stages: Mapping[str, list[StageSpan]], nested: Sequence[SpanPlan],
                  config: ObserveConfig) -> list[SpanPlan]:
    """The rerank inside the knowledge search it belongs to (its end is read just after the search's)."""
    kb = next((p for p in nested if p.key == "retrieval:kb"), None)
    out = []
    for n, i in enumerate(stages.get("rerank", ())):
        start, end = (max(i.start_ns, kb.start_ns), min(i.end_ns, kb.end_ns)) if kb else (i.start_ns, i.end_ns)
        out.append(SpanPlan(f"rerank:{n}", f"rerank {i.detail.get('model', '')}", start, max(start, end),
                            A.rerank(i.detail, config), kb.key if kb else TURN))
    return out


def _persist_plans(trace: TurnTrace, stages: Mapping[str, list[StageSpan]], config: ObserveConfig) -> list[SpanPlan]:
    """The persist stage, and under it one span per memory write the turn made (``trace.stored``)."""
    persist = stages.get("persist", ())
    if not persist:
        return []
    out = [SpanPlan(f"stage:persist:{n}", "bara.persist", i.start_ns, i.end_ns, A.chain("persist"), TURN)
           for n, i in enumerate(persist)]
    for n, (operation, store, count, records) in enumerate(A.memory_writes(trace)):
        at = 0 if operation == "delete_memory" else len(persist) - 1  # the forget runs before the answer
        out.append(SpanPlan(f"memory:{n}", operation, persist[at].start_ns, persist[at].end_ns,
                            A.memory(operation, store, count, records, config), f"stage:persist:{at}"))
    return out
