"""The gate's part of the turn trace: every decision as JSON-ready snapshots, and the summary fields."""

from __future__ import annotations

from dataclasses import asdict, fields
from operator import attrgetter
from typing import Any, Callable

from bara.decide import GateResult
from bara.decide.policy import PolicyDecision
from bara.trace import AgentRecord, GateRecord, GateSummary


_SCALARS = (str, int, float, bool, type(None))
_FLAT = frozenset(_SCALARS)  # exact types: a subclass (an enum) takes asdict's way, to the same values
_READERS: dict[type, tuple[tuple[str, ...], Callable[[Any], Any]]] = {}


def snapshot(record: Any) -> dict[str, Any]:
    """``dataclasses.asdict`` of a frozen record, equal value for value; a flat record (scalars and
    tuples of scalars, as every gate record is) is read in one ``attrgetter`` call without asdict's
    deep copy (the gate's trace costs a turn ~0.1 ms otherwise); anything nested goes
    through asdict."""
    reader = _READERS.get(type(record))
    if reader is None:
        names = tuple(f.name for f in fields(record))
        get = attrgetter(*names) if len(names) > 1 else (lambda r: tuple(getattr(r, n) for n in names))
        reader = _READERS.setdefault(type(record), (names, get))
    names, get = reader
    values = get(record)
    for value in values:
        if type(value) not in _FLAT and not (type(value) is tuple and all(type(v) in _FLAT for v in value)):
            return asdict(record)
    return dict(zip(names, values, strict=True))


def policy_snapshot(policy: PolicyDecision) -> dict[str, Any]:
    """The policy's fields plus ``retrieves`` (whether any store lookup runs)."""
    return {**snapshot(policy), "retrieves": policy.retrieves}


def gate_record(gate: GateResult, policy: PolicyDecision | None = None,
                agent: AgentRecord | None = None) -> GateRecord:
    """Every gate's decision and reasons; ``policy`` is the one hooks left (shown when it differs)."""
    features = {k: v for k, v in snapshot(gate.features).items() if k != "normalized"}
    after = policy_snapshot(policy) if policy is not None and policy != gate.policy else None
    return GateRecord(features=features, intent=snapshot(gate.intent), behavior=snapshot(gate.behavior),
                      policy=policy_snapshot(gate.policy), state=gate.new_state.to_dict(),
                      policy_after_hooks=after, agent=agent)


def gate_summary(gate: GateResult | None, policy: PolicyDecision | None) -> GateSummary:
    """Intent, behaviour and route fields; a None gate is the always-mode baseline (no gates)."""
    if gate is None or policy is None:
        return GateSummary()
    return GateSummary(intent=gate.intent.intent, intent_source=gate.intent.source,
                       intent_confidence=gate.intent.confidence, behavior_mode=gate.behavior.mode,
                       route=policy.route, gates=gate_record(gate, policy))
