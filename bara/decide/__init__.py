"""Decide, before any retrieval, whether to retrieve, from which tier and how much.

``decide`` is the one call the pipeline makes per turn: it runs understand
(features, intent, state) then decide (behaviour, policy) and returns every
intermediate result, frozen, with the combined reason codes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from bara.decide.behavior import MODES, BehaviorDecision, decide_behavior
from bara.decide.policy import ROUTES, PolicyDecision, resolve_policy
from bara.settings import Settings
from bara.types import Utterance, evolve
from bara.understand.features import ContextFeatures, compute_features, topic_similarity
from bara.understand.intent import IntentResult, classify_intent
from bara.understand.prototypes import PrototypeIndex
from bara.understand.state import ConversationState, update_state

__all__ = [
    "MODES", "ROUTES", "BehaviorDecision", "GateResult", "PolicyDecision", "decide",
    "decide_behavior", "resolve_policy",
]


@dataclass(frozen=True)
class GateResult:
    """Everything the gate concluded about one turn; ``new_state`` is what to persist."""

    intent: IntentResult
    features: ContextFeatures
    behavior: BehaviorDecision
    policy: PolicyDecision
    new_state: ConversationState
    reasons: tuple[str, ...]


def decide(message: str, history: Sequence[Utterance], state: ConversationState | None,
           profile: Mapping[str, str], settings: Settings,
           prototypes: PrototypeIndex | None = None, message_vector: np.ndarray | None = None,
           history_vectors: np.ndarray | Sequence[np.ndarray] | None = None,
           features: ContextFeatures | None = None,
           ruled: tuple[IntentResult | None] | None = None) -> GateResult:
    """Run the whole gate for ``message``; pure, so the same inputs give the same result.

    ``state`` None means a new conversation. ``history_vectors`` (embeddings of
    earlier user messages, oldest first) are optional, like ``message_vector``.
    ``features``, when the caller already computed them for ``message`` and ``history``
    (without vectors), are reused instead of recomputed, and so is ``ruled``, the caller's
    ``(apply_rules(features),)`` (the rules never read the vector-derived topic similarity).
    """
    given = features is not None
    if features is None:
        features = compute_features(message, history, profile, message_vector, history_vectors,
                                    settings=settings)
    else:  # computed by the caller without vectors: only the topic similarity depends on them
        features = evolve(features, topic_similarity=topic_similarity(message_vector, history_vectors, settings))
    intent = classify_intent(message, features, prototypes, message_vector, settings=settings,
                             ruled=ruled if given else None)
    new_state = update_state(state, message, intent, features, settings)
    behavior = decide_behavior(intent, features, new_state, settings)
    policy = resolve_policy(intent, features, behavior, settings, profile,
                            repeated=new_state.repetition_count >= 1)
    reasons = (f"intent:{intent.intent}", f"intent_source:{intent.source}") + \
        behavior.reasons + policy.reasons
    return GateResult(intent, features, behavior, policy, new_state, tuple(dict.fromkeys(reasons)))
