"""What every turn adds to the metrics, read once from its trace for both metric back ends.

Prometheus (``/metrics``, :mod:`bara.serve.metrics`) reads a trace's JSON; OpenTelemetry metrics
(:class:`bara.observe.export.TurnMetrics`) read the :class:`~bara.trace.TurnTrace`. Both go through
:func:`measures`, so the two views count the same things: turns by mode and route, retrievals
skipped, each tier's search time, the context tokens retrieval added and the items injected per tier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from bara.observe.plan import TIER_STAGES


@dataclass(frozen=True)
class TurnMeasures:
    mode: str
    route: str
    skipped: bool  # no tier was searched this turn
    retrieval_s: Mapping[str, float]  # tier -> seconds its search took (only tiers searched)
    context_tokens: int  # tokens of retrieved context in the prompt
    items: Mapping[str, int]  # tier -> items injected into the prompt


def measures(mode: str, route: str, retrieved: bool, latency_ms: Mapping[str, Any], context_tokens: int,
             tiers: Mapping[str, Any]) -> TurnMeasures:
    searched = {tier: float(latency_ms.get(stage) or 0.0) / 1e3 for stage, tier in TIER_STAGES.items()
                if latency_ms.get(stage)}
    return TurnMeasures(mode=mode, route=route, skipped=not retrieved, retrieval_s=searched,
                        context_tokens=int(context_tokens or 0),
                        items={str(t): int(n or 0) for t, n in tiers.items() if n})


def json_measures(trace: Mapping[str, Any]) -> TurnMeasures:
    """:func:`measures` of a trace's JSON (``TurnTrace.to_json()``)."""
    return measures(str(trace.get("mode", "")), str(trace.get("route", "")), bool(trace.get("retrieved")),
                    trace.get("latency_ms") or {}, int(trace.get("context_tokens") or 0), trace.get("tiers") or {})
