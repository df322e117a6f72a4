"""The gate's part of the turn trace: every decision as JSON-ready snapshots, and the summary fields."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from bara.decide import GateResult
from bara.decide.policy import PolicyDecision
from bara.trace import AgentRecord, GateRecord, GateSummary


_SCALARS = (str, int, float, bool, type(None))
_NAMES: dict[type, tuple[str, ...]] = {}


def snapshot(record: Any) -> dict[str, Any]:
    """``dataclasses.asdict`` of a frozen record, equal value for value; a flat record (scalars and
    tuples of scalars, as every gate record is) is read field by field without asdict's deep copy
    (issue 16: the gate's trace costs a turn ~0.1 ms otherwise); anything nested goes through asdict."""
    names = _NAMES.get(type(record))
    if names is None:
        names = _NAMES.setdefault(type(record), tuple(f.name for f in fields(record)))
    out = {name: getattr(record, name) for name in names}
    for value in out.values():
        if not (isinstance(value, _SCALARS) or (type(value) is tuple and all(isinstance(v, _SCALARS) for v in value))):
            return asdict(record)
    return out


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
