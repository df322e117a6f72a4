"""The gate's part of the turn trace: every decision as JSON-ready snapshots, and the summary fields."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from bara.decide import GateResult
from bara.decide.policy import PolicyDecision
from bara.trace import AgentRecord, GateRecord, GateSummary


def policy_snapshot(policy: PolicyDecision) -> dict[str, Any]:
    """The policy's fields plus ``retrieves`` (whether any store lookup runs)."""
    return {**asdict(policy), "retrieves": policy.retrieves}


def gate_record(gate: GateResult, policy: PolicyDecision | None = None,
                agent: AgentRecord | None = None) -> GateRecord:
    """Every gate's decision and reasons; ``policy`` is the one hooks left (shown when it differs)."""
    features = {k: v for k, v in asdict(gate.features).items() if k != "normalized"}
    after = policy_snapshot(policy) if policy is not None and policy != gate.policy else None
    return GateRecord(features=features, intent=asdict(gate.intent), behavior=asdict(gate.behavior),
                      policy=policy_snapshot(gate.policy), state=gate.new_state.to_dict(),
                      policy_after_hooks=after, agent=agent)


def gate_summary(gate: GateResult | None, policy: PolicyDecision | None) -> GateSummary:
    """Intent, behaviour and route fields; a None gate is the always-mode baseline (no gates)."""
    if gate is None or policy is None:
        return GateSummary()
    return GateSummary(intent=gate.intent.intent, intent_source=gate.intent.source,
                       intent_confidence=gate.intent.confidence, behavior_mode=gate.behavior.mode,
                       route=policy.route, gates=gate_record(gate, policy))
