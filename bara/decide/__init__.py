"""Decide, before any retrieval, whether to retrieve, from which tier and how much.

The gate (:mod:`bara.decide.gate`) runs understand (features, intent, state) then decide
(behaviour, policy) and returns every intermediate result, frozen, with the combined reason codes:
in two phases for a turn (:class:`Gate`: read the message, conclude once its vector is known) or in
one call (:func:`decide`).
"""

from __future__ import annotations

from bara.decide.behavior import MODES, BehaviorDecision, decide_behavior
from bara.decide.gate import SEARCHING_INTENTS, Conversation, Gate, GateDecision, GateDraft, GateResult, decide
from bara.decide.policy import ROUTES, PolicyDecision, resolve_policy

__all__ = [
    "MODES", "ROUTES", "SEARCHING_INTENTS", "BehaviorDecision", "Conversation", "Gate", "GateDecision", "GateDraft", "GateResult",
    "PolicyDecision", "decide", "decide_behavior", "resolve_policy",
]
