"""The gate in two phases, both pure: read the message, then conclude once its vector is known.

:meth:`Gate.read` computes what needs no vector (features without the topic similarity, the named
rules) and says whether the turn may search at all; the caller embeds the message only then, reads
the topic vector before this turn and the episodic names the message may mention (I/O that lives
outside ``decide``), and hands them to :meth:`Gate.conclude`, which classifies, updates the state,
picks the behaviour and policy, applies the episodic overlay and decides whether the message depends
on earlier turns. :func:`decide` is the same gate in one call, for callers that hold every input.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from bara.decide.behavior import BehaviorDecision, decide_behavior
from bara.decide.policy import PolicyDecision, apply_episodic, capitalised_words, resolve_policy
from bara.settings import Settings
from bara.types import Utterance, evolve
from bara.understand.features import ContextFeatures, compute_features, topic_similarity
from bara.understand.intent import IntentResult, apply_rules, classify_intent, classify_ruled
from bara.understand.prototypes import PrototypeIndex
from bara.understand.state import ConversationState, update_state
from bara.understand.topic import TopicDecision, topic_decision

#: Intents whose turn may search: a rule naming any other intent settles the turn without a vector.
SEARCHING_INTENTS = frozenset({"knowledge_base", "continuation", "general"})


@dataclass(frozen=True)
class GateResult:
    """Everything the gate concluded about one turn; ``new_state`` is what to persist."""

    intent: IntentResult
    features: ContextFeatures
    behavior: BehaviorDecision
    policy: PolicyDecision
    new_state: ConversationState
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    """What the gate reads of the conversation so far: its recent messages, its state (None: a new
    conversation) and the user's profile."""

    history: tuple[Utterance, ...] = ()
    state: ConversationState | None = None
    profile: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GateDraft:
    """The gate's first read of a message: features without vectors and what the rules found."""

    message: str
    history: tuple[Utterance, ...]
    state: ConversationState | None
    profile: Mapping[str, str]
    features: ContextFeatures
    ruled: IntentResult | None  # None: no rule fired, the prototypes decide once the vector exists

    @property
    def may_search(self) -> bool:
        """Whether the turn can reach a search: no rule fired, or the rule's intent searches."""
        return self.ruled is None or self.ruled.intent in SEARCHING_INTENTS

    @property
    def capitalised(self) -> tuple[str, ...]:
        """The message's capitalised words: the only stored names the episodic overlay may match."""
        return tuple(capitalised_words(self.message))


@dataclass(frozen=True)
class GateDecision:
    """The concluded gate (``result``, episodic overlay included), whether the message depends on
    earlier turns (``topic``), and every reason code in the order a turn records them."""

    result: GateResult
    topic: TopicDecision
    reasons: tuple[str, ...]


class Gate:
    """The gate of one assistant: its settings and intent prototypes (None: rules and defaults only)."""

    def __init__(self, settings: Settings, prototypes: PrototypeIndex | None = None):
        self.settings, self.prototypes = settings, prototypes

    def read(self, message: str, conversation: Conversation) -> GateDraft:
        """Features (no vectors) and the named rules for ``message`` after ``conversation``."""
        features = compute_features(message, conversation.history, conversation.profile, settings=self.settings)
        return GateDraft(message, conversation.history, conversation.state, conversation.profile, features,
                         apply_rules(features, self.settings))

    def conclude(self, draft: GateDraft, vector: np.ndarray | None, prior_topic: np.ndarray | None,
                 known_names: frozenset[str] | None, *, has_context: bool = False) -> GateDecision:
        """The decision for ``draft`` given the message's ``vector`` (None when it was not embedded),
        the topic vector before this turn (``prior_topic``; ``has_context``: whether any earlier user
        turn carries a topic) and the stored names of other conversations the message may mention
        (``known_names``; None when the episodic tier holds no other conversation: no overlay)."""
        cfg = self.settings
        history_vectors = None if prior_topic is None else [prior_topic]
        # The rules never read the vector-derived topic similarity, so the draft's features only gain it.
        features = evolve(draft.features, topic_similarity=topic_similarity(vector, history_vectors, cfg))
        intent = classify_ruled(draft.ruled, features, self.prototypes, vector, cfg)
        gate = _conclude(draft.message, draft.state, draft.profile, cfg, intent, features)
        similarity = features.topic_similarity if vector is not None and prior_topic is not None else None
        topic = topic_decision(draft.message, features, similarity, has_context, cfg)
        added: tuple[str, ...] = ()
        if known_names is not None:
            policy = apply_episodic(gate.policy, draft.message, known_names, cfg)
            if policy is not gate.policy:
                added = policy.reasons[len(gate.policy.reasons):]
                gate = replace(gate, policy=policy, reasons=gate.reasons + added)
        return GateDecision(gate, topic, gate.reasons[:len(gate.reasons) - len(added)] + (topic.reason,) + added)


def decide(message: str, history: Sequence[Utterance], state: ConversationState | None,
           profile: Mapping[str, str], settings: Settings,
           prototypes: PrototypeIndex | None = None, message_vector: np.ndarray | None = None,
           history_vectors: np.ndarray | Sequence[np.ndarray] | None = None) -> GateResult:
    """Run the whole gate for ``message`` in one call; pure, so the same inputs give the same result.

    ``state`` None means a new conversation. ``history_vectors`` (embeddings of
    earlier user messages, oldest first) are optional, like ``message_vector``.
    """
    features = compute_features(message, history, profile, message_vector, history_vectors, settings=settings)
    intent = classify_intent(message, features, prototypes, message_vector, settings=settings)
    return _conclude(message, state, profile, settings, intent, features)


def _conclude(message: str, state: ConversationState | None, profile: Mapping[str, str], settings: Settings,
              intent: IntentResult, features: ContextFeatures) -> GateResult:
    new_state = update_state(state, message, intent, features, settings)
    behavior = decide_behavior(intent, features, new_state, settings)
    policy = resolve_policy(intent, features, behavior, settings, profile,
                            repeated=new_state.repetition_count >= 1)
    reasons = (f"intent:{intent.intent}", f"intent_source:{intent.source}") + \
        behavior.reasons + policy.reasons
    return GateResult(intent, features, behavior, policy, new_state, tuple(dict.fromkeys(reasons)))
